"""Relations and their mutation records.

A relation is typed and directed: subject entity, predicate, and either an object entity
or a value (never both), with the fragment and context that support it, the
interpretation that produced it, its confidence and optional validity. Its ``status`` is
``active``, ``superseded`` (a later change replaced it, or it comes from an abandoned
branch) or ``disputed`` (an unresolved conflict). Each relation has one mutation row:
``new``, ``reaffirmation``, ``change`` or ``conflict``, with the other relation it
concerns (see :mod:`memory_core.formation.stages.mutations`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeAlias, cast

from ..db import JSON_IN, Connection, json_array, reading
from .forgets import FORGOTTEN_LOGS

__all__ = [
    "LiveRelation",
    "RelationEdgeRow",
    "RelationView",
    "dispute",
    "edges_since",
    "insert",
    "insert_mutation",
    "label_row",
    "live",
    "live_for",
    "replaced_fragment",
    "restore_for_logs",
    "supersede",
    "supersede_for_logs",
    "supersede_one",
    "views",
]

LiveRelation = tuple[int, int | None, str | None]
"""``(id, object_id, object_value)`` of a live (active or disputed) relation."""
Stored: TypeAlias = object
"""A value as stored (a time may be anything: see :mod:`.values`)."""
RelationEdgeRow = tuple[int, int, int | None, int, float, str, float | None, int | None]
"""``(id, subject_id, object_id, fragment_id, confidence, predicate, strength, last_cycle)``:
a relation as the memory graph reads it, with its claim's group as the Dreamer measured
it (``strength``, ``last_cycle``: None before a cycle saw it)."""


@dataclass(frozen=True, slots=True)
class RelationView:
    """A relation as inspection lists it, with its mutation record and source fragment
    (values as stored; ``object`` is the object entity's name or the value)."""

    id: int
    subject: str
    subject_id: int
    predicate: str
    object: str
    object_id: int | None
    status: str
    confidence: float
    valid_from: str | None
    interpretation: str
    context_id: int | None
    created_at: Stored
    mutation: str | None
    mutation_other: int | None
    mutation_reason: str | None
    fragment_id: int
    fragment_text: str
    conversation_id: str
    ts: Stored
    speaker: str | None


def live(conn: Connection, subject_id: int, predicate: str) -> list[LiveRelation]:
    """The live relations of ``subject_id`` with ``predicate``, newest first."""
    return list(
        conn.execute(
            "SELECT id, object_id, object_value FROM relations WHERE subject_id = ?"
            " AND predicate = ? AND status IN ('active', 'disputed') ORDER BY id DESC",
            (subject_id, predicate),
        )
    )


def live_for(
    conn: Connection, subject_id: int, predicate: str, object_id: int
) -> list[LiveRelation]:
    """What classifying a new relation to entity ``object_id`` under a predicate that
    holds several values needs of :func:`live`: its newest row with that object, else its
    newest row, else nothing. Two index walks that stop at the first match: a subject
    with thousands of live relations (a name said in every conversation) is not read."""
    for extra, args in ((" AND object_id = ?", (object_id,)), ("", ())):
        row = conn.execute(
            "SELECT id, object_id, object_value FROM relations WHERE subject_id = ?"
            f" AND predicate = ? AND status IN ('active', 'disputed'){extra}"
            " ORDER BY id DESC LIMIT 1",
            (subject_id, predicate, *args),
        ).fetchone()
        if row is not None:
            return [row]
    return []


def label_row(
    conn: Connection, relation_id: int
) -> tuple[int, str, int | None, str | None, int] | None:
    """``(subject_id, predicate, object_id, object_value, fragment_id)`` of a relation."""
    with reading("cannot read relations"):
        row = conn.execute(
            "SELECT subject_id, predicate, object_id, object_value, fragment_id"
            " FROM relations WHERE id = ?",
            (relation_id,),
        ).fetchone()
    return None if row is None else (row[0], row[1], row[2], row[3], row[4])


def replaced_fragment(conn: Connection, relation_id: int) -> int | None:
    """The fragment of the relation that ``relation_id`` replaced (its mutation is a
    change), or None."""
    row = conn.execute(
        "SELECT r.fragment_id FROM mutations m JOIN relations r ON r.id = m.other_id"
        " WHERE m.relation_id = ? AND m.kind = 'change'",
        (relation_id,),
    ).fetchone()
    return None if row is None else int(row[0])


def insert(
    conn: Connection,
    *,
    subject_id: int,
    predicate: str,
    object_id: int | None,
    object_value: str | None,
    fragment_id: int,
    context_id: int | None,
    interpretation: str,
    confidence: float,
    valid_from: str | None,
    created_at: float,
) -> int:
    """A new active relation; its id."""
    conn.execute(
        "INSERT INTO relations (subject_id, predicate, object_id, object_value, fragment_id,"
        " context_id, interpretation, confidence, valid_from, status, created_at)"
        " VALUES (?,?,?,?,?,?,?,?,?,'active',?)",
        (
            subject_id,
            predicate,
            object_id,
            object_value,
            fragment_id,
            context_id,
            interpretation,
            confidence,
            valid_from,
            created_at,
        ),
    )
    return int(conn.last_insert_rowid())


def insert_mutation(
    conn: Connection,
    relation_id: int,
    kind: str,
    other_id: int | None,
    reason: str,
    created_at: float,
) -> None:
    """The mutation record of ``relation_id``: its kind and the relation it concerns."""
    conn.execute(
        "INSERT INTO mutations (relation_id, kind, other_id, reason, created_at)"
        " VALUES (?,?,?,?,?)",
        (relation_id, kind, other_id, reason, created_at),
    )


def supersede(conn: Connection, relation_ids: Iterable[int]) -> None:
    """The relations are superseded (a change replaced them)."""
    conn.execute(
        f"UPDATE relations SET status = 'superseded' WHERE id {JSON_IN}",
        (json_array(relation_ids),),
    )


def supersede_one(conn: Connection, relation_id: int) -> None:
    """The relation is superseded (it comes from a fragment of an abandoned branch)."""
    conn.execute("UPDATE relations SET status = 'superseded' WHERE id = ?", (relation_id,))


def dispute(conn: Connection, relation_ids: Iterable[int], relation_id: int) -> None:
    """The relations and ``relation_id`` are in unresolved conflict."""
    conn.execute(
        f"UPDATE relations SET status = 'disputed' WHERE id {JSON_IN} OR id = ?",
        (json_array(relation_ids), relation_id),
    )


def supersede_for_logs(conn: Connection, log_ids: Sequence[int]) -> None:
    """Every relation supported by a fragment of the log rows ``log_ids`` is superseded."""
    conn.execute(
        "UPDATE relations SET status = 'superseded'"
        f" WHERE fragment_id IN (SELECT id FROM fragments WHERE log_id {JSON_IN})",
        (json_array(log_ids),),
    )


def restore_for_logs(conn: Connection, log_ids: Sequence[int]) -> None:
    """The superseded relations supported by a fragment of the log rows ``log_ids`` are
    active again, except those a later change replaced."""
    conn.execute(
        "UPDATE relations SET status = 'active' WHERE status = 'superseded'"
        f" AND fragment_id IN (SELECT id FROM fragments WHERE log_id {JSON_IN})"
        " AND id NOT IN (SELECT other_id FROM mutations WHERE kind = 'change'"
        " AND other_id IS NOT NULL)",
        (json_array(log_ids),),
    )


def edges_since(conn: Connection, after: int) -> list[RelationEdgeRow]:
    """Relations with an id above ``after``, in id order, with their group's strength and
    last cycle (entity objects only: a value has no group the graph uses)."""
    return list(
        conn.execute(
            "SELECT r.id, r.subject_id, r.object_id, r.fragment_id, r.confidence, r.predicate,"
            " g.strength, g.last_cycle FROM relations r LEFT JOIN relation_groups g"
            " ON g.subject_id = r.subject_id AND g.predicate = r.predicate"
            " AND g.object_key = 'e:' || r.object_id WHERE r.id > ? ORDER BY r.id",
            (after,),
        )
    )


def views(
    conn: Connection, *, normalized: str | None, limit: int, chars: int
) -> list[RelationView]:
    """Relations by id (only those of an entity with the alias ``normalized``, as subject
    or object, when given), each with its source fragment (the first ``chars`` characters
    of its text) and mutation record."""
    where, args = "", cast(tuple[str, ...], ())
    if normalized is not None:
        where = (
            " WHERE r.subject_id IN (SELECT entity_id FROM aliases WHERE normalized = ?)"
            " OR r.object_id IN (SELECT entity_id FROM aliases WHERE normalized = ?)"
        )
        args = (normalized, normalized)
    with reading("inspection query failed"):
        return [
            RelationView(*row)
            for row in conn.execute(
                "SELECT r.id, s.name AS subject, r.subject_id, r.predicate,"
                " coalesce(o.name, r.object_value) AS object, r.object_id, r.status,"
                " r.confidence, r.valid_from, r.interpretation, r.context_id, r.created_at,"
                " m.kind AS mutation, m.other_id AS mutation_other,"
                " m.reason AS mutation_reason, f.id AS fragment_id,"
                " substr(f.text, 1, ?) AS fragment_text,"
                " f.conversation_id, f.ts, f.speaker"
                " FROM relations r JOIN entities s ON s.id = r.subject_id"
                " LEFT JOIN entities o ON o.id = r.object_id"
                " JOIN fragments f ON f.id = r.fragment_id"
                f" AND f.log_id NOT IN {FORGOTTEN_LOGS}"
                " LEFT JOIN mutations m ON m.relation_id = r.id" + where + " ORDER BY r.id LIMIT ?",
                (chars, *args, limit),
            )
        ]
