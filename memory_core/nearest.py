"""The fragments nearest a question by cosine: exact on small stores, a compiled SimHash
shortlist rescored exactly on large ones.

Why: the exact search reads every stored vector (100k fragments: 154 MB, ~4-7 ms a
question on this machine, most of a query), while the few nearest are all that the
dense focus and the candidate list use. Each vector also gets a 512-bit SimHash code
(the signs of its projections on fixed random hyperplanes; :func:`codes`), and a question
first ranks every code by Hamming distance (64 bytes a fragment, compiled), keeps the
:data:`SHORTLIST` closest, and computes the exact cosine of those only.

Invariants:

* the hyperplanes are a pure function of the dimension (a fixed seed), so a code computed
  once is valid for the life of the store and of every process that reads it;
* below :data:`EXACT_ROWS` vectors the search is exact (it is cheaper there);
* what is returned is always exact cosines, best first: the shortlist only decides which
  vectors are compared; a true neighbour can be missed only if more than
  :data:`SHORTLIST` vectors have a code at most as far as its own. The recall of the
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
    "SHORTLIST",
    "WORDS",
    "Nearest",
    "codes",
    "nearest",
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


def nearest(vectors: Vectors, stored_codes: Codes, query: Vectors, k: int) -> Nearest:
    """The ``k`` rows of ``vectors`` with the largest cosine to ``query`` (vectors are
    unit length, so the cosine is the dot product), best first; ``stored_codes`` are the
    rows' codes (at least as many as needed beyond :data:`EXACT_ROWS`)."""
    rows = vectors.shape[0]
    k = min(k, rows)
    if k <= 0:
        return np.empty(0, np.int64), np.empty(0, np.float32)
    if rows <= EXACT_ROWS or stored_codes.shape[0] < rows:
        sims = vectors @ query
        return _best(np.arange(rows, dtype=np.int64), sims, k)
    near = shortlist(stored_codes[:rows], codes(query[None, :])[0], max(SHORTLIST, k))
    return _best(near, rescored(vectors, near, np.ascontiguousarray(query, np.float32)), k)


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
def shortlist(stored: Codes, query: Codes, keep: int) -> npt.NDArray[np.int64]:
    """Rows of the ``keep`` codes nearest ``query`` by Hamming distance (ties at the
    cut-off distance: the lower rows), in row order."""
    n = stored.shape[0]
    distance = np.empty(n, np.int32)
    histogram = np.zeros(BITS + 1, np.int64)
    for i in range(n):
        d = np.int32(0)
        for w in range(WORDS):
            x = stored[i, w] ^ query[w]
            x = x - ((x >> np.uint64(1)) & _M1)  # popcount, SWAR
            x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
            x = (x + (x >> np.uint64(4))) & _M4
            d += np.int32((x * _H01) >> np.uint64(56))
        distance[i] = d
        histogram[d] += 1
    cut, below = 0, 0
    while cut <= BITS and below + histogram[cut] < keep:
        below += histogram[cut]
        cut += 1
    room = keep - below  # rows allowed at the cut-off distance itself
    out = np.empty(min(keep, n), np.int64)
    j = 0
    for i in range(n):
        d = distance[i]
        if d < cut or (d == cut and room > 0):
            if d == cut:
                room -= 1
            out[j] = i
            j += 1
    return out[:j]
