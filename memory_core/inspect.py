"""Read-only views of what formation built, for people: entities, contexts, relations.

Each function returns plain JSON-ready dictionaries with the sources that support what
they show (fragment text, conversation and time), so a person can check any claim.
Whatever is stored, the output is strict JSON: a time that is not a sane timestamp reads
as None (:func:`.log.stored_timestamp`), and so does any other non-finite number.
"""

from __future__ import annotations

import math
from typing import Any, cast

import apsw

from .errors import StorageError
from .formation.linking import normalise_name
from .log import stored_timestamp

__all__ = ["list_contexts", "list_entities", "list_relations"]

_TIMES = frozenset({"ts", "first_ts", "last_ts", "first_seen", "last_seen", "created_at"})


def _value(name: str, value: Any) -> Any:
    if name in _TIMES:
        return stored_timestamp(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _rows(conn: apsw.Connection, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    try:
        cursor = conn.execute(sql, args)
        names = [d[0] for d in cursor.getdescription()] if cursor else []
        return [
            {name: _value(name, value) for name, value in zip(names, row, strict=True)}
            for row in cursor
        ]
    except apsw.ExecutionCompleteError:
        return []
    except apsw.Error as exc:
        raise StorageError(f"inspection query failed: {exc}") from exc


def list_entities(
    conn: apsw.Connection, *, limit: int = 100, name: str | None = None
) -> list[dict[str, Any]]:
    """Entities by number of mentions, with their aliases (and languages)."""
    where, args = "", cast(tuple[str, ...], ())
    if name:
        where = " WHERE e.id IN (SELECT entity_id FROM aliases WHERE normalized = ?)"
        args = (normalise_name(name),)
    entities = _rows(
        conn,
        "SELECT e.id, e.name, e.label, e.is_speaker, e.mentions, e.first_seen, e.last_seen,"
        " e.interpretation FROM entities e" + where + " ORDER BY e.mentions DESC, e.id LIMIT ?",
        (*args, limit),
    )
    for entity in entities:
        entity["is_speaker"] = bool(entity["is_speaker"])
        entity["aliases"] = _rows(
            conn,
            "SELECT alias, lang, source FROM aliases WHERE entity_id = ? ORDER BY id",
            (entity["id"],),
        )
        entity["contexts"] = _rows(
            conn,
            "SELECT fc.context_id AS id, c.label, count(*) AS mentions FROM mentions m"
            " JOIN fragment_contexts fc ON fc.fragment_id = m.fragment_id AND fc.is_primary = 1"
            " JOIN contexts c ON c.id = fc.context_id WHERE m.entity_id = ?"
            " GROUP BY fc.context_id ORDER BY mentions DESC LIMIT 5",
            (entity["id"],),
        )
    return entities


def list_contexts(conn: apsw.Connection, *, limit: int = 100) -> list[dict[str, Any]]:
    """Contexts, largest first, with the conversations they span and sample fragments."""
    contexts = _rows(
        conn,
        "SELECT id, label, size, first_ts, last_ts, interpretation FROM contexts"
        " ORDER BY size DESC, id LIMIT ?",
        (limit,),
    )
    for context in contexts:
        context["conversations"] = [
            r["conversation_id"]
            for r in _rows(
                conn,
                "SELECT DISTINCT s.conversation_id FROM segments s WHERE s.context_id = ?"
                " ORDER BY s.id",
                (context["id"],),
            )
        ]
        context["segments"] = _rows(
            conn, "SELECT count(*) AS n FROM segments WHERE context_id = ?", (context["id"],)
        )[0]["n"]
        context["secondary_members"] = _rows(
            conn,
            "SELECT count(*) AS n FROM fragment_contexts WHERE context_id = ? AND is_primary = 0",
            (context["id"],),
        )[0]["n"]
        context["sample"] = _rows(
            conn,
            "SELECT f.id AS fragment_id, f.conversation_id, f.ts, f.speaker, f.text"
            " FROM fragment_contexts fc JOIN fragments f ON f.id = fc.fragment_id"
            " WHERE fc.context_id = ? AND fc.is_primary = 1 ORDER BY f.id LIMIT 3",
            (context["id"],),
        )
    return contexts


def list_relations(
    conn: apsw.Connection, *, entity: str | None = None, limit: int = 200
) -> list[dict[str, Any]]:
    """Relations (of one entity, as subject or object, when named), each with its source."""
    where, args = "", cast(tuple[str, ...], ())
    if entity:
        where = (
            " WHERE r.subject_id IN (SELECT entity_id FROM aliases WHERE normalized = ?)"
            " OR r.object_id IN (SELECT entity_id FROM aliases WHERE normalized = ?)"
        )
        key = normalise_name(entity)
        args = (key, key)
    relations = _rows(
        conn,
        "SELECT r.id, s.name AS subject, r.subject_id, r.predicate,"
        " coalesce(o.name, r.object_value) AS object, r.object_id, r.status, r.confidence,"
        " r.valid_from, r.interpretation, r.context_id, r.created_at,"
        " m.kind AS mutation, m.other_id AS mutation_other, m.reason AS mutation_reason,"
        " f.id AS fragment_id, f.text AS fragment_text, f.conversation_id, f.ts, f.speaker"
        " FROM relations r JOIN entities s ON s.id = r.subject_id"
        " LEFT JOIN entities o ON o.id = r.object_id"
        " JOIN fragments f ON f.id = r.fragment_id"
        " LEFT JOIN mutations m ON m.relation_id = r.id" + where + " ORDER BY r.id LIMIT ?",
        (*args, limit),
    )
    for relation in relations:
        relation["source"] = {
            k: relation.pop(k)
            for k in ("fragment_id", "fragment_text", "conversation_id", "ts", "speaker")
        }
        relation["mutation"] = {
            "kind": relation.pop("mutation"),
            "other": relation.pop("mutation_other"),
            "reason": relation.pop("mutation_reason"),
        }
    return relations
