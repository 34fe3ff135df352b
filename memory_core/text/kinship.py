"""The people (and pets) a speaker names by their relation: "my sister", "a minha irmã",
"mi hermana", "my boss".

One table serves three readers, so they agree on what a relation word is:

* lexical NER reads the cue "my sister Marta" / "Marta is my sister" (and its
  Portuguese and Spanish forms) as "Marta is a person, the speaker's sister";
* formation stores that as the claim ``has_sister`` (speaker -> Marta) where the
  relation extractor read no such claim (it reads the English forms only);
* the trigger policy's index of known names turns the ``has_<relation>`` claims memory
  holds into the phrases a user asks with ("Should I visit my sister?"), in all three
  languages whatever language the claim was stated in.

A relation is named by its English word (the predicate is ``has_`` + that word, as the
relation extractor names it: ``has_sister``, ``has_best_friend``); synonyms share one
entry ("mom", "mum", "mother"), whose first English word names it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from .lexicon import plain

__all__ = ["Relation", "by_predicate", "by_word", "phrases", "words_pattern"]


@dataclass(frozen=True)
class Relation:
    """One relation: its English words, Portuguese and Spanish words (with the
    Portuguese possessive each takes), and whether it names a person (a pet does not)."""

    english: tuple[str, ...]
    portuguese: tuple[str, ...]  # "minha irmã": possessive and word
    spanish: tuple[str, ...]
    person: bool = True

    @property
    def name(self) -> str:
        """The English word that names the relation (``has_`` + it is the predicate)."""
        return self.english[0].replace(" ", "_")


_TABLE = (
    Relation(("sister",), ("minha irmã",), ("hermana",)),
    Relation(("brother",), ("meu irmão",), ("hermano",)),
    Relation(("mother", "mom", "mum", "mommy", "mama"), ("minha mãe",), ("madre", "mamá")),
    Relation(("father", "dad", "daddy", "papa"), ("meu pai",), ("padre", "papá")),
    Relation(("wife",), ("minha mulher", "minha esposa"), ("esposa", "mujer")),
    Relation(("husband",), ("meu marido",), ("marido", "esposo")),
    Relation(
        ("partner",),
        ("meu companheiro", "minha companheira", "meu parceiro", "minha parceira"),
        ("pareja", "compañero", "compañera"),
    ),
    Relation(("girlfriend",), ("minha namorada",), ("novia",)),
    Relation(("boyfriend",), ("meu namorado",), ("novio",)),
    Relation(("fiancé", "fiancée", "fiance", "fiancee"), ("meu noivo", "minha noiva"), ()),
    Relation(
        ("best friend",),
        ("meu melhor amigo", "minha melhor amiga"),
        ("mejor amigo", "mejor amiga"),
    ),
    Relation(("friend",), ("meu amigo", "minha amiga"), ("amigo", "amiga")),
    Relation(
        ("boss", "manager"),
        ("meu chefe", "minha chefe", "meu patrão", "minha patroa"),
        ("jefe", "jefa"),
    ),
    Relation(("colleague", "coworker", "co-worker"), ("meu colega", "minha colega"), ("colega",)),
    Relation(("son",), ("meu filho",), ("hijo",)),
    Relation(("daughter",), ("minha filha",), ("hija",)),
    Relation(("kid", "child"), (), ()),
    Relation(("cousin",), ("meu primo", "minha prima"), ("primo", "prima")),
    Relation(("aunt",), ("minha tia",), ("tía",)),
    Relation(("uncle",), ("meu tio",), ("tío",)),
    Relation(("grandmother", "grandma", "granny"), ("minha avó",), ("abuela",)),
    Relation(("grandfather", "grandpa"), ("meu avô",), ("abuelo",)),
    Relation(("nephew",), ("meu sobrinho",), ("sobrino",)),
    Relation(("niece",), ("minha sobrinha",), ("sobrina",)),
    Relation(("neighbour", "neighbor"), ("meu vizinho", "minha vizinha"), ("vecino", "vecina")),
    Relation(("teacher",), ("meu professor", "minha professora"), ("profesor", "profesora")),
    Relation(("doctor",), ("meu médico", "minha médica"), ("médico", "médica")),
    Relation(("dog",), ("meu cão", "meu cachorro", "minha cadela"), ("perro", "perra"), False),
    Relation(("cat",), ("meu gato", "minha gata"), ("gato", "gata"), False),
)


def by_word(word: str) -> Relation | None:
    """The relation a word names ("irmã", "Hermana", "mum"), or None."""
    return _BY_WORD.get(plain(" ".join(word.split())))


def by_predicate(predicate: str) -> Relation | None:
    """The relation of a ``has_<word>`` predicate (``has_mom`` is the mother), or None."""
    if not predicate.startswith("has_"):
        return None
    return _BY_NAME.get(predicate[4:].casefold())


def phrases(relation: Relation) -> tuple[str, ...]:
    """How a speaker names the relation in each language: "my sister", "minha irmã",
    "mi hermana" (the Portuguese article is left out: "a minha irmã" contains it)."""
    return (
        *(f"my {w}" for w in relation.english),
        *relation.portuguese,
        *(f"mi {w}" for w in relation.spanish),
    )


def words_pattern() -> str:
    """A regular expression alternation of every relation word, with and without its
    accents, longest first (for case-insensitive patterns)."""
    words = {w for r in _TABLE for w in _words(r)}
    return "|".join(
        re.escape(w) for w in sorted(words | {plain(w) for w in words}, key=len, reverse=True)
    )


def _words(relation: Relation) -> Iterator[str]:
    """The words that name ``relation``: English, Portuguese (without the possessive),
    Spanish."""
    yield from relation.english
    yield from (p.split(" ", 1)[1] for p in relation.portuguese)
    yield from relation.spanish


def _by_word() -> dict[str, Relation]:
    found: dict[str, Relation] = {}
    for relation in _TABLE:
        for word in _words(relation):
            found.setdefault(plain(word), relation)
    return found


def _by_name() -> dict[str, Relation]:
    found = {relation.name: relation for relation in _TABLE}
    for relation in _TABLE:
        for word in relation.english:
            found.setdefault(word.replace(" ", "_"), relation)
    return found


_BY_WORD = _by_word()
_BY_NAME = _by_name()
