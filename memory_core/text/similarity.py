"""How one encoder's cosines map onto another's: formation's thresholds in one scale.

Formation's thresholds (a topic boundary below 0.30, a segment joining a context at 0.5, a
mention agreeing with an entity at 0.55, the Dreamer's merges at 0.45 and 0.9) were tuned on
all-MiniLM-L6-v2's cosines, which spread over about 0.03-0.58 for pairs of dialogue turns
(5th to 95th percentile on TIAGE train). multilingual-e5-small puts the same pairs at
0.79-0.93: at MiniLM's thresholds a whole conversation was one segment and one context.

So every threshold is stated on MiniLM's scale, and an encoder whose cosines lie elsewhere
declares a :class:`CosineScale`: ``minilm ~ offset + slope * cosine``, fitted by
``scripts/calibrate_encoder.py`` (the two encoders' quantiles of the same pairs, one line).
Formation and the Dreamer read each threshold through it (:meth:`CosineScale.threshold`).
MiniLM's own scale is the identity.

Invariant: the map is increasing (``slope > 0``), so every comparison keeps its direction;
a threshold past the encoder's range stays there (1.0 at most: never met but by identity).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["IDENTITY", "CosineScale"]


@dataclass(frozen=True)
class CosineScale:
    """``reference ~ offset + slope * cosine`` (see the module docstring)."""

    offset: float = 0.0
    slope: float = 1.0

    def __post_init__(self) -> None:
        if not (self.slope > 0 and math.isfinite(self.slope) and math.isfinite(self.offset)):
            raise ValueError(f"a cosine scale needs a finite positive slope, got {self.slope}")

    def threshold(self, reference: float) -> float:
        """The cosine of this encoder that means ``reference`` on MiniLM's scale (at most
        1.0)."""
        return min(1.0, (reference - self.offset) / self.slope)

    def ratio(self, ratio: float, at: float) -> float:
        """A ratio of two cosines (a share of the best one) on this scale: the ratio that a
        pair at ``at`` (MiniLM's scale) keeps. Cosines near 0.85 everywhere make every
        ratio near 1, so a ratio cannot be carried over as it is."""
        return self.threshold(ratio * at) / max(self.threshold(at), 1e-9)

    def cohesion(self, length: float) -> float:
        """The mean resultant length of unit vectors on this scale that means ``length``
        on MiniLM's: its square is (about) the mean cosine of their pairs."""
        return math.sqrt(max(0.0, min(1.0, self.threshold(length * length))))

    @property
    def identity(self) -> bool:
        return self.offset == 0.0 and self.slope == 1.0


IDENTITY = CosineScale()
