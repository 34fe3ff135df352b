"""Statements for the memory block: the stored relations of what is rendered, with the
changes and conflicts they take part in, and the corrections between fragments.

Which relations: those supported by a fragment about to be rendered (the ranked hits),
and those supported by a fragment of the chosen area whose subject and object entities
are both in the area too (a value object counts as inside). Structural predicates never
(:func:`.predicates.is_structural`), nor a predicate the table cannot read. Each is
rendered by :mod:`.predicates` from what was stored, never from the fragment's wording.

What each becomes (:class:`Statement`):

* a **fact**: one claim; relations that say the same thing (same subject, predicate and
  object: reaffirmations) are one statement citing each source (at most
  :data:`MAX_SOURCES`);
* a **change**: the relation a change replaced, after the one that replaced it (mutation
  kind ``change``), each cited. A relation that was replaced shows up as the change that
  replaced it, never as a fact; one stored as superseded with no change behind it (a
  fragment of an abandoned branch) is not shown;
* a **conflict**: every disputed side of one subject and predicate (at most
  :data:`MAX_SIDES`), each cited, none preferred.

A statement's rank is the best rank among the hits of the fragments it cites (fragments
of the area that are not hits come after every hit), so cutting to a budget drops the
statements of the weakest fragments first. Fragments that a statement or a correction
cites but that are not among the hits come back in :attr:`Evidence.extra`, to be
rendered with it: a citation always names a fragment the block shows.

Bounded work: at most ``4 * max_statements + 16`` relations are read, a conflict reads at
most :data:`MAX_SIDES` sides, and one question makes at most five small indexed queries.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from ..storage import Connection
from ..storage.tables import evidence as rows
from ..storage.tables.evidence import TURN_ORDER_LINK, RelationRow
from ..storage.tables.fragments import Hit, fetch_hits
from ..text.question import Question
from ..text.words import content_stems, opens_as_correction
from .inert import label
from .predicates import asked_with, phrase

__all__ = ["MAX_SIDES", "MAX_SOURCES", "Claim", "Evidence", "Statement", "gather"]

MAX_SOURCES = 3
"""Sources cited for one claim (a fact restated in ten fragments cites the best three)."""
MAX_SIDES = 4
"""Sides of one conflict shown."""
MAX_NAME_CHARS = 64
MAX_VALUE_CHARS = 80
_MAX_CORRECTIONS = 8
_MAX_HOPS = 3


@dataclass(frozen=True, slots=True)
class Claim:
    """One rendered relation (or several that say the same): its text and provenance."""

    text: str
    relation_ids: tuple[int, ...]
    fragment_ids: tuple[int, ...]
    subject: str = ""
    cues: frozenset[str] = frozenset()
    """The stems a question asks about the claim's predicate with in en/pt/es ("mora",
    "vive" for ``lives_in``: :func:`~.predicates.asked_with`)."""


@dataclass(frozen=True, slots=True)
class Statement:
    """``kind`` ``fact`` (one claim), ``change`` (the current claim, then what it
    superseded) or ``conflict`` (every side); ``rank``: see the module docstring."""

    kind: str
    claims: tuple[Claim, ...]
    rank: int

    @property
    def fragment_ids(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(f for c in self.claims for f in c.fragment_ids))

    @property
    def relation_ids(self) -> tuple[int, ...]:
        return tuple(r for c in self.claims for r in c.relation_ids)


@dataclass(frozen=True)
class Evidence:
    """Statements best first, ``(correcting, corrected)`` fragment pairs, and the cited
    fragments that are not among the hits."""

    statements: tuple[Statement, ...] = ()
    corrections: tuple[tuple[int, int], ...] = ()
    extra: Mapping[int, Hit] = field(default_factory=dict)


NO_EVIDENCE = Evidence()


def gather(
    conn: Connection,
    hits: Sequence[Hit],
    *,
    max_statements: int,
    area_fragments: Sequence[int] = (),
    area_entities: Collection[int] = (),
    question: Question | None = None,
    facts: str = "question",
) -> Evidence:
    """The statements and corrections of ``hits`` (best first) and of the area; with a
    ``question`` and ``facts="question"``, only the statements about it (see
    :func:`_about`)."""
    if max_statements <= 0 and not hits:
        return NO_EVIDENCE
    rank = {h.fragment_id: i for i, h in enumerate(hits)}
    for offset, fid in enumerate(area_fragments):
        rank.setdefault(fid, len(hits) + offset)
    statements: list[Statement] = []
    if max_statements > 0:
        found = rows.relations_of_fragments(conn, list(rank), limit=4 * max_statements + 16)
        inside = [r for r in found if _in_area(r, rank, len(hits), area_entities)]
        statements = _statements(conn, inside, rank)
        if question is not None and facts == "question":
            statements = [s for s in statements if _about(s, question.content)]
        statements = statements[:max_statements]
    links = rows.corrections(conn, [h.fragment_id for h in hits], limit=_MAX_CORRECTIONS)
    cited = {f for s in statements for f in s.fragment_ids} | {f for p in links for f in p[:2]}
    shown = {h.fragment_id: h for h in hits}
    extra = {h.fragment_id: h for h in fetch_hits(conn, sorted(cited - set(shown)))}
    known = {**extra, **shown}
    kept = tuple(s for s in (_available(s, known) for s in statements) if s is not None)
    pairs = tuple((a, b) for a, b, how in links if _explicit(a, b, how, known))
    used = {f for s in kept for f in s.fragment_ids} | {f for p in pairs for f in p}
    return Evidence(kept, pairs, {f: h for f, h in extra.items() if f in used})


def _explicit(src: int, dst: int, how: str, known: Mapping[int, Hit]) -> bool:
    """Whether a ``corrects`` link is shown: one that a change of a relation or a
    correction on the same topic made, or a turn-order one whose correcting turn opens as
    a correction ("No, ...", "Actually", "na verdade", "en realidad"). The turn-order
    heuristic also links a reply that merely contains "now" or "any more"; shown as
    "corrected by", that would mislead."""
    if src not in known or dst not in known:
        return False
    return not how.startswith(TURN_ORDER_LINK) or opens_as_correction(known[src].text)


def _about(statement: Statement, asked: frozenset[str]) -> bool:
    """Whether ``statement`` is about the question: a fact shares a content word with it
    beyond its subject's name ("Caroline lives in Boston" for "where does Caroline
    live?", not for "what does Caroline paint?"); a change or a conflict, any word,
    its subject's name included (a corrected fact about whom the question names is
    worth its line)."""
    claims = statement.claims
    if statement.kind != "fact":
        return any((content_stems(c.text) | c.cues) & asked for c in claims)
    return any(
        ((content_stems(c.text) | c.cues) - content_stems(c.subject)) & asked for c in claims
    )


@functools.lru_cache(maxsize=256)
def _cues(predicate: str) -> frozenset[str]:
    return frozenset(content_stems(" ".join(asked_with(predicate))))


def _in_area(
    row: RelationRow, rank: Mapping[int, int], n_hits: int, entities: Collection[int]
) -> bool:
    """A hit's relation always; an area fragment's only when both ends are in the area."""
    if rank[row.fragment_id] < n_hits:
        return True
    return row.subject_id in entities and (row.object_id is None or row.object_id in entities)


def _statements(
    conn: Connection, found: Sequence[RelationRow], rank: Mapping[int, int]
) -> list[Statement]:
    """Facts, changes and conflicts of ``found`` (see the module docstring), by rank."""
    readable = [r for r in found if phrase(r.predicate) is not None]
    replaced = rows.superseding(conn, [r.id for r in readable if r.status == "superseded"])
    changes: dict[int, int] = {}  # the newer relation -> the one it replaced
    conflicts: dict[tuple[int, str], None] = {}
    facts: dict[tuple[int, str, str], list[RelationRow]] = {}
    for row in readable:
        if row.status == "superseded":
            if row.id in replaced:
                changes.setdefault(replaced[row.id], row.id)
        elif row.status == "disputed":
            conflicts[(row.subject_id, row.predicate)] = None
        elif row.kind == "change" and row.other is not None:
            changes.setdefault(row.id, row.other)
        else:
            facts.setdefault((row.subject_id, row.predicate, _key(row)), []).append(row)
    by_id = {r.id: r for r in readable}
    missing = [i for pair in changes.items() for i in pair if i not in by_id]
    by_id.update({r.id: r for r in rows.relations_by_id(conn, missing)})
    changes = _latest(conn, changes, by_id)
    out: list[Statement] = []
    for new, old in changes.items():
        sides = [by_id[i] for i in (new, old) if i in by_id]
        if not sides or sides[0].id != new or sides[0].status == "superseded":
            continue  # the current side is gone, or still replaced past the hops
        if len(sides) == 2 and phrase(sides[1].predicate) is not None:
            out.append(_statement("change", [[sides[0]], [sides[1]]], rank))
        else:
            out.append(_statement("fact", [[sides[0]]], rank))
    for subject, predicate in conflicts:
        sides = rows.disputed_with(conn, subject, predicate, limit=MAX_SIDES)
        if len(sides) >= 2:
            out.append(_statement("conflict", [[s] for s in sides], rank))
        elif sides:
            out.append(_statement("fact", [sides], rank))
    out.extend(_statement("fact", [group], rank) for group in facts.values())
    out.sort(key=lambda s: (s.rank, s.kind == "fact"))
    seen: set[int] = set()
    distinct = []
    for statement in out:  # a relation is shown once (a disputed side of a change)
        if seen.isdisjoint(statement.relation_ids):
            distinct.append(statement)
            seen.update(statement.relation_ids)
    return _once(distinct)


def _once(statements: Sequence[Statement]) -> list[Statement]:
    """``statements`` with each claim shown once: a fact that reads as a claim of a
    change or a conflict (the current side of a change stated again: ``Changed: Ana lives
    in Porto [3]…`` then ``Ana lives in Porto [4]``), or as an earlier fact (two entities
    that both read "Beatriz"), is folded into it, which then cites the sources of both
    (at most :data:`MAX_SOURCES`) and ranks as the better of the two; a change or
    conflict that repeats an earlier one whole is dropped."""
    out: list[Statement] = []
    where: dict[str, tuple[int, int]] = {}  # claim text -> (statement, side) in ``out``
    changes: set[tuple[str, ...]] = set()
    for statement in sorted(statements, key=lambda s: s.kind == "fact"):  # stable
        texts = [c.text.casefold() for c in statement.claims]
        if statement.kind == "fact" and texts[0] in where:
            at, side = where[texts[0]]
            out[at] = _folded(out[at], side, statement)
        elif statement.kind != "fact" and tuple(texts) in changes:
            continue
        else:
            changes.add(tuple(texts))
            for side, text in enumerate(texts):
                where.setdefault(text, (len(out), side))
            out.append(statement)
    return sorted(out, key=lambda s: (s.rank, s.kind == "fact"))


def _folded(statement: Statement, side: int, fact: Statement) -> Statement:
    """``statement`` whose claim ``side`` also cites ``fact``'s relations and sources."""
    kept, claim = statement.claims[side], fact.claims[0]
    merged = Claim(
        kept.text,
        tuple(dict.fromkeys((*kept.relation_ids, *claim.relation_ids))),
        tuple(dict.fromkeys((*kept.fragment_ids, *claim.fragment_ids)))[:MAX_SOURCES],
        kept.subject,
        kept.cues,
    )
    claims = (*statement.claims[:side], merged, *statement.claims[side + 1 :])
    return Statement(statement.kind, claims, min(statement.rank, fact.rank))


def _latest(
    conn: Connection, changes: Mapping[int, int], by_id: dict[int, RelationRow]
) -> dict[int, int]:
    """``changes`` with each replacing relation that was itself replaced since swapped
    for the newest one (at most ``_MAX_HOPS`` steps along a chain of changes): a change
    shows the current value and the one it superseded, never two superseded ones."""
    out: dict[int, int] = {}
    for new, old in changes.items():
        for _ in range(_MAX_HOPS):
            row = by_id.get(new)
            if row is None or row.status != "superseded":
                break
            newer = rows.superseding(conn, [new]).get(new)
            if newer is None:
                break
            new, old = newer, new
            by_id.update({r.id: r for r in rows.relations_by_id(conn, [new])})
        out.setdefault(new, old)
    return out


def _key(row: RelationRow) -> str:
    return f"#{row.object_id}" if row.object_id is not None else row.object.casefold()


def _statement(
    kind: str, sides: Sequence[Sequence[RelationRow]], rank: Mapping[int, int]
) -> Statement:
    """One statement; each side's sources best-ranked first (unranked ones last)."""
    claims = []
    for side in sides:
        ordered = sorted(side, key=lambda r: (rank.get(r.fragment_id, len(rank)), r.id))
        sources = tuple(dict.fromkeys(r.fragment_id for r in ordered))[:MAX_SOURCES]
        text = _text(ordered[0])
        first = ordered[0]
        ids = tuple(r.id for r in ordered)
        claims.append(Claim(text, ids, sources, first.subject, _cues(first.predicate)))
    best = min(rank.get(f, len(rank)) for c in claims for f in c.fragment_ids)
    return Statement(kind, tuple(claims), best)


def _text(row: RelationRow) -> str:
    """The claim as the predicate table reads it, names and values made inert."""
    shape = phrase(row.predicate)
    assert shape is not None, "only readable predicates become claims"
    subject = label(row.subject, MAX_NAME_CHARS) or "someone"
    obj = label(row.object, MAX_VALUE_CHARS) or "(empty)"
    return shape.render(subject, obj)


def _available(statement: Statement, available: Mapping[int, Hit]) -> Statement | None:
    """``statement`` citing only fragments the block can show; None when a side would
    be left without a source (a change without what it replaced is no change)."""
    claims = []
    for claim in statement.claims:
        sources = tuple(f for f in claim.fragment_ids if f in available)
        if not sources:
            return None
        claims.append(
            Claim(claim.text, claim.relation_ids, sources, claim.subject, claim.cues)
        )
    return Statement(statement.kind, tuple(claims), statement.rank)
