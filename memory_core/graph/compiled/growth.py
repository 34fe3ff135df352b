"""Candidate regions grown around convergence centres, compiled.

:func:`grow_all` is the growth rule of :mod:`.area` ("Candidates") as one compiled loop:
the same centres tried in the same order, the same breadth-first layers, the same
truncation and the same overlap test, so the same regions. As array operations it cost
about two thousand small numpy calls a query (a millisecond on five LoCoMo
conversations); compiled, it costs what the regions hold. It releases the GIL.

Invariants: a region lists its centre first, then each layer in node order (by
decreasing total activation, ties in node order, when ``max_region_nodes`` truncates
it); a node is *seen* once per growth, whether admitted or not (a hub seen from the
first layer is not reconsidered from the second); candidates are returned in the order
their centres were tried.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

__all__ = ["grow_all"]


@njit(cache=True, nogil=True)
def grow_all(
    order: Any,
    indptr: Any,
    neighbours: Any,
    hub: Any,
    total: Any,
    radius: int,
    max_region_nodes: int,
    min_hub_weight: float,
    max_candidates: int,
    max_overlap: float,
) -> tuple[Any, Any, Any]:
    """``(centres, offsets, members)``: candidate ``i`` is centred on ``centres[i]`` and
    holds ``members[offsets[i]:offsets[i + 1]]`` (local indices)."""
    k = total.shape[0]
    covered = np.zeros(k, np.bool_)
    seen = np.zeros(k, np.int64)  # growth number that saw the node (0: none yet)
    stamp = np.zeros(k, np.int64)  # layer number that collected the node
    inside = np.zeros((max_candidates, k), np.bool_)  # members of each kept candidate
    sizes = np.zeros(max_candidates, np.int64)
    centres = np.empty(max_candidates, np.int64)
    members = np.empty(max_candidates * max_region_nodes, np.int64)
    offsets = np.zeros(max_candidates + 1, np.int64)
    region = np.empty(max_region_nodes, np.int64)
    near = np.empty(k, np.int64)
    kept = 0
    tries = 0
    growth = 0
    layer_id = 0
    for centre in order:
        if kept >= max_candidates or tries >= 4 * max_candidates:
            break
        if covered[centre] or total[centre] <= 0.0:
            continue
        tries += 1
        growth += 1
        seen[centre] = growth
        region[0] = centre
        size = 1
        start = 0  # the frontier is region[start:size]
        room = max_region_nodes - 1
        for _ in range(radius):
            layer_id += 1
            n_near = 0
            for f in range(start, size):
                u = region[f]
                for e in range(indptr[u], indptr[u + 1]):
                    v = neighbours[e]
                    if stamp[v] != layer_id:
                        stamp[v] = layer_id
                        near[n_near] = v
                        n_near += 1
            layer = np.sort(near[:n_near])
            n_keep = 0
            for v in layer:
                if seen[v] == growth:
                    continue
                seen[v] = growth
                if hub[v] >= min_hub_weight:
                    layer[n_keep] = v
                    n_keep += 1
            layer = layer[:n_keep]
            if n_keep > room:
                layer = layer[np.argsort(-total[layer], kind="mergesort")[:room]]
                n_keep = room
            if n_keep == 0:
                break
            start = size
            region[size : size + n_keep] = layer
            size += n_keep
            room -= n_keep
        overlapping = False
        for j in range(kept):
            shared = 0
            for m in range(size):
                if inside[j, region[m]]:
                    shared += 1
            union = size + sizes[j] - shared
            if union > 0 and shared / union > max_overlap:
                overlapping = True
                break
        if overlapping:
            continue
        for m in range(size):
            covered[region[m]] = True
            inside[kept, region[m]] = True
        centres[kept] = centre
        sizes[kept] = size
        members[offsets[kept] : offsets[kept] + size] = region[:size]
        offsets[kept + 1] = offsets[kept] + size
        kept += 1
    return centres[:kept], offsets[: kept + 1], members[: offsets[kept]]
