"""The fragments nearest a question by cosine: exact on small stores, a compiled SimHash
shortlist rescored exactly on large ones.

Why: the exact search reads every stored vector (100k fragments: 154 MB, ~4-7 ms a
question on this machine, most of a query), while the few nearest are all that the
dense focus and the candidate list use. Each vector also gets a 1024-bit SimHash code
(the signs of its projections on fixed random hyperplanes; :func:`codes`), and a question
ranks the codes by Hamming distance (compiled), keeps the :data:`SHORTLIST` closest, and
computes the exact cosine of those only.

The ranking takes two passes: the first reads every code's first :data:`PREFIX_WORDS`
words (its first 256 hyperplanes, kept as an array of their own: :func:`prefixes`) and
keeps the :data:`FIRST_PASS` closest; the second reads the whole code of those only.
Why: in a real lookup the codes are cold (the question's encoding and the pulse ran
since the last lookup), and reading them is what the pass costs: at 100k fragments the
one 1024-bit pass read 12.8 MB and took 1.66 ms inside lookups (0.61 ms run back to back
on its own, where they stay cached); the two passes read 3.2 MB plus 8,192 rows and take
0.99 ms inside lookups, with the same recall@20 against the exact search (0.9948 with one
pass or two; recall@50 0.9974 -> 0.9966: ``scripts/bench_nearest.py`` on the 100k
benchmark store, figures in docs/evaluation.md).

Invariants:

* the hyperplanes are a pure function of the dimension (a fixed seed), so a code computed
  once is valid for the life of the store and of every process that reads it;
* below :data:`EXACT_ROWS` vectors the search is exact (it is cheaper there);
* what is returned is always exact cosines, best first: the shortlist only decides which
  vectors are compared; a true neighbour can be missed only if more than
  :data:`FIRST_PASS` vectors have a prefix at most as far as its own, or more than
  :data:`SHORTLIST` of those a code at most as far as its own. The recall of the
  shortlist is measured by ``scripts/bench_nearest.py``.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt
from numba import njit

__all__ = [
    "BITS",
    "EXACT_ROWS",
    "FIRST_PASS",
    "PREFIX_WORDS",
    "SHORTLIST",
    "WORDS",
    "Nearest",
    "codes",
    "nearest",
    "prefixes",
    "rescored",
    "shortlist",
]

BITS = 1024
"""Hyperplanes per code: the angle estimate's spread shrinks with sqrt(BITS)."""
WORDS = BITS // 64
EXACT_ROWS = 16_384
"""Stores up to this many vectors are searched exactly."""
SHORTLIST = 2_048
"""Codes kept for exact rescoring on larger stores."""
PREFIX_WORDS = 4
"""Words of each code the first pass reads (256 hyperplanes)."""
FIRST_PASS = 8_192
"""Rows the first pass keeps for the second to read whole."""

Vectors = npt.NDArray[np.float32]
Codes = npt.NDArray[np.uint64]
Nearest = tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]
"""Rows of the vector matrix, best first, and their cosines."""


@cache
def _hyperplanes(dim: int) -> Vectors:
    planes = np.random.default_rng(20_261_130).standard_normal((dim, BITS)).astype(np.float32)
    planes.flags.writeable = False
    return planes


def codes(vectors: Vectors) -> Codes:
    """The SimHash codes of ``vectors`` (rows), ``WORDS`` unsigned 64-bit words each."""
    if vectors.shape[0] == 0:
        return np.empty((0, WORDS), np.uint64)
    signs = (vectors @ _hyperplanes(vectors.shape[1])) > 0
    return np.packbits(signs, axis=1, bitorder="little").view(np.uint64)


def prefixes(stored: Codes) -> Codes:
    """What the first pass reads of ``stored`` codes: their first :data:`PREFIX_WORDS`
    words, contiguous."""
    return np.ascontiguousarray(stored[:, :PREFIX_WORDS])


def nearest(
    vectors: Vectors,
    stored_codes: Codes,
    stored_prefixes: Codes,
    query: Vectors,
    k: int,
    allowed: npt.NDArray[np.bool_] | None = None,
) -> Nearest:
    """The ``k`` rows of ``vectors`` with the largest cosine to ``query`` (vectors are
    unit length, so the cosine is the dot product), best first; ``stored_codes`` are the
    rows' codes and ``stored_prefixes`` their :func:`prefixes` (at least as many of each
    as there are vectors beyond :data:`EXACT_ROWS`, else the search is exact). With
    ``allowed`` (a flag per row), only allowed rows (fewer than ``k`` when fewer are; on a
    large store, those of the shortlist). A mask that is no flag per row (not boolean, or
    shorter than ``vectors``) raises ValueError; a longer one is read for its first rows."""
    rows = vectors.shape[0]
    if allowed is not None and not _flags_rows(allowed, rows):
        raise ValueError(
            f"allowed must flag each of the {rows} rows: got {allowed.dtype} of {allowed.shape}"
        )
    k = min(k, rows)
    if k <= 0:
        return np.empty(0, np.int64), np.empty(0, np.float32)
    if rows <= EXACT_ROWS or min(stored_codes.shape[0], stored_prefixes.shape[0]) < rows:
        near = np.arange(rows, dtype=np.int64)
        sims = vectors @ query
    else:
        near = shortlist(
            stored_codes[:rows],
            stored_prefixes[:rows],
            codes(query[None, :])[0],
            max(SHORTLIST, k),
            max(FIRST_PASS, SHORTLIST, k),
        )
        sims = rescored(vectors, near, np.ascontiguousarray(query, np.float32))
    if allowed is not None:
        keep = allowed[near]
        near, sims = near[keep], sims[keep]
        k = min(k, near.shape[0])
        if k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32)
    return _best(near, sims, k)


def _flags_rows(allowed: npt.NDArray[np.bool_], rows: int) -> bool:
    """Whether ``allowed`` is a boolean flag for each of ``rows`` rows (or more)."""
    return allowed.dtype == np.bool_ and allowed.ndim == 1 and allowed.shape[0] >= rows


def _best(rows: npt.NDArray[np.int64], sims: Vectors, k: int) -> Nearest:
    top = np.argpartition(-sims, k - 1)[:k] if k < sims.shape[0] else np.arange(sims.shape[0])
    order = top[np.lexsort((rows[top], -sims[top]))]
    return rows[order], np.asarray(sims[order], np.float32)


@njit(cache=True, nogil=True, fastmath=True)
def rescored(vectors: Vectors, rows: npt.NDArray[np.int64], query: Vectors) -> Vectors:
    """The dot products of ``vectors[rows]`` with ``query``, read in place: gathering the
    shortlist's rows into a copy first cost as much as the products (100k fragments). The
    sums may be reordered (float32 rounding, ~1e-7)."""
    out = np.empty(rows.shape[0], np.float32)
    for i in range(rows.shape[0]):
        row = rows[i]
        total = np.float32(0.0)
        for j in range(query.shape[0]):
            total += vectors[row, j] * query[j]
        out[i] = total
    return out


_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


@njit(cache=True, nogil=True)
def _distance(codes: Codes, row: int, query: Codes, words: int) -> np.int32:
    """Hamming distance of ``codes[row]`` to ``query`` over their first ``words`` words."""
    d = np.int32(0)
    for w in range(words):
        x = codes[row, w] ^ query[w]
        x = x - ((x >> np.uint64(1)) & _M1)  # popcount, SWAR
        x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
        x = (x + (x >> np.uint64(4))) & _M4
        d += np.int32((x * _H01) >> np.uint64(56))
    return d


@njit(cache=True, nogil=True)
def _closest(
    distance: npt.NDArray[np.int32], rows: npt.NDArray[np.int64], keep: int, bits: int
) -> npt.NDArray[np.int64]:
    """The ``keep`` of ``rows`` with the least ``distance`` (ties at the cut-off: the
    earlier ones), in the order given."""
    histogram = np.zeros(bits + 1, np.int64)
    for i in range(distance.shape[0]):
        histogram[distance[i]] += 1
    cut, below = 0, 0
    while cut <= bits and below + histogram[cut] < keep:
        below += histogram[cut]
        cut += 1
    room = keep - below  # rows allowed at the cut-off distance itself
    out = np.empty(min(keep, distance.shape[0]), np.int64)
    j = 0
    for i in range(distance.shape[0]):
        d = distance[i]
        if d < cut or (d == cut and room > 0):
            if d == cut:
                room -= 1
            out[j] = rows[i]
            j += 1
    return out[:j]


@njit(cache=True, nogil=True)
def shortlist(
    stored: Codes, stored_prefixes: Codes, query: Codes, keep: int, first: int
) -> npt.NDArray[np.int64]:
    """Rows of the ``keep`` codes nearest ``query`` by Hamming distance among the
    ``first`` nearest by prefix (every row when there are no more), in row order; ties
    at either cut-off distance: the lower rows."""
    n = stored.shape[0]
    rows = np.arange(n)
    if n > first:
        words = stored_prefixes.shape[1]
        distance = np.empty(n, np.int32)
        for i in range(n):
            distance[i] = _distance(stored_prefixes, i, query, words)
        rows = _closest(distance, rows, first, words * 64)
    distance = np.empty(rows.shape[0], np.int32)
    for i in range(rows.shape[0]):
        distance[i] = _distance(stored, rows[i], query, WORDS)
    return _closest(distance, rows, keep, BITS)
