"""MemoryStore: one tenant's memory, the facade the proxy and the scripts use.

A store owns one SQLite file (created private: see :mod:`.storage.db`) and three
connections, each behind its own lock (:class:`.storage.Storage`): a writer (appends,
receipts), a reader (search) and one for formation, so a search never waits for a
formation pass (WAL lets the reader see the last committed state) and an append never
waits for formation's model calls. The two writing connections take SQLite's write lock
in turn (:func:`.storage.transaction`); an append or a receipt that still meets a held
lock is retried (:func:`.storage.retry_busy`), so lock contention never loses an
exchange. Every method is synchronous and thread-safe; callers in an event loop run them
in executors. The store runs no SQL itself: :mod:`.storage` does.

Receipts are bounded: only the newest ``receipt_limit`` are kept, and none older than
``receipt_max_age_s`` (30 days by default); older ones are deleted as new ones are saved
(range deletes on the row id and on the time index, nearly free).

Each lookup renders its block with the token counter of the model the request names
(:func:`~memory_core.text.tokens.counter_for`), unless the store was given one counter for all.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..dream import DreamConfig, Judge
from ..errors import EncoderChangedError, MemoryChangedError, StorageError
from ..formation import (
    Backends,
    FormationConfig,
    FormationResult,
    FormationSummary,
    Former,
    build_backends,
)
from ..formation.dates import date_formed
from ..formation.interfaces import QuestionEncoder
from ..graph import GraphSettings
from ..index.memory_graph import MemoryGraph, MemoryGraphIndex
from ..log.asked import AskedQuestions
from ..log.continuation import Continuation, continuation, link_response
from ..log.messages import AppendResult, LogMessage, append_messages
from ..reconstruction.config import DEFAULT_RECONSTRUCTION, ReconstructionConfig
from ..reconstruction.coverage import ask
from ..reconstruction.render import Reconstruction
from ..retrieval.kernels import compile_kernels
from ..retrieval.recall import Recall, explain_area, render_again
from ..retrieval.strategies import STRATEGIES
from ..storage import Connection, Storage, read_snapshot, retry_busy, transaction
from ..storage.tables import history as history_rows
from ..storage.tables import question_vectors, receipts, reformation, stats
from ..text.dates import day_of
from ..text.question import Question, question_excerpt
from ..text.tokens import TokenCounter, counter_for
from ..views import AreaExplanation, ContextView, EntityView, RelationView, StoreStats
from .controls import StoreControls
from .history import DreamStatus, Events, StoreHistory, log_event
from .inspection import list_contexts, list_entities, list_relations
from .names import KnownNames

__all__ = [
    "DEFAULT_RECEIPT_AGE_S",
    "DEFAULT_RECEIPT_LIMIT",
    "DreamStatus",
    "MemoryStore",
    "Recall",
    "StoreStats",
]

DEFAULT_RECEIPT_LIMIT = 10_000
"""Receipts a store keeps by default (the newest ones)."""
DEFAULT_RECEIPT_AGE_S = 30 * 86_400.0
"""How long a store keeps a receipt by default."""


_ENCODE_START_WAIT_S = 0.005
"""At most this long a lookup waits for its question's encoding to start."""
_WORD_CACHE = 1024
"""The most question words a store keeps the vector of (1.5 MB at 384 dimensions)."""
_AHEAD = 64
"""The most encodings started ahead of their lookups a store keeps (one a lookup that was
then skipped or failed never takes is dropped past them)."""


class _Encoding:
    """A question's vector being computed on the store's encoding thread."""

    def __init__(self, future: Future[tuple[Any, float, float]], started: threading.Event) -> None:
        self._future = future
        self.started = started
        """Set once the encoding thread took it up."""

    def vector(self) -> Any:
        return self._future.result()[0]

    def took_ms(self) -> float:
        return self._future.result()[1]

    def began_at(self) -> float:
        return self._future.result()[2]


class MemoryStore(StoreHistory, StoreControls):
    """One tenant's memory in one SQLite file (created and migrated on open).

    ``receipt_limit`` (default :data:`DEFAULT_RECEIPT_LIMIT`, at least 1) is how many
    receipts the store keeps, the newest ones. ``events`` is told one record per
    consolidation cycle and per rollback, whoever starts it (default: a line on the
    ``memory_core.history`` logger).
    """

    def __init__(
        self,
        path: Path,
        *,
        counter: TokenCounter | None = None,
        clock: Callable[[], float] = time.time,
        formation: FormationConfig | None = None,
        backends: Backends | None = None,
        graph: GraphSettings | None = None,
        receipt_limit: int = DEFAULT_RECEIPT_LIMIT,
        receipt_max_age_s: float = DEFAULT_RECEIPT_AGE_S,
        reconstruction: ReconstructionConfig | None = None,
        dream: DreamConfig | None = None,
        judge: Judge | None = None,
        events: Events | None = None,
    ) -> None:
        if receipt_limit < 1:
            raise ValueError(f"receipt_limit must be at least 1, got {receipt_limit}")
        if not receipt_max_age_s > 0:
            raise ValueError(f"receipt_max_age_s must be above 0, got {receipt_max_age_s}")
        self.path = path
        self._receipt_limit = receipt_limit
        self._receipt_max_age_s = receipt_max_age_s
        self._clock = clock
        self._fixed_counter = counter
        self._counter = counter or counter_for(None)
        self._reconstruction = reconstruction or DEFAULT_RECONSTRUCTION
        self._formation = formation or FormationConfig()
        self._backends = backends
        self._former: Former | None = None
        self._settings = graph or GraphSettings()
        self._dream = dream or DreamConfig()
        self._judge = judge
        self._events = events or log_event
        self._graph = MemoryGraphIndex(
            max_delta_edges=self._settings.max_delta_edges,
            dream=self._dream,
            lexical_context=self._settings.lexical_context,
        )
        self._encoding = ThreadPoolExecutor(1, thread_name_prefix="question-encoding")
        self._asked = AskedQuestions()
        self._ahead: OrderedDict[str, _Encoding] = OrderedDict()
        self._ahead_lock = threading.Lock()
        self._word_cache: OrderedDict[str, Any] = OrderedDict()
        self._word_lock = threading.Lock()
        self._closed = False
        self._backends_lock = threading.Lock()
        self._storage = storage = Storage(path)
        self._write_lock, self._writer = storage.write_lock, storage.writer
        self._read_lock, self._reader = storage.read_lock, storage.reader
        self._form_lock, self._forming = storage.form_lock, storage.forming
        with self._form_lock:  # after migration 013, or a kill during its backfill
            date_formed(self._forming)
        self.names = self._load_names()
        self._encoder_checked = False
        self.reencoded: tuple[tuple[str, ...], int] | None = None
        """``(encoders the vectors were made by, rows queued)`` when this store's memory
        was queued to be formed again for the configured encoder; None otherwise."""

    @property
    def counter(self) -> TokenCounter:
        """The token counter used for budgets when no model is named."""
        return self._counter

    def counter_for(self, model: str | None) -> TokenCounter:
        """The counter for a request naming ``model``: the store's own when it was given
        one, else the model's tokenizer (:func:`~memory_core.text.tokens.counter_for`)."""
        return self._fixed_counter or counter_for(model)

    def close(self) -> None:
        """Close the connections (idempotent)."""
        self._closed = True
        self._encoding.shutdown(wait=True)
        self._storage.close()

    def append(
        self,
        messages: Sequence[LogMessage],
        *,
        conversation: str | None = None,
        source: str = "proxy",
        response_id: str | None = None,
    ) -> AppendResult:
        """Durably log the new turns of a history; formation happens in :meth:`form`.
        ``response_id``: the id the upstream gave the answer, linked in the same
        transaction to the conversation and its last message (see :meth:`continuation`).

        Raises :class:`InvalidInputError` for a bad message (a timestamp outside
        :data:`~memory_core.log.messages.MIN_TIMESTAMP`..:data:`~memory_core.log.messages.MAX_TIMESTAMP`
        included, nothing stored), :class:`StorageError` only when the database fails, not for lock
        contention.
        """

        asked = self._asked.taken(messages)

        def append() -> AppendResult:
            now = self._clock()
            with transaction(self._writer):
                result = append_messages(
                    self._writer,
                    messages,
                    explicit_conversation=conversation,
                    source=source,
                    now=now,
                )
                question_vectors.keep(self._writer, asked, now)
                if response_id is not None:
                    link_response(self._writer, response_id, result, now)
            return result

        with self._write_lock:
            return retry_busy(append)

    def form(self, limit: int | None = None) -> FormationResult:
        """One formation pass over up to ``limit`` queued log rows (default: batch size).

        Runs on its own connection, so appends never wait for formation's model calls;
        once the memory graph is in use, what the pass formed is appended to it and a new
        graph version published.
        """
        result = self._form_pass(limit)
        if result.processed:
            self._publish_graph()
        return result

    def _form_pass(self, limit: int | None = None) -> FormationResult:
        with self._form_lock:
            if self._former is None:
                backends = self._get_backends()
                formation = self._formation.scaled(backends.encoder.cosine_scale)
                self._former = Former(self._forming, backends, formation, clock=self._clock)
            result = self._former.run(limit)
            if result.relations:
                self.names.read_relations(self._forming)
        self.names.add(result.names)
        return result

    def _publish_graph(self) -> None:
        """Append what formation added to the graph (queries that pinned the previous
        version finish on it). Only once the graph is in use: see :meth:`warm_graph`."""
        if self._graph.started:
            with self._form_lock:
                self._prepared(self._graph.refresh(self._forming))

    def refresh_graph(self, names: Iterable[str] = ()) -> None:
        """Take in what another process formed: learn its ``names`` and append its rows
        to the graph (past the graph's cursors, as after a pass of :meth:`form`)."""
        self.names.add(names)
        with self._form_lock:
            self.names.read_relations(self._forming)
        self._publish_graph()

    def warm_graph(self) -> MemoryGraph:
        """Read the memory graph now (the first area query would otherwise pay for it);
        from then on every formation pass keeps it current. Returns the published version."""
        with self._form_lock:
            return self._prepared(self._graph.refresh(self._forming))

    def _prepared(self, graph: MemoryGraph) -> MemoryGraph:
        """``graph``, with the retrieval kernels compiled now (on the formation thread,
        not in a query: see :mod:`memory_core.retrieval.kernels`)."""
        compile_kernels()
        return graph

    def formation_timings(self) -> dict[str, float]:
        """Cumulative seconds spent per formation stage by this store."""
        with self._form_lock:
            return dict(self._former.timings) if self._former else {}

    def form_all(self, on_pass: Callable[[int], None] | None = None) -> int:
        """Drain the whole queue (then publish one new graph version); returns the rows
        processed. ``on_pass`` is told the rows processed so far after each pass (a
        store formed again for another encoder reports its progress with it)."""
        return self.form_summary(on_pass).rows

    def form_summary(self, on_pass: Callable[[int], None] | None = None) -> FormationSummary:
        """:meth:`form_all`, returning what the passes did (the last, empty pass that
        finds the queue drained is not counted)."""
        summary = FormationSummary()
        while True:
            began = time.perf_counter()
            result = self._form_pass()
            if result.processed == 0 and result.failed == 0:
                break
            summary = summary.adding(result, time.perf_counter() - began)
            if on_pass is not None:
                on_pass(summary.rows)
        if summary.rows:
            self._publish_graph()
        return summary

    @property
    def reconstruction(self) -> ReconstructionConfig:
        """What the block shows (``reconstruction:``)."""
        return self._reconstruction

    @property
    def graph_settings(self) -> GraphSettings:
        """How the graph is traversed and areas scored (``retrieval:``)."""
        return self._settings

    def question(self, text: str, asked_at: float | None = None) -> Question:
        """The :class:`Question` ``text`` asks at ``asked_at`` (default: now, by the
        store's clock; its time words are resolved against that day), as this store's
        lookups read it."""
        when = self._clock() if asked_at is None else asked_at
        return ask(text, self._reconstruction.coverage, day_of(when))

    def retrieve(
        self,
        strategy: str,
        question: str,
        *,
        limit: int,
        budget_tokens: int,
        exclude_hashes: Collection[str] = (),
        model: str | None = None,
        asked_at: float | None = None,
    ) -> Recall:
        """Retrieve and reconstruct by the strategy registered as ``strategy``
        (:data:`.retrieval.strategies.STRATEGIES`: ``area`` is :meth:`recall_area`,
        ``bm25`` :meth:`recall`); the budget is counted with ``model``'s tokenizer;
        ``asked_at``: when the question is asked (see :meth:`question`)."""
        run = STRATEGIES.get(strategy).run
        if not self._encoder_checked:
            self._get_backends()  # never a lookup over vectors of another encoder
        asked = self.question(question, asked_at)
        return run(self, asked, limit, budget_tokens, exclude_hashes, model)

    def recall(
        self,
        question: str,
        *,
        limit: int,
        budget_tokens: int,
        exclude_hashes: Collection[str] = (),
        model: str | None = None,
        asked_at: float | None = None,
    ) -> Recall:
        """BM25 retrieval and reconstruction: :meth:`retrieve` by ``bm25``
        (:func:`.retrieval.recall.recall_bm25`)."""
        return self.retrieve(
            "bm25", question, limit=limit, budget_tokens=budget_tokens,
            exclude_hashes=exclude_hashes, model=model, asked_at=asked_at,
        )  # fmt: skip

    def recall_area(
        self,
        question: str,
        *,
        limit: int,
        budget_tokens: int,
        exclude_hashes: Collection[str] = (),
        model: str | None = None,
        asked_at: float | None = None,
    ) -> Recall:
        """Area retrieval (graph activation fused with BM25) and reconstruction:
        :meth:`retrieve` by ``area`` (:func:`.retrieval.recall.recall_area`)."""
        return self.retrieve(
            "area", question, limit=limit, budget_tokens=budget_tokens,
            exclude_hashes=exclude_hashes, model=model, asked_at=asked_at,
        )  # fmt: skip

    def render(
        self, question: str, recall: Recall, *, limit: int, budget_tokens: int
    ) -> Reconstruction:
        """``recall``'s block again from its ``limit`` best hits only
        (:func:`.retrieval.recall.render_again`)."""
        return render_again(
            self, self.question(question), recall, limit=limit, budget_tokens=budget_tokens
        )

    def explain_area(self, question: str, *, limit: int) -> AreaExplanation:
        """The foci, the chosen area with every score term, and the timings of a query."""
        return explain_area(self, self.question(question), limit=limit)

    def continuation(self, response_id: str) -> Continuation | None:
        """The conversation a request naming ``response_id`` continues, with its stored
        messages up to that response (:mod:`memory_core.log.continuation`), or None."""
        with self.lookup() as conn:
            return continuation(conn, response_id, self._clock())

    @contextlib.contextmanager
    def lookup(self) -> Iterator[Connection]:
        """The read lock and one read transaction on the reader: every row a lookup reads
        comes from one committed state, and while a rollback or a cycle is being
        published that is the state the current graph was read from (see
        :meth:`_transition`)."""
        with self._read_lock, read_snapshot(self._reader, "memory lookup failed"):
            yield self._reader

    def pinned_graph(self, conn: Connection) -> MemoryGraph:
        """The published graph (inside :meth:`lookup`); the first area query reads it,
        formation keeps it current afterwards, off the query path. Raises
        :class:`MemoryChangedError` when a cycle or a rollback made elsewhere changed
        memory wholesale since it was read."""
        graph = self._graph.current() or self._graph.refresh(conn)
        generation = history_rows.state(conn).generation
        if generation != graph.generation:
            raise MemoryChangedError(
                f"memory of {self.path.name} changed wholesale (generation {graph.generation}"
                f" -> {generation}: a cycle or a rollback made elsewhere); its graph is being"
                " read again"
            )
        return graph

    def published_graph(self) -> MemoryGraph | None:
        """The published graph, or None before the first one is read."""
        return self._graph.current()

    def encode(self, question: Question) -> _Encoding:
        """Start encoding ``question`` on the store's encoding thread (or take the
        encoding :meth:`encode_ahead` started for its text); once encoded, its vector is
        kept for the turn it was asked in (:class:`.log.asked.AskedQuestions`)."""
        with self._ahead_lock:
            ahead = self._ahead.pop(question.text, None)
        if ahead is not None:
            return ahead
        encoding = self._submit_encoding(self._get_backends().encoder, question.text)
        # Let the encoding thread take the GIL first: it holds it only until the model
        # runs (which releases it), while this thread, once ahead, would keep it through
        # the lexical foci and the encoding would start only when they were done (seen in
        # the proxy: a third of the questions waited 1-3 ms for their vector).
        encoding.started.wait(_ENCODE_START_WAIT_S)
        return encoding

    def encode_ahead(self, strategy: str, text: str) -> bool:
        """Start encoding the question ``text`` asks (:meth:`question`'s excerpt of it)
        now, when ``strategy`` reads the question's vector, so that the lookup which
        follows finds it under way: the caller's hop to a reader thread and the question's
        reading then overlap the model instead of preceding it. Never blocks: nothing is
        started (False) before the encoder is loaded and checked, or for a strategy that
        reads no vector; a lookup that never comes leaves its encoding to be dropped
        after :data:`_AHEAD` newer ones.

        Nobody waits for it to start: the caller (the event loop) goes on to hop to a
        reader thread and then waits on the network, which leaves the encoding thread
        the GIL. Waiting here (up to 1 ms, so that it surely started before the lookup)
        stalled the event loop, and every request with it, and made memory on dearer in
        the proxy, not cheaper; so did the lookup waiting for it instead (docs/
        evaluation.md, "issue 29, fourth stop")."""
        backends = self._backends
        if not STRATEGIES.get(strategy).uses_vector or backends is None:
            return False
        if not self._encoder_checked or self._closed:
            return False
        excerpt = question_excerpt(text)
        with self._ahead_lock:
            if excerpt in self._ahead:
                return True
        encoding = self._submit_encoding(backends.encoder, excerpt)
        with self._ahead_lock:
            self._ahead[excerpt] = encoding
            while len(self._ahead) > _AHEAD:
                self._ahead.popitem(last=False)
        return True

    def _submit_encoding(self, encoder: QuestionEncoder, text: str) -> _Encoding:
        if self._closed:
            raise StorageError(f"the memory store {self.path} is closed")
        started = threading.Event()

        def encode() -> tuple[Any, float, float]:
            started.set()
            start = time.perf_counter()
            vector = encoder.encode_question(text)[0]
            took = (time.perf_counter() - start) * 1000
            self._asked.remember(text, encoder.reuse_key(text), vector)
            return vector, took, start

        try:
            return _Encoding(self._encoding.submit(encode), started)
        except RuntimeError as exc:  # shut down by a concurrent close()
            raise StorageError(f"the memory store {self.path} is closed") from exc

    @property
    def encoder_label(self) -> str:
        """The configured encoder, as its vectors are labelled (loads it)."""
        return self._get_backends().encoder.interpretation.label

    def encode_words(self, words: Sequence[str]) -> npt.NDArray[np.float32]:
        """The vectors of single ``words`` (one row each), encoded as formation encodes
        memory's words, for the word bridge; the last :data:`_WORD_CACHE` words asked are
        kept (people ask about the same things again)."""
        encoder = self._get_backends().encoder
        with self._word_lock:
            missing = [w for w in dict.fromkeys(words) if w not in self._word_cache]
        found = dict(zip(missing, encoder.encode_words(missing), strict=True)) if missing else {}
        with self._word_lock:
            for word, vector in found.items():
                self._word_cache[word] = vector
            for word in words:
                if word in self._word_cache:
                    found[word] = self._word_cache[word]
                    self._word_cache.move_to_end(word)
            while len(self._word_cache) > _WORD_CACHE:
                self._word_cache.popitem(last=False)
        if not words:
            return np.zeros((0, encoder.dimension), np.float32)
        return np.stack([np.asarray(found[w], np.float32) for w in words])

    def _get_backends(self) -> Backends:
        """The formation backends, built on first use, once the store's vectors are known
        to be the encoder's own (:meth:`_same_encoder`). Never under the formation lock:
        a question must not wait for a formation pass to get the encoder."""
        backends = self._backends
        if backends is None or not self._encoder_checked:
            with self._backends_lock:
                if self._backends is None:
                    self._backends = build_backends(self._formation)
                backends = self._backends
                if not self._encoder_checked:
                    self._same_encoder(backends.encoder.interpretation.label)
                    self._encoder_checked = True
        return backends

    def _same_encoder(self, encoder: str) -> None:
        """Make the store's vectors ``encoder``'s (see
        :mod:`~memory_core.storage.tables.reformation`): with others among them, form its
        memory again from the log (``on_change: reencode``: the queue holds the work, done
        by formation as any other) or raise :class:`EncoderChangedError` (``refuse``)."""
        with self._write_lock:
            made_by = reformation.encoders(self._writer)
            others = [m for m in made_by if m != encoder]
            if not others:
                return
            if self._formation.encoder.on_change == "refuse":
                raise EncoderChangedError(
                    f"memory at {self.path} was encoded by {', '.join(others)}; the "
                    f"configured encoder is {encoder}: set formation.encoder.on_change: "
                    "reencode to form it again from the log (nothing said is lost), or "
                    "configure the encoder it was made with"
                )

            def unform() -> int:
                with transaction(self._writer):
                    queued = reformation.unform(self._writer, now=self._clock())
                    history_rows.bump(self._writer)  # other processes read memory again
                    return queued

            queued = retry_busy(unform)
            if self._graph.started:
                self._prepared(self._graph.reload(self._writer))
        self.reencoded = (tuple(others), queued)
        self.names = self._load_names()

    def save_receipt(self, receipt_id: str, body: Mapping[str, Any]) -> None:
        """Store the receipt of a request that used memory; the oldest receipts beyond
        ``receipt_limit``, and those older than ``receipt_max_age_s``, are deleted in the
        same transaction."""

        def save() -> None:  # retried whole: a transaction of its own
            receipts.save(
                self._writer,
                receipt_id,
                body,
                now=self._clock(),
                keep=self._receipt_limit,
                max_age_s=self._receipt_max_age_s,
            )

        with self._write_lock:
            retry_busy(save)

    def receipt(self, receipt_id: str) -> dict[str, Any] | None:
        """A stored receipt, or None (read through the connection that writes them: the
        reader may be held at an earlier state while a rollback is published)."""
        with self._write_lock:
            return receipts.load(self._writer, receipt_id)

    def conversation_receipt(self, conversation: str) -> dict[str, Any] | None:
        """The newest receipt of ``conversation``, or None (read as :meth:`receipt` is)."""
        with self._write_lock:
            return receipts.latest_of(self._writer, conversation)

    def recent_receipts(self, limit: int) -> list[receipts.ReceiptRow]:
        """The newest ``limit`` receipts, newest first, as a list shows them (read
        through the writing connection, as :meth:`receipt` is)."""
        with self._write_lock:
            return receipts.recent(self._writer, limit)

    def stats(self) -> StoreStats:
        """Counts of what the store holds."""
        with self._read_lock:
            c = stats.counts(self._reader)
        return StoreStats(
            log_messages=c.log_messages,
            fragments=c.fragments,
            live_fragments=c.live_fragments,
            queued=c.queued,
            failed=c.failed,
            names=len(self.names),
            held=c.held,
            entities=c.entities,
            relations=c.relations,
            contexts=c.contexts,
            snapshots=c.snapshots,
            bytes=sum(_size(Path(f"{self.path}{end}")) for end in ("", "-wal")),
        )

    def entities(self, *, limit: int = 100, name: str | None = None) -> list[EntityView]:
        """Entities with aliases and contexts (see :mod:`memory_core.store.inspection`)."""
        with self._read_lock:
            return list_entities(self._reader, limit=limit, name=name)

    def contexts(self, *, limit: int = 100) -> list[ContextView]:
        """Contexts with their conversations and sample fragments."""
        with self._read_lock:
            return list_contexts(self._reader, limit=limit)

    def relations(self, *, entity: str | None = None, limit: int = 200) -> list[RelationView]:
        """Relations with sources and mutation records, optionally of one entity."""
        with self._read_lock:
            return list_relations(self._reader, entity=entity, limit=limit)

    def _load_names(self) -> KnownNames:
        with self._read_lock:
            return KnownNames(self._reader)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
