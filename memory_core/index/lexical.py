"""BM25 over the fragments of a memory-graph version, in memory: FTS5's scores, no query.

Area retrieval seeds one focus with the fragments that match the question's words best by
BM25. Asking FTS5 cost 0.4 µs per posting of the question's terms: 1-4.5 ms a question
over 100k fragments, a growing share of a lookup, spent holding a reader connection. This
index keeps the same postings in arrays beside the graph and scores them in one compiled
pass (:func:`_bm25`), a few µs per thousand postings.

Same scores as ``bm25(fragments_fts)``, by construction and checked against it
(``tests/test_lexical.py``):

- the same tokens: both columns of a fragment's FTS5 row (``speaker``, ``canonical``) are
  tokenized by ``fragments_fts``'s own tokenizer, run by SQLite
  (:func:`~memory_core.storage.tables.fragments.fts_tokenizer`);
- FTS5's formula (``fts5_aux.c``, ``fts5Bm25Function``, k1 = 1.2, b = 0.75, every column
  weight 1): for each phrase of the query in order, ``idf * tf * (k1 + 1) / (tf + k1 * (1
  - b + b * D / avgdl))``, with ``tf`` the phrase's occurrences in the row's columns
  together, ``D`` the row's tokens, ``avgdl`` all tokens over all rows, ``idf = log((N -
  n + 0.5) / (n + 0.5))`` raised to 1e-6 when not positive, ``N`` the rows and ``n`` the
  rows that contain the phrase. Superseded fragments count as FTS5 counts them (their rows
  stay in the index); the caller drops them from what is returned.
- Only one-token phrases: a query word that FTS5 would read as a phrase of several
  tokens needs positions this index does not keep; :meth:`LexicalView.search` answers
  None and the caller asks FTS5.

Layout: postings are appended fragment by fragment (document-major: term ids and counts).
Two term-major copies (CSR: ``term -> documents``) cover them but for a short tail: the
*base* holds the first documents and is rebuilt over all of them when the documents
appended since hold more than a quarter of its postings (at least
:data:`_MIN_DELTA_POSTINGS`); the *middle* holds the documents after the base and is
rebuilt when more than :data:`_TAIL_POSTINGS` postings were appended after it. A query
reads the postings of its terms in both and scans the tail (at most
:data:`_TAIL_POSTINGS`) once per phrase, whatever the size of memory; appending costs an
amortized sort of what was appended. (With the base alone, the scan grew to a quarter of
all postings: 3.8 ms of foci a question over 100k fragments just after they were formed,
0.9 ms once the base was rebuilt.) A :class:`LexicalView` is immutable: views of
prefixes of append-only buffers (the term dictionary is shared and only gains keys: a
term id past the view's vocabulary has no postings in it).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from .buffer import AppendBuffer

__all__ = ["K1", "B", "LexicalIndex", "LexicalView"]

K1 = 1.2
B = 0.75
_MIN_DELTA_POSTINGS = 65_536
_TAIL_POSTINGS = 8_192

Int32s = npt.NDArray[np.int32]
Int64s = npt.NDArray[np.int64]


@dataclass(frozen=True)
class _TermMajor:
    """Postings of the documents before ``docs`` (from the previous copy's end) by term:
    ``docs_of[ptr[t]:ptr[t + 1]]`` are the documents (ascending) holding term ``t``,
    ``counts`` its occurrences there; ``postings``: the document-major postings before
    ``docs``."""

    docs: int
    postings: int
    ptr: Int64s
    docs_of: Int32s
    counts: Int32s

    @classmethod
    def empty(cls, docs: int = 0, postings: int = 0) -> _TermMajor:
        return cls(
            docs, postings, np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32)
        )


_EMPTY = _TermMajor.empty()


@dataclass(frozen=True)
class LexicalView:
    """The index as of one graph version (see the module docstring)."""

    terms: dict[str, int]  # shared with later views, only gains keys
    fragment_ids: Int64s  # document -> fragment id
    lengths: Int32s  # document -> its tokens, both columns
    doc_ptr: Int64s  # document d's postings: [doc_ptr[d], doc_ptr[d + 1])
    term_of: Int32s  # posting -> term id (document-major)
    count_of: Int32s  # posting -> occurrences
    total_tokens: int
    base: _TermMajor
    middle: _TermMajor
    newer_tokens: dict[int, list[str]] = field(default_factory=dict, compare=False)
    """The tokens of fragments formed after this view, by fragment id, as lookups read
    them (:func:`memory_core.retrieval.bm25.indexed_search_scores`): a fragment's text never
    changes once formed, and every lookup until the next version reads the same rows.
    At most ``NEWER_ROWS`` of them (past that, lookups ask FTS5)."""

    @property
    def documents(self) -> int:
        return int(self.fragment_ids.shape[0])

    @property
    def last_fragment_id(self) -> int:
        """The newest fragment this view holds (0 when empty): ids grow with time."""
        return int(self.fragment_ids[-1]) if self.documents else 0

    def search(
        self,
        phrases: Sequence[Sequence[str]],
        limit: int,
        newer: Sequence[tuple[int, Sequence[str]]] = (),
    ) -> list[tuple[int, float]] | None:
        """``(fragment id, BM25 score)`` of the ``limit`` best documents matching any of
        ``phrases`` (each the tokens of one query word, in query order), best first, ties
        by fragment id; None when a phrase has several tokens (see the module docstring).
        A phrase without tokens matches nothing, as in FTS5.

        ``newer``: ``(fragment id, tokens)`` of every fragment formed after this view
        (FTS5 already holds them; matching or not, they count in the row total and the
        average length); they are scored and counted with the view's documents, as FTS5
        counts them, so every score is the one FTS5 gives now."""
        if any(len(p) > 1 for p in phrases):
            return None
        tokens = [p[0] for p in phrases if p]
        n_docs = self.documents + len(newer)
        if not tokens or limit <= 0 or not n_docs:
            return []
        counts = [Counter(t) for _, t in newer]
        newer_hits = np.array([sum(1 for c in counts if t in c) for t in tokens], np.int64)
        avgdl = (self.total_tokens + sum(len(t) for _, t in newer)) / n_docs
        scores, touched, idf = _bm25(
            np.array([self.terms.get(t, -1) for t in tokens], np.int64),
            newer_hits,
            n_docs,
            self.base.ptr,
            self.base.docs_of,
            self.base.counts,
            self.middle.ptr,
            self.middle.docs_of,
            self.middle.counts,
            self.doc_ptr[self.middle.docs :],
            self.term_of,
            self.count_of,
            self.lengths,
            avgdl,
            self.middle.docs,
        )
        found = scores[touched]
        if touched.shape[0] > limit:
            keep = np.argpartition(-found, limit - 1)[:limit]
            touched, found = touched[keep], found[keep]
        hits = [(int(f), float(v)) for f, v in zip(self.fragment_ids[touched], found, strict=True)]
        weights = idf.tolist()
        for (fragment_id, document), count in zip(newer, counts, strict=True):
            norm = K1 * (1.0 - B + B * len(document) / avgdl)
            score = sum(
                w * count[t] * (K1 + 1.0) / (count[t] + norm)
                for t, w in zip(tokens, weights, strict=True)
            )
            if score > 0:
                hits.append((fragment_id, score))
        hits.sort(key=lambda hit: (-hit[1], hit[0]))
        return hits[:limit]


class LexicalIndex:
    """The growing index of one store, appended to by the memory graph's refresh (under
    its lock); :meth:`view` publishes it."""

    def __init__(self) -> None:
        self._terms: dict[str, int] = {}
        self._fragment_ids = AppendBuffer(np.int64)
        self._lengths = AppendBuffer(np.int32)
        self._doc_ptr = AppendBuffer(np.int64)
        self._doc_ptr.extend([0])
        self._term_of = AppendBuffer(np.int32)
        self._count_of = AppendBuffer(np.int32)
        self._total = 0
        self._base = _EMPTY
        self._middle = _EMPTY
        self._pending_terms: list[int] = []
        self._pending_counts: list[int] = []
        self._pending_ends: list[int] = []
        self._pending_ids: list[int] = []
        self._pending_lengths: list[int] = []

    def add(self, fragment_id: int, tokens: Iterable[str]) -> None:
        """Append a fragment's document (the tokens of its columns, in any order); it is
        part of the next :meth:`view`."""
        counts = Counter(tokens)
        terms = self._terms
        self._pending_terms.extend([terms.setdefault(t, len(terms)) for t in counts])
        self._pending_counts.extend(counts.values())
        self._pending_ends.append(self._term_of.size + len(self._pending_terms))
        self._pending_ids.append(fragment_id)
        length = sum(counts.values())
        self._pending_lengths.append(length)
        self._total += length

    def _flush(self) -> None:
        """Move the documents added since the last view into the buffers (one copy per
        refresh instead of five per document)."""
        self._term_of.extend(self._pending_terms)
        self._count_of.extend(self._pending_counts)
        self._doc_ptr.extend(self._pending_ends)
        self._fragment_ids.extend(self._pending_ids)
        self._lengths.extend(self._pending_lengths)
        self._pending_terms, self._pending_counts, self._pending_ends = [], [], []
        self._pending_ids, self._pending_lengths = [], []

    def view(self) -> LexicalView:
        """The index as it is now; rebuilds the term-major base, or the middle copy, when
        too many postings were appended after it (see the module docstring)."""
        self._flush()
        postings, docs = self._term_of.size, self._doc_ptr.size - 1
        term_of, count_of, doc_ptr = (
            self._term_of.view(),
            self._count_of.view(),
            self._doc_ptr.view(),
        )
        if postings - self._base.postings > max(_MIN_DELTA_POSTINGS, self._base.postings // 4):
            self._base = _term_major(term_of, count_of, doc_ptr, len(self._terms), 0, docs)
            self._middle = _TermMajor.empty(docs, postings)
        elif postings - self._middle.postings > _TAIL_POSTINGS:
            base = self._base
            self._middle = _term_major(
                term_of, count_of, doc_ptr, len(self._terms), base.docs, docs
            )
        elif self._middle.docs < self._base.docs:
            self._middle = _TermMajor.empty(self._base.docs, self._base.postings)
        return LexicalView(
            self._terms,
            self._fragment_ids.view(),
            self._lengths.view(),
            self._doc_ptr.view(),
            self._term_of.view(),
            self._count_of.view(),
            self._total,
            self._base,
            self._middle,
        )


def _term_major(
    term_of: Int32s, count_of: Int32s, doc_ptr: Int64s, terms: int, start: int, end: int
) -> _TermMajor:
    """The term-major copy of the postings of documents ``start`` to ``end`` (exclusive;
    documents ascending within a term)."""
    first, last = int(doc_ptr[start]), int(doc_ptr[end])
    doc_of = np.repeat(np.arange(start, end, dtype=np.int32), np.diff(doc_ptr[start : end + 1]))
    window = term_of[first:last]
    order = np.argsort(window, kind="stable")
    ptr = np.zeros(terms + 1, np.int64)
    np.cumsum(np.bincount(window, minlength=terms), out=ptr[1:])
    return _TermMajor(end, last, ptr, doc_of[order], count_of[first:last][order])


@njit(cache=True, nogil=True)
def _bm25(
    ids: Int64s,
    newer_hits: Int64s,
    n_docs: int,
    base_ptr: Int64s,
    base_docs_of: Int32s,
    base_counts: Int32s,
    mid_ptr: Int64s,
    mid_docs_of: Int32s,
    mid_counts: Int32s,
    tail_ptr: Int64s,
    term_of: Int32s,
    count_of: Int32s,
    lengths: Int32s,
    avgdl: float,
    tail_docs: int,
) -> tuple[Any, Int64s, Any]:
    """Scores of the view's documents (FTS5's sum, phrase by phrase in query order), the
    documents that match any phrase (in first-match order: ascending, the base's documents
    before the middle's before the tail's) and each phrase's idf, over ``n_docs``
    documents of which ``newer_hits[i]`` more hold phrase ``i``. The tail is the documents
    from ``tail_docs``, their postings ``tail_ptr`` (document-major)."""
    held = lengths.shape[0]
    first = tail_ptr[0]
    last = tail_ptr[tail_ptr.shape[0] - 1]
    scores = np.zeros(held)
    seen = np.zeros(held, np.bool_)
    touched = np.empty(held, np.int64)
    idfs = np.zeros(ids.shape[0])
    n_touched = 0
    for i in range(ids.shape[0]):
        term = ids[i]
        hits = newer_hits[i] + _holding(term, base_ptr) + _holding(term, mid_ptr)
        if term >= 0:
            for p in range(first, last):
                if term_of[p] == term:
                    hits += 1
        idf = math.log((n_docs - hits + 0.5) / (hits + 0.5))
        if idf <= 0.0:
            idf = 1e-6
        idfs[i] = idf
        if term < 0:
            continue
        if _holding(term, base_ptr):
            for p in range(base_ptr[term], base_ptr[term + 1]):
                d, tf = base_docs_of[p], base_counts[p]
                scores[d] += _term_score(idf, tf, lengths[d], avgdl)
                n_touched = _touch(d, seen, touched, n_touched)
        if _holding(term, mid_ptr):
            for p in range(mid_ptr[term], mid_ptr[term + 1]):
                d, tf = mid_docs_of[p], mid_counts[p]
                scores[d] += _term_score(idf, tf, lengths[d], avgdl)
                n_touched = _touch(d, seen, touched, n_touched)
        d = tail_docs
        for p in range(first, last):
            while p >= tail_ptr[d - tail_docs + 1]:
                d += 1
            if term_of[p] == term:
                tf = count_of[p]
                scores[d] += _term_score(idf, tf, lengths[d], avgdl)
                n_touched = _touch(d, seen, touched, n_touched)
    return scores, touched[:n_touched], idfs


@njit(cache=True, nogil=True, inline="always")
def _term_score(idf: float, tf: int, length: int, avgdl: float) -> float:
    """One phrase's part of a document's score, as ``fts5Bm25Function`` computes it."""
    return idf * (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * length / avgdl))


@njit(cache=True, nogil=True, inline="always")
def _holding(term: int, ptr: Int64s) -> int:
    """How many documents of a term-major copy hold ``term`` (0 for a term it lacks)."""
    if 0 <= term < ptr.shape[0] - 1:
        return int(ptr[term + 1] - ptr[term])
    return 0


@njit(cache=True, nogil=True, inline="always")
def _touch(d: int, seen: Any, touched: Int64s, n_touched: int) -> int:
    if not seen[d]:
        seen[d] = True
        touched[n_touched] = d
        return n_touched + 1
    return n_touched
