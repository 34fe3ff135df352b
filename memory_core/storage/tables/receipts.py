"""Receipts: what a request that used memory was given, kept for later explanation.

Bounded in number and in age: only the newest ``keep`` receipts are kept, none older
than ``max_age_s``; saving one deletes the others in the same transaction, with one range
delete on the row id (row ids only grow, so the newest ``keep`` rows have the largest
ids) and one on the time index (``receipts_created``), each nearly free.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import StorageError
from ..db import Connection, reading, transaction
from ..values import stored_text, stored_timestamp

__all__ = ["ReceiptRow", "latest_of", "load", "recent", "save"]


@dataclass(frozen=True, slots=True)
class ReceiptRow:
    """What a list shows of a receipt (:func:`recent`): read from its stored JSON, each
    value defensively (a body that is not the JSON the proxy writes reads as blanks)."""

    id: str
    created_at: float | None
    model: str
    conversation_id: str
    retrieve: bool
    reason: str
    fragments: int
    """Found by retrieval."""
    shown: int
    """Shown by the injected block (a receipt written before the word split: cited)."""
    cited: int
    """Cited by number (``[n]``) in the injected block."""
    tokens: int
    memory_error: str | None


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
    return None if row is None else _body(receipt_id, row[0])


def latest_of(conn: Connection, conversation_id: str) -> dict[str, Any] | None:
    """The newest receipt of a conversation, or None (a scan of the receipts kept: they
    are bounded in number, and this is asked by a person, not per request)."""
    with reading("cannot read receipts"):
        row = conn.execute(
            "SELECT id, body FROM receipts WHERE json_valid(body)"
            " AND json_extract(body, '$.conversation_id') = ? ORDER BY rowid DESC LIMIT 1",
            (conversation_id,),
        ).fetchone()
    return None if row is None else _body(str(row[0]), row[1])


def _body(receipt_id: str, stored: object) -> dict[str, Any]:
    """A stored body as the JSON object it should be; a body that is none (an edited or
    damaged file) is a :class:`StorageError` naming the receipt, never a decoder's error."""
    try:
        body = json.loads(stored) if isinstance(stored, str | bytes) else None
    except (ValueError, RecursionError) as exc:
        raise StorageError(f"receipt {receipt_id} is stored unreadably: {exc}") from None
    if not isinstance(body, dict):
        raise StorageError(f"receipt {receipt_id} is stored unreadably: not a JSON object")
    return body


_RECENT = """
SELECT id, created_at,
       json_extract(b, '$.model'), json_extract(b, '$.conversation_id'),
       json_extract(b, '$.decision.retrieve'), json_extract(b, '$.decision.reason'),
       json_array_length(b, '$.area.fragments'),
       (SELECT count(*) FROM json_each(b, '$.area.fragments') AS f
        WHERE CASE WHEN f.type = 'object' THEN coalesce(json_extract(f.value, '$.shown'),
                                                       json_extract(f.value, '$.cited')) END),
       json_array_length(b, '$.citations'), json_extract(b, '$.tokens'),
       json_extract(b, '$.memory_error')
FROM (SELECT rowid AS r, id, created_at,
             CASE WHEN json_valid(body) THEN body ELSE '{}' END AS b
      FROM receipts ORDER BY rowid DESC LIMIT ?)
ORDER BY r DESC
"""


def recent(conn: Connection, limit: int) -> list[ReceiptRow]:
    """The newest ``limit`` receipts, newest first (row ids only grow: see the module
    docstring), without their bodies: only what a list of them shows."""
    with reading("cannot read receipts"):
        rows = conn.execute(_RECENT, (limit,)).fetchall()
    return [_row(*row) for row in rows]


def _row(
    receipt_id: object,
    created_at: object,
    model: object,
    conversation_id: object,
    retrieve: object,
    reason: object,
    fragments: object,
    shown: object,
    cited: object,
    tokens: object,
    memory_error: object,
) -> ReceiptRow:
    return ReceiptRow(
        id=stored_text(receipt_id),
        created_at=stored_timestamp(created_at),
        model=stored_text(model),
        conversation_id=stored_text(conversation_id),
        retrieve=retrieve == 1,
        reason=stored_text(reason),
        fragments=_count(fragments),
        shown=_count(shown),
        cited=_count(cited),
        tokens=_count(tokens),
        memory_error=None if memory_error is None else stored_text(memory_error),
    )


def _count(value: object) -> int:
    """A stored count: a non-negative integer, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
