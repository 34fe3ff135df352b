"""Graph engine settings: the ``retrieval:`` section of config.yaml, read once.

:class:`RetrievalSection` is the section's schema (a pydantic model on the shared
:class:`~memory_core.configuration.ConfigModel`): every key optional, unknown keys and
ill-typed or out-of-range values refused with their dotted key and line.
:meth:`RetrievalSection.settings` builds the :class:`GraphSettings` a query reads: the
engine's own frozen dataclasses (:class:`PulseConfig`, :class:`AreaConfig`,
:class:`WaveConfig`, :class:`Traversal`), kept as dataclasses because they are read on
the hot numeric path and built in code by tests and benchmarks. Their defaults are the
dataclasses' own; the ranges here mirror their ``__post_init__`` checks, so a section
that validates always builds. ``operator`` (registered in :data:`OPERATORS`) is a
shortcut for ``area.operator`` and is reported under its own key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

from ..configuration import ConfigModel, ConfigurationError, Document, validate
from ..retrieval.scoring import ScoringConfig
from .activation import PulseConfig
from .area import OPERATORS, AreaConfig
from .csr import DEFAULT_MAX_DELTA_EDGES
from .errors import GraphConfigError
from .kinds import EdgeType
from .traversal import DEFAULT_TRAVERSAL, Traversal
from .wave import WaveConfig

__all__ = ["GraphSettings", "RetrievalSection", "parse_graph_settings"]


@dataclass(frozen=True)
class GraphSettings:
    """Everything a query and the graph holder need, with named defaults."""

    traversal: Traversal = DEFAULT_TRAVERSAL
    pulse: PulseConfig = field(default_factory=PulseConfig)
    area: AreaConfig = field(default_factory=AreaConfig)
    max_delta_edges: int = DEFAULT_MAX_DELTA_EDGES
    scoring: ScoringConfig = field(default_factory=ScoringConfig)


def _operator(name: str) -> str:
    return OPERATORS.check(name)


def _edge_type(name: str) -> str:
    if name != "default" and name.upper() not in EdgeType.__members__:
        names = [t.name.lower() for t in EdgeType]
        raise ValueError(f"unknown edge type {name!r} (one of: {', '.join(names)}, default)")
    return name


def _pair(value: object) -> tuple[float, float]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ValueError("expected [forward, reverse]")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int | float):
            raise ValueError("multiplier must be a number")
        if not math.isfinite(item) or item < 0:
            raise ValueError("multiplier must be finite and >= 0")
    return float(value[0]), float(value[1])


OperatorName = Annotated[str, AfterValidator(_operator)]
EdgeTypeName = Annotated[str, AfterValidator(_edge_type)]
Pair = Annotated[tuple[float, float], BeforeValidator(_pair)]


class PulseSection(ConfigModel):
    """``retrieval.pulse``: see :class:`PulseConfig`."""

    gamma: float = Field(PulseConfig.gamma, gt=0, lt=1, allow_inf_nan=False)
    epsilon: float = Field(PulseConfig.epsilon, ge=0, allow_inf_nan=False)
    max_pushes: int = Field(PulseConfig.max_pushes, ge=1)
    max_rounds: int = Field(PulseConfig.max_rounds, ge=1)


class WaveSection(ConfigModel):
    """``retrieval.wave``: see :class:`WaveConfig`."""

    speed: float = Field(WaveConfig.speed, gt=0, allow_inf_nan=False)
    damping: float = Field(WaveConfig.damping, ge=0, allow_inf_nan=False)
    duration: float = Field(WaveConfig.duration, gt=0, allow_inf_nan=False)
    safety: float = Field(WaveConfig.safety, gt=0, lt=1)
    max_steps: int = Field(WaveConfig.max_steps, ge=1)


class AreaSection(ConfigModel):
    """``retrieval.area``: see :class:`AreaConfig` (its ``wave`` is ``retrieval.wave``)."""

    min_activation: float = Field(AreaConfig.min_activation, ge=0)
    max_activated: int = Field(AreaConfig.max_activated, ge=1)
    focus_share: float = Field(AreaConfig.focus_share, ge=0)
    free_degree: float = Field(AreaConfig.free_degree, ge=0)
    min_hub_weight: float = Field(AreaConfig.min_hub_weight, ge=0, le=1)
    radius: int = Field(AreaConfig.radius, ge=0)
    max_region_nodes: int = Field(AreaConfig.max_region_nodes, ge=1)
    max_candidates: int = Field(AreaConfig.max_candidates, ge=1)
    max_overlap: float = Field(AreaConfig.max_overlap, ge=0, le=1)
    size_exponent: float = Field(AreaConfig.size_exponent, ge=0)
    support_half: float = Field(AreaConfig.support_half, ge=1e-12)
    operator: OperatorName = AreaConfig.operator


class RetrievalSection(ConfigModel):
    """The ``retrieval:`` section of config.yaml (area retrieval and its scoring)."""

    operator: OperatorName | None = None
    traversal: dict[EdgeTypeName, Pair] | None = None
    pulse: PulseSection = PulseSection()
    area: AreaSection = AreaSection()
    wave: WaveSection = WaveSection()
    max_delta_edges: int = Field(DEFAULT_MAX_DELTA_EDGES, ge=0)
    scoring: ScoringConfig = ScoringConfig()

    def settings(self) -> GraphSettings:
        """The engine's settings this section describes."""
        area = self.area.model_dump()
        if self.operator is not None:
            area["operator"] = self.operator
        traversal = DEFAULT_TRAVERSAL
        if self.traversal is not None:
            rules = dict(self.traversal)
            default = rules.pop("default", DEFAULT_TRAVERSAL.default)
            traversal = Traversal.from_names(rules, default, "traversal")
        return GraphSettings(
            traversal=traversal,
            pulse=PulseConfig(**self.pulse.model_dump()),
            area=AreaConfig(**area, wave=WaveConfig(**self.wave.model_dump())),
            max_delta_edges=self.max_delta_edges,
            scoring=self.scoring,
        )


def parse_graph_settings(section: Mapping[str, Any], prefix: str = "graph") -> GraphSettings:
    """Validate a mapping built in code into :class:`GraphSettings`.

    Errors are :class:`GraphConfigError` naming the dotted key under ``prefix``; a file's
    ``retrieval:`` section is validated with its lines through :class:`RetrievalSection`.
    """
    try:
        return validate(RetrievalSection, section, Document.of(section), (prefix,)).settings()
    except ConfigurationError as exc:
        raise GraphConfigError(exc.key, exc.reason) from None
