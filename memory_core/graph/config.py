"""Graph engine settings, read once from a mapping (the ``retrieval.graph`` section, say).

Every key is optional. Unknown keys and ill-typed values raise :class:`GraphConfigError`
naming the dotted key. ``operator`` (``pulse`` or ``wave``) is a shortcut for
``area.operator``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .activation import PulseConfig
from .area import AreaConfig
from .errors import GraphConfigError
from .holder import DEFAULT_MAX_DELTA_EDGES
from .traversal import DEFAULT_TRAVERSAL, Traversal
from .wave import WaveConfig

__all__ = ["GraphSettings", "parse_graph_settings"]

_C = TypeVar("_C", PulseConfig, AreaConfig, WaveConfig)
_KEYS = ("operator", "traversal", "pulse", "area", "wave", "max_delta_edges")


@dataclass(frozen=True)
class GraphSettings:
    """Everything a query and the graph holder need, with named defaults."""

    traversal: Traversal = DEFAULT_TRAVERSAL
    pulse: PulseConfig = field(default_factory=PulseConfig)
    area: AreaConfig = field(default_factory=AreaConfig)
    max_delta_edges: int = DEFAULT_MAX_DELTA_EDGES


def parse_graph_settings(section: Mapping[str, Any], prefix: str = "graph") -> GraphSettings:
    """Validate ``section`` into :class:`GraphSettings`."""
    for key in section:
        if key not in _KEYS:
            raise GraphConfigError(f"{prefix}.{key}", "unknown setting")
    wave = _fill(WaveConfig(), _mapping(section, "wave", prefix), f"{prefix}.wave")
    area_values = dict(_mapping(section, "area", prefix))
    if "operator" in section:
        area_values["operator"] = section["operator"]
    area = _fill(AreaConfig(wave=wave), area_values, f"{prefix}.area")
    pulse = _fill(PulseConfig(), _mapping(section, "pulse", prefix), f"{prefix}.pulse")
    rules = dict(_mapping(section, "traversal", prefix))
    default = rules.pop("default", DEFAULT_TRAVERSAL.default)
    traversal = None
    if "traversal" in section:
        traversal = Traversal.from_names(rules, default, f"{prefix}.traversal")
    max_delta = section.get("max_delta_edges", DEFAULT_MAX_DELTA_EDGES)
    if isinstance(max_delta, bool) or not isinstance(max_delta, int) or max_delta < 0:
        raise GraphConfigError(f"{prefix}.max_delta_edges", "must be an integer >= 0")
    return GraphSettings(traversal or DEFAULT_TRAVERSAL, pulse, area, max_delta)


def _mapping(section: Mapping[str, Any], key: str, prefix: str) -> Mapping[str, Any]:
    value = section.get(key, {})
    if not isinstance(value, Mapping):
        raise GraphConfigError(f"{prefix}.{key}", "must be a mapping")
    return value


def _fill(default: _C, values: Mapping[str, Any], prefix: str) -> _C:
    """``default`` with ``values`` replacing its fields, each checked against its type."""
    known = {f.name: getattr(default, f.name) for f in dataclasses.fields(default)}
    changes: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known or isinstance(known[key], WaveConfig):
            raise GraphConfigError(f"{prefix}.{key}", "unknown setting")
        changes[key] = _typed(f"{prefix}.{key}", known[key], value)
    try:
        return dataclasses.replace(default, **changes)
    except GraphConfigError as exc:
        raise GraphConfigError(f"{prefix}.{exc.key.split('.')[-1]}", exc.reason) from None


def _typed(key: str, like: object, value: object) -> object:
    if isinstance(like, str):
        if not isinstance(value, str):
            raise GraphConfigError(key, "must be a string")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GraphConfigError(key, "must be a number")
    if isinstance(like, int) and not isinstance(value, int):
        raise GraphConfigError(key, "must be an integer")
    return float(value) if isinstance(like, float) else value
