r"""The per-focus pulse: local, push-style spreading activation over one graph version.

**Rule.** Each stored edge offers up to two *arcs*: source -> target weighted by
``weight * forward[type]`` and target -> source weighted by ``weight * reverse[type]``
(:class:`~.traversal.Traversal`); parallel edges are separate arcs. For a node ``u`` with
arc weights ``w'(u, v)`` the degree-normalised weight is ``w(u, v) = w'(u, v) / sum_x
w'(u, x)``, so the weights leaving ``u`` sum to 1 (to 0 when every arc of ``u`` is closed).
One step moves activation along every arc, ``dA(u -> v) = A(u) * w(u, v) * gamma``, and
contributions arriving by different paths are summed.

**Why the total decays geometrically, whatever the cycles.** Write the step as
``a_{t+1} = gamma * W^T a_t`` with ``W`` the matrix of normalised weights. All entries are
non-negative and every row of ``W`` sums to at most 1, so

    ||a_{t+1}||_1 = gamma * sum_u a_t(u) * sum_v w(u, v) <= gamma * ||a_t||_1,

hence ``||a_t||_1 <= gamma**t * ||a_0||_1``. The argument uses only row sums and
non-negativity, never the absence of cycles: a cycle returns mass to a node that has
already lost a factor ``gamma`` per hop, and that node is simply counted again. The total
activation ``A = sum_t a_t = (I - gamma W^T)^{-1} a_0`` is therefore finite, with
``||A||_1 <= ||a_0||_1 / (1 - gamma)``.

**Push form (how it is computed).** Each focus keeps *settled* activation ``p`` and
*pending* (not yet propagated) activation ``r``; seeds start in ``r``. Pushing ``u`` moves
``r(u)`` into ``p(u)`` and adds ``gamma * r(u) * w(u, .)`` to the pending activation of its
neighbours. The invariant ``A = p + (I - gamma W^T)^{-1} r`` holds after every push, for
any order of pushes, so revisits and cycles need no special case: a node is pushed again
whenever fresh mass has piled up on it. Every push removes at least ``(1 - gamma) r(u)``
from the pending total, which never grows.

**Closed nodes.** A query may close nodes (the memory closes words used by too many
fragments to say anything): arcs into a closed node are dropped before normalisation,
exactly as if its edges were not stored, so the rows of ``W`` still sum to at most 1 and
the argument above is unchanged. Nothing flows into a closed node, so it is never pushed
unless it is a seed.

**Locality.** A node is pushed for a focus only while its pending activation for that
focus exceeds ``epsilon * d(u)``, ``d(u)`` its stored degree (both directions, at least 1).
A push reads ``d(u)`` edge entries and removes at least ``(1 - gamma) * epsilon * d(u)`` of
pending mass, so a focus of seed mass ``m`` reads at most ``m / ((1 - gamma) * epsilon)``
edge entries in all: the cost follows the region the pulse touches, not the graph's size.

**Small graphs, whole-graph rounds.** When the graph has at most ``whole_graph_edges``
stored edges, the same rounds are computed over the whole graph at once: the normalised
weights of every node are one sparse matrix (built once per graph version, traversal and
closed set, and kept with the version: ``GraphVersion.derived``), and a round is
``pending += gamma * W^T (masked pending)``: the same rule, the same thresholds, the
same pushes in the same rounds, so the same activation (to floating-point summation
order, tested), without the bookkeeping of the
touched region that dominates a query on a small graph. Above the limit the local push
keeps a query's cost to its region.

**Rounds and the stopping rule.** The pending queue (every node above threshold) is
drained round by round: all of it is pushed at once, with arrivals summed before the next
round decides. Let ``r_t`` be the pending mass after ``t`` rounds and ``h_t`` the part held
back below threshold (at most ``epsilon * vol``, ``vol`` the summed degree of the touched
nodes). Then ``||r_{t+1}||_1 <= gamma * ||r_t||_1 + (1 - gamma) * h_t``, so

    ||r_t||_1 <= gamma**t * ||a_0||_1 + epsilon * vol,

recorded per focus in :attr:`Activation.pending_trace`. With ``epsilon = 0`` every round
pushes everything, ``r_t`` is exactly the layer ``a_t`` and the bound is the one above.
The pulse stops when the queue is empty, or after ``max_rounds`` rounds, or when the next
round would pass ``max_pushes`` node pushes (that round pushes the most loaded nodes that
fit, then stops). What is still pending is reported in :attr:`Activation.residual` and
added to the result as its own first term; the error left is at most
``gamma * residual / (1 - gamma)`` per focus.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .csr import Arcs, GraphVersion, isin_sorted
from .errors import GraphConfigError, GraphError
from .traversal import Traversal

__all__ = ["Activation", "PulseConfig", "combine", "prepare", "pulse"]

Floats = npt.NDArray[np.float64]
Int64s = npt.NDArray[np.int64]


@dataclass(frozen=True)
class PulseConfig:
    """Damping ``gamma``, expansion threshold ``epsilon`` and the stopping budget."""

    gamma: float = 0.85
    epsilon: float = 1e-4
    max_pushes: int = 100_000
    max_rounds: int = 256
    whole_graph_edges: int = 100_000

    def __post_init__(self) -> None:
        if not 0.0 < self.gamma < 1.0:
            raise GraphConfigError("pulse.gamma", "must lie in (0, 1)")
        if not math.isfinite(self.epsilon) or self.epsilon < 0.0:
            raise GraphConfigError("pulse.epsilon", "must be finite and >= 0")
        if self.max_pushes < 1:
            raise GraphConfigError("pulse.max_pushes", "must be >= 1")
        if self.max_rounds < 1:
            raise GraphConfigError("pulse.max_rounds", "must be >= 1")
        if self.whole_graph_edges < 0:
            raise GraphConfigError("pulse.whole_graph_edges", "must be >= 0")


@dataclass(frozen=True, eq=False)
class Activation:
    """Per-focus activation of the nodes a pulse touched, and what the pulse cost.

    ``per_focus[k, i]`` is the activation that focus ``i`` brought to node ``nodes[k]``
    (``nodes`` sorted); nodes the pulse never reached are absent and have activation 0.
    """

    version: int
    gamma: float
    nodes: Int64s
    per_focus: Floats
    seed_mass: Floats
    residual: Floats
    pending_trace: Floats
    pushes: int
    rounds: int
    edges_visited: int
    converged: bool

    @property
    def n_foci(self) -> int:
        return int(self.seed_mass.shape[0])

    @property
    def nodes_visited(self) -> int:
        return int(self.nodes.shape[0])

    @property
    def total(self) -> Floats:
        """Activation summed over foci, aligned with ``nodes``."""
        return np.asarray(self.per_focus.sum(axis=1), dtype=np.float64)

    def of(self, node: int) -> Floats:
        """The per-focus activation of ``node`` (zeros when the pulse never reached it)."""
        k = int(np.searchsorted(self.nodes, node))
        if k < self.nodes.shape[0] and self.nodes[k] == node:
            return np.array(self.per_focus[k], dtype=np.float64)
        return np.zeros(self.n_foci)

    def as_dict(self) -> dict[int, Floats]:
        """``{node: per-focus activation}`` for every touched node."""
        return {int(v): np.array(row) for v, row in zip(self.nodes, self.per_focus, strict=True)}


def pulse(
    graph: GraphVersion,
    foci: Sequence[Mapping[int, float]],
    traversal: Traversal,
    config: PulseConfig = PulseConfig(),
    *,
    closed: Int64s | None = None,
) -> Activation:
    """Spread every focus's seeds over ``graph``; see the module docstring for the rule.

    ``closed``: sorted node ids no arc may enter (see "Closed nodes")."""
    if not foci:
        raise GraphError("a pulse needs at least one focus")
    if graph.n_edges <= config.whole_graph_edges:
        return _pulse_whole(graph, foci, traversal, config, closed)
    state = _State(graph, len(foci))
    seeds, amounts = _seeds(foci, graph.n_nodes)
    state.add(seeds, amounts)
    seed_mass = amounts.sum(axis=0)
    trace = [state.pending.sum(axis=0)]
    pushes = rounds = read = 0
    while rounds < config.max_rounds and pushes < config.max_pushes:
        mask = state.pending > config.epsilon * state.degree[:, None]
        rows = np.flatnonzero(mask.any(axis=1))
        if rows.shape[0] == 0:
            break
        rows = _within_budget(state, rows, config.max_pushes - pushes)
        read += _push(graph, traversal, config.gamma, state, rows, mask[rows], closed)
        pushes += int(rows.shape[0])
        rounds += 1
        trace.append(state.pending.sum(axis=0))
    converged = not bool(np.any(state.pending > config.epsilon * state.degree[:, None]))
    nodes, settled, pending = state.sorted_by_node()
    work = (pushes, rounds, read, converged)
    return _activation(graph, config, nodes, settled, pending, seed_mass, trace, work)


def _activation(
    graph: GraphVersion,
    config: PulseConfig,
    nodes: Int64s,
    settled: Floats,
    pending: Floats,
    seed_mass: Floats,
    trace: Sequence[Floats],
    work: tuple[int, int, int, bool],
) -> Activation:
    """The result of a pulse: ``settled`` and ``pending`` are the rows of ``nodes``."""
    pushes, rounds, read, converged = work
    return Activation(
        version=graph.version,
        gamma=config.gamma,
        nodes=nodes,
        per_focus=settled + pending,
        seed_mass=seed_mass,
        residual=pending.sum(axis=0),
        pending_trace=np.array(trace, dtype=np.float64),
        pushes=pushes,
        rounds=rounds,
        edges_visited=read,
        converged=converged,
    )


def prepare(
    graph: GraphVersion,
    traversal: Traversal,
    config: PulseConfig = PulseConfig(),
    *,
    closed: Int64s | None = None,
) -> None:
    """Build now what a whole-graph pulse on ``graph`` will need (so a query does not)."""
    if graph.n_edges <= config.whole_graph_edges:
        _whole_graph(graph, traversal, closed)


_SLICE_EDGES = 20_000
"""From this many stored edges on, a round that pushes few rows (under a quarter of the
nodes) multiplies only those rows of the propagation matrix instead of all of it (51k
edges, five LoCoMo conversations: the pulse 5.5 -> 2.9 ms); on smaller graphs the full
product is cheaper than slicing (7.8k edges: 1.3 vs 1.8 ms)."""


@dataclass(frozen=True, eq=False)
class _Whole:
    """The normalised propagation matrix of one graph version (transposed: row v holds
    what v receives), with each node's degree and stored edge entries."""

    receive: Any  # scipy.sparse.csr_matrix, n x n
    send: Any  # the same shares by sender (row u: what u sends), to push only some rows
    degree: Floats
    entries: Int64s
    sliced: bool  # rounds with few pushed rows multiply only those rows of ``send``


def _whole_graph(graph: GraphVersion, traversal: Traversal, closed: Int64s | None) -> _Whole:
    """The version's :class:`_Whole` for ``traversal`` and ``closed``, built once per
    version (:meth:`GraphVersion.derived`; the key holds the traversal object itself, so
    two traversals never share an entry)."""
    key = ("whole", traversal, b"" if closed is None else np.asarray(closed, np.int64).tobytes())
    return graph.derived(key, lambda: _build_whole(graph, traversal, closed))


def _build_whole(graph: GraphVersion, traversal: Traversal, closed: Int64s | None) -> _Whole:
    from scipy import sparse

    n = graph.n_nodes
    nodes = np.arange(n, dtype=np.int64)
    owner, target, share = _normalised(graph.arcs(nodes, traversal), n, closed)
    receive = sparse.csr_matrix((share, (target, owner)), shape=(n, n))
    sliced = graph.n_edges >= _SLICE_EDGES
    send = receive.T.tocsr() if sliced else None
    entries = graph.degree(nodes)
    return _Whole(receive, send, np.maximum(entries, 1).astype(np.float64), entries, sliced)


def _pulse_whole(
    graph: GraphVersion,
    foci: Sequence[Mapping[int, float]],
    traversal: Traversal,
    config: PulseConfig,
    closed: Int64s | None,
) -> Activation:
    """:func:`pulse` computed over the whole graph per round (see "Small graphs")."""
    whole = _whole_graph(graph, traversal, closed)
    n, f = graph.n_nodes, len(foci)
    seeds, amounts = _seeds(foci, n)
    pending = np.zeros((n, f))
    settled = np.zeros((n, f))
    np.add.at(pending, seeds, amounts)
    touched = np.zeros(n, dtype=bool)
    touched[seeds] = True
    threshold = config.epsilon * whole.degree[:, None]
    trace = [pending.sum(axis=0)]
    pushes = rounds = read = 0
    while rounds < config.max_rounds and pushes < config.max_pushes:
        mask = pending > threshold
        rows = np.flatnonzero(mask.any(axis=1))
        if rows.shape[0] == 0:
            break
        if rows.shape[0] > config.max_pushes - pushes:
            load = pending[rows].max(axis=1) / whole.degree[rows]
            best = np.argsort(-load, kind="stable")[: config.max_pushes - pushes]
            rows = np.sort(rows[best])
        moved = np.where(mask[rows], pending[rows], 0.0)
        settled[rows] += moved
        pending[rows] -= moved
        if whole.sliced and rows.shape[0] * 4 < n:  # multiply only the pushed rows
            pending += config.gamma * (whole.send[rows].T @ moved)
        else:
            spread = np.zeros((n, f))
            spread[rows] = moved
            pending += config.gamma * (whole.receive @ spread)
        read += int(whole.entries[rows].sum())
        pushes += int(rows.shape[0])
        rounds += 1
        trace.append(pending.sum(axis=0))
    converged = not bool(np.any(pending > threshold))
    # a node an arc reached holds what arrived (every push moves a positive amount along
    # positive shares), so "touched" is "holds activation", found once, not per round
    touched |= (pending > 0).any(axis=1) | (settled > 0).any(axis=1)
    nodes = np.flatnonzero(touched).astype(np.int64)
    work = (pushes, rounds, read, converged)
    return _activation(
        graph, config, nodes, settled[nodes], pending[nodes], amounts.sum(axis=0), trace, work
    )


def combine(parts: Sequence[Activation]) -> Activation:
    """The activations of separate pulses as one, their foci side by side (in order).

    Foci never interact (each has its own pending mass and threshold), so pulsing some foci
    now and others later, then combining, gives the activation one pulse of all of them
    would: what lets a query start spreading its lexical foci while its embedding is
    still being computed. Work counters are summed, ``rounds`` is the longest pulse's.
    """
    if not parts:
        raise GraphError("nothing to combine")
    if len({p.version for p in parts}) != 1 or len({p.gamma for p in parts}) != 1:
        raise GraphError("activations of different graph versions or dampings")
    nodes = np.unique(np.concatenate([p.nodes for p in parts]))
    per_focus = np.zeros((nodes.shape[0], sum(p.n_foci for p in parts)))
    column = 0
    for part in parts:
        rows = np.searchsorted(nodes, part.nodes)
        per_focus[rows, column : column + part.n_foci] = part.per_focus
        column += part.n_foci
    rounds = max(p.pending_trace.shape[0] for p in parts)
    trace = np.concatenate(
        [
            np.vstack(
                [p.pending_trace, np.repeat(p.pending_trace[-1:], rounds - len(p.pending_trace), 0)]
            )
            for p in parts
        ],
        axis=1,
    )
    return Activation(
        version=parts[0].version,
        gamma=parts[0].gamma,
        nodes=nodes,
        per_focus=per_focus,
        seed_mass=np.concatenate([p.seed_mass for p in parts]),
        residual=np.concatenate([p.residual for p in parts]),
        pending_trace=trace,
        pushes=sum(p.pushes for p in parts),
        rounds=max(p.rounds for p in parts),
        edges_visited=sum(p.edges_visited for p in parts),
        converged=all(p.converged for p in parts),
    )


def _push(
    graph: GraphVersion,
    traversal: Traversal,
    gamma: float,
    state: _State,
    rows: Int64s,
    mask: npt.NDArray[np.bool_],
    closed: Int64s | None = None,
) -> int:
    """Push the masked pending activation of ``rows``; returns the edge entries read."""
    amounts = np.where(mask, state.pending[rows], 0.0)
    state.settled[rows] += amounts
    state.pending[rows] -= amounts
    arcs = graph.arcs(state.ids[rows], traversal)
    owner, target, share = _normalised(arcs, rows.shape[0], closed)
    state.add(target, gamma * share[:, None] * amounts[owner])
    return arcs.read


def _normalised(
    arcs: Arcs, n_owners: int, closed: Int64s | None = None
) -> tuple[Int64s, Int64s, Floats]:
    """Open arcs with weights divided by their owner's total (degree normalisation)."""
    keep = arcs.weight > 0.0
    if closed is not None:
        keep &= ~isin_sorted(arcs.target, closed)
    owner = arcs.owner[keep]
    strength = np.bincount(owner, weights=arcs.weight[keep], minlength=n_owners)
    return owner, arcs.target[keep], arcs.weight[keep] / strength[owner]


def _within_budget(state: _State, rows: Int64s, budget: int) -> Int64s:
    """All of ``rows`` when they fit, else the ``budget`` most loaded (pending / degree)."""
    if rows.shape[0] <= budget:
        return rows
    load = state.pending[rows].max(axis=1) / state.degree[rows]
    best = np.argsort(-load, kind="stable")[:budget]
    return np.sort(rows[best])


def _seeds(foci: Sequence[Mapping[int, float]], n: int) -> tuple[Int64s, Floats]:
    """Seed nodes and a one-hot-per-focus amount matrix, validated."""
    nodes: list[int] = []
    rows: list[npt.NDArray[np.float64]] = []
    for i, focus in enumerate(foci):
        for node, value in focus.items():
            if not 0 <= int(node) < n:
                raise GraphError(f"focus {i}: seed node {node} is not in the graph")
            if not math.isfinite(value) or value < 0:
                raise GraphError(f"focus {i}: seed activation must be finite and >= 0")
            row = np.zeros(len(foci))
            row[i] = value
            nodes.append(int(node))
            rows.append(row)
    amounts = np.array(rows, dtype=np.float64).reshape(len(rows), len(foci))
    return np.array(nodes, dtype=np.int64), amounts


class _State:
    """Settled and pending activation of the touched nodes, in order of first touch.

    Local arrays (not length-``n`` ones) keep a query's memory and time proportional to
    the region it touches; ``_sorted`` and ``_slot`` find a node's row by binary search.
    """

    def __init__(self, graph: GraphVersion, n_foci: int) -> None:
        self.graph = graph
        self.ids: Int64s = np.empty(0, np.int64)
        self.degree: Floats = np.empty(0, np.float64)
        self.settled: Floats = np.empty((0, n_foci))
        self.pending: Floats = np.empty((0, n_foci))
        self._sorted: Int64s = np.empty(0, np.int64)
        self._slot: Int64s = np.empty(0, np.int64)

    def add(self, targets: Int64s, amounts: Floats) -> None:
        """Add ``amounts[j]`` to the pending activation of ``targets[j]`` (summing repeats)."""
        if targets.shape[0] == 0:
            return
        uniq, inverse = np.unique(targets, return_inverse=True)
        sums = np.stack(
            [np.bincount(inverse, weights=col, minlength=uniq.shape[0]) for col in amounts.T],
            axis=1,
        )
        slots = self._slots(uniq)
        missing = slots < 0
        if missing.any():
            slots[missing] = self._append(uniq[missing])
        self.pending[slots] += sums

    def sorted_by_node(self) -> tuple[Int64s, Floats, Floats]:
        """``ids``, ``settled`` and ``pending`` reordered by node id."""
        return self._sorted, self.settled[self._slot], self.pending[self._slot]

    def _slots(self, uniq: Int64s) -> Int64s:
        """Row of each of ``uniq`` (sorted), or -1 where the node is not touched yet."""
        out = np.full(uniq.shape[0], -1, dtype=np.int64)
        if self._sorted.shape[0] == 0:
            return out
        pos = np.minimum(np.searchsorted(self._sorted, uniq), self._sorted.shape[0] - 1)
        found = self._sorted[pos] == uniq
        out[found] = self._slot[pos[found]]
        return out

    def _append(self, new: Int64s) -> Int64s:
        start = self.ids.shape[0]
        zeros = np.zeros((new.shape[0], self.settled.shape[1]))
        self.ids = np.concatenate([self.ids, new])
        self.degree = np.concatenate(
            [self.degree, np.maximum(self.graph.degree(new), 1).astype(np.float64)]
        )
        self.settled = np.concatenate([self.settled, zeros])
        self.pending = np.concatenate([self.pending, zeros])
        self._slot = np.argsort(self.ids, kind="stable").astype(np.int64)
        self._sorted = self.ids[self._slot]
        return np.arange(start, self.ids.shape[0], dtype=np.int64)
