"""The pulse against the dense reference, its decay and locality bounds, and named cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memory_core.graph import (
    DEFAULT_TRAVERSAL,
    EdgeList,
    EdgeType,
    GraphConfigError,
    GraphError,
    GraphVersion,
    NodeKind,
    PulseConfig,
    Traversal,
    combine,
    pulse,
    select_area,
)
from memory_core.graph.activation import sorted_union

from .test_graph_reference import (
    SmallGraph,
    dense_activation,
    dense_layers,
    dense_rounds,
    dense_transition,
    foci_for,
    seed_matrix,
    small_graphs,
    traversals,
)

gammas = st.sampled_from([0.3, 0.5, 0.85])


def dense_result(graph: SmallGraph, n: int, nodes: np.ndarray, per_focus: np.ndarray) -> np.ndarray:
    full = np.zeros((n, per_focus.shape[1]))
    full[nodes] = per_focus
    return full


@settings(max_examples=80, deadline=None)
@given(graph=small_graphs(), traversal=traversals(), gamma=gammas, data=st.data())
def test_pulse_matches_the_dense_fixed_point(
    graph: SmallGraph, traversal: Traversal, gamma: float, data: st.DataObject
) -> None:
    foci = data.draw(foci_for(graph.n))
    config = PulseConfig(gamma=gamma, epsilon=1e-13, max_rounds=5000, max_pushes=10**7)
    result = pulse(graph.version(), foci, traversal, config)
    expected = dense_activation(
        dense_transition(graph, traversal), seed_matrix(graph.n, foci), gamma
    )
    got = dense_result(graph, graph.n, result.nodes, result.per_focus)
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-9)
    assert result.converged
    assert set(result.nodes.tolist()) >= set(np.flatnonzero(expected.sum(axis=1) > 0).tolist())


@settings(max_examples=60, deadline=None)
@given(
    graph=small_graphs(),
    traversal=traversals(),
    gamma=gammas,
    epsilon=st.sampled_from([1e-3, 1e-2, 0.1, 1.0]),
    data=st.data(),
)
def test_a_coarse_pulse_stays_within_its_documented_error(
    graph: SmallGraph,
    traversal: Traversal,
    gamma: float,
    epsilon: float,
    data: st.DataObject,
) -> None:
    foci = data.draw(foci_for(graph.n))
    result = pulse(graph.version(), foci, traversal, PulseConfig(gamma=gamma, epsilon=epsilon))
    exact = dense_activation(dense_transition(graph, traversal), seed_matrix(graph.n, foci), gamma)
    missing = exact - dense_result(graph, graph.n, result.nodes, result.per_focus)
    assert missing.min() >= -1e-9
    assert (missing.sum(axis=0) <= gamma * result.residual / (1 - gamma) + 1e-9).all()


@settings(max_examples=60, deadline=None)
@given(graph=small_graphs(), traversal=traversals(), gamma=gammas, data=st.data())
def test_mass_injected_after_t_steps_is_at_most_gamma_to_the_t(
    graph: SmallGraph, traversal: Traversal, gamma: float, data: st.DataObject
) -> None:
    foci = data.draw(foci_for(graph.n))
    steps = 12
    config = PulseConfig(gamma=gamma, epsilon=0.0, max_pushes=10**6, max_rounds=steps)
    result = pulse(graph.version(), foci, traversal, config)
    a0 = seed_matrix(graph.n, foci)
    layers = dense_layers(dense_transition(graph, traversal), a0, gamma, steps)
    seed_mass = a0.sum(axis=0)
    trace = result.pending_trace
    assert trace.shape[1] == len(foci) and trace.shape[0] == result.rounds + 1
    for t in range(steps + 1):
        injected = trace[t] if t < trace.shape[0] else np.zeros(len(foci))
        np.testing.assert_allclose(injected, layers[t].sum(axis=0), atol=1e-12)
        assert (injected <= gamma**t * seed_mass * (1 + 1e-12)).all()
    assert (result.per_focus.sum(axis=0) <= seed_mass / (1 - gamma) * (1 + 1e-12)).all()


@settings(max_examples=60, deadline=None)
@given(
    graph=small_graphs(),
    traversal=traversals(),
    gamma=gammas,
    epsilon=st.sampled_from([1e-3, 1e-2, 0.1]),
    data=st.data(),
)
def test_thresholded_rounds_obey_the_pending_mass_bound(
    graph: SmallGraph,
    traversal: Traversal,
    gamma: float,
    epsilon: float,
    data: st.DataObject,
) -> None:
    foci = data.draw(foci_for(graph.n))
    version = graph.version()
    result = pulse(version, foci, traversal, PulseConfig(gamma=gamma, epsilon=epsilon))
    volume = np.maximum(version.degree(result.nodes), 1).sum()
    for t, pending in enumerate(result.pending_trace):
        assert (pending <= gamma**t * result.seed_mass + epsilon * volume + 1e-12).all()
    bound = result.seed_mass.sum() / ((1 - gamma) * epsilon) if epsilon else np.inf
    reads_from_seeds = version.degree(np.array(sorted({n for f in foci for n in f}))).sum()
    assert result.edges_visited <= bound + reads_from_seeds


@settings(max_examples=40, deadline=None)
@given(graph=small_graphs(), traversal=traversals(), data=st.data())
def test_each_focus_is_its_own_pulse(
    graph: SmallGraph, traversal: Traversal, data: st.DataObject
) -> None:
    foci = data.draw(foci_for(graph.n))
    config = PulseConfig(epsilon=0.0, max_rounds=30)
    together = pulse(graph.version(), foci, traversal, config)
    joint = dense_result(graph, graph.n, together.nodes, together.per_focus)
    for i, focus in enumerate(foci):
        alone = pulse(graph.version(), [focus], traversal, config)
        single = dense_result(graph, graph.n, alone.nodes, alone.per_focus)
        np.testing.assert_allclose(joint[:, i], single[:, 0], rtol=1e-12, atol=1e-15)


def dreamer_graph() -> GraphVersion:
    """0 Dreamer (entity); 1 describes it; 2, later, corrects 1 without naming it; 3-4 noise."""
    kinds = [NodeKind.ENTITY, NodeKind.FRAGMENT, NodeKind.FRAGMENT, NodeKind.FRAGMENT]
    kinds.append(NodeKind.ENTITY)
    edges = EdgeList.from_arrays(
        [1, 2, 3],
        [0, 1, 4],
        edge_id=[11, 12, 13],
        edge_type=[EdgeType.MENTIONS, EdgeType.CORRECTS, EdgeType.MENTIONS],
    )
    return GraphVersion.build(kinds, edges)


def test_a_query_at_dreamer_reaches_its_description_and_the_later_correction() -> None:
    graph = dreamer_graph()
    result = pulse(graph, [{0: 1.0}], DEFAULT_TRAVERSAL)
    assert result.of(1)[0] > 0 and result.of(2)[0] > 0
    assert result.of(3)[0] == 0 and result.of(4)[0] == 0
    area = select_area(graph, result, DEFAULT_TRAVERSAL)
    assert area.chosen is not None
    assert {0, 1, 2} <= set(area.chosen.region.nodes.tolist())
    assert set(area.fragments.tolist()) == {1, 2}
    assert sorted(area.chosen.region.edges.edge_id.tolist()) == [11, 12]


def test_without_reverse_traversal_dreamer_reaches_nothing() -> None:
    forward_only = Traversal({}, default=(1.0, 0.0))
    result = pulse(dreamer_graph(), [{0: 1.0}], forward_only)
    assert result.nodes.tolist() == [0]


def test_parallel_edges_add_their_weights_instead_of_merging() -> None:
    edges = EdgeList.from_arrays([0, 0, 0], [1, 1, 2], edge_id=[1, 2, 3], edge_type=[0, 1, 0])
    result = pulse(GraphVersion.build([0, 0, 0], edges), [{0: 1.0}], Traversal({}, (1.0, 0.0)))
    assert result.of(1)[0] == pytest.approx(2 * result.of(2)[0])
    assert result.of(1)[0] == pytest.approx(0.85 * 2 / 3)


def test_edges_and_nodes_in_the_delta_are_traversed() -> None:
    base = GraphVersion.build([0, 0], EdgeList.from_arrays([0], [1]))
    grown = base.with_delta(EdgeList.from_arrays([1, 3], [2, 2], edge_id=[5, 6]), [0, 0])
    result = pulse(grown, [{0: 1.0}], Traversal())
    assert set(result.nodes.tolist()) == {0, 1, 2, 3}
    assert result.version == 1


def test_cost_follows_the_touched_region_not_the_graph() -> None:
    ring = 20
    ring_edges = (np.arange(ring), (np.arange(ring) + 1) % ring)
    small = GraphVersion.build([0] * ring, EdgeList.from_arrays(*ring_edges))
    rng = np.random.default_rng(7)
    n_big, m_big = 200_000, 600_000
    far = (ring + rng.integers(0, n_big, m_big), ring + rng.integers(0, n_big, m_big))
    big = GraphVersion.build(
        [0] * (ring + n_big),
        EdgeList.from_arrays(
            np.concatenate([ring_edges[0], far[0]]), np.concatenate([ring_edges[1], far[1]])
        ),
    )
    config = PulseConfig(epsilon=1e-4)
    a = pulse(small, [{0: 1.0}, {10: 1.0}], Traversal(), config)
    b = pulse(big, [{0: 1.0}, {10: 1.0}], Traversal(), config)
    assert (a.pushes, a.edges_visited, a.nodes_visited) == (
        b.pushes,
        b.edges_visited,
        b.nodes_visited,
    )
    np.testing.assert_array_equal(a.per_focus, b.per_focus)


def test_work_is_bounded_by_seed_mass_over_epsilon_on_a_large_graph() -> None:
    rng = np.random.default_rng(3)
    n, m = 50_000, 400_000
    graph = GraphVersion.build(
        [0] * n, EdgeList.from_arrays(rng.integers(0, n, m), rng.integers(0, n, m))
    )
    config = PulseConfig(gamma=0.85, epsilon=1e-3)
    result = pulse(graph, [{1: 1.0}, {2: 1.0}, {3: 1.0}], Traversal(), config)
    assert result.converged
    assert result.edges_visited <= 3 / ((1 - 0.85) * 1e-3)
    assert result.nodes_visited < n // 2


def test_the_push_budget_stops_the_pulse() -> None:
    ring = GraphVersion.build(
        [0] * 50, EdgeList.from_arrays(np.arange(50), (np.arange(50) + 1) % 50)
    )
    result = pulse(ring, [{0: 1.0}], Traversal(), PulseConfig(epsilon=1e-9, max_pushes=3))
    assert result.pushes == 3 and not result.converged
    assert result.residual[0] > 0 and result.residual[0] == result.pending_trace[-1][0]
    capped = pulse(ring, [{0: 1.0}], Traversal(), PulseConfig(epsilon=1e-9, max_rounds=2))
    assert capped.rounds == 2 and not capped.converged


@pytest.mark.parametrize(
    ("foci", "message"),
    [([], "at least one focus"), ([{9: 1.0}], "not in the graph"), ([{0: -1.0}], ">= 0")],
)
def test_malformed_foci_are_refused(foci: list[dict[int, float]], message: str) -> None:
    with pytest.raises(GraphError, match=message):
        pulse(dreamer_graph(), foci, Traversal())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gamma": 1.0},
        {"gamma": 0.0},
        {"epsilon": -1.0},
        {"max_pushes": 0},
        {"max_rounds": 0},
    ],
)
def test_invalid_pulse_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(GraphConfigError, match="pulse"):
        PulseConfig(**kwargs)  # type: ignore[arg-type]


def test_activation_lookups() -> None:
    result = pulse(dreamer_graph(), [{0: 1.0}, {3: 2.0}], DEFAULT_TRAVERSAL)
    assert result.n_foci == 2 and result.nodes_visited == 5
    assert result.of(99).tolist() == [0.0, 0.0]
    table = result.as_dict()
    assert set(table) == {0, 1, 2, 3, 4}
    np.testing.assert_allclose(table[3], result.of(3))
    np.testing.assert_allclose(result.total, result.per_focus.sum(axis=1))


@settings(max_examples=120, deadline=None)
@given(
    graph=small_graphs(),
    traversal=traversals(),
    gamma=gammas,
    epsilon=st.sampled_from([0.0, 1e-4, 1e-2, 0.1]),
    cut=st.integers(0, 40),
    max_pushes=st.sampled_from([1, 2, 5, 10**6]),
    data=st.data(),
)
def test_the_compiled_push_follows_the_round_rule(
    graph: SmallGraph,
    traversal: Traversal,
    gamma: float,
    epsilon: float,
    cut: int,
    max_pushes: int,
    data: st.DataObject,
) -> None:
    """Same activation, touched nodes, pushes, rounds, reads and convergence as the dense
    reference of the round rule, with edges split between base and delta, closed nodes
    and a push budget that binds."""
    foci = data.draw(foci_for(graph.n))
    seeds = {n for f in foci for n in f}
    closed = sorted(set(data.draw(st.lists(st.integers(0, graph.n - 1), max_size=3))) - seeds)
    edges = graph.version().edges()
    cut = min(cut, len(edges))
    base = GraphVersion.build(graph.kinds, edges.take(np.arange(cut)))
    version = base.with_delta(edges.take(np.arange(cut, len(edges))))
    config = PulseConfig(gamma=gamma, epsilon=epsilon, max_rounds=60, max_pushes=max_pushes)
    got = pulse(version, foci, traversal, config, closed=np.array(closed, np.int64))
    expected = dense_rounds(
        graph,
        traversal,
        foci,
        gamma=gamma,
        epsilon=epsilon,
        max_rounds=60,
        max_pushes=max_pushes,
        closed=tuple(closed),
    )
    assume(expected.margin > 1e-9)  # a tie at the float boundary is no rule of ours
    assert got.nodes.tolist() == expected.touched
    np.testing.assert_allclose(got.per_focus, expected.per_focus[got.nodes], rtol=1e-9, atol=1e-12)
    assert (got.pushes, got.rounds, got.edges_visited, got.converged) == (
        expected.pushes,
        expected.rounds,
        expected.read,
        expected.converged,
    )


@settings(max_examples=60, deadline=None)
@given(graph=small_graphs(), traversal=traversals(), data=st.data())
def test_a_closed_node_is_as_if_its_edges_were_not_stored(
    graph: SmallGraph, traversal: Traversal, data: st.DataObject
) -> None:
    foci = data.draw(foci_for(graph.n))
    seeds = {n for f in foci for n in f}
    closed = sorted(set(data.draw(st.lists(st.integers(0, graph.n - 1), max_size=3))) - seeds)
    edges = graph.version().edges()
    keep = ~(np.isin(edges.src, closed) | np.isin(edges.dst, closed))
    without = GraphVersion.build(graph.kinds, edges.take(np.flatnonzero(keep)))
    config = PulseConfig(epsilon=0.0, max_rounds=25)
    got = pulse(graph.version(), foci, traversal, config, closed=np.array(closed, np.int64))
    expected = pulse(without, foci, traversal, config)
    np.testing.assert_allclose(
        dense_result(graph, graph.n, got.nodes, got.per_focus),
        dense_result(graph, graph.n, expected.nodes, expected.per_focus),
        rtol=1e-9,
        atol=1e-12,
    )
    assert not set(closed) & set(got.nodes.tolist())


@settings(max_examples=40, deadline=None)
@given(graph=small_graphs(), traversal=traversals(), data=st.data())
def test_foci_pulsed_apart_and_combined_equal_one_pulse(
    graph: SmallGraph, traversal: Traversal, data: st.DataObject
) -> None:
    foci = data.draw(foci_for(graph.n))
    split = data.draw(st.integers(1, max(1, len(foci) - 1))) if len(foci) > 1 else 1
    config = PulseConfig(epsilon=1e-4)
    joint = pulse(graph.version(), foci, traversal, config)
    parts = [
        pulse(graph.version(), part, traversal, config)
        for part in (foci[:split], foci[split:])
        if part
    ]
    combined = combine(parts)
    assert combined.nodes.tolist() == joint.nodes.tolist()
    np.testing.assert_allclose(combined.per_focus, joint.per_focus, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(combined.seed_mass, joint.seed_mass)
    assert combined.rounds == joint.rounds  # pushes: a node pushed for both counts twice
    assert combined.pushes >= joint.pushes


@given(
    st.sets(st.integers(0, 300), max_size=60),
    st.sets(st.integers(0, 300), max_size=60),
)
@settings(max_examples=300, deadline=None)
def test_the_sorted_union_is_the_union_with_each_elements_place(a: set[int], b: set[int]) -> None:
    left = np.array(sorted(a), np.int64)
    right = np.array(sorted(b), np.int64)
    union, in_left, in_right = sorted_union(left, right)
    np.testing.assert_array_equal(union, np.union1d(left, right))
    np.testing.assert_array_equal(union[in_left], left)
    np.testing.assert_array_equal(union[in_right], right)


@settings(max_examples=40, deadline=None)
@given(graph=small_graphs(), traversal=traversals(), data=st.data())
def test_a_pulse_in_a_large_graph_leaves_in_node_order_as_in_a_small_one(
    graph: SmallGraph, traversal: Traversal, data: st.DataObject
) -> None:
    """The kernel orders its result by sorting the touched ids when few nodes were
    touched, and by a pass over every node otherwise: the same nodes, the same values."""
    foci = data.draw(foci_for(graph.n))
    small = pulse(graph.version(), foci, traversal)
    padded = GraphVersion.build([*graph.kinds, *[graph.kinds[0]] * 4096], graph.edges())
    large = pulse(padded, foci, traversal)
    assert large.nodes.tolist() == small.nodes.tolist()
    np.testing.assert_array_equal(large.per_focus, small.per_focus)
    np.testing.assert_array_equal(large.residual, small.residual)
