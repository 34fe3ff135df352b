"""The activated field's local arrays, compiled: one pass over the edges among its nodes.

Area selection (:mod:`.area`) works on the activated nodes and every stored edge among
them: a few hundred nodes, but tens of thousands of edges where hubs meet (a name and a
hobby linked once per fragment that mentions both). :func:`local_arrays` maps the edges'
ends to local indices, counts each node's independently activated neighbours (its hub
weight) and builds the symmetric local adjacency that growth walks. As array operations
that was a dozen passes over the edges (two binary searches per edge, concatenations, a
stable sort): half a millisecond at 100k fragments. It releases the GIL.

Invariants (those of the numpy rule in :mod:`.area`'s docstring): ``u, v`` are positions
in ``ids``; a node's neighbours list, in edge order, first the far ends of the open edges
it starts, then the near ends of those it ends (the order a stable sort of the two
concatenated halves gives); self-loops never count as neighbours.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

__all__ = ["local_arrays"]


@njit(cache=True, nogil=True)
def local_arrays(
    ids: Any,
    src: Any,
    dst: Any,
    edge_type: Any,
    open_type: Any,
    total: Any,
    degree: Any,
    gamma: float,
    free_degree: float,
) -> tuple[Any, Any, Any, Any, Any]:
    """``(u, v, hub, indptr, neighbours)`` of the field ``ids`` (sorted, distinct; every
    edge end among them).

    ``hub[i] = min(1, (independently activated neighbours + free_degree) / degree[i])``
    where neighbour ``y`` of ``x`` is independent when ``total[y] > 2 gamma total[x] /
    degree[x]`` (once per edge); ``indptr, neighbours``: the local adjacency over the
    edges whose type ``open_type`` marks traversable, both directions."""
    n = ids.shape[0]
    m = src.shape[0]
    u = np.empty(m, np.int64)
    v = np.empty(m, np.int64)
    if n:
        local = np.full(ids[n - 1] + 1, -1, np.int32)
        for i in range(n):
            local[ids[i]] = i
        for e in range(m):
            u[e] = local[src[e]]
            v[e] = local[dst[e]]
    count = np.zeros(n)
    width = np.zeros(n, np.int64)
    for e in range(m):
        x, y = u[e], v[e]
        if x == y:
            continue
        if total[y] > 2.0 * gamma * total[x] / degree[x]:
            count[x] += 1.0
        if total[x] > 2.0 * gamma * total[y] / degree[y]:
            count[y] += 1.0
        if open_type[edge_type[e]]:
            width[x] += 1
            width[y] += 1
    hub = np.empty(n)
    for i in range(n):
        hub[i] = min(1.0, (count[i] + free_degree) / degree[i])
    indptr = np.zeros(n + 1, np.int64)
    for i in range(n):
        indptr[i + 1] = indptr[i] + width[i]
    neighbours = np.empty(indptr[n], np.int64)
    at = indptr[:n].copy()
    for e in range(m):  # the edges' starts first, in edge order ...
        if u[e] != v[e] and open_type[edge_type[e]]:
            neighbours[at[u[e]]] = v[e]
            at[u[e]] += 1
    for e in range(m):  # ... then their ends
        if u[e] != v[e] and open_type[edge_type[e]]:
            neighbours[at[v[e]]] = u[e]
            at[v[e]] += 1
    return u, v, hub, indptr, neighbours
