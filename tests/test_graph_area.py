"""Area selection: convergence, hubs, whole regions, score terms, and the wave operator."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memory_core.graph.area as area_module
from memory_core.graph import (
    Activation,
    AreaConfig,
    EdgeList,
    EdgeType,
    GraphConfigError,
    GraphVersion,
    NodeKind,
    PulseConfig,
    Region,
    Traversal,
    pulse,
    score_region,
    select_area,
)

from .test_graph_csr import rows_of
from .test_graph_reference import SmallGraph, foci_for, small_graphs, traversals

UNDIRECTED = Traversal()
FRAGMENT = NodeKind.FRAGMENT


def build(n: int, pairs: list[tuple[int, int]], kinds: Sequence[int] | None = None) -> GraphVersion:
    src, dst = zip(*pairs, strict=True)
    return GraphVersion.build(
        [FRAGMENT] * n if kinds is None else kinds, EdgeList.from_arrays(src, dst)
    )


def run(graph: GraphVersion, foci: list[dict[int, float]]) -> Activation:
    return pulse(graph, foci, UNDIRECTED, PulseConfig(epsilon=1e-9))


def twin_stars() -> GraphVersion:
    """Two identical stars: X = centre 0 with leaves 1-3, Y = centre 4 with leaves 5-7."""
    return build(8, [(0, 1), (0, 2), (0, 3), (4, 5), (4, 6), (4, 7)])


def test_three_units_from_one_focus_and_one_from_each_of_three_foci_converge_differently() -> None:
    graph = twin_stars()
    activation = run(graph, [{1: 1.0, 2: 1.0, 3: 1.0, 5: 1.0}, {6: 1.0}, {7: 1.0}])
    x, y = activation.of(0), activation.of(4)
    assert x.sum() == pytest.approx(y.sum())
    assert np.count_nonzero(x) == 1 and np.count_nonzero(y) == 3
    area = select_area(graph, activation, UNDIRECTED)
    by_centre = {c.region.centre: c for c in area.candidates}
    one, three = by_centre[0].terms, by_centre[4].terms
    assert one.total == pytest.approx(three.total)
    assert one.convergence == pytest.approx(1 / 3) and three.convergence == pytest.approx(1.0)
    assert one.coverage == pytest.approx(1 / 3) and three.coverage == 1.0
    assert area.representative == 4
    assert area.chosen is not None and area.chosen.region.nodes.tolist() == [4, 5, 6, 7]
    assert three.score > one.score


def hub_graph(leaves: int = 40) -> GraphVersion:
    """Seeds 0-2; concept 3 joins them; hub 4 touches every node, and 5.. hang off it."""
    pairs = [(0, 3), (1, 3), (2, 3), *[(4, v) for v in range(4)]]
    pairs += [(4, 5 + j) for j in range(leaves)]
    return build(5 + leaves, pairs)


def test_a_hub_connected_to_everything_does_not_beat_the_region_that_articulates_all_foci() -> None:
    graph = hub_graph()
    activation = run(graph, [{0: 1.0}, {1: 1.0}, {2: 1.0}])
    assert activation.of(4).sum() > activation.of(3).sum()
    area = select_area(graph, activation, UNDIRECTED)
    assert area.representative == 3
    assert area.chosen is not None
    assert area.chosen.region.nodes.tolist() == [0, 1, 2, 3]
    through_hub = score_region(graph, activation, UNDIRECTED, [0, 1, 2, 4])
    through_concept = score_region(graph, activation, UNDIRECTED, [0, 1, 2, 3])
    assert through_hub.coverage == through_concept.coverage == 1.0
    assert through_hub.mass > through_concept.mass
    assert through_hub.hub_penalty > 0.3 and through_concept.hub_penalty == 0.0
    assert through_concept.score > through_hub.score


def test_a_legitimately_central_concept_is_not_penalised() -> None:
    """Concept 3 is linked to twelve fragments that the foci (entities 0-2) reach themselves."""
    fragments = list(range(4, 16))
    pairs = [(f, (f - 4) % 3) for f in fragments] + [(f, 3) for f in fragments]
    kinds = [NodeKind.ENTITY] * 3 + [NodeKind.CONCEPT] + [FRAGMENT] * 12
    graph = build(16, pairs, kinds)
    activation = run(graph, [{0: 1.0}, {1: 1.0}, {2: 1.0}])
    area = select_area(graph, activation, UNDIRECTED)
    assert area.representative == 3
    assert area.chosen is not None and 3 in area.chosen.region.nodes.tolist()
    alone = score_region(graph, activation, UNDIRECTED, [3, *fragments])
    assert alone.hub_penalty == 0.0
    assert area.chosen.terms.hub_penalty == 0.0


def test_the_area_is_a_whole_region_not_only_its_peak_node() -> None:
    pairs = [(i, i + 1) for i in range(9)] + [(9, 0), (2, 7)]
    graph = build(10, pairs)
    activation = run(graph, [{0: 1.0}, {4: 1.0}])
    area = select_area(graph, activation, UNDIRECTED)
    assert area.chosen is not None
    region = area.chosen.region
    peak = int(activation.nodes[np.argmax(activation.total)])
    assert region.nodes.shape[0] >= 3 and peak in region.nodes.tolist()
    assert region.centre in region.nodes.tolist()
    assert len(region.edges) >= region.nodes.shape[0] - 1
    assert connected(region.nodes.tolist(), region.edges)
    assert area.contributions.shape == (region.nodes.shape[0], 2)
    assert set(area.fragments.tolist()) <= set(region.nodes.tolist())


def connected(nodes: list[int], edges: EdgeList) -> bool:
    links: dict[int, set[int]] = {v: set() for v in nodes}
    for u, v in zip(edges.src.tolist(), edges.dst.tolist(), strict=True):
        links[u].add(v)
        links[v].add(u)
    seen, queue = {nodes[0]}, deque([nodes[0]])
    while queue:
        for nxt in links[queue.popleft()] - seen:
            seen.add(nxt)
            queue.append(nxt)
    return seen == set(nodes)


def test_source_support_counts_distinct_fragments_behind_the_edges() -> None:
    kinds = [NodeKind.ENTITY, NodeKind.ENTITY, NodeKind.ENTITY, FRAGMENT, FRAGMENT]
    edges = EdgeList.from_arrays(
        [0, 0, 1],
        [1, 1, 2],
        edge_id=[1, 2, 3],
        edge_type=[EdgeType.RELATION] * 3,
        source=[3, 4, 3],
    )
    graph = GraphVersion.build(kinds, edges)
    activation = run(graph, [{0: 1.0}, {2: 1.0}])
    terms = score_region(graph, activation, UNDIRECTED, [0, 1, 2])
    assert (terms.sources, terms.edge_ids) == (2, 3)
    assert terms.support == pytest.approx(2 / 3)
    area = select_area(graph, activation, UNDIRECTED)
    assert area.chosen is not None and len(area.chosen.region.edges) == 3
    assert set(area.fragments.tolist()) == {3, 4}
    unsupported = GraphVersion.build(kinds[:3], EdgeList.from_arrays([0, 1], [1, 2]))
    bare = score_region(unsupported, run(unsupported, [{0: 1.0}]), UNDIRECTED, [0, 1, 2])
    assert bare.sources == 0 and bare.score == 0.0


def test_the_wave_operator_ranks_the_region_by_interference() -> None:
    graph = twin_stars()
    activation = run(graph, [{5: 1.0}, {6: 1.0}, {7: 1.0}])
    pulse_area = select_area(graph, activation, UNDIRECTED)
    wave_area = select_area(graph, activation, UNDIRECTED, AreaConfig(operator="wave"))
    assert pulse_area.wave is None and wave_area.wave is not None
    assert wave_area.chosen is not None and pulse_area.chosen is not None
    np.testing.assert_array_equal(wave_area.chosen.region.nodes, pulse_area.chosen.region.nodes)
    assert wave_area.wave.nodes.tolist() == [4, 5, 6, 7]
    assert sorted(wave_area.fragments.tolist()) == [4, 5, 6, 7]
    assert list(wave_area.fragment_scores) == sorted(wave_area.fragment_scores, reverse=True)


def test_no_activation_means_no_area() -> None:
    graph = build(3, [(0, 1)])
    activation = pulse(graph, [{2: 0.0}], UNDIRECTED)
    area = select_area(graph, activation, UNDIRECTED)
    assert area.chosen is None and area.representative is None and area.candidates == ()


@pytest.mark.parametrize(
    "kwargs",
    [{"operator": "flood"}, {"radius": -1}, {"max_overlap": 2.0}, {"support_half": 0.0}],
)
def test_invalid_area_settings_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(GraphConfigError, match="area"):
        AreaConfig(**kwargs)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(graph=small_graphs(max_nodes=14, max_edges=30), traversal=traversals(), data=st.data())
def test_areas_on_random_graphs_keep_their_invariants(
    graph: SmallGraph, traversal: Traversal, data: st.DataObject
) -> None:
    version = graph.version()
    activation = pulse(version, data.draw(foci_for(graph.n)), traversal)
    area = select_area(version, activation, traversal)
    scores = [c.terms.score for c in area.candidates]
    assert scores == sorted(scores, reverse=True)
    assert area.chosen is (area.candidates[0] if area.candidates else None)
    for candidate in area.candidates:
        region, terms = candidate.region, candidate.terms
        assert region.centre in region.nodes.tolist()
        assert rows_of(region.edges) == rows_of(version.induced_edges(region.nodes))
        for unit in (terms.coverage, terms.convergence, terms.hub_penalty, terms.support):
            assert 0.0 <= unit <= 1.0 + 1e-12
        product = (
            terms.coverage
            * terms.convergence
            * terms.mass
            * (1 - terms.hub_penalty)
            * terms.support
        )
        assert math.isclose(terms.score, product, rel_tol=1e-9, abs_tol=1e-15)
        assert terms.size == region.nodes.shape[0]
    if area.chosen is not None:
        region_nodes = set(area.chosen.region.nodes.tolist())
        sources = set(area.chosen.region.edges.source.tolist())
        for v in area.fragments.tolist():
            assert (v in region_nodes and version.kinds[v] == FRAGMENT) or v in sources
        assert list(area.fragment_scores) == sorted(area.fragment_scores, reverse=True)


def _reference_growth(field: area_module._Field, config: AreaConfig) -> list[tuple[int, list[int]]]:
    """The growth rule of the module docstring, in plain Python over the field's local
    adjacency (what the compiled :func:`grow_all` must reproduce exactly)."""
    k = field.ids.shape[0]
    adjacency = [field.neighbours[field.indptr[u] : field.indptr[u + 1]].tolist() for u in range(k)]
    order = sorted(range(k), key=lambda u: (-field.centre[u], -field.total[u], field.ids[u]))
    covered: set[int] = set()
    kept: list[tuple[int, list[int]]] = []
    tries = 0
    for centre in order:
        if len(kept) >= config.max_candidates or tries >= 4 * config.max_candidates:
            break
        if centre in covered or field.total[centre] <= 0:
            continue
        tries += 1
        seen, members, frontier = {centre}, [centre], [centre]
        room = config.max_region_nodes - 1
        for _ in range(config.radius):
            near = sorted({v for u in frontier for v in adjacency[u]} - seen)
            seen.update(near)
            near = [v for v in near if field.hub[v] >= config.min_hub_weight]
            if len(near) > room:
                near = sorted(near, key=lambda v: -field.total[v])[:room]  # stable
            if not near:
                break
            members += near
            room -= len(near)
            frontier = near
        new = set(members)
        if any(len(new & set(m)) / len(new | set(m)) > config.max_overlap for _, m in kept):
            continue
        covered |= new
        kept.append((centre, members))
    return kept


@settings(max_examples=80, deadline=None)
@given(
    graph=small_graphs(max_nodes=16, max_edges=40),
    traversal=traversals(),
    radius=st.integers(0, 3),
    max_region_nodes=st.integers(1, 6),
    max_candidates=st.integers(1, 4),
    max_overlap=st.sampled_from([0.0, 0.3, 0.5, 1.0]),
    min_hub_weight=st.sampled_from([0.0, 0.5, 1.0]),
    data=st.data(),
)
def test_compiled_growth_follows_the_documented_rule(
    graph: SmallGraph,
    traversal: Traversal,
    radius: int,
    max_region_nodes: int,
    max_candidates: int,
    max_overlap: float,
    min_hub_weight: float,
    data: st.DataObject,
) -> None:
    config = AreaConfig(
        radius=radius,
        max_region_nodes=max_region_nodes,
        max_candidates=max_candidates,
        max_overlap=max_overlap,
        min_hub_weight=min_hub_weight,
    )
    version = graph.version()
    activation = pulse(version, data.draw(foci_for(graph.n)), traversal)
    ids = area_module._activated(activation, config)
    field = area_module._Field.build(version, activation, traversal, config, ids)
    centres, offsets, members = area_module._grow_all(field, config)
    got = [(int(c), members[offsets[i] : offsets[i + 1]].tolist()) for i, c in enumerate(centres)]
    assert got == _reference_growth(field, config)


def _reference_local_arrays(field: Any, traversal: Traversal, gamma: float, free: float) -> Any:
    """``u, v``, hub weights and the local adjacency by the numpy rule (what
    :func:`.field.local_arrays` compiles)."""
    u = np.searchsorted(field.ids, field.edges.src).astype(np.int64)
    v = np.searchsorted(field.ids, field.edges.dst).astype(np.int64)
    degree = np.maximum(field.graph.degree(field.ids), 1).astype(np.float64)
    loop = u == v
    x = np.concatenate([u[~loop], v[~loop]])
    y = np.concatenate([v[~loop], u[~loop]])
    independent = field.total[y] > 2.0 * gamma * field.total[x] / degree[x]
    count = np.bincount(x[independent], minlength=field.ids.shape[0]).astype(np.float64)
    hub = np.minimum(1.0, (count + free) / degree)
    types = field.edges.edge_type
    opened = (traversal.forward_table[types] > 0) | (traversal.reverse_table[types] > 0)
    ou, ov = u[opened], v[opened]
    keep = ou != ov
    a = np.concatenate([ou[keep], ov[keep]])
    b = np.concatenate([ov[keep], ou[keep]])
    counts = np.bincount(a, minlength=field.ids.shape[0])
    indptr = np.concatenate([np.zeros(1, np.int64), np.cumsum(counts)])
    return u, v, hub, indptr, b[np.argsort(a, kind="stable")]


@settings(max_examples=80, deadline=None)
@given(
    graph=small_graphs(max_nodes=16, max_edges=40),
    traversal=traversals(),
    data=st.data(),
)
def test_compiled_local_arrays_follow_the_numpy_rule(
    graph: SmallGraph, traversal: Traversal, data: st.DataObject
) -> None:
    config = AreaConfig()
    version = graph.version()
    activation = pulse(version, data.draw(foci_for(graph.n)), traversal)
    ids = area_module._activated(activation, config)
    field = area_module._Field.build(version, activation, traversal, config, ids)
    u, v, hub, indptr, neighbours = _reference_local_arrays(
        field, traversal, activation.gamma, config.free_degree
    )
    assert field.ends[0].tolist() == u.tolist() and field.ends[1].tolist() == v.tolist()
    assert field.hub.tolist() == pytest.approx(hub.tolist(), rel=1e-12)
    assert field.indptr.tolist() == indptr.tolist()
    assert field.neighbours.tolist() == neighbours.tolist()


def _reference_candidate(field: Any, members: Any, centre: int, config: AreaConfig) -> Any:
    """A region and its score terms as the numpy rule of the module docstring computes
    them, one candidate at a time (what :func:`.region_terms.candidate_terms` compiles)."""
    inside = np.zeros(field.ids.shape[0], dtype=bool)
    inside[members] = True
    u, v = field.ends
    region = Region(
        np.sort(field.ids[members]),
        field.edges.take(np.flatnonzero(inside[u] & inside[v])),
        int(field.ids[centre]),
    )
    m = field.per_focus[members].sum(axis=0)
    total = float(m.sum())
    fragments = region.nodes[field.graph.kinds[region.nodes] == NodeKind.FRAGMENT]
    edge_sources = region.edges.source[region.edges.source >= 0]
    sources = int(np.union1d(edge_sources, fragments).shape[0])
    edges = region.edges
    pairs = {(int(t), int(i)) for t, i in zip(edges.edge_type, edges.edge_id, strict=True)}
    support = sources / (sources + config.support_half)
    size = len(members)
    if total <= 0.0 or size == 0:
        return region, (0.0, 0.0, 0.0, 0.0, 0.0, support, size, 0.0, sources, len(pairs))
    shares = m[m > 0] / total
    convergence = float(np.exp(-(shares * np.log(shares)).sum()) / m.shape[0])
    coverage = float(np.mean(m >= config.focus_share * total / m.shape[0]))
    mass = total / (max(field.seed_mass, 1e-12) * size**config.size_exponent)
    justified = float((field.total[members] * field.hub[members]).sum())
    hub_penalty = min(1.0, max(0.0, 1.0 - justified / total))
    score = coverage * convergence * mass * (1.0 - hub_penalty) * support
    terms = (score, coverage, convergence, mass, hub_penalty, support, size, total, sources)
    return region, (*terms, len(pairs))


@settings(max_examples=80, deadline=None)
@given(
    graph=small_graphs(max_nodes=16, max_edges=40),
    traversal=traversals(),
    radius=st.integers(0, 3),
    max_region_nodes=st.integers(1, 6),
    max_candidates=st.integers(1, 4),
    data=st.data(),
)
def test_compiled_candidate_terms_follow_the_documented_rule(
    graph: SmallGraph,
    traversal: Traversal,
    radius: int,
    max_region_nodes: int,
    max_candidates: int,
    data: st.DataObject,
) -> None:
    config = AreaConfig(
        radius=radius, max_region_nodes=max_region_nodes, max_candidates=max_candidates
    )
    version = graph.version()
    activation = pulse(version, data.draw(foci_for(graph.n)), traversal)
    ids = area_module._activated(activation, config)
    field = area_module._Field.build(version, activation, traversal, config, ids)
    centres, offsets, members = area_module._grow_all(field, config)
    for i, got in enumerate(field.candidates(centres, offsets, members, config)):
        group = members[offsets[i] : offsets[i + 1]]
        region, terms = _reference_candidate(field, group, int(centres[i]), config)
        assert got.region.centre == region.centre
        assert got.region.nodes.tolist() == region.nodes.tolist()
        assert got.region.edges.edge_id.tolist() == region.edges.edge_id.tolist()
        t = got.terms
        mine = (t.score, t.coverage, t.convergence, t.mass, t.hub_penalty, t.support, t.size)
        assert mine == pytest.approx(terms[:7], rel=1e-9, abs=1e-12)
        assert (t.total, t.sources, t.edge_ids) == (pytest.approx(terms[7]), *terms[8:])
