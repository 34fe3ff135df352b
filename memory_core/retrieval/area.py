"""Area retrieval: the question's foci activate the memory graph; fragments are scored.

The graph is :class:`~memory_core.index.memory_graph.MemoryGraph` (fragments, contexts, entities,
sessions, shared words; typed, sourced edges). A question becomes foci, each with its own
seeds: one per content word of the question known to the graph (words used by more than
5% of the fragments are closed: no focus, no activation through them), one per entity it
names, one for its 20 best BM25 fragments and one for its 20 nearest fragments by
embedding. Each focus is pulsed separately (:func:`~.graph.pulse`; the lexical foci while
the question is still being encoded, the dense focus after, the two activations combined,
which equals one pulse of all of them). Area selection then picks the region where the
foci converge (:func:`~.graph.select_area`), returned whole with its representative and
every score term, for receipts and ``GET /memory/area``.

Retrieval is fetch, score, render. This module *fetches*: it pulses the foci, selects
the area and gathers the candidates (the BM25 top ``scoring.candidates``, every fragment
the pulse reached, the ``scoring.candidates`` nearest by embedding, the area's own
fragments) with every score term of each, as shares in [0, 1]: ``bm25`` (its BM25 score
over the best), ``activation`` (its total activation over the largest), ``convergence``
(the share of the foci that bring it at least ``convergence_share`` of their own peak),
``similarity`` (its embedding cosine to the question, floored at 0), ``area`` (the
chosen area's own ranking of it: ``operator: pulse``, activation times evenness across
foci; ``wave``, interference) and ``date`` (1 for a fragment said within a time the
question names or speaking of a day within it, :attr:`.Question.times`; the fragments that
speak of such a day, and those said within a span of a week or less, are candidates too).
:mod:`.scoring` weighs and ranks them (weights in
``retrieval.scoring``), and :mod:`.reconstruction` renders the winners. Each returned
fragment keeps its terms and score, for receipts and ``GET /memory/area``.

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
import itertools
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from numba import njit

from ..graph import (
    DEFAULT_TRAVERSAL,
    Activation,
    Area,
    AreaConfig,
    EdgeType,
    PulseConfig,
    Traversal,
    WaveConfig,
    combine,
    pulse,
    select_area,
)
from ..index.memory_graph import ACTS, MemoryGraph
from ..index.nearest import nearest
from ..storage import Connection
from ..storage.tables import contexts, dates, entities, fragments, log
from ..text.conversations import is_opaque, label_of
from ..text.lexicon import is_function_word
from ..text.question import Question
from ..text.words import normalise_name
from .bm25 import indexed_search_scores, known_share
from .scoring import Candidates, ScoringConfig, rank_computing

__all__ = ["AreaResult", "FragmentScore", "explain", "retrieve_area", "summary"]

_PULSE = PulseConfig()
_AREA = AreaConfig()
_WAVE = WaveConfig()
_SCORING = ScoringConfig()


@dataclass(frozen=True, slots=True)
class FragmentScore:
    """One returned fragment's score and every term that made it (see :mod:`.scoring`);
    ``imputed``: formed after the pinned graph version, graph terms = its BM25 share."""

    fragment_id: int
    score: float
    terms: dict[str, float]
    imputed: bool
    kind: str = "stated"
    """What the fragment does; its score is its terms' times the kind's factor."""
    factor: float = 1.0
    cosine: float | None = None
    """The cosine to the question itself (the ``similarity`` term is relative: see
    :mod:`.scoring`); None without a vector or when imputed."""

    def report(self) -> dict[str, Any]:
        """JSON-ready: ``{"id", "score", "terms", "imputed", "kind", "factor", "cosine"}``,
        values rounded to 1e-4."""
        return {
            "id": self.fragment_id,
            "score": round(self.score, 4),
            "terms": {k: round(v, 4) for k, v in self.terms.items()},
            "imputed": self.imputed,
            "kind": self.kind,
            "factor": round(self.factor, 4),
            "cosine": None if self.cosine is None else round(self.cosine, 4),
        }


@dataclass(frozen=True)
class AreaResult:
    """Ranked fragment ids (``scores`` in the same order) and what produced them."""

    fragment_ids: list[int]
    foci: list[str]
    area: Area | None
    graph_version: int
    activation: Activation | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    scores: list[FragmentScore] = field(default_factory=list)


def retrieve_area(
    conn: Connection,
    memory: MemoryGraph,
    question: Question,
    *,
    limit: int,
    traversal: Traversal | None = None,
    pulse_config: PulseConfig | None = None,
    area_config: AreaConfig | None = None,
    wave_config: WaveConfig | None = None,
    scoring: ScoringConfig | None = None,
) -> AreaResult:
    """The ``limit`` best fragment ids for ``question`` (see the module docstring).

    The lexical foci (words, entities, BM25) are pulsed first, and only then is the
    question's vector waited for (:meth:`.Question.vector`), so encoding the question can
    run meanwhile; the dense focus is pulsed afterwards and the two activations combined
    (foci never interact, so this equals one pulse of all of them).
    """
    traversal = traversal or DEFAULT_TRAVERSAL
    pulse_config = pulse_config or _PULSE
    area_config = area_config or _AREA
    scoring = scoring or _SCORING
    clock = _Clock()
    hits = indexed_search_scores(
        conn, memory.lexical, question, limit=max(scoring.seeds, scoring.candidates)
    )
    scoring = scoring.covering(known_share(conn, memory.lexical, question))
    found = [fid for fid, _ in hits]
    timed = _timed(conn, question, scoring.candidates)
    seeding = found if scoring.pool_questions else _unasked(memory, found)
    lexical = [
        n
        for n in map(memory.fragment_nodes.get, seeding[: scoring.seeds])
        if n is not None and memory.has(n)
    ]
    foci, labels = _foci(memory, question, lexical)
    clock.lap("foci")
    parts: list[Activation] = []
    if foci:
        parts.append(_pulse(memory, foci, traversal, pulse_config))
    clock.lap("pulse")
    vector = question.vector()
    clock.lap("wait_vector")
    terms = _NodeTerms(memory.graph.n_nodes)
    dense: list[int] = []
    scale: tuple[float, float] | None = None  # (0, 1) of the relative similarity
    if vector is not None and memory.vectors.shape[0]:
        wanted = max(scoring.candidates, scoring.seeds)
        allowed = None if scoring.pool_questions else memory.stated_vectors
        rows, near = nearest(
            memory.vectors, memory.vector_codes, memory.vector_prefixes, vector, wanted, allowed
        )
        if scoring.relative_similarity and near.shape[0] > 1 and near[0] > near[-1]:
            scale = (float(near[min(near.shape[0], scoring.candidates) - 1]), float(near[0]))
        nodes_near = memory.vector_nodes[rows]
        terms.candidate[nodes_near[: scoring.candidates]] = True
        dense = [int(n) for n in nodes_near[: scoring.seeds]]
        foci.append({n: 1.0 / len(dense) for n in dense})
        labels.append("dense")
        parts.append(_pulse(memory, foci[-1:], traversal, pulse_config))
    clock.lap("dense")
    area = activation = None
    if parts:
        activation = combine(parts)
        area = select_area(memory.graph, activation, traversal, area_config, wave_config or _WAVE)
        clock.lap("area")
        terms.add_activation(memory, activation, len(foci), scoring)
        terms.add_area(memory, area)
    terms.add_fragments(memory, timed)
    candidates, nodes = terms.candidates(memory, hits[: scoring.candidates])
    if question.times:
        spans = [dates.Days(t.first, t.last) for t in question.times]
        within = dates.matching(conn, candidates.fragment_ids.tolist(), spans)
        dated = np.fromiter(within, np.int64, len(within))
        candidates = candidates.with_term("date", np.isin(candidates.fragment_ids, dated))
    clock.lap("dates")
    kinds = _kinds(conn, memory, candidates, nodes)
    by_kind = {kind: scoring.factor(kind) for kind in set(kinds)}
    factor = np.fromiter(map(by_kind.__getitem__, kinds), np.float64, len(kinds))
    speaker = _named_speaker(memory, question)
    if speaker and scoring.other_speaker < 1.0:
        said = np.zeros(len(candidates), np.int32)  # rows formed since: no speaker known
        said[: nodes.shape[0]] = memory.speaker_of(nodes)
        factor[(said != 0) & (said != speaker)] *= scoring.other_speaker
    untold = np.zeros(len(candidates), dtype=bool)  # rows formed since: not known to
    untold[: nodes.shape[0]] = memory.untold_of(nodes)  # tell nothing
    factor[untold] *= scoring.untold
    if np.any(factor != 1.0):
        candidates = candidates.factored(factor)

    cosines = np.zeros(len(candidates))
    has_cosine = np.zeros(len(candidates), dtype=bool)

    def similarity(rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """The similarity term of candidate ``rows`` (graph rows come first); their
        cosines kept in ``cosines``."""
        cosine = np.zeros(rows.shape[0])
        if vector is not None:
            at = memory.vector_of[nodes[rows]]
            cosine[at >= 0] = memory.vectors[at[at >= 0]] @ vector
            cosines[rows[at >= 0]] = cosine[at >= 0]
            has_cosine[rows[at >= 0]] = True
        if scale is not None:
            low, high = scale
            return np.clip((cosine - low) / (high - low), 0.0, 1.0)
        return cosine

    pool = max(limit, scoring.context_pool) if scoring.context > 0 else limit
    candidates, order, scores = rank_computing(candidates, scoring, pool, "similarity", similarity)
    context: dict[int, float] = {}
    if scoring.context > 0:
        lends = np.where(untold, 1.0 / scoring.untold, 1.0)  # set back, but lends in full
        order, scores, context = _in_context(
            memory, candidates, nodes, order, scores, scoring, lends
        )
    order = order[:limit]
    clock.lap("rank")
    factor = candidates.multipliers()
    ranked = [
        FragmentScore(
            int(candidates.fragment_ids[i]),
            float(scores[i]),
            candidates.row(int(i)) | ({"context": context[int(i)]} if context else {}),
            bool(candidates.imputed[i]),
            kinds[int(i)],
            float(factor[i]),
            float(cosines[i]) if has_cosine[i] else None,
        )
        for i in order
    ]
    return AreaResult(
        [s.fragment_id for s in ranked],
        labels,
        area,
        memory.version,
        activation,
        clock.laps,
        ranked,
    )


_POSSESSIVE = re.compile(r"['\u2019]s?$")
"""The possessive ending of a word ("Melanie's", "James'"): :func:`normalise_name` drops
it at the end of a name only, and a question's text is no name."""


def _named_speaker(memory: MemoryGraph, question: Question) -> int:
    """The code of the one speaker of memory's conversations the question names (by a
    word or two of its text, as :func:`normalise_name` writes them), or 0 when it names
    none or several ("What did Caroline tell Melanie?" is about both); a speaker called
    by the name the other speaker addresses them with (:mod:`.addressed`) is named too.
    A speaker called by a function word ("Will"; "What", "Hey": a client's ``name`` is
    anything) is named by that word only where the question writes it as a name
    (:meth:`~memory_core.text.names.NameIndex.add`, ``speakers``: "Where did Will go?",
    never "Will you come?"). A possessive names its owner ("What do
    Melanie's kids like?": before it did not, and that question's other speaker's turns
    went unweighted; LoCoMo dev recall@10 0.804 -> 0.805, multi-hop 0.504 -> 0.508)."""
    codes = memory.speaker_codes
    if not codes:
        return 0
    words = [_POSSESSIVE.sub("", w) for w in normalise_name(question.text).split()]
    named = {codes[w] for w in words if w in codes and not is_function_word(w)}
    if any(w in codes and is_function_word(w) for w in words):  # "Will": only written as a name
        as_names = {normalise_name(n) for n in memory.names.mentioned(question.text)}
        named |= {codes[w] for w in words if w in codes and w in as_names}
    named |= {codes[f"{a} {b}"] for a, b in itertools.pairwise(words) if f"{a} {b}" in codes}
    for _, labels in question.named:  # called by the name the other speaker uses ("Mel")
        named |= {codes[key] for key in map(normalise_name, labels) if key in codes}
    return named.pop() if len(named) == 1 else 0


def _in_context(
    memory: MemoryGraph,
    candidates: Candidates,
    nodes: npt.NDArray[np.int64],
    order: npt.NDArray[np.int64],
    scores: npt.NDArray[np.float64],
    scoring: ScoringConfig,
    lends: npt.NDArray[np.float64] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], dict[int, float]]:
    """The ``order``-ed best rows ranked again with the scores of the turns said just
    before and after each (``scoring.context`` times the better of the two, times the
    row's own factor; not their sum, or a turn amid two about the question outranks the
    one that answers all of it): what answers a question is often the turn beside the
    one that names its words ("Is this your own painting?" / "Yeah, I painted that lake
    sunrise last year!").
    A neighbour lends its score times its ``lends`` (the inverse of the factor
    ``scoring.untold`` set it back by: "Is this your own painting?" tells nothing, but
    names what the turn after it answers).
    The turns beside a row are those the graph links it to (said just before or after
    it, or that it answers, corrects or depends on: every fragment-to-fragment edge;
    on LoCoMo dev the next/previous links alone give the same ranking).
    Returns the new order, the scores with the context added for those rows, and each
    row's context share (unweighted). Rows formed after the pinned graph have no
    neighbours here; a neighbour that is no candidate brings nothing."""
    graph_rows = order[order < nodes.shape[0]]
    share = np.zeros(len(candidates))
    if graph_rows.shape[0]:
        lent = scores if lends is None else scores * lends
        share[graph_rows] = memory.graph.best_beside(  # graph rows' nodes are sorted
            nodes[graph_rows], nodes, lent[: nodes.shape[0]]
        )
    factor = candidates.multipliers()[order]
    boosted = scores.copy()
    boosted[order] = scores[order] + scoring.context * factor * share[order]
    again = order[np.lexsort((candidates.fragment_ids[order], -boosted[order]))]
    return again, boosted, {int(i): float(share[i]) for i in order}


class _NodeTerms:
    """The fetch step's per-node term arrays (only fragment nodes matter) and which nodes are
    candidates; :meth:`candidates` turns them into
    :class:`~memory_core.retrieval.scoring.Candidates`."""

    def __init__(self, n_nodes: int) -> None:
        self.activation = np.zeros(n_nodes)
        self.convergence = np.zeros(n_nodes)
        self.area = np.zeros(n_nodes)
        self.candidate = np.zeros(n_nodes, dtype=bool)

    def add_activation(
        self, memory: MemoryGraph, activation: Activation, n_foci: int, scoring: ScoringConfig
    ) -> None:
        """Activation and convergence shares of every fragment the pulse reached (all
        candidates)."""
        is_fragment = memory.fragment_of[activation.nodes] >= 0
        nodes = activation.nodes[is_fragment]
        if not nodes.shape[0]:
            return
        totals = activation.total[is_fragment]
        reached = reached_foci(
            np.ascontiguousarray(activation.per_focus, dtype=np.float64),
            np.ascontiguousarray(is_fragment, dtype=np.bool_),
            float(scoring.convergence_share),
        )
        self.activation[nodes] = totals / max(float(totals.max()), 1e-300)
        self.convergence[nodes] = reached / n_foci
        self.candidate[nodes] = True

    def add_fragments(self, memory: MemoryGraph, fragment_ids: Sequence[int]) -> None:
        """Make these fragments candidates (those the pinned version holds)."""
        for fragment_id in fragment_ids:
            node = memory.fragment_nodes.get(fragment_id)
            if node is not None and memory.has(node):
                self.candidate[node] = True

    def add_area(self, memory: MemoryGraph, area: Area) -> None:
        """The chosen area's own ranking of its fragments (pulse: activation x evenness
        across foci; wave: interference), so the operator shapes what is injected."""
        if not area.fragments.shape[0]:
            return
        inside = memory.fragment_of[area.fragments] >= 0
        nodes, ranks = area.fragments[inside], area.fragment_scores[inside]
        if nodes.shape[0] and float(ranks.max()) > 0:
            self.area[nodes] = ranks / float(ranks.max())
            self.candidate[nodes] = True

    def candidates(
        self, memory: MemoryGraph, hits: list[tuple[int, float]]
    ) -> tuple[Candidates, npt.NDArray[np.int64]]:
        """Every candidate fragment with its terms but the cosine (left to
        :func:`~memory_core.retrieval.scoring.rank_computing`): the graph's candidates and the BM25
        hits (their BM25 share over the best hit; a hit the pinned version does not hold yet is an
        imputed row, see :mod:`.scoring`); and the node of each graph row (they come first)."""
        bm25 = np.zeros(self.candidate.shape[0])
        best = max((score for _, score in hits), default=0.0)
        newer_ids: list[int] = []
        newer_share: list[float] = []
        for fragment_id, score in hits if best > 0 else ():
            share = score / best
            node = memory.fragment_nodes.get(fragment_id)
            if node is not None and memory.has(node):
                bm25[node] = share
                self.candidate[node] = True
            else:
                newer_ids.append(fragment_id)
                newer_share.append(share)
        nodes = np.flatnonzero(self.candidate & (memory.fragment_of[: bm25.shape[0]] >= 0))
        zeros = np.zeros(len(newer_ids))
        candidates = Candidates.of(
            np.concatenate([memory.fragment_of[nodes], np.asarray(newer_ids, np.int64)]),
            bm25=np.concatenate([bm25[nodes], newer_share]),
            activation=np.concatenate([self.activation[nodes], zeros]),
            convergence=np.concatenate([self.convergence[nodes], zeros]),
            similarity=np.zeros(nodes.shape[0] + len(newer_ids)),
            area=np.concatenate([self.area[nodes], zeros]),
            imputed=np.concatenate([np.zeros(nodes.shape[0], bool), np.ones(len(newer_ids), bool)]),
        )
        return candidates, nodes


_SAID_WITHIN_DAYS = 7
"""A span the question names up to this long brings every fragment said within it as a
candidate (a day's or a week's sessions); a longer one (a month, a year) only favours
the candidates found otherwise: its fragments are too many to say which matter."""


def _timed(conn: Connection, question: Question, limit: int) -> list[int]:
    """The fragments the question's times bring as candidates (see :data:`.scoring`'s
    ``date`` term): those speaking of a day within them, and those said within the
    short ones; at most ``limit`` of each per span."""
    out: list[int] = []
    for span in (dates.Days(t.first, t.last) for t in question.times):
        out += dates.dated_within(conn, span, limit=limit)
        if (span.last - span.first).days < _SAID_WITHIN_DAYS:
            out += dates.said_within(conn, span, limit=limit)
    return out


def _unasked(memory: MemoryGraph, found: list[int]) -> list[int]:
    """``found`` less the fragments the pinned graph holds as stored questions (unless
    ``retrieval.scoring.pool_questions``): a question asked again found its own earlier
    askings first, by words and by vector, and the pulse seeded from them started from
    questions instead of what answers them. A fragment formed since the graph's version
    is kept (its kind is not known here; it seeds nothing anyway)."""
    nodes = [memory.fragment_nodes.get(fid) for fid in found]
    held = [n for n in nodes if n is not None and memory.has(n)]
    if not held:
        return found
    asked = ACTS.index("asked")
    acts = dict(zip(held, memory.act_of(np.asarray(held, np.int64)).tolist(), strict=True))
    return [fid for fid, n in zip(found, nodes, strict=True) if n is None or acts.get(n) != asked]


def _kinds(
    conn: Connection, memory: MemoryGraph, candidates: Candidates, nodes: npt.NDArray[np.int64]
) -> list[str]:
    """What each candidate's fragment does (``stated``, ``asked``, ``restated``): read from
    the graph for its rows (they come first), from SQLite for the few formed since."""
    kinds = [ACTS[a] for a in memory.act_of(nodes).tolist()]
    newer = candidates.fragment_ids[nodes.shape[0] :].tolist()
    if newer:
        found = fragments.kinds_of(conn, newer)
        kinds += [found.get(f, ACTS[0]) for f in newer]
    return kinds


def _pulse(
    memory: MemoryGraph,
    foci: list[dict[int, float]],
    traversal: Traversal,
    config: PulseConfig,
) -> Activation:
    return pulse(memory.graph, foci, traversal, config, closed=memory.closed_words)


class _Clock:
    def __init__(self) -> None:
        self._last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.laps[f"{stage}_ms"] = round((now - self._last) * 1000, 3)
        self._last = now


def _foci(
    memory: MemoryGraph, question: Question, lexical: list[int]
) -> tuple[list[dict[int, float]], list[str]]:
    """One focus per focus word, per entity named, and one for the BM25 fragments."""
    foci: list[dict[int, float]] = []
    labels: list[str] = []
    for term in question.stems:
        if memory.is_focus_word(term):
            foci.append({memory.term_nodes[term]: 1.0})
            labels.append(f"word:{term}")
    for name in memory.names.mentioned(question.text):
        nodes = [n for n in memory.aliases.get(normalise_name(name), ()) if memory.has(n)]
        if nodes:
            foci.append({n: 1.0 / len(nodes) for n in nodes})
            labels.append(f"entity:{name}")
    if lexical:
        foci.append({n: 1.0 / len(lexical) for n in lexical})
        labels.append("bm25")
    return foci, labels


def summary(
    memory: MemoryGraph, result: AreaResult, kept: Sequence[int] | None = None
) -> dict[str, Any]:
    """What a receipt keeps of an area query: graph version, foci, each returned
    fragment's score and terms, the chosen region (its nodes as ``[kind, id]``, edge
    types, representative, score terms), work done and timings. No SQLite reads: it is
    built on the request path. ``kept``: the fragments actually used (the request's own
    turns and the surplus left out), in order; default all that were ranked."""
    report: dict[str, Any] = {
        "graph_version": result.graph_version,
        "operator": None,
        "foci": result.foci,
        "timings_ms": result.timings_ms,
        "fragments": _reported(result.scores, kept),
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


def _reported(scores: Sequence[FragmentScore], kept: Sequence[int] | None) -> list[Any]:
    if kept is None:
        return [score.report() for score in scores]
    by_id = {score.fragment_id: score for score in scores}
    return [by_id[fid].report() for fid in kept if fid in by_id]


def explain(conn: Connection, memory: MemoryGraph, result: AreaResult) -> dict[str, Any]:
    """Everything a person needs to see why an area was chosen (JSON-ready). Fragments
    retrieval leaves out (superseded, forgotten) are not listed; as region nodes they keep
    their place with no text (see :func:`~memory_core.storage.tables.fragments.describe`)."""
    activation, area = result.activation, result.area
    described = _Describer(conn, memory)
    hidden = fragments.hidden_ids(conn, [score.fragment_id for score in result.scores])
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
        "fragments": [s.report() for s in result.scores if s.fragment_id not in hidden],
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


_OPENING_CHARS = 400
"""Characters of a conversation's first user message read to name it."""


def _day(day: object) -> str:
    """``2023-05-08`` for a session's day number; ``date unknown`` for None."""
    if not isinstance(day, int):
        return "date unknown"
    return dt.datetime.fromtimestamp(day * 86_400, dt.UTC).strftime("%Y-%m-%d")


class _Describer:
    """Names graph nodes by what they stand for in SQLite: a fragment by its speaker and
    text, an entity by its name (with its type), a context by its label, a session by its
    conversation's label and day (never a hash: see
    :func:`~memory_core.text.conversations.label_of`)."""

    def __init__(self, conn: Connection, memory: MemoryGraph) -> None:
        self._conn, self._memory = conn, memory
        self._conversations: dict[str, str] = {}

    def node(self, n: int) -> dict[str, Any]:
        kind, key = self._memory.node_keys[n]
        if kind == "fragment":
            return self._fragment(n, cast(int, key))
        described: dict[str, Any] = {"node": n, "kind": kind, "id": None, "label": str(key)}
        if kind == "entity":
            named = entities.named_type(self._conn, cast(int, key))
            described["id"] = key
            if named is not None:
                described["label"], described["type"] = named
        elif kind == "context":
            context = contexts.label_of(self._conn, cast(int, key))
            described["id"] = key
            described["label"] = context if context is not None else str(key)
        elif kind == "session" and isinstance(key, tuple):
            described["label"] = f"{self.conversation(str(key[0]))} · {_day(key[1])}"
        return described

    def conversation(self, conversation_id: str) -> str:
        """The conversation's label: its id unless that is only an identifier, else
        what its first user message is about (read once per conversation)."""
        if conversation_id not in self._conversations:
            opening = None
            if is_opaque(conversation_id):
                opening = log.openings(self._conn, [conversation_id], _OPENING_CHARS)
            found = (opening or {}).get(conversation_id)
            self._conversations[conversation_id] = label_of(conversation_id, found)
        return self._conversations[conversation_id]

    def _fragment(self, n: int, key: int) -> dict[str, Any]:
        row = fragments.describe(self._conn, key)
        return {
            "node": n,
            "kind": "fragment",
            "id": key,
            "label": f"{row.speaker or ''}: {row.text[:80]}" if row else "",
            "conversation_id": row.conversation_id if row else None,
            "conversation_label": self.conversation(row.conversation_id) if row else None,
        }


@njit(cache=True, nogil=True)
def reached_foci(per_focus: Any, rows: Any, share: float) -> Any:
    """Over the ``rows`` of ``per_focus`` (the fragments): how many foci brought each row
    at least ``share`` of their peak over those rows (a focus that reached none counts for
    none). One pass for the peaks, one for the counts, instead of numpy's strided
    reductions over a copy (a twentieth of a lookup at 100k fragments); the rows' totals
    are :attr:`~memory_core.graph.activation.Activation.total`."""
    n, k = per_focus.shape
    peak = np.zeros(k)
    count = 0
    for i in range(n):
        if rows[i]:
            count += 1
            for j in range(k):
                if per_focus[i, j] > peak[j]:
                    peak[j] = per_focus[i, j]
    reached = np.empty(count)
    out = 0
    for i in range(n):
        if rows[i]:
            hits = 0
            for j in range(k):
                if peak[j] > 0 and per_focus[i, j] >= share * peak[j]:
                    hits += 1
            reached[out] = hits
            out += 1
    return reached
