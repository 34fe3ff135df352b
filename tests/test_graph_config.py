"""Graph settings: parsing from a mapping, traversal rules by name, and the public surface."""

from __future__ import annotations

import inspect

import pytest

import memory_core.graph as graph_package
from memory_core.graph import (
    DEFAULT_TRAVERSAL,
    EdgeType,
    GraphConfigError,
    GraphSettings,
    Traversal,
    parse_graph_settings,
)


def test_defaults_need_no_settings() -> None:
    settings = parse_graph_settings({})
    assert settings == GraphSettings()
    assert settings.traversal is DEFAULT_TRAVERSAL and settings.area.operator == "pulse"


def test_every_section_is_read() -> None:
    settings = parse_graph_settings(
        {
            "operator": "wave",
            "traversal": {"mentions": [1, 0.5], "Corrects": [1.0, 1.0], "default": [0, 0]},
            "pulse": {"gamma": 0.7, "epsilon": 1e-5, "max_pushes": 500},
            "area": {"radius": 3, "min_activation": 0},
            "wave": {"damping": 1, "duration": 5.0},
            "max_delta_edges": 10,
        }
    )
    assert settings.area.operator == "wave" and settings.area.radius == 3
    assert settings.area.min_activation == 0.0 and settings.wave.damping == 1.0
    assert (settings.pulse.gamma, settings.pulse.max_pushes) == (0.7, 500)
    assert settings.traversal.multipliers(EdgeType.MENTIONS) == (1.0, 0.5)
    assert settings.traversal.multipliers(EdgeType.CORRECTS) == (1.0, 1.0)
    assert settings.traversal.multipliers(EdgeType.NEXT) == (0.0, 0.0)
    assert settings.max_delta_edges == 10


def test_scoring_is_read_into_its_config() -> None:
    settings = parse_graph_settings({"scoring": {"bm25": 2, "seeds": 5}})
    assert settings.scoring.bm25 == 2.0 and settings.scoring.seeds == 5
    assert settings.scoring.activation == GraphSettings().scoring.activation


def test_operator_errors_list_the_registered_operators() -> None:
    with pytest.raises(GraphConfigError) as caught:
        parse_graph_settings({"operator": "wav"})
    assert (
        caught.value.reason == "unknown operator 'wav'; did you mean 'wave'? (one of: pulse, wave)"
    )


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"speed": 1}, "graph.speed"),
        ({"pulse": {"gama": 0.5}}, "graph.pulse.gama"),
        ({"pulse": {"gamma": 1.5}}, "graph.pulse.gamma"),
        ({"pulse": {"max_pushes": 1.5}}, "graph.pulse.max_pushes"),
        ({"pulse": {"epsilon": "small"}}, "graph.pulse.epsilon"),
        ({"pulse": {"epsilon": True}}, "graph.pulse.epsilon"),
        ({"area": {"operator": 3}}, "graph.area.operator"),
        ({"area": {"wave": {}}}, "graph.area.wave"),
        ({"operator": "flood"}, "graph.operator"),
        ({"area": {"operator": "flood"}}, "graph.area.operator"),
        ({"scoring": {"bm25": -1}}, "graph.scoring.bm25"),
        ({"scoring": {"seeds": 2.5}}, "graph.scoring.seeds"),
        ({"wave": []}, "graph.wave"),
        ({"wave": {"safety": 2}}, "graph.wave.safety"),
        ({"traversal": {"teleports": [1, 1]}}, "graph.traversal.teleports"),
        ({"traversal": {"mentions": [1]}}, "graph.traversal.mentions"),
        ({"traversal": {"mentions": [1, -1]}}, "graph.traversal.mentions"),
        ({"traversal": {"mentions": "both"}}, "graph.traversal.mentions"),
        ({"traversal": {"default": [1, "x"]}}, "graph.traversal.default"),
        ({"max_delta_edges": -1}, "graph.max_delta_edges"),
    ],
)
def test_bad_settings_name_their_key(section: dict[str, object], key: str) -> None:
    with pytest.raises(GraphConfigError) as caught:
        parse_graph_settings(section)
    assert caught.value.key == key


def test_traversal_rules_by_type() -> None:
    rules = Traversal({EdgeType.RELATION: (2.0, 0.0)}, default=(0.5, 0.25))
    assert rules.multipliers(EdgeType.RELATION) == (2.0, 0.0)
    assert rules.multipliers(200) == (0.5, 0.25)
    with pytest.raises(GraphConfigError, match="edge type"):
        Traversal({999: (1.0, 1.0)})
    with pytest.raises(GraphConfigError, match="finite"):
        Traversal({0: (float("inf"), 1.0)})


def test_public_surface_is_listed_and_documented() -> None:
    public = {name for name in dir(graph_package) if not name.startswith("_")}
    modules = {name for name in public if inspect.ismodule(getattr(graph_package, name))}
    assert set(graph_package.__all__) == public - modules
    for name in graph_package.__all__:
        member = getattr(graph_package, name)
        if inspect.isclass(member) or inspect.isfunction(member):
            assert inspect.getdoc(member), name
