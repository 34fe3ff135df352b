"""Contexts: topics that span sessions and conversations.

A segment (a run of turns on one topic in one conversation) joins the existing context
whose centroid is most similar to it, if that similarity reaches ``join``; otherwise it
founds a new context. So a topic resumed hours or conversations later lands in the same
context. A fragment also joins, as a secondary member, any other context it is at least
``secondary`` similar to, and nearly as similar as to its own (a turn that touches two
topics belongs to both).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..config import ContextConfig
from ..interfaces import Vectors

__all__ = ["ContextCache", "ContextState"]


@dataclass
class ContextState:
    """A context's running centroid (sum of member vectors), size and time span.

    ``vector_sum`` changes only through :meth:`absorb`, which drops the cached unit
    centroid: every segment and fragment of a pass is compared with every context, and
    renormalising each centroid per comparison was a quarter of a pass at 100k fragments.
    """

    id: int
    label: str
    vector_sum: Vectors
    size: int
    first_ts: float
    last_ts: float
    dirty: bool = False
    _unit: Vectors | None = field(default=None, repr=False, compare=False)

    @property
    def centroid(self) -> Vectors:
        if self._unit is None:
            norm = float(np.linalg.norm(self.vector_sum))
            self._unit = (
                (self.vector_sum / norm).astype(np.float32) if norm > 1e-9 else self.vector_sum
            )
        return self._unit

    def absorb(self, vector: Vectors, ts: float) -> None:
        self.vector_sum = self.vector_sum + vector
        self._unit = None
        self.size += 1
        self.first_ts, self.last_ts = min(self.first_ts, ts), max(self.last_ts, ts)
        self.dirty = True


@dataclass
class ContextCache:
    """All contexts in memory, with a matrix of centroids for one-shot similarity."""

    contexts: dict[int, ContextState] = field(default_factory=dict)

    def similarities(self, vector: Vectors) -> list[tuple[float, int]]:
        """(similarity, context id) for every context, best first."""
        if not self.contexts:
            return []
        ids = list(self.contexts)
        matrix = np.stack([self.contexts[i].centroid for i in ids])
        sims = matrix @ vector
        return sorted(((float(s), i) for s, i in zip(sims, ids, strict=True)), reverse=True)

    def best_for_segment(self, vector: Vectors, config: ContextConfig) -> tuple[int | None, float]:
        """The context a new segment with mean ``vector`` joins (None: found one)."""
        ranked = self.similarities(vector)
        if ranked and ranked[0][0] >= config.join:
            return ranked[0][1], ranked[0][0]
        return None, ranked[0][0] if ranked else 0.0

    def secondary(
        self, vector: Vectors, primary: int, own: float | None, config: ContextConfig
    ) -> list[tuple[int, float]]:
        """Other contexts a fragment also belongs to, most similar first.

        A context qualifies when the fragment is at least ``secondary`` similar to it and
        nearly as similar (``secondary_ratio``) as to its own context (``own``; for a
        fragment that founded its context, as to the best other one): a turn that is
        about two topics, not a turn vaguely like many.
        """
        others = [(sim, cid) for sim, cid in self.similarities(vector) if cid != primary]
        reference = own if own is not None else (others[0][0] if others else 1.0)
        floor = max(config.secondary, config.secondary_ratio * reference)
        extra = [(cid, sim) for sim, cid in others if sim >= floor]
        return extra[: max(config.max_contexts_per_fragment - 1, 0)]
