"""The formation pipeline: queued log rows in, fragments, contexts, entities, relations out.

A pass takes up to ``batch_size`` queued log rows, oldest first, and runs the stages:

1. normalisation (language, canonical English text),
2. embedding of the canonical texts (the sentence encoder),
3. segmentation per conversation (the open segment's tail plus the new turns),
4. NER on the canonical text (plus names memory already knows),
5. relation extraction,

all *before* any write (model calls never hold the database's write lock). Then, in one
transaction: fragments and their FTS rows, segments and contexts, fragment links
(next/answers/depends_on/corrects), mention linking into entities and aliases,
co-occurrence and extracted relations with their mutation records, and the removal of
the rows from the queue. A crash anywhere leaves the queue as it was: the pass is redone
on restart, and nothing is processed twice or lost.

A backend failure on one input is recorded in ``formation_failures`` with the backend's
interpretation and raw output; that stage's output is skipped for that input (a relation
is never stored from an output that failed validation) and the other stages go on.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import apsw
import numpy as np

from ..db import transaction
from ..errors import MemoryCoreError
from ..names import NameIndex
from ..retrieval import query_terms
from .config import FormationConfig
from .contexts import ContextCache, ContextState
from .interfaces import (
    BackendError,
    FragmentView,
    Interpretation,
    Mention,
    MentionDetector,
    MentionEncoder,
    Normalised,
    Normaliser,
    RelationCandidate,
    RelationExtractor,
    Segmenter,
    Vectors,
)
from .linking import EntityCache, EntityState, context_vector, normalise_name
from .mutations import record_relation
from .normalise import StopwordNormaliser
from .relations import CORRECTION, SPEAKER
from .state import blob, load_contexts, load_entities, save_contexts, save_entities, vector

__all__ = ["Backends", "FormationResult", "Former"]

_MAX_ATTEMPTS = 5
_PASS_ERRORS = (MemoryCoreError, apsw.Error, ValueError)
_TAIL = 8
_NAME_CACHE = 50_000
_ANAPHORA = re.compile(
    r"^\s*(it|that|this|those|these|he|she|they|him|her|them|yes|yeah|no|nope|sure|why|"
    r"so|and|but|also|same|exactly|right)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Backends:
    """The stage backends of one store (see :mod:`.backends` for building them)."""

    normaliser: Normaliser
    encoder: MentionEncoder
    segmenter: Segmenter
    ner: MentionDetector
    mentions: MentionEncoder
    relations: RelationExtractor


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


@dataclass
class _Item:
    """One queued log row and everything the pre-write stages made of it."""

    log_id: int
    conversation: str
    role: str
    speaker: str
    text: str
    ts: float
    superseded: bool
    name: str | None = None
    normalised: Normalised | None = None
    vector: Vectors | None = None
    mentions: list[Mention] = field(default_factory=list)
    mention_vectors: list[Vectors | None] = field(default_factory=list)
    speaker_vector: Vectors | None = None
    claims: list[RelationCandidate] = field(default_factory=list)
    new_segment: bool = False
    fragment_id: int = 0
    entity_ids: list[int] = field(default_factory=list)


@dataclass
class _Failure:
    stage: str
    interpretation: str
    log_id: int | None
    error: str
    raw: str | None


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

    def _pass(self, rows: Sequence[_Item]) -> FormationResult:
        items = [i for i in rows if i.text]
        failures: list[_Failure] = []
        self._prepare(items, failures)
        with self._timed("write"):
            counts = self._write(rows, items, failures)
        names = tuple(dict.fromkeys(m.surface for i in items for m in i.mentions))
        return FormationResult(len(rows), 0, names, **counts)

    def _fail(self, rows: Sequence[_Item], exc: BaseException) -> FormationResult:
        """Count a failed pass against its rows (retried on later passes, up to a limit)."""
        self._entities = self._contexts = None  # the caches may be ahead of the database
        with transaction(self._conn):
            self._conn.executemany(
                "UPDATE queue SET attempts = attempts + 1, last_error = ? WHERE log_id = ?",
                [(f"{type(exc).__name__}: {exc}", r.log_id) for r in rows],
            )
        return FormationResult(0, len(rows), ())

    # -- reading ---------------------------------------------------------------------

    def _queued(self, limit: int) -> list[_Item]:
        rows = self._conn.execute(
            "SELECT log.id, log.conversation_id, log.role, log.name, log.text, log.ts,"
            " EXISTS (SELECT 1 FROM superseded s WHERE s.log_id = log.id)"
            " FROM queue JOIN log ON log.id = queue.log_id"
            " WHERE queue.attempts < ? ORDER BY queue.log_id LIMIT ?",
            (_MAX_ATTEMPTS, limit),
        )
        return [
            _Item(lid, conv, role, str(name or role), str(text).strip(), ts, bool(sup), name)
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

    def _prepare(self, items: Sequence[_Item], failures: list[_Failure]) -> None:
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

    def _detect_all(self, items: Sequence[_Item], failures: list[_Failure]) -> None:
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

    def _canonical(self, item: _Item) -> str:
        return item.normalised.canonical if item.normalised else item.text

    def _normalise(self, item: _Item, failures: list[_Failure]) -> Normalised:
        try:
            return self._b.normaliser.normalise(item.text)
        except BackendError as exc:
            failures.append(
                self._failure("normalisation", self._b.normaliser.interpretation, item, exc)
            )
            return StopwordNormaliser().normalise(item.text)

    def _detect(self, item: _Item, known: list[str], failures: list[_Failure]) -> list[Mention]:
        try:
            return self._b.ner.mentions(self._canonical(item), known)
        except BackendError as exc:
            failures.append(self._failure("ner", self._b.ner.interpretation, item, exc))
            return []

    def _extract(self, item: _Item, failures: list[_Failure]) -> list[RelationCandidate]:
        view = FragmentView(
            self._canonical(item), item.speaker, item.role, tuple(m.surface for m in item.mentions)
        )
        try:
            return self._b.relations.extract(view)
        except BackendError as exc:
            failures.append(self._failure("relations", self._b.relations.interpretation, item, exc))
            return []

    def _mention_vectors(self, items: Sequence[_Item]) -> None:
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

    def _segment(self, items: Sequence[_Item], failures: list[_Failure]) -> None:
        """Mark the items that start a new segment, conversation by conversation."""
        by_conversation: dict[str, list[_Item]] = {}
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
        self, stage: str, interp: Interpretation, item: _Item | None, exc: BackendError
    ) -> _Failure:
        return _Failure(stage, interp.label, item.log_id if item else None, str(exc), exc.raw)

    # -- the one write transaction -----------------------------------------------------------

    def _write(
        self, rows: Sequence[_Item], items: Sequence[_Item], failures: Sequence[_Failure]
    ) -> dict[str, int]:
        now = self._clock()
        counts = {"entities": 0, "relations": 0, "segments": 0, "contexts": 0}
        entities, contexts = self._entity_cache(), self._context_cache()
        with transaction(self._conn):
            for item in items:
                self._insert_fragment(item, now)
            for item in items:
                self._place(item, contexts, counts, now)
            for item in items:
                self._declared_aliases(item, entities, counts, now)
                self._link(item, entities, counts, now)
                self._relate(item, entities, counts, now)
            for failure in failures:
                self._conn.execute(
                    "INSERT INTO formation_failures (stage, interpretation, log_id, error, raw,"
                    " created_at) VALUES (?,?,?,?,?,?)",
                    (
                        failure.stage,
                        failure.interpretation,
                        failure.log_id,
                        failure.error,
                        failure.raw,
                        now,
                    ),
                )
            save_entities(self._conn, entities, now)
            save_contexts(self._conn, contexts)
            self._conn.executemany(
                "DELETE FROM queue WHERE log_id = ?", [(r.log_id,) for r in rows]
            )
        return counts

    def _insert_fragment(self, item: _Item, now: float) -> None:
        norm = item.normalised
        assert norm is not None and item.vector is not None
        self._conn.execute(
            "INSERT INTO fragments (log_id, conversation_id, role, speaker, text, lang, canonical,"
            " translated, ts, superseded, created_at, normaliser) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                item.log_id,
                item.conversation,
                item.role,
                item.name,
                item.text,
                norm.lang,
                norm.canonical,
                int(norm.translated),
                item.ts,
                int(item.superseded),
                now,
                self._b.normaliser.interpretation.label,
            ),
        )
        item.fragment_id = int(self._conn.last_insert_rowid())
        self._conn.execute(
            "INSERT INTO fragments_fts (rowid, speaker, canonical) VALUES (?, ?, ?)",
            (item.fragment_id, item.name, norm.canonical),
        )
        self._conn.execute(
            "INSERT INTO fragment_vectors (fragment_id, model, vector) VALUES (?, ?, ?)",
            (item.fragment_id, self._b.encoder.interpretation.label, blob(item.vector)),
        )

    def _place(
        self, item: _Item, contexts: ContextCache, counts: dict[str, int], now: float
    ) -> None:
        """Segment and context membership, and the structural links to the previous turn."""
        assert item.vector is not None
        label = self._b.segmenter.interpretation.label
        open_row = self._conn.execute(
            "SELECT o.segment_id, s.context_id, s.last_fragment FROM open_segments o"
            " JOIN segments s ON s.id = o.segment_id WHERE o.conversation_id = ?",
            (item.conversation,),
        ).fetchone()
        previous = open_row[2] if open_row else None
        if open_row is None or item.new_segment:
            context_id = self._context_for(item, contexts, counts, now)
            self._conn.execute(
                "INSERT INTO segments (conversation_id, context_id, first_fragment, last_fragment,"
                " size, interpretation, created_at) VALUES (?,?,?,?,0,?,?)",
                (item.conversation, context_id, item.fragment_id, item.fragment_id, label, now),
            )
            segment_id = int(self._conn.last_insert_rowid())
            self._conn.execute(
                "INSERT OR REPLACE INTO open_segments (conversation_id, segment_id) VALUES (?, ?)",
                (item.conversation, segment_id),
            )
            counts["segments"] += 1
        else:
            segment_id, context_id = open_row[0], open_row[1]
        self._conn.execute(
            "UPDATE segments SET last_fragment = ?, size = size + 1 WHERE id = ?",
            (item.fragment_id, segment_id),
        )
        context = contexts.contexts[context_id]
        own = float(context.centroid @ item.vector) if context.size else None
        context.absorb(item.vector, item.ts)
        self._member(item.fragment_id, context_id, segment_id, 1.0, True, label)
        for other, sim in contexts.secondary(item.vector, context_id, own, self._config.contexts):
            self._member(item.fragment_id, other, None, sim, False, label)
        if previous is not None:
            self._links(item, previous, now)

    def _context_for(
        self, item: _Item, contexts: ContextCache, counts: dict[str, int], now: float
    ) -> int:
        assert item.vector is not None
        context_id, _ = contexts.best_for_segment(item.vector, self._config.contexts)
        if context_id is not None:
            return context_id
        label = " ".join(query_terms(self._canonical(item))[:5]) or self._canonical(item)[:40]
        self._conn.execute(
            "INSERT INTO contexts (label, centroid, size, first_ts, last_ts, created_at,"
            " interpretation) VALUES (?,?,0,?,?,?,?)",
            (
                label,
                blob(np.zeros_like(item.vector)),
                item.ts,
                item.ts,
                now,
                self._b.segmenter.interpretation.label,
            ),
        )
        new_id = int(self._conn.last_insert_rowid())
        contexts.contexts[new_id] = ContextState(
            new_id, label, np.zeros_like(item.vector), 0, item.ts, item.ts
        )
        counts["contexts"] += 1
        return new_id

    def _member(
        self,
        fragment: int,
        context: int,
        segment: int | None,
        weight: float,
        primary: bool,
        label: str,
    ) -> None:
        self._conn.execute(
            "INSERT OR IGNORE INTO fragment_contexts (fragment_id, context_id, segment_id,"
            " weight, is_primary, interpretation) VALUES (?,?,?,?,?,?)",
            (fragment, context, segment, round(weight, 4), int(primary), label),
        )

    def _links(self, item: _Item, previous: int, now: float) -> None:
        label = "links:structural:turn-order@1"
        row = self._conn.execute(
            "SELECT role, canonical FROM fragments WHERE id = ?", (previous,)
        ).fetchone()
        assert row is not None, "a segment's last fragment always exists"
        prev_role, prev_text = row
        kinds = ["next"]
        if "?" in prev_text and prev_role != item.role:
            kinds.append("answers")
        if _ANAPHORA.match(self._canonical(item)):
            kinds.append("depends_on")
        if CORRECTION.search(self._canonical(item)) and prev_role != item.role:
            kinds.append("corrects")
        self._conn.executemany(
            "INSERT INTO fragment_links (src, dst, kind, interpretation, created_at)"
            " VALUES (?,?,?,?,?)",
            [(item.fragment_id, previous, kind, label, now) for kind in kinds],
        )

    def _link(self, item: _Item, cache: EntityCache, counts: dict[str, int], now: float) -> None:
        ner, linker = self._b.ner.interpretation.label, "linking:alias-fuzzy-context@1"
        if item.name:  # a named speaker is an entity from the first turn it speaks
            self._speaker(item, cache, counts, now)
        for mention, vec in zip(item.mentions, item.mention_vectors, strict=True):
            entity_id, score, reason = self._resolve(
                mention.surface, mention.label, vec, item, cache, counts, now, protected=False
            )
            self._conn.execute(
                "INSERT INTO mentions (fragment_id, entity_id, start, end, surface, label,"
                " confidence, link_score, link_reason, ner, linker) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    item.fragment_id,
                    entity_id,
                    mention.start,
                    mention.end,
                    mention.surface,
                    mention.label,
                    mention.confidence,
                    round(score, 4),
                    reason,
                    ner,
                    linker,
                ),
            )
            item.entity_ids.append(entity_id)
        self._translated_aliases(item, cache)

    def _resolve(
        self,
        name: str,
        label: str,
        vec: Vectors | None,
        item: _Item,
        cache: EntityCache,
        counts: dict[str, int],
        now: float,
        *,
        protected: bool,
        absorb: bool = True,
    ) -> tuple[int, float, str]:
        """The entity ``name`` denotes, founding it when linking finds none.

        ``absorb`` counts this occurrence as a mention of the entity (its context vector
        joins the entity's); a lookup that is not a mention passes False.
        """
        protected = protected or name.casefold() == item.speaker.casefold()
        decision = cache.link(name, vec, self._config.linking, protected=protected)
        entity_id = decision.entity_id
        if entity_id is None:
            entity_id = self._found(name, label, item, cache, now)
            counts["entities"] += 1
        elif cache.add_alias(entity_id, name):
            self._alias(entity_id, name, item, "mention")
        if absorb:
            cache.entities[entity_id].absorb(vec, item.fragment_id)
        return entity_id, decision.score, decision.reason

    def _found(self, name: str, label: str, item: _Item, cache: EntityCache, now: float) -> int:
        self._conn.execute(
            "INSERT INTO entities (name, label, mentions, first_seen, last_seen, created_at,"
            " interpretation) VALUES (?,?,0,?,?,?,?)",
            (name, label, item.ts, item.ts, now, "linking:alias-fuzzy-context@1"),
        )
        entity_id = int(self._conn.last_insert_rowid())
        cache.entities[entity_id] = EntityState(entity_id, name, label, None, 0, 0)
        cache.add_alias(entity_id, name)
        self._alias(entity_id, name, item, "name")
        return entity_id

    def _alias(
        self, entity_id: int, alias: str, item: _Item, source: str, lang: str | None = None
    ) -> None:
        lang = lang or (item.normalised.lang if item.normalised else None)
        self._conn.execute(
            "INSERT OR IGNORE INTO aliases (entity_id, alias, normalized, lang, source,"
            " fragment_id) VALUES (?,?,?,?,?,?)",
            (entity_id, alias, normalise_name(alias), lang, source, item.fragment_id),
        )

    def _translated_aliases(self, item: _Item, cache: EntityCache) -> None:
        """Names the translator mapped (original -> English) become aliases of the entity."""
        if item.normalised is None:
            return
        linked = {
            m.surface.casefold(): e for m, e in zip(item.mentions, item.entity_ids, strict=True)
        }
        for original, english in item.normalised.names:
            entity_id = linked.get(english.casefold())
            if entity_id is not None and cache.add_alias(entity_id, original):
                self._alias(entity_id, original, item, "translation", item.normalised.lang)

    def _relate(self, item: _Item, cache: EntityCache, counts: dict[str, int], now: float) -> None:
        """Co-occurrence between the fragment's entities, and the extracted claims."""
        context = self._conn.execute(
            "SELECT context_id FROM fragment_contexts WHERE fragment_id = ? AND is_primary = 1",
            (item.fragment_id,),
        ).fetchone()
        context_id = context[0] if context else None
        distinct = list(dict.fromkeys(item.entity_ids))
        for i, a in enumerate(distinct):
            for b in distinct[i + 1 :]:
                record_relation(
                    self._conn,
                    a,
                    "co_occurs_with",
                    b,
                    None,
                    item.fragment_id,
                    context_id,
                    "relations:structural:co-occurrence@1",
                    0.5,
                    None,
                    correction=False,
                    now=now,
                    abandoned=item.superseded,
                )
                counts["relations"] += 1
        label = self._b.relations.interpretation.label
        for claim in item.claims:
            if claim.predicate == "alias":
                continue  # handled before linking, by _declared_aliases
            subject = self._endpoint(claim.subject, item, cache, counts, now)
            obj_id = (
                self._endpoint(claim.obj, item, cache, counts, now) if claim.obj_is_entity else None
            )
            value = None if claim.obj_is_entity else claim.obj
            record_relation(
                self._conn,
                subject,
                claim.predicate,
                obj_id,
                value,
                item.fragment_id,
                context_id,
                label,
                claim.confidence,
                claim.valid_from,
                correction=claim.correction,
                now=now,
                abandoned=item.superseded,
            )
            counts["relations"] += 1

    def _declared_aliases(
        self, item: _Item, cache: EntityCache, counts: dict[str, int], now: float
    ) -> None:
        """Aliases the fragment declares ("X, also known as Y") are learned before its
        mentions are linked, so "Y" in the same fragment already denotes X."""
        for claim in item.claims:
            if claim.predicate != "alias":
                continue
            if claim.subject == SPEAKER:
                subject = self._speaker(item, cache, counts, now)
            else:
                subject, _, _ = self._resolve(
                    claim.subject,
                    "MISC",
                    item.vector,
                    item,
                    cache,
                    counts,
                    now,
                    protected=False,
                    absorb=False,
                )
            if cache.add_alias(subject, claim.obj):
                self._alias(subject, claim.obj, item, "alias-statement")

    def _speaker(self, item: _Item, cache: EntityCache, counts: dict[str, int], now: float) -> int:
        """The entity of the fragment's speaker (a speaker is never split as a homonym)."""
        entity_id, _, _ = self._resolve(
            item.speaker, "PER", item.speaker_vector, item, cache, counts, now, protected=True
        )
        if entity_id not in cache.speakers:  # its name becomes the speaker's own
            cache.speakers.add(entity_id)
            cache.entities[entity_id].name = item.speaker
            self._conn.execute(
                "UPDATE entities SET name = ?, label = 'PER', is_speaker = 1 WHERE id = ?",
                (item.speaker, entity_id),
            )
        return entity_id

    def _endpoint(
        self, name: str, item: _Item, cache: EntityCache, counts: dict[str, int], now: float
    ) -> int:
        """The entity for a claim's subject/object: a mention of this fragment, or resolved."""
        if name == SPEAKER:
            return self._speaker(item, cache, counts, now)
        for mention, entity_id in zip(item.mentions, item.entity_ids, strict=True):
            if mention.surface.casefold() == name.casefold():
                return entity_id
        entity_id, _, _ = self._resolve(
            name, "MISC", item.vector, item, cache, counts, now, protected=False
        )
        return entity_id
