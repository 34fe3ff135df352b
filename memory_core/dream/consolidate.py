"""A cycle's writing: what it does to memory once its candidates are judged.

All of it runs inside the cycle's one transaction (:mod:`.cycle`); each step reports its
decisions, with reasons and sources, to a :class:`Decisions`:

- **merge entities** the judge found to be one (a chain a~b, b~c merges all three): the
  survivor is a speaker if one is, else the most mentioned; every alias, mention and
  relation of the merged one moves to it, and the merge is recorded (``merges``, with
  the merged entity's names and their sources);
- **review the survivors' relations**: a one-valued predicate ("lives in") that now holds
  two live values is a *change* when the newer one's fragment reads as a correction (the
  older ones become superseded), else a *conflict* (all become disputed): never silently
  one truth;
- **merge or link contexts** (links are graph edges between topics);
- **strengthen** every claim restated by another source since the last cycle: each
  group of relations with the same subject, predicate and object gets
  ``strength = 1 - prod(1 - confidence)`` over its live sources (the graph weighs its
  edges by it; the rows stay separate, one per source);
- **reinforce** co-occurrences seen again (their pair's ``last_cycle`` moves to this
  cycle) — the edges of the others decay with every cycle they are not seen, as the
  graph reads them (:func:`relation_weight`), without a write per edge;
- **report** the changes and conflicts formation recorded since the last cycle, with
  both sides' sources.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..formation.stages.relations import CORRECTION, is_functional
from ..history.views import DiffSource
from ..storage import Connection
from ..storage.tables import dream as rows
from ..storage.tables import fragments as fragment_rows
from ..storage.tables.dream import EntityProfile, NewRelation
from ..text.words import opens_as_correction
from .config import DreamConfig
from .judges import ContextPair, EntityPair, Verdict
from .report import Claim, Decision, DecisionKind, naming

__all__ = ["Consolidation", "Decisions"]

_COOCCURS = "co_occurs_with"
_SOURCES = 4


@dataclass
class Decisions:
    """A cycle's decisions: all counted, the first ``limit`` of each kind kept."""

    limit: int
    kept: list[Decision] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)

    def add(
        self,
        kind: DecisionKind,
        reason: str,
        subjects: Sequence[str],
        ids: Sequence[int],
        sources: Sequence[DiffSource],
        by: str = "cycle",
        claims: Sequence[Claim] = (),
    ) -> None:
        count = self.totals[kind] = self.totals.get(kind, 0) + 1
        if count <= self.limit:
            self.kept.append(
                Decision(
                    kind=kind,
                    reason=reason,
                    subjects=list(subjects),
                    ids=list(ids),
                    sources=list(sources),
                    by=by,
                    claims=list(claims),
                )
            )


class Consolidation:
    """The writes of one cycle (``cycle`` is its number) on ``conn``, in its transaction."""

    def __init__(
        self, conn: Connection, config: DreamConfig, cycle: int, now: float, decisions: Decisions
    ) -> None:
        self._conn, self._config, self._cycle, self._now = conn, config, cycle, now
        self.decisions = decisions
        self._survivor: dict[int, int] = {}
        self.merged_into: dict[int, set[int]] = {}
        self.dropped_pairs = 0
        """Co-occurrence groups merges dropped (their survivors' are counted again)."""

    # -- entities -----------------------------------------------------------------------

    def entities(
        self, pairs: Sequence[EntityPair], verdicts: Sequence[Verdict], by: str
    ) -> None:
        for pair, verdict in zip(pairs, verdicts, strict=True):
            names = [pair.a.name, pair.b.name]
            ids = [pair.a.id, pair.b.id]
            sources = self.sources(_examples(pair.a, pair.b))
            if verdict.action != "merge":
                self.decisions.add("keep_entities", verdict.reason, names, ids, sources, by)
                continue
            survivor, merged = self._roles(pair.a, pair.b)
            if survivor is None or merged is None:
                continue  # already one (a chain merged them)
            if survivor.is_speaker and merged.is_speaker and not (
                pair.a.is_speaker and pair.b.is_speaker
            ):  # the verdict rests on a third person who has since joined as a speaker
                reason = f"{verdict.reason}; but both speak now, each as themself"
                self.decisions.add("keep_entities", reason, names, ids, sources, by)
                continue
            self.dropped_pairs += rows.merge_entity(self._conn, survivor.id, merged.id)
            rows.insert_merge(
                self._conn,
                kind="entity",
                survivor=survivor.id,
                merged=merged.id,
                merged_name=merged.name,
                detail={
                    "label": merged.label,
                    "mentions": merged.mentions,
                    "aliases": [
                        {"alias": a, "source": s, "fragment_id": f} for a, s, f, _ in merged.aliases
                    ],
                },
                reason=verdict.reason,
                cycle=self._cycle,
                now=self._now,
            )
            self._survivor[merged.id] = survivor.id
            self.merged_into.setdefault(survivor.id, set()).add(merged.id)
            self.decisions.add(
                "merge_entities",
                f"{merged.name} (#{merged.id}) merged into {survivor.name} (#{survivor.id}):"
                f" {verdict.reason}",
                [survivor.name, merged.name],
                [survivor.id, merged.id],
                sources,
                by,
            )

    def resolve(self, entity_id: int | None) -> int | None:
        """The entity ``entity_id`` is now (after this cycle's merges)."""
        while entity_id is not None and entity_id in self._survivor:
            entity_id = self._survivor[entity_id]
        return entity_id

    def _roles(
        self, a: EntityProfile, b: EntityProfile
    ) -> tuple[EntityProfile | None, EntityProfile | None]:
        ra, rb = self.resolve(a.id), self.resolve(b.id)
        if ra is None or rb is None or ra == rb:
            return None, None
        # both as they are now, not as the cycle read them: formation goes on while the
        # judge decides, and a speaker who joined meanwhile under one of the names (an
        # entity of that name becomes the speaker) must survive, not be merged into the
        # other and leave it a speaker under the other's name
        fresh = rows.entity_profiles(self._conn, {ra, rb})
        if ra not in fresh or rb not in fresh:
            return None, None  # a survivor vanished meanwhile
        a, b = fresh[ra], fresh[rb]
        ranked = sorted((a, b), key=lambda p: (not p.is_speaker, -p.mentions, p.id))
        return ranked[0], ranked[1]

    def review(self, survivors: Iterable[int]) -> None:
        """Changes and conflicts that merging brought together (see the module docstring)."""
        for entity in sorted(survivors):
            by_predicate: dict[str, list[NewRelation]] = {}
            for relation in rows.relations_of_entity(self._conn, entity):
                if relation.status == "active" and is_functional(relation.predicate):
                    by_predicate.setdefault(relation.predicate, []).append(relation)
            for relations in by_predicate.values():
                self._settle(relations)

    def _settle(self, relations: Sequence[NewRelation]) -> None:
        values = {_object_key(r) for r in relations}
        if len(values) < 2:
            return
        newest = max(relations, key=lambda r: r.id)
        others = [r for r in relations if _object_key(r) != _object_key(newest)]
        previous = max(r.id for r in others)
        head = fragment_rows.head(self._conn, newest.fragment_id, 400)
        text = head[1] if head else ""
        statements = [self._statement(r) for r in (newest, *others)]
        sources = self.sources(r.fragment_id for r in (newest, *others))
        ids = [newest.id, *(r.id for r in others)]
        claims = [self._claim(r) for r in (newest, *others)]
        older = next(c for c in claims if c.relation == previous)
        if opens_as_correction(text) or CORRECTION.search(text):
            rows.set_status(self._conn, [r.id for r in others], "superseded")
            reason = (
                f"cycle {self._cycle}: merged entities; the newer claim reads as a correction:"
                f" {naming('corrects', claims[0], older)}"
            )
            rows.update_mutation(self._conn, newest.id, "change", previous, reason)
            self.decisions.add("change", reason, statements, ids, sources, claims=claims)
        else:
            rows.set_status(self._conn, ids, "disputed")
            reason = (
                f"cycle {self._cycle}: merged entities hold {len(values)} values of"
                f" {newest.predicate}: {naming('contradicts', claims[0], older, arrow='vs')};"
                " left unresolved"
            )
            rows.update_mutation(self._conn, newest.id, "conflict", previous, reason)
            self.decisions.add("conflict", reason, statements, ids, sources, claims=claims)

    # -- contexts -------------------------------------------------------------------------

    def contexts(
        self, pairs: Sequence[ContextPair], verdicts: Sequence[Verdict], by: str
    ) -> None:
        gone: dict[int, int] = {}
        for pair, verdict in zip(pairs, verdicts, strict=True):
            a, b = _follow(gone, pair.a.id), _follow(gone, pair.b.id)
            labels = [pair.a.label, pair.b.label]
            sources = self.sources(f for f, _ in (*pair.a.examples, *pair.b.examples))
            if verdict.action == "keep" or a == b:
                self.decisions.add("keep_contexts", verdict.reason, labels, [a, b], sources, by)
            elif verdict.action == "link":
                rows.insert_context_link(
                    self._conn, a, b, pair.similarity, verdict.reason, self._cycle, self._now
                )
                self.decisions.add("link_contexts", verdict.reason, labels, [a, b], sources, by)
            else:
                survivor, merged = (a, b) if pair.a.size >= pair.b.size else (b, a)
                rows.merge_context(self._conn, survivor, merged)
                name = pair.b.label if merged == pair.b.id else pair.a.label
                rows.insert_merge(
                    self._conn,
                    kind="context",
                    survivor=survivor,
                    merged=merged,
                    merged_name=name,
                    detail={"conversations": [*pair.a.conversations, *pair.b.conversations]},
                    reason=verdict.reason,
                    cycle=self._cycle,
                    now=self._now,
                )
                gone[merged] = survivor
                self.decisions.add("merge_contexts", verdict.reason, labels, [survivor, merged],
                                   sources, by)  # fmt: skip

    # -- relations ------------------------------------------------------------------------

    def strengthen(self, relations: Sequence[NewRelation], survivors: Iterable[int]) -> None:
        """Groups of the new claims, and every claim of a merge survivor."""
        keys: dict[tuple[int, str, int | None, str | None], None] = {}
        for relation in relations:
            if relation.predicate != _COOCCURS:
                keys[self._key(relation)] = None
        for entity in survivors:
            for relation in rows.relations_of_entity(self._conn, entity):
                keys[self._key(relation)] = None
        for subject, predicate, obj, value in keys:
            self._group(subject, predicate, obj, value)

    def _key(self, relation: NewRelation) -> tuple[int, str, int | None, str | None]:
        subject = self.resolve(relation.subject_id)
        assert subject is not None
        value = None if relation.object_value is None else relation.object_value.casefold()
        return subject, relation.predicate, self.resolve(relation.object_id), value

    def _group(self, subject: int, predicate: str, obj: int | None, value: str | None) -> None:
        members = [
            m
            for m in rows.group_members(self._conn, subject, predicate, obj, value)
            if m[3] != "superseded"
        ]
        if not members:
            return
        by_fragment: dict[int, float] = {}
        for _, confidence, fragment, _ in members:
            by_fragment[fragment] = max(confidence, by_fragment.get(fragment, 0.0))
        doubt = 1.0
        for confidence in by_fragment.values():
            doubt *= 1.0 - min(max(confidence, 0.0), 1.0)
        strength = min(self._config.max_strength, 1.0 - doubt)
        key = f"e:{obj}" if obj is not None else f"v:{value}"
        rows.upsert_group(
            self._conn, subject, predicate, key,
            support=len(by_fragment), strength=round(strength, 6), cycle=self._cycle,
        )  # fmt: skip
        if len(by_fragment) > 1:
            statement = self._statement_of(subject, predicate, obj, value)
            self.decisions.add(
                "strengthen",
                f"stated by {len(by_fragment)} sources: strength {strength:.3f}",
                [statement],
                [m[0] for m in members],
                self.sources(by_fragment),
            )

    def reinforce(
        self, relations: Sequence[NewRelation], survivors: Iterable[int], total: int
    ) -> int:
        """Co-occurrence pairs seen since the last cycle; returns the new pair total."""
        total -= self.dropped_pairs
        seen: set[tuple[int, int]] = set()
        for entity in survivors:  # their groups went with the merge: counted again, seen now
            created, regrouped = rows.regroup_pairs(self._conn, entity, self._cycle)
            total, seen = total + created, seen | regrouped
        pairs: dict[tuple[int, int], int] = {}
        for relation in relations:
            if relation.predicate == _COOCCURS and relation.object_id is not None:
                a, b = self.resolve(relation.subject_id), self.resolve(relation.object_id)
                if a is not None and b is not None and a != b:
                    pairs[(a, b)] = pairs.get((a, b), 0) + 1
        new = rows.reinforce_pairs(self._conn, pairs, self._cycle)
        total += new
        if pairs:
            self.decisions.add(
                "reinforce",
                f"{len(pairs)} co-occurrence pairs seen since the last cycle ({new} new):"
                " their edges weigh their confidence again",
                [], [], [],
            )  # fmt: skip
        faded = max(0, total - len(seen | set(pairs)))
        if faded:
            self.decisions.add(
                "decay",
                f"{faded} co-occurrence pairs not seen this cycle: each cycle unseen multiplies"
                f" their edges by {self._config.cooccurrence_decay:g} (at least"
                f" {self._config.cooccurrence_floor:g} of their confidence)",
                [], [], [],
            )  # fmt: skip
        return total

    def report_mutations(self, mutations: Sequence[rows.MutationRow]) -> None:
        """Changes and conflicts formation recorded since the last cycle."""
        for relation_id, kind, other, reason in mutations:
            ids = [relation_id] if other is None else [relation_id, other]
            found = [rows.relation_row(self._conn, i) for i in ids]
            present = [r for r in found if r is not None]
            claims = [self._claim(r) for r in present]
            self.decisions.add(
                "change" if kind == "change" else "conflict",
                f"formation: {_named(kind, reason, claims)}",
                [self._statement(r) for r in present],
                ids,
                self.sources(r.fragment_id for r in present),
                claims=claims,
            )

    # -- helpers ---------------------------------------------------------------------------

    def _statement(self, relation: NewRelation) -> str:
        return self._statement_of(
            relation.subject_id, relation.predicate, relation.object_id, relation.object_value
        )

    def _claim(self, relation: NewRelation) -> Claim:
        obj_id = relation.object_id
        names = rows.entity_names(self._conn, [relation.subject_id, *([obj_id] if obj_id else [])])
        subject = names.get(relation.subject_id, f"#{relation.subject_id}")
        value = relation.object_value or ""
        obj = names.get(obj_id, f"#{obj_id}") if obj_id is not None else value
        predicate = relation.predicate.replace("_", " ")
        return Claim(
            relation=relation.id,
            fragment=relation.fragment_id,
            subject=subject,
            predicate=relation.predicate,
            object=obj,
            text=f"{subject} {predicate} {obj}",
        )

    def _statement_of(
        self, subject: int, predicate: str, obj: int | None, value: str | None
    ) -> str:
        names = rows.entity_names(self._conn, [subject, *([obj] if obj is not None else [])])
        target = names.get(obj, f"#{obj}") if obj is not None else repr(value)
        return f"{names.get(subject, f'#{subject}')} {predicate} {target}"

    def sources(self, fragment_ids: Iterable[int]) -> list[DiffSource]:
        found = []
        for fid in list(dict.fromkeys(fragment_ids))[:_SOURCES]:
            label = fragment_rows.describe(self._conn, fid)
            if label is not None:
                found.append(
                    DiffSource(
                        fragment_id=fid,
                        conversation_id=label.conversation_id,
                        speaker=label.speaker,
                        text=str(label.text)[:200],
                    )
                )
        return found


def _named(kind: str, reason: str, claims: Sequence[Claim]) -> str:
    """Formation's reason for a change or conflict with its claims quoted (the newer one
    first in ``claims``); the stored reason as is when a side is gone."""
    if len(claims) < 2:
        return reason
    if kind == "change":
        verb = "reverses" if "reverses" in reason else "corrects"
        return naming(verb, claims[0], claims[1])
    verb = "denies" if reason.startswith("denies") else "contradicts"
    return f"{naming(verb, claims[0], claims[1], arrow='vs')}; left unresolved"


def _examples(a: EntityProfile, b: EntityProfile) -> list[int]:
    declared = [f for *_, f, _ in (*a.aliases, *b.aliases) if f is not None]
    return [*declared, *(f for f, _ in a.examples), *(f for f, _ in b.examples)]


def _follow(gone: Mapping[int, int], context: int) -> int:
    while context in gone:
        context = gone[context]
    return context


def _object_key(relation: NewRelation) -> str:
    if relation.object_id is not None:
        return f"e:{relation.object_id}"
    return f"v:{(relation.object_value or '').casefold()}"
