"""Forgetting: messages a user asked memory to leave out of retrieval, reversibly.

A forget names log rows (the messages whose fragments it forgets), never fragment rows:
fragments are derived memory, made again from their messages after a rollback, and a
forgotten message must stay forgotten then. Neither table is derived memory (they are
not in :data:`.journal.TRACKED`): a rollback never brings a forgotten fragment back, nor
forgets one again. Each forget is a row of ``forgets`` (when, in which conversation,
what was asked, how many messages); while it is in force its messages are rows of
``forgotten``, which every retrieval read leaves out (:data:`FORGOTTEN_LOGS`); undoing it
deletes those rows and stamps ``undone_at``, so the record stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from ..db import JSON_IN, Connection, json_array, reading
from ..values import stored_text, stored_timestamp

__all__ = [
    "FORGOTTEN_LOGS",
    "ForgetRow",
    "canonical_of",
    "forget",
    "forgets",
    "in_force",
    "log_ids_of",
    "matching",
    "undo",
]

FORGOTTEN_LOGS = "(SELECT log_id FROM forgotten)"
"""The log rows forgotten now, for ``f.log_id NOT IN`` (SQLite reads the subquery once
per statement, into an index; with nothing forgotten that costs nothing)."""


@dataclass(frozen=True, slots=True)
class ForgetRow:
    """One forget: ``messages`` the number of log rows it named, ``undone_at`` None while
    it is in force."""

    id: int
    created_at: float | None
    conversation_id: str | None
    request: str
    messages: int
    undone_at: float | None


def forget(
    conn: Connection,
    log_ids: Sequence[int],
    *,
    request: str,
    conversation_id: str | None,
    now: float,
) -> ForgetRow:
    """Record a forget of ``log_ids`` (caller's transaction); its row."""
    unique = sorted(set(log_ids))
    conn.execute(
        "INSERT INTO forgets (created_at, conversation_id, request, messages) VALUES (?,?,?,?)",
        (now, conversation_id, request, len(unique)),
    )
    forget_id = int(conn.last_insert_rowid())
    conn.execute(
        "INSERT OR IGNORE INTO forgotten (log_id, forget_id) SELECT value, ? FROM json_each(?)",
        (forget_id, json_array(unique)),
    )
    return ForgetRow(forget_id, now, conversation_id, request, len(unique), None)


def undo(conn: Connection, forget_id: int, *, now: float) -> ForgetRow | None:
    """Undo a forget in force (caller's transaction): its messages are retrieved again
    unless another forget in force names them too. None when there is no such forget
    or it was undone already."""
    row = _row_of(conn, forget_id)
    if row is None or row.undone_at is not None:
        return None
    conn.execute("DELETE FROM forgotten WHERE forget_id = ?", (forget_id,))
    conn.execute("UPDATE forgets SET undone_at = ? WHERE id = ?", (now, forget_id))
    return ForgetRow(row.id, row.created_at, row.conversation_id, row.request, row.messages, now)


def in_force(conn: Connection) -> ForgetRow | None:
    """The newest forget still in force, or None."""
    with reading("cannot read forgets"):
        found = conn.execute(
            "SELECT id FROM forgets WHERE undone_at IS NULL ORDER BY id DESC LIMIT 1"
        ).fetchone()
    return None if found is None else _row_of(conn, int(found[0]))


def forgets(conn: Connection, *, limit: int) -> list[ForgetRow]:
    """The newest ``limit`` forgets, newest first, undone ones included."""
    with reading("cannot read forgets"):
        rows = conn.execute(_SELECT + " ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
    return [_row(*r) for r in rows]


def log_ids_of(conn: Connection, fragment_ids: Sequence[int]) -> dict[int, int]:
    """``fragment id -> log id`` of those of ``fragment_ids`` that exist."""
    with reading("cannot read fragments"):
        rows = conn.execute(
            f"SELECT id, log_id FROM fragments WHERE id {JSON_IN}", (json_array(fragment_ids),)
        ).fetchall()
    return {cast(int, fid): cast(int, log_id) for fid, log_id in rows}


def canonical_of(conn: Connection, fragment_ids: Sequence[int]) -> dict[int, str]:
    """``fragment id -> canonical text`` (what ``fragments_fts`` indexes, so what
    :func:`matching` matched) of those of ``fragment_ids`` that exist."""
    with reading("cannot read fragments"):
        rows = conn.execute(
            f"SELECT id, canonical FROM fragments WHERE id {JSON_IN}", (json_array(fragment_ids),)
        ).fetchall()
    return {cast(int, fid): stored_text(text) for fid, text in rows}


def matching(conn: Connection, terms: Sequence[str], *, limit: int) -> list[int]:
    """Ids of the live fragments, not forgotten already, whose text has every one of
    ``terms`` (as FTS5 matches them: stemmed, case and accents folded), best match
    first, at most ``limit``. Each term is quoted: no text is read as query syntax."""
    if not terms:
        return []
    match = " AND ".join('"' + t.replace('"', '""') + '"' for t in terms)
    with reading("cannot search fragments"):
        rows = conn.execute(
            "SELECT f.id FROM fragments_fts JOIN fragments f ON f.id = fragments_fts.rowid"
            " WHERE fragments_fts MATCH ? AND f.superseded = 0"
            f" AND f.log_id NOT IN {FORGOTTEN_LOGS} ORDER BY bm25(fragments_fts) LIMIT ?",
            (match, limit),
        ).fetchall()
    return [cast(int, r[0]) for r in rows]


_SELECT = "SELECT id, created_at, conversation_id, request, messages, undone_at FROM forgets"


def _row_of(conn: Connection, forget_id: int) -> ForgetRow | None:
    with reading("cannot read forgets"):
        found = conn.execute(_SELECT + " WHERE id = ?", (forget_id,)).fetchone()
    return None if found is None else _row(*found)


def _row(
    forget_id: object,
    created_at: object,
    conversation_id: object,
    request: object,
    messages: object,
    undone_at: object,
) -> ForgetRow:
    return ForgetRow(
        id=int(forget_id) if isinstance(forget_id, int) else 0,
        created_at=stored_timestamp(created_at),
        conversation_id=None if conversation_id is None else stored_text(conversation_id),
        request=stored_text(request),
        messages=messages if isinstance(messages, int) else 0,
        undone_at=None if undone_at is None else stored_timestamp(undone_at),
    )
