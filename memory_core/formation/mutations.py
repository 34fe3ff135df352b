"""Storing a relation and classifying it: new, reaffirmation, change or conflict.

Every claim is its own row (parallel relations with other sources stay separate). It is
compared with the live relations of the same subject and predicate:

- the same object: a *reaffirmation* of the most recent one;
- another object, for a functional predicate (one value at a time, e.g. ``lives_in``):
  a *change* when the fragment marks it as a correction or update (the earlier relations
  become ``superseded``, still stored), otherwise a *conflict* (both sides become
  ``disputed`` and stay retrievable; no single truth is chosen silently);
- otherwise *new*.

The mutation row keeps both sides: the new relation and the one it reaffirms, replaces or
contradicts.
"""

from __future__ import annotations

import apsw

from ..db import JSON_IN, json_array
from .relations import is_functional

__all__ = ["record_relation"]


def record_relation(
    conn: apsw.Connection,
    subject: int,
    predicate: str,
    obj_id: int | None,
    value: str | None,
    fragment_id: int,
    context_id: int | None,
    interpretation: str,
    confidence: float,
    valid_from: str | None,
    *,
    correction: bool,
    now: float,
    abandoned: bool = False,
) -> int:
    """Insert the relation and its mutation record; returns the relation id.

    A relation from a fragment of an abandoned branch is stored as ``superseded`` and
    compared with nothing: it must not change what the live branch holds.
    """
    live = list(
        conn.execute(
            "SELECT id, object_id, object_value FROM relations WHERE subject_id = ?"
            " AND predicate = ? AND status IN ('active', 'disputed') ORDER BY id DESC",
            (subject, predicate),
        )
    )
    conn.execute(
        "INSERT INTO relations (subject_id, predicate, object_id, object_value, fragment_id,"
        " context_id, interpretation, confidence, valid_from, status, created_at)"
        " VALUES (?,?,?,?,?,?,?,?,?,'active',?)",
        (
            subject,
            predicate,
            obj_id,
            value,
            fragment_id,
            context_id,
            interpretation,
            confidence,
            valid_from,
            now,
        ),
    )
    relation_id = int(conn.last_insert_rowid())
    if abandoned:
        conn.execute("UPDATE relations SET status = 'superseded' WHERE id = ?", (relation_id,))
        kind, other, reason = "new", None, "from a fragment of an abandoned branch"
    else:
        kind, other, reason = _classify(
            conn, relation_id, predicate, obj_id, value, live, correction
        )
    conn.execute(
        "INSERT INTO mutations (relation_id, kind, other_id, reason, created_at)"
        " VALUES (?,?,?,?,?)",
        (relation_id, kind, other, reason, now),
    )
    return relation_id


def _same(row: tuple[int, int | None, str | None], obj_id: int | None, value: str | None) -> bool:
    _, other_obj, other_value = row
    if obj_id is not None:
        return other_obj == obj_id
    return (
        other_value is not None and value is not None and other_value.casefold() == value.casefold()
    )


def _classify(
    conn: apsw.Connection,
    relation_id: int,
    predicate: str,
    obj_id: int | None,
    value: str | None,
    live: list[tuple[int, int | None, str | None]],
    correction: bool,
) -> tuple[str, int | None, str]:
    same = [row for row in live if _same(row, obj_id, value)]
    if same:
        return "reaffirmation", same[0][0], f"restates relation {same[0][0]}"
    if not live or not is_functional(predicate):
        return (
            "new",
            None,
            "no live relation with this subject and predicate"
            if not live
            else f"{predicate} holds several values",
        )
    previous = live[0][0]
    ids = json_array(row[0] for row in live)
    if correction:
        conn.execute(f"UPDATE relations SET status = 'superseded' WHERE id {JSON_IN}", (ids,))
        return "change", previous, f"the fragment corrects or updates relation {previous}"
    conn.execute(
        f"UPDATE relations SET status = 'disputed' WHERE id {JSON_IN} OR id = ?",
        (ids, relation_id),
    )
    return "conflict", previous, f"contradicts relation {previous}; left unresolved"
