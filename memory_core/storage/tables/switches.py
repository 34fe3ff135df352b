"""Conversations whose user switched memory off (``/memory off``): a row each, from the
switch until it is switched on again. Not derived memory (see :mod:`.forgets`)."""

from __future__ import annotations

from ..db import Connection, reading
from ..values import stored_text

__all__ = ["off", "set_off"]


def set_off(conn: Connection, conversation_id: str, switched_off: bool, *, now: float) -> bool:
    """Switch memory off (or on) for a conversation (caller's transaction); whether that
    changed anything."""
    if switched_off:
        conn.execute(
            "INSERT OR IGNORE INTO memory_off (conversation_id, since) VALUES (?, ?)",
            (conversation_id, now),
        )
    else:
        conn.execute("DELETE FROM memory_off WHERE conversation_id = ?", (conversation_id,))
    return conn.changes() > 0


def off(conn: Connection) -> set[str]:
    """Every conversation with memory off."""
    with reading("cannot read memory switches"):
        return {stored_text(r[0]) for r in conn.execute("SELECT conversation_id FROM memory_off")}
