"""How the memory graph weighs a relation row once cycles have run (see
:mod:`.consolidate`): restated claims by their strength, co-occurrences by how recently
their pair was seen. Pure: the graph calls it for each relation edge it reads."""

from __future__ import annotations

from .config import DreamConfig

__all__ = ["relation_weight"]

_COOCCURS = "co_occurs_with"


def relation_weight(
    predicate: str,
    confidence: float,
    strength: float | None,
    last_cycle: int | None,
    *,
    fresh: bool,
    cycle: int,
    config: DreamConfig,
) -> float:
    """The graph weight of one relation row: a co-occurrence decays by
    ``cooccurrence_decay`` per cycle its pair was not seen (down to ``cooccurrence_floor``
    of its confidence), unless it was formed after the last cycle (``fresh``); another
    predicate weighs its claim's strength once a cycle measured one, else its confidence."""
    if predicate == _COOCCURS:
        if fresh or last_cycle is None:
            return confidence
        age = max(0, cycle - last_cycle)
        return confidence * max(config.cooccurrence_floor, config.cooccurrence_decay**age)
    return confidence if strength is None else max(confidence, strength)
