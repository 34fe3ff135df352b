"""Recall: a question turned into the memory block, in four steps.

*Fetch* finds the candidates (BM25 alone: :func:`recall_bm25`; the area of the memory
graph fused with BM25 and the question's vector: :func:`recall_area`, see :mod:`.area`),
*score* ranks them (:mod:`.scoring`, inside the area's fetch), *gather* reads the stored
relations of what is about to be rendered and of the area (:mod:`..reconstruction
.evidence`), and *render* writes the cited, delimited block within the budget
(:mod:`..reconstruction.render`). One :class:`~memory_core.text.question.Question`,
built once by the caller, is carried through all four.

A pipeline reads one tenant's memory through :class:`Memory`, what the store hands a
lookup (a :class:`~memory_core.store.memory_store.MemoryStore` is one): so retrieval
never imports the store, and the store keeps its connections, locks and threads to
itself. Every row a lookup reads comes from one committed state (:meth:`Memory.lookup`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ..graph import GraphSettings
from ..index.memory_graph import MemoryGraph
from ..reconstruction.config import ReconstructionConfig
from ..reconstruction.evidence import NO_EVIDENCE, Evidence, gather
from ..reconstruction.render import Reconstruction, reconstruct
from ..storage import Connection
from ..storage.tables import log as log_rows
from ..storage.tables.fragments import documents_using, restated_sources
from ..text.acts import restated_share, stems
from ..text.conversations import is_opaque, label_of
from ..text.question import Question
from ..text.tokens import TokenCounter
from ..text.words import stem
from ..views import AreaExplanation
from .addressed import addressed, as_named
from .area import AreaResult, explain, retrieve_area, summary
from .bm25 import Hit, fetch_hits, search
from .bridge import bridge
from .scoring import ScoringConfig

__all__ = [
    "EXCLUDED_SLACK",
    "Encoding",
    "Memory",
    "Recall",
    "explain_area",
    "recall_area",
    "recall_bm25",
    "render_again",
    "restated_by",
]

EXCLUDED_SLACK = 200
"""At most this many more area candidates than asked for are ranked to make up for the
request's own turns (a 30,000-turn history must not rank 30,000 fragments)."""
SLACK = 4
"""More candidates than asked for, to make up for the questions and restatements left
out (see :func:`_in_their_place`)."""

RESTATED_SHARE = 0.6
"""An answer restates the block it was shown when at least this share of its content
words are the block's (``From what you told me: Beatriz lives in Coimbra`` after a block
holding ``Beatriz lives in Coimbra``: all of them; an answer that adds as much again of
its own: under it)."""

MAX_SOURCES = 3
"""The most fragments an answer is recorded as restating."""
ASIDE_SHARE = 0.1
"""A question or a restatement is shown only when it scores at least this share of the
best hit (in a small memory, anything ranks: earlier questions about something else
would fill the block)."""

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Recall:
    """What retrieval found for a question and the text rendered from it."""

    hits: tuple[Hit, ...]
    context: Reconstruction
    area: Mapping[str, Any] | None = None  # area retrieval: graph version, foci, region
    tokenizer: str = ""
    """The name of the counter the block's budget was counted with."""
    evidence: Evidence = NO_EVIDENCE
    """The statements and corrections the block was rendered from (before the budget)."""
    question: Question | None = None
    """The question as retrieval read it (its words memory lacks matched to memory's:
    :mod:`.bridge`), which the block was rendered for; None before a lookup read it."""


class Encoding(Protocol):
    """A question's vector being computed on another thread."""

    def vector(self) -> Vector | None:
        """The vector (waits for it)."""

    def took_ms(self) -> float:
        """How long the encoding itself took (waits for it)."""

    def began_at(self) -> float:
        """When the encoding began (``time.perf_counter()``; waits for it)."""


class Memory(Protocol):
    """What a lookup reads of one tenant's memory."""

    @property
    def reconstruction(self) -> ReconstructionConfig:
        """What the block shows (``reconstruction:``)."""

    @property
    def graph_settings(self) -> GraphSettings:
        """How the graph is traversed and areas scored (``retrieval:``)."""

    def lookup(self) -> AbstractContextManager[Connection]:
        """The reader, held for one lookup inside one read transaction."""

    def pinned_graph(self, conn: Connection) -> MemoryGraph:
        """The published graph version, read on first use (within :meth:`lookup`);
        raises :class:`~memory_core.errors.MemoryChangedError` when memory changed
        wholesale since it was read."""

    def published_graph(self) -> MemoryGraph | None:
        """The published graph version, or None before the first one is read."""

    def encode(self, question: Question) -> Encoding:
        """Start encoding ``question`` on another thread."""

    def encode_words(self, words: Sequence[str]) -> Vector:
        """The vectors of single words, one row each, as memory's words were encoded (for
        the word bridge, :mod:`.bridge`)."""

    def counter_for(self, model: str | None) -> TokenCounter:
        """The token counter for a request naming ``model``."""


def recall_bm25(
    memory: Memory,
    question: Question,
    *,
    limit: int,
    budget_tokens: int,
    exclude_hashes: Collection[str] = (),
    model: str | None = None,
) -> Recall:
    """Full-text search alone: the ``limit`` best live fragments by BM25, rendered."""
    scoring = memory.graph_settings.scoring
    with memory.lookup() as conn:
        found = search(conn, question, limit=limit + SLACK, exclude_hashes=exclude_hashes)
        hits = _in_their_place(conn, _by_kind(found, scoring), exclude_hashes)[:limit]
        evidence = _evidence(memory, conn, question, hits)
        held = _held(memory, conn, question, None)
        hits, evidence = _labelled(conn, hits, evidence)
    return _rendered(memory, question, hits, evidence, budget_tokens, model, None, None, held)


def recall_area(
    memory: Memory,
    question: Question,
    *,
    limit: int,
    budget_tokens: int,
    exclude_hashes: Collection[str] = (),
    model: str | None = None,
) -> Recall:
    """Retrieve by area (graph activation fused with BM25) and render.

    Reads the published graph version; formation appends to it after each pass, and a
    fragment formed since is still found by its BM25 rank. At most
    :data:`EXCLUDED_SLACK` more candidates than ``limit`` are ranked to make up for the
    request's own turns.
    """
    with memory.lookup() as conn:
        extra = min(len(exclude_hashes), EXCLUDED_SLACK) + SLACK
        graph, question, result = _area(memory, conn, question, limit + extra)
        hits = fetch_hits(conn, result.fragment_ids)
        excluded = set(exclude_hashes)
        kept = [h for h in hits if h.log_hash not in excluded]
        scores = {s.fragment_id: s.score for s in result.scores}
        kept = _in_their_place(conn, kept, excluded, scores)[:limit]
        evidence = _evidence(memory, conn, question, kept, graph, result)
        held = _held(memory, conn, question, graph)
        kept, evidence = _labelled(conn, kept, evidence)
    similarity = {
        s.fragment_id: s.cosine if s.cosine is not None else s.terms.get("similarity", 0.0)
        for s in result.scores
    }
    area = summary(graph, result, kept=[h.fragment_id for h in kept])
    if question.bridged:
        area["bridged"] = {word: list(words) for word, words in question.bridged}
    if question.named:
        area["named"] = {name: list(speakers) for name, speakers in question.named}
    return _rendered(memory, question, kept, evidence, budget_tokens, model, similarity, area, held)


def render_again(
    memory: Memory, question: Question, recall: Recall, *, limit: int, budget_tokens: int
) -> Reconstruction:
    """``recall``'s block again from its ``limit`` best hits only (the evaluation
    measures the block at several sizes): the evidence of the dropped hits goes too. The
    question is read as the lookup read it (its matched words too)."""
    question = recall.question or question
    hits = recall.hits[:limit]
    with memory.lookup() as conn:
        evidence = _evidence(memory, conn, question, list(hits))
        held = _held(memory, conn, question, memory.published_graph())
        labelled, evidence = _labelled(conn, hits, evidence)
    similarity = None
    if recall.area is not None:
        similarity = {  # the cosine itself (a receipt from before it: the term, then one)
            int(f["id"]): float(
                f["cosine"] if f.get("cosine") is not None else f["terms"].get("similarity", 0.0)
            )
            for f in recall.area.get("fragments", ())
        }
    again = _rendered(
        memory, question, labelled, evidence, budget_tokens, None, similarity, None, held
    )
    return again.context


def explain_area(memory: Memory, question: Question, *, limit: int) -> AreaExplanation:
    """The foci, the chosen area with every score term, and the timings of a query."""
    with memory.lookup() as conn:
        graph, question, result = _area(memory, conn, question, limit)
        report = explain(conn, graph, result)
        report["bridged"] = {word: list(words) for word, words in question.bridged}
        report["named"] = {name: list(speakers) for name, speakers in question.named}
        return AreaExplanation.model_validate(report)


def _area(
    memory: Memory, conn: Connection, question: Question, limit: int
) -> tuple[MemoryGraph, Question, AreaResult]:
    """Run area retrieval (inside :meth:`Memory.lookup`); returns the graph read, the
    question as retrieval read it (its words memory lacks matched to memory's:
    :mod:`.bridge`) and the result. The question is encoded on another thread while its
    words are matched and the lexical foci pulsed (see :func:`.area.retrieve_area`)."""
    began = time.perf_counter()
    encoding = memory.encode(question)
    graph = memory.pinned_graph(conn)
    settings = memory.graph_settings
    bridging = time.perf_counter()
    question = addressed(question, graph)
    if question.named:  # encoded as if it named the speakers (see .addressed)
        encoding = memory.encode(dataclasses.replace(question, text=as_named(question)))
    question = bridge(question, graph.words, memory.encode_words, settings.bridge)
    bridged_ms = (time.perf_counter() - bridging) * 1000
    result = retrieve_area(
        conn,
        graph,
        question.encoding(encoding.vector),
        limit=limit,
        traversal=settings.traversal,
        pulse_config=settings.pulse,
        area_config=settings.area,
        wave_config=settings.wave,
        scoring=settings.scoring,
    )
    result.timings_ms["bridge_ms"] = round(bridged_ms, 3)
    result.timings_ms["encode_ms"] = round(encoding.took_ms(), 3)  # overlapped
    # How long before the lookup the encoding began (started ahead: positive).
    result.timings_ms["encode_lead_ms"] = round((began - encoding.began_at()) * 1000, 3)
    result.timings_ms["total_ms"] = round((time.perf_counter() - began) * 1000, 3)
    return graph, question, result


def _by_kind(hits: Sequence[Hit], scoring: ScoringConfig) -> list[Hit]:
    """BM25 ``hits`` ranked by score times their kind's factor (the area's ranking does
    the same, :mod:`.scoring`), best first; the score a hit carries is the factored one."""
    factored = [
        dataclasses.replace(h, score=h.score * scoring.factor(h.kind)) if h.kind != "stated" else h
        for h in hits
    ]
    return sorted(factored, key=lambda h: -h.score)  # stable: BM25 order among equals


def _in_their_place(
    conn: Connection,
    hits: Sequence[Hit],
    excluded: Collection[str],
    scores: Mapping[int, float] | None = None,
) -> list[Hit]:
    """Ranked ``hits`` (``scores``: each one's score, else its own) with what people
    asked and what the model restated in their place: a question or a restatement
    scoring under :data:`ASIDE_SHARE` of the best hit is left out (it only fills the
    block), a restatement gives way to what it restates, and a question asked again and
    again is shown once."""

    def score(hit: Hit) -> float:
        return hit.score if scores is None else scores.get(hit.fragment_id, 0.0)

    best = max((score(h) for h in hits), default=0.0)
    kept = [h for h in hits if h.kind == "stated" or score(h) >= ASIDE_SHARE * best]
    return _asked_once(_in_place_of_restatements(conn, kept, excluded))


def _in_place_of_restatements(
    conn: Connection, hits: Sequence[Hit], excluded: Collection[str] = ()
) -> list[Hit]:
    """``hits`` with each restating answer replaced by what it restates: its sources
    take its place (with its score) unless they rank already, or are the request's own
    turns (``excluded`` log hashes); an answer whose sources are all gone (forgotten,
    abandoned) stays, ranked as it is. What an answer restates is what gets shown and
    cited, once: the block would otherwise repeat it, and the answer is not what was
    told."""
    restating = [h.fragment_id for h in hits if h.kind == "restated"]
    if not restating:
        return list(hits)
    sources = restated_sources(conn, restating)
    ranked = {h.fragment_id: h for h in hits}
    wanted = {f for fs in sources.values() for f in fs} - set(ranked)
    found = {h.fragment_id: h for h in fetch_hits(conn, sorted(wanted))}
    available = {
        f: h
        for f, h in {**found, **ranked}.items()
        if h.kind != "restated" and h.log_hash not in excluded
    }
    out: list[Hit] = []
    emitted: set[int] = set()
    for hit in hits:
        if hit.fragment_id in emitted:
            continue  # a source already moved up to where its restatement ranked
        own = [f for f in sources.get(hit.fragment_id, ()) if f in available]
        if hit.kind != "restated" or not own:
            out.append(hit)  # a restatement whose sources are all gone stays as it is
            emitted.add(hit.fragment_id)
            continue
        for fragment in own:
            if fragment not in emitted:
                source = available[fragment]
                out.append(dataclasses.replace(source, score=max(source.score, hit.score)))
                emitted.add(fragment)
    return out


def _asked_once(hits: Sequence[Hit]) -> list[Hit]:
    """``hits`` with each question asked again and again shown once (its best-ranked
    asking): "you asked about X" needs one line, and a user who asks the same thing in
    ten conversations must not fill the block with it."""
    seen: set[str] = set()
    out = []
    for hit in hits:
        if hit.kind == "asked":
            key = " ".join(hit.text.casefold().split())
            if key in seen:
                continue
            seen.add(key)
        out.append(hit)
    return out


def _labelled(
    conn: Connection, hits: Sequence[Hit], evidence: Evidence
) -> tuple[list[Hit], Evidence]:
    """``hits`` and the evidence's extra fragments, each with its conversation's label
    (:func:`~memory_core.text.conversations.label_of`): read from the log only for the
    conversations whose id is only an identifier."""
    extra = list(evidence.extra.values())
    opaque = [h.conversation_id for h in (*hits, *extra) if is_opaque(h.conversation_id)]
    if not opaque:
        return list(hits), evidence
    opening = log_rows.openings(conn, opaque, _OPENING_CHARS)
    labels = {c: label_of(c, opening.get(c)) for c in opaque}

    def named(hit: Hit) -> Hit:
        label = labels.get(hit.conversation_id)
        return dataclasses.replace(hit, conversation_label=label) if label else hit

    extras = {f: named(h) for f, h in evidence.extra.items()}
    return [named(h) for h in hits], dataclasses.replace(evidence, extra=extras)


_OPENING_CHARS = 400


def _held(
    memory: Memory, conn: Connection, question: Question, graph: MemoryGraph | None
) -> dict[str, int]:
    """How many fragments of memory use each content focus of ``question``: the graph's
    word counts when it is read, else the full-text index, counted up to what the note's
    threshold needs."""
    words = [focus.word for focus in question.foci]
    if graph is not None:  # the graph's word nodes are stems of the words as written
        return {
            w: max(graph.term_df.get(stem(t), 0) for t in (w, *question.translations(w)))
            for w in words
        }
    need = memory.reconstruction.coverage.held_min_fragments
    return {
        w: max(documents_using(conn, t, limit=need) for t in (w, *question.translations(w)))
        for w in words
    }


def _evidence(
    memory: Memory,
    conn: Connection,
    question: Question,
    hits: Sequence[Hit],
    graph: MemoryGraph | None = None,
    result: AreaResult | None = None,
) -> Evidence:
    """The statements and corrections of ``hits`` and of the chosen area."""
    fragments: list[int] = []
    entities: set[int] = set()
    if graph is not None and result is not None and result.area is not None:
        chosen = result.area.chosen
        if chosen is not None:
            for node in chosen.region.nodes:
                kind, key = graph.node_keys[int(node)]
                if kind == "fragment" and isinstance(key, int):
                    fragments.append(key)
                elif kind == "entity" and isinstance(key, int):
                    entities.add(key)
    settings = memory.reconstruction
    return gather(
        conn,
        hits,
        max_statements=settings.max_statements,
        area_fragments=fragments,
        area_entities=entities,
        question=question,
        facts=settings.facts,
    )


def _rendered(
    memory: Memory,
    question: Question,
    hits: Sequence[Hit],
    evidence: Evidence,
    budget_tokens: int,
    model: str | None,
    similarity: Mapping[int, float] | None,
    area: Mapping[str, Any] | None,
    held: Mapping[str, int],
) -> Recall:
    counter = memory.counter_for(model)
    context = reconstruct(
        hits,
        budget_tokens=budget_tokens,
        counter=counter,
        question=question,
        evidence=evidence,
        config=memory.reconstruction,
        similarity=similarity,
        held=lambda word: held.get(word, 0),
    )
    return Recall(tuple(hits), context, area, getattr(counter, "name", ""), evidence, question)


def restated_by(recall: Recall, answer: str) -> tuple[int, ...]:
    """The fragments of ``recall``'s block that ``answer`` restates: none unless the
    answer restates the block (:data:`RESTATED_SHARE` of its content words are in the
    block's text, statements included), else the shown fragments it shares the most
    content words with, directly or through a statement that cites them (at least half
    as many as the best; at most :data:`MAX_SOURCES`), most first, then in rank order.
    Why: an answer that restates memory must rank below what it restates, and the
    fragments it was given are known only here, where it was given them."""
    context = recall.context
    if not context.shown or not answer.strip():
        return ()
    if restated_share(answer, [context.text]) < RESTATED_SHARE:
        return ()
    said = stems(answer)
    texts = {h.fragment_id: h.text for h in (*recall.evidence.extra.values(), *recall.hits)}
    about: dict[int, set[str]] = {f: set(stems(texts.get(f, ""))) for f in context.shown}
    for statement in context.statements:
        for fragment in statement.fragment_ids:
            if fragment in about:
                about[fragment].update(stems(statement.text))
    shared = {f: len(said & about[f]) for f in context.shown}
    best = max(shared.values(), default=0)
    if best == 0:
        return ()
    close = [f for f in context.shown if 2 * shared[f] >= best]  # rank order
    return tuple(sorted(close, key=lambda f: -shared[f])[:MAX_SOURCES])

