"""Traversal rules: how activation crosses each edge type, forward and in reverse.

Edges are stored once, in their SQLite direction (a mention goes fragment -> entity). A
rule gives two multipliers per edge type: ``forward`` scales the edge weight when
activation flows source -> target, ``reverse`` when it flows target -> source. A reverse
multiplier above zero is what lets a query that starts at an entity reach the fragments
that mention it. A multiplier of zero closes that direction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .errors import GraphConfigError
from .kinds import MAX_EDGE_TYPES, EdgeType

__all__ = ["DEFAULT_TRAVERSAL", "Traversal"]

Pair = tuple[float, float]


@dataclass(frozen=True, eq=False)
class Traversal:
    """Per edge type ``(forward, reverse)`` multipliers; types without a rule use ``default``."""

    rules: Mapping[int, Pair] = field(default_factory=dict)
    default: Pair = (1.0, 1.0)
    forward_table: npt.NDArray[np.float64] = field(init=False, repr=False)
    reverse_table: npt.NDArray[np.float64] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        fwd = np.full(MAX_EDGE_TYPES, _multiplier("traversal.default", self.default[0]))
        rev = np.full(MAX_EDGE_TYPES, _multiplier("traversal.default", self.default[1]))
        for edge_type, (forward, reverse) in self.rules.items():
            key = f"traversal.{edge_type}"
            if not 0 <= int(edge_type) < MAX_EDGE_TYPES:
                raise GraphConfigError(key, f"edge type outside [0, {MAX_EDGE_TYPES})")
            fwd[int(edge_type)] = _multiplier(key, forward)
            rev[int(edge_type)] = _multiplier(key, reverse)
        fwd.flags.writeable = False
        rev.flags.writeable = False
        object.__setattr__(self, "rules", dict(self.rules))
        object.__setattr__(self, "forward_table", fwd)
        object.__setattr__(self, "reverse_table", rev)

    def multipliers(self, edge_type: int) -> Pair:
        """The ``(forward, reverse)`` pair that applies to ``edge_type``."""
        return float(self.forward_table[edge_type]), float(self.reverse_table[edge_type])

    @classmethod
    def from_names(
        cls,
        rules: Mapping[str, Sequence[float]],
        default: Sequence[float] = (1.0, 1.0),
        prefix: str = "traversal",
    ) -> Traversal:
        """Rules keyed by :class:`EdgeType` names (any case), as read from configuration."""
        parsed: dict[int, Pair] = {}
        for name, pair in rules.items():
            key = f"{prefix}.{name}"
            try:
                edge_type = EdgeType[str(name).upper()]
            except KeyError:
                raise GraphConfigError(key, "unknown edge type") from None
            parsed[int(edge_type)] = _pair(key, pair)
        return cls(parsed, _pair(f"{prefix}.default", default))


def _pair(key: str, value: Sequence[float]) -> Pair:
    if isinstance(value, str | bytes) or len(value) != 2:
        raise GraphConfigError(key, "expected [forward, reverse]")
    return _multiplier(key, value[0]), _multiplier(key, value[1])


def _multiplier(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GraphConfigError(key, "multiplier must be a number")
    if not math.isfinite(value) or value < 0:
        raise GraphConfigError(key, "multiplier must be finite and >= 0")
    return float(value)


DEFAULT_TRAVERSAL = Traversal(
    {
        EdgeType.MENTIONS: (1.0, 1.0),
        EdgeType.IN_CONTEXT: (0.5, 0.5),
        EdgeType.RELATION: (1.0, 1.0),
        EdgeType.NEXT: (1.0, 1.0),
        EdgeType.ANSWERS: (2.0, 2.0),
        EdgeType.CORRECTS: (1.0, 1.0),
        EdgeType.DEPENDS_ON: (1.0, 0.5),
        EdgeType.IN_SESSION: (0.2, 0.2),
        EdgeType.AT_TIME: (0.2, 0.2),
        EdgeType.IS_A: (1.0, 0.5),
        EdgeType.USES_TERM: (1.0, 0.5),
        EdgeType.RELATED_CONTEXT: (0.5, 0.5),
    }
)
"""Named preset: mentions, relations and dialogue links (next both ways, answers doubled:
a question turn hands most of its mass to its answer) at full weight, weaker
context/session/time links. Measured on LoCoMo with the score of
:mod:`memory_core.retrieval.area`: next/answers at (0.3, 0.3)/(1, 1) gave recall@10 0.684
against 0.704 for these."""
