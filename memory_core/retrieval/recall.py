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
from ..storage.tables.fragments import documents_using
from ..text.question import Question
from ..text.tokens import TokenCounter
from ..text.words import stem
from ..views import AreaExplanation
from .area import AreaResult, explain, retrieve_area, summary
from .bm25 import Hit, fetch_hits, search

__all__ = [
    "EXCLUDED_SLACK",
    "Encoding",
    "Memory",
    "Recall",
    "explain_area",
    "recall_area",
    "recall_bm25",
    "render_again",
]

EXCLUDED_SLACK = 200
"""At most this many more area candidates than asked for are ranked to make up for the
request's own turns (a 30,000-turn history must not rank 30,000 fragments)."""

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


class Encoding(Protocol):
    """A question's vector being computed on another thread."""

    def vector(self) -> Vector | None:
        """The vector (waits for it)."""

    def took_ms(self) -> float:
        """How long the encoding itself took (waits for it)."""


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
    with memory.lookup() as conn:
        hits = search(conn, question, limit=limit, exclude_hashes=exclude_hashes)
        evidence = _evidence(memory, conn, question, hits)
        held = _held(memory, conn, question, None)
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
        extra = min(len(exclude_hashes), EXCLUDED_SLACK)
        graph, result = _area(memory, conn, question, limit + extra)
        hits = fetch_hits(conn, result.fragment_ids)
        excluded = set(exclude_hashes)
        kept = [h for h in hits if h.log_hash not in excluded][:limit]
        evidence = _evidence(memory, conn, question, kept, graph, result)
        held = _held(memory, conn, question, graph)
    similarity = {s.fragment_id: s.terms.get("similarity", 0.0) for s in result.scores}
    area = summary(graph, result, kept=[h.fragment_id for h in kept])
    return _rendered(
        memory, question, kept, evidence, budget_tokens, model, similarity, area, held
    )


def render_again(
    memory: Memory, question: Question, recall: Recall, *, limit: int, budget_tokens: int
) -> Reconstruction:
    """``recall``'s block again from its ``limit`` best hits only (the evaluation
    measures the block at several sizes): the evidence of the dropped hits goes too."""
    hits = recall.hits[:limit]
    with memory.lookup() as conn:
        evidence = _evidence(memory, conn, question, list(hits))
        held = _held(memory, conn, question, memory.published_graph())
    similarity = None
    if recall.area is not None:
        similarity = {
            int(f["id"]): float(f["terms"].get("similarity", 0.0))
            for f in recall.area.get("fragments", ())
        }
    again = _rendered(memory, question, hits, evidence, budget_tokens, None, similarity, None, held)
    return again.context


def explain_area(memory: Memory, question: Question, *, limit: int) -> AreaExplanation:
    """The foci, the chosen area with every score term, and the timings of a query."""
    with memory.lookup() as conn:
        graph, result = _area(memory, conn, question, limit)
        return AreaExplanation.model_validate(explain(conn, graph, result))


def _area(
    memory: Memory, conn: Connection, question: Question, limit: int
) -> tuple[MemoryGraph, AreaResult]:
    """Run area retrieval (inside :meth:`Memory.lookup`). The question is encoded on
    another thread while the lexical foci are pulsed (see :func:`.area.retrieve_area`)."""
    began = time.perf_counter()
    encoding = memory.encode(question)
    graph = memory.pinned_graph(conn)
    settings = memory.graph_settings
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
    result.timings_ms["encode_ms"] = round(encoding.took_ms(), 3)  # overlapped
    result.timings_ms["total_ms"] = round((time.perf_counter() - began) * 1000, 3)
    return graph, result


def _held(
    memory: Memory, conn: Connection, question: Question, graph: MemoryGraph | None
) -> dict[str, int]:
    """How many fragments of memory use each content focus of ``question``: the graph's
    word counts when it is read, else the full-text index, counted up to what the note's
    threshold needs."""
    words = [focus.word for focus in question.foci]
    if graph is not None:  # the graph's word nodes are stems of the words as written
        return {w: graph.term_df.get(stem(w), 0) for w in words}
    need = memory.reconstruction.coverage.held_min_fragments
    return {w: documents_using(conn, w, limit=need) for w in words}


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
    return Recall(tuple(hits), context, area, getattr(counter, "name", ""), evidence)
