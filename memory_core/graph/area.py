r"""Area selection: from per-focus activation to one scored region of nodes and edges.

**Activated set.** ``S`` holds the nodes whose total activation ``T(v) = sum_i a_i(v)``
reaches ``min_activation`` times the total seed mass (at most ``max_activated`` of them,
the most active). Every measure below is computed on ``S`` and the stored edges among it.

**Hub weight.** A hub is active because it touches everything, not because the query
points at it. For ``v`` in ``S`` call a neighbour ``u`` *independently activated* when
``T(u) > 2 * gamma * T(v) / d(v)``: more than ``v`` alone could have handed it (``d`` is
the stored degree). With ``k(v)`` such neighbours (counted per edge entry),

    h(v) = min(1, (k(v) + free_degree) / d(v)).

A node whose neighbourhood the query lights up, however large its degree, keeps
``h = 1``: a legitimately central concept is not punished. A node with many quiet
neighbours (a speaker entity, a session node touching every fragment) gets ``h << 1``.

**Convergence centres.** With ``â_i(v) = a_i(v) / max_u a_i(u)``, the centre score is the
geometric mean ``(prod_i â_i(v))^(1/F) * h(v)`` (smoothed by 1e-12 so that two foci still
beat one): a node reached by several foci outranks one that a single focus floods.

**Candidates.** Centres are taken in order of centre score (at most
``4 * max_candidates`` are tried); a centre already inside an earlier candidate is
skipped. Its region grows breadth-first over open edges among ``S`` for ``radius`` hops,
admitting neighbours with ``h >= min_hub_weight`` (hubs are not grown through), the most
active first when ``max_region_nodes`` binds. A region overlapping an earlier one by more
than ``max_overlap`` (Jaccard) is dropped. Regions are explicit: their nodes, and every
stored edge between two of them (parallel edges kept).

**Score** of a region ``R`` with per-focus mass ``m_i = sum_{v in R} a_i(v)``,
``M = sum_i m_i``, ``F`` foci, seed mass ``m0``:

- ``coverage``: the fraction of foci with ``m_i >= focus_share * M / F``;
- ``convergence``: ``exp(H(p)) / F``, ``p_i = m_i / M``, the effective number of foci over
  ``F`` (1 when all foci contribute equally; ``1/F`` when one focus brings everything, so
  three units from one focus and one unit from each of three foci differ);
- ``mass``: ``M / (m0 * |R|^size_exponent)``, activation normalised by size;
- ``hub_penalty``: ``1 - sum_{v in R} T(v) h(v) / M``, the share of the mass sitting on
  hub-like nodes;
- ``support``: ``s / (s + support_half)`` with ``s`` the distinct source fragments (edge
  sources and fragment nodes of ``R``); a region nothing supports scores 0;

and ``score = coverage * convergence * mass * (1 - hub_penalty) * support``. The chosen
area is the best candidate, whole; its representative is its centre. Its fragments (those
in the region, and the sources of its edges) are ranked by ``T(v) * exp(H(p_v)) / F``, or,
with ``operator = "wave"``, by the wave's interference ``C(v)`` on the region
(:mod:`.wave`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

import numpy as np
import numpy.typing as npt
from pydantic import AfterValidator, Field

from ..registry import Registry
from .activation import Activation
from .compiled.field import local_arrays
from .compiled.growth import grow_all
from .compiled.region_terms import candidate_terms
from .csr import GraphVersion
from .edges import EdgeList
from .errors import GraphModel
from .kinds import MAX_EDGE_TYPES, NodeKind
from .traversal import Traversal
from .wave import DEFAULT_WAVE, WaveConfig, WaveResult, damped_wave, region_laplacian

__all__ = [
    "DEFAULT_AREA",
    "OPERATORS",
    "Area",
    "AreaConfig",
    "Candidate",
    "OperatorName",
    "Region",
    "RegionScore",
    "score_region",
    "select_area",
]

Floats = npt.NDArray[np.float64]
Int64s = npt.NDArray[np.int64]
_SMOOTH = 1e-12
Operator = Callable[
    [GraphVersion, Traversal, "Region", npt.NDArray[np.float64], WaveConfig], WaveResult | None
]
"""Given the chosen region and its per-focus contributions, the wave to rank its fragments
by, or None to rank them by pulse activation."""

OPERATORS: Registry[Operator] = Registry("operator")
"""How the chosen region's fragments are ranked (``AreaConfig.operator``), by name."""


def _by_activation(
    graph: GraphVersion,
    traversal: Traversal,
    region: Region,
    contributions: Floats,
    wave: WaveConfig,
) -> WaveResult | None:
    """``pulse``: no wave; fragments are ranked by activation times evenness across foci."""
    return None


def _by_wave(
    graph: GraphVersion,
    traversal: Traversal,
    region: Region,
    contributions: Floats,
    wave: WaveConfig,
) -> WaveResult | None:
    """``wave``: the damped wave over the region, started from the foci's contributions."""
    laplacian = region_laplacian(graph, traversal, region.nodes)
    return damped_wave(region.nodes, laplacian, contributions, wave)


OPERATORS.register(
    "pulse", _by_activation, "rank the area's fragments by activation x evenness across foci"
)
OPERATORS.register("wave", _by_wave, "rank them by the damped wave's interference on the region")


def _operator(name: str) -> str:
    return OPERATORS.check(name)


OperatorName = Annotated[str, AfterValidator(_operator)]
"""A name registered in :data:`OPERATORS`."""


class AreaConfig(GraphModel):
    """Thresholds and exponents of area selection (module docstring has the formulas;
    ``retrieval.area``); ``operator`` ranks the chosen region's fragments."""

    section = "area"
    min_activation: float = Field(1e-3, ge=0)
    max_activated: int = Field(4096, ge=1)
    focus_share: float = Field(0.25, ge=0)
    free_degree: float = Field(4.0, ge=0)
    min_hub_weight: float = Field(0.5, ge=0, le=1)
    radius: int = Field(2, ge=0)
    max_region_nodes: int = Field(48, ge=1)
    max_candidates: int = Field(8, ge=1)
    max_overlap: float = Field(0.5, ge=0, le=1)
    size_exponent: float = Field(0.5, ge=0)
    support_half: float = Field(1.0, ge=1e-12)
    operator: OperatorName = "pulse"



DEFAULT_AREA = AreaConfig()
"""The documented area settings."""

@dataclass(frozen=True, eq=False)
class Region:
    """An explicit region: sorted nodes, every stored edge among them, and its centre."""

    nodes: Int64s
    edges: EdgeList
    centre: int


@dataclass(frozen=True)
class RegionScore:
    """Every term of a region's score, and the score (their product)."""

    score: float
    coverage: float
    convergence: float
    mass: float
    hub_penalty: float
    support: float
    size: int
    total: float
    sources: int
    edge_ids: int
    per_focus: tuple[float, ...]


@dataclass(frozen=True, eq=False)
class Candidate:
    """A candidate region with its score terms."""

    region: Region
    terms: RegionScore


@dataclass(frozen=True, eq=False)
class Area:
    """The chosen region (whole), all candidates best first, and the ranked fragments.

    ``contributions[k]`` is the per-focus activation of ``chosen.region.nodes[k]``; ``wave``
    is set when the ``wave`` operator ranked the fragments.
    """

    version: int
    chosen: Candidate | None
    candidates: tuple[Candidate, ...]
    contributions: Floats
    fragments: Int64s
    fragment_scores: Floats
    activated: int
    wave: WaveResult | None = None

    @property
    def representative(self) -> int | None:
        """The chosen region's convergence centre."""
        return None if self.chosen is None else self.chosen.region.centre


def select_area(
    graph: GraphVersion,
    activation: Activation,
    traversal: Traversal,
    config: AreaConfig = DEFAULT_AREA,
    wave: WaveConfig = DEFAULT_WAVE,
) -> Area:
    """Build candidate regions around convergence centres, score them, return the best
    (``wave``: the damped wave's settings, when ``config.operator`` is ``wave``)."""
    measures = _Field.build(graph, activation, traversal, config, _activated(activation, config))
    candidates = sorted(
        measures.candidates(*_grow_all(measures, config), config),
        key=lambda c: (-c.terms.score, c.region.centre),
    )
    chosen = candidates[0] if candidates else None
    if chosen is None:
        nothing = np.empty((0, activation.n_foci))
        return Area(graph.version, None, (), nothing, np.empty(0, np.int64), np.empty(0), 0)
    contributions = _rows(activation, chosen.region.nodes)
    waved = OPERATORS.get(config.operator)(graph, traversal, chosen.region, contributions, wave)
    fragments, scores = _rank_fragments(graph, activation, chosen.region, waved)
    return Area(
        graph.version,
        chosen,
        tuple(candidates),
        contributions,
        fragments,
        scores,
        int(measures.ids.shape[0]),
        waved,
    )


def score_region(
    graph: GraphVersion,
    activation: Activation,
    traversal: Traversal,
    nodes: npt.ArrayLike,
    config: AreaConfig = DEFAULT_AREA,
) -> RegionScore:
    """Score an explicit node set with the same terms :func:`select_area` uses."""
    wanted = np.unique(np.asarray(nodes, dtype=np.int64))
    ids = np.union1d(_activated(activation, config), wanted)
    measures = _Field.build(graph, activation, traversal, config, ids)
    members = np.searchsorted(measures.ids, wanted).astype(np.int64)
    centre = int(members[np.argmax(measures.centre[members])]) if members.shape[0] else 0
    offsets = np.array([0, members.shape[0]], np.int64)
    (scored,) = measures.candidates(np.array([centre], np.int64), offsets, members, config)
    return scored.terms


@dataclass(eq=False)
class _Field:
    """Node-level measures over the activated set, with a local adjacency for growth."""

    graph: GraphVersion
    ids: Int64s
    per_focus: Floats
    total: Floats
    hub: Floats
    centre: Floats
    edges: EdgeList
    ends: tuple[Int64s, Int64s]
    indptr: Int64s
    neighbours: Int64s
    seed_mass: float
    fragment_id: Int64s
    edge_key: Int64s

    @classmethod
    def build(
        cls,
        graph: GraphVersion,
        activation: Activation,
        traversal: Traversal,
        config: AreaConfig,
        ids: Int64s,
    ) -> _Field:
        per_focus = _rows(activation, ids)
        total = per_focus.sum(axis=1)
        degree = np.maximum(graph.degree(ids), 1).astype(np.float64)
        edges = graph.induced_edges(ids)
        u, v, hub, indptr, neighbours = local_arrays(
            ids,
            edges.src,
            edges.dst,
            edges.edge_type,
            (traversal.forward_table > 0) | (traversal.reverse_table > 0),
            total,
            degree,
            float(activation.gamma),
            float(config.free_degree),
        )
        centre = _centre_scores(per_focus, activation) * hub
        seed_mass = float(activation.seed_mass.sum())
        fragment_id = np.where(graph.kinds[ids] == NodeKind.FRAGMENT, ids, -1).astype(np.int64)
        return cls(
            graph,
            ids,
            per_focus,
            total,
            hub,
            centre,
            edges,
            (u, v),
            indptr,
            neighbours,
            seed_mass,
            fragment_id,
            _edge_keys(edges),
        )

    def candidates(
        self, centres: Int64s, offsets: Int64s, members: Int64s, config: AreaConfig
    ) -> list[Candidate]:
        """Candidate ``i``: centred on field index ``centres[i]``, holding the field
        indices ``members[offsets[i]:offsets[i + 1]]``, with its score terms (computed
        for all at once: :func:`~memory_core.graph.compiled.region_terms.candidate_terms`)."""
        u, v = self.ends
        sums, justified, sources, pairs, row_offsets, rows = candidate_terms(
            offsets,
            members,
            u,
            v,
            self.edges.source,
            self.edge_key,
            self.fragment_id,
            self.per_focus,
            self.total,
            self.hub,
        )
        totals = sums.sum(axis=1)
        n_foci = sums.shape[1]
        coverage = (
            np.mean(sums >= (config.focus_share * totals / n_foci)[:, None], axis=1)
            if n_foci
            else np.zeros(totals.shape[0])
        )
        convergence = _row_evenness(sums, totals)
        found = []
        for i, centre in enumerate(centres.tolist()):
            group = members[offsets[i] : offsets[i + 1]]
            region = Region(
                np.sort(self.ids[group]),
                self.edges.take(rows[row_offsets[i] : row_offsets[i + 1]]),
                int(self.ids[centre]),
            )
            terms = _terms(
                sums[i],
                float(totals[i]),
                float(coverage[i]),
                float(convergence[i]),
                float(justified[i]),
                int(sources[i]),
                int(pairs[i]),
                int(offsets[i + 1] - offsets[i]),
                self.seed_mass,
                config,
            )
            found.append(Candidate(region, terms))
        return found


def _terms(
    m: Floats,
    total: float,
    coverage: float,
    convergence: float,
    justified: float,
    sources: int,
    edge_ids: int,
    size: int,
    seed_mass: float,
    config: AreaConfig,
) -> RegionScore:
    """A region's :class:`RegionScore` from its per-focus mass ``m`` and counts."""
    support = sources / (sources + config.support_half)
    if total <= 0.0 or size == 0:
        return RegionScore(0.0, 0.0, 0.0, 0.0, 0.0, support, size, 0.0, sources, edge_ids, ())
    mass = total / (max(seed_mass, _SMOOTH) * size**config.size_exponent)
    hub_penalty = min(1.0, max(0.0, 1.0 - justified / total))
    score = coverage * convergence * mass * (1.0 - hub_penalty) * support
    return RegionScore(
        score,
        coverage,
        convergence,
        mass,
        hub_penalty,
        support,
        size,
        total,
        sources,
        edge_ids,
        tuple(m.tolist()),
    )


def _edge_keys(edges: EdgeList) -> Int64s:
    """One int64 per edge, equal exactly when ``(edge_type, edge_id)`` are: the id times
    the number of types plus the type; edge ids outside ``[0, 2**54)`` (never stored, but
    an EdgeList allows them) are ranked first, so the key still fits."""
    ids = edges.edge_id
    if ids.shape[0] and (ids.min() < 0 or ids.max() >= 2**54):
        ids = np.unique(ids, return_inverse=True)[1].astype(np.int64)
    return ids * MAX_EDGE_TYPES + edges.edge_type.astype(np.int64)


def _grow_all(measures: _Field, config: AreaConfig) -> tuple[Int64s, Int64s, Int64s]:
    """``(centres, offsets, members)`` of the kept candidates, in centre order (compiled:
    :func:`~memory_core.graph.compiled.growth.grow_all`; see :meth:`_Field.candidates`).

    At most ``4 * max_candidates`` centres are tried, so a crowd of overlapping regions
    cannot make selection slow.
    """
    order = np.lexsort((measures.ids, -measures.total, -measures.centre))
    return grow_all(
        order.astype(np.int64),
        measures.indptr,
        measures.neighbours,
        measures.hub,
        measures.total,
        config.radius,
        config.max_region_nodes,
        config.min_hub_weight,
        config.max_candidates,
        config.max_overlap,
    )


def _activated(activation: Activation, config: AreaConfig) -> Int64s:
    total = activation.total
    keep = np.flatnonzero(total >= config.min_activation * activation.seed_mass.sum())
    keep = keep[total[keep] > 0.0]
    if keep.shape[0] > config.max_activated:
        keep = keep[np.argsort(-total[keep], kind="stable")[: config.max_activated]]
    return np.sort(activation.nodes[keep])


def _rows(activation: Activation, ids: Int64s) -> Floats:
    """Per-focus activation of ``ids`` (zeros for nodes the pulse never reached)."""
    out = np.zeros((ids.shape[0], activation.n_foci))
    if activation.nodes.shape[0] == 0:
        return out
    pos = np.minimum(np.searchsorted(activation.nodes, ids), activation.nodes.shape[0] - 1)
    found = activation.nodes[pos] == ids
    out[found] = activation.per_focus[pos[found]]
    return out


def _centre_scores(per_focus: Floats, activation: Activation) -> Floats:
    """Geometric mean over foci of activation relative to each focus's peak."""
    peak = activation.peak if activation.nodes.shape[0] else np.ones(1)
    relative = per_focus / np.where(peak > 0.0, peak, 1.0)
    return np.asarray(np.exp(np.log(relative + _SMOOTH).mean(axis=1)), dtype=np.float64)


def _row_evenness(rows: Floats, totals: Floats) -> Floats:
    """Each row's evenness: ``exp(entropy) / len(shares)`` of its shares of its total,
    the effective fraction of contributors (0 for a row with nothing)."""
    if rows.shape[0] == 0 or rows.shape[1] == 0:
        return np.zeros(rows.shape[0])
    shares = rows / np.where(totals > 0, totals, 1.0)[:, None]
    safe = np.where(shares > 0.0, shares, 1.0)
    entropy = -(shares * np.log(safe)).sum(axis=1)
    return np.where(totals > 0, np.exp(entropy) / rows.shape[1], 0.0)


def _rank_fragments(
    graph: GraphVersion, activation: Activation, region: Region, wave: WaveResult | None
) -> tuple[Int64s, Floats]:
    """The region's fragments and its edges' sources, best first.

    Pulse: by ``T(v) * evenness(v)``. Wave: by interference ``C(v)``; sources outside the
    region (no wave there) follow, by their pulse score.
    """
    members = region.nodes[graph.kinds[region.nodes] == NodeKind.FRAGMENT]
    sources = region.edges.source[region.edges.source >= 0]
    candidates = np.union1d(members, sources).astype(np.int64)
    rows = _rows(activation, candidates)
    totals = rows.sum(axis=1)
    scores = totals * _row_evenness(rows, totals)
    if wave is None:
        order = np.lexsort((candidates, -scores))
        return candidates[order], np.asarray(scores[order], dtype=np.float64)
    waves = np.zeros(candidates.shape[0])
    inside = np.isin(candidates, wave.nodes)
    waves[inside] = wave.interference[np.searchsorted(wave.nodes, candidates[inside])]
    order = np.lexsort((candidates, -scores, -waves))
    return candidates[order], np.asarray(waves[order], dtype=np.float64)
