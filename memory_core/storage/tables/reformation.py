"""Which encoder made a store's vectors, and forming its memory again with another.

Every fragment vector is stored with the encoder that made it (``fragment_vectors.model``,
the encoder's interpretation label), and everything else that holds vectors (a context's
centroid, an entity's context sum, a kept question vector) was made from them. Vectors
of two encoders live in different spaces: a cosine between them means nothing. So a
store is never mixed: when the configured encoder is not the one its vectors were made
with, its derived memory is formed again from the log (:func:`unform`), or the store is
refused (the caller's choice, ``formation.encoder.on_change``).

Forming again loses nothing a person said or did: the log, the queue, receipts, forgets
(by log id, so a forgotten turn stays forgotten), switches and snapshots are not derived
memory and are kept; everything :data:`~memory_core.storage.journal.TRACKED` holds is
deleted (with the encoder's word vectors, :mod:`.word_vectors`) and the log rows it was
formed from are queued again, in one transaction. The queue is durable, so the work
resumes where it stopped after a crash or a kill, and no vector of the old encoder is
left once the transaction commits.
"""

from __future__ import annotations

from ..db import Connection
from ..journal import TRACKED

__all__ = ["encoders", "unform"]

_MAX_LISTED = 8


def encoders(conn: Connection) -> list[str]:
    """The encoders the stored fragment vectors were made with (at most a few; empty for
    a store that formed nothing). Each is one seek in the index of models (migration
    015), from the smallest to the next larger, so the time does not grow with memory:
    ``DISTINCT`` read every vector row (0.7 s cold at 100,000 fragments) and then every
    index entry (20 ms cold)."""
    rows = conn.execute(
        "WITH RECURSIVE found(model) AS ("
        " SELECT min(model) FROM fragment_vectors"
        " UNION ALL SELECT (SELECT min(model) FROM fragment_vectors WHERE model > found.model)"
        " FROM found WHERE found.model IS NOT NULL)"
        " SELECT model FROM found WHERE model IS NOT NULL LIMIT ?",
        (_MAX_LISTED,),
    ).fetchall()
    return sorted(str(model) for (model,) in rows)


def unform(conn: Connection, *, now: float) -> int:
    """Delete the derived memory and queue again every log row it was formed from (the
    caller's transaction); the number of rows now queued."""
    conn.execute("PRAGMA defer_foreign_keys = ON")
    conn.execute(
        "INSERT OR IGNORE INTO queue (log_id, queued_at)"
        " SELECT DISTINCT log_id, ? FROM fragments",
        (now,),
    )
    for table in sorted(TRACKED):
        conn.execute(f"DELETE FROM {table}")
    conn.execute("INSERT INTO fragments_fts (fragments_fts) VALUES ('delete-all')")
    conn.execute("DELETE FROM question_vectors")
    conn.execute("DELETE FROM word_vectors")
    row = conn.execute("SELECT count(*) FROM queue").fetchone()
    return int(row[0]) if row else 0
