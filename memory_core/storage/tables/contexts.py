"""Contexts, segments and memberships: which topic each fragment belongs to.

A segment is a run of one conversation's turns on one topic; ``open_segments`` names each
conversation's current one, which the next turn extends unless segmentation cuts.
A fragment belongs to its segment's context (``is_primary = 1``) and possibly to other
contexts (secondary memberships, weighted by similarity). Centroids are raw
little-endian float32 BLOBs, kept as running sums by formation (see
:mod:`memory_core.formation.stages.contexts`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..db import Connection, reading
from .forgets import FORGOTTEN_LOGS

__all__ = [
    "ContextRow",
    "ContextSample",
    "ContextSummary",
    "MembershipRow",
    "OpenSegment",
    "add_membership",
    "all_contexts",
    "context_ids_since",
    "conversations_of",
    "extend_segment",
    "insert",
    "label_of",
    "latest_members",
    "links_since",
    "memberships_since",
    "open_segment",
    "primary_context",
    "samples",
    "secondary_members",
    "segment_count",
    "segment_tail",
    "start_segment",
    "summaries",
    "update",
]

ContextRow = tuple[int, str, bytes, int, float, float]
"""``(id, label, centroid blob, size, first_ts, last_ts)``: a context as formation loads it."""
MembershipRow = tuple[int, int, int, float]
"""``(rowid, fragment_id, context_id, weight)`` of a ``fragment_contexts`` row."""


@dataclass(frozen=True, slots=True)
class OpenSegment:
    """A conversation's current segment, its context and its last fragment."""

    segment_id: int
    context_id: int
    last_fragment: int


@dataclass(frozen=True, slots=True)
class ContextSummary:
    """A context as inspection lists it (values as stored)."""

    id: int
    label: str
    size: int
    first_ts: object
    last_ts: object
    interpretation: str


@dataclass(frozen=True, slots=True)
class ContextSample:
    """A fragment shown as an example of a context (values as stored)."""

    fragment_id: int
    conversation_id: str
    ts: object
    speaker: str | None
    text: str


def all_contexts(conn: Connection) -> list[ContextRow]:
    """Every context (formation keeps them all in memory)."""
    with reading("cannot read contexts"):
        return list(
            conn.execute("SELECT id, label, centroid, size, first_ts, last_ts FROM contexts")
        )


def insert(
    conn: Connection,
    *,
    label: str,
    centroid: bytes,
    ts: float,
    created_at: float,
    interpretation: str,
) -> int:
    """A new, empty context first and last seen at ``ts``; its id."""
    conn.execute(
        "INSERT INTO contexts (label, centroid, size, first_ts, last_ts, created_at,"
        " interpretation) VALUES (?,?,0,?,?,?,?)",
        (label, centroid, ts, ts, created_at, interpretation),
    )
    return int(conn.last_insert_rowid())


def update(
    conn: Connection, context_id: int, centroid: bytes, size: int, first_ts: float, last_ts: float
) -> None:
    """Store a context's running centroid, size and time span."""
    conn.execute(
        "UPDATE contexts SET centroid = ?, size = ?, first_ts = ?, last_ts = ? WHERE id = ?",
        (centroid, size, first_ts, last_ts, context_id),
    )


def label_of(conn: Connection, context_id: int) -> str | None:
    """A context's label, or None when there is no such context."""
    with reading("cannot read contexts"):
        row = conn.execute("SELECT label FROM contexts WHERE id = ?", (context_id,)).fetchone()
    return None if row is None else row[0]


def open_segment(conn: Connection, conversation_id: str) -> OpenSegment | None:
    """The conversation's current segment, or None before its first fragment."""
    row = conn.execute(
        "SELECT o.segment_id, s.context_id, s.last_fragment FROM open_segments o"
        " JOIN segments s ON s.id = o.segment_id WHERE o.conversation_id = ?",
        (conversation_id,),
    ).fetchone()
    return None if row is None else OpenSegment(*row)


def start_segment(
    conn: Connection,
    *,
    conversation_id: str,
    context_id: int,
    fragment_id: int,
    interpretation: str,
    created_at: float,
) -> int:
    """A new segment starting at ``fragment_id``, now the conversation's open one; its id.
    Its size counts from 0: :func:`extend_segment` adds the first fragment too."""
    conn.execute(
        "INSERT INTO segments (conversation_id, context_id, first_fragment, last_fragment,"
        " size, interpretation, created_at) VALUES (?,?,?,?,0,?,?)",
        (conversation_id, context_id, fragment_id, fragment_id, interpretation, created_at),
    )
    segment_id = int(conn.last_insert_rowid())
    conn.execute(
        "INSERT OR REPLACE INTO open_segments (conversation_id, segment_id) VALUES (?, ?)",
        (conversation_id, segment_id),
    )
    return segment_id


def extend_segment(conn: Connection, segment_id: int, fragment_id: int) -> None:
    """``fragment_id`` becomes the segment's last fragment."""
    conn.execute(
        "UPDATE segments SET last_fragment = ?, size = size + 1 WHERE id = ?",
        (fragment_id, segment_id),
    )


def add_membership(
    conn: Connection,
    fragment_id: int,
    context_id: int,
    segment_id: int | None,
    weight: float,
    primary: bool,
    interpretation: str,
) -> None:
    """The fragment belongs to the context (kept as it is when it already does)."""
    conn.execute(
        "INSERT OR IGNORE INTO fragment_contexts (fragment_id, context_id, segment_id,"
        " weight, is_primary, interpretation) VALUES (?,?,?,?,?,?)",
        (fragment_id, context_id, segment_id, weight, int(primary), interpretation),
    )


def primary_context(conn: Connection, fragment_id: int) -> int | None:
    """The context of the fragment's segment, or None."""
    row = conn.execute(
        "SELECT context_id FROM fragment_contexts WHERE fragment_id = ? AND is_primary = 1",
        (fragment_id,),
    ).fetchone()
    return None if row is None else int(row[0])


def latest_members(
    conn: Connection, context_id: int, before: int, *, limit: int
) -> list[tuple[int, str, str | None, str]]:
    """``(fragment id, conversation, speaker, canonical head)`` of the context's newest
    live members before fragment ``before``, newest first, at most ``limit`` (an index
    walk from the newest membership back: a context of any size costs ``limit`` rows)."""
    return [
        (int(fid), str(conversation), None if speaker is None else str(speaker), str(head))
        for fid, conversation, speaker, head in conn.execute(
            "SELECT f.id, f.conversation_id, f.speaker, substr(f.canonical, 1, 2000)"
            " FROM fragment_contexts fc JOIN fragments f ON f.id = fc.fragment_id"
            " WHERE fc.context_id = ? AND fc.fragment_id < ? AND f.superseded = 0"
            f" AND f.log_id NOT IN {FORGOTTEN_LOGS}"
            " ORDER BY fc.rowid DESC LIMIT ?",
            (context_id, before, limit),
        )
    ]


def segment_tail(
    conn: Connection, conversation_id: str, chars: int, limit: int
) -> list[tuple[str, bytes]]:
    """The last ``limit`` fragments of the conversation's open segment, oldest first, as
    ``(first chars of the canonical text, vector blob)``."""
    with reading("cannot read the open segment"):
        rows: list[tuple[str, bytes]] = list(
            conn.execute(
                "SELECT substr(f.canonical, 1, ?), v.vector FROM open_segments o"
                " JOIN fragment_contexts fc ON fc.segment_id = o.segment_id AND fc.is_primary = 1"
                " JOIN fragments f ON f.id = fc.fragment_id"
                " JOIN fragment_vectors v ON v.fragment_id = f.id"
                " WHERE o.conversation_id = ? ORDER BY f.id DESC LIMIT ?",
                (chars, conversation_id, limit),
            )
        )
    rows.reverse()
    return rows


def context_ids_since(conn: Connection, after: int) -> list[tuple[int]]:
    """``(id,)`` of the contexts with an id above ``after``, in id order."""
    return list(conn.execute("SELECT id FROM contexts WHERE id > ? ORDER BY id", (after,)))


def links_since(conn: Connection, after: int) -> list[tuple[int, int, int, float]]:
    """``(id, a, b, similarity)`` of the links between contexts above ``after``, in id
    order (a consolidation cycle draws them)."""
    return list(
        conn.execute(
            "SELECT id, a, b, similarity FROM context_links WHERE id > ? ORDER BY id", (after,)
        )
    )


def memberships_since(conn: Connection, after: int) -> list[MembershipRow]:
    """Memberships with a row id above ``after``, in row id order."""
    return list(
        conn.execute(
            "SELECT rowid, fragment_id, context_id, weight FROM fragment_contexts"
            " WHERE rowid > ? ORDER BY rowid",
            (after,),
        )
    )


# -- inspection (read-only views for people) ------------------------------------------------


def summaries(conn: Connection, limit: int) -> list[ContextSummary]:
    """Contexts, largest first."""
    with reading("inspection query failed"):
        return [
            ContextSummary(*row)
            for row in conn.execute(
                "SELECT id, label, size, first_ts, last_ts, interpretation FROM contexts"
                " ORDER BY size DESC, id LIMIT ?",
                (limit,),
            )
        ]


def conversations_of(conn: Connection, context_id: int) -> list[object]:
    """The conversations with a segment in the context (as stored), first segment first."""
    with reading("inspection query failed"):
        return [
            row[0]
            for row in conn.execute(
                "SELECT DISTINCT s.conversation_id FROM segments s WHERE s.context_id = ?"
                " ORDER BY s.id",
                (context_id,),
            )
        ]


def segment_count(conn: Connection, context_id: int) -> int:
    """How many segments the context has."""
    with reading("inspection query failed"):
        row = conn.execute(
            "SELECT count(*) AS n FROM segments WHERE context_id = ?", (context_id,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def secondary_members(conn: Connection, context_id: int) -> int:
    """How many fragments belong to the context without being in one of its segments."""
    with reading("inspection query failed"):
        row = conn.execute(
            "SELECT count(*) AS n FROM fragment_contexts WHERE context_id = ? AND is_primary = 0",
            (context_id,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def samples(conn: Connection, context_id: int, limit: int, chars: int) -> list[ContextSample]:
    """The context's first ``limit`` fragments (primary members, by id), the first
    ``chars`` characters of each text."""
    with reading("inspection query failed"):
        return [
            ContextSample(*row)
            for row in conn.execute(
                "SELECT f.id AS fragment_id, f.conversation_id, f.ts, f.speaker,"
                " substr(f.text, 1, ?)"
                " FROM fragment_contexts fc JOIN fragments f ON f.id = fc.fragment_id"
                " WHERE fc.context_id = ? AND fc.is_primary = 1"
                f" AND f.log_id NOT IN {FORGOTTEN_LOGS} ORDER BY f.id LIMIT ?",
                (chars, context_id, limit),
            )
        ]
