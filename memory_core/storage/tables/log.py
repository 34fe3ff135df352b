"""The log and what hangs off it: branches, superseded rows, the formation queue and the
formation failures.

``log`` rows are never updated or deleted (SQLite triggers enforce it); what they mean is
decided in :mod:`memory_core.log.messages` (validation, chain hashes, branch settling) and in
:mod:`memory_core.formation.pipeline` (the queue's use). A queued row is retried at most
:data:`MAX_ATTEMPTS` times; after that it stays in the queue, given up, with its last
error. Lists of ids go to SQLite as one JSON parameter (:data:`.db.JSON_IN`), so the cost
of a call follows its input and never fails on its length.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..db import JSON_IN, Connection, json_array, open_plain, reading
from ..values import stored_text
from .forgets import FORGOTTEN_LOGS

__all__ = [
    "MAX_ATTEMPTS",
    "FailureRow",
    "QueuedRow",
    "children_of",
    "conversation_sizes",
    "count_attempts",
    "dequeue",
    "enqueue",
    "insert_message",
    "insert_sources",
    "live_subtree",
    "logged_turns",
    "openings",
    "path_to",
    "queued",
    "record_branch",
    "record_failures",
    "set_errors",
    "sources_of",
    "still_queued",
    "stored_ids",
    "superseded_among",
    "unsupersede",
]

MAX_ATTEMPTS = 5
"""Attempts a queued log row gets before formation gives it up."""

FailureRow = tuple[str, str, int | None, str, str | None, float]
"""``(stage, interpretation, log_id, error, raw output, created_at)`` of a formation
failure."""


@dataclass(frozen=True, slots=True)
class QueuedRow:
    """A queued log row as formation reads it (values as stored)."""

    log_id: int
    conversation_id: str
    role: str
    name: str | None
    text: object
    ts: object
    superseded: bool
    attempts: int


def stored_ids(conn: Connection, hashes: Sequence[str]) -> dict[str, int]:
    """``hash -> id`` of the log rows among ``hashes``."""
    rows = conn.execute(f"SELECT hash, id FROM log WHERE hash {JSON_IN}", (json_array(hashes),))
    return {digest: row_id for digest, row_id in rows}


def insert_message(
    conn: Connection,
    *,
    digest: str,
    parent: str | None,
    conversation_id: str,
    position: int,
    role: str,
    name: str | None,
    ext_id: str | None,
    message: str,
    text: str,
    ts: float,
    logged_at: float,
    source: str,
) -> int:
    """Append one message (``message``: its JSON) to the log; its row id."""
    conn.execute(
        "INSERT INTO log (hash, parent_hash, conversation_id, position, role, name, ext_id,"
        " message, text, ts, logged_at, source) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            digest,
            parent,
            conversation_id,
            position,
            role,
            name,
            ext_id,
            message,
            text,
            ts,
            logged_at,
            source,
        ),
    )
    return int(conn.last_insert_rowid())


def children_of(conn: Connection, parents: Sequence[str]) -> list[tuple[str, str]]:
    """``(hash, parent_hash)`` of every log row whose parent is among ``parents``."""
    return list(
        conn.execute(
            f"SELECT hash, parent_hash FROM log WHERE parent_hash {JSON_IN}",
            (json_array(parents),),
        )
    )


def superseded_among(conn: Connection, log_ids: Iterable[int]) -> list[int]:
    """Those of ``log_ids`` that are recorded as superseded."""
    return [
        row[0]
        for row in conn.execute(
            f"SELECT log_id FROM superseded WHERE log_id {JSON_IN}", (json_array(log_ids),)
        )
    ]


def unsupersede(conn: Connection, log_ids: Sequence[int]) -> None:
    """The log rows ``log_ids`` are live again (their path became the live branch)."""
    conn.execute(f"DELETE FROM superseded WHERE log_id {JSON_IN}", (json_array(log_ids),))


def live_subtree(conn: Connection, root: str) -> list[int]:
    """Ids of the log row ``root`` and its descendants not yet recorded as superseded."""
    return [
        row[0]
        for row in conn.execute(
            """
        WITH RECURSIVE sub(hash, id) AS (
            SELECT hash, id FROM log WHERE hash = ?
            UNION ALL
            SELECT log.hash, log.id FROM log JOIN sub ON log.parent_hash = sub.hash
        )
        SELECT id FROM sub WHERE id NOT IN (SELECT log_id FROM superseded)
        """,
            (root,),
        )
    ]


def path_to(conn: Connection, tip: str) -> list[str]:
    """The stored messages (as logged, JSON text) from the root of ``tip``'s chain down
    to ``tip``, in order; empty when ``tip`` is not logged. Its cost follows the path's
    length (one indexed row per message)."""
    with reading("cannot read a conversation's path"):
        rows = conn.execute(
            """
        WITH RECURSIVE up(parent, message, depth) AS (
            SELECT parent_hash, message, 0 FROM log WHERE hash = ?
            UNION ALL
            SELECT log.parent_hash, log.message, up.depth + 1
            FROM log JOIN up ON log.hash = up.parent
        )
        SELECT message FROM up ORDER BY depth DESC
        """,
            (tip,),
        ).fetchall()
    return [stored_text(row[0]) for row in rows]


def record_branch(
    conn: Connection, abandoned: str, replacement: str, now: float, log_ids: Sequence[int]
) -> None:
    """Record that ``replacement`` replaced the subtree at ``abandoned``, whose rows
    ``log_ids`` are superseded by it."""
    conn.execute(
        "INSERT INTO branches (abandoned_hash, replacement_hash, detected_at) VALUES (?,?,?)",
        (abandoned, replacement, now),
    )
    branch_id = conn.last_insert_rowid()
    conn.executemany(
        "INSERT INTO superseded (log_id, branch_id) VALUES (?, ?)",
        [(i, branch_id) for i in log_ids],
    )


def conversation_sizes(conn: Connection) -> dict[str, tuple[int, int]]:
    """``conversation_id -> (log rows, distinct hashes)`` of every conversation logged
    (for checks that each message was stored exactly once)."""
    with reading("cannot read the log"):
        return {
            conversation: (count, distinct)
            for conversation, count, distinct in conn.execute(
                "SELECT conversation_id, count(*), count(DISTINCT hash) FROM log"
                " GROUP BY conversation_id"
            )
        }


def logged_turns(path: Path) -> list[tuple[str, str, str]]:
    """``(conversation_id, role, text)`` of every log row of the database at ``path``,
    opened read-only as it is (a check of a file another process may be writing)."""
    with reading(f"cannot read the log of {path}"):
        conn = open_plain(path)
        try:
            return list(conn.execute("SELECT conversation_id, role, text FROM log"))
        finally:
            conn.close()


# -- the formation queue ------------------------------------------------------------------


def openings(conn: Connection, conversation_ids: Sequence[str], chars: int) -> dict[str, str]:
    """The first ``chars`` characters of each conversation's first user message on its
    live branch and not forgotten (conversations without one are left out): what a
    conversation is called by when its id says nothing (see
    :mod:`memory_core.text.conversations`)."""
    if not conversation_ids:
        return {}
    with reading("cannot read the log"):
        rows = conn.execute(
            "SELECT c.value, (SELECT substr(log.text, 1, ?) FROM log"
            " WHERE log.conversation_id = c.value AND log.role = 'user'"
            " AND log.id NOT IN (SELECT log_id FROM superseded)"
            f" AND log.id NOT IN {FORGOTTEN_LOGS}"
            " ORDER BY log.position, log.id LIMIT 1)"
            f" FROM json_each(?) AS c",
            (chars, json_array(list(dict.fromkeys(conversation_ids)))),
        ).fetchall()
    return {str(cid): str(text) for cid, text in rows if isinstance(text, str)}


def insert_sources(conn: Connection, log_id: int, fragment_ids: Iterable[int]) -> None:
    """Record the stored fragments the message ``log_id`` restates, best first (part of
    the log: written with the message, never changed)."""
    conn.executemany(
        "INSERT INTO log_sources (log_id, position, fragment_id) VALUES (?, ?, ?)",
        [(log_id, i, int(f)) for i, f in enumerate(dict.fromkeys(fragment_ids))],
    )


def sources_of(conn: Connection, log_ids: Sequence[int]) -> dict[int, tuple[int, ...]]:
    """The fragments each of ``log_ids`` restates, best first (only those that restate
    any)."""
    found: dict[int, list[int]] = {}
    with reading("cannot read the log's sources"):
        for log_id, fragment_id in conn.execute(
            f"SELECT log_id, fragment_id FROM log_sources WHERE log_id {JSON_IN}"
            " ORDER BY log_id, position",
            (json_array(log_ids),),
        ):
            found.setdefault(int(log_id), []).append(int(fragment_id))
    return {k: tuple(v) for k, v in found.items()}


def enqueue(conn: Connection, log_id: int, now: float) -> None:
    """Queue a log row for formation."""
    conn.execute("INSERT INTO queue (log_id, queued_at) VALUES (?, ?)", (log_id, now))


def queued(conn: Connection, limit: int) -> list[QueuedRow]:
    """The ``limit`` oldest queued rows not given up (fewer than :data:`MAX_ATTEMPTS`)."""
    with reading("cannot read the formation queue"):
        return [
            QueuedRow(lid, conv, role, name, text, ts, bool(sup), attempts)
            for lid, conv, role, name, text, ts, sup, attempts in conn.execute(
                "SELECT log.id, log.conversation_id, log.role, log.name, log.text, log.ts,"
                " EXISTS (SELECT 1 FROM superseded s WHERE s.log_id = log.id), queue.attempts"
                " FROM queue JOIN log ON log.id = queue.log_id"
                " WHERE queue.attempts < ? ORDER BY queue.log_id LIMIT ?",
                (MAX_ATTEMPTS, limit),
            )
        ]


def still_queued(conn: Connection, log_ids: Iterable[int]) -> list[int]:
    """Those of ``log_ids`` still in the queue (a rollback may have held them since, or
    another former formed them)."""
    return [
        row[0]
        for row in conn.execute(
            f"SELECT log_id FROM queue WHERE log_id {JSON_IN}", (json_array(log_ids),)
        )
    ]


def count_attempts(conn: Connection, errors: Iterable[tuple[str, int]]) -> None:
    """One more attempt for each ``(last_error, log_id)``, with that error."""
    conn.executemany(
        "UPDATE queue SET attempts = attempts + 1, last_error = ? WHERE log_id = ?", errors
    )


def set_errors(conn: Connection, errors: Iterable[tuple[str | None, int]]) -> None:
    """Set the last error of each ``(last_error, log_id)``."""
    conn.executemany("UPDATE queue SET last_error = ? WHERE log_id = ?", errors)


def dequeue(conn: Connection, log_ids: Iterable[int]) -> None:
    """Remove formed rows from the queue."""
    conn.executemany("DELETE FROM queue WHERE log_id = ?", [(i,) for i in log_ids])


def record_failures(conn: Connection, failures: Iterable[FailureRow]) -> None:
    """Record what a formation stage could not do, with the backend's raw output."""
    conn.executemany(
        "INSERT INTO formation_failures (stage, interpretation, log_id, error, raw,"
        " created_at) VALUES (?,?,?,?,?,?)",
        failures,
    )
