"""What reconstruction reads beside the fragments: their relations, the mutation records
that tie a change or a conflict together, and the ``corrects`` links between fragments.

Every function reads at most a bounded number of rows (``limit``), whatever the store
holds: a fragment that states a thousand claims, or a subject disputed a thousand times,
costs a lookup no more than a handful. Co-occurrence relations (the bulk of the table,
structural, never rendered) are left out in SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..db import JSON_IN, Connection, json_array, reading
from .forgets import FORGOTTEN_LOGS

__all__ = [
    "CHANGE_LINK",
    "TOPIC_LINK",
    "TURN_ORDER_LINK",
    "RelationRow",
    "corrections",
    "disputed_with",
    "relations_by_id",
    "relations_of_fragments",
    "superseding",
]

CHANGE_LINK = "links:relations:change"
"""The interpretation (before its ``@version``) of the ``corrects`` links that formation
adds when a claim changes a relation stated in another fragment."""
TOPIC_LINK = "links:topic:correction"
"""... and of those it adds when a turn that opens as a correction follows, in another
conversation, the same speaker's latest turn on the same topic (context)."""
TURN_ORDER_LINK = "links:structural:turn-order"
"""... and of the turn-order links (a reply with a correction marker to the turn before)."""

_SELECT = (
    "SELECT r.id, r.subject_id, s.name, r.predicate, r.object_id,"
    " coalesce(o.name, r.object_value), r.status, r.fragment_id, m.kind, m.other_id"
    " FROM relations r JOIN entities s ON s.id = r.subject_id"
    " LEFT JOIN entities o ON o.id = r.object_id"
    " LEFT JOIN mutations m ON m.relation_id = r.id"
    " JOIN fragments f ON f.id = r.fragment_id AND f.superseded = 0"
    f" AND f.log_id NOT IN {FORGOTTEN_LOGS}"
)
_NOT_STRUCTURAL = " AND r.predicate <> 'co_occurs_with'"


@dataclass(frozen=True, slots=True)
class RelationRow:
    """A relation with its names, status and mutation record (``kind``/``other``: the
    mutation's kind and the relation it reaffirms, replaces or contradicts)."""

    id: int
    subject_id: int
    subject: str
    predicate: str
    object_id: int | None
    object: str
    status: str
    fragment_id: int
    kind: str | None
    other: int | None


def _row(r: tuple[object, ...]) -> RelationRow:
    def num(value: object) -> int | None:
        return None if value is None else int(str(value))

    def text(value: object) -> str:
        return "" if value is None else str(value)

    return RelationRow(
        int(str(r[0])),
        int(str(r[1])),
        text(r[2]),
        text(r[3]),
        num(r[4]),
        text(r[5]),
        text(r[6]),
        int(str(r[7])),
        None if r[8] is None else str(r[8]),
        num(r[9]),
    )


def _rows(conn: Connection, sql: str, args: tuple[object, ...]) -> list[RelationRow]:
    with reading("cannot read relations"):
        return [_row(r) for r in conn.execute(sql, args)]


def relations_of_fragments(
    conn: Connection, fragment_ids: Sequence[int], *, limit: int
) -> list[RelationRow]:
    """Relations supported by the (live) fragments, co-occurrence aside, by id."""
    if not fragment_ids:
        return []
    sql = _SELECT + f" WHERE r.fragment_id {JSON_IN}" + _NOT_STRUCTURAL + " ORDER BY r.id LIMIT ?"
    return _rows(conn, sql, (json_array(fragment_ids), limit))


def relations_by_id(conn: Connection, relation_ids: Sequence[int]) -> list[RelationRow]:
    """The relations with these ids whose fragment is live."""
    if not relation_ids:
        return []
    return _rows(conn, _SELECT + f" WHERE r.id {JSON_IN}", (json_array(relation_ids),))


def superseding(conn: Connection, relation_ids: Sequence[int]) -> dict[int, int]:
    """For each relation a change replaced, the newest relation that replaced it."""
    if not relation_ids:
        return {}
    with reading("cannot read mutations"):
        rows = conn.execute(
            "SELECT other_id, max(relation_id) FROM mutations WHERE kind = 'change'"
            f" AND other_id {JSON_IN} GROUP BY other_id",
            (json_array(relation_ids),),
        )
        return {int(old): int(new) for old, new in rows}


def disputed_with(
    conn: Connection, subject_id: int, predicate: str, *, limit: int
) -> list[RelationRow]:
    """The disputed relations of ``subject_id`` with ``predicate`` (each side of a
    conflict), newest first."""
    sql = (
        _SELECT + " WHERE r.subject_id = ? AND r.predicate = ? AND r.status = 'disputed'"
        " ORDER BY r.id DESC LIMIT ?"
    )
    return _rows(conn, sql, (subject_id, predicate, limit))


def corrections(
    conn: Connection, fragment_ids: Sequence[int], *, limit: int
) -> list[tuple[int, int, str]]:
    """``(correcting, corrected, interpretation)`` of the ``corrects`` links whose
    corrected end is among ``fragment_ids`` (the block marks a fragment it shows with
    what corrects it), both ends live (a pair linked twice: its first link)."""
    if not fragment_ids:
        return []
    with reading("cannot read fragment links"):
        rows = conn.execute(
            "SELECT l.src, l.dst, min(l.interpretation) FROM fragment_links l"
            " JOIN fragments a ON a.id = l.src AND a.superseded = 0"
            " JOIN fragments b ON b.id = l.dst AND b.superseded = 0"
            f" AND a.log_id NOT IN {FORGOTTEN_LOGS} AND b.log_id NOT IN {FORGOTTEN_LOGS}"
            f" WHERE l.dst {JSON_IN} AND l.kind = 'corrects' AND l.src <> l.dst"
            " GROUP BY l.src, l.dst ORDER BY min(l.id) LIMIT ?",
            (json_array(fragment_ids), limit),
        )
        return [(int(src), int(dst), str(how)) for src, dst, how in rows]
