"""The pulse's push rounds, compiled: one loop over the region a query touches.

:func:`push_rounds` is the rule of :mod:`.activation` (same thresholds, same rounds, same
budget, same arcs and degree normalisation) written as plain loops and compiled by numba,
because the same work as array operations costs a fixed overhead per operation (a few
microseconds each, dozens per round) that dominated a query: five LoCoMo conversations
pulsed in 2.7 ms, almost all of it dispatch. Compiled, a push costs what its arcs cost.

It reads the version's arrays as they are (base CSR, reverse index, delta and its two
sorted indexes), so nothing is built per version. It holds no Python object and releases
the GIL (``nogil``): a question's encoding and the event loop run beside it.

How it is written, and why: each round is a few helper calls, each one loop over arrays
(the rows above threshold, their arcs, the nodes touched for the first time, the spread).
A compiled call that passes arrays, and an array variable reassigned inside a loop, cost
atomic reference counting (measured: 44% of the pulse in ``NRT_incref``/``NRT_decref``
when a helper was called per node); calls per round, never per node or arc, took a
20-seed pulse on five LoCoMo conversations from 0.38 to 0.11 ms. The round's threshold
test and its trace are one pass over the touched rows; the result comes out in node order
by a pass over the slots when sorting the touched ids would cost more, with settled plus
pending and the residual summed in the same pass (the sort and four array operations
after it were a third of a 100k pulse).

Invariants (the caller, :func:`.activation.pulse`, relies on them):

* a round first takes, for every row above threshold, the pending amounts above its
  threshold (a snapshot), and only then spreads them, so arrivals during a round are
  decided on in the next one, whatever order rows are pushed in;
* rows are pushed in the order their nodes were first touched and arcs in stored order
  (base forward, base reverse, delta forward, delta reverse): the result is a function
  of the graph and the foci alone;
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
def _grown(
    ids: Any, degree: Any, pending: Any, settled: Any, need: int
) -> tuple[Any, Any, Any, Any]:
    """The four arrays with room for ``need`` rows at least (doubling), rows kept."""
    cap = max(ids.shape[0] * 2, need)
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
    version: Any,
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
    """``(nodes, per_focus, residual, trace, pushes, rounds, edges read, converged)``:
    ``per_focus`` the settled plus pending activation of each touched node (in node
    order), ``residual`` what is still pending, per focus.

    ``version`` is the version's arrays as one tuple: ``out`` (indptr, indices, weight,
    edge_type), ``inc`` (indptr, indices, pos), the delta (src, dst, weight, edge_type)
    and its two indexes (by source: keys, order; by target: keys, order)."""
    out_indptr, inc_indptr, dout_keys, din_keys = version[0], version[4], version[11], version[13]
    f = amounts.shape[1]
    slot = np.full(n_nodes, -1, np.int64)
    blocked = np.zeros(n_nodes, np.bool_)
    for c in closed:
        blocked[c] = True
    ids, degree, pending, settled = _touched(max(64, 2 * seeds.shape[0]), f)
    count = _add_nodes(
        _untouched(seeds, slot), 0, slot, ids, degree, out_indptr, inc_indptr, dout_keys, din_keys
    )
    _add_seeds(seeds, amounts, slot, pending)
    trace = np.zeros((max_rounds + 1, f))
    rows = _scan(degree, pending, count, epsilon, trace[0])
    pushes = 0
    rounds = 0
    read = 0
    while rows.shape[0] and rounds < max_rounds and pushes < max_pushes:
        if rows.shape[0] > max_pushes - pushes:
            rows = _most_loaded(rows, ids, degree, pending, max_pushes - pushes)
        moved = _settle(rows, degree, pending, settled, epsilon)
        owner, target, weight, entries = _arcs(ids[rows], version, forward, reverse, blocked)
        read += entries
        new = _untouched(target, slot)
        if count + new.shape[0] > ids.shape[0]:
            ids, degree, pending, settled = _grown(
                ids, degree, pending, settled, count + new.shape[0]
            )
        count = _add_nodes(
            new, count, slot, ids, degree, out_indptr, inc_indptr, dout_keys, din_keys
        )
        _spread(owner, target, weight, moved, slot, pending, gamma)
        pushes += rows.shape[0]
        rounds += 1
        rows = _scan(degree, pending, count, epsilon, trace[rounds])
    order = _by_node(ids, slot, count)
    per_focus, residual = _reached(settled, pending, order)
    return (
        ids[order],
        per_focus,
        residual,
        trace[: rounds + 1],
        pushes,
        rounds,
        read,
        rows.shape[0] == 0,
    )


@njit(cache=True, nogil=True)
def _by_node(ids: Any, slot: Any, count: int) -> Any:
    """The touched rows in node order: a sort of their ids, or, when that would cost
    more than a pass over every node's slot, that pass (the same order: ids are
    distinct)."""
    if count * 64 < slot.shape[0]:
        return np.argsort(ids[:count])
    order = np.empty(count, np.int64)
    j = 0
    for node in range(slot.shape[0]):
        if slot[node] >= 0:
            order[j] = slot[node]
            j += 1
    return order


@njit(cache=True, nogil=True)
def _reached(settled: Any, pending: Any, order: Any) -> tuple[Any, Any]:
    """``settled + pending`` of the rows in ``order``, and the pending amounts summed
    per focus (in that order)."""
    f = pending.shape[1]
    per_focus = np.empty((order.shape[0], f))
    residual = np.zeros(f)
    for j in range(order.shape[0]):
        i = order[j]
        for k in range(f):
            per_focus[j, k] = settled[i, k] + pending[i, k]
            residual[k] += pending[i, k]
    return per_focus, residual


@njit(cache=True, nogil=True)
def _add_seeds(seeds: Any, amounts: Any, slot: Any, pending: Any) -> None:
    for j in range(seeds.shape[0]):
        for k in range(amounts.shape[1]):
            pending[slot[seeds[j]], k] += amounts[j, k]


@njit(cache=True, nogil=True)
def _settle(rows: Any, degree: Any, pending: Any, settled: Any, epsilon: float) -> Any:
    """Move the pending amounts above threshold of ``rows`` into ``settled``; the amounts
    moved (one row per pushed row): the snapshot a round spreads."""
    moved = np.zeros((rows.shape[0], pending.shape[1]))
    for j in range(rows.shape[0]):
        i = rows[j]
        threshold = epsilon * degree[i]
        for k in range(pending.shape[1]):
            if pending[i, k] > threshold:
                moved[j, k] = pending[i, k]
                settled[i, k] += pending[i, k]
                pending[i, k] = 0.0
    return moved


@njit(cache=True, nogil=True)
def _add_nodes(
    new: Any,
    count: int,
    slot: Any,
    ids: Any,
    degree: Any,
    out_indptr: Any,
    inc_indptr: Any,
    dout_keys: Any,
    din_keys: Any,
) -> int:
    """Give each of ``new`` the next row; the new count of touched nodes."""
    n_rows = out_indptr.shape[0] - 1
    in_delta = _delta_degree(new, dout_keys, din_keys)
    for j in range(new.shape[0]):
        node = new[j]
        slot[node] = count
        ids[count] = node
        entries = in_delta[j]
        if node < n_rows:
            entries += out_indptr[node + 1] - out_indptr[node]
            entries += inc_indptr[node + 1] - inc_indptr[node]
        degree[count] = max(entries, 1)
        count += 1
    return count


@njit(cache=True, nogil=True)
def _delta_degree(nodes: Any, dout_keys: Any, din_keys: Any) -> Any:
    """Delta edge entries at each of ``nodes``, both directions (one call per index for
    all the nodes: a call per node would cost its arrays' reference counting)."""
    out_lo, out_hi = _spans(dout_keys, nodes)
    in_lo, in_hi = _spans(din_keys, nodes)
    return (out_hi - out_lo) + (in_hi - in_lo)


@njit(cache=True, nogil=True)
def _spans(keys: Any, nodes: Any) -> tuple[Any, Any]:
    """``lo, hi`` per node with ``keys[lo:hi] == node`` (``keys`` ascending), by binary
    search written out (three times faster than the compiled ``np.searchsorted``)."""
    lo = np.zeros(nodes.shape[0], np.int64)
    hi = np.zeros(nodes.shape[0], np.int64)
    n = keys.shape[0]
    if n == 0:
        return lo, hi
    for j in range(nodes.shape[0]):
        node = nodes[j]
        a, b = 0, n
        while a < b:
            mid = (a + b) >> 1
            if keys[mid] < node:
                a = mid + 1
            else:
                b = mid
        c, d = a, n
        while c < d:
            mid = (c + d) >> 1
            if keys[mid] <= node:
                c = mid + 1
            else:
                d = mid
        lo[j], hi[j] = a, c
    return lo, hi


@njit(cache=True, nogil=True)
def _spread(
    owner: Any, target: Any, weight: Any, moved: Any, slot: Any, pending: Any, gamma: float
) -> None:
    """Add ``gamma * moved[owner] * weight / (owner's total weight)`` along every arc."""
    strength = np.zeros(moved.shape[0])
    for a in range(owner.shape[0]):
        strength[owner[a]] += weight[a]
    for a in range(owner.shape[0]):
        j = owner[a]
        s = slot[target[a]]
        share = gamma * (weight[a] / strength[j])
        for k in range(moved.shape[1]):
            if moved[j, k] != 0.0:
                pending[s, k] += share * moved[j, k]


@njit(cache=True, nogil=True)
def _touched(room: int, f: int) -> tuple[Any, Any, Any, Any]:
    """Empty ids, degrees, pending and settled activation for ``room`` touched nodes."""
    return (
        np.empty(room, np.int64),
        np.empty(room, np.float64),
        np.zeros((room, f)),
        np.zeros((room, f)),
    )


@njit(cache=True, nogil=True)
def _scan(degree: Any, pending: Any, count: int, epsilon: float, sums: Any) -> Any:
    """Rows (touched indices) with some focus pending above ``epsilon * degree``, in the
    order the nodes were first touched; adds each focus's pending total to ``sums`` (one
    pass for the round's decision and its trace)."""
    rows = np.empty(count, np.int64)
    n = 0
    for i in range(count):
        threshold = epsilon * degree[i]
        above = False
        for k in range(pending.shape[1]):
            sums[k] += pending[i, k]
            if pending[i, k] > threshold:
                above = True
        if above:
            rows[n] = i
            n += 1
    return rows[:n]


@njit(cache=True, nogil=True)
def _most_loaded(rows: Any, ids: Any, degree: Any, pending: Any, budget: int) -> Any:
    """The ``budget`` rows of largest pending over degree (ties: node order), in
    first-touch order."""
    by_node = rows[np.argsort(ids[rows])]  # node ids are distinct: any sort is exact
    load = np.empty(by_node.shape[0])
    for j in range(by_node.shape[0]):
        i = by_node[j]
        peak = pending[i, 0]
        for k in range(1, pending.shape[1]):
            peak = max(peak, pending[i, k])
        load[j] = -peak / degree[i]
    return np.sort(by_node[np.argsort(load, kind="mergesort")[:budget]])


@njit(cache=True, nogil=True)
def _untouched(target: Any, slot: Any) -> Any:
    """The distinct nodes of ``target`` without a slot, in first-arrival order."""
    new = np.empty(target.shape[0], np.int64)
    n = 0
    for a in range(target.shape[0]):
        t = target[a]
        if slot[t] == -1:
            slot[t] = -2  # marked; the caller gives it its row
            new[n] = t
            n += 1
    return new[:n]


@njit(cache=True, nogil=True)
def _arcs(
    nodes: Any, version: Any, forward: Any, reverse: Any, blocked: Any
) -> tuple[Any, Any, Any, int]:
    """The open arcs leaving ``nodes`` (``owner`` indexes ``nodes``) with their weights,
    in stored order (base forward, base reverse, delta forward, delta reverse), and the
    edge entries read."""
    (out_indptr, out_indices, out_weight, out_type, inc_indptr, inc_indices, inc_pos) = version[:7]
    (delta_src, delta_dst, delta_weight, delta_type) = version[7:11]
    (dout_keys, dout_order, din_keys, din_order) = version[11:15]
    n_rows = out_indptr.shape[0] - 1
    out_lo, out_hi = _spans(dout_keys, nodes)
    in_lo, in_hi = _spans(din_keys, nodes)
    total = int((out_hi - out_lo).sum() + (in_hi - in_lo).sum())
    for j in range(nodes.shape[0]):
        node = nodes[j]
        if node < n_rows:
            total += out_indptr[node + 1] - out_indptr[node]
            total += inc_indptr[node + 1] - inc_indptr[node]
    owner = np.empty(total, np.int64)
    target = np.empty(total, np.int64)
    weight = np.empty(total, np.float64)
    n = 0
    for j in range(nodes.shape[0]):
        node = nodes[j]
        if node < n_rows:
            for e in range(out_indptr[node], out_indptr[node + 1]):
                w = np.float64(out_weight[e]) * forward[out_type[e]]
                t = np.int64(out_indices[e])
                if w > 0.0 and not blocked[t]:
                    owner[n], target[n], weight[n] = j, t, w
                    n += 1
            for e in range(inc_indptr[node], inc_indptr[node + 1]):
                p = inc_pos[e]
                w = np.float64(out_weight[p]) * reverse[out_type[p]]
                t = np.int64(inc_indices[e])
                if w > 0.0 and not blocked[t]:
                    owner[n], target[n], weight[n] = j, t, w
                    n += 1
        for e in range(out_lo[j], out_hi[j]):
            r = dout_order[e]
            w = np.float64(delta_weight[r]) * forward[delta_type[r]]
            t = np.int64(delta_dst[r])
            if w > 0.0 and not blocked[t]:
                owner[n], target[n], weight[n] = j, t, w
                n += 1
        for e in range(in_lo[j], in_hi[j]):
            r = din_order[e]
            w = np.float64(delta_weight[r]) * reverse[delta_type[r]]
            t = np.int64(delta_src[r])
            if w > 0.0 and not blocked[t]:
                owner[n], target[n], weight[n] = j, t, w
                n += 1
    return owner[:n], target[:n], weight[:n], total
