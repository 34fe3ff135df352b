"""Entities, their aliases, and the mentions that link fragments to them.

Homonyms are separate entity rows with the same name; aliases (other names, other
languages, declared aliases) join names to one entity, unique per entity by their
normalised form (``normalized``: see :func:`memory_core.formation.stages.linking.normalise_name`,
which callers apply). A mention is a span of a fragment with the linker's decision.
An entity's context vector is kept as a running sum (``vector_sum`` over ``vectors``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from ..db import Connection, reading
from .forgets import FORGOTTEN_LOGS

__all__ = [
    "VOCATIVE",
    "AliasRow",
    "EntityAlias",
    "EntityContext",
    "EntityRow",
    "EntitySummary",
    "MentionRow",
    "alias_names",
    "aliases_of",
    "aliases_since",
    "all_aliases",
    "all_entities",
    "contexts_of",
    "entity_ids_since",
    "insert",
    "insert_alias",
    "insert_mention",
    "mark_speaker",
    "mention_spans",
    "mentions_by_reason",
    "mentions_since",
    "name_of",
    "named_type",
    "summaries",
    "update",
]

VOCATIVE = "vocative"
"""The source of an alias learned from how the other speaker addresses a speaker
(:mod:`memory_core.formation.stages.addressing`)."""

EntityRow = tuple[int, str, str, bytes | None, int, int, int]
"""``(id, name, label, vector_sum blob, vectors, mentions, is_speaker)``: an entity as
formation loads it (plain tuples: formation loads every entity of a store)."""
AliasRow = tuple[int, int, str, str, str]
"""``(id, entity_id, alias, source, entity name)`` of an ``aliases`` row."""
MentionRow = tuple[int, int, int, str | None]
"""``(id, fragment_id, entity_id, kind)`` of a ``mentions`` row, ``kind`` its fragment's
(``stated``, ``asked``, ``restated``; None when the fragment is gone)."""


@dataclass(frozen=True, slots=True)
class EntitySummary:
    """An entity as inspection lists it (values as stored)."""

    id: int
    name: str
    label: str
    is_speaker: int
    mentions: int
    first_seen: object
    last_seen: object
    interpretation: str


@dataclass(frozen=True, slots=True)
class EntityAlias:
    """One name of an entity, its language, where it was learned and the fragment it
    was first learned from."""

    alias: str
    lang: str | None
    source: str
    fragment_id: int | None


@dataclass(frozen=True, slots=True)
class EntityContext:
    """A context the entity is mentioned in, with how often."""

    id: int
    label: str
    mentions: int


def all_entities(conn: Connection) -> list[EntityRow]:
    """Every entity (formation keeps them all in memory)."""
    with reading("cannot read entities"):
        return list(
            conn.execute(
                "SELECT id, name, label, vector_sum, vectors, mentions, is_speaker FROM entities"
            )
        )


def all_aliases(conn: Connection) -> list[tuple[int, str, str]]:
    """``(entity_id, alias, source)`` of every alias."""
    with reading("cannot read aliases"):
        return list(conn.execute("SELECT entity_id, alias, source FROM aliases"))


def alias_names(conn: Connection) -> list[str]:
    """Every alias (the names memory knows), in row order."""
    with reading("cannot read aliases"):
        return [row[0] for row in conn.execute("SELECT alias FROM aliases")]


def name_of(conn: Connection, entity_id: int) -> str | None:
    """An entity's name, or None when there is no such entity."""
    named = named_type(conn, entity_id)
    return None if named is None else named[0]


def named_type(conn: Connection, entity_id: int) -> tuple[str, str] | None:
    """An entity's name and type label (``PER``, ``LOC``, ``ORG``, ``MISC``), or None
    when there is no such entity."""
    with reading("cannot read entities"):
        row = conn.execute(
            "SELECT name, label FROM entities WHERE id = ?", (entity_id,)
        ).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def insert(
    conn: Connection, *, name: str, label: str, ts: float, created_at: float, interpretation: str
) -> int:
    """A new entity, first and last seen at ``ts``, with no mention yet; its id."""
    conn.execute(
        "INSERT INTO entities (name, label, mentions, first_seen, last_seen, created_at,"
        " interpretation) VALUES (?,?,0,?,?,?,?)",
        (name, label, ts, ts, created_at, interpretation),
    )
    return int(conn.last_insert_rowid())


def mark_speaker(conn: Connection, entity_id: int, name: str) -> None:
    """The entity is a speaker (a person) and ``name`` its name."""
    conn.execute(
        "UPDATE entities SET name = ?, label = 'PER', is_speaker = 1 WHERE id = ?",
        (name, entity_id),
    )


def update(
    conn: Connection,
    entity_id: int,
    *,
    vector_sum: bytes | None,
    vectors: int,
    mentions: int,
    seen: float,
) -> None:
    """Store an entity's running context vector and mention count; ``seen`` moves its
    last time forward (never back)."""
    conn.execute(
        "UPDATE entities SET vector_sum = ?, vectors = ?, mentions = ?,"
        " last_seen = max(last_seen, ?) WHERE id = ?",
        (vector_sum, vectors, mentions, seen, entity_id),
    )


def insert_alias(
    conn: Connection,
    *,
    entity_id: int,
    alias: str,
    normalized: str,
    lang: str | None,
    source: str,
    fragment_id: int | None,
) -> None:
    """A name of the entity (ignored when the entity has it already, by ``normalized``)."""
    conn.execute(
        "INSERT OR IGNORE INTO aliases (entity_id, alias, normalized, lang, source,"
        " fragment_id) VALUES (?,?,?,?,?,?)",
        (entity_id, alias, normalized, lang, source, fragment_id),
    )


def insert_mention(
    conn: Connection,
    *,
    fragment_id: int,
    entity_id: int,
    start: int,
    end: int,
    surface: str,
    label: str,
    confidence: float,
    link_score: float,
    link_reason: str,
    ner: str,
    linker: str,
) -> None:
    """A span of a fragment linked to an entity, with the linker's score and reason."""
    conn.execute(
        "INSERT INTO mentions (fragment_id, entity_id, start, end, surface, label,"
        " confidence, link_score, link_reason, ner, linker) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (
            fragment_id,
            entity_id,
            start,
            end,
            surface,
            label,
            confidence,
            link_score,
            link_reason,
            ner,
            linker,
        ),
    )


def entity_ids_since(conn: Connection, after: int) -> list[tuple[int]]:
    """``(id,)`` of the entities with an id above ``after``, in id order."""
    return list(conn.execute("SELECT id FROM entities WHERE id > ? ORDER BY id", (after,)))


def mention_spans(conn: Connection, fragment_id: int) -> set[tuple[int, int]]:
    """``(start, end)`` of the fragment's mentions."""
    return {
        (int(a), int(b))
        for a, b in conn.execute(
            "SELECT start, end FROM mentions WHERE fragment_id = ?", (fragment_id,)
        )
    }


def mentions_since(conn: Connection, after: int) -> list[MentionRow]:
    """Mentions with an id above ``after``, in id order, with their fragment's kind."""
    return list(
        conn.execute(
            "SELECT m.id, m.fragment_id, m.entity_id, f.kind FROM mentions m"
            " LEFT JOIN fragments f ON f.id = m.fragment_id WHERE m.id > ? ORDER BY m.id",
            (after,),
        )
    )


def aliases_since(conn: Connection, after: int) -> list[AliasRow]:
    """Aliases with an id above ``after``, in id order, with their entity's name."""
    return list(
        conn.execute(
            "SELECT a.id, a.entity_id, a.alias, a.source, e.name FROM aliases a"
            " JOIN entities e ON e.id = a.entity_id WHERE a.id > ? ORDER BY a.id",
            (after,),
        )
    )


# -- inspection (read-only views for people) ------------------------------------------------


def summaries(conn: Connection, *, limit: int, normalized: str | None) -> list[EntitySummary]:
    """Entities by number of mentions (only those with the alias ``normalized`` if given)."""
    where, args = "", cast(tuple[str, ...], ())
    if normalized is not None:
        where = " WHERE e.id IN (SELECT entity_id FROM aliases WHERE normalized = ?)"
        args = (normalized,)
    with reading("inspection query failed"):
        return [
            EntitySummary(*row)
            for row in conn.execute(
                "SELECT e.id, e.name, e.label, e.is_speaker, e.mentions, e.first_seen,"
                " e.last_seen, e.interpretation FROM entities e"
                + where
                + " ORDER BY e.mentions DESC, e.id LIMIT ?",
                (*args, limit),
            )
        ]


def aliases_of(conn: Connection, entity_id: int) -> list[EntityAlias]:
    """The entity's names, in the order they were learned."""
    with reading("inspection query failed"):
        return [
            EntityAlias(*row)
            for row in conn.execute(
                "SELECT alias, lang, source, fragment_id FROM aliases WHERE entity_id = ?"
                " ORDER BY id",
                (entity_id,),
            )
        ]


def mentions_by_reason(
    conn: Connection, entity_id: int, reason_prefix: str, limit: int
) -> list[tuple[int, str]]:
    """``(fragment_id, surface)`` of the entity's first ``limit`` mentions whose link
    reason starts with ``reason_prefix``, in id order; a forgotten fragment's left out,
    as every listing of memory leaves it out."""
    with reading("inspection query failed"):
        return [
            (int(row[0]), str(row[1]))
            for row in conn.execute(
                "SELECT m.fragment_id, m.surface FROM mentions m JOIN fragments f"
                f" ON f.id = m.fragment_id AND f.log_id NOT IN {FORGOTTEN_LOGS}"
                " WHERE m.entity_id = ? AND substr(m.link_reason, 1, ?) = ? ORDER BY m.id LIMIT ?",
                (entity_id, len(reason_prefix), reason_prefix, limit),
            )
        ]


def contexts_of(conn: Connection, entity_id: int, limit: int) -> list[EntityContext]:
    """The ``limit`` contexts whose fragments mention the entity most."""
    with reading("inspection query failed"):
        return [
            EntityContext(*row)
            for row in conn.execute(
                "SELECT fc.context_id AS id, c.label, count(*) AS mentions FROM mentions m"
                " JOIN fragment_contexts fc ON fc.fragment_id = m.fragment_id"
                " AND fc.is_primary = 1"
                " JOIN contexts c ON c.id = fc.context_id WHERE m.entity_id = ?"
                " GROUP BY fc.context_id ORDER BY mentions DESC LIMIT ?",
                (entity_id, limit),
            )
        ]
