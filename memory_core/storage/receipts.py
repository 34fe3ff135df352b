"""Receipts: what a request that used memory was given, kept for later explanation.

Bounded in number and in age: only the newest ``keep`` receipts are kept, none older
than ``max_age_s``; saving one deletes the others in the same transaction, with one range
delete on the row id (row ids only grow, so the newest ``keep`` rows have the largest
ids) and one on the time index (``receipts_created``), each nearly free.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .db import Connection, reading, transaction

__all__ = ["load", "save"]


def save(
    conn: Connection,
    receipt_id: str,
    body: Mapping[str, Any],
    *,
    now: float,
    keep: int,
    max_age_s: float = float("inf"),
) -> None:
    """Store (or replace) a receipt as JSON, in its own transaction, keeping the newest
    ``keep`` of those saved within ``max_age_s`` of ``now``."""
    text = json.dumps(body, ensure_ascii=False, default=str)
    with transaction(conn):
        conn.execute(
            "INSERT OR REPLACE INTO receipts (id, created_at, body) VALUES (?, ?, ?)",
            (receipt_id, now, text),
        )
        newest = conn.last_insert_rowid()
        conn.execute("DELETE FROM receipts WHERE rowid <= ?", (newest - keep,))
        if max_age_s != float("inf"):
            conn.execute("DELETE FROM receipts WHERE created_at < ?", (now - max_age_s,))


def load(conn: Connection, receipt_id: str) -> dict[str, Any] | None:
    """A stored receipt, or None."""
    with reading("cannot read receipts"):
        row = conn.execute("SELECT body FROM receipts WHERE id = ?", (receipt_id,)).fetchone()
    return None if row is None else dict(json.loads(row[0]))
