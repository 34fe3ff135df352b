"""Common words of English, Portuguese and Spanish: what a capitalised word is when it is
not a name.

Lexical NER sees capitals, and a capital also opens every sentence ("Perfect weather
today", "Obrigado!", "¿Dónde estás?"), follows many a comma in chat ("Yeah, Here's one")
and shouts ("JUST DOING IT"). This module tells such words from names by what they are
in the language, not by where they stand:

* a *function word* (:func:`is_function_word`) is a closed-class word (pronoun,
  article, preposition, conjunction, auxiliary, question word, common adverb), an
  interjection, greeting or courtesy ("Thanks", "Olá", "Obrigado", "Gracias"; laughter
  and the like of repeated letters, "Hahaha", "Mmm"), or a name of a day or month;
  a contraction is its head ("How'd" is "how"): never a name on its own;
* a *common word* (:func:`is_common_word`) is a function word or a content word of
  :mod:`.vocabulary` (nouns, verbs, adjectives, adverbs a chat uses most), in any of
  its regular forms: English plurals and verb endings ("Becoming" is "become", "Sounds"
  is "sound"), comparatives and ``-ly`` adverbs; Portuguese and Spanish gender and
  number ("Perfeitas" is "perfeito"), ``-mente`` adverbs and the gerunds and
  participles of the verbs listed ("Caminhando" is "caminhar"). Forms are checked
  against the part of speech they inflect (``-ing`` against verbs only), so "Manning"
  is not "man". Past the lists, derivational endings make a word common whatever its
  base ("Kickboxing", "Friendship", "Unconditional", "Happiness", "Finalmente"), less
  the names that end so ("Beijing", "Florence", "Orlando"); a hyphenated word is common
  when all its parts are ("Dairy-free") or it is a verb with its pronoun ("Vemo-nos");
* a *common noun* (:func:`is_common_noun`) is a common word that can be a noun, the
  only kind that names something on its own when capitalised mid-sentence;
* a *verb form* (:func:`is_verb_form`) is a form of a listed verb ("Visiting", "Loved",
  "Visitei", "Startin'"), which may open a sentence before a name ("Visiting Lisbon").

Words are compared case-folded, with and without their accents ("Nao" is "não").
Words that are as often names as words ("Will" is a function word anyway; "Mark",
"Bill", "Rose", "Grace", "Jack", "Luz", "Paz", "Porto", "Costa", "Apple") are left
out of the content lexicon on purpose: a name written once is worth more than a word
not recognised. Pure data and set lookups: no I/O, nothing built at import beyond the
sets.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from . import vocabulary as words
from .kept import kept_when_short
from .words import KEPT_WORD_CHARS, fold

__all__ = [
    "is_calendar_word",
    "is_common_noun",
    "is_common_word",
    "is_function_word",
    "is_verb_form",
    "plain",
]


def plain(word: str) -> str:
    """``word`` case-folded, without its accents (``"Não"`` is ``"nao"``), a typographic
    apostrophe as ``'``."""
    return fold(word.replace("\u2019", "'"))


def _set(*texts: str) -> frozenset[str]:
    found = {w for text in texts for w in text.split()}
    return frozenset(found | {plain(w) for w in found})


_CALENDAR_WORDS = _set(words.CALENDAR)
_FUNCTION_WORDS = _set(words.FUNCTION, words.INTERJECTIONS, words.EN_MORE_OTHER) | _CALENDAR_WORDS
_EN_VERB_BASES = _set(words.EN_VERBS, words.EN_MORE_VERBS)
_EN_FORMS = _set(words.EN_IRREGULAR)
_EN_ADJ = _set(words.EN_ADJECTIVES, words.EN_MORE_ADJECTIVES)
_EN_NOUN = _set(words.EN_NOUNS, words.EN_MORE_NOUNS)
_EN_PLAIN = _set(words.EN_OTHER)
_ROMANCE_VERBS = _set(words.PT_VERBS, words.ES_VERBS)
_ROMANCE_FORMS = _set(words.PT_FORMS, words.ES_FORMS)
_ROMANCE_WORDS = _set(words.PT_WORDS, words.ES_WORDS, words.PT_MORE, words.ES_MORE)
_VERB_FORMS = _EN_FORMS | _ROMANCE_FORMS | _ROMANCE_VERBS | _EN_VERB_BASES
_PLAIN_WORDS = _FUNCTION_WORDS | _EN_ADJ | _EN_NOUN | _EN_PLAIN | _ROMANCE_WORDS | _VERB_FORMS
_CONTRACTIONS = frozenset({"d", "re", "ve", "ll", "m", "s"})
_CLITICS = frozenset(
    {"me", "te", "se", "nos", "vos", "lhe", "lhes", "o", "a", "os", "as", "lo", "la", "los"}
    | {"las", "no", "na", "nas"}
)
"""Pronouns a Portuguese verb takes after a hyphen ("Vemo-nos", "Diz-me", "Chama-se")."""
_INTERJECTION = re.compile(
    r"(?:a*h+a+)+h*|(?:h?e+h+)+e*|(?:ja)+j?|(?:je)+j?|(?:rs)+|k{3,}|m{2,}|h+m+|a+h+|o+h+|"
    r"a+w+|w+o+h*o*|h+o+|y+a+y+|u+g+h+|e+w+|o+o+f+|w+h*e+w+|l+o+l+|w+o+w+"
)
"""Laughter and other interjections of repeated letters ("Ahhahha", "Mmmm", "Woooo")."""
_DERIVED = ("ness", "ment", "ments", "tion", "tions", "sion", "sions", "ful", "fully", "ity")
_DERIVED_LONG = (
    *("less", "ous", "ously", "ive", "ively", "able", "ably", "ible", "ibly", "ship", "ships"),
    *("ence", "ance", "ences", "ances", "ture", "tures", "ional", "ual", "ical", "ies"),
    *("ally", "ully", "ently", "antly", "ately", "edly", "ingly", "stly", "ctly", "tely"),
    *("ing", "ings", "ed"),
)
_NOT_DERIVED = frozenset(
    {"trinity", "felicity", "charity", "france", "florence", "provence", "lawrence"}
    | {"terrence", "terence", "constance", "clarence", "prudence", "beijing", "nanjing"}
    | {"kunming", "boeing", "sterling", "stirling", "irving", "fleming", "manning"}
    | {"browning", "kipling", "xining", "epping", "woking", "ealing", "harding", "alfred"}
    | {"mohammed", "mohamed", "winifred", "mildred", "siegfried", "manfred", "wilfred"}
    | {"khaled", "fernando", "orlando", "armando", "rolando", "hernando", "rosendo"}
    | {"conceição", "conceicao", "assunção", "assuncao", "concepción", "concepcion"}
    | {"asunción", "asuncion", "trindade", "soledad", "trinidad", "piedad", "cambridge"}
)
"""Names that look derived: the fallbacks of :func:`_derived` leave them alone."""


def is_function_word(word: str) -> bool:
    """A closed-class word, an interjection or greeting, or a day or month name (see
    the module docstring): never a name by itself."""
    key = _key(word)
    return key in _FUNCTION_WORDS or _INTERJECTION.fullmatch(key) is not None


def is_calendar_word(word: str) -> bool:
    """A day or month name or abbreviation ("Friday", "Fri", "Sept", "sexta-feira")."""
    return plain(word) in _CALENDAR_WORDS


@kept_when_short(1 << 14, KEPT_WORD_CHARS)
def is_common_word(word: str) -> bool:
    """Whether ``word`` (any case) is a common word of English, Portuguese or Spanish in
    one of its regular forms (see the module docstring); a hyphenated word is one when
    each of its parts is ("Dairy-free", "Much-needed") or it ends in a pronoun
    ("Vemo-nos")."""
    key = _key(word)
    if "-" in key.strip("-"):
        parts = [p for p in key.split("-") if p]
        return parts[-1] in _CLITICS or all(_common(p) for p in parts)
    return _common(key)


def is_common_noun(word: str) -> bool:
    """Whether a common word can be a noun: an English noun (or its plural), or a
    Portuguese or Spanish noun or adjective (the lists do not tell those apart). Only a
    noun may name something on its own ("I played Chess"; "it was Amazing" names
    nothing)."""
    key = _key(word)
    if "-" in key.strip("-"):
        key = key.rstrip("-").rsplit("-", 1)[-1]
    if key in _EN_NOUN or key in _ROMANCE_WORDS:
        return True
    if any(b in _EN_NOUN for b in _en_plural_bases(key)):
        return True
    return any(b in _ROMANCE_WORDS for b in _romance_bases(key))


@kept_when_short(1 << 14, KEPT_WORD_CHARS)
def is_verb_form(word: str) -> bool:
    """Whether ``word`` is a form of a listed verb ("Visiting", "Loved", "Visitei")."""
    key = _key(word)
    if key in _VERB_FORMS:
        return True
    if key.endswith("in") and not key.endswith("ing"):
        key += "g"  # "Startin'" is "starting"
    if any(b in _EN_VERB_BASES for b in _en_verb_bases(key)):
        return True
    return any(b in _ROMANCE_VERBS for b in _romance_verb_bases(key))


def _key(word: str) -> str:
    """The word as the lists hold it: case-folded, without accents, and without a
    contraction's tail when the whole is not listed ("How'd" is "how")."""
    key = plain(word).strip("'")
    if key in _PLAIN_WORDS or "'" not in key:
        return key
    head, _, tail = key.rpartition("'")
    return head if tail in _CONTRACTIONS and head else key


def _common(key: str) -> bool:
    if key in _PLAIN_WORDS or _INTERJECTION.fullmatch(key) or is_verb_form(key):
        return True
    if any(b in _EN_NOUN or b in _EN_ADJ for b in _en_plural_bases(key)):
        return True
    if any(b in _EN_ADJ for b in _en_adjective_bases(key)):
        return True
    if any(b in _ROMANCE_WORDS for b in _romance_bases(key)):
        return True
    return _derived(key)


def _en_verb_bases(w: str) -> Iterator[str]:
    """Candidate verb bases of an English ``-s``/``-ed``/``-ing`` form."""
    for suffix in ("ing", "ed", "es", "s", "d"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 2:
            stem = w[: -len(suffix)]
            yield stem
            yield stem + "e"
            if len(stem) > 2 and stem[-1] == stem[-2]:
                yield stem[:-1]  # "stopping", "planned"
            if stem.endswith("i"):
                yield stem[:-1] + "y"  # "tried", "studies"
            if suffix == "ing" and stem.endswith("y"):
                yield stem[:-1] + "ie"  # "lying"


def _en_plural_bases(w: str) -> Iterator[str]:
    """Candidate singulars of an English plural ("cities", "wishes", "veggies")."""
    for suffix in ("ies", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 2:
            stem = w[: -len(suffix)]
            yield stem
            yield stem + ("y" if suffix == "ies" else "e")


def _en_adjective_bases(w: str) -> Iterator[str]:
    """Candidate bases of an English comparative, superlative or ``-ly`` adverb."""
    for suffix in ("er", "est", "ly"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            stem = w[: -len(suffix)]
            yield stem
            yield stem + "e"
            if stem.endswith("i"):
                yield stem[:-1] + "y"  # "happily", "happier"
            if len(stem) > 2 and stem[-1] == stem[-2]:
                yield stem[:-1]  # "bigger"
    if w.endswith("ically"):
        yield w[:-4]  # "basically"
    if w.endswith(("ably", "ibly")):
        yield w[:-1] + "e"  # "probably"


def _romance_bases(w: str) -> Iterator[str]:
    """Masculine singular candidates of a Portuguese or Spanish noun or adjective."""
    if w.endswith("mente") and len(w) > 7:
        w = w[:-5]
        yield w
    for suffix, base in (
        ("as", "o"), ("os", "o"), ("a", "o"), ("es", ""), ("s", ""),
        ("oes", "ao"), ("aes", "ao"), ("ais", "al"), ("eis", "el"), ("iveis", "ivel"),
        ("aveis", "avel"), ("ales", "al"),
    ):  # fmt: skip
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            yield w[: -len(suffix)] + base


def _romance_verb_bases(w: str) -> Iterator[str]:
    """Infinitive candidates of a Portuguese or Spanish gerund or participle."""
    for suffix, bases in (
        ("ando", ("ar",)), ("endo", ("er",)), ("iendo", ("er", "ir")), ("indo", ("ir",)),
        ("ado", ("ar",)), ("ada", ("ar",)), ("ados", ("ar",)), ("adas", ("ar",)),
        ("ido", ("er", "ir")), ("ida", ("er", "ir")), ("idos", ("er", "ir")),
        ("idas", ("er", "ir")),
    ):  # fmt: skip
        if w.endswith(suffix) and len(w) - len(suffix) >= 2:
            yield from (w[: -len(suffix)] + b for b in bases)


def _derived(w: str) -> bool:
    """Endings that make a word common whatever its base ("Happiness", "Kickboxing",
    "Unfortunately", "Friendship"; "Finalmente", "Caminhando"), less the names that
    happen to end so (:data:`_NOT_DERIVED`)."""
    if w in _NOT_DERIVED:
        return False
    if len(w) >= 6 and w.endswith(_DERIVED):
        return True
    if len(w) >= 7 and w.endswith(_DERIVED_LONG):
        return True
    return len(w) >= 9 and w.endswith(("mente", "ando", "endo", "indo"))
