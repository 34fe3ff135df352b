"""Lexical names: the capitalised spans a message mentions (first-version entities).

This is the offline default of the NER stage. A capital says "name" only where the
language does not put one anyway, so a word is judged by what it is
(:mod:`.lexicon`) as well as by where it stands:

* A word *opens a clause* when nothing but punctuation (or nothing at all) stands
  between it and the previous word: the start of the text or a line, after ``. ! ? :
  ;``, a comma, a bracket, an opening quote, ``¿``, ``¡`` or an emoji, and after a
  capitalised function word that itself opens a clause ("So Perfect!"). An honorific's
  or an initial's period does not end anything ("Dr. Silva", "J.K. Rowling").
* A *function word* (closed-class word, interjection, greeting, courtesy: "The",
  "Here", "Thanks", "Olá", "Obrigado", "Dónde", "Quando") is never a name and ends a
  run of capitalised words; a day or month name ("Friday", "Sábado") is never a name
  alone. A word in capitals that is a common word is shouting, not a name
  ("JUST DOING IT", "INTENSE"); an acronym that is no word is one ("NBA", "LGBTQ").
* A capitalised *common word* ("Perfect", "Becoming", "Perfeito", "Genial", "Chess")
  is a name only when the text also writes it capitalised where it does not open a
  clause, never in lower case, and it can be a noun ("I played Chess with Rui" names
  "Chess"; "Perfect weather today" and "it was Amazing" name nothing). Any other
  capitalised word is a name wherever it stands ("Marta is a nurse", "Obrigado,
  Marta!"), unless it only opens clauses while the text writes it in lower case
  elsewhere ("Remenber this. I remenber"). Alone where a *sentence* opens (not after a
  comma), such a word must also read as a subject or be set apart: a verb follows it
  ("Marta is", "Ana mora"), "and" and a capital, or a comma; Portuguese and Spanish
  verbs no lexicon lists ("Continua assim", "Mandei uma foto") name nothing there.
* Capitalised words joined by spaces make one name of up to four words, with up to two
  connectors inside ("Game of Thrones", "Póvoa de Varzim", "Lord of the Rings"); a
  possessive ends it ("Ed Sheeran's" names "Ed Sheeran"). A run that opens a clause
  loses a common word glued before a name ("Visiting Lisbon", "Awesome John", "Soy de
  Sevilla" name "Lisbon", "John", "Sevilla"), unless it is a word names start with
  ("New York", "Grand Canyon"); a run of common words only is no name there ("Happy
  Birthday"), elsewhere it is ("I watched Iron Man"). After an honorific ("Dr.",
  "Dona") the name is one whatever its words.
* A quoted term is a name when it reads as a title: it starts with a capital or a
  digit, has at most six words and no inner punctuation ("“Dune Part Two”",
  "\"Finding Home.\"" names "Finding Home"; "\"me-time\"" and a quoted sentence do not).

Known names (:class:`NameIndex`) follow the same rule: a name made of common words
("Chess", "Iron Man") counts as mentioned only where it is written capitalised, not
opening a clause, and not also in lower case, so an entity that happens to be a word
never fires on the word. Names of the chat's roles ("user", "assistant") are never
known names. The index also holds *relation phrases* ("my sister", "a minha irmã",
"mi hermana") for the relations memory holds (:meth:`NameIndex.add_relations`).

Cost: one pass over the text, set lookups per word.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from .kinship import by_predicate, phrases
from .lexicon import (
    is_calendar_word,
    is_common_noun,
    is_common_word,
    is_function_word,
    is_verb_form,
    plain,
)

__all__ = ["ROLE_NAMES", "NameIndex", "extract_names"]

ROLE_NAMES = frozenset({"user", "assistant", "system", "tool", "developer"})
"""What an unnamed speaker is called: never a name memory knows."""

_WORD = re.compile(r"[^\W\d_][\w'\u2019-]*", re.UNICODE)
_POSSESSIVE = re.compile(r"(['\u2019]s?|-)$")
_QUOTED = re.compile(r"[\"“«]([^\"”»\n]{2,40})[\"”»]")
_INNER_PUNCTUATION = re.compile(r"[,;:!?()\u2013\u2014]|\s-\s")
_TRAILING = ".,!?;:…"
_CONNECTORS = frozenset({"of", "the", "de", "da", "do", "dos", "das", "del", "la", "du", "von"})
_HONORIFICS = frozenset(
    {"mr", "mrs", "ms", "miss", "mx", "dr", "dra", "prof", "sir", "dame", "sr", "sra", "srta"}
    | {"dona", "doña", "senhor", "senhora", "señor", "señora"}
)
_ABBREVIATIONS = _HONORIFICS | {"st", "mt", "ft"}
_NAME_OPENERS = frozenset(
    {"new", "old", "great", "grand", "little", "big", "north", "south", "east", "west"}
    | {"northern", "southern", "eastern", "western", "upper", "lower", "central", "royal"}
    | {"united", "holy", "saint", "san", "santa", "santo", "são", "sao", "los", "las", "el"}
    | {"la", "le", "fort", "mount", "lake", "cape", "port", "golden", "silver", "black"}
    | {"red", "white", "green", "blue", "national", "general", "civil", "universal"}
    | {"international", "american", "british", "federal", "imperial", "real", "nova", "novo"}
    | {"nueva", "nuevo", "gran", "grande", "alto", "vila", "villa"}
)
"""Common words that often start a name ("New York", "Grand Canyon", "Real Madrid")."""
_SHOUTED_WORDS = frozenset(
    {"ok", "no", "it", "my", "me", "we", "so", "do", "go", "oh", "hi", "to", "in", "on"}
    | {"at", "of", "by", "or", "an", "am", "is", "be", "he", "if", "up", "ya", "yo", "ha"}
)
"""Two-letter words that are shouted, not codes ("OK", "NO", "IT")."""
_SENTENCE_ENDS = frozenset(".!?¿¡:;…")
_AND = frozenset({"and", "e", "y", "&"})
_NOT_FINITE = ("ing", "in'", "ando", "endo", "indo", "ar", "er", "ir", "se", "lo", "la")
"""Endings of verb forms that do not follow a subject (gerunds, infinitives): "Continuo
trabalhando", "Adoraria ter" are a verb and its complement, not a name and its verb."""
_REFLEXIVE_INFINITIVES = ("arse", "erse", "irse")
_NOT_VERBS_HERE = frozenset({"como"})
"""A verb form that after a sentence's first word is a question word ("Entendo como")."""
_MAX_WORDS = 4
_MAX_CONNECTORS = 2
_MAX_GRAM = _MAX_WORDS + _MAX_CONNECTORS


@dataclass(frozen=True, slots=True)
class _Token:
    """A word (its possessive cut off), its span, whether it opens a clause and whether
    it opens a sentence (the start, a line, after ``. ! ? : ; …``, ``¿``, ``¡`` or an
    emoji: not after a comma, a bracket or a quote)."""

    word: str
    start: int
    end: int
    opens: bool
    possessive: bool
    sentence: bool = False

    @property
    def capitalised(self) -> bool:
        return self.word[0].isupper()

    @property
    def shouted(self) -> bool:
        return len(self.word) > 1 and self.word.isupper()

    @property
    def key(self) -> str:
        return self.word.casefold().replace("\u2019", "'")


def _tokens(text: str) -> list[_Token]:
    """The words of ``text`` with whether each opens a clause (see the module)."""
    tokens: list[_Token] = []
    last_end = 0
    for match in _WORD.finditer(text):
        raw = match.group()
        word = _POSSESSIVE.sub("", raw) or raw
        gap = text[last_end : match.start()]
        previous = tokens[-1] if tokens else None
        opens = previous is None or "\n" in gap or _opening_gap(previous, gap.strip())
        sentence = opens and (previous is None or "\n" in gap or _ends_sentence(gap))
        start = match.start()
        tokens.append(_Token(word, start, start + len(word), opens, word != raw, sentence))
        last_end = match.end()
    return tokens


def _ends_sentence(gap: str) -> bool:
    """Whether the punctuation between two words ends a sentence (an emoji does, in chat)."""
    return any(c in _SENTENCE_ENDS or unicodedata.category(c) == "So" for c in gap)


def _opening_gap(previous: _Token, gap: str) -> bool:
    if gap:  # punctuation, unless an abbreviation's period ("Dr. Silva", "J.K. Rowling")
        abbreviation = previous.key in _ABBREVIATIONS or (
            len(previous.word) == 1 and previous.word.isupper()
        )
        return not (gap == "." and abbreviation)
    return previous.opens and previous.capitalised and is_function_word(previous.word)


class _Evidence:
    """What the whole text says about its words: those written in lower case, and
    those written capitalised where they do not open a clause."""

    def __init__(self, tokens: Sequence[_Token]) -> None:
        self.lower = {t.key for t in tokens if t.word.islower()}
        self.capital_inside = {t.key for t in tokens if t.capitalised and not t.opens}

    def names_word(self, key: str) -> bool:
        """Whether a common word is used as a name here (see the module)."""
        return key in self.capital_inside and key not in self.lower

    def named_here(self, key: str) -> bool:
        """Whether a word is not merely capitalised where a clause opens while the text
        writes it in lower case elsewhere ("Going out. I'm going." names nothing)."""
        return key not in self.lower or key in self.capital_inside


def extract_names(text: str) -> list[str]:
    """Names mentioned in ``text``, in order of appearance, without duplicates."""
    tokens = _tokens(text)
    evidence = _Evidence(tokens)
    after = {t.start: tokens[i + 1 : i + 3] for i, t in enumerate(tokens)}
    names = [
        name
        for run, cued in _runs(tokens)
        for name in _named(text, run, cued, evidence, after[run[-1].start])
    ]
    names.extend(_quoted(text, evidence))
    unique: dict[str, str] = {}
    for name in names:
        if len(name) >= 2:
            unique.setdefault(name.casefold(), name)
    return list(unique.values())


def _name_like(token: _Token) -> bool:
    """A capitalised word that may be part of a name (not a function word, not an
    honorific, not shouting)."""
    if not token.capitalised or token.key in _HONORIFICS:
        return False
    if token.shouted:
        if len(token.word) == 2:  # a code ("UK", "CA", "US") unless a shouted word
            return token.key not in _SHOUTED_WORDS
        return not (
            is_function_word(token.word) or (len(token.word) > 3 and is_common_word(token.word))
        )
    return not is_function_word(token.word) or is_calendar_word(token.word)


def _runs(tokens: Sequence[_Token]) -> Iterator[tuple[list[_Token], bool]]:
    """Runs of capitalised words joined by spaces and connectors, each with whether an
    honorific stands before it ("Dr. Silva", "Dona Marta")."""
    run: list[_Token] = []
    pending: list[_Token] = []  # connectors after the run, kept if a capital follows
    cued = honorific = False
    for token in tokens:
        joined = bool(run) and not token.opens
        if joined and _name_like(token) and _words(run) < _MAX_WORDS:
            run.extend([*pending, token])
            pending = []
        elif joined and _connector(token) and len(pending) < _MAX_CONNECTORS:
            pending.append(token)
        else:
            if run:
                yield run, cued
            run, pending = ([token] if _name_like(token) else []), []
            cued = honorific
        if run and run[-1] is token and token.possessive:
            yield run, cued
            run = []
        honorific = token.key in _HONORIFICS
    if run:
        yield run, cued


def _words(run: Sequence[_Token]) -> int:
    return sum(not _connector(t) for t in run)


def _connector(token: _Token) -> bool:
    return token.key in _CONNECTORS


def _named(
    text: str, run: list[_Token], cued: bool, evidence: _Evidence, following: list[_Token]
) -> Iterator[str]:
    """The name a run makes, if any (see the module); ``following`` are the (up to two)
    words after the run."""
    opens = run[0].opens
    while opens and _glued(run):
        run = run[1:]  # "Visiting Lisbon", "Awesome John", "Soy de Sevilla": the rest
        while run and _connector(run[0]):
            run = run[1:]
    words = [t for t in run if not _connector(t)]
    if not words or all(is_calendar_word(t.word) for t in words):
        return
    if not cued and all(is_common_word(t.word) for t in words):
        if len(words) == 1 and not evidence.names_word(words[0].key):
            return
        if len(words) == 1 and not is_common_noun(words[0].word):
            return  # "it was Amazing": emphasis, not a name
        if len(words) > 1 and (opens or words[0].key in evidence.lower):
            return
    if len(words) == 1 and not cued and not evidence.named_here(words[0].key):
        return
    if (
        len(run) == 1
        and run[0].sentence
        and not cued
        and run[0].key not in evidence.capital_inside
        and not _subject_before(text, run[0], following)
    ):
        return  # "Continua assim.", "Mandei uma foto", "Entendo, Jon": a verb, a word
    yield text[run[0].start : run[-1].end]


def _subject_before(text: str, word: _Token, following: list[_Token]) -> bool:
    """Whether a word opening a sentence reads as its subject or is set apart as a name:
    a verb follows it ("Marta is a nurse", "Ana mora em Coimbra", "Max adopted a
    puppy"), "and" and a capital ("Jon and Gina"), or a comma ("Robert, also known as
    Bob"; so "Entendo, Jon" still names "Entendo"). A word the language would capitalise
    there anyway (a Portuguese or Spanish verb out of the lexicon: "Continua assim",
    "Acredita em você", "Mandei uma foto", "Concordo!") does not; a name known to memory
    is found there all the same (the NER stage adds the known names)."""
    if plain(word.word).endswith(_REFLEXIVE_INFINITIVES):
        return False  # "Arriesgarse da miedo": the subject is a verb
    gap = text[word.end : following[0].start].strip() if following else "."
    if gap == ",":
        return True  # "Robert, also known as Bob", "Marta, come here"
    if gap:
        return False
    after, *rest = following
    if after.key in _AND:
        return bool(rest) and rest[0].capitalised and not text[after.end : rest[0].start].strip()
    return (
        after.word.islower()
        and is_verb_form(after.word)
        and not plain(after.word).endswith(_NOT_FINITE)
        and plain(after.word) not in _NOT_VERBS_HERE
    )


def _glued(run: Sequence[_Token]) -> bool:
    """Whether a run opening a clause starts with a common word glued to a name that
    follows ("Visiting Lisbon", "Absolutely Jon", "Soy de Sevilla"): not a word names
    often start with ("New York", "Grand Canyon"), not a noun before a connector ("Game
    of Thrones"), and not when the rest is common words too ("Happy Birthday" is judged
    whole)."""
    if len(run) < 2:
        return False
    first = run[0].key
    if first in _NAME_OPENERS or not is_common_word(first):
        return False
    if _connector(run[1]) and not is_verb_form(first):
        return False
    return not all(is_common_word(t.word) for t in run[1:] if not _connector(t))


def _quoted(text: str, evidence: _Evidence) -> Iterator[str]:
    """Quoted terms that read as titles (see the module)."""
    for match in _QUOTED.finditer(text):
        term = match.group(1).strip().rstrip(_TRAILING).strip()
        words = term.split()
        if not term or not (term[0].isupper() or term[0].isdigit()) or len(words) > 6:
            continue
        if _INNER_PUNCTUATION.search(term):
            continue
        if len(words) == 1 and (
            is_function_word(term)
            or is_calendar_word(term)
            or (is_common_word(term) and term.casefold() in evidence.lower)
        ):
            continue
        yield term


def _key_words(name: str) -> list[str]:
    words = _WORD.findall(_composed(name))
    return [_POSSESSIVE.sub("", w).casefold().replace("\u2019", "'") for w in words]


def _composed(text: str) -> str:
    """``text`` with its accents composed (NFC): a name learned as "Zoé" is the same
    name written "Zoe" plus a combining accent (decomposed text, from some keyboards
    and copied text), whose accent would otherwise end the word."""
    return text if unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)


class NameIndex:
    """The set of known names, answering "which known names does this text mention?".

    Lookups tokenise the text once and test word n-grams (up to six words) against a
    set, so the cost follows the text's length, not the number of names known. A name
    made of common words is mentioned only where it is written as a name (see the
    module); relation phrases (:meth:`add_relations`) are matched case- and
    accent-insensitively.
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._names: dict[str, str] = {}
        self._strict: set[str] = set()
        self._capitalised: set[str] = set()
        self._relations: dict[str, str] = {}
        self._learned = 0
        """How many times names were learned: an answer kept from before is stale."""
        self._last: tuple[int, str, tuple[str, ...]] | None = None
        """The latest text :meth:`mentioned` read, with its answer and :attr:`_learned` when
        it began: a lookup asks it of the same question twice (the speakers it calls by
        name, the entity foci)."""
        self.add(names)

    def add(
        self, names: Iterable[str], *, capitalised: bool = False, speakers: bool = False
    ) -> None:
        """Learn more names (case-insensitive); function words, day and month names
        and the chat's role names are not names. A name learned ``capitalised`` (a word
        memory only knows as a thing: "Fantasy") is mentioned only where it is written
        capitalised, until it is learned without. ``speakers``: the names people speak
        under, of which one function, day or month word is a name too ("April", "Will",
        "May": people are called so), mentioned only where it is written as a name
        (capitalised, not opening a sentence, and not also written in lower case in the
        same text: "What did April buy?", never "Will you come?")."""
        try:
            self._add(names, capitalised, speakers)
        finally:
            self._learned += 1  # after the change: an answer begun during it is not kept

    def _add(self, names: Iterable[str], capitalised: bool, speakers: bool = False) -> None:
        for name in names:
            words = [w for w in _key_words(name) if w]
            key = " ".join(words)
            if not key:
                continue
            if not _nameable(words):
                if speakers and len(words) == 1 and key not in ROLE_NAMES:
                    self._names.setdefault(key, name)
                    self._strict.add(key)
                continue
            if key in self._names:
                if not capitalised:
                    self._capitalised.discard(key)
                continue
            self._names[key] = name
            if all(is_common_word(w) for w in words if w not in _CONNECTORS):
                self._strict.add(key)
            if capitalised:
                self._capitalised.add(key)

    def add_relations(self, predicates: Iterable[str]) -> None:
        """Learn the phrases that name the speaker's relations memory holds: for a
        ``has_sister`` claim, "my sister", "minha irmã" and "mi hermana"."""
        try:
            for predicate in predicates:
                relation = by_predicate(predicate)
                if relation is None:
                    continue
                for phrase in phrases(relation):
                    words = [plain(w) for w in _key_words(phrase)]
                    self._relations.setdefault(" ".join(words), phrase)
        finally:
            self._learned += 1

    def names(self) -> list[str]:
        """The display form of every known name."""
        return list(self._names.values())

    def __len__(self) -> int:
        return len(self._names)

    def mentioned(self, text: str) -> list[str]:
        """Known names and relation phrases that occur in ``text`` as whole words,
        longest first."""
        learned, last = self._learned, self._last
        if last is not None and last[0] == learned and last[1] == text:
            return list(last[2])
        found = self._mentioned(text)
        self._last = (learned, text, tuple(found))
        return found

    def _mentioned(self, text: str) -> list[str]:
        tokens = _tokens(_composed(text))
        if not tokens:
            return []
        keys = [t.key for t in tokens]
        plains = [plain(k) for k in keys] if self._relations else keys
        lower = {t.key for t in tokens if t.word.islower()}
        found: dict[str, str] = {}
        for size in range(_MAX_GRAM, 0, -1):
            for start in range(len(keys) - size + 1):
                key = " ".join(keys[start : start + size])
                if key in self._names and self._written_as_name(key, tokens[start], lower):
                    found.setdefault(key, self._names[key])
                relation = self._relations.get(" ".join(plains[start : start + size]))
                if relation is not None:
                    found.setdefault(relation, relation)
        return list(found.values())

    def _written_as_name(self, key: str, first: _Token, lower: set[str]) -> bool:
        if key in self._strict:
            return first.capitalised and not first.opens and first.key not in lower
        return first.capitalised or key not in self._capitalised


def _nameable(words: Sequence[str]) -> bool:
    """Whether the words of a name can name anything (see :meth:`NameIndex.add`)."""
    if " ".join(words) in ROLE_NAMES:
        return False
    if len(words) == 1:
        return not (is_function_word(words[0]) or is_calendar_word(words[0]))
    return not all(is_function_word(w) or w in _CONNECTORS for w in words)
