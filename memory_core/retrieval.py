"""Retrieval, first version: FTS5 BM25 over the live (non-superseded) fragments.

The question becomes an OR of its content words, each quoted so that no user text is
ever read as FTS5 query syntax. Fragments whose log rows are already in the request
(``exclude_hashes``) are skipped: the model sees them in the history anyway; a request
may carry any number of them.

Stored rows are read defensively (rows written before the log validated its input, or
by hand): a timestamp that is not a sane one reads as None (see
:func:`.log.stored_timestamp`), a text column holding NULL or bytes reads as text.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import apsw

from .db import JSON_IN, json_array
from .errors import StorageError
from .log import stored_timestamp

__all__ = ["Hit", "fetch_hits", "query_terms", "question_excerpt", "search"]

QUESTION_CHARS = 2_000
"""The most characters of a question that retrieval reads (see :func:`question_excerpt`)."""

_TERM = re.compile(r"[^\W_]+", re.UNICODE)
_MAX_TERMS = 32
_STOP = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "don",
        "didn",
        "doesn",
        "isn",
        "wasn",
        "weren",
        "ll",
        "ve",
        "re",
        "d",
        "m",
    ]
)


@dataclass(frozen=True)
class Hit:
    """One retrieved fragment with its provenance and its BM25 score (higher is better).

    ``ts`` is None when the stored time is unknown (not a sane timestamp)."""

    fragment_id: int
    score: float
    text: str
    role: str
    speaker: str | None
    conversation_id: str
    ts: float | None
    log_hash: str
    ext_id: str | None


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _hit(fragment_id: int, score: float, row: Sequence[object]) -> Hit:
    """A hit from ``(text, role, speaker, conversation, ts, hash, ext_id)`` as stored."""
    text, role, speaker, conversation, ts, log_hash, ext_id = row
    return Hit(
        fragment_id,
        score,
        _text(text),
        _text(role),
        None if speaker is None else _text(speaker),
        _text(conversation),
        stored_timestamp(ts),
        _text(log_hash),
        None if ext_id is None else _text(ext_id),
    )


def query_terms(question: str) -> list[str]:
    """Content words of ``question``, lowercased, first occurrence order, bounded."""
    terms: dict[str, None] = {}
    for word in _TERM.findall(question.lower()):
        if word not in _STOP and (len(word) > 1 or word.isdigit()):
            terms.setdefault(word, None)
    return list(terms)[:_MAX_TERMS]


def search(
    conn: apsw.Connection,
    question: str,
    *,
    limit: int,
    exclude_hashes: Collection[str] = (),
) -> list[Hit]:
    """The ``limit`` best live fragments for ``question`` by BM25."""
    terms = query_terms(question)
    if not terms or limit <= 0:
        return []
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    excluded = set(exclude_hashes)
    fetch = 2 * (limit + len(excluded)) + 8
    while True:
        rows = _ranked(conn, match, fetch)
        hits = [h for h in rows if not h.superseded and h.log_hash not in excluded]
        if len(hits) >= limit or len(rows) < fetch:
            return [h.hit for h in hits[:limit]]
        fetch *= 4


@dataclass(frozen=True)
class _Row:
    hit: Hit
    superseded: bool

    @property
    def log_hash(self) -> str:
        return self.hit.log_hash


def _ranked(conn: apsw.Connection, match: str, fetch: int) -> list[_Row]:
    """The ``fetch`` best BM25 matches, superseded ones included (ranked inside FTS5 first,
    so only those rows are joined: the cost follows ``fetch``, not the number of matches)."""
    try:
        rows = conn.execute(
            "WITH top AS (SELECT rowid AS id, bm25(fragments_fts) AS rank FROM fragments_fts"
            " WHERE fragments_fts MATCH ? ORDER BY rank LIMIT ?)"
            " SELECT f.id, -top.rank, f.text, f.role, f.speaker, f.conversation_id, f.ts,"
            " log.hash, log.ext_id, f.superseded"
            " FROM top JOIN fragments f ON f.id = top.id JOIN log ON log.id = f.log_id"
            " ORDER BY top.rank",
            (match, fetch),
        )
        return [_Row(_hit(row[0], float(row[1]), row[2:9]), bool(row[9])) for row in rows]
    except apsw.Error as exc:
        raise StorageError(f"search failed: {exc}") from exc


def fetch_hits(conn: apsw.Connection, fragment_ids: Sequence[int]) -> list[Hit]:
    """Live fragments by id, in the given order (score: 1/rank), superseded ones left out."""
    if not fragment_ids:
        return []
    try:
        rows = {
            row[0]: row[1:]
            for row in conn.execute(
                "SELECT f.id, f.text, f.role, f.speaker, f.conversation_id, f.ts, log.hash,"
                " log.ext_id FROM fragments f JOIN log ON log.id = f.log_id"
                f" WHERE f.superseded = 0 AND f.id {JSON_IN}",
                (json_array(fragment_ids),),
            )
        }
    except apsw.Error as exc:
        raise StorageError(f"cannot read fragments: {exc}") from exc
    return [
        _hit(fid, 1.0 / rank, rows[fid])
        for rank, fid in enumerate(fragment_ids, start=1)
        if fid in rows
    ]


def question_excerpt(text: str, limit: int = QUESTION_CHARS) -> str:
    """What retrieval reads of a question: all of it up to ``limit`` characters; past
    that its first quarter and last three quarters of ``limit``, joined by `` … `` (people
    paste material and then ask, or ask and then paste). Why: a lookup's cost grows with
    its question (terms, foci, encoding), and a pasted megabyte must not hold the reader
    thread and the interpreter while the request waits."""
    if len(text) <= limit:
        return text
    head, tail = limit // 4, limit - limit // 4
    return text[:head].rsplit(" ", 1)[0] + " … " + text[-tail:].split(" ", 1)[-1]
