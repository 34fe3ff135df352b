"""Slow, obviously-correct dense references for the graph engine, and random small graphs.

The other ``test_graph_*`` modules check the package against these. Everything here is
loops over edges and dense matrices: no CSR, no push, no sorting tricks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.graph import EdgeList, GraphVersion, Traversal

Floats = npt.NDArray[np.float64]
N_TYPES = 4


@dataclass(frozen=True)
class SmallGraph:
    """A random small graph as plain Python lists, plus its package form."""

    n: int
    src: list[int]
    dst: list[int]
    weight: list[float]
    edge_type: list[int]
    kinds: list[int]

    def edges(self) -> EdgeList:
        return EdgeList.from_arrays(
            self.src,
            self.dst,
            weight=self.weight,
            edge_id=list(range(100, 100 + len(self.src))),
            edge_type=self.edge_type,
        )

    def version(self) -> GraphVersion:
        return GraphVersion.build(self.kinds, self.edges())


@st.composite
def small_graphs(draw: st.DrawFn, max_nodes: int = 12, max_edges: int = 36) -> SmallGraph:
    n = draw(st.integers(1, max_nodes))
    m = draw(st.integers(0, max_edges))
    node = st.integers(0, n - 1)
    return SmallGraph(
        n=n,
        src=draw(st.lists(node, min_size=m, max_size=m)),
        dst=draw(st.lists(node, min_size=m, max_size=m)),
        weight=draw(st.lists(st.sampled_from([0.0, 0.25, 1.0, 2.5]), min_size=m, max_size=m)),
        edge_type=draw(st.lists(st.integers(0, N_TYPES - 1), min_size=m, max_size=m)),
        kinds=draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)),
    )


@st.composite
def traversals(draw: st.DrawFn) -> Traversal:
    multiplier = st.sampled_from([0.0, 0.5, 1.0, 2.0])
    rules = {t: (draw(multiplier), draw(multiplier)) for t in range(N_TYPES)}
    return Traversal(rules)


@st.composite
def foci_for(draw: st.DrawFn, n: int, max_foci: int = 3) -> list[dict[int, float]]:
    count = draw(st.integers(1, max_foci))
    value = st.sampled_from([0.5, 1.0, 2.0])
    return [
        draw(st.dictionaries(st.integers(0, n - 1), value, min_size=1, max_size=3))
        for _ in range(count)
    ]


def dense_weights(graph: SmallGraph, traversal: Traversal) -> Floats:
    """``W[u, v]``: summed effective arc weights u -> v (parallel edges add)."""
    w = np.zeros((graph.n, graph.n))
    for u, v, weight, t in zip(graph.src, graph.dst, graph.weight, graph.edge_type, strict=True):
        forward, reverse = traversal.multipliers(t)
        w[u, v] += np.float32(weight) * forward
        w[v, u] += np.float32(weight) * reverse
    return w


def dense_transition(graph: SmallGraph, traversal: Traversal) -> Floats:
    """Row-normalised arc weights; rows of nodes with no open arc stay zero."""
    w = dense_weights(graph, traversal)
    p = np.zeros_like(w)
    for u in range(graph.n):
        if w[u].sum() > 0:
            p[u] = w[u] / w[u].sum()
    return p


def seed_matrix(n: int, foci: list[dict[int, float]]) -> Floats:
    a0 = np.zeros((n, len(foci)))
    for i, focus in enumerate(foci):
        for node, value in focus.items():
            a0[node, i] += value
    return a0


def dense_layers(p: Floats, a0: Floats, gamma: float, steps: int) -> list[Floats]:
    """``a_0, a_1, ...``: each step moves ``A(u) * p(u, v) * gamma`` along every arc."""
    layers = [a0]
    for _ in range(steps):
        nxt = np.zeros_like(a0)
        for u in range(p.shape[0]):
            for v in range(p.shape[0]):
                nxt[v] += layers[-1][u] * p[u, v] * gamma
        layers.append(nxt)
    return layers


@dataclass(frozen=True)
class Rounds:
    """What :func:`dense_rounds` computed: activation (settled + pending) per node and
    focus, the touched nodes, and the work counters of the pulse."""

    per_focus: Floats
    touched: list[int]
    pushes: int
    rounds: int
    read: int
    converged: bool
    margin: float
    """How close any decision came to flipping: the least relative distance of a pending
    amount from its threshold, or of two loads compared at a binding budget. Below ~1e-9
    another summation order (the package's) may decide the other way."""


def dense_rounds(
    graph: SmallGraph,
    traversal: Traversal,
    foci: list[dict[int, float]],
    *,
    gamma: float,
    epsilon: float,
    max_rounds: int,
    max_pushes: int,
    closed: tuple[int, ...] = (),
) -> Rounds:
    """The pulse's round rule on dense matrices: each round pushes, at once, every node
    whose pending activation for some focus exceeds ``epsilon * degree`` (the most loaded,
    pending over degree and then node id, when the round would pass ``max_pushes``)."""
    w = dense_weights(graph, traversal)
    w[:, list(closed)] = 0.0
    p = np.zeros_like(w)
    for u in range(graph.n):
        if w[u].sum() > 0:
            p[u] = w[u] / w[u].sum()
    degree = np.maximum(np.bincount(graph.src + graph.dst, minlength=graph.n), 1)
    pending = seed_matrix(graph.n, foci)
    settled = np.zeros_like(pending)
    touched = {n for focus in foci for n in focus}
    pushes = rounds = read = 0
    threshold = epsilon * degree[:, None]
    margin = math.inf

    def closeness(a: Floats, b: Floats) -> float:
        scale = np.maximum(np.maximum(np.abs(a), np.abs(b)), 1e-300)
        return float((np.abs(a - b) / scale).min()) if a.size else math.inf

    while rounds < max_rounds and pushes < max_pushes:
        live = pending > 0
        margin = min(
            margin, closeness(pending[live], np.broadcast_to(threshold, pending.shape)[live])
        )
        rows = [u for u in range(graph.n) if (pending[u] > threshold[u]).any()]
        if not rows:
            break
        if len(rows) > max_pushes - pushes:
            loads = np.array(sorted(pending[u].max() / degree[u] for u in rows))
            margin = min(margin, closeness(loads[1:], loads[:-1]))
            rows = sorted(rows, key=lambda u: (-pending[u].max() / degree[u], u))
            rows = sorted(rows[: max_pushes - pushes])
        moved = np.zeros_like(pending)
        for u in rows:
            moved[u] = np.where(pending[u] > threshold[u], pending[u], 0.0)
            read += int(np.count_nonzero(np.array(graph.src) == u))
            read += int(np.count_nonzero(np.array(graph.dst) == u))
            touched.update(int(v) for v in np.flatnonzero(p[u] > 0))
        settled += moved
        pending = pending - moved + gamma * p.T @ moved
        pushes += len(rows)
        rounds += 1
    live = pending > 0
    margin = min(margin, closeness(pending[live], np.broadcast_to(threshold, pending.shape)[live]))
    converged = not (pending > threshold).any()
    return Rounds(settled + pending, sorted(touched), pushes, rounds, read, converged, margin)


def dense_activation(p: Floats, a0: Floats, gamma: float) -> Floats:
    """The fixed point ``sum_t a_t = (I - gamma P^T)^{-1} a_0``."""
    return np.asarray(np.linalg.solve(np.eye(p.shape[0]) - gamma * p.T, a0), dtype=np.float64)


def dense_laplacian(graph: SmallGraph, traversal: Traversal, nodes: list[int]) -> Floats:
    """``D - W`` of the symmetrised region ``nodes`` (self-loops dropped)."""
    index = {v: k for k, v in enumerate(nodes)}
    a = np.zeros((len(nodes), len(nodes)))
    for u, v, weight, t in zip(graph.src, graph.dst, graph.weight, graph.edge_type, strict=True):
        if u in index and v in index and u != v:
            forward, reverse = traversal.multipliers(t)
            a[index[u], index[v]] += np.float32(weight) * forward
            a[index[v], index[u]] += np.float32(weight) * reverse
    w = (a + a.T) / 2
    return np.diag(w.sum(axis=1)) - w


def dense_wave(
    laplacian: Floats, psi0: Floats, alpha: Floats, c: float, beta: float, dt: float, steps: int
) -> tuple[Floats, Floats]:
    """The two-step form of the damped leapfrog, started at rest; returns (C, per focus)."""
    k = c * c * laplacian
    previous = None
    current = psi0.copy()
    combined = np.zeros(psi0.shape[0])
    per_focus = np.zeros_like(psi0)
    for _ in range(steps):
        combined += (current @ alpha) ** 2 * dt
        per_focus += current**2 * dt
        if previous is None:
            nxt = current - dt * dt / 2 * (k @ current)
        else:
            nxt = (2 * current - (1 - beta * dt / 2) * previous - dt * dt * (k @ current)) / (
                1 + beta * dt / 2
            )
        previous, current = current, nxt
    return combined, per_focus


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_reference_layers_sum_to_the_fixed_point(data: st.DataObject) -> None:
    graph = data.draw(small_graphs(max_nodes=6, max_edges=12))
    traversal = data.draw(traversals())
    a0 = seed_matrix(graph.n, data.draw(foci_for(graph.n)))
    p = dense_transition(graph, traversal)
    layers = dense_layers(p, a0, 0.5, 60)
    np.testing.assert_allclose(sum(layers), dense_activation(p, a0, 0.5), atol=1e-12)


def test_reference_laplacian_rows_sum_to_zero() -> None:
    graph = SmallGraph(3, [0, 1, 1], [1, 2, 2], [1.0, 2.0, 0.5], [0, 1, 1], [0, 0, 0])
    lap = dense_laplacian(graph, Traversal({0: (1.0, 0.0), 1: (1.0, 1.0)}), [0, 1, 2])
    np.testing.assert_allclose(lap.sum(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(lap, lap.T)
    assert lap[0, 1] == -0.5 and lap[1, 2] == -2.5
