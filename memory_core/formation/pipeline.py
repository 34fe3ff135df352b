"""The formation pipeline: queued log rows in, fragments, contexts, entities, relations out.

A pass takes up to ``batch_size`` queued log rows, oldest first, and runs the stages:

1. normalisation (language, canonical English text),
2. embedding of the canonical texts (the sentence encoder),
3. segmentation per conversation (the open segment's tail plus the new turns),
4. NER on the canonical text (plus names memory already knows),
5. relation extraction,

all *before* any write (model calls never hold the database's write lock). Then, in one
transaction (:class:`.writer.GraphWriter`): fragments and their FTS rows, segments and
contexts, fragment links (next/answers/depends_on/corrects), mention linking into
entities and aliases, co-occurrence and extracted relations with their mutation records,
and the removal of the rows from the queue. A crash anywhere leaves the queue as it was:
the pass is redone on restart, and nothing is processed twice or lost.

A backend failure on one input is recorded in ``formation_failures`` with the backend's
interpretation and raw output; that stage's output is skipped for that input (a relation
is never stored from an output that failed validation) and the other stages go on.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import apsw
import numpy as np

from ..db import transaction
from ..errors import MemoryCoreError
from ..names import NameIndex
from .config import FormationConfig
from .contexts import ContextCache
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
from .linking import EntityCache, context_vector
from .normalise import StopwordNormaliser
from .state import load_contexts, load_entities, save_contexts, save_entities, vector
from .writer import Counts, GraphWriter

__all__ = ["Backends", "FormationResult", "Former"]

_MAX_ATTEMPTS = 5
_PASS_ERRORS = (MemoryCoreError, apsw.Error, ValueError)
_TAIL = 8
_NAME_CACHE = 50_000


@dataclass(frozen=True)
class FormationResult:
    """What one pass did."""

    processed: int
    failed: int
    names: tuple[str, ...]
    entities: int = 0
    relations: int = 0
    segments: int = 0
    contexts: int = 0


class Former:
    """Runs formation passes over one store's writer connection (one former per store)."""

    def __init__(
        self,
        conn: apsw.Connection,
        backends: Backends,
        config: FormationConfig,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._conn = conn
        self._b = backends
        self._config = config
        self._clock = clock
        self._entities: EntityCache | None = None
        self._contexts: ContextCache | None = None
        self._name_vectors: dict[str, Vectors] = {}
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
            return self._pass(rows)
        except _PASS_ERRORS as exc:
            if len(rows) == 1:
                return self._fail(rows, exc)
        processed = failed = 0
        names: list[str] = []
        for row in rows:  # isolate the row that breaks the batch; the others go through
            try:
                result = self._pass([row])
            except _PASS_ERRORS as exc:
                result = self._fail([row], exc)
            processed, failed = processed + result.processed, failed + result.failed
            names.extend(result.names)
        return FormationResult(processed, failed, tuple(dict.fromkeys(names)))

    def _pass(self, rows: Sequence[Item]) -> FormationResult:
        items = [i for i in rows if i.text]
        failures: list[Failure] = []
        self._prepare(items, failures)
        with self._timed("write"):
            counts = self._write(rows, items, failures)
        names = tuple(dict.fromkeys(m.surface for i in items for m in i.mentions))
        return FormationResult(len(rows), 0, names, **counts)

    def _fail(self, rows: Sequence[Item], exc: BaseException) -> FormationResult:
        """Count a failed pass against its rows (retried on later passes, up to a limit)."""
        self._entities = self._contexts = None  # the caches may be ahead of the database
        with transaction(self._conn):
            self._conn.executemany(
                "UPDATE queue SET attempts = attempts + 1, last_error = ? WHERE log_id = ?",
                [(f"{type(exc).__name__}: {exc}", r.log_id) for r in rows],
            )
        return FormationResult(0, len(rows), ())

    # -- reading ---------------------------------------------------------------------

    def _queued(self, limit: int) -> list[Item]:
        rows = self._conn.execute(
            "SELECT log.id, log.conversation_id, log.role, log.name, log.text, log.ts,"
            " EXISTS (SELECT 1 FROM superseded s WHERE s.log_id = log.id)"
            " FROM queue JOIN log ON log.id = queue.log_id"
            " WHERE queue.attempts < ? ORDER BY queue.log_id LIMIT ?",
            (_MAX_ATTEMPTS, limit),
        )
        return [
            Item(lid, conv, role, str(name or role), str(text).strip(), ts, bool(sup), name)
            for lid, conv, role, name, text, ts, sup in rows
        ]

    def _entity_cache(self) -> EntityCache:
        if self._entities is None:
            self._entities = load_entities(self._conn)
        return self._entities

    def _context_cache(self) -> ContextCache:
        if self._contexts is None:
            self._contexts = load_contexts(self._conn)
        return self._contexts

    # -- stages before any write -----------------------------------------------------------

    def _prepare(self, items: Sequence[Item], failures: list[Failure]) -> None:
        with self._timed("normalisation"):
            for item in items:
                item.normalised = self._normalise(item, failures)
        with self._timed("embedding"):
            canonical = [self._canonical(i) for i in items]
            vectors = self._b.encoder.encode(canonical) if items else np.zeros((0, 0), np.float32)
            for item, vec in zip(items, vectors, strict=True):
                item.vector = vec
        with self._timed("segmentation"):
            self._segment(items, failures)
        with self._timed("ner_relations"):
            self._detect_all(items, failures)
        with self._timed("mention_vectors"):
            self._mention_vectors(items)

    def _detect_all(self, items: Sequence[Item], failures: list[Failure]) -> None:
        """NER and relation extraction; names found earlier in the pass count as known."""
        cache = self._entity_cache()
        batch = NameIndex()
        for item in items:
            text = self._canonical(item)
            translated = (
                [english for _, english in item.normalised.names] if item.normalised else []
            )
            known = [*cache.known_in(text), *batch.mentioned(text), *translated]
            item.mentions = self._detect(item, list(dict.fromkeys(known)), failures)
            batch.add(m.surface for m in item.mentions)
            item.claims = self._extract(item, failures)

    @contextlib.contextmanager
    def _timed(self, stage: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter() - began

    def _canonical(self, item: Item) -> str:
        return item.normalised.canonical if item.normalised else item.text

    def _normalise(self, item: Item, failures: list[Failure]) -> Normalised:
        try:
            return self._b.normaliser.normalise(item.text)
        except BackendError as exc:
            failures.append(
                self._failure("normalisation", self._b.normaliser.interpretation, item, exc)
            )
            return StopwordNormaliser().normalise(item.text)

    def _detect(self, item: Item, known: list[str], failures: list[Failure]) -> list[Mention]:
        try:
            return self._b.ner.mentions(self._canonical(item), known)
        except BackendError as exc:
            failures.append(self._failure("ner", self._b.ner.interpretation, item, exc))
            return []

    def _extract(self, item: Item, failures: list[Failure]) -> list[RelationCandidate]:
        view = FragmentView(
            self._canonical(item), item.speaker, item.role, tuple(m.surface for m in item.mentions)
        )
        try:
            return self._b.relations.extract(view)
        except BackendError as exc:
            failures.append(self._failure("relations", self._b.relations.interpretation, item, exc))
            return []

    def _mention_vectors(self, items: Sequence[Item]) -> None:
        """Context vectors per mention (and per speaker): the name's direction removed."""
        surfaces = sorted(
            {m.surface for i in items for m in i.mentions} | {i.speaker for i in items}
        )
        texts = [self._canonical(i) for i in items]
        same_encoder = self._b.mentions is self._b.encoder
        contexts = (
            [i.vector for i in items] if same_encoder else list(self._b.mentions.encode(texts))
        )
        missing = [name for name in surfaces if name not in self._name_vectors]
        if missing:
            if len(self._name_vectors) > _NAME_CACHE:
                self._name_vectors.clear()
            encoded = self._b.mentions.encode(missing)
            self._name_vectors.update(zip(missing, encoded, strict=True))
        names = self._name_vectors
        for item, ctx in zip(items, contexts, strict=True):
            assert ctx is not None
            item.mention_vectors = [context_vector(ctx, names[m.surface]) for m in item.mentions]
            item.speaker_vector = context_vector(ctx, names[item.speaker])

    def _segment(self, items: Sequence[Item], failures: list[Failure]) -> None:
        """Mark the items that start a new segment, conversation by conversation."""
        by_conversation: dict[str, list[Item]] = {}
        for item in items:
            by_conversation.setdefault(item.conversation, []).append(item)
        for conversation, new in by_conversation.items():
            tail_texts, tail_vectors = self._tail(conversation)
            if not tail_texts:
                new[0].new_segment = True
            texts = tail_texts + [self._canonical(i) for i in new]
            vectors = np.stack(tail_vectors + [i.vector for i in new if i.vector is not None])
            try:
                cuts = self._b.segmenter.boundaries(texts, vectors)
            except BackendError as exc:
                failures.append(
                    self._failure("segmentation", self._b.segmenter.interpretation, new[0], exc)
                )
                continue
            for cut in cuts:
                index = cut + 1 - len(tail_texts)
                if 0 <= index < len(new):
                    new[index].new_segment = True

    def _tail(self, conversation: str) -> tuple[list[str], list[Vectors]]:
        rows = list(
            self._conn.execute(
                "SELECT f.canonical, v.vector FROM open_segments o"
                " JOIN fragment_contexts fc ON fc.segment_id = o.segment_id AND fc.is_primary = 1"
                " JOIN fragments f ON f.id = fc.fragment_id"
                " JOIN fragment_vectors v ON v.fragment_id = f.id"
                " WHERE o.conversation_id = ? ORDER BY f.id DESC LIMIT ?",
                (conversation, _TAIL),
            )
        )
        rows.reverse()
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
    ) -> Counts:
        entities, contexts = self._entity_cache(), self._context_cache()
        now = self._clock()
        writer = GraphWriter(self._conn, self._b, self._config, entities, contexts, now)
        with transaction(self._conn):
            writer.write(items, failures)
            save_entities(self._conn, entities, now)
            save_contexts(self._conn, contexts)
            self._conn.executemany(
                "DELETE FROM queue WHERE log_id = ?", [(r.log_id,) for r in rows]
            )
        return writer.counts
