"""Reciprocal-rank fusion: one ranking from several, by rank alone (scores are ignored)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

__all__ = ["RRF_K", "rrf_fuse"]

RRF_K = 60
"""The usual smoothing constant (Cormack et al., 2009)."""

T = TypeVar("T", bound=Hashable)


def rrf_fuse(
    rankings: Sequence[Sequence[T]],
    weights: Sequence[float] | None = None,
    k: int = RRF_K,
) -> list[T]:
    """Items ordered by Σ weight / (k + rank) over the rankings (rank from 1; weights 1
    by default); ties keep the order in which items were first seen."""
    weights = [1.0] * len(rankings) if weights is None else weights
    scores: dict[T, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return sorted(scores, key=lambda item: -scores[item])
