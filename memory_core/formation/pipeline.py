"""Formation, first version: drain the durable queue into fragments, FTS and names.

Each queued log row becomes one fragment (a turn) with its timestamp and provenance,
indexed in FTS5, and the names it mentions are counted. A row is removed from the queue
in the same transaction that stores what was derived from it, so nothing is processed
twice or lost; a row that fails is kept with its error and retried on the next pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from ..db import transaction
from ..errors import StorageError
from ..names import extract_names

__all__ = ["FormationResult", "process_queue"]

_MAX_ATTEMPTS = 5


@dataclass(frozen=True)
class FormationResult:
    """What one pass did: rows turned into fragments, rows that failed, names seen."""

    processed: int
    failed: int
    names: tuple[str, ...]


def process_queue(conn: apsw.Connection, *, now: float, limit: int = 1000) -> FormationResult:
    """Process up to ``limit`` queued log rows, oldest first."""
    rows = list(
        conn.execute(
            "SELECT log.id, log.conversation_id, log.role, log.name, log.text, log.ts,"
            " EXISTS (SELECT 1 FROM superseded s WHERE s.log_id = log.id)"
            " FROM queue JOIN log ON log.id = queue.log_id"
            " WHERE queue.attempts < ? ORDER BY queue.log_id LIMIT ?",
            (_MAX_ATTEMPTS, limit),
        )
    )
    processed = failed = 0
    names: list[str] = []
    for row in rows:
        try:
            with transaction(conn):
                names.extend(_form(conn, row, now))
                conn.execute("DELETE FROM queue WHERE log_id = ?", (row[0],))
            processed += 1
        except StorageError as exc:
            failed += 1
            with transaction(conn):
                conn.execute(
                    "UPDATE queue SET attempts = attempts + 1, last_error = ? WHERE log_id = ?",
                    (str(exc), row[0]),
                )
    return FormationResult(processed, failed, tuple(dict.fromkeys(names)))


def _form(conn: apsw.Connection, row: tuple[object, ...], now: float) -> list[str]:
    log_id, conv, role, name, text, ts, superseded = row
    text = str(text).strip()
    if not text:
        return []
    conn.execute(
        "INSERT INTO fragments (log_id, conversation_id, role, speaker, text, canonical, ts,"
        " superseded, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
        (log_id, conv, role, name, text, text, ts, int(bool(superseded)), now),
    )
    fragment_id = conn.last_insert_rowid()
    conn.execute(
        "INSERT INTO fragments_fts (rowid, speaker, canonical) VALUES (?, ?, ?)",
        (fragment_id, name, text),
    )
    found = extract_names(text)
    for entity in found:
        conn.execute(
            "INSERT INTO entities (name, mentions, first_seen, last_seen) VALUES (?, 1, ?, ?)"
            " ON CONFLICT(name) DO UPDATE"
            " SET mentions = mentions + 1, last_seen = excluded.last_seen",
            (entity, ts, ts),
        )
    return found
