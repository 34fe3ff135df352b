"""Baseline retrievers over a fixed list of documents: BM25, dense cosine, and RRF hybrid.

Each retriever indexes the documents once and returns, per query, document indices best
first. They exist to measure memory retrieval against simple, well-known alternatives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from memory_core.retrieval.fusion import rrf_fuse
from memory_core.text.embeddings import Encoder

__all__ = ["BM25Retriever", "DenseRetriever", "HybridRetriever", "Retriever", "rrf_fuse"]


class Retriever(Protocol):
    """Ranks the indexed documents for a query."""

    name: str

    def rank(self, query: str, k: int) -> list[int]: ...


class BM25Retriever:
    """BM25 (Lucene variant, k1=1.5, b=0.75) via ``bm25s``, English stopwords removed."""

    name = "bm25"

    def __init__(self, documents: Sequence[str]) -> None:
        import bm25s

        self._bm25s: Any = bm25s
        self._size = len(documents)
        self._index = bm25s.BM25()
        self._index.index(self._tokens(documents), show_progress=False)

    def _tokens(self, texts: Sequence[str]) -> Any:
        return self._bm25s.tokenize(list(texts), stopwords="en", show_progress=False)

    def rank(self, query: str, k: int) -> list[int]:
        k = min(k, self._size)
        if k == 0:
            return []
        results, scores = self._index.retrieve(self._tokens([query]), k=k, show_progress=False)
        return [int(i) for i, s in zip(results[0], scores[0], strict=True) if s > 0]


class DenseRetriever:
    """Cosine similarity of sentence embeddings (documents encoded once)."""

    name = "dense"

    def __init__(self, documents: Sequence[str], encoder: Encoder) -> None:
        self._encoder = encoder
        self._matrix = encoder.encode(list(documents))

    def rank(self, query: str, k: int) -> list[int]:
        if len(self._matrix) == 0:
            return []
        question = getattr(self._encoder, "encode_question", None)  # e5: "query: " prefix
        vector = question(query)[0] if question is not None else self._encoder.encode([query])[0]
        scores = self._matrix @ vector
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        return [int(i) for i in top[np.argsort(-scores[top], kind="stable")]]


class HybridRetriever:
    """Reciprocal-rank fusion of other retrievers' rankings (each cut at ``depth``)."""

    name = "hybrid"

    def __init__(self, parts: Sequence[Retriever], depth: int = 100) -> None:
        self._parts = tuple(parts)
        self._depth = depth

    def rank(self, query: str, k: int) -> list[int]:
        return rrf_fuse([p.rank(query, self._depth) for p in self._parts])[:k]
