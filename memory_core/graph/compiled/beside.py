"""The best value among a node's graph neighbours, compiled
(:meth:`.csr.GraphVersion.best_beside`).

A lookup ranks its best forty rows again with the score of the turn said just before or
after each (:func:`memory_core.retrieval.area._in_context`). Reading those rows' arcs as
arrays (every arc of forty fragments: their words, entities, contexts) and matching them
against the candidates cost 0.2 ms a lookup in numpy calls; one compiled pass over the
rows' CSR entries, each other end binary-searched among the candidates, costs what the
entries cost. It releases the GIL.

Invariant: ``best[i]`` only grows, to the largest ``values[j]`` over the entries of row
``rows[i]`` whose other end is ``members[j]``, an entry back to the row's own node aside.
"""

from __future__ import annotations

from typing import Any

from numba import njit

__all__ = ["best_beside"]


@njit(cache=True, nogil=True)
def best_beside(indptr: Any, indices: Any, rows: Any, members: Any, values: Any, best: Any) -> None:
    """Raise ``best[i]`` to the value of each member that row ``rows[i]`` of the CSR
    (``indptr``, ``indices``: a base's forward or reverse index) reaches; ``members``
    sorted and distinct, ``values`` aligned with them. Rows past the CSR (nodes added
    since its base was built) are left to the caller's delta pass."""
    n_rows = indptr.shape[0] - 1
    m = members.shape[0]
    for i in range(rows.shape[0]):
        node = rows[i]
        if node < 0 or node >= n_rows:
            continue
        for e in range(indptr[node], indptr[node + 1]):
            other = indices[e]
            if other == node:
                continue
            lo = 0
            hi = m
            while lo < hi:
                mid = (lo + hi) >> 1
                if members[mid] < other:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < m and members[lo] == other and values[lo] > best[i]:
                best[i] = values[lo]
