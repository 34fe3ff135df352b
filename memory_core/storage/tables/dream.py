"""What the Dreamer reads and writes: its state, the material formed since its last cycle,
merges of entities and contexts, links between contexts, and groups of restated relations.

Every read of new material is bounded by the rows formed since the last cycle (row ids
above the cycle's watermarks, walked by primary key), never by the size of memory, with
one exception the docstring of :func:`context_centroids` states. The writes run inside
the cycle's transaction (:mod:`memory_core.dream.cycle`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..db import JSON_IN, Connection, json_array
from .entities import VOCATIVE

__all__ = [
    "WATERMARKS",
    "AliasShare",
    "ContextProfile",
    "EntityProfile",
    "MutationRow",
    "NewRelation",
    "alias_shares",
    "context_centroids",
    "context_profiles",
    "entity_names",
    "entity_profiles",
    "group_members",
    "insert_context_link",
    "insert_merge",
    "linked_contexts",
    "maxima",
    "merge_context",
    "merge_entity",
    "new_log",
    "new_mutations",
    "new_relations",
    "regroup_pairs",
    "reinforce_pairs",
    "relation_row",
    "relations_of_entity",
    "set_status",
    "state",
    "store_state",
    "touched_contexts",
    "touched_entities",
    "update_mutation",
    "upsert_group",
]

WATERMARKS = {
    "log": "log",
    "fragments": "fragments",
    "entities": "entities",
    "aliases": "aliases",
    "mentions": "mentions",
    "relations": "relations",
    "contexts": "contexts",
    "memberships": "fragment_contexts",
}
"""Watermark name -> table: a cycle examines the rows above each (by row id)."""


@dataclass(frozen=True, slots=True)
class EntityProfile:
    """An entity as a judge sees it: names, counts, context vector sum and examples."""

    id: int
    name: str
    label: str
    is_speaker: bool
    mentions: int
    vectors: int
    vector_sum: bytes | None
    aliases: tuple[tuple[str, str, int | None, str], ...]
    """``(alias, source, fragment_id, normalized)`` of each name."""
    examples: tuple[tuple[int, str], ...]
    """``(fragment_id, text)`` of a few fragments that mention it."""


@dataclass(frozen=True, slots=True)
class AliasShare:
    """Two entities with the same normalised name."""

    a: int
    b: int
    normalized: str


@dataclass(frozen=True, slots=True)
class ContextProfile:
    """A context as a judge sees it."""

    id: int
    label: str
    size: int
    conversations: tuple[str, ...]
    examples: tuple[tuple[int, str], ...]


@dataclass(frozen=True, slots=True)
class NewRelation:
    """A relation formed since the last cycle."""

    id: int
    subject_id: int
    predicate: str
    object_id: int | None
    object_value: str | None
    fragment_id: int
    confidence: float
    status: str


MutationRow = tuple[int, str, int | None, str]
"""``(relation_id, kind, other_id, reason)`` of a mutation record."""


# -- state ------------------------------------------------------------------------------


def state(conn: Connection) -> dict[str, float]:
    """The Dreamer's state: ``cycle`` and ``last_cycle_at`` and one watermark per key of
    :data:`WATERMARKS` (0 before the first cycle)."""
    values = {str(k): float(v) for k, v in conn.execute("SELECT key, value FROM dream_state")}
    values.setdefault("cycle", 0.0)
    for key in WATERMARKS:
        values.setdefault(key, 0.0)
    return values


def store_state(conn: Connection, values: Mapping[str, float]) -> None:
    conn.executemany(
        "INSERT INTO dream_state (key, value) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        sorted(values.items()),
    )


def maxima(conn: Connection) -> dict[str, int]:
    """The largest row id of each watermarked table (a primary-key walk each)."""
    return {
        key: _one(conn, f"SELECT coalesce(max(rowid), 0) FROM {table}")
        for key, table in WATERMARKS.items()
    }


def new_log(conn: Connection, after: int) -> tuple[int, float | None]:
    """``(rows, logged_at of the first)`` of the log rows above ``after``."""
    count = _one(conn, "SELECT count(*) FROM log WHERE id > ?", after)
    first = conn.execute(
        "SELECT logged_at FROM log WHERE id > ? ORDER BY id LIMIT 1", (after,)
    ).fetchone()
    return int(count), None if first is None else float(first[0])


# -- entities ----------------------------------------------------------------------------


def touched_entities(
    conn: Connection, marks: Mapping[str, float], upto: Mapping[str, int]
) -> list[int]:
    """Entities founded, named or mentioned since the watermarks ``marks`` (up to ``upto``)."""
    rows = conn.execute(
        "SELECT id FROM entities WHERE id > ? AND id <= ?"
        " UNION SELECT entity_id FROM aliases WHERE id > ? AND id <= ?"
        " UNION SELECT entity_id FROM mentions WHERE id > ? AND id <= ?",
        (
            int(marks["entities"]),
            upto["entities"],
            int(marks["aliases"]),
            upto["aliases"],
            int(marks["mentions"]),
            upto["mentions"],
        ),
    )
    return sorted(int(row[0]) for row in rows)


def alias_shares(conn: Connection, entity_ids: Sequence[int], *, limit: int) -> list[AliasShare]:
    """Pairs ``a < b`` of distinct entities sharing a normalised name, one of them among
    ``entity_ids`` (at most ``limit``, by the index on normalised names). A name a speaker
    is only addressed by (a ``vocative`` alias) is not shared: a third person of that
    name is somebody else (:mod:`memory_core.formation.stages.addressing`)."""
    rows = conn.execute(
        "SELECT DISTINCT min(x.entity_id, y.entity_id), max(x.entity_id, y.entity_id),"
        " x.normalized FROM aliases x JOIN aliases y ON y.normalized = x.normalized"
        f" AND y.entity_id <> x.entity_id WHERE x.entity_id {JSON_IN}"
        " AND x.source <> ? AND y.source <> ? LIMIT ?",
        (json_array(entity_ids), VOCATIVE, VOCATIVE, limit),
    )
    return [AliasShare(int(a), int(b), str(n)) for a, b, n in rows]


def entity_profiles(
    conn: Connection, entity_ids: Iterable[int], *, examples: int = 3, chars: int = 200
) -> dict[int, EntityProfile]:
    """Profiles of the entities that exist among ``entity_ids``."""
    profiles: dict[int, EntityProfile] = {}
    for row in conn.execute(
        "SELECT id, name, label, is_speaker, mentions, vectors, vector_sum FROM entities"
        f" WHERE id {JSON_IN}",
        (json_array(entity_ids),),
    ):
        eid = int(row[0])
        aliases = tuple(
            (str(a), str(s), None if f is None else int(f), str(n))
            for a, s, f, n in conn.execute(
                "SELECT alias, source, fragment_id, normalized FROM aliases"
                " WHERE entity_id = ? ORDER BY id",
                (eid,),
            )
        )
        texts = tuple(
            (int(f), str(t))
            for f, t in conn.execute(
                "SELECT f.id, substr(f.text, 1, ?) FROM mentions m JOIN fragments f"
                " ON f.id = m.fragment_id WHERE m.entity_id = ? ORDER BY m.id DESC LIMIT ?",
                (chars, eid, examples),
            )
        )
        profiles[eid] = EntityProfile(
            eid, str(row[1]), str(row[2]), bool(row[3]), int(row[4]), int(row[5]),
            row[6], aliases, texts,
        )  # fmt: skip
    return profiles


def merge_entity(conn: Connection, survivor: int, merged: int) -> int:
    """Fold entity ``merged`` into ``survivor``: its names (those the survivor lacks;
    the others are the survivor's already), mentions and relations move over, the
    counts and the context vector add up, the relation groups of either are dropped
    (the cycle recomputes them: :func:`regroup_pairs`), and the merged row goes. A name
    the survivor is only addressed by (``vocative``) and the merged one bears (its label,
    an alias statement) takes the merged one's row: it is now a name of the survivor's
    own, shared like any (a vocative one is not: :func:`alias_shares`, and formation
    links a third person's "Kate" to no speaker only addressed so), where keeping the
    vocative would leave the merged speaker's own name counted as nobody's.
    Returns how many co-occurrence groups were dropped."""
    conn.execute(
        "UPDATE aliases SET alias = m.alias, lang = m.lang, source = m.source,"
        " fragment_id = m.fragment_id"
        " FROM (SELECT * FROM aliases WHERE entity_id = ? AND source <> ?) AS m"
        " WHERE aliases.entity_id = ? AND aliases.source = ?"
        " AND aliases.normalized = m.normalized",
        (merged, VOCATIVE, survivor, VOCATIVE),
    )
    conn.execute(
        "UPDATE aliases SET entity_id = ? WHERE entity_id = ? AND normalized NOT IN"
        " (SELECT normalized FROM aliases WHERE entity_id = ?)",
        (survivor, merged, survivor),
    )
    conn.execute("DELETE FROM aliases WHERE entity_id = ?", (merged,))
    conn.execute("UPDATE mentions SET entity_id = ? WHERE entity_id = ?", (survivor, merged))
    conn.execute("UPDATE relations SET subject_id = ? WHERE subject_id = ?", (survivor, merged))
    conn.execute("UPDATE relations SET object_id = ? WHERE object_id = ?", (survivor, merged))
    where = "(subject_id IN (?, ?) OR object_key IN (?, ?))"
    keys = (survivor, merged, f"e:{survivor}", f"e:{merged}")
    pairs = _one(
        conn,
        f"SELECT count(*) FROM relation_groups WHERE {where} AND predicate = 'co_occurs_with'",
        *keys,
    )
    conn.execute(f"DELETE FROM relation_groups WHERE {where}", keys)
    sums = dict(
        conn.execute(
            "SELECT id, vector_sum FROM entities WHERE id IN (?, ?)", (survivor, merged)
        )
    )
    conn.execute(
        "UPDATE entities SET mentions = entities.mentions + m.mentions,"
        " vectors = entities.vectors + m.vectors, vector_sum = ?,"
        " first_seen = min(entities.first_seen, m.first_seen),"
        " last_seen = max(entities.last_seen, m.last_seen),"
        " is_speaker = max(entities.is_speaker, m.is_speaker)"
        " FROM (SELECT * FROM entities WHERE id = ?) AS m WHERE entities.id = ?",
        (_added(sums.get(survivor), sums.get(merged)), merged, survivor),
    )
    conn.execute("DELETE FROM entities WHERE id = ?", (merged,))
    return pairs


def insert_merge(
    conn: Connection,
    *,
    kind: str,
    survivor: int,
    merged: int,
    merged_name: str,
    detail: Mapping[str, object],
    reason: str,
    cycle: int,
    now: float,
) -> None:
    """Record a merge (the merged row's names and sources, and why)."""
    conn.execute(
        "INSERT INTO merges (kind, survivor, merged, merged_name, detail, reason, cycle,"
        " created_at) VALUES (?,?,?,?,?,?,?,?)",
        (kind, survivor, merged, merged_name, json.dumps(detail, ensure_ascii=False), reason,
         cycle, now),
    )  # fmt: skip


# -- contexts ----------------------------------------------------------------------------


def touched_contexts(
    conn: Connection, marks: Mapping[str, float], upto: Mapping[str, int]
) -> list[int]:
    """Contexts founded or joined since the watermarks."""
    rows = conn.execute(
        "SELECT id FROM contexts WHERE id > ? AND id <= ?"
        " UNION SELECT context_id FROM fragment_contexts WHERE rowid > ? AND rowid <= ?",
        (int(marks["contexts"]), upto["contexts"], int(marks["memberships"]),
         upto["memberships"]),
    )  # fmt: skip
    return sorted(int(row[0]) for row in rows)


def context_centroids(conn: Connection) -> list[tuple[int, bytes, int]]:
    """``(id, centroid sum, size)`` of every context: the one read of a cycle that follows
    the number of contexts rather than what is new (topics are few beside fragments, and
    formation compares every segment with every context the same way)."""
    return [
        (int(i), bytes(c), int(n))
        for i, c, n in conn.execute("SELECT id, centroid, size FROM contexts WHERE size > 0")
    ]


_RECENT_SEGMENTS = 50


def context_profiles(
    conn: Connection, context_ids: Iterable[int], *, examples: int = 3, chars: int = 200
) -> dict[int, ContextProfile]:
    """Profiles of the contexts that exist among ``context_ids``: the conversations of
    their newest :data:`_RECENT_SEGMENTS` segments and their newest primary members as
    examples, each read by a bounded walk of an index backwards (a topic every
    conversation returns to costs what the newest rows cost, not its whole history)."""
    profiles: dict[int, ContextProfile] = {}
    for cid, label, size in conn.execute(
        f"SELECT id, label, size FROM contexts WHERE id {JSON_IN}", (json_array(context_ids),)
    ):
        recent = conn.execute(
            "SELECT conversation_id FROM segments WHERE context_id = ? ORDER BY id DESC LIMIT ?",
            (cid, _RECENT_SEGMENTS),
        )
        conversations = tuple(sorted({str(row[0]) for row in recent}))
        texts = tuple(
            (int(f), str(t))
            for f, t in conn.execute(
                "SELECT f.id, substr(f.text, 1, ?) FROM fragment_contexts fc JOIN fragments f"
                " ON f.id = fc.fragment_id WHERE fc.context_id = ? AND fc.is_primary = 1"
                " ORDER BY fc.rowid DESC LIMIT ?",
                (chars, cid, examples),
            )
        )
        profiles[int(cid)] = ContextProfile(int(cid), str(label), int(size), conversations, texts)
    return profiles


def linked_contexts(conn: Connection, context_ids: Iterable[int]) -> set[tuple[int, int]]:
    """The links ``(a, b)`` (``a < b``) that touch ``context_ids``."""
    ids = json_array(context_ids)
    rows = conn.execute(
        f"SELECT a, b FROM context_links WHERE a {JSON_IN} OR b {JSON_IN}", (ids, ids)
    )
    return {(int(a), int(b)) for a, b in rows}


def insert_context_link(
    conn: Connection, a: int, b: int, similarity: float, reason: str, cycle: int, now: float
) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO context_links (a, b, similarity, reason, cycle, created_at)"
        " VALUES (?,?,?,?,?,?)",
        (min(a, b), max(a, b), similarity, reason, cycle, now),
    )


def merge_context(conn: Connection, survivor: int, merged: int) -> None:
    """Fold context ``merged`` into ``survivor``: memberships (a fragment in both keeps
    its stronger one), segments, relations and links move over, centroid sums and sizes
    add up, time spans join, and the merged row goes."""
    conn.execute(
        "DELETE FROM fragment_contexts WHERE context_id = ? AND fragment_id IN"
        " (SELECT fragment_id FROM fragment_contexts WHERE context_id = ?)"
        " AND (is_primary, weight) < (SELECT is_primary, weight FROM fragment_contexts f2"
        " WHERE f2.context_id = ? AND f2.fragment_id = fragment_contexts.fragment_id)",
        (merged, survivor, survivor),
    )
    conn.execute(
        "DELETE FROM fragment_contexts WHERE context_id = ? AND fragment_id IN"
        " (SELECT fragment_id FROM fragment_contexts WHERE context_id = ?)",
        (survivor, merged),
    )
    conn.execute(
        "UPDATE fragment_contexts SET context_id = ? WHERE context_id = ?", (survivor, merged)
    )
    conn.execute("UPDATE segments SET context_id = ? WHERE context_id = ?", (survivor, merged))
    conn.execute("UPDATE relations SET context_id = ? WHERE context_id = ?", (survivor, merged))
    conn.execute(
        "INSERT OR IGNORE INTO context_links (a, b, similarity, reason, cycle, created_at)"
        " SELECT min(?, other), max(?, other), similarity, reason, cycle, created_at FROM"
        " (SELECT CASE WHEN a = ? THEN b ELSE a END AS other, similarity, reason, cycle,"
        " created_at FROM context_links WHERE (a = ? OR b = ?)) WHERE other <> ?",
        (survivor, survivor, merged, merged, merged, survivor),
    )
    conn.execute("DELETE FROM context_links WHERE a = ? OR b = ?", (merged, merged))
    sums = dict(
        conn.execute("SELECT id, centroid FROM contexts WHERE id IN (?, ?)", (survivor, merged))
    )
    conn.execute(
        "UPDATE contexts SET centroid = ?, size = contexts.size + m.size,"
        " first_ts = min(contexts.first_ts, m.first_ts),"
        " last_ts = max(contexts.last_ts, m.last_ts)"
        " FROM (SELECT * FROM contexts WHERE id = ?) AS m WHERE contexts.id = ?",
        (_added(sums.get(survivor), sums.get(merged)), merged, survivor),
    )
    conn.execute("DELETE FROM contexts WHERE id = ?", (merged,))


# -- relations ---------------------------------------------------------------------------


def new_relations(conn: Connection, after: int, upto: int) -> list[NewRelation]:
    """Relations with ids in ``(after, upto]``, in id order."""
    return [
        NewRelation(int(i), int(s), str(p), None if o is None else int(o),
                    None if v is None else str(v), int(f), float(c), str(st))
        for i, s, p, o, v, f, c, st in conn.execute(
            "SELECT id, subject_id, predicate, object_id, object_value, fragment_id,"
            " confidence, status FROM relations WHERE id > ? AND id <= ? ORDER BY id",
            (after, upto),
        )
    ]  # fmt: skip


def relations_of_entity(conn: Connection, entity_id: int) -> list[NewRelation]:
    """The relations ``entity_id`` is the subject of, co-occurrence aside."""
    return [
        NewRelation(int(i), int(s), str(p), None if o is None else int(o),
                    None if v is None else str(v), int(f), float(c), str(st))
        for i, s, p, o, v, f, c, st in conn.execute(
            "SELECT id, subject_id, predicate, object_id, object_value, fragment_id,"
            " confidence, status FROM relations WHERE subject_id = ?"
            " AND predicate <> 'co_occurs_with' ORDER BY id",
            (entity_id,),
        )
    ]  # fmt: skip


def group_members(
    conn: Connection, subject_id: int, predicate: str, object_id: int | None, value: str | None
) -> list[tuple[int, float, int, str]]:
    """``(id, confidence, fragment_id, status)`` of the relations of one claim (the same
    subject, predicate and object; a value compared without case)."""
    args: tuple[object, ...]
    if object_id is not None:
        sql, args = " AND object_id = ?", (object_id,)
    else:
        sql, args = " AND object_id IS NULL AND lower(object_value) = lower(?)", (value,)
    return [
        (int(i), float(c), int(f), str(s))
        for i, c, f, s in conn.execute(
            "SELECT id, confidence, fragment_id, status FROM relations"
            " WHERE subject_id = ? AND predicate = ?" + sql + " ORDER BY id",
            (subject_id, predicate, *args),
        )
    ]


def upsert_group(
    conn: Connection,
    subject_id: int,
    predicate: str,
    object_key: str,
    *,
    support: int,
    strength: float,
    cycle: int,
) -> None:
    conn.execute(
        "INSERT INTO relation_groups (subject_id, predicate, object_key, support, strength,"
        " last_cycle) VALUES (?,?,?,?,?,?) ON CONFLICT (subject_id, predicate, object_key)"
        " DO UPDATE SET support = excluded.support, strength = excluded.strength,"
        " last_cycle = excluded.last_cycle",
        (subject_id, predicate, object_key, support, strength, cycle),
    )


def reinforce_pairs(conn: Connection, pairs: Mapping[tuple[int, int], int], cycle: int) -> int:
    """Co-occurrence pairs ``(a, b) -> new rows`` seen again this cycle: their group's
    support grows and its ``last_cycle`` becomes ``cycle``; how many pairs were new."""
    new = 0
    for (a, b), count in sorted(pairs.items()):
        new += _group_missing(conn, a, f"e:{b}")
        conn.execute(
            "INSERT INTO relation_groups (subject_id, predicate, object_key, support, strength,"
            " last_cycle) VALUES (?, 'co_occurs_with', ?, ?, 0, ?)"
            " ON CONFLICT (subject_id, predicate, object_key) DO UPDATE SET"
            " support = support + excluded.support, last_cycle = excluded.last_cycle",
            (a, f"e:{b}", count, cycle),
        )
    return new


def regroup_pairs(
    conn: Connection, entity_id: int, cycle: int
) -> tuple[int, set[tuple[int, int]]]:
    """The co-occurrence groups of ``entity_id`` counted again from its relations (after a
    merge dropped them), seen at ``cycle``; how many did not exist before, and the pairs."""
    counted = [
        (int(str(a)), int(str(b)), int(str(n)))
        for a, b, n in conn.execute(
            "SELECT subject_id, object_id, count(*) FROM relations WHERE predicate ="
            " 'co_occurs_with' AND object_id IS NOT NULL AND subject_id <> object_id"
            " AND (subject_id = ? OR object_id = ?) GROUP BY subject_id, object_id",
            (entity_id, entity_id),
        )
    ]
    created = 0
    for a, b, n in counted:
        created += _group_missing(conn, a, f"e:{b}")
        conn.execute(
            "INSERT INTO relation_groups (subject_id, predicate, object_key, support,"
            " strength, last_cycle) VALUES (?, 'co_occurs_with', ?, ?, 0, ?)"
            " ON CONFLICT (subject_id, predicate, object_key) DO UPDATE SET"
            " support = excluded.support, last_cycle = excluded.last_cycle",
            (a, f"e:{b}", n, cycle),
        )
    return created, {(a, b) for a, b, _ in counted}


def _group_missing(conn: Connection, subject: int, object_key: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM relation_groups WHERE subject_id = ? AND predicate ="
            " 'co_occurs_with' AND object_key = ?",
            (subject, object_key),
        ).fetchone()
        is None
    )


def relation_row(conn: Connection, relation_id: int) -> NewRelation | None:
    """One relation, or None."""
    row = conn.execute(
        "SELECT id, subject_id, predicate, object_id, object_value, fragment_id, confidence,"
        " status FROM relations WHERE id = ?",
        (relation_id,),
    ).fetchone()
    if row is None:
        return None
    i, s, p, o, v, f, c, st = row
    return NewRelation(int(i), int(s), str(p), None if o is None else int(o),
                       None if v is None else str(v), int(f), float(c), str(st))  # fmt: skip


def entity_names(conn: Connection, entity_ids: Iterable[int]) -> dict[int, str]:
    """``id -> name`` of the entities that exist among ``entity_ids``."""
    rows = conn.execute(
        f"SELECT id, name FROM entities WHERE id {JSON_IN}", (json_array(entity_ids),)
    )
    return {int(i): str(n) for i, n in rows}


def new_mutations(conn: Connection, after: int, upto: int) -> list[MutationRow]:
    """Change and conflict records of the relations with ids in ``(after, upto]``."""
    return [
        (int(r), str(k), None if o is None else int(o), str(reason))
        for r, k, o, reason in conn.execute(
            "SELECT relation_id, kind, other_id, reason FROM mutations WHERE relation_id > ?"
            " AND relation_id <= ? AND kind IN ('change', 'conflict') ORDER BY relation_id",
            (after, upto),
        )
    ]


def update_mutation(
    conn: Connection, relation_id: int, kind: str, other: int, reason: str
) -> None:
    """Restate the mutation record of ``relation_id`` (a cycle found what it is)."""
    conn.execute(
        "UPDATE mutations SET kind = ?, other_id = ?, reason = ? WHERE relation_id = ?",
        (kind, other, reason, relation_id),
    )


def set_status(conn: Connection, relation_ids: Iterable[int], status: str) -> None:
    conn.execute(
        f"UPDATE relations SET status = ? WHERE id {JSON_IN}", (status, json_array(relation_ids))
    )


def _added(first: object, second: object) -> bytes | None:
    """The sum of two float32 vector blobs (either may be missing; lengths must agree)."""
    if not isinstance(first, bytes | memoryview):
        return bytes(second) if isinstance(second, bytes | memoryview) else None
    if not isinstance(second, bytes | memoryview) or len(second) != len(first):
        return bytes(first)
    total = np.frombuffer(first, "<f4") + np.frombuffer(second, "<f4")
    return bytes(total.astype("<f4").tobytes())


def _one(conn: Connection, sql: str, *args: object) -> int:
    row = conn.execute(sql, args).fetchone()
    return 0 if row is None or row[0] is None else int(row[0])
