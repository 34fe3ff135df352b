"""Question vectors kept for formation: a question is encoded once, not twice.

Retrieval encodes the latest user message as the question; formation, moments later,
encodes the same text again as the fragment's vector. Where the encoder's question path
computes exactly what its formation path computes for one text (see
:meth:`memory_core.formation.SentenceEncoder.reuse_key`), the proxy keeps the question's
vector here, in the transaction that logs the turn, and formation takes it instead of
running the model (half of a chat exchange's encoding).

Rows are keyed by a digest of the encoder's identity and the exact text, so a vector is
only ever used for the text, and by the encoder, that produced it. Formation deletes the
rows it used and those older than :data:`KEEP_S` (a turn that was never formed, or
formed by an encoder configured differently), so the table stays small.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..db import JSON_IN, Connection, json_array, reading

__all__ = ["KEEP_S", "drop", "find", "keep"]

KEEP_S = 3600.0
"""How long a kept vector waits for formation before it is dropped unused."""


def keep(conn: Connection, rows: Sequence[tuple[str, bytes]], now: float) -> None:
    """Store ``(key, float32 vector bytes)`` rows (caller's transaction); a key already
    kept is replaced (the same text by the same encoder: the same vector)."""
    conn.executemany(
        "INSERT OR REPLACE INTO question_vectors (key, vector, created_at) VALUES (?, ?, ?)",
        [(key, vector, now) for key, vector in rows],
    )


def find(conn: Connection, keys: Collection[str]) -> dict[str, bytes]:
    """The kept vectors of those of ``keys`` that have one."""
    if not keys:
        return {}
    with reading("cannot read question vectors"):
        return {
            str(key): bytes(vector)
            for key, vector in conn.execute(
                f"SELECT key, vector FROM question_vectors WHERE key {JSON_IN}",
                (json_array(keys),),
            )
        }


def drop(conn: Connection, keys: Collection[str], older_than: float) -> None:
    """Delete the rows of ``keys`` and every row kept before ``older_than`` (caller's
    transaction)."""
    conn.execute(
        f"DELETE FROM question_vectors WHERE key {JSON_IN} OR created_at < ?",
        (json_array(keys), older_than),
    )
