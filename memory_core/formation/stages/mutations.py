"""Storing a relation and classifying it: new, reaffirmation, change or conflict.

Every claim is its own row (parallel relations with other sources stay separate). It is
compared with the live relations of the same subject and predicate:

- the same object: a *reaffirmation* of the most recent one;
- another object, for a functional predicate (one value at a time, e.g. ``lives_in``):
  a *change* when the fragment marks it as a correction or update (the earlier relations
  become ``superseded``, still stored), otherwise a *conflict* (both sides become
  ``disputed`` and stay retrievable; no single truth is chosen silently);
- otherwise *new*.

A claim and its denial (``likes`` and ``not_likes``, see
:func:`memory_core.formation.stages.relations.opposite`) about the same subject and object are
compared first: a denial marked as an update ("I don't like jazz anymore", "I sold my
car") is a *change* that supersedes the live relations it denies, and so is a claim
marked as an update after its denial ("now I like jazz again", "I bought a car"); unmarked,
either is a *conflict* (both sides disputed). A functional claim that reverses a denial
also supersedes the other values it replaces, as any change does.

The mutation row keeps both sides: the new relation and the one it reaffirms, replaces or
contradicts (for a change, the newest relation it superseded).
"""

from __future__ import annotations

from ...storage import Connection
from ...storage.tables import relations as relation_rows
from ...storage.tables.relations import LiveRelation
from .relations import is_functional, opposite

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
    live, contrary = ([], []) if abandoned else _compared(conn, subject, predicate, obj_id, value)
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
            conn, relation_id, predicate, obj_id, value, live, contrary, correction
        )
    relation_rows.insert_mutation(conn, relation_id, kind, other, reason, now)
    return relation_id


def _compared(
    conn: Connection, subject: int, predicate: str, obj_id: int | None, value: str | None
) -> tuple[list[LiveRelation], list[LiveRelation]]:
    """What the claim is compared with: the live relations of its subject and predicate
    (for a several-valued predicate and an entity object, only what ``_classify`` needs:
    ``relations.live_for``), and those that deny it (:func:`_contrary`)."""
    if obj_id is not None and not is_functional(predicate):
        live = relation_rows.live_for(conn, subject, predicate, obj_id)
    else:
        live = relation_rows.live(conn, subject, predicate)
    return live, _contrary(conn, subject, predicate, obj_id, value)


def _same(row: LiveRelation, obj_id: int | None, value: str | None) -> bool:
    _, other_obj, other_value = row
    if obj_id is not None:
        return other_obj == obj_id
    return (
        other_value is not None and value is not None and other_value.casefold() == value.casefold()
    )


def _contrary(
    conn: Connection, subject: int, predicate: str, obj_id: int | None, value: str | None
) -> list[LiveRelation]:
    """The live relations that deny this claim (or that it denies): the same subject and
    object under the opposite predicate, newest first. For an entity object, one index
    walk answers the usual "none" (see ``relations.live_for``)."""
    denied = opposite(predicate)
    if denied is None:
        return []
    if obj_id is not None:
        newest = relation_rows.live_for(conn, subject, denied, obj_id)
        if not newest or not _same(newest[0], obj_id, value):
            return []
    return [row for row in relation_rows.live(conn, subject, denied) if _same(row, obj_id, value)]


def _classify(
    conn: Connection,
    relation_id: int,
    predicate: str,
    obj_id: int | None,
    value: str | None,
    live: list[LiveRelation],
    contrary: list[LiveRelation],
    correction: bool,
) -> tuple[str, int | None, str]:
    if contrary and correction:
        replaced = [row[0] for row in contrary]
        if is_functional(predicate):
            replaced += [row[0] for row in live if not _same(row, obj_id, value)]
        relation_rows.supersede(conn, replaced)
        return "change", max(replaced), f"the fragment reverses relation {contrary[0][0]}"
    same = [row for row in live if _same(row, obj_id, value)]
    if same:
        return "reaffirmation", same[0][0], f"restates relation {same[0][0]}"
    if contrary:
        relation_rows.dispute(conn, [row[0] for row in contrary], relation_id)
        return "conflict", contrary[0][0], f"denies relation {contrary[0][0]}; left unresolved"
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
