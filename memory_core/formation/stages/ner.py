"""Lexical NER, the offline default: capitalised spans, quoted terms and known aliases,
typed by the words around them.

Which capitalised spans name something is :func:`~memory_core.text.names.extract_names`'s
rule: not a common word merely opening a sentence ("Here", "Perfect", "Obrigado"). Known
aliases are found whatever their case ("lisbon" once Lisbon is known), so names memory
already holds keep being recognised even when the user types in lower case (which known
names count is the caller's: see :meth:`.linking.EntityCache.known_in`).

A mention is a whole-word, case-insensitive occurrence of a candidate name (not preceded
nor followed by a word character); of occurrences nested in one another only the longest
is kept, occurrences that merely overlap are all kept, and one name's occurrences do not
overlap each other (they are taken left to right). A name without any word character (a
quoted run of punctuation or emoji) names nothing and is ignored.

Cost: one pass over the text whatever the number of candidate names. Each word of a name
is a word of the text (a name's word characters are delimited by non-word characters or
by its boundaries), so occurrences are looked up by their first word and word count in a
dictionary and only then compared character by character: O(n · w) for a text of n
characters and names of at most w words, plus O(s log s) to keep the outermost of the s
occurrences found.

Types (``PER``, ``LOC``, ``ORG``, ``MISC``) come from cues in a bounded window around each
mention, in English, Portuguese and Spanish, first match wins:

1. a language or demonym ("English", "Portuguese") is ``MISC``;
2. the name's own head word: "... University", "Banco ...", "Universidade ..." are
   ``ORG``; "... Mountains", "... Canyon", "Rua ...", "Lake ..." are ``LOC``;
3. an honorific before it ("Dr. Silva", "Dona Marta") or a relation ("my sister Marta",
   "a minha irmã Marta", "mi hermana Marta", "Marta is my sister") makes a person (a
   pet, "my dog Max", stays ``MISC``); said by the speaker of their own ("my", "a
   minha", "mi"), the mention carries the relation (:attr:`Mention.relation`);
4. work before it ("works at", "trabalha na", "trabaja en", "a company called") is
   ``ORG``;
5. a place the relation extractor knows ("Lisboa", "Madrid") is ``LOC``;
6. a place before it ("in", "lives in", "went to", "mora em", "vive en", "soy de") is
   ``LOC``;
7. a person's verb or job after it ("Ana works", "Rui said", "Marta is a nurse",
   "Marta é enfermeira") is ``PER``;
8. anything else is ``MISC``.

A name followed by a possessive ("went to Ana's house") takes no cue of place or work
from the words before it. Cues are read from at most six words on each side: the cost
stays linear in the text.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence

from ...text.kinship import Relation, by_word
from ...text.names import extract_names
from ...text.words import WORD
from ..interfaces import Interpretation, Mention
from .relations import _PLACES as KNOWN_PLACES

__all__ = ["LexicalNER", "occurrences"]

_SEPARATOR = "\x00"  # never a word character: joins a name's words into one key


class LexicalNER:
    """Capitalised spans not merely opening a sentence, quoted terms, known names,
    each typed by its cues."""

    interpretation = Interpretation("ner", "lexical", "capitalised-quoted-known", "2")

    def mentions(self, text: str, known: Sequence[str] = ()) -> list[Mention]:
        found = occurrences(text, [*extract_names(text), *known])
        spans = _outermost(itertools.chain.from_iterable(found.values()))
        return [_typed(text, start, end) for start, end in spans]


def occurrences(text: str, names: Iterable[str]) -> dict[str, list[tuple[int, int]]]:
    """The spans of each name's whole-word, case-insensitive occurrences in ``text``,
    left to right and not overlapping each other (a name without a word character has
    none), found in one pass over ``text`` (see the module)."""
    unique = list(dict.fromkeys(names))
    found = _Names(unique).occurrences(_fold(text))
    return {name: found.get(_fold(name), []) for name in unique}


def _fold(text: str) -> str:
    """``text`` lowercased character by character (so offsets are unchanged)."""
    return text.replace("\u0130", "i").lower()  # the one character lower() lengthens


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"  # exactly the characters ``\w`` matches


class _Names:
    """Candidate names by their words: the folded name and the offset of its first word
    under the words joined, and the word counts of the names each first word opens."""

    def __init__(self, names: Iterable[str]) -> None:
        self.by_key: dict[str, list[tuple[str, int]]] = {}
        self.sizes: dict[str, set[int]] = {}
        for name in dict.fromkeys(names):
            folded = _fold(name)
            words = list(WORD.finditer(folded))
            if not words or not name.strip():
                continue
            entry = (folded, words[0].start())
            bucket = self.by_key.setdefault(_SEPARATOR.join(w.group() for w in words), [])
            if entry not in bucket:
                bucket.append(entry)
            self.sizes.setdefault(words[0].group(), set()).add(len(words))

    def occurrences(self, folded: str) -> dict[str, list[tuple[int, int]]]:
        """Spans of the whole-word occurrences of each (folded) name, left to right."""
        words = list(WORD.finditer(folded))
        tokens = [w.group() for w in words]
        last_end: dict[str, int] = {}
        spans: dict[str, list[tuple[int, int]]] = {}
        for i, token in enumerate(tokens):
            sizes = self.sizes.get(token)
            if sizes is None:
                continue
            for size in sorted(sizes):
                if i + size > len(tokens):
                    break
                key = _SEPARATOR.join(tokens[i : i + size])
                for name, offset in self.by_key.get(key, ()):
                    start = words[i].start() - offset
                    end = start + len(name)
                    if start >= last_end.get(name, 0) and _at(folded, name, start, end):
                        last_end[name] = end
                        spans.setdefault(name, []).append((start, end))
        return spans


def _at(folded: str, name: str, start: int, end: int) -> bool:
    """Whether ``name`` occurs at ``start`` as whole words."""
    return (
        start >= 0
        and folded.startswith(name, start)
        and (start == 0 or not _is_word(folded[start - 1]))
        and (end >= len(folded) or not _is_word(folded[end]))
    )


def _outermost(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans not contained in another (of equal spans, one), by start."""
    kept: list[tuple[int, int]] = []
    reach = -1
    for start, end in sorted(set(spans), key=lambda s: (s[0], -s[1])):
        if end > reach:
            kept.append((start, end))
            reach = end
    return kept


# -- types -------------------------------------------------------------------------------

_WINDOW = 48
_CUE_WORDS = 6
_TOKEN = re.compile(r"[^\W\d_][\w'\u2019-]*|[.,;:!?]")
_MINE = frozenset({"my", "our", "meu", "minha", "meus", "minhas", "nosso", "nossa", "mi", "mis"})
_POSSESSIVES = _MINE | {"nuestro", "nuestra", "your", "his", "her", "their", "teu", "tua"}
_POSSESSIVES |= {"seu", "sua", "tu", "su", "vuestro", "vuestra", "dele", "dela"}
_HONORIFICS = frozenset(
    {"mr", "mrs", "ms", "miss", "mx", "dr", "dra", "prof", "professor", "professora", "sir"}
    | {"dame", "madam", "madame", "aunt", "auntie", "uncle", "sr", "sra", "srta", "dona"}
    | {"dom", "don", "doña", "senhor", "senhora", "señor", "señora", "señorita", "tio", "tia"}
    | {"tío", "tía", "doutor", "doutora", "doctor", "doctora"}
)
_ARTICLES = frozenset({"the", "o", "a", "os", "as", "el", "la", "los", "las", "um", "uma"})
_BE = frozenset({"is", "was", "é", "era", "es"})
_WORK_STEMS = (
    *("work", "job", "intern", "employ", "hired", "trabalh", "emprego", "estágio"),
    *("trabaj", "empleo", "prácticas"),
)
_WORK_AT = frozenset({"at", "for", "by", "em", "no", "na", "num", "numa", "para", "pra"})
_WORK_AT |= {"pela", "pelo", "en"}
_ORG_NOUNS = frozenset(
    {"company", "startup", "firm", "employer", "agency", "brand", "band", "club", "team"}
    | {"empresa", "companhia", "marca", "equipa", "equipo", "clube", "banda"}
)
_CALLED = frozenset({"called", "named", "chamado", "chamada", "llamado", "llamada"})
_IN = frozenset({"in", "near", "around", "across", "outside", "throughout", "em", "no", "na"})
_IN |= {"nos", "nas", "en"}
_TO = frozenset({"to", "para", "pra", "pro", "a", "al"})
_MOTION = frozenset(
    {"go", "goes", "going", "gone", "went", "fly", "flew", "flying", "flight", "trip"}
    | {"drive", "drove", "driving", "move", "moved", "moves", "moving", "back", "welcome"}
    | {"fui", "vou", "vamos", "ir", "viajei", "viajar", "viagem", "mudei-me", "mudou-se"}
    | {"voltei", "voltar", "voy", "viajé", "vuelo", "mudé", "volví", "volver", "vuelvo"}
)
_MOTION_STEMS = ("travel", "return", "head")
_FROM = frozenset({"from", "de", "do", "da"})
_ORIGIN = frozenset(
    {"am", "are", "is", "i'm", "we're", "he's", "she's", "you're", "they're", "come"}
    | {"comes", "came", "originally", "sou", "é", "somos", "venho", "soy", "es", "vengo"}
    | {"perto", "cerca"}
)
_PERSON_VERBS = frozenset(
    {"said", "says", "told", "tells", "asked", "asks", "thinks", "thought", "wants", "wanted"}
    | {"loves", "loved", "likes", "liked", "hates", "feels", "felt", "knows", "knew", "lives"}
    | {"lived", "works", "worked", "studies", "studied", "married", "texted", "disse", "diz"}
    | {"contou", "perguntou", "acha", "quer", "gosta", "ama", "mora", "vive", "trabalha"}
    | {"estuda", "dijo", "dice", "contó", "preguntó", "cree", "quiere", "trabaja", "estudia"}
    | {"went", "moved", "came", "left", "arrived", "met", "called", "visited", "travelled"}
    | {"traveled", "flew", "drove", "foi", "veio", "mudou-se", "ligou", "chegou", "fue"}
    | {"vino", "llegó", "llamó", "se"}
)
_WITH_ME = frozenset({("and", "i"), ("e", "eu"), ("y", "yo")})
_WORKS_AS = frozenset({("works", "as"), ("trabalha", "como"), ("trabaja", "como")})
_JOB = re.compile(
    r"nurse|teacher|doctor|engineer|developer|designer|lawyer|chef|student|manager|musician|"
    r"painter|photographer|scientist|researcher|accountant|writer|artist|baker|farmer|"
    r"pilot|dentist|pharmacist|programmer|therapist|counsel+or|architect|journalist|actor|"
    r"actress|singer|dancer|enfermeir[ao]|professora?|médic[ao]|engenheir[ao]|advogad[ao]|"
    r"cozinheir[ao]|estudante|gerente|músic[ao]|pintora?|fotógraf[ao]|cientista|"
    r"investigadora?|escritora?|artista|padeir[ao]|arquitet[ao]|jornalista|atriz|ator|"
    r"cantora?|enfermer[ao]|profesora?|ingenier[ao]|abogad[ao]|cociner[ao]|"
    r"científic[ao]|contadora?|panader[ao]|arquitect[ao]|periodista|actriz|cantante"
)
_ORG_LAST = frozenset(
    {"inc", "ltd", "llc", "corp", "corporation", "company", "co", "group", "bank", "university"}
    | {"college", "school", "institute", "hospital", "foundation", "association", "club"}
    | {"lda", "gmbh", "studios", "labs", "technologies", "systems", "airlines", "fc"}
)
_ORG_FIRST = frozenset(
    {"universidade", "universidad", "banco", "instituto", "escola", "escuela", "colégio"}
    | {"colegio", "fundação", "fundación", "associação", "asociación", "hospital", "clube"}
    | {"university", "bank"}
)
_LOC_LAST = frozenset(
    {"city", "street", "avenue", "road", "park", "river", "lake", "mountain", "mountains"}
    | {"beach", "island", "islands", "bay", "valley", "canyon", "county", "state", "coast"}
    | {"square", "falls", "cliffs", "hills", "forest", "desert", "sea", "ocean", "village"}
    | {"peninsula", "town"}
)
_LOC_FIRST = frozenset(
    {"mount", "lake", "rua", "avenida", "praça", "praia", "serra", "calle", "plaza", "playa"}
    | {"sierra", "lago", "monte", "cabo", "cape", "fort", "port", "isla", "ilha"}
)
_DEMONYMS = frozenset(
    {"english", "french", "dutch", "greek", "thai", "german", "american", "mexican"}
    | {"african", "korean", "cuban", "european", "asian", "latin", "spanish", "portuguese"}
)
_DEMONYM_ENDINGS = ("ish", "ese", "ian", "ean")

_Typed = tuple[str, str | None]


def _typed(text: str, start: int, end: int) -> Mention:
    """The mention ``text[start:end]`` with its type and relation (see the module): the
    cues are the words (and stops) just before and just after it."""
    surface = text[start:end]
    before = [w.casefold() for w in _TOKEN.findall(text[max(0, start - _WINDOW) : start])]
    after = [w.casefold() for w in _TOKEN.findall(text[end : end + _WINDOW])]
    owner = text.startswith(("'s", "\u2019s"), end)  # "went to Ana's house"
    words = surface.casefold().split()
    label, relation = _label(words, before[-_CUE_WORDS:], after[:_CUE_WORDS], owner)
    return Mention(start, end, surface, label, relation=relation)


def _label(words: list[str], before: list[str], after: list[str], owner: bool) -> _Typed:
    """The type by the first cue that holds (see the module); an ``owner`` ("Ana's") is
    not where the words before it go or work."""
    if len(words) == 1 and (words[0] in _DEMONYMS or words[0].endswith(_DEMONYM_ENDINGS)):
        return "MISC", None
    if words[-1] in _ORG_LAST or words[0] in _ORG_FIRST:
        return "ORG", None
    if words[-1] in _LOC_LAST or words[0] in _LOC_FIRST:
        return "LOC", None
    related = _related_before(before) or _related_after(after)
    if related is not None:
        return related
    if not owner and _works_before(before):
        return "ORG", None
    if " ".join(words) in KNOWN_PLACES or (not owner and _place_before(before)):
        return "LOC", None
    return ("PER", None) if _person_after(after) else ("MISC", None)


def _related_before(before: list[str]) -> _Typed | None:
    """An honorific ("Dr. Silva") or a relation ("my sister, Marta") just before."""
    words = before[:-1] if before[-1:] in ([","], ["."]) else before
    if not words:
        return None
    if words[-1] in _HONORIFICS and (before[-1:] != [","]):
        return "PER", None
    for size in (2, 1):
        relation = by_word(" ".join(words[-size:])) if len(words) > size else None
        if relation is not None and words[-size - 1] in _POSSESSIVES:
            return _relation_type(relation, words[-size - 1])
    return None


def _related_after(after: list[str]) -> _Typed | None:
    """A relation just after: "... is my sister", "... é a minha irmã", "... es mi
    hermana"."""
    if not after or after[0] not in _BE:
        return None
    rest = after[2:] if after[1:2] in (["a"], ["o"]) else after[1:]
    if len(rest) < 2 or rest[0] not in _POSSESSIVES:
        return None
    relation = by_word(" ".join(rest[1:3])) or by_word(rest[1])
    return None if relation is None else _relation_type(relation, rest[0])


def _relation_type(relation: Relation, whose: str) -> _Typed:
    """A person (a pet is a thing), and the relation when it is the speaker's own."""
    return ("PER" if relation.person else "MISC"), (relation.name if whose in _MINE else None)


def _works_before(before: list[str]) -> bool:
    """Whether work stands just before: "works at", "trabalha na", "trabaja en", "a
    company called"."""
    words = _without_article(before)
    if not words:
        return False
    if words[-1] in _ORG_NOUNS or (words[-1] in _CALLED and set(words[-3:-1]) & _ORG_NOUNS):
        return True
    if words[-1] not in _WORK_AT:
        return False
    for word in reversed(words[-5:-1]):  # "works as a nurse at", not "works at X in"
        if word.startswith(_WORK_STEMS):
            return True
        if word in _WORK_AT or word in _IN:
            return False
    return False


def _place_before(before: list[str]) -> bool:
    """Whether a place's cue stands just before: "in", "lives in", "went to", "fui a",
    "mora em", "vive en", "soy de" (an article between: "in the", "para a")."""
    return any(_place_words(words) for words in (before, _without_article(before)))


def _place_words(words: list[str]) -> bool:
    if not words:
        return False
    last, previous = words[-1], (words[-2] if len(words) > 1 else "")
    if last in _IN:
        return True
    if last in _TO:
        return previous in _MOTION or previous.startswith(_MOTION_STEMS)
    return last in _FROM and previous in _ORIGIN


def _person_after(after: list[str]) -> bool:
    """A person's verb ("Rui said"), "Ana and I", or a job ("Marta is a nurse") after."""
    if not after:
        return False
    if after[0] in _PERSON_VERBS or tuple(after[:2]) in _WITH_ME:
        return True
    if after[0] in _BE:
        rest = after[1:]
    elif tuple(after[:2]) in _WORKS_AS:
        rest = after[2:]
    else:
        return False
    rest = rest[1:] if rest[:1] and rest[0] in {"a", "an", "um", "uma", "un", "una"} else rest
    return any(_JOB.fullmatch(w) for w in rest[:2])


def _without_article(words: list[str]) -> list[str]:
    return words[:-1] if words[-1:] and words[-1] in _ARTICLES else words
