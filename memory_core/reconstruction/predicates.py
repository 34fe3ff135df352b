"""How a stored predicate reads in the memory block: a fixed table, never a paraphrase.

A relation is shown to the model as a statement, "Caroline lives in Boston", made from
its subject, predicate and object by this table alone. The table only ever spells out
what the predicate says: ``relates_to`` is "relates to", never "causes"; ``depends_on``
is "depends on"; a negated claim ``not_likes`` is "does not like". A predicate the table
does not list (an LLM extractor may store any snake_case verb phrase) is written as its
own words ("works_for" -> "works for"), which says exactly what was stored.

Structural predicates (co-occurrence, membership, word use, turn order: how the graph is
wired, not something anyone said) are never statements: :func:`is_structural`.

A predicate that is not plain snake_case of at most :data:`MAX_PREDICATE_CHARS`
characters (stored text can be anything) is not rendered at all: :func:`phrase` returns
None, and the relation stays out of the block rather than being shown garbled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..text.kinship import by_predicate

__all__ = ["MAX_PREDICATE_CHARS", "Phrase", "asked_with", "is_structural", "phrase"]

MAX_PREDICATE_CHARS = 48
_SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")

_STRUCTURAL = frozenset(
    {
        "co_occurs_with", "cooccurs_with", "co_occurrence", "cooccurrence", "mentions",
        "mentioned_with", "member_of", "in_context", "part_of_context", "uses_term",
        "uses_word", "next", "answers", "in_session", "at_time", "same_context",
    }
)  # fmt: skip
_STRUCTURAL_PREFIXES = ("co_occur", "cooccur")


@dataclass(frozen=True, slots=True)
class Phrase:
    """A statement's shape: ``{subject}{middle}{object}``, or for a possessive phrase
    ``{subject}'s {middle}: {object}`` (``possessive``)."""

    middle: str
    possessive: bool = False

    def render(self, subject: str, obj: str) -> str:
        if self.possessive:
            return f"{subject}'s {self.middle}: {obj}"
        return f"{subject} {self.middle} {obj}"


_TABLE: dict[str, Phrase] = {
    "lives_in": Phrase("lives in"),
    "works_at": Phrase("works at"),
    "works_for": Phrase("works for"),
    "born_in": Phrase("was born in"),
    "visited": Phrase("visited"),
    "likes": Phrase("likes"),
    "owns": Phrase("owns"),
    "uses": Phrase("uses"),
    "named": Phrase("is called"),
    "alias": Phrase("is also called"),
    "age": Phrase("age", possessive=True),
    "job": Phrase("job", possessive=True),
    "relates_to": Phrase("relates to"),
    "depends_on": Phrase("depends on"),
    "is_a": Phrase("is a"),
    "not_lives_in": Phrase("does not live in"),
    "not_works_at": Phrase("does not work at"),
    "not_likes": Phrase("does not like"),
    "not_owns": Phrase("does not own"),
    "not_uses": Phrase("does not use"),
}
_PREFIXES = (("has_", "{}"), ("favourite_", "favourite {}"))

_ASKED_WITH: dict[str, str] = {
    "lives_in": "live lives living home moved mora morar moram moro vive viver vivir vivo "
    "reside residir casa",
    "works_at": "work works working job trabalha trabalhar trabalho emprego trabaja trabajar "
    "trabajo empleo",
    "works_for": "work works working job trabalha trabalhar trabalho trabaja trabajar trabajo",
    "born_in": "born birth nasceu nascer nascido nació nacer nacido",
    "visited": "visit visited trip visitou visitar viagem visitó viaje",
    "likes": "like likes love gosta gostar adora gusta gustar encanta",
    "owns": "own owns dono possui dueño",
    "uses": "use uses usa usar",
    "named": "name called nome chama llama nombre",
    "alias": "name called nickname nome apelido nombre apodo",
    "age": "age old idade anos edad años",
    "job": "job work profession do trabalho profissão faz trabajo profesión hace",
}
"""Words a question asks about a predicate with, beyond the English phrase the claim
renders ("Onde mora a Beatriz?" asks about ``lives_in`` as "Where does Beatriz live?"
does): English, Portuguese and Spanish, stemmed like the question when compared."""


def asked_with(predicate: str) -> tuple[str, ...]:
    """The words a question may ask about ``predicate`` with, in English, Portuguese and
    Spanish (``has_sister``: "sister", "irmã", "hermana"); none for an unknown one."""
    words = _ASKED_WITH.get(predicate.removeprefix("not_"), "").split()
    if predicate.startswith("has_"):
        relation = by_predicate(predicate)
        if relation is not None:
            words.extend((*relation.english, *relation.portuguese, *relation.spanish))
    return tuple(w for phrase in words for w in phrase.split())


def is_structural(predicate: str) -> bool:
    """Whether the predicate wires the graph rather than states something."""
    return predicate in _STRUCTURAL or predicate.startswith(_STRUCTURAL_PREFIXES)


def phrase(predicate: str) -> Phrase | None:
    """How ``predicate`` reads; None for a structural or malformed one."""
    if len(predicate) > MAX_PREDICATE_CHARS or not _SNAKE.fullmatch(predicate):
        return None
    if is_structural(predicate):
        return None
    known = _TABLE.get(predicate)
    if known is not None:
        return known
    for prefix, template in _PREFIXES:
        rest = predicate.removeprefix(prefix)
        if rest != predicate and rest:
            return Phrase(template.format(rest.replace("_", " ")), possessive=True)
    return Phrase(predicate.replace("_", " "))
