"""Node kinds and edge types as small integers, the vocabulary of the flattened graph.

The CSR arrays store kinds as ``int8`` and edge types as ``int16``; these enums name the
values the rest of memory_core agrees on (DESIGN.md §5). The graph engine itself only needs
the integers: traversal rules and area scoring look them up, never the names.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["MAX_EDGE_TYPES", "EdgeType", "NodeKind"]

MAX_EDGE_TYPES = 256
"""Edge types are integers in ``[0, MAX_EDGE_TYPES)`` so traversal tables stay tiny."""


class NodeKind(IntEnum):
    """What a node of the flattened graph stands for."""

    FRAGMENT = 0
    CONTEXT = 1
    ENTITY = 2
    CONCEPT = 3
    SESSION = 4
    TIME = 5


class EdgeType(IntEnum):
    """Which SQLite row an edge comes from, with its stored direction (source -> target)."""

    MENTIONS = 0  # fragment -> entity (a mention row)
    IN_CONTEXT = 1  # fragment -> context
    RELATION = 2  # subject entity -> object entity (a relation row)
    NEXT = 3  # fragment -> following fragment
    ANSWERS = 4  # fragment -> fragment it answers
    CORRECTS = 5  # fragment -> fragment it corrects
    DEPENDS_ON = 6  # fragment -> fragment it depends on
    IN_SESSION = 7  # fragment -> session node
    AT_TIME = 8  # fragment -> time node
    IS_A = 9  # entity -> concept
    USES_TERM = 10  # fragment -> word (a content word the fragment uses)
    RELATED_CONTEXT = 11  # context -> context (a link a consolidation cycle drew)
