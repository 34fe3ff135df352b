"""Area retrieval: the question's foci activate the memory graph; fragments are scored.

The graph is :class:`~.memory_graph.MemoryGraph` (fragments, contexts, entities,
sessions, shared words; typed, sourced edges). A question becomes foci, each with its own
seeds: one per content word of the question known to the graph (words used by more than
5% of the fragments are closed: no focus, no activation through them), one per entity it
names, one for its 20 best BM25 fragments and one for its 20 nearest fragments by
embedding. Each focus is pulsed separately (:func:`~.graph.pulse`; the lexical foci while
the question is still being encoded, the dense focus after, the two activations combined,
which equals one pulse of all of them). Area selection then picks the region where the
foci converge (:func:`~.graph.select_area`), returned whole with its representative and
every score term, for receipts and ``GET /memory/area``.

Each fragment is scored

    bm25 / max bm25  +  0.5 * T / max T  +  1.0 * reached / F  +  0.5 * max(cos, 0)
                     +  0.1 * a / max a   (fragments of the chosen area only)

over the BM25 top 50, every fragment the pulse reached and the 50 nearest by embedding:
``T`` its total activation, ``reached`` the number of the ``F`` foci that bring it at
least 5% of their own peak (the convergence of foci, per fragment), ``cos`` its
embedding similarity to the question, ``a`` the area's own ranking of its fragments
(``operator: pulse``: activation times evenness across foci; ``wave``: interference). A
fragment formed after the pinned graph version has no graph or vector terms; they are
taken to agree with its BM25 share, so it still competes at full scale.

Why these terms (LoCoMo dev, recall@10 over categories 1-4, ``docs/evaluation.md``):
BM25 alone 0.614; the first wiring, reciprocal-rank fusion of BM25 and activation, 0.632
(ranks cannot tell a fragment one focus floods from one where several foci meet); the
score without its area term 0.701, higher on each of the five conversations; without the
convergence term 0.655; without the graph terms (BM25 + cosine only) 0.640. The area term
is kept small on purpose: it is how the chosen region (and the operator) shapes what is
injected, as DESIGN.md §7 asks, but larger weights lowered recall (0.696 at 0.1, 0.692 at
0.2, 0.682 at 0.5 as a flat bonus; the per-fragment convergence term already carries the
same idea at the grain of a fragment).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from .formation.linking import normalise_name
from .graph import (
    DEFAULT_TRAVERSAL,
    Activation,
    Area,
    AreaConfig,
    EdgeType,
    PulseConfig,
    Traversal,
    combine,
    pulse,
    select_area,
)
from .memory_graph import MemoryGraph, stem
from .retrieval import Hit, query_terms, search
from .storage import Connection, contexts, entities, fragments

__all__ = ["AreaResult", "explain", "retrieve_area", "summary"]

_PULSE = PulseConfig()
_AREA = AreaConfig()
_SEEDS = 20  # seeds of the BM25 focus and of the dense focus
_LEXICAL = 50  # BM25 fragments scored in the final ranking
_W_ACTIVATION = 0.5
_W_CONVERGENCE = 1.0
_W_DENSE = 0.5
_W_AREA = 0.1
_CONVERGENCE_SHARE = 0.05  # a focus reaches a fragment with >= this share of its own peak
_NEWER = 1.0 + _W_ACTIVATION + _W_CONVERGENCE + _W_DENSE


@dataclass(frozen=True)
class AreaResult:
    """Ranked fragment ids and what produced them."""

    fragment_ids: list[int]
    foci: list[str]
    area: Area | None
    graph_version: int
    lists: tuple[list[int], list[int], list[int]] = ([], [], [])
    activation: Activation | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)


Vector = npt.NDArray[np.float32]


def retrieve_area(
    conn: Connection,
    memory: MemoryGraph,
    question: str,
    question_vector: Vector | Callable[[], Vector | None] | None,
    *,
    limit: int,
    traversal: Traversal | None = None,
    pulse_config: PulseConfig | None = None,
    area_config: AreaConfig | None = None,
) -> AreaResult:
    """The ``limit`` best fragment ids for ``question`` (see the module docstring).

    ``question_vector`` may be a callable that waits for the embedding: the lexical foci
    (words, entities, BM25) are pulsed first, and only then is it called, so encoding the
    question can run meanwhile; the dense focus is pulsed afterwards and the two
    activations combined (foci never interact, so this equals one pulse of all of them).
    """
    traversal = traversal or DEFAULT_TRAVERSAL
    pulse_config = pulse_config or _PULSE
    area_config = area_config or _AREA
    clock = _Clock()
    hits = search(conn, question, limit=max(_SEEDS, _LEXICAL))
    found = [h.fragment_id for h in hits]
    lexical = [
        n for n in map(memory.fragment_nodes.get, found[:_SEEDS]) if n is not None and memory.has(n)
    ]
    foci, labels = _foci(memory, question, lexical)
    clock.lap("foci")
    parts: list[Activation] = []
    if foci:
        parts.append(_pulse(memory, foci, traversal, pulse_config))
    clock.lap("pulse")
    vector = question_vector() if callable(question_vector) else question_vector
    clock.lap("wait_vector")
    score = np.zeros(memory.graph.n_nodes)  # per node; only fragment nodes get a score
    candidate = np.zeros(memory.graph.n_nodes, dtype=bool)  # activated or dense top 50
    dense: list[int] = []
    rows = memory.vectors.shape[0]
    if vector is not None and rows:
        sims = memory.vectors @ vector
        score[memory.vector_nodes] += _W_DENSE * np.maximum(sims, 0.0)
        nearest = min(_LEXICAL, rows)
        candidate[memory.vector_nodes[np.argpartition(-sims, nearest - 1)[:nearest]]] = True
        k = min(_SEEDS, rows)
        top = np.argpartition(-sims, k - 1)[:k]
        dense = [int(memory.vector_nodes[i]) for i in top[np.argsort(-sims[top])]]
        foci.append({n: 1.0 / len(dense) for n in dense})
        labels.append("dense")
        parts.append(_pulse(memory, foci[-1:], traversal, pulse_config))
    clock.lap("dense")
    activated: list[int] = []
    area = activation = None
    if parts:
        activation = combine(parts)
        area = select_area(memory.graph, activation, traversal, area_config)
        clock.lap("area")
        is_fragment = memory.fragment_of[activation.nodes] >= 0
        nodes, per_focus = activation.nodes[is_fragment], activation.per_focus[is_fragment]
        if nodes.shape[0]:
            totals = per_focus.sum(axis=1)
            peak = per_focus.max(axis=0, keepdims=True)
            reached = ((per_focus >= _CONVERGENCE_SHARE * peak) & (peak > 0)).sum(axis=1)
            score[nodes] += _W_ACTIVATION * totals / max(float(totals.max()), 1e-300)
            score[nodes] += _W_CONVERGENCE * reached / len(foci)
            candidate[nodes] = True
        if area.fragments.shape[0] and _W_AREA:
            # the chosen area's own ranking of its fragments (pulse: activation x evenness
            # across foci; wave: interference), so the operator shapes what is injected
            inside = area.fragments[memory.fragment_of[area.fragments] >= 0]
            ranks = area.fragment_scores[memory.fragment_of[area.fragments] >= 0]
            if inside.shape[0] and float(ranks.max()) > 0:
                score[inside] += _W_AREA * ranks / float(ranks.max())
                candidate[inside] = True
            activated = [int(n) for n in nodes[np.argsort(-totals, kind="stable")]]
    ranked = _ranked(memory, np.where(candidate, score, 0.0), hits[:_LEXICAL], limit)
    clock.lap("rank")
    return AreaResult(
        ranked,
        labels,
        area,
        memory.version,
        (lexical, dense, activated),
        activation,
        clock.laps,
    )


def _pulse(
    memory: MemoryGraph,
    foci: list[dict[int, float]],
    traversal: Traversal,
    config: PulseConfig,
) -> Activation:
    return pulse(memory.graph, foci, traversal, config, closed=memory.closed_words)


def _ranked(
    memory: MemoryGraph, score: npt.NDArray[np.float64], hits: list[Hit], limit: int
) -> list[int]:
    """The ``limit`` best fragment ids by score, BM25 (normalised by the best) added; ties
    by id. See the module docstring. ``score`` is the caller's and is changed.

    Only candidates carry a ``score`` (fragments the pulse reached, the 50 nearest by
    embedding): ranking every fragment by its cosine alone cost 6 ms at 10k fragments and
    changed nothing in the first ten.

    A fragment formed after this graph version has no graph or vector terms: they are taken
    to agree with its BM25 share, so it competes at full scale on BM25 alone.
    """
    best = max((h.score for h in hits), default=0.0)
    newer: list[tuple[float, int]] = []
    for hit in hits if best > 0 else ():
        share = hit.score / best
        node = memory.fragment_nodes.get(hit.fragment_id)
        if node is not None and memory.has(node):
            score[node] += share
        else:
            newer.append((_NEWER * share, hit.fragment_id))
    live = np.flatnonzero((score > 0) & (memory.fragment_of[: score.shape[0]] >= 0))
    ids, values = memory.fragment_of[live], score[live]
    top = np.lexsort((ids, -values))[: limit + len(newer)]
    ranked = [(float(v), int(f)) for v, f in zip(values[top], ids[top], strict=True)] + newer
    ranked.sort(key=lambda item: (-item[0], item[1]))
    return [fid for _, fid in ranked[:limit]]


class _Clock:
    def __init__(self) -> None:
        self._last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.laps[f"{stage}_ms"] = round((now - self._last) * 1000, 3)
        self._last = now


def _foci(
    memory: MemoryGraph, question: str, lexical: list[int]
) -> tuple[list[dict[int, float]], list[str]]:
    """One focus per focus word, per entity named, and one for the BM25 fragments."""
    foci: list[dict[int, float]] = []
    labels: list[str] = []
    for term in dict.fromkeys(stem(t) for t in query_terms(question)):
        if memory.is_focus_word(term):
            foci.append({memory.term_nodes[term]: 1.0})
            labels.append(f"word:{term}")
    for name in memory.names.mentioned(question):
        nodes = [n for n in memory.aliases.get(normalise_name(name), ()) if memory.has(n)]
        if nodes:
            foci.append({n: 1.0 / len(nodes) for n in nodes})
            labels.append(f"entity:{name}")
    if lexical:
        foci.append({n: 1.0 / len(lexical) for n in lexical})
        labels.append("bm25")
    return foci, labels


def summary(memory: MemoryGraph, result: AreaResult) -> dict[str, Any]:
    """What a receipt keeps of an area query: graph version, foci, the chosen region
    (its nodes as ``[kind, id]``, edge types, representative, score terms), work done and
    timings. No SQLite reads: it is built on the request path."""
    report: dict[str, Any] = {
        "graph_version": result.graph_version,
        "operator": None,
        "foci": result.foci,
        "timings_ms": result.timings_ms,
        "region": None,
    }
    activation, area = result.activation, result.area
    if activation is not None:
        report["visited"] = {"nodes": activation.nodes_visited, "edges": activation.edges_visited}
    if area is None or area.chosen is None:
        return report
    report["operator"] = "wave" if area.wave is not None else "pulse"
    region = area.chosen.region
    types = np.bincount(region.edges.edge_type.astype(np.int64), minlength=1)
    report["region"] = {
        "representative": list(memory.node_keys[int(region.centre)]),
        "nodes": [list(memory.node_keys[int(n)]) for n in region.nodes],
        "edges": {EdgeType(t).name.lower(): int(c) for t, c in enumerate(types) if c},
        "score": {
            k: v
            for k, v in dataclasses.asdict(area.chosen.terms).items()
            if k not in ("per_focus",)
        },
    }
    return report


def explain(conn: Connection, memory: MemoryGraph, result: AreaResult) -> dict[str, Any]:
    """Everything a person needs to see why an area was chosen (JSON-ready)."""
    activation, area = result.activation, result.area
    described = _Describer(conn, memory)
    report: dict[str, Any] = {
        "graph_version": result.graph_version,
        "graph": {
            "nodes": memory.graph.n_nodes,
            "edges": memory.graph.n_edges,
            "delta_edges": memory.graph.n_delta,
            "fragments": memory.fragments,
        },
        "foci": result.foci,
        "timings_ms": result.timings_ms,
        "fragments": result.fragment_ids,
        "area": None,
        "candidates": [],
    }
    if activation is not None:
        report["visited"] = {
            "nodes": activation.nodes_visited,
            "pushes": activation.pushes,
            "edges": activation.edges_visited,
            "rounds": activation.rounds,
            "converged": activation.converged,
        }
    if area is None or area.chosen is None:
        return report
    region = area.chosen.region
    report["area"] = {
        "representative": described.node(int(region.centre)),
        "score": dataclasses.asdict(area.chosen.terms),
        "nodes": [
            {
                **described.node(int(n)),
                "per_focus": dict(zip(result.foci, map(float, row), strict=True)),
            }
            for n, row in zip(region.nodes, area.contributions, strict=True)
        ],
        "edges": [
            {
                "src": int(a),
                "dst": int(b),
                "type": EdgeType(int(t)).name.lower(),
                "edge_id": int(e),
                "source": described.node(int(src)) if src >= 0 else None,
            }
            for a, b, t, e, src in zip(
                region.edges.src,
                region.edges.dst,
                region.edges.edge_type,
                region.edges.edge_id,
                region.edges.source,
                strict=True,
            )
        ],
    }
    report["candidates"] = [
        {
            "representative": described.node(int(c.region.centre)),
            "size": len(c.region.nodes),
            "score": c.terms.score,
        }
        for c in area.candidates
    ]
    return report


def _day(day: object) -> str:
    """``2023-05-08`` for a session's day number; ``date unknown`` for None."""
    if not isinstance(day, int):
        return "date unknown"
    return dt.datetime.fromtimestamp(day * 86_400, dt.UTC).strftime("%Y-%m-%d")


class _Describer:
    """Names graph nodes by what they stand for in SQLite."""

    def __init__(self, conn: Connection, memory: MemoryGraph) -> None:
        self._conn, self._memory = conn, memory

    def node(self, n: int) -> dict[str, Any]:
        kind, key = self._memory.node_keys[n]
        if kind == "fragment":
            row = fragments.describe(self._conn, cast(int, key))
            label = f"{row.speaker or ''}: {row.text[:80]}" if row else ""
            return {
                "node": n,
                "kind": kind,
                "id": key,
                "label": label,
                "conversation_id": row.conversation_id if row else None,
            }
        label = str(key)
        if kind == "entity":
            name = entities.name_of(self._conn, cast(int, key))
            label = name if name is not None else label
        elif kind == "context":
            context = contexts.label_of(self._conn, cast(int, key))
            label = context if context is not None else label
        elif kind == "session" and isinstance(key, tuple):
            label = f"{key[0]} {_day(key[1])}"
        return {
            "node": n,
            "kind": kind,
            "id": key if kind in ("entity", "context") else None,
            "label": label,
        }
