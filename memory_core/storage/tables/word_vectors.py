"""The vector of each word memory's fragments use, for the word bridge.

A question's words meet memory's words through their vectors (:mod:`memory_core.retrieval
.bridge`): "job" finds "emprego" in a Portuguese memory. Formation encodes each content word
the first time a fragment uses it and stores it here, once per word; the memory graph reads
the rows in id order (:func:`since`), as it reads fragments.

Not derived memory: a word's vector depends on the word and the encoder only, so a rollback
or a consolidation cycle leaves the table alone (a word no fragment uses any more finds
nothing to match). Re-forming memory for another encoder deletes every row
(:func:`~.reformation.unform`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..db import JSON_IN, Connection, json_array, reading

__all__ = ["WordVectorRow", "add", "count", "known", "since"]

WordVectorRow = tuple[int, str, str, bytes]
"""``(id, word, language, float32 vector bytes)``: the language is that of the fragment
that used the word first (an ISO 639-1 code, or ``und``)."""


def known(conn: Connection, words: Collection[str]) -> set[str]:
    """Those of ``words`` that have a vector."""
    if not words:
        return set()
    with reading("cannot read word vectors"):
        return {
            str(word)
            for (word,) in conn.execute(
                f"SELECT word FROM word_vectors WHERE word {JSON_IN}", (json_array(words),)
            )
        }


def count(conn: Connection) -> int:
    """How many words have a vector."""
    with reading("cannot read word vectors"):
        row = conn.execute("SELECT count(*) FROM word_vectors").fetchone()
    return int(row[0]) if row else 0


def add(conn: Connection, rows: Sequence[tuple[str, str, bytes]], encoder: str) -> None:
    """Store ``(word, language, float32 vector bytes)`` rows made by ``encoder`` (the
    caller's transaction); a word already stored keeps its row."""
    conn.executemany(
        "INSERT OR IGNORE INTO word_vectors (word, language, encoder, vector)"
        " VALUES (?, ?, ?, ?)",
        [(word, language, encoder, vector) for word, language, vector in rows],
    )


def since(conn: Connection, after: int) -> list[WordVectorRow]:
    """Rows with an id above ``after``, in id order."""
    with reading("cannot read word vectors"):
        return [
            (int(i), str(word), str(language), bytes(vector))
            for i, word, language, vector in conn.execute(
                "SELECT id, word, language, vector FROM word_vectors WHERE id > ? ORDER BY id",
                (after,),
            )
        ]
