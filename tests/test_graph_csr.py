"""Graph versions: CSR build, delta, rebuild, parallel edges, and publication across threads."""

from __future__ import annotations

import threading
from collections import Counter
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.graph import (
    Activation,
    EdgeList,
    GraphError,
    GraphVersion,
    PulseConfig,
    Traversal,
    pulse,
)
from memory_core.index.holder import GraphHolder

from .test_graph_reference import SmallGraph, dense_weights, small_graphs, traversals

Row = tuple[int, int, float, int, int, int]


def rows_of(edges: EdgeList) -> Counter[Row]:
    """The edge multiset: a parallel edge counts once per stored row."""
    columns = (edges.src, edges.dst, edges.weight, edges.edge_id, edges.edge_type, edges.source)
    return Counter(
        (int(s), int(d), float(w), int(i), int(t), int(o))
        for s, d, w, i, t, o in zip(*columns, strict=True)
    )


def split(edges: EdgeList, cuts: list[int]) -> list[EdgeList]:
    bounds = [0, *sorted(min(c, len(edges)) for c in cuts), len(edges)]
    return [edges.take(np.arange(a, b)) for a, b in pairwise(bounds)]


@st.composite
def parallel_graphs(draw: st.DrawFn) -> SmallGraph:
    """Few nodes, many edges: parallel edges (same ends, other type or id) are the norm."""
    return draw(small_graphs(max_nodes=4, max_edges=30))


@settings(max_examples=60, deadline=None)
@given(graph=parallel_graphs(), cuts=st.lists(st.integers(0, 30), max_size=3))
def test_parallel_edges_survive_build_delta_and_rebuild(graph: SmallGraph, cuts: list[int]) -> None:
    edges = graph.edges().take(np.arange(len(graph.src)))
    sources = np.where(np.arange(len(edges)) % 3 == 0, -1, 0)
    edges = EdgeList.from_arrays(
        edges.src,
        edges.dst,
        weight=edges.weight,
        edge_id=edges.edge_id,
        edge_type=edges.edge_type,
        source=sources,
    )
    base, *batches = split(edges, cuts)
    version = GraphVersion.build(graph.kinds, base)
    for batch in batches:
        version = version.with_delta(batch)
    assert version.n_edges == len(edges)
    assert rows_of(version.edges()) == rows_of(edges)
    rebuilt = version.rebuild()
    assert rebuilt.n_delta == 0 and rebuilt.n_edges == len(edges)
    assert rows_of(rebuilt.edges()) == rows_of(edges)
    assert sorted(rebuilt.out.edge_id.tolist()) == sorted(edges.edge_id.tolist())


@settings(max_examples=60, deadline=None)
@given(graph=small_graphs(), traversal=traversals(), cut=st.integers(0, 36))
def test_arcs_match_dense_weights_across_base_and_delta(
    graph: SmallGraph, traversal: Traversal, cut: int
) -> None:
    base, delta = split(graph.edges(), [cut])
    version = GraphVersion.build(graph.kinds, base).with_delta(delta)
    nodes = np.arange(graph.n, dtype=np.int64)
    arcs = version.arcs(nodes, traversal)
    got = np.zeros((graph.n, graph.n))
    np.add.at(got, (arcs.owner, arcs.target), arcs.weight)
    np.testing.assert_allclose(got, dense_weights(graph, traversal), rtol=1e-6)
    assert arcs.read == 2 * len(graph.src)
    expected_degree = [graph.src.count(v) + graph.dst.count(v) for v in range(graph.n)]
    assert version.degree(nodes).tolist() == expected_degree


@settings(max_examples=60, deadline=None)
@given(graph=small_graphs(), cut=st.integers(0, 36), data=st.data())
def test_induced_edges_are_exactly_the_edges_inside(
    graph: SmallGraph, cut: int, data: st.DataObject
) -> None:
    base, delta = split(graph.edges(), [cut])
    version = GraphVersion.build(graph.kinds, base).with_delta(delta)
    inside = data.draw(st.sets(st.integers(0, graph.n - 1)))
    got = version.induced_edges(np.array(sorted(inside), dtype=np.int64))
    everything = graph.edges()
    keep = np.array(
        [s in inside and d in inside for s, d in zip(graph.src, graph.dst, strict=True)], bool
    )
    assert rows_of(got) == rows_of(everything.take(np.flatnonzero(keep)))


@settings(max_examples=80, deadline=None)
@given(graph=small_graphs(), cut=st.integers(0, 36), data=st.data())
def test_best_beside_is_the_best_member_linked_either_way(
    graph: SmallGraph, cut: int, data: st.DataObject
) -> None:
    """What the context re-rank reads: for each node, the best value among the members
    it shares an edge with (any type, either direction, base or delta), itself aside."""
    base, delta = split(graph.edges(), [cut])
    version = GraphVersion.build(graph.kinds, base).with_delta(delta)
    members = sorted(data.draw(st.sets(st.integers(0, graph.n - 1))))
    values = data.draw(st.lists(st.floats(0, 10), min_size=len(members), max_size=len(members)))
    nodes = data.draw(st.lists(st.integers(0, graph.n - 1), max_size=graph.n))
    value_of = dict(zip(members, values, strict=True))
    expected = []
    for node in nodes:
        linked = {d for s, d in zip(graph.src, graph.dst, strict=True) if s == node}
        linked |= {s for s, d in zip(graph.src, graph.dst, strict=True) if d == node}
        expected.append(max([0.0, *(value_of[v] for v in linked - {node} if v in value_of)]))
    got = version.best_beside(
        np.array(nodes, np.int64), np.array(members, np.int64), np.array(values, np.float64)
    )
    assert got.tolist() == expected


def test_best_beside_reads_nodes_added_since_the_base() -> None:
    version = GraphVersion.build([0, 0], EdgeList.from_arrays([0], [1]))
    newer = version.with_delta(EdgeList.from_arrays([2, 1], [1, 2], edge_id=[5, 6]), [0])
    members = np.array([0, 1, 2], np.int64)
    got = newer.best_beside(np.array([2, 1, 0], np.int64), members, np.array([1.0, 2.0, 3.0]))
    assert got.tolist() == [2.0, 3.0, 2.0]


def test_csr_layout_groups_by_source_and_reverse_index_points_back() -> None:
    edges = EdgeList.from_arrays([2, 0, 2, 1, 0], [0, 1, 0, 2, 1], edge_id=[7, 8, 9, 10, 11])
    version = GraphVersion.build([0, 0, 0], edges)
    assert version.out.indptr.tolist() == [0, 2, 3, 5]
    assert version.out.indices.tolist() == [1, 1, 2, 0, 0]
    assert version.out.edge_id.tolist() == [8, 11, 10, 7, 9]
    for node in range(3):
        row = slice(int(version.inc.indptr[node]), int(version.inc.indptr[node + 1]))
        assert (version.out.indices[version.inc.pos[row]] == node).all()
    assert version.out.row(0) == slice(0, 2)


def test_versions_are_immutable_and_old_ones_unchanged_by_appends() -> None:
    version = GraphVersion.build([0, 0], EdgeList.from_arrays([0], [1]))
    with pytest.raises(ValueError, match="read-only"):
        version.out.weight[0] = 5.0
    newer = version.with_delta(EdgeList.from_arrays([1, 2], [0, 0], edge_id=[5, 6]), [3])
    assert (version.version, version.n_nodes, version.n_edges) == (0, 2, 1)
    assert (newer.version, newer.n_nodes, newer.n_edges, newer.n_delta) == (1, 3, 3, 2)
    assert newer.kinds.tolist() == [0, 0, 3]
    assert newer.rebuild().version == 2 and newer.rebuild().base_version == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"src": [0, 1], "dst": [1]}, "equal length"),
        ({"src": [-1], "dst": [0]}, ">= 0"),
        ({"src": [0], "dst": [1], "weight": [-1.0]}, "weights"),
        ({"src": [0], "dst": [1], "weight": [float("nan")]}, "weights"),
        ({"src": [0], "dst": [1], "edge_type": [999]}, "edge types"),
        ({"src": [0.5], "dst": [1]}, "integers"),
        ({"src": [[0]], "dst": [[1]]}, "one-dimensional"),
    ],
)
def test_malformed_edges_are_refused(kwargs: dict[str, list[float]], message: str) -> None:
    src, dst = kwargs.pop("src"), kwargs.pop("dst")
    with pytest.raises(GraphError, match=message):
        EdgeList.from_arrays(src, dst, **kwargs)


def test_edges_must_refer_to_existing_nodes() -> None:
    with pytest.raises(GraphError, match="node 5"):
        GraphVersion.build([0, 0], EdgeList.from_arrays([0], [5]))
    version = GraphVersion.build([0, 0], EdgeList.empty())
    with pytest.raises(GraphError, match="node 2"):
        version.with_delta(EdgeList.from_arrays([0], [2]))
    with pytest.raises(GraphError, match="kinds"):
        GraphVersion.build([0.5], EdgeList.empty())


def test_holder_rebuilds_when_the_delta_passes_its_limit() -> None:
    holder = GraphHolder(GraphVersion.build([0] * 4, EdgeList.empty()), max_delta_edges=2)
    first = holder.append(EdgeList.from_arrays([0, 1], [1, 2], edge_id=[1, 2]))
    assert (first.version, first.n_delta) == (1, 2)
    second = holder.append(EdgeList.from_arrays([2], [3], edge_id=[3]))
    assert second is holder.current()
    assert (second.n_delta, second.n_edges, second.version) == (0, 3, 3)
    assert holder.rebuild() is second
    fresh = holder.replace([0, 0], EdgeList.from_arrays([0], [1], edge_id=[9]))
    assert fresh.version == 4 and fresh.base_version == 4 and fresh.n_edges == 1


def test_a_query_pinned_before_a_rebuild_keeps_reading_its_version() -> None:
    edges = EdgeList.from_arrays([0, 1, 2], [1, 2, 3], edge_id=[0, 1, 2])
    holder = GraphHolder(GraphVersion.build([0] * 6, edges), max_delta_edges=1)
    holder.append(EdgeList.from_arrays([3], [4], edge_id=[3]))
    pinned, published = threading.Event(), threading.Event()
    graphs: list[GraphVersion] = []
    results: list[Activation] = []

    def query() -> None:
        graph = holder.current()
        graphs.append(graph)
        results.append(pulse(graph, [{0: 1.0}], Traversal(), PulseConfig(epsilon=1e-9)))
        pinned.set()
        assert published.wait(10)
        results.append(pulse(graph, [{0: 1.0}], Traversal(), PulseConfig(epsilon=1e-9)))

    def rebuild() -> None:
        assert pinned.wait(10)
        holder.append(EdgeList.from_arrays([4, 0], [5, 5], edge_id=[4, 5]))
        published.set()

    threads = [threading.Thread(target=query), threading.Thread(target=rebuild)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    (graph,), (before, after) = graphs, results
    assert (graph.version, graph.n_edges, graph.n_delta) == (1, 4, 1)
    assert before.version == after.version == 1
    np.testing.assert_array_equal(after.nodes, before.nodes)
    np.testing.assert_array_equal(after.per_focus, before.per_focus)
    assert 5 not in after.nodes.tolist()
    now = holder.current()
    assert (now.version, now.n_delta, now.n_edges) == (3, 0, 6)


def test_concurrent_appends_rebuilds_and_queries_see_whole_versions() -> None:
    n = 64
    holder = GraphHolder(GraphVersion.build([0] * n, EdgeList.empty()), max_delta_edges=7)
    per_writer, writers = 120, 2
    seen: list[tuple[int, tuple[int, ...]]] = []
    changed: list[int] = []
    stop = threading.Event()

    def write(offset: int) -> None:
        for k in range(per_writer):
            edge_id = offset * per_writer + k
            new = EdgeList.from_arrays([edge_id % n], [(edge_id * 7 + 1) % n], edge_id=[edge_id])
            holder.append(new)

    def read() -> None:
        while not stop.is_set():
            graph = holder.current()
            ids = tuple(sorted(graph.edges().edge_id.tolist()))
            pulse(graph, [{0: 1.0}], Traversal(), PulseConfig(epsilon=1e-3))
            if tuple(sorted(graph.edges().edge_id.tolist())) != ids:
                changed.append(graph.version)
            seen.append((graph.version, ids))

    readers = [threading.Thread(target=read) for _ in range(2)]
    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in readers + threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    stop.set()
    for thread in readers:
        thread.join(30)
    final = holder.rebuild()
    assert changed == []
    by_version = {version: set(ids) for version, ids in seen}
    assert all(set(ids) == by_version[version] for version, ids in seen)
    assert all(len(ids) == len(set(ids)) for _, ids in seen)
    ordered = [by_version[v] for v in sorted(by_version)]
    assert all(a <= b for a, b in pairwise(ordered))
    assert sorted(final.edges().edge_id.tolist()) == list(range(per_writer * writers))
    assert final.n_delta == 0


@settings(max_examples=40, deadline=None)
@given(
    targets=st.lists(st.integers(0, 30), min_size=40, max_size=120),
    inside=st.sets(st.integers(0, 30), min_size=1, max_size=4),
)
def test_induced_edges_search_long_rows(targets: list[int], inside: set[int]) -> None:
    """Hub rows longer than a few times the member count are binary-searched, not scanned."""
    src = [0] * len(targets) + targets[:5]
    dst = targets + [0] * 5
    edges = EdgeList.from_arrays(src, dst, edge_id=range(len(src)), edge_type=[1] * len(src))
    version = GraphVersion.build([0] * 31, edges)
    members = np.array(sorted(inside | {0}), dtype=np.int64)
    keep = [
        k for k, (s, d) in enumerate(zip(src, dst, strict=True)) if s in members and d in members
    ]
    got = version.induced_edges(members)
    assert rows_of(got) == rows_of(edges.take(np.array(keep, dtype=np.int64)))


@settings(max_examples=200, deadline=None)
@given(
    targets=st.lists(st.integers(0, 30), min_size=60, max_size=200),
    others=st.sets(st.integers(1, 30), max_size=5),
)
def test_a_hub_inside_the_set_has_its_long_row_searched(
    targets: list[int], others: set[int]
) -> None:
    """Node 0 (a hub: more edges than 8x the members) is a member: its row is searched
    by binary search, parallel edges included; the result equals a brute-force scan."""
    members = np.array(sorted({0, *others}), dtype=np.int64)
    src = [0] * len(targets) + targets
    dst = targets + [0] * len(targets)
    version = GraphVersion.build([0] * 31, EdgeList.from_arrays(src, dst))
    got = version.induced_edges(members)
    inside = set(members.tolist())
    expected = sorted((s, d) for s, d in zip(src, dst, strict=True) if s in inside and d in inside)
    assert sorted(zip(got.src.tolist(), got.dst.tolist(), strict=True)) == expected
