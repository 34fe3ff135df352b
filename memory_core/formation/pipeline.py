"""The formation pipeline: queued log rows in, fragments, contexts, entities, relations out.

A pass takes up to ``batch_size`` queued log rows, oldest first, and runs the stages:

1. normalisation (language, canonical English text),
2. embedding of the canonical texts (the sentence encoder),
3. segmentation per conversation (the open segment's tail plus the new turns),
4. NER on the canonical text (plus names memory already knows),
5. relation extraction,
6. mention vectors (each mention's context, for linking),

all *before* any write (model calls never hold the database's write lock). Then, in one
transaction (:class:`.writer.GraphWriter`): fragments and their FTS rows, segments and
contexts, fragment links (next/answers/depends_on/corrects), mention linking into
entities and aliases, co-occurrence and extracted relations with their mutation records,
and the removal of the formed rows from the queue.

Invariant: whatever crashes, when, nothing is formed twice and nothing is lost; every
logged row ends up formed exactly once or given up, with why, after ``MAX_ATTEMPTS``
attempts. Before its stages run, a pass counts an attempt against each of its rows in a
transaction of its own (``queue.attempts``, with ``queue.last_error`` saying the attempt
did not finish until it does). The write that stores what was formed from a row also
removes it from the queue, and a crash anywhere rolls that write back, so a row is formed
at most once. The log keeps every row, and a row stays queued until it is formed or has
used its attempts; then it is given up (left in the queue with its ``last_error``;
``MemoryStore.stats`` counts it as failed). So a row that raises, overruns its time
budget, or kills the process (kill -9, out of memory) is retried a bounded number of
times, never forever, and every pass that finds rows uses up at least one attempt, so
draining the queue always ends. A row with an attempt behind it is retried alone: a
batch that crashed is not retried as a batch, and the row that broke it uses up its
attempts without taking the others down with it.

Size and time bounds. Every stage reads at most ``max_text_chars`` of a message (the
fragment keeps the whole text), links at most ``max_mentions_per_fragment`` mentions of at
most ``max_mention_chars`` characters, stores at most ``max_claims_per_fragment`` claims
and ``max_cooccurrence_pairs`` co-occurrences, so a pass costs O(input) whatever the
message. A row whose stages take longer than ``row_time_budget_s`` (see :mod:`.budget`)
is skipped by that attempt and recorded in ``formation_failures``; the others go on.

A backend failure on one input is recorded in ``formation_failures`` with the backend's
interpretation and raw output; that stage's output is skipped for that input (a relation
is never stored from an output that failed validation) and the other stages go on.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..errors import MemoryCoreError
from ..log.messages import stored_timestamp
from ..storage import Connection, journal, transaction
from ..storage.tables import contexts as context_rows
from ..storage.tables import log as log_rows
from ..storage.tables import question_vectors, word_vectors
from ..storage.tables.log import MAX_ATTEMPTS
from ..text.acts import is_question
from ..text.language import detect_language
from ..text.names import ROLE_NAMES, NameIndex
from ..text.question import focus_words
from ..text.words import normalise_name
from .budget import RowBudget
from .config import FormationConfig
from .interfaces import (
    BackendError,
    Backends,
    FragmentView,
    Interpretation,
    Mention,
    Normalised,
    RelationCandidate,
    Vectors,
)
from .items import Failure, Item
from .stages.contexts import ContextCache
from .stages.linking import EntityCache, context_vector
from .stages.normalise import StopwordNormaliser
from .state import load_contexts, load_entities, save_contexts, save_entities, vector
from .writer import Counts, GraphWriter

__all__ = ["MAX_ATTEMPTS", "Backends", "FormationResult", "FormationSummary", "Former", "kind_of"]

_PASS_ERRORS = (MemoryCoreError, ValueError)  # storage raises StorageError, never apsw's
_TAIL = 8
_KIND_CHARS = 2_000
"""Longer rows are statements whatever they ask (a question is short; a pasted page
with a question at its end tells things)."""
_NAME_CACHE = 50_000
_INTERRUPTED = "interrupted before it finished (the process stopped: a crash, a kill, no memory)"

_Stage = Callable[[list[Item], list[Failure], RowBudget], None]


@dataclass(frozen=True)
class FormationResult:
    """What one pass did: ``processed`` rows formed, ``failed`` rows skipped this time."""

    processed: int
    failed: int
    names: tuple[str, ...]
    entities: int = 0
    relations: int = 0
    segments: int = 0
    contexts: int = 0


@dataclass(frozen=True)
class FormationSummary:
    """What draining a store's queue did (every pass of it): rows formed and skipped, what
    was created, and the wall time, for the log line a person reads."""

    rows: int = 0
    failed: int = 0
    passes: int = 0
    entities: int = 0
    relations: int = 0
    segments: int = 0
    contexts: int = 0
    seconds: float = 0.0

    def adding(self, result: FormationResult, seconds: float) -> FormationSummary:
        """This summary with one more pass."""
        return FormationSummary(
            self.rows + result.processed,
            self.failed + result.failed,
            self.passes + 1,
            self.entities + result.entities,
            self.relations + result.relations,
            self.segments + result.segments,
            self.contexts + result.contexts,
            self.seconds + seconds,
        )

    def report(self) -> dict[str, int | float]:
        """JSON-ready counts (every field in order), with the wall time as ``ms``."""
        counts: dict[str, int | float] = asdict(self)
        seconds = counts.pop("seconds")
        return {**counts, "ms": round(seconds * 1000, 1)}


class Former:
    """Runs formation passes over one store's writer connection (one former per store).

    ``clock`` stamps what is stored; ``timer`` (monotonic) measures the row budget.
    """

    def __init__(
        self,
        conn: Connection,
        backends: Backends,
        config: FormationConfig,
        *,
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._conn = conn
        self._b = backends
        self._config = config
        self._clock = clock
        self._timer = timer
        self._entities: EntityCache | None = None
        self._contexts: ContextCache | None = None
        self._version: int | None = None
        """``derived_version`` the caches reflect (see :meth:`_write`)."""
        self._name_vectors: dict[str, Vectors] = {}
        self._used_vectors: list[str] = []  # question vectors this pass took
        self._new_words: list[tuple[str, str, bytes]] = []  # word vectors this pass made
        self.timings: dict[str, float] = {}
        """Cumulative seconds per stage (for benchmarks; ``write`` is the transaction)."""

    def known_names(self) -> list[str]:
        """Every alias memory holds (for the policy's entity rule and NER)."""
        return self._entity_cache().display_names()

    def run(self, limit: int | None = None) -> FormationResult:
        """One pass over up to ``limit`` (default: the batch size) queued rows."""
        rows = self._queued(limit or self._config.batch_size)
        if not rows:
            return FormationResult(0, 0, ())
        try:
            return self._attempt(rows)
        except _PASS_ERRORS as exc:
            if len(rows) == 1:
                return self._fail(rows, exc)
        processed = failed = 0
        names: list[str] = []
        for row in map(Item.fresh, rows):  # isolate the row that breaks the batch
            try:
                result = self._attempt([row])
            except _PASS_ERRORS as exc:
                result = self._fail([row], exc)
            processed, failed = processed + result.processed, failed + result.failed
            names.extend(result.names)
        return FormationResult(processed, failed, tuple(dict.fromkeys(names)))

    def _attempt(self, rows: Sequence[Item]) -> FormationResult:
        self._claim(rows)
        try:
            return self._pass(rows)
        except BaseException:
            self._entities = self._contexts = None  # the caches may be ahead of the database
            raise

    def _claim(self, rows: Sequence[Item]) -> None:
        """Count an attempt against ``rows``, committed before any stage runs: an attempt
        that never finishes (a crash, a kill, running out of memory) is counted too."""
        with transaction(self._conn):
            log_rows.count_attempts(
                self._conn,
                [(_attempt_error(r.attempts + 1, _INTERRUPTED), r.log_id) for r in rows],
            )
        for row in rows:
            row.attempts += 1

    def _pass(self, rows: Sequence[Item]) -> FormationResult:
        failures: list[Failure] = []
        self._used_vectors = []
        self._new_words = []
        prepared = self._prepare([i for i in rows if i.text], failures)
        with self._timed("write"):
            counts, kept, items = self._write(rows, prepared, failures)
        names = tuple(dict.fromkeys(m.surface for i in items for m in i.mentions))
        skipped = sum(r.failed is not None for r in kept)
        return FormationResult(len(kept) - skipped, skipped, names, **counts)

    def _fail(self, rows: Sequence[Item], exc: BaseException) -> FormationResult:
        """Record why the attempt failed (retried on later passes, up to a limit)."""
        error = f"{type(exc).__name__}: {exc}"
        with transaction(self._conn):
            log_rows.set_errors(
                self._conn, [(_attempt_error(r.attempts, error), r.log_id) for r in rows]
            )
        return FormationResult(0, len(rows), ())

    # -- reading ---------------------------------------------------------------------

    def _queued(self, limit: int) -> list[Item]:
        """The oldest rows not given up: a row with attempts behind it alone, else the
        leading rows never attempted."""
        rows = log_rows.queued(self._conn, limit)
        sources = log_rows.sources_of(self._conn, [row.log_id for row in rows])
        longest = self._config.max_mention_chars
        names = [_name_of(row.name, longest) for row in rows]
        items = [
            Item(
                row.log_id,
                row.conversation_id,
                row.role,
                name or row.role,
                str(row.text).strip(),
                _time_of(row.ts),
                row.superseded,
                name,
                attempts=row.attempts,
                sources=sources.get(row.log_id, ()),
            )
            for row, name in zip(rows, names, strict=True)
        ]
        if items and items[0].attempts:
            return items[:1]
        return list(itertools.takewhile(lambda i: i.attempts == 0, items))

    def _entity_cache(self) -> EntityCache:
        if self._entities is None:
            self._load_caches()
        assert self._entities is not None
        return self._entities

    def _context_cache(self) -> ContextCache:
        if self._contexts is None:
            self._load_caches()
        assert self._contexts is not None
        return self._contexts

    def _load_caches(self) -> None:
        """Read entities and contexts; the version is read first, so a write that lands
        while they load makes the next write reload them (never the reverse)."""
        self._version = journal.derived_version(self._conn)
        self._entities = load_entities(self._conn)
        self._contexts = load_contexts(self._conn)

    # -- stages before any write -----------------------------------------------------------

    def _prepare(self, items: list[Item], failures: list[Failure]) -> list[Item]:
        """Run the stages; returns the items still within their time budget."""
        budget = RowBudget(self._config.row_time_budget_s, self._timer)
        stages: tuple[tuple[str, _Stage, Interpretation], ...] = (
            ("normalisation", self._normalise_all, self._b.normaliser.interpretation),
            ("embedding", self._embed, self._b.encoder.interpretation),
            ("word_vectors", self._word_vectors, self._b.encoder.interpretation),
            ("segmentation", self._segment, self._b.segmenter.interpretation),
            ("ner", self._detect_all, self._b.ner.interpretation),
            ("relations", self._extract_all, self._b.relations.interpretation),
            ("mention_vectors", self._mention_vectors, self._b.mentions.interpretation),
        )
        for stage, run, interpretation in stages:
            if not items:
                break
            with self._timed(stage):
                run(items, failures, budget)
            items = self._within(items, budget, stage, interpretation, failures)
        return items

    def _within(
        self,
        items: list[Item],
        budget: RowBudget,
        stage: str,
        interpretation: Interpretation,
        failures: list[Failure],
    ) -> list[Item]:
        """``items`` within budget; the others are skipped, with the failure recorded."""
        for item in items:
            if budget.exceeded(item):
                error = (
                    f"over formation.row_time_budget_s ({budget.limit_s:g} s):"
                    f" {budget.spent(item):.2f} s spent by the end of stage {stage}"
                )
                item.failed = _attempt_error(item.attempts, error)
                failures.append(Failure(stage, interpretation.label, item.log_id, error, None))
        return [i for i in items if i.failed is None]

    def _normalise_all(self, items: list[Item], failures: list[Failure], budget: RowBudget) -> None:
        for item in items:
            with budget.charge([item]):
                item.normalised = self._normalise(item, failures)
                item.kind = kind_of(item)

    def _embed(self, items: list[Item], failures: list[Failure], budget: RowBudget) -> None:
        """Each item's vector (of :func:`_embedded` text): the one its question was encoded
        with when the proxy kept it (:mod:`memory_core.storage.tables.question_vectors`: the
        same text, the same computation), else the encoder's."""
        encoder = self._b.encoder
        with budget.charge(items):
            plain = [self._read(i) for i in items]
            texts = [_embedded(item, text) for item, text in zip(items, plain, strict=True)]
            keys = [encoder.reuse_key(text) for text in texts]
            found = question_vectors.find(self._conn, [k for k in keys if k is not None])
            kept = _vectors(found, encoder.dimension)
            missing = [i for i, key in enumerate(keys) if key not in kept]
            named = [i for i, text in enumerate(texts) if text != plain[i]]
            wanted = [texts[i] for i in missing] + [plain[i] for i in named]
            encoded = list(encoder.encode(wanted)) if wanted else []
        computed = dict(zip(missing, encoded, strict=False))
        for i, alone in zip(named, encoded[len(missing) :], strict=True):
            items[i].text_vector = alone
        for i, item in enumerate(items):
            key = keys[i]
            item.vector = computed[i] if key is None or key not in kept else kept[key]
        self._used_vectors.extend(k for k in keys if k is not None and k in kept)

    def _word_vectors(self, items: list[Item], failures: list[Failure], budget: RowBudget) -> None:
        """The vector of each word the items use that memory has none of yet (at most
        ``formation.encoder.max_new_words`` a pass: a pasted dictionary must not hold the
        pass), for the word bridge (:mod:`memory_core.retrieval.bridge`); written with
        the pass. Only with an encoder whose words meet across languages (see
        ``formation.encoder.words``)."""
        encoder, config = self._b.encoder, self._config.encoder
        if not config.bridges(encoder.multilingual):
            return
        with budget.charge(items):
            wanted: dict[str, str] = {}  # word -> the language of its first fragment
            for item in items:
                text = self._read(item)
                language = item.normalised.lang if item.normalised else detect_language(text)
                for word in focus_words(text):
                    wanted.setdefault(word, language)
            stored = word_vectors.known(self._conn, list(wanted))
            room = max(0, config.max_words - word_vectors.count(self._conn))
            words = [w for w in wanted if w not in stored][: min(config.max_new_words, room)]
            if not words:
                return
            vectors = np.asarray(encoder.encode_words(words), dtype="<f4")
        self._new_words = [
            (w, wanted[w], v.tobytes()) for w, v in zip(words, vectors, strict=True)
        ]

    def _detect_all(self, items: list[Item], failures: list[Failure], budget: RowBudget) -> None:
        """NER; names found earlier in the pass count as known."""
        cache = self._entity_cache()
        batch = NameIndex()
        for item in items:
            with budget.charge([item]):
                text = self._read(item)
                translated = (
                    [english for _, english in item.normalised.names] if item.normalised else []
                )
                known = [*cache.known_in(text), *batch.mentioned(text), *translated]
                item.mentions = self._detect(item, list(dict.fromkeys(known)), failures)
                batch.add(m.surface for m in item.mentions)

    def _extract_all(self, items: list[Item], failures: list[Failure], budget: RowBudget) -> None:
        for item in items:
            with budget.charge([item]):
                item.claims = self._extract(item, failures)

    @contextlib.contextmanager
    def _timed(self, stage: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter() - began

    def _read(self, item: Item) -> str:
        """What the stages read of the item: its canonical text, cut at the size cap."""
        text = item.normalised.canonical if item.normalised else item.text
        return text[: self._config.max_text_chars]

    def _normalise(self, item: Item, failures: list[Failure]) -> Normalised:
        """The normalised head of the text; past the size cap the text is kept as is."""
        cap = self._config.max_text_chars
        head, rest = item.text[:cap], item.text[cap:]
        try:
            normalised = self._b.normaliser.normalise(head)
        except BackendError as exc:
            failures.append(
                self._failure("normalisation", self._b.normaliser.interpretation, item, exc)
            )
            normalised = StopwordNormaliser().normalise(head)
        return replace(normalised, canonical=normalised.canonical + rest) if rest else normalised

    def _detect(self, item: Item, known: list[str], failures: list[Failure]) -> list[Mention]:
        try:
            found = self._b.ner.mentions(self._read(item), known)
        except BackendError as exc:
            failures.append(self._failure("ner", self._b.ner.interpretation, item, exc))
            return []
        longest = self._config.max_mention_chars
        named = sorted((m for m in found if len(m.surface) <= longest), key=lambda m: m.start)
        return named[: self._config.max_mentions_per_fragment]

    def _extract(self, item: Item, failures: list[Failure]) -> list[RelationCandidate]:
        view = FragmentView(
            self._read(item), item.speaker, item.role, tuple(m.surface for m in item.mentions)
        )
        try:
            claims = self._b.relations.extract(view)
        except BackendError as exc:
            failures.append(self._failure("relations", self._b.relations.interpretation, item, exc))
            return []
        longest = self._config.max_mention_chars
        named = [
            c
            for c in claims
            if len(c.subject) <= longest and (len(c.obj) <= longest or not c.obj_is_entity)
        ]
        return named[: self._config.max_claims_per_fragment]

    def _mention_vectors(
        self, items: list[Item], failures: list[Failure], budget: RowBudget
    ) -> None:
        """Context vectors per mention (and per speaker): the name's direction removed."""
        with budget.charge(items):
            contexts, names = self._mention_encodings(items)
        for item, ctx in zip(items, contexts, strict=True):
            assert ctx is not None
            item.mention_vectors = [context_vector(ctx, names[m.surface]) for m in item.mentions]
            item.speaker_vector = context_vector(ctx, names[item.speaker])

    def _mention_encodings(
        self, items: list[Item]
    ) -> tuple[list[Vectors | None], dict[str, Vectors]]:
        surfaces = sorted(
            {m.surface for i in items for m in i.mentions} | {i.speaker for i in items}
        )
        same_encoder = self._b.mentions is self._b.encoder
        contexts = (
            [i.topic for i in items]
            if same_encoder
            else list(self._b.mentions.encode([self._read(i) for i in items]))
        )
        missing = [name for name in surfaces if name not in self._name_vectors]
        if missing:
            if len(self._name_vectors) > _NAME_CACHE:
                self._name_vectors.clear()
            encoded = self._b.mentions.encode(missing)
            self._name_vectors.update(zip(missing, encoded, strict=True))
        return contexts, self._name_vectors

    def _segment(self, items: list[Item], failures: list[Failure], budget: RowBudget) -> None:
        """Mark the items that start a new segment, conversation by conversation."""
        by_conversation: dict[str, list[Item]] = {}
        for item in items:
            by_conversation.setdefault(item.conversation, []).append(item)
        for conversation, new in by_conversation.items():
            with budget.charge(new):
                self._segment_conversation(conversation, new, failures)

    def _segment_conversation(
        self, conversation: str, new: list[Item], failures: list[Failure]
    ) -> None:
        tail_texts, tail_vectors = self._tail(conversation)
        if not tail_texts:
            new[0].new_segment = True
        texts = tail_texts + [self._read(i) for i in new]
        # what each turn is about: its text alone (Item.topic). The tail's vectors are the
        # stored ones, which for a named speaker also encode the name: only the junction
        # with an earlier pass compares the two (a pass is a session of a transcript)
        vectors = np.stack(tail_vectors + [v for i in new if (v := i.topic) is not None])
        try:
            cuts = self._b.segmenter.boundaries(texts, vectors)
        except BackendError as exc:
            failures.append(
                self._failure("segmentation", self._b.segmenter.interpretation, new[0], exc)
            )
            return
        for cut in cuts:
            index = cut + 1 - len(tail_texts)
            if 0 <= index < len(new):
                new[index].new_segment = True

    def _tail(self, conversation: str) -> tuple[list[str], list[Vectors]]:
        rows = context_rows.segment_tail(
            self._conn, conversation, self._config.max_text_chars, _TAIL
        )
        texts = [text for text, _ in rows]
        vectors = [v for _, data in rows if (v := vector(data)) is not None]
        return texts, vectors

    def _failure(
        self, stage: str, interp: Interpretation, item: Item | None, exc: BackendError
    ) -> Failure:
        return Failure(stage, interp.label, item.log_id if item else None, str(exc), exc.raw)

    # -- the one write transaction -----------------------------------------------------------

    def _write(
        self, rows: Sequence[Item], items: Sequence[Item], failures: Sequence[Failure]
    ) -> tuple[Counts, Sequence[Item], Sequence[Item]]:
        """The one write transaction; returns its counts and the rows and items it formed.

        Inside it (holding the write lock) the pass checks what changed since its rows
        were read: rows no longer queued (held back by a rollback, or formed by another
        former) are left out, and caches that another writer of derived memory (a
        consolidation cycle, a rollback, another former) made stale are read again.
        """
        now = self._clock()
        outcome = journal.Outcome()
        with transaction(self._conn, outcome=outcome):
            version = journal.derived_version(self._conn)
            if version != self._version:
                self._load_caches()
            queued = set(log_rows.still_queued(self._conn, [r.log_id for r in rows]))
            rows = [r for r in rows if r.log_id in queued]
            items = [i for i in items if i.log_id in queued]
            entities, contexts = self._entity_cache(), self._context_cache()
            writer = GraphWriter(self._conn, self._b, self._config, entities, contexts, now)
            _mark_superseded(self._conn, items)
            question_vectors.drop(self._conn, self._used_vectors, now - question_vectors.KEEP_S)
            word_vectors.add(self._conn, self._new_words, self._b.encoder.interpretation.label)
            writer.write(items, failures)
            save_entities(self._conn, entities, now)
            save_contexts(self._conn, contexts)
            log_rows.dequeue(self._conn, [r.log_id for r in rows if not r.failed])
            log_rows.set_errors(self._conn, [(r.failed, r.log_id) for r in rows if r.failed])
        self._version = version + (1 if outcome.recorded else 0)
        return writer.counts, rows, items


def _mark_superseded(conn: Connection, items: Sequence[Item]) -> None:
    """Read again, inside the write transaction, which rows an edit or regeneration has
    abandoned: one appended after the pass read its rows must not leave a live fragment
    on the abandoned branch (the transaction holds the write lock, so no append can
    slip in between this read and the write)."""
    gone = set(log_rows.superseded_among(conn, [item.log_id for item in items]))
    for item in items:
        item.superseded = item.log_id in gone


def kind_of(item: Item) -> str:
    """What the row does: an answer logged with the fragments it restates is
    ``restated``; a turn of a chat with a model (its speaker unnamed: the user or the
    assistant) that only asks (:func:`~memory_core.text.acts.is_question`, on the text as
    written, in any language it reads) is ``asked``; anything else, a long text
    included, ``stated``. A question between named people (a transcript, a meeting) is
    part of what they told each other ("Did you finish the painting?" says there is
    one), not a lookup that will be asked again: it stays ``stated``."""
    if item.role == "assistant" and item.sources:
        return "restated"
    if item.name is None and len(item.text) <= _KIND_CHARS and is_question(item.text):
        return "asked"
    return "stated"


def _attempt_error(attempt: int, error: str) -> str:
    """``queue.last_error`` for a row's ``attempt``-th attempt."""
    if attempt >= MAX_ATTEMPTS:
        return f"given up after {attempt} attempts; the last: {error}"
    return f"attempt {attempt} of {MAX_ATTEMPTS}: {error}"


def _time_of(ts: object) -> float:
    """A row's time for formation: its stored time, or ``inf`` (which every reader shows
    as "date unknown") when that is unusable — an older database may hold inf or text."""
    known = stored_timestamp(ts)
    return math.inf if known is None else known


def _name_of(name: object, longest: int) -> str | None:
    """A row's speaker name for formation, at most ``longest`` characters of it (the
    name is encoded before each of the speaker's turns and as their mention: a
    megabyte name made every turn a megabyte encoding), or None when it has no words
    (``"(.*)"``, an emoji, blanks): memory keys a speaker by the words of their name
    (:func:`~memory_core.text.words.normalise_name`), so such a name could be neither
    told apart nor found again, and each turn under it founded an entity of its own. Its
    turns are the unnamed speaker's (the role's). The log keeps the name as sent."""
    if name is None:
        return None
    read = str(name)[:longest]
    return read if normalise_name(read) else None


def _vectors(found: dict[str, bytes], dimension: int) -> dict[str, Vectors]:
    """The kept vectors that are what they should be (``dimension`` float32 values)."""
    return {
        key: np.frombuffer(blob, np.float32).copy()
        for key, blob in found.items()
        if len(blob) == 4 * dimension
    }


def _embedded(item: Item, text: str) -> str:
    """What a fragment's vector encodes: its text, after the name of a named speaker
    ("Gina: Sou apaixonada por dança"), as a person would read the turn. Who said it is
    what a question about "what Gina loves" asks, and in another language than memory's
    the name is what the embedding can still match (LoCoMo conv-30 in Portuguese asked in
    English, e5: recall@10 0.264 -> 0.303 from this alone). A chat's role ("user",
    "assistant") says nothing about the content and is left out, so a user's question
    keeps the vector it was asked with (``SentenceEncoder.reuse_key``)."""
    speaker = item.speaker.strip()
    if not speaker or speaker.casefold() in ROLE_NAMES:
        return text
    return f"{speaker}: {text}"
