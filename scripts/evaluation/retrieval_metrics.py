"""Ranking metrics for evidence retrieval: recall@k and NDCG@k with binary relevance.

Conventions: ``ranked`` is a retriever's output, best first, possibly with repeats
(only the first occurrence counts); ``relevant`` is the set of evidence ids. A question
with no relevant ids has no defined score and must be left out by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence

__all__ = ["mean_by_category", "ndcg_at_k", "recall_at_k"]


def _top(ranked: Sequence[str], k: int) -> list[str]:
    seen: dict[str, None] = {}
    for item in ranked:
        if len(seen) == k:
            break
        seen.setdefault(item, None)
    return list(seen)


def recall_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Fraction of ``relevant`` found among the first ``k`` distinct items of ``ranked``."""
    if not relevant:
        raise ValueError("recall is undefined without relevant items")
    found = set(_top(ranked, k)) & set(relevant)
    return len(found) / len(set(relevant))


def ndcg_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Normalised discounted cumulative gain at ``k``, relevance 1 for evidence, else 0."""
    wanted = set(relevant)
    if not wanted:
        raise ValueError("NDCG is undefined without relevant items")
    dcg = sum(1 / math.log2(i + 2) for i, item in enumerate(_top(ranked, k)) if item in wanted)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(wanted))))
    return dcg / ideal


def mean_by_category(
    scores: Iterable[tuple[int, float]], headline: Collection[int] = (1, 2, 3, 4)
) -> Mapping[str, float]:
    """Means per category (keys ``"1"``..), and ``"all"`` over the ``headline`` categories.

    A category with no questions is absent; ``"all"`` is the mean over questions (not
    over category means), as LoCoMo's headline figure is.
    """
    groups: dict[int, list[float]] = {}
    for category, score in scores:
        groups.setdefault(category, []).append(score)
    result = {str(c): sum(v) / len(v) for c, v in sorted(groups.items())}
    pooled = [s for c, v in groups.items() if c in headline for s in v]
    if pooled:
        result["all"] = sum(pooled) / len(pooled)
    return result
