"""Graph engine settings: the ``retrieval:`` section of config.yaml, read once.

:class:`GraphSettings` is both the section's schema and what a query reads (a frozen
pydantic model on the shared :class:`~memory_core.configuration.ConfigModel`): every key
optional, unknown keys and ill-typed or out-of-range values refused with their dotted key
and line. Its parts are the engine's own settings (:class:`PulseConfig`,
:class:`AreaConfig`, :class:`WaveConfig`: built in code, an invalid value raises
:class:`GraphConfigError` naming its key); ``traversal`` is written as edge type ->
``[forward, reverse]`` and read as a :class:`Traversal`; ``operator`` (registered in
:data:`OPERATORS`) is a shortcut for ``area.operator`` and is reported under its own key.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from ..configuration import ConfigModel, ConfigurationError, Document, validate
from ..retrieval.bridge import BridgeConfig
from ..retrieval.scoring import ScoringConfig
from .activation import PulseConfig
from .area import AreaConfig, OperatorName
from .csr import DEFAULT_MAX_DELTA_EDGES
from .errors import GraphConfigError
from .kinds import EdgeType
from .traversal import DEFAULT_TRAVERSAL, Traversal
from .wave import WaveConfig

__all__ = ["GraphSettings", "parse_graph_settings"]


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


EdgeTypeName = Annotated[str, AfterValidator(_edge_type)]
Pair = Annotated[tuple[float, float], BeforeValidator(_pair)]


class GraphSettings(ConfigModel):
    """Everything a query and the graph holder need, with named defaults: the
    ``retrieval:`` section of config.yaml (area retrieval and its scoring)."""

    operator: OperatorName | None = None
    rules: dict[EdgeTypeName, Pair] | None = Field(None, alias="traversal")
    pulse: PulseConfig = PulseConfig()
    area: AreaConfig = AreaConfig()
    wave: WaveConfig = WaveConfig()
    max_delta_edges: int = Field(DEFAULT_MAX_DELTA_EDGES, ge=0)
    scoring: ScoringConfig = ScoringConfig()
    lexical_context: bool = Field(
        True,
        description="each fragment's BM25 document also holds the words it lacks of the "
        "turn said just before it (the answer is found by the words of its question) and of "
        "its own voice's previous turn (what it goes on telling)",
    )
    bridge: BridgeConfig = BridgeConfig()

    @model_validator(mode="after")
    def _operator_names_the_area_operator(self) -> GraphSettings:
        """``operator`` is ``area.operator`` written at the top: the area reads it."""
        if self.operator is not None and self.operator != self.area.operator:
            area = self.area.model_copy(update={"operator": self.operator})
            object.__setattr__(self, "area", area)  # frozen: set once, while validating
        return self

    @functools.cached_property
    def traversal(self) -> Traversal:
        """How activation crosses each edge type (``traversal:`` as written, over
        :data:`DEFAULT_TRAVERSAL`)."""
        if self.rules is None:
            return DEFAULT_TRAVERSAL
        rules = dict(self.rules)
        default = rules.pop("default", DEFAULT_TRAVERSAL.default)
        return Traversal.from_names(rules, default, "traversal")


def parse_graph_settings(section: Mapping[str, Any], prefix: str = "graph") -> GraphSettings:
    """Validate a mapping built in code into :class:`GraphSettings`.

    Errors are :class:`GraphConfigError` naming the dotted key under ``prefix``; a file's
    ``retrieval:`` section is validated with its lines in the proxy's configuration.
    """
    try:
        return validate(GraphSettings, section, Document.of(section), (prefix,))
    except ConfigurationError as exc:
        raise GraphConfigError(exc.key, exc.reason) from None
