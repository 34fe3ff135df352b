"""Embedding topic segmentation, the offline default segmenter.

TextTiling's block comparison and depth scores (Hearst, 1997) over sentence embeddings
(the shipped MiniLM) instead of term vectors: a boundary where the similarity between the
blocks before and after a gap dips deeply. Embeddings see that "the garden" and "my
tomatoes" are one topic where term overlap does not.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..embeddings import Encoder
from ..evaluation.segmentation import texttiling_from_vectors
from .interfaces import BackendError, Interpretation, Vectors

__all__ = ["EmbeddingSegmenter"]


class EmbeddingSegmenter:
    """Depth-score segmentation over utterance embeddings."""

    def __init__(
        self, encoder: Encoder, *, window: int = 3, smoothing: int = 1, cutoff_std: float = 0.5
    ) -> None:
        self._encoder = encoder
        self._window, self._smoothing, self._cutoff = window, smoothing, cutoff_std
        self.interpretation = Interpretation(
            "segmentation", "embedding", encoder.name, f"1-w{window}-s{smoothing}-c{cutoff_std}"
        )

    def boundaries(self, utterances: Sequence[str], vectors: Vectors | None = None) -> list[int]:
        if len(utterances) < 2:
            return []
        if vectors is None:
            vectors = self._encoder.encode(list(utterances))
        if len(vectors) != len(utterances):
            raise BackendError(f"{len(vectors)} vectors for {len(utterances)} utterances")
        return texttiling_from_vectors(
            np.asarray(vectors),
            window=self._window,
            smoothing=self._smoothing,
            cutoff_std=self._cutoff,
        )
