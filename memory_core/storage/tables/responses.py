"""Which conversation each relayed response continues (``response_links``): a client of
the Responses API sends a later turn with only its new input and the id of the response
it follows (``previous_response_id``), so that id is how the turn finds its conversation
and the log's last message (``tip``) the new turns chain on to. Not derived memory: no
snapshot covers it and a rollback leaves it.

Bounded: the newest :data:`KEEP` links and none older than :data:`MAX_AGE_S` are kept.
OpenAI keeps a stored response 30 days, so a link older than that names a response the
upstream itself no longer continues; and one that is gone only costs that turn its
conversation (it is stored as a conversation of its own, as before links existed),
never a wrong one. Without a bound every answered request would add a row for good.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..db import Connection, reading
from ..values import stored_text

__all__ = ["KEEP", "MAX_AGE_S", "ResponseLink", "link", "linked"]

KEEP = 10_000
"""Links kept per store (a tenant's): the newest."""
MAX_AGE_S = 30 * 86_400.0
"""Links older than this (seconds) are dropped: OpenAI's retention of stored responses."""


@dataclass(frozen=True)
class ResponseLink:
    """A relayed response's conversation and the hash of the last message logged with
    it (``tip``)."""

    conversation_id: str
    tip: str


def link(conn: Connection, response_id: str, conversation_id: str, tip: str, now: float) -> None:
    """Record (or move) ``response_id``'s link and drop what is past the bound (caller's
    transaction)."""
    conn.execute(
        "INSERT OR REPLACE INTO response_links (response_id, conversation_id, tip, created_at)"
        " VALUES (?, ?, ?, ?)",
        (response_id, conversation_id, tip, now),
    )
    conn.execute("DELETE FROM response_links WHERE created_at < ?", (now - MAX_AGE_S,))
    newest = conn.last_insert_rowid()  # the highest: each insert takes max(rowid) + 1
    conn.execute("DELETE FROM response_links WHERE rowid <= ?", (newest - KEEP,))


def linked(conn: Connection, response_id: str, now: float) -> ResponseLink | None:
    """``response_id``'s link, or None (never recorded, or past :data:`MAX_AGE_S`)."""
    with reading("cannot read response links"):
        row = conn.execute(
            "SELECT conversation_id, tip FROM response_links"
            " WHERE response_id = ? AND created_at >= ?",
            (response_id, now - MAX_AGE_S),
        ).fetchone()
    return None if row is None else ResponseLink(stored_text(row[0]), stored_text(row[1]))
