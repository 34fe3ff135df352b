"""The pulse's push rounds, compiled: one loop over the region a query touches.

:func:`push_rounds` is the rule of :mod:`.activation` (same thresholds, same rounds, same
budget, same arcs and degree normalisation) written as plain loops and compiled by numba,
because the same work as array operations costs a fixed overhead per operation (a few
microseconds each, dozens per round) that dominated a query: five LoCoMo conversations
pulsed in 2.7 ms, almost all of it dispatch. Compiled, a push costs what its arcs cost.

It reads the version's arrays as they are (base CSR, reverse index, delta and its two
sorted indexes), so nothing is built per version. It holds no Python object and releases
the GIL (``nogil``): a question's encoding and the event loop run beside it.

Invariants (the caller, :func:`.activation.pulse`, relies on them):

* a round first takes, for every row above threshold, the pending amounts above its
  threshold (a snapshot), and only then spreads them, so arrivals during a round are
  decided on in the next one, whatever order rows are pushed in;
* rows are pushed in node order and arcs in stored order (base forward, base reverse,
  delta forward, delta reverse): the result is deterministic;
* when a round would pass ``max_pushes``, the most loaded rows (largest pending over
  degree, ties by node id) that fit are pushed;
* the returned rows are the touched nodes sorted by id.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

__all__ = ["push_rounds"]


@njit(cache=True, nogil=True)
def _span(keys: Any, node: int) -> tuple[int, int]:
    """``lo, hi`` with ``keys[lo:hi] == node`` (``keys`` ascending): binary search by hand,
    the compiled ``np.searchsorted`` costs ten times more per scalar."""
    lo, hi = 0, keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < node:
            lo = mid + 1
        else:
            hi = mid
    end, top = lo, keys.shape[0]
    while end < top:
        mid = (end + top) >> 1
        if keys[mid] <= node:
            end = mid + 1
        else:
            top = mid
    return lo, end


@njit(cache=True, nogil=True)
def _degree(
    node: int,
    out_indptr: Any,
    inc_indptr: Any,
    dout_keys: Any,
    din_keys: Any,
) -> int:
    """Stored edge entries at ``node``, both directions, base and delta."""
    entries = 0
    if node < out_indptr.shape[0] - 1:
        entries += out_indptr[node + 1] - out_indptr[node]
        entries += inc_indptr[node + 1] - inc_indptr[node]
    lo, hi = _span(dout_keys, node)
    entries += hi - lo
    lo, hi = _span(din_keys, node)
    return entries + hi - lo


@njit(cache=True, nogil=True)
def _grown(ids: Any, degree: Any, pending: Any, settled: Any) -> tuple[Any, Any, Any, Any]:
    cap = ids.shape[0] * 2
    f = pending.shape[1]
    new_ids = np.empty(cap, np.int64)
    new_degree = np.empty(cap, np.float64)
    new_pending = np.zeros((cap, f))
    new_settled = np.zeros((cap, f))
    n = ids.shape[0]
    new_ids[:n] = ids
    new_degree[:n] = degree
    new_pending[:n] = pending
    new_settled[:n] = settled
    return new_ids, new_degree, new_pending, new_settled


@njit(cache=True, nogil=True)
def push_rounds(
    out_indptr: Any,
    out_indices: Any,
    out_weight: Any,
    out_type: Any,
    inc_indptr: Any,
    inc_indices: Any,
    inc_pos: Any,
    delta_src: Any,
    delta_dst: Any,
    delta_weight: Any,
    delta_type: Any,
    dout_keys: Any,
    dout_order: Any,
    din_keys: Any,
    din_order: Any,
    forward: Any,
    reverse: Any,
    closed: Any,
    n_nodes: int,
    seeds: Any,
    amounts: Any,
    gamma: float,
    epsilon: float,
    max_pushes: int,
    max_rounds: int,
) -> tuple[Any, Any, Any, Any, int, int, int, bool]:
    """``(nodes, settled, pending, trace, pushes, rounds, edges read, converged)``."""
    f = amounts.shape[1]
    n_rows = out_indptr.shape[0] - 1
    slot = np.full(n_nodes, -1, np.int64)
    blocked = np.zeros(n_nodes, np.bool_)
    for c in closed:
        blocked[c] = True
    ids = np.empty(64, np.int64)
    degree = np.empty(64, np.float64)
    pending = np.zeros((64, f))
    settled = np.zeros((64, f))
    count = 0
    for j in range(seeds.shape[0]):
        node = seeds[j]
        s = slot[node]
        if s < 0:
            if count == ids.shape[0]:
                ids, degree, pending, settled = _grown(ids, degree, pending, settled)
            s = count
            count += 1
            slot[node] = s
            ids[s] = node
            degree[s] = max(_degree(node, out_indptr, inc_indptr, dout_keys, din_keys), 1)
        for k in range(f):
            pending[s, k] += amounts[j, k]
    trace = np.zeros((max_rounds + 1, f))
    for i in range(count):
        for k in range(f):
            trace[0, k] += pending[i, k]
    pushes = 0
    rounds = 0
    read = 0
    # arcs of the node being pushed: target and weight (reused buffers)
    arc_target = np.empty(64, np.int64)
    arc_weight = np.empty(64, np.float64)
    starts = np.zeros(4, np.int64)
    ends = np.zeros(4, np.int64)
    while rounds < max_rounds and pushes < max_pushes:
        rows = np.empty(count, np.int64)
        n_push = 0
        for i in range(count):
            threshold = epsilon * degree[i]
            for k in range(f):
                if pending[i, k] > threshold:
                    rows[n_push] = i
                    n_push += 1
                    break
        if n_push == 0:
            break
        rows = rows[:n_push]
        rows = rows[np.argsort(ids[rows], kind="mergesort")]  # node order
        budget = max_pushes - pushes
        if n_push > budget:
            load = np.empty(n_push)
            for j in range(n_push):
                i = rows[j]
                peak = pending[i, 0]
                for k in range(1, f):
                    peak = max(peak, pending[i, k])
                load[j] = -peak / degree[i]
            rows = rows[np.argsort(load, kind="mergesort")[:budget]]
            rows = rows[np.argsort(ids[rows], kind="mergesort")]
            n_push = budget
        moved = np.zeros((n_push, f))
        for j in range(n_push):
            i = rows[j]
            threshold = epsilon * degree[i]
            for k in range(f):
                if pending[i, k] > threshold:
                    moved[j, k] = pending[i, k]
                    settled[i, k] += pending[i, k]
                    pending[i, k] = 0.0
        for j in range(n_push):
            node = ids[rows[j]]
            n_arcs = 0
            entries = 0
            # gather the node's arcs: base forward, base reverse, delta forward, reverse
            starts[:] = 0
            ends[:] = 0
            if node < n_rows:
                starts[0], ends[0] = out_indptr[node], out_indptr[node + 1]
                starts[1], ends[1] = inc_indptr[node], inc_indptr[node + 1]
            starts[2], ends[2] = _span(dout_keys, node)
            starts[3], ends[3] = _span(din_keys, node)
            for part in range(4):
                need = n_arcs + ends[part] - starts[part]
                while need > arc_target.shape[0]:
                    bigger_t = np.empty(arc_target.shape[0] * 2, np.int64)
                    bigger_w = np.empty(arc_target.shape[0] * 2, np.float64)
                    bigger_t[:n_arcs] = arc_target[:n_arcs]
                    bigger_w[:n_arcs] = arc_weight[:n_arcs]
                    arc_target, arc_weight = bigger_t, bigger_w
                for e in range(starts[part], ends[part]):
                    entries += 1
                    if part == 0:
                        target = np.int64(out_indices[e])
                        w = np.float64(out_weight[e]) * forward[out_type[e]]
                    elif part == 1:
                        p = inc_pos[e]
                        target = np.int64(inc_indices[e])
                        w = np.float64(out_weight[p]) * reverse[out_type[p]]
                    elif part == 2:
                        r = dout_order[e]
                        target = np.int64(delta_dst[r])
                        w = np.float64(delta_weight[r]) * forward[delta_type[r]]
                    else:
                        r = din_order[e]
                        target = np.int64(delta_src[r])
                        w = np.float64(delta_weight[r]) * reverse[delta_type[r]]
                    if w > 0.0 and not blocked[target]:
                        arc_target[n_arcs] = target
                        arc_weight[n_arcs] = w
                        n_arcs += 1
            read += entries
            strength = 0.0
            for a in range(n_arcs):
                strength += arc_weight[a]
            for a in range(n_arcs):
                target = arc_target[a]
                s = slot[target]
                if s < 0:
                    if count == ids.shape[0]:
                        ids, degree, pending, settled = _grown(ids, degree, pending, settled)
                    s = count
                    count += 1
                    slot[target] = s
                    ids[s] = target
                    entries_at = _degree(target, out_indptr, inc_indptr, dout_keys, din_keys)
                    degree[s] = max(entries_at, 1)
                share = gamma * (arc_weight[a] / strength)
                for k in range(f):
                    if moved[j, k] != 0.0:
                        pending[s, k] += share * moved[j, k]
        pushes += n_push
        rounds += 1
        for i in range(count):
            for k in range(f):
                trace[rounds, k] += pending[i, k]
    converged = True
    for i in range(count):
        threshold = epsilon * degree[i]
        for k in range(f):
            if pending[i, k] > threshold:
                converged = False
    order = np.argsort(ids[:count], kind="mergesort")
    return (
        ids[:count][order],
        settled[:count][order],
        pending[:count][order],
        trace[: rounds + 1],
        pushes,
        rounds,
        read,
        converged,
    )
