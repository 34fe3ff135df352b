"""The damped wave: dense reference, stability bound, and energy that never grows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.graph import (
    MAX_WAVE_NODES,
    EdgeList,
    GraphConfigError,
    GraphError,
    GraphVersion,
    Traversal,
    WaveConfig,
    damped_wave,
    region_laplacian,
)

from .test_graph_reference import SmallGraph, dense_laplacian, dense_wave, small_graphs, traversals


@settings(max_examples=60, deadline=None)
@given(
    graph=small_graphs(max_nodes=10, max_edges=30),
    traversal=traversals(),
    speed=st.sampled_from([0.5, 1.0, 2.0]),
    damping=st.sampled_from([0.0, 0.3, 2.0]),
    safety=st.sampled_from([0.3, 0.5, 0.9]),
    data=st.data(),
)
def test_wave_energy_never_grows_and_matches_the_reference(
    graph: SmallGraph,
    traversal: Traversal,
    speed: float,
    damping: float,
    safety: float,
    data: st.DataObject,
) -> None:
    nodes = sorted(data.draw(st.sets(st.integers(0, graph.n - 1), min_size=1)))
    region = np.array(nodes, dtype=np.int64)
    laplacian = region_laplacian(graph.version(), traversal, region)
    np.testing.assert_allclose(laplacian, dense_laplacian(graph, traversal, nodes), atol=1e-6)
    foci = data.draw(st.integers(1, 3))
    initial = np.array(
        data.draw(
            st.lists(st.floats(-2, 2), min_size=len(nodes) * foci, max_size=len(nodes) * foci)
        )
    ).reshape(len(nodes), foci)
    config = WaveConfig(speed=speed, damping=damping, duration=8.0, safety=safety)
    result = damped_wave(region, laplacian, initial, config)

    lam = max(float(np.linalg.eigvalsh(laplacian).max()), 0.0)
    assert result.dt * speed * np.sqrt(lam) < 2.0
    q = result.dt**2 * speed**2 * lam / 4
    assert q <= safety**2 + 1e-12
    scale = max(1.0, result.initial_energy)
    assert (np.diff(result.energy) <= 1e-11 * scale).all()
    assert result.energy[0] <= result.initial_energy + 1e-11 * scale
    assert (result.midpoint_energy <= result.initial_energy / (1 - q) + 1e-11 * scale).all()
    assert (result.energy >= -1e-11 * scale).all()

    combined, per_focus = dense_wave(
        laplacian, initial, np.ones(foci), speed, damping, result.dt, result.steps
    )
    np.testing.assert_allclose(result.interference, combined, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(result.per_focus, per_focus, rtol=1e-8, atol=1e-10)


def star_region() -> tuple[np.ndarray, np.ndarray]:
    graph = GraphVersion.build([0] * 6, EdgeList.from_arrays([0, 0, 0, 0, 1], [1, 2, 3, 4, 5]))
    nodes = np.arange(6, dtype=np.int64)
    return nodes, region_laplacian(graph, Traversal(), nodes)


def test_the_wave_variants_energy_does_not_grow() -> None:
    nodes, laplacian = star_region()
    initial = np.zeros((6, 2))
    initial[2, 0], initial[4, 1] = 1.0, 1.0
    damped = damped_wave(nodes, laplacian, initial, WaveConfig(damping=0.5, duration=30.0))
    assert (np.diff(damped.energy) <= 1e-12).all()
    assert damped.energy[-1] < 0.01 * damped.initial_energy
    free = damped_wave(nodes, laplacian, initial, WaveConfig(damping=0.0, duration=30.0))
    np.testing.assert_allclose(free.energy, free.energy[0], rtol=1e-10)
    assert free.energy[0] <= free.initial_energy


def test_interference_adds_fields_before_squaring() -> None:
    nodes, laplacian = star_region()
    field = np.zeros((6, 1))
    field[3, 0] = 1.0
    twice = np.hstack([field, field])
    single = damped_wave(nodes, laplacian, field)
    together = damped_wave(nodes, laplacian, twice)
    np.testing.assert_allclose(together.interference, 4 * single.interference)
    cancelled = damped_wave(nodes, laplacian, twice, alpha=np.array([1.0, -1.0]))
    np.testing.assert_allclose(cancelled.interference, 0.0, atol=1e-15)
    np.testing.assert_allclose(cancelled.per_focus[:, 0], single.per_focus[:, 0])


def test_a_region_without_edges_stands_still() -> None:
    nodes = np.arange(3, dtype=np.int64)
    result = damped_wave(nodes, np.zeros((3, 3)), np.ones((3, 1)), WaveConfig(duration=2.0))
    assert result.steps == 1 and result.dt == 2.0
    np.testing.assert_allclose(result.interference, 2.0)


def test_oversized_regions_and_bad_settings_are_refused() -> None:
    graph = GraphVersion.build([0] * (MAX_WAVE_NODES + 1), EdgeList.empty())
    with pytest.raises(GraphError, match="at most"):
        region_laplacian(graph, Traversal(), np.arange(MAX_WAVE_NODES + 1, dtype=np.int64))
    nodes, laplacian = star_region()
    with pytest.raises(GraphError, match="shapes"):
        damped_wave(nodes, laplacian, np.ones((5, 1)))
    with pytest.raises(GraphError, match="shapes"):
        damped_wave(nodes, laplacian, np.ones((6, 2)), alpha=np.ones(3))
    for kwargs in ({"speed": 0.0}, {"damping": -1.0}, {"safety": 1.0}, {"max_steps": 0}):
        with pytest.raises(GraphConfigError, match="wave"):
            WaveConfig(**kwargs)
