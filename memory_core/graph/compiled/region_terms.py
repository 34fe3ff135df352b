"""Every candidate region's score terms, compiled: one pass for all candidates.

:func:`candidate_terms` is the region score of :mod:`.area` ("Scoring") for each region
:func:`.growth.grow_all` returned: the stored edges among its members (in edge order),
the distinct source fragments, the distinct ``(edge_type, edge_id)`` pairs, the
per-focus mass and the activation its hubs justify. As array operations that was about
forty small numpy calls a candidate (0.08 ms each, eight candidates a question: the
largest part of area selection on five LoCoMo conversations); compiled it costs what the
regions hold. It releases the GIL.

Invariants: a candidate's edge rows ascend (the order :meth:`.EdgeList.take` keeps);
sums over members run in member order, so the terms are those of the numpy rule up to
the order of floating-point additions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

__all__ = ["candidate_terms"]


@njit(cache=True, nogil=True)
def candidate_terms(
    offsets: Any,
    members: Any,
    u: Any,
    v: Any,
    edge_source: Any,
    edge_key: Any,
    fragment_id: Any,
    per_focus: Any,
    total: Any,
    hub: Any,
) -> tuple[Any, Any, Any, Any, Any, Any]:
    """``(sums, justified, sources, pairs, row_offsets, rows)`` per candidate.

    Candidate ``c`` holds the field indices ``members[offsets[c]:offsets[c + 1]]``;
    ``u, v`` are the field edges' end indices, ``edge_source`` their source fragment
    (-1: none), ``edge_key`` their ``(edge_type, edge_id)`` as one sortable key;
    ``fragment_id[i]`` is field node ``i``'s id when it is a fragment, else -1.
    ``sums[c]`` is the per-focus activation of the members, ``justified[c]`` the sum of
    their ``total * hub``; ``rows[row_offsets[c]:row_offsets[c + 1]]`` are the edges
    with both ends among the members."""
    k = offsets.shape[0] - 1
    n = per_focus.shape[0]
    f = per_focus.shape[1]
    sums = np.zeros((k, f))
    justified = np.zeros(k)
    sources = np.zeros(k, np.int64)
    pairs = np.zeros(k, np.int64)
    row_offsets = np.zeros(k + 1, np.int64)
    inside = np.zeros(n, np.bool_)
    for c in range(k):  # first pass: how many edges each region holds
        for j in range(offsets[c], offsets[c + 1]):
            inside[members[j]] = True
        held = 0
        for e in range(u.shape[0]):
            if inside[u[e]] and inside[v[e]]:
                held += 1
        for j in range(offsets[c], offsets[c + 1]):
            inside[members[j]] = False
        row_offsets[c + 1] = row_offsets[c] + held
    rows = np.empty(row_offsets[k], np.int64)
    for c in range(k):
        lo, hi = offsets[c], offsets[c + 1]
        for j in range(lo, hi):
            i = members[j]
            inside[i] = True
            for q in range(f):
                sums[c, q] += per_focus[i, q]
            justified[c] += total[i] * hub[i]
        at = row_offsets[c]
        for e in range(u.shape[0]):
            if inside[u[e]] and inside[v[e]]:
                rows[at] = e
                at += 1
        for j in range(lo, hi):
            inside[members[j]] = False
        mine = rows[row_offsets[c] : row_offsets[c + 1]]
        sources[c] = _distinct_sources(mine, edge_source, members[lo:hi], fragment_id)
        pairs[c] = _distinct(edge_key[mine])
    return sums, justified, sources, pairs, row_offsets, rows


@njit(cache=True, nogil=True)
def _distinct_sources(rows: Any, edge_source: Any, members: Any, fragment_id: Any) -> int:
    """Distinct fragment ids among the edges' sources and the fragment members."""
    found = np.empty(rows.shape[0] + members.shape[0], np.int64)
    n = 0
    for r in rows:
        if edge_source[r] >= 0:
            found[n] = edge_source[r]
            n += 1
    for i in members:
        if fragment_id[i] >= 0:
            found[n] = fragment_id[i]
            n += 1
    return _distinct(found[:n])


@njit(cache=True, nogil=True)
def _distinct(values: Any) -> int:
    """How many distinct values ``values`` holds."""
    if values.shape[0] == 0:
        return 0
    ordered = np.sort(values)
    count = 1
    for i in range(1, ordered.shape[0]):
        if ordered[i] != ordered[i - 1]:
            count += 1
    return count
