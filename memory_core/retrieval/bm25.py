"""Retrieval, first version: FTS5 BM25 over the live (non-superseded) fragments.

The question becomes an OR of its content words, each quoted so that no user text is
ever read as FTS5 query syntax. Fragments whose log rows are already in the request
(``exclude_hashes``) are skipped: the model sees them in the history anyway; a request
may carry any number of them.

Stored rows are read defensively (rows written before the log validated its input, or by hand): a
timestamp that is not a sane one reads as None (see
:func:`~memory_core.log.messages.stored_timestamp`), a text column holding NULL or bytes reads as
text. The FTS5 query and the reads of fragments live in :mod:`memory_core.storage.tables.fragments`.
"""

from __future__ import annotations

from collections.abc import Collection

from ..index.lexical import LexicalView
from ..storage import Connection
from ..storage.tables import fragments as _fragments
from ..storage.tables.fragments import Hit, fetch_hits
from ..text.question import Question

__all__ = [
    "Hit",
    "fetch_hits",
    "indexed_search_scores",
    "known_share",
    "search",
    "search_scores",
]


def search_scores(conn: Connection, question: Question, *, limit: int) -> list[tuple[int, float]]:
    """``(fragment id, BM25 score)`` of the ``limit`` best live fragments for ``question``
    (an OR of its terms), without their text."""
    return _fragments.search_scores(conn, list(question.terms), limit=limit)


def known_share(conn: Connection, index: LexicalView, question: Question) -> float:
    """The share of the question's content words (its coverage foci: no question word,
    function word or light verb; their FTS5 tokens) that memory's lexical index holds (1.0
    for a question without any): how far BM25 and the word foci can speak for it
    (:meth:`~.scoring.ScoringConfig.covering`). Read from the graph version's index: a
    word only in fragments formed since counts as unknown until the next version."""
    tokenize = _fragments.fts_tokenizer(conn)
    tokens = [t for focus in question.foci for t in tokenize(focus.word, True)]
    if not tokens:
        return 1.0
    return sum(t in index.terms for t in tokens) / len(tokens)


def indexed_search_scores(
    conn: Connection, index: LexicalView, question: Question, *, limit: int
) -> list[tuple[int, float]]:
    """:func:`search_scores` from a graph version's in-memory BM25
    (:mod:`memory_core.index.lexical`) and the fragments formed since that version (at most
    :data:`NEWER_ROWS` rows and :data:`NEWER_CHARS` characters, tokenized here), counted together as
    FTS5 counts them: the same scores and hits as :func:`search_scores`. Superseded and forgotten
    fragments are dropped as FTS5 search drops them (fetching four times more while too few are
    left). FTS5 itself when the graph lags by more, or when a query word is a phrase of several
    tokens to FTS5."""
    tokenize = _fragments.fts_tokenizer(conn)
    phrases = [tokenize(term, True) for term in question.terms]
    rows = _fragments.formed_after(conn, index.last_fragment_id, NEWER_ROWS + 1)
    if len(rows) > NEWER_ROWS or sum(len(r[1]) + len(r[2]) for r in rows) > NEWER_CHARS:
        return search_scores(conn, question, limit=limit)
    known = index.newer_tokens
    newer = []
    for fid, who, text in rows:
        tokens = known.get(fid)
        if tokens is None:
            tokens = known[fid] = _fragments.document_tokens(tokenize, who, text)
        newer.append((fid, tokens))
    fetch = 2 * limit + 8
    while True:
        found = index.search(phrases, fetch, newer)
        if found is None:
            return search_scores(conn, question, limit=limit)
        dropped = _fragments.hidden_ids(conn, [fid for fid, _ in found])
        kept = [(fid, score) for fid, score in found if fid not in dropped]
        if len(kept) >= limit or len(found) < fetch:
            return kept[:limit]
        fetch *= 4


NEWER_ROWS = 512
"""The most fragments formed after a graph version that a lookup tokenizes itself (a few
µs each; the graph takes in a formation pass within about 0.1 s, a pass is at most
``formation.batch_size`` rows)."""
NEWER_CHARS = 262_144
"""The most characters of such fragments a lookup tokenizes (a pasted megabyte costs
~25 ms to tokenize and count, on every lookup until the graph takes it in): past it,
FTS5 answers, which indexed the text when it was formed."""


def search(
    conn: Connection,
    question: Question,
    *,
    limit: int,
    exclude_hashes: Collection[str] = (),
) -> list[Hit]:
    """The ``limit`` best live fragments for ``question`` by BM25 (an OR of its terms),
    fragments of the log rows ``exclude_hashes`` left out."""
    return _fragments.search(
        conn, list(question.terms), limit=limit, exclude_hashes=exclude_hashes
    )
