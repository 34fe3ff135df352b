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

from ..storage import Connection
from ..storage import relations as relation_rows
from ..storage.relations import LiveRelation
from .relations import is_functional

__all__ = ["record_relation"]


def record_relation(
    conn: Connection,
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
    if abandoned:
        live: list[LiveRelation] = []
    elif obj_id is not None and not is_functional(predicate):
        live = relation_rows.live_for(conn, subject, predicate, obj_id)  # all _classify needs
    else:
        live = relation_rows.live(conn, subject, predicate)
    relation_id = relation_rows.insert(
        conn,
        subject_id=subject,
        predicate=predicate,
        object_id=obj_id,
        object_value=value,
        fragment_id=fragment_id,
        context_id=context_id,
        interpretation=interpretation,
        confidence=confidence,
        valid_from=valid_from,
        created_at=now,
    )
    if abandoned:
        relation_rows.supersede_one(conn, relation_id)
        kind, other, reason = "new", None, "from a fragment of an abandoned branch"
    else:
        kind, other, reason = _classify(
            conn, relation_id, predicate, obj_id, value, live, correction
        )
    relation_rows.insert_mutation(conn, relation_id, kind, other, reason, now)
    return relation_id


def _same(row: LiveRelation, obj_id: int | None, value: str | None) -> bool:
    _, other_obj, other_value = row
    if obj_id is not None:
        return other_obj == obj_id
    return (
        other_value is not None and value is not None and other_value.casefold() == value.casefold()
    )


def _classify(
    conn: Connection,
    relation_id: int,
    predicate: str,
    obj_id: int | None,
    value: str | None,
    live: list[LiveRelation],
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
    ids = [row[0] for row in live]
    if correction:
        relation_rows.supersede(conn, ids)
        return "change", previous, f"the fragment corrects or updates relation {previous}"
    relation_rows.dispute(conn, ids, relation_id)
    return "conflict", previous, f"contradicts relation {previous}; left unresolved"
