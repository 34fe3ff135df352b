"""The write phase of a formation pass: everything a pass stores, in its one transaction.

:class:`GraphWriter` is built per pass with the pass's clock reading and the in-memory
entity and context caches, and writes fragments (with FTS rows and vectors), segments and
context memberships, structural links between fragments, mentions linked into entities
and aliases, co-occurrence and extracted relations with their mutation records. The
caller owns the transaction; on failure it discards the caches (they may be ahead of the
database).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ..storage import Connection
from ..storage.tables import contexts as context_rows
from ..storage.tables import dates as date_rows
from ..storage.tables import entities as entity_rows
from ..storage.tables import fragments as fragment_rows
from ..storage.tables import log as log_rows
from ..storage.tables import relations as relation_rows
from ..storage.tables.evidence import CHANGE_LINK, TOPIC_LINK, TURN_ORDER_LINK
from ..text.vocatives import vocatives
from ..text.words import content_stems, opens_as_correction, query_terms
from .config import FormationConfig
from .dates import date_rows_of
from .interfaces import Backends, Mention, Vectors
from .items import Failure, Item
from .stages.addressing import VOCATIVE, Address, addressee, addresses
from .stages.contexts import ContextCache, ContextState
from .stages.linking import EntityCache, EntityState, normalise_name
from .stages.mutations import record_relation
from .stages.relations import CORRECTION, SPEAKER
from .state import blob

__all__ = ["Counts", "GraphWriter", "cooccurrences"]

Counts = dict[str, int]
_ANAPHORA = re.compile(
    r"^\s*(it|that|this|those|these|he|she|they|him|her|them|yes|yeah|no|nope|sure|why|"
    r"so|and|but|also|same|exactly|right)\b",
    re.IGNORECASE,
)
_LINKER = "linking:alias-fuzzy-context@1"
_TOPIC_LOOKBACK = 50
"""Newest members of a context a topic correction looks through for what it corrects."""


class GraphWriter:
    """Writes one pass's items; ``counts`` tallies what was founded."""

    def __init__(
        self,
        conn: Connection,
        backends: Backends,
        config: FormationConfig,
        entities: EntityCache,
        contexts: ContextCache,
        now: float,
    ) -> None:
        self._conn, self._b, self._config = conn, backends, config
        self._entities, self._contexts, self._now = entities, contexts, now
        self.counts: Counts = {"entities": 0, "relations": 0, "segments": 0, "contexts": 0}

    def write(self, items: Sequence[Item], failures: Sequence[Failure]) -> None:
        """Store the pass (inside the caller's transaction)."""
        for item in items:
            self._insert_fragment(item)
        for item in items:
            self._place(item)
        for item in items:
            stated = item.kind == "stated"
            if stated:
                self._declared_aliases(item)
            self._link(item)
            if stated:
                self._relate(item)
            else:
                self._restates(item)
        log_rows.record_failures(
            self._conn,
            [(f.stage, f.interpretation, f.log_id, f.error, f.raw, self._now) for f in failures],
        )

    def _canonical(self, item: Item) -> str:
        """What the writer reads of the canonical text (cut at the size cap)."""
        text = item.normalised.canonical if item.normalised else item.text
        return text[: self._config.max_text_chars]

    def _insert_fragment(self, item: Item) -> None:
        norm = item.normalised
        assert norm is not None and item.vector is not None
        item.fragment_id = fragment_rows.insert(
            self._conn,
            log_id=item.log_id,
            conversation_id=item.conversation,
            role=item.role,
            speaker=item.name,
            text=item.text,
            lang=norm.lang,
            canonical=norm.canonical,
            translated=norm.translated,
            ts=item.ts,
            superseded=item.superseded,
            created_at=self._now,
            normaliser=self._b.normaliser.interpretation.label,
            model=self._b.encoder.interpretation.label,
            vector=blob(item.vector),
            kind=item.kind,
        )
        self._insert_dates(item)

    def _insert_dates(self, item: Item) -> None:
        """The turn's time expressions, resolved against its day, kept beside the
        fragment (:mod:`.dates`)."""
        rows = date_rows_of(item.text, item.ts)
        if rows:
            date_rows.insert(self._conn, item.fragment_id, rows)

    def _place(self, item: Item) -> None:
        """Segment and context membership, and the structural links to the previous turn."""
        assert item.topic is not None
        label = self._b.segmenter.interpretation.label
        open_row = context_rows.open_segment(self._conn, item.conversation)
        previous = open_row.last_fragment if open_row else None
        if open_row is None or item.new_segment:
            context_id = self._context_for(item)
            segment_id = context_rows.start_segment(
                self._conn,
                conversation_id=item.conversation,
                context_id=context_id,
                fragment_id=item.fragment_id,
                interpretation=label,
                created_at=self._now,
            )
            self.counts["segments"] += 1
        else:
            segment_id, context_id = open_row.segment_id, open_row.context_id
        context_rows.extend_segment(self._conn, segment_id, item.fragment_id)
        item.previous = previous
        context = self._contexts.contexts[context_id]
        own = float(context.centroid @ item.topic) if context.size else None
        context.absorb(item.topic, item.ts)
        self._member(item.fragment_id, context_id, segment_id, 1.0, True, label)
        for other, sim in self._contexts.secondary(
            item.topic, context_id, own, self._config.contexts
        ):
            self._member(item.fragment_id, other, None, sim, False, label)
        if previous is not None:
            self._links(item, previous)

    def _context_for(self, item: Item) -> int:
        assert item.topic is not None
        context_id, _ = self._contexts.best_for_segment(item.topic, self._config.contexts)
        if context_id is not None:
            return context_id
        label = " ".join(query_terms(self._canonical(item))[:5]) or self._canonical(item)[:40]
        new_id = context_rows.insert(
            self._conn,
            label=label,
            centroid=blob(np.zeros_like(item.topic)),
            ts=item.ts,
            created_at=self._now,
            interpretation=self._b.segmenter.interpretation.label,
        )
        self._contexts.contexts[new_id] = ContextState(
            new_id, label, np.zeros_like(item.topic), 0, item.ts, item.ts
        )
        self.counts["contexts"] += 1
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
        context_rows.add_membership(
            self._conn, fragment, context, segment, round(weight, 4), primary, label
        )

    def _links(self, item: Item, previous: int) -> None:
        label = f"{TURN_ORDER_LINK}@1"
        row = fragment_rows.head(self._conn, previous, self._config.max_text_chars)
        assert row is not None, "a segment's last fragment always exists"
        prev_role, prev_text = row
        kinds = ["next"]
        if "?" in prev_text and prev_role != item.role:
            kinds.append("answers")
        if _ANAPHORA.match(self._canonical(item)):
            kinds.append("depends_on")
        corrects = item.kind == "stated" and CORRECTION.search(self._canonical(item))
        if corrects and prev_role != item.role:
            kinds.append("corrects")
        fragment_rows.insert_links(self._conn, item.fragment_id, previous, kinds, label, self._now)

    def _link(self, item: Item) -> None:
        """Mentions linked into entities (typed by NER, else by the fragment's claims),
        then the relations NER read that no claim states ("a minha irmã Marta" is the
        speaker's ``has_sister``), stored under NER's interpretation."""
        ner, linker = self._b.ner.interpretation.label, "linking:alias-fuzzy-context@1"
        if item.name:  # a named speaker is an entity from the first turn it speaks
            self._speaker(item)
        listener, called = self._addresses(item)
        for mention, vec in zip(item.mentions, item.mention_vectors, strict=True):
            label = self._entities.label_for(mention.surface, mention.label, item.claims)
            address = called.pop((mention.start, mention.end), None)
            if address is not None:
                entity_id, score, reason = self._addressed(address, vec, item, item.fragment_id)
                label = "PER"
            elif listener is not None and self._calls(listener, mention):
                entity_id, score, reason = self._to_listener(listener, vec, item)
                label = "PER"
            else:
                entity_id, score, reason = self._resolve(
                    mention.surface, label, vec, item, protected=False
                )
            entity_rows.insert_mention(
                self._conn,
                fragment_id=item.fragment_id,
                entity_id=entity_id,
                start=mention.start,
                end=mention.end,
                surface=mention.surface,
                label=label,
                confidence=mention.confidence,
                link_score=round(score, 4),
                link_reason=reason,
                ner=ner,
                linker=linker,
            )
            item.entity_ids.append(entity_id)
        for address in called.values():  # vocatives NER did not read as names
            self._vocative_mention(address, item, item.fragment_id)
        self._translated_aliases(item)
        cued = self._entities.cued_relations(item.mentions, item.entity_ids, item.claims)
        if item.kind != "stated" or not cued:
            return
        context_id = context_rows.primary_context(self._conn, item.fragment_id)
        for predicate, entity_id in cued:
            record_relation(
                self._conn,
                self._speaker(item),
                predicate,
                entity_id,
                None,
                item.fragment_id,
                context_id,
                ner,
                0.7,
                None,
                correction=False,
                now=self._now,
                abandoned=item.superseded,
            )
            self.counts["relations"] += 1

    def _addresses(self, item: Item) -> tuple[int | None, dict[tuple[int, int], Address]]:
        """The speaker the turn replies to, and the turn's vocatives that call them, by
        span (see :mod:`.stages.addressing`). A turn that replies to nobody holds back
        the vocatives of names no entity has as an alias (they found no entity): the
        reply that follows tells whom they call (:meth:`_answered`)."""
        if not item.name or item.kind != "stated":
            return None, {}
        previous = self._speaker_before(item.previous)
        listener = addressee(self._entities, item.name, previous)
        if listener is None:
            self._hold_back(item)
            return None, {}
        self._answered(item, previous)
        found = addresses(self._canonical(item), listener, self._entities, item.mentions)
        return listener, {(a.vocative.start, a.vocative.end): a for a in found}

    def _calls(self, listener: int, mention: Mention) -> bool:
        """Whether a mention in a reply to ``listener`` that is no vocative ("Love you
        Mel") still names them: a name only they are addressed by, not one the turn
        gives a relation ("my cousin Mel")."""
        return mention.relation is None and self._entities.addressed_only(
            listener, mention.surface
        )

    def _to_listener(
        self, listener: int, vec: Vectors | None, item: Item
    ) -> tuple[int, float, str]:
        self._entities.entities[listener].absorb(vec, item.fragment_id)
        name = self._entities.entities[listener].name
        return listener, 1.0, f"a name {name} is addressed by, in a reply to {name}"

    def _speaker_before(self, fragment_id: int | None) -> str | None:
        return None if fragment_id is None else fragment_rows.speaker_of(self._conn, fragment_id)

    def _hold_back(self, item: Item) -> None:
        """Drop the mentions of the turn's vocatives whose names are no entity's alias
        (unknown, or only the name a speaker is addressed by): the reply decides."""
        held = {
            (v.start, v.end)
            for v in vocatives(self._canonical(item))
            if not self._entities.aliases.get(normalise_name(v.name))
        }
        if not held:
            return
        kept = [
            (m, v)
            for m, v in zip(item.mentions, item.mention_vectors, strict=True)
            if (m.start, m.end) not in held
        ]
        item.mentions = [m for m, _ in kept]
        item.mention_vectors = [v for _, v in kept]

    def _answered(self, item: Item, previous: str | None) -> None:
        """The previous turn replied to nobody (its conversation's first, or after its
        speaker's own turn): its held-back vocatives call this turn's speaker."""
        before = item.previous
        assert before is not None and previous is not None
        earlier = fragment_rows.turn_before(self._conn, before)
        if addressee(self._entities, previous, self._speaker_before(earlier)) is not None:
            return
        listener = self._entities.speaker_named(item.name or "")
        row = fragment_rows.head(self._conn, before, self._config.max_text_chars)
        if listener is None or row is None:
            return
        linked = entity_rows.mention_spans(self._conn, before)
        for address in addresses(row[1], listener, self._entities, ()):
            if (address.vocative.start, address.vocative.end) not in linked:
                self._vocative_mention(address, item, before)

    def _addressed(
        self, address: Address, vec: Vectors | None, item: Item, fragment_id: int
    ) -> tuple[int, float, str]:
        """Link a vocative (of ``fragment_id``) to the speaker it calls; a new name
        becomes a ``vocative`` alias of that speaker, from that fragment."""
        name, entity_id = address.vocative.name, address.entity_id
        if self._entities.add_addressed(entity_id, name):
            self._alias(entity_id, name, item, VOCATIVE, fragment_id=fragment_id)
        self._entities.entities[entity_id].absorb(vec, fragment_id)
        listener = self._entities.entities[entity_id].name
        return entity_id, 1.0, f"{VOCATIVE} ({address.vocative.cue}): addresses {listener}"

    def _vocative_mention(self, address: Address, item: Item, fragment_id: int) -> None:
        """The mention of a vocative NER did not read, or one held back, linked."""
        entity_id, score, reason = self._addressed(address, None, item, fragment_id)
        vocative = address.vocative
        entity_rows.insert_mention(
            self._conn,
            fragment_id=fragment_id,
            entity_id=entity_id,
            start=vocative.start,
            end=vocative.end,
            surface=vocative.name,
            label="PER",
            confidence=1.0,
            link_score=score,
            link_reason=reason,
            ner=self._b.ner.interpretation.label,
            linker=_LINKER,
        )

    def _resolve(
        self,
        name: str,
        label: str,
        vec: Vectors | None,
        item: Item,
        *,
        protected: bool,
        absorb: bool = True,
    ) -> tuple[int, float, str]:
        """The entity ``name`` denotes, founding it when linking finds none.

        ``absorb`` counts this occurrence as a mention of the entity (its context vector
        joins the entity's); a lookup that is not a mention passes False.
        """
        # a question or an answer restating memory names what memory knows: it links to
        # the entity of that name and never founds a homonym of it (a question in another
        # language reads unlike the entity's contexts without being about someone else)
        protected = (
            protected or item.kind != "stated" or name.casefold() == item.speaker.casefold()
        )
        decision = self._entities.link(name, vec, self._config.linking, protected=protected)
        entity_id = decision.entity_id
        if entity_id is None:
            entity_id = self._found(name, label, item)
            self.counts["entities"] += 1
        elif not self._addressed_as(entity_id, name) and self._entities.add_alias(entity_id, name):
            self._alias(entity_id, name, item, "mention")
        if absorb:
            self._entities.entities[entity_id].absorb(vec, item.fragment_id)
        return entity_id, decision.score, decision.reason

    def _addressed_as(self, entity_id: int, name: str) -> bool:
        """Whether ``name`` is how the speaker ``entity_id`` is addressed (it stays such,
        not an alias, when a question names the speaker by it)."""
        return entity_id in self._entities.addressed.get(normalise_name(name), set())

    def _found(self, name: str, label: str, item: Item) -> int:
        entity_id = entity_rows.insert(
            self._conn,
            name=name,
            label=label,
            ts=item.ts,
            created_at=self._now,
            interpretation="linking:alias-fuzzy-context@1",
        )
        self._entities.entities[entity_id] = EntityState(entity_id, name, label, None, 0, 0)
        self._entities.add_alias(entity_id, name)
        self._alias(entity_id, name, item, "name")
        return entity_id

    def _alias(
        self,
        entity_id: int,
        alias: str,
        item: Item,
        source: str,
        lang: str | None = None,
        *,
        fragment_id: int | None = None,
    ) -> None:
        lang = lang or (item.normalised.lang if item.normalised else None)
        entity_rows.insert_alias(
            self._conn,
            entity_id=entity_id,
            alias=alias,
            normalized=normalise_name(alias),
            lang=lang,
            source=source,
            fragment_id=item.fragment_id if fragment_id is None else fragment_id,
        )

    def _translated_aliases(self, item: Item) -> None:
        """Names the translator mapped (original -> English) become aliases of the entity."""
        if item.normalised is None:
            return
        linked = {
            m.surface.casefold(): e for m, e in zip(item.mentions, item.entity_ids, strict=True)
        }
        for original, english in item.normalised.names:
            entity_id = linked.get(english.casefold())
            if entity_id is not None and self._entities.add_alias(entity_id, original):
                self._alias(entity_id, original, item, "translation", item.normalised.lang)

    def _relate(self, item: Item) -> None:
        """Co-occurrence between the fragment's entities, and the extracted claims."""
        context_id = context_rows.primary_context(self._conn, item.fragment_id)
        distinct = list(dict.fromkeys(item.entity_ids))
        for a, b in cooccurrences(distinct, self._config.max_cooccurrence_pairs):
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
                now=self._now,
                abandoned=item.superseded,
            )
            self.counts["relations"] += 1
        label = self._b.relations.interpretation.label
        for claim in item.claims:
            if claim.predicate == "alias":
                continue  # handled before linking, by _declared_aliases
            subject = self._endpoint(claim.subject, item)
            obj_id = self._endpoint(claim.obj, item) if claim.obj_is_entity else None
            value = None if claim.obj_is_entity else claim.obj
            relation_id = record_relation(
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
                now=self._now,
                abandoned=item.superseded,
            )
            self.counts["relations"] += 1
            self._correction_link(item, relation_id)
        if context_id is not None:
            self._topic_correction(item, context_id)

    def _restates(self, item: Item) -> None:
        """A restating answer depends on what it restates (``restates@1``): ranked below
        its sources and left out where they are shown. Only live fragments are linked
        (a source forgotten or abandoned since is no longer what it restates)."""
        if item.kind != "restated":
            return
        for source in fragment_rows.live_among(self._conn, item.sources):
            if source != item.fragment_id:
                fragment_rows.insert_link_once(
                    self._conn,
                    item.fragment_id,
                    source,
                    "depends_on",
                    f"{fragment_rows.RESTATES}@1",
                    self._now,
                )

    def _topic_correction(self, item: Item, context_id: int) -> None:
        """A turn that opens as a correction ("Actually, ...", "Na verdade, ...")
        corrects the same speaker's latest turn on the same topic (its context) in
        another conversation, when the two share a content word: what a correction says
        it corrects, without a claim the patterns could read (the turn before, in the
        same conversation, is the turn-order link's)."""
        canonical = self._canonical(item)
        if not item.name or not opens_as_correction(canonical):
            return
        words = content_stems(canonical)
        members = context_rows.latest_members(
            self._conn, context_id, item.fragment_id, limit=_TOPIC_LOOKBACK
        )
        for fid, conversation, speaker, head in members:
            if conversation == item.conversation or speaker != item.name:
                continue
            if words & content_stems(head):
                fragment_rows.insert_link_once(
                    self._conn, item.fragment_id, fid, "corrects", f"{TOPIC_LINK}@1", self._now
                )
            return

    def _correction_link(self, item: Item, relation_id: int) -> None:
        """A claim that changed an earlier one makes its fragment correct that one's, in
        whatever conversation it was said (both name the same entity): the turn-order
        ``corrects`` link only sees the turn before."""
        replaced = relation_rows.replaced_fragment(self._conn, relation_id)
        if replaced is not None and replaced != item.fragment_id:
            fragment_rows.insert_link_once(
                self._conn,
                item.fragment_id,
                replaced,
                "corrects",
                f"{CHANGE_LINK}@1",
                self._now,
            )

    def _declared_aliases(self, item: Item) -> None:
        """Aliases the fragment declares ("X, also known as Y") are learned before its
        mentions are linked, so "Y" in the same fragment already denotes X."""
        for claim in item.claims:
            if claim.predicate != "alias":
                continue
            if claim.subject == SPEAKER:
                subject = self._speaker(item)
            else:
                subject, _, _ = self._resolve(
                    claim.subject,
                    "MISC",
                    item.topic,
                    item,
                    protected=False,
                    absorb=False,
                )
            if self._entities.add_alias(subject, claim.obj):
                self._alias(subject, claim.obj, item, "alias-statement")

    def _speaker(self, item: Item) -> int:
        """The entity of the fragment's speaker (a speaker is never split as a homonym)."""
        entity_id, _, _ = self._resolve(
            item.speaker, "PER", item.speaker_vector, item, protected=True
        )
        if entity_id not in self._entities.speakers:  # its name becomes the speaker's own
            self._entities.speakers.add(entity_id)
            self._entities.entities[entity_id].name = item.speaker
            entity_rows.mark_speaker(self._conn, entity_id, item.speaker)
        return entity_id

    def _endpoint(self, name: str, item: Item) -> int:
        """The entity for a claim's subject/object: a mention of this fragment, or resolved."""
        if name == SPEAKER:
            return self._speaker(item)
        for mention, entity_id in zip(item.mentions, item.entity_ids, strict=True):
            if mention.surface.casefold() == name.casefold():
                return entity_id
        label = self._entities.label_for(name, "MISC", item.claims)
        entity_id, _, _ = self._resolve(name, label, item.topic, item, protected=False)
        return entity_id


def cooccurrences(entities: Sequence[int], limit: int) -> list[tuple[int, int]]:
    """Pairs ``(a, b)`` of ``entities`` (distinct, in order of first mention), ``a`` first.

    All ``m(m-1)/2`` pairs, in that order, when they are at most ``limit``; otherwise the
    ``limit`` pairs of entities mentioned nearest each other (adjacent ones first), so the
    cost of a fragment naming thousands of entities stays O(limit + m).
    """
    chosen: list[tuple[int, int]] = []
    for gap in range(1, len(entities)):
        room = min(len(entities) - gap, limit - len(chosen))
        chosen.extend((first, first + gap) for first in range(room))
        if len(chosen) >= limit:
            break
    return [(entities[a], entities[b]) for a, b in sorted(chosen)]
