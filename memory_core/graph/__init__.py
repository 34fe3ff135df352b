"""Graph engine and area retrieval (DESIGN.md §7): pure numerics, no SQLite, no I/O.

A query pins one :class:`GraphVersion` (published by ``memory_core.index.holder``), runs
:func:`pulse` from its foci, and hands the :class:`Activation` to :func:`select_area`,
which returns the chosen region whole, its representative, every candidate with its score
terms, and the ranked fragments. :func:`damped_wave` is the wave variant (``AreaConfig.operator``).
Building the edge lists from SQLite, and the foci from a message, are the caller's job.
"""

from .activation import Activation, PulseConfig, combine, pulse
from .area import (
    OPERATORS,
    Area,
    AreaConfig,
    Candidate,
    Region,
    RegionScore,
    score_region,
    select_area,
)
from .config import GraphSettings, parse_graph_settings
from .csr import CSR, DEFAULT_MAX_DELTA_EDGES, Arcs, GraphVersion, ReverseIndex
from .edges import EdgeList
from .errors import GraphConfigError, GraphError
from .kinds import MAX_EDGE_TYPES, EdgeType, NodeKind
from .traversal import DEFAULT_TRAVERSAL, Traversal
from .wave import MAX_WAVE_NODES, WaveConfig, WaveResult, damped_wave, region_laplacian

__all__ = [
    "CSR",
    "DEFAULT_MAX_DELTA_EDGES",
    "DEFAULT_TRAVERSAL",
    "MAX_EDGE_TYPES",
    "MAX_WAVE_NODES",
    "OPERATORS",
    "Activation",
    "Arcs",
    "Area",
    "AreaConfig",
    "Candidate",
    "EdgeList",
    "EdgeType",
    "GraphConfigError",
    "GraphError",
    "GraphSettings",
    "GraphVersion",
    "NodeKind",
    "PulseConfig",
    "Region",
    "RegionScore",
    "ReverseIndex",
    "Traversal",
    "WaveConfig",
    "WaveResult",
    "combine",
    "damped_wave",
    "parse_graph_settings",
    "pulse",
    "region_laplacian",
    "score_region",
    "select_area",
]
