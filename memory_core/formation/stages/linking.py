"""Mention linking: which entity a name denotes.

Candidates come from aliases (normalised: case, diacritics, articles and possessives
removed), from fuzzy spelling (difflib ratio >= ``fuzzy``) and, for weaker spellings
(a nickname prefix such as "Mel" for "Melanie", ratio >= 0.6), only when the mention's
context agrees with the entity's (cosine >= ``context``).

Homonyms: a name that matches an entity's alias still founds a new entity when the
entity's own contexts agree with each other (it is about one thing) and the mention's
context disagrees with them (see :class:`..config.LinkingConfig`). Names of speakers
(entities that have spoken in any conversation) are never split.

Names a speaker is addressed by ("Hey Kate!" to the speaker labelled A: see
:mod:`.addressing`) are kept apart from the other aliases (:attr:`EntityCache.addressed`):
the other speaker's vocatives link to that speaker, and so does the name in the other
speaker's reply to them ("Love you Mel"), but a mention of the name anywhere else (the
speaker's own turn: "my neighbour Kate") is about somebody else, so :meth:`EntityCache
.link` never links to the speaker by that name. A question or an answer restating
memory (``protected``) does: "What does Kate do?" asks about the speaker.

Context vectors are fragment embeddings with the name's own direction projected out, so
two sentences are not judged alike merely because they contain the same name.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...text.kinship import by_predicate
from ...text.names import NameIndex
from ...text.words import normalise_name
from ..config import LinkingConfig
from ..interfaces import Mention, RelationCandidate, Vectors
from .relations import SPEAKER

__all__ = ["EntityCache", "EntityState", "LinkDecision", "context_vector", "normalise_name"]

_WEAK_FUZZY = 0.6
_OBJECT_TYPES = {
    "lives_in": "LOC",
    "not_lives_in": "LOC",
    "born_in": "LOC",
    "visited": "LOC",
    "works_at": "ORG",
    "not_works_at": "ORG",
}
_PERSON_SUBJECTS = frozenset({"job", "age", "named", "born_in", "works_at", "not_works_at"})


def context_vector(fragment: Vectors, name: Vectors) -> Vectors:
    """``fragment`` without its component along ``name``, renormalised."""
    rest = fragment - float(fragment @ name) * name
    norm = float(np.linalg.norm(rest))
    return (rest / norm).astype(np.float32) if norm > 1e-6 else fragment


@dataclass
class EntityState:
    """An entity as linking sees it; ``vector_sum`` sums the context vectors of the
    fragments that mention it (one per fragment, ``vectors`` of them)."""

    id: int
    name: str
    label: str
    vector_sum: Vectors | None
    vectors: int
    mentions: int
    dirty: bool = False
    last_fragment: int = -1

    def similarity(self, vector: Vectors) -> float | None:
        if self.vector_sum is None or self.vectors == 0:
            return None
        norm = float(np.linalg.norm(self.vector_sum))
        return float(vector @ self.vector_sum) / norm if norm > 1e-9 else None

    @property
    def cohesion(self) -> float:
        """Mean resultant length of the context vectors: 1 when they all agree."""
        if self.vector_sum is None or self.vectors == 0:
            return 0.0
        return float(np.linalg.norm(self.vector_sum)) / self.vectors

    def absorb(self, vector: Vectors | None, fragment_id: int) -> None:
        """Count a mention; its context joins the entity's once per fragment."""
        self.mentions += 1
        self.dirty = True
        if fragment_id == self.last_fragment:
            return
        self.last_fragment = fragment_id
        if vector is not None:
            self.vector_sum = vector.copy() if self.vector_sum is None else self.vector_sum + vector
            self.vectors += 1


@dataclass(frozen=True)
class LinkDecision:
    """The entity a name links to (None: found a new one), its score and why."""

    entity_id: int | None
    score: float
    reason: str


@dataclass
class EntityCache:
    """Entities and their aliases in memory, for linking without a query per mention."""

    entities: dict[int, EntityState] = field(default_factory=dict)
    aliases: dict[str, set[int]] = field(default_factory=dict)
    _buckets: dict[str, set[str]] = field(default_factory=dict)
    speakers: set[int] = field(default_factory=set)
    addressed: dict[str, set[int]] = field(default_factory=dict)
    """Normalised name -> the speakers the other speaker addresses by it."""
    _index: NameIndex = field(default_factory=NameIndex)

    def add_alias(self, entity_id: int, alias: str) -> bool:
        """Record an alias; True if it is new for that entity."""
        key = normalise_name(alias)
        if not key:
            return False
        owners = self.aliases.setdefault(key, set())
        if entity_id in owners:
            return False
        owners.add(entity_id)
        self._buckets.setdefault(key[:2], set()).add(key)
        entity = self.entities.get(entity_id)
        thing = entity is not None and entity.label == "MISC" and entity_id not in self.speakers
        self._index.add([alias], capitalised=thing and " " not in key)
        return True

    def add_addressed(self, entity_id: int, name: str) -> bool:
        """Record that ``name`` addresses the speaker ``entity_id``; True if new."""
        key = normalise_name(name)
        if not key:
            return False
        owners = self.addressed.setdefault(key, set())
        if entity_id in owners:
            return False
        owners.add(entity_id)
        return True

    def owners(self, name: str) -> set[int]:
        """Every entity ``name`` names: by an alias, or as the name a speaker is
        addressed by."""
        key = normalise_name(name)
        return self.aliases.get(key, set()) | self.addressed.get(key, set())

    def addressed_only(self, entity_id: int, name: str) -> bool:
        """Whether ``name`` names nobody but the speaker ``entity_id``, as a name they are
        addressed by."""
        key = normalise_name(name)
        return self.addressed.get(key) == {entity_id} and not self.aliases.get(key)

    def speaker_named(self, name: str) -> int | None:
        """The one speaker entity with the alias ``name``, or None."""
        found = self.aliases.get(normalise_name(name), set()) & self.speakers
        return next(iter(found)) if len(found) == 1 else None

    def known_in(self, text: str) -> list[str]:
        """Known aliases that occur in ``text`` (whole words, any case; a one-word name of
        a thing only where capitalised, so "Fantasy" the entity is not every "fantasy")."""
        return self._index.mentioned(text)

    def display_names(self) -> list[str]:
        """One display form per known alias."""
        return self._index.names()

    @staticmethod
    def label_for(name: str, label: str, claims: Sequence[RelationCandidate]) -> str:
        """The type to found ``name``'s entity with: NER's when it tells one, else what
        a claim of the same fragment says of it (the object of ``lives_in``, ``born_in``
        or ``visited`` is a place, of ``works_at`` an organisation, of ``has_sister`` a
        person, of ``has_dog`` a thing; the subject of ``job``, ``age``, ``works_at`` or
        ``has_<relation>`` a person)."""
        if label != "MISC":
            return label
        key = name.casefold()
        for claim in claims:
            if claim.obj_is_entity and claim.obj.casefold() == key:
                relation = by_predicate(claim.predicate)
                if claim.predicate in _OBJECT_TYPES:
                    return _OBJECT_TYPES[claim.predicate]
                if relation is not None:
                    return "PER" if relation.person else "MISC"
            person = claim.predicate in _PERSON_SUBJECTS or claim.predicate.startswith("has_")
            if person and claim.subject.casefold() == key:
                return "PER"
        return "MISC"

    @staticmethod
    def cued_relations(
        mentions: Sequence[Mention], entity_ids: Sequence[int], claims: Sequence[RelationCandidate]
    ) -> list[tuple[str, int]]:
        """``(has_<relation>, entity)`` for each mention NER read as the speaker's
        relation ("a minha irmã Marta") that no claim of the fragment already states."""
        stated = {
            c.obj.casefold()
            for c in claims
            if c.subject == SPEAKER and c.predicate.startswith("has_")
        }
        found: dict[tuple[str, int], None] = {}
        for mention, entity_id in zip(mentions, entity_ids, strict=True):
            if mention.relation and mention.surface.casefold() not in stated:
                found.setdefault((f"has_{mention.relation}", entity_id), None)
        return list(found)

    def link(
        self, name: str, vector: Vectors | None, config: LinkingConfig, *, protected: bool
    ) -> LinkDecision:
        """Decide which entity ``name`` (with context ``vector``) denotes."""
        key = normalise_name(name)
        exact = self.aliases.get(key, set())
        if not exact and protected:
            exact = self.addressed.get(key, set())
        if exact:
            return self._choose_exact(key, exact, vector, config, protected)
        strong, weak = self._spelled_like(key, config)
        if strong:
            best = max(strong, key=lambda e: strong[e] + (self._sim(e, vector) or 0.0))
            return LinkDecision(best, strong[best], f"fuzzy alias (ratio {strong[best]:.2f})")
        scored = [(self._sim(e, vector), e) for e in weak]
        agreeing = [(s, e) for s, e in scored if s is not None and s >= config.context]
        if agreeing:
            sim, best = max(agreeing)
            return LinkDecision(best, sim, f"similar spelling and context ({sim:.2f})")
        return LinkDecision(None, 0.0, "no candidate: new entity")

    def _choose_exact(
        self,
        key: str,
        owners: set[int],
        vector: Vectors | None,
        config: LinkingConfig,
        protected: bool,
    ) -> LinkDecision:
        sims = {e: self._sim(e, vector) for e in owners}
        best = max(owners, key=lambda e: (sims[e] if sims[e] is not None else -2.0, -e))
        sim = sims[best]
        if protected or vector is None or sim is None or owners & self.speakers:
            return LinkDecision(best, 1.0, f"alias '{key}'")
        if all(self._disagrees(e, sims[e], config) for e in owners):
            return LinkDecision(
                None,
                sim,
                f"homonym of entity {best}: context similarity {sim:.2f} "
                f"< {config.homonym} with a cohesive entity",
            )
        return LinkDecision(best, 1.0, f"alias '{key}' (context {sim:.2f})")

    def _disagrees(self, entity_id: int, sim: float | None, config: LinkingConfig) -> bool:
        entity = self.entities[entity_id]
        return (
            sim is not None
            and sim < config.homonym
            and entity.vectors >= config.homonym_min_mentions
            and entity.cohesion >= config.homonym_cohesion
        )

    def _spelled_like(self, key: str, config: LinkingConfig) -> tuple[dict[int, float], set[int]]:
        strong: dict[int, float] = {}
        weak: set[int] = set()
        floor = min(config.fuzzy, _WEAK_FUZZY)
        for alias in self._buckets.get(key[:2], ()):
            ratio = _ratio(key, alias, floor)
            nickname = len(key) >= 3 and " " not in alias and alias.startswith(key)
            for owner in self.aliases[alias]:
                if ratio >= config.fuzzy:
                    strong[owner] = max(ratio, strong.get(owner, 0.0))
                elif nickname or ratio >= _WEAK_FUZZY:
                    weak.add(owner)
        return strong, weak - set(strong)

    def _sim(self, entity_id: int, vector: Vectors | None) -> float | None:
        return None if vector is None else self.entities[entity_id].similarity(vector)


def _ratio(key: str, alias: str, floor: float) -> float:
    """difflib's ratio of the two names, or 0.0 when its cheap upper bounds are below
    ``floor`` (the full ratio is quadratic in the names' length in the worst case)."""
    matcher = difflib.SequenceMatcher(None, key, alias)
    if matcher.real_quick_ratio() < floor or matcher.quick_ratio() < floor:
        return 0.0
    return matcher.ratio()
