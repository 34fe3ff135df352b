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

**Compiled.** The rounds below run as one compiled loop (:mod:`memory_core.graph.compiled.push`,
numba) over the touched region, reading the version's CSR, reverse index and delta as they are:
nothing is built per version, a query costs what its pushes read, and the GIL is released meanwhile.

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
from functools import cached_property

import numpy as np
import numpy.typing as npt
from numba import njit
from pydantic import Field

from .compiled.push import push_rounds
from .csr import GraphVersion
from .errors import GraphError, GraphModel
from .traversal import Traversal

__all__ = ["DEFAULT_PULSE", "Activation", "PulseConfig", "combine", "pulse"]

Floats = npt.NDArray[np.float64]
Int64s = npt.NDArray[np.int64]


class PulseConfig(GraphModel):
    """Damping ``gamma``, expansion threshold ``epsilon`` and the stopping budget
    (``retrieval.pulse``)."""

    section = "pulse"
    gamma: float = Field(0.85, gt=0, lt=1)
    epsilon: float = Field(1e-4, ge=0)
    max_pushes: int = Field(100_000, ge=1)
    max_rounds: int = Field(256, ge=1)



DEFAULT_PULSE = PulseConfig()
"""The documented pulse settings."""

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
        return self._reduced[0]

    @property
    def peak(self) -> Floats:
        """Each focus's highest activation of a node (zeros with no node)."""
        return self._reduced[1]

    @cached_property
    def _reduced(self) -> tuple[Floats, Floats]:
        """Row totals and column peaks of ``per_focus`` in one compiled pass (numpy's
        strided reductions over a tall, narrow matrix cost a few percent of a lookup)."""
        return _totals_and_peaks(np.ascontiguousarray(self.per_focus, dtype=np.float64))

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
    config: PulseConfig = DEFAULT_PULSE,
    *,
    closed: Int64s | None = None,
) -> Activation:
    """Spread every focus's seeds over ``graph``; see the module docstring for the rule.

    ``closed``: sorted node ids no arc may enter (see "Closed nodes")."""
    if not foci:
        raise GraphError("a pulse needs at least one focus")
    seeds, amounts = _seeds(foci, graph.n_nodes)
    out, inc, delta = graph.out, graph.inc, graph.delta
    dout, din = graph.delta_indexes
    version = (
        *(out.indptr, out.indices, out.weight, out.edge_type, inc.indptr, inc.indices, inc.pos),
        *(delta.src, delta.dst, delta.weight, delta.edge_type),
        *(dout.keys, dout.order, din.keys, din.order),
    )
    nodes, per_focus, residual, trace, pushes, rounds, read, converged = push_rounds(
        version,
        traversal.forward_table,
        traversal.reverse_table,
        _NO_NODES if closed is None else np.asarray(closed, np.int64),
        graph.n_nodes,
        seeds,
        amounts,
        config.gamma,
        config.epsilon,
        config.max_pushes,
        config.max_rounds,
    )
    work = (pushes, rounds, read, converged)
    return _activation(graph, config, nodes, per_focus, residual, amounts.sum(axis=0), trace, work)


_NO_NODES = np.empty(0, np.int64)


def _activation(
    graph: GraphVersion,
    config: PulseConfig,
    nodes: Int64s,
    per_focus: Floats,
    residual: Floats,
    seed_mass: Floats,
    trace: Sequence[Floats],
    work: tuple[int, int, int, bool],
) -> Activation:
    """The result of a pulse: ``per_focus`` (settled plus pending) are the rows of
    ``nodes``, ``residual`` what is still pending per focus."""
    pushes, rounds, read, converged = work
    return Activation(
        version=graph.version,
        gamma=config.gamma,
        nodes=nodes,
        per_focus=per_focus,
        seed_mass=seed_mass,
        residual=residual,
        pending_trace=np.array(trace, dtype=np.float64),
        pushes=pushes,
        rounds=rounds,
        edges_visited=read,
        converged=converged,
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
    nodes = parts[0].nodes
    places = [np.arange(nodes.shape[0], dtype=np.int64)]  # each part's rows in ``nodes``
    for part in parts[1:]:
        nodes, before, mine = sorted_union(nodes, part.nodes)
        places = [before[rows] for rows in places] + [mine]
    per_focus = np.zeros((nodes.shape[0], sum(p.n_foci for p in parts)))
    column = 0
    for part, rows in zip(parts, places, strict=True):
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


@njit(cache=True, nogil=True)
def sorted_union(a: Int64s, b: Int64s) -> tuple[Int64s, Int64s, Int64s]:
    """The union of two sorted arrays of distinct nodes, and where each element of ``a``
    and of ``b`` sits in it: one merge (``np.unique`` of the concatenation sorted it again,
    7 % of a lookup over 100k fragments)."""
    out = np.empty(a.shape[0] + b.shape[0], np.int64)
    in_a = np.empty(a.shape[0], np.int64)
    in_b = np.empty(b.shape[0], np.int64)
    i = j = k = 0
    while i < a.shape[0] or j < b.shape[0]:
        if j == b.shape[0] or (i < a.shape[0] and a[i] < b[j]):
            out[k], in_a[i] = a[i], k
            i += 1
        elif i == a.shape[0] or b[j] < a[i]:
            out[k], in_b[j] = b[j], k
            j += 1
        else:
            out[k], in_a[i], in_b[j] = a[i], k, k
            i += 1
            j += 1
        k += 1
    return out[:k], in_a, in_b


@njit(cache=True, nogil=True)
def _totals_and_peaks(per_focus: Floats) -> tuple[Floats, Floats]:
    n, k = per_focus.shape
    totals = np.empty(n)
    peaks = np.zeros(k)
    for i in range(n):
        total = 0.0
        for j in range(k):
            value = per_focus[i, j]
            total += value
            if value > peaks[j]:
                peaks[j] = value
        totals[i] = total
    return totals, peaks
