"""Coverage: which of the question's foci the memory block holds something about.

A model given memory that does not mention what was asked may guess from what it was
given; told "memory holds nothing about: cat", it can say it does not know. So each
content focus of the question gets a verdict:

* The foci are the question's words, lowercased, without English stop words, without
  the built-in question and function words of English, Portuguese and Spanish
  (:data:`_IGNORED`: "remember", "tell", "onde", "cuándo" ...) or conversational filler,
  without numbers and words shorter than ``min_chars``, plus ``coverage.ignore``; at
  most :data:`.text.MAX_QUERY_TERMS`. A question without any (a greeting) gets no note.
* A focus is *covered* when its stem is a word of a fragment or statement the block
  renders (of its first 4,000 characters), or of a speaker's name, or the start of one
  ("Mel" for Melanie); or, when the caller says what memory holds (``held``), when at
  least ``held_min_fragments`` fragments of the whole memory use it (``where``:
  ``memory``). The note is "memory holds nothing about", and it must be true of memory,
  not just of the block: on the LoCoMo dev set, judged by the block alone, a third of
  the questions got a note, mostly naming verbs and adjectives that the memory holds
  but the ten fragments happen not to use ("decide", "promote", "temporary"); judged by
  memory, a note names what was never said (a typo, a city never mentioned).
  Comparison is by :func:`.text.stem` on case-folded, diacritics-free words, so
  "puppies" meets "puppy" and "Málaga" meets "malaga"; a synonym does not (a false
  "nothing about" is the worse error, and a synonym a memory holds is rarely one it
  holds nowhere else). :class:`Coverage` reports each verdict for the receipt.
* The note names an uncovered focus that is a name (written capitalised past the start
  of a sentence: "Barcelona", "Jean") always; another word only when at most
  ``max_covered_share`` of the question's foci are covered ("did she mention her cat?":
  half) and it is not a common verb (:data:`_COMMON_VERBS`: "receive", "choose"). A word
  missing from a question whose other words memory holds is mostly how the question
  says it, not what it is about ("how many attended the party she hosted?" when memory
  says she "threw" it), and a verb is how a question relates what it names ("what did
  Gina receive from the contest?" when memory says she "won a trophy" there). Months and
  weekdays are never foci: a date is in the fragments' headings, not in their words. On
  the LoCoMo dev set, before these rules, months, verbs and such words were most of what
  the notes named (``docs/evaluation.md``).
* *Nothing found*: foci exist, none is covered, and no rendered fragment is at least
  ``empty_below_similarity`` similar to the question by embedding (when similarities are
  known); the block is then the note alone (``when_empty``), since what was found is
  only what happened to be nearest.

Deterministic, no model, a set lookup per focus over stems cached per fragment text.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..text.words import MAX_QUERY_TERMS, STOP_WORDS, WORD, stem
from .config import CoverageConfig

__all__ = ["NO_FOCI", "Coverage", "FocusVerdict", "Shown", "assess", "foci", "note"]

_READ_CHARS = 4000
_MAX_WORD = 40
"""Longer runs of letters are no word a note should repeat (a pasted hash, a base64 blob)."""
_SENTENCE_START = re.compile(r"(?:^|[.!?¿¡…:;\n])[\W_]*$")
_MIN_PREFIX = 3

_QUESTION_WORDS = (
    # English: asking about memory, not about a topic
    "remember", "recall", "tell", "told", "say", "said", "says", "talk", "talked", "mention",
    "mentioned", "know", "knew", "think", "thought", "ask", "asked", "happen", "happened",
    "ever", "also", "please", "anything", "something", "thing", "things", "kind", "sort",
    "like", "get", "got", "make", "made", "did", "does", "doing", "done", "going", "way",
    "much", "many", "lot", "time", "times", "yes", "yeah", "okay", "hey", "hello", "thanks",
    "thank", "you", "can", "could", "would", "should", "will", "shall", "may", "might",
    "must", "let", "one", "ones", "someone", "anyone", "still", "yet", "already", "again",
    "days", "today", "tonight", "recently", "lately", "currently", "nowadays", "usually",
    "often", "sometimes", "really", "actually", "exactly", "maybe", "perhaps", "probably",
    "likely",
    # months and weekdays (English, Portuguese, Spanish): dates head the fragments
    "january", "february", "march", "april", "june", "july", "august", "september",
    "october", "november", "december", "monday", "tuesday", "wednesday", "thursday",
    "friday", "saturday", "sunday", "janeiro", "fevereiro", "março", "abril", "maio",
    "junho", "julho", "agosto", "setembro", "outubro", "novembro", "dezembro", "enero",
    "febrero", "marzo", "mayo", "junio", "julio", "septiembre", "octubre", "noviembre",
    "diciembre", "segunda", "terça", "quarta", "quinta", "sexta", "sábado", "domingo",
    "lunes", "martes", "miércoles", "jueves", "viernes",
    # Portuguese
    "que", "quê", "qual", "quais", "quem", "onde", "aonde", "quando", "como", "porque",
    "porquê", "quanto", "quanta", "quantos", "quantas", "você", "voce", "vocês", "tu", "eu",
    "ele", "ela", "eles", "elas", "nós", "nos", "meu", "minha", "meus", "minhas", "seu",
    "sua", "seus", "suas", "dele", "dela", "deles", "delas", "um", "uma", "uns", "umas",
    "o", "os", "as", "do", "da", "dos", "das", "no", "na", "nas", "em", "de", "para",
    "pra", "por", "com", "sem", "sobre", "e", "ou", "mas", "não", "nao", "sim", "é", "são",
    "foi", "era", "tem", "ter", "tinha", "está", "esta", "estava", "lembra", "lembras",
    "lembrar", "disse", "falou", "falei", "sabe", "acha", "isso", "isto", "aquilo", "esse",
    "essa", "este", "aquele", "aquela", "já", "ainda", "também", "muito", "mais", "menos",
    "olá", "oi", "obrigado", "obrigada", "coisa", "vez", "tudo", "bem", "bom", "boa", "vai",
    "beleza", "valeu", "tchau",
    # Spanish
    "qué", "cuál", "cuáles", "quién", "quiénes", "dónde", "donde", "adónde", "cuándo",
    "cómo", "por", "cuánto", "cuánta", "cuántos", "cuántas", "usted", "ustedes", "yo",
    "él", "ellos", "ellas", "nosotros", "mi", "mis", "tu", "tus", "su", "sus", "un",
    "una", "unos", "unas", "el", "la", "los", "las", "del", "al", "en", "con", "sin",
    "y", "pero", "sí", "es", "son", "fue", "era", "tiene", "tenía", "está", "estaba",
    "recuerdas", "recuerda", "recordar", "dijo", "dije", "habló", "sabes", "sabe",
    "crees", "eso", "esto", "aquello", "ese", "esa", "este", "aquel", "ya", "todavía",
    "también", "muy", "más", "menos", "hola", "gracias", "cosa", "vez", "le", "les", "lo",
    "me", "te", "se", "nos", "tal", "bueno", "buenos", "buenas", "estás", "va", "adiós",
)  # fmt: skip


_COMMON_VERBS = (
    # the common English verbs (and a few prepositions questions use) by which a question
    # says how something relates rather than what it is about: a memory that holds the
    # topic often words the relation differently ("receive" / "got", "win" / "won")
    "accept", "according", "achieve", "add", "agree", "allow", "appear", "apply", "arrive",
    "attend", "avoid", "become", "begin", "believe", "bring", "build", "buy", "call",
    "care", "carry", "catch", "cause", "celebrate", "change", "choose", "collect", "come",
    "compare", "complete", "consider", "continue", "cover", "create", "decide", "describe",
    "develop", "discover", "discuss", "draw", "drive", "earn", "encourage", "end", "enjoy",
    "explain", "express", "face", "fall", "feel", "fill", "find", "finish", "follow",
    "forget", "gain", "give", "grow", "handle", "hear", "help", "hold", "hope", "imagine",
    "improve", "include", "increase", "inspire", "involve", "join", "keep", "learn",
    "leave", "lose", "love", "manage", "mean", "meet", "miss", "motivate", "move", "need",
    "notice", "offer", "open", "organize", "organise", "participate", "pay", "perform",
    "pick", "plan", "play", "prefer", "prepare", "present", "promote", "protect", "prove",
    "provide", "pursue", "put", "reach", "read", "realize", "realise", "receive",
    "recognize", "recognise", "recommend", "reflect", "regarding", "relate", "remain",
    "represent", "require", "return", "reveal", "run", "see", "seem", "sell", "send",
    "serve", "set", "share", "show", "speak", "spend", "stand", "start", "stay", "stop",
    "suggest", "support", "symbolize", "symbolise", "take", "teach", "towards", "toward",
    "try", "turn", "understand", "use", "visit", "wait", "walk", "want", "watch", "wear",
    "win", "wish", "work", "write",
)  # fmt: skip


def _fold(word: str) -> str:
    """Case-folded, diacritics-free."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


_IGNORED = frozenset(stem(_fold(w)) for w in (*_QUESTION_WORDS, *STOP_WORDS))
_RELATIONAL = frozenset(stem(_fold(w)) for w in _COMMON_VERBS)


@dataclass(frozen=True, slots=True)
class FocusVerdict:
    """One focus: the word as the question wrote it (lowercased), and whether the block
    holds it (``where``: ``fragment <id>``, ``statement`` or ``speaker``; ``memory`` when
    only fragments the block does not render use it; None if nothing does)."""

    focus: str
    covered: bool
    where: str | None
    name: bool = False

    def report(self) -> dict[str, object]:
        return {"focus": self.focus, "covered": self.covered, "where": self.where}


@dataclass(frozen=True, slots=True)
class Coverage:
    """Every focus's verdict, whether nothing at all was found, and the foci the note
    names (see :func:`assess`)."""

    verdicts: tuple[FocusVerdict, ...]
    nothing_found: bool
    noted: tuple[str, ...] = ()

    @property
    def uncovered(self) -> tuple[str, ...]:
        return tuple(v.focus for v in self.verdicts if not v.covered)


NO_FOCI = Coverage((), False)


def foci(question: str, config: CoverageConfig) -> list[tuple[str, str, bool]]:
    """``(word, stem, name)`` of each content focus of ``question``, in order; ``name``:
    the question writes it capitalised past the start of a sentence (a proper name)."""
    ignored = _IGNORED | {stem(_fold(w)) for w in config.ignore}
    out: dict[str, tuple[str, bool]] = {}
    for match in WORD.finditer(question):
        written = match.group()
        word = written.lower()
        if not config.min_chars <= len(word) <= _MAX_WORD or word.isdigit():
            continue
        key = stem(_fold(word))
        if key in ignored:
            continue
        name = written[0].isupper() and not _SENTENCE_START.search(question[: match.start()])
        if word in out:
            out[word] = (key, out[word][1] or name)
            continue
        if any(k == key for k, _ in out.values()):
            continue
        out[word] = (key, name)
        if len(out) == MAX_QUERY_TERMS:
            break
    return [(word, key, name) for word, (key, name) in out.items()]


@dataclass(frozen=True, slots=True)
class Shown:
    """A text the block renders, for coverage: where it is, what it says, how similar
    to the question it is (None: unknown)."""

    where: str
    text: str
    similarity: float | None = None


def assess(
    question: str | None,
    shown: Sequence[Shown],
    config: CoverageConfig,
    held: Callable[[str], int] | None = None,
) -> Coverage:
    """The verdict of each focus of ``question`` against what the block renders and,
    with ``held`` (a word -> the fragments of memory that use it), what memory holds."""
    if not question:
        return NO_FOCI
    wanted = foci(question, config)
    if not wanted:
        return NO_FOCI
    verdicts = []
    for word, key, name in wanted:
        where = next((s.where for s in shown if _holds(s, key)), None)
        if where is None and held is not None and held(word) >= config.held_min_fragments:
            where = "memory"
        verdicts.append(FocusVerdict(word, where is not None, where, name))
    similar = [s.similarity for s in shown if s.similarity is not None]
    close = bool(similar) and max(similar) >= config.empty_below_similarity
    nothing = not any(v.covered for v in verdicts) and not close
    share = sum(v.covered for v in verdicts) / len(verdicts)
    mostly_missing = share <= config.max_covered_share
    noted = tuple(
        v.focus
        for v, (_, key, _) in zip(verdicts, wanted, strict=True)
        if not v.covered and (v.name or (mostly_missing and key not in _RELATIONAL))
    )
    return Coverage(tuple(verdicts), nothing, noted)


def note(coverage: Coverage, config: CoverageConfig) -> str | None:
    """``memory holds nothing about: cat, lisbon`` (the first ``max_listed``), or None."""
    missing = coverage.noted[: config.max_listed]
    if not config.note or not missing:
        return None
    return "Memory holds nothing about: " + ", ".join(missing)


def _holds(shown: Shown, key: str) -> bool:
    """Whether ``shown`` holds the focus stem ``key``: one of its words, or for a
    speaker the start of a word of the name ("mel" for Melanie, as people shorten)."""
    stems = _stems(shown.text[:_READ_CHARS])
    if key in stems:
        return True
    return (
        shown.where == "speaker"
        and len(key) >= _MIN_PREFIX
        and any(s.startswith(key) for s in stems)
    )


@functools.lru_cache(maxsize=1024)
def _stems(text: str) -> frozenset[str]:
    """The stem of every word of ``text`` (a fragment's first ``_READ_CHARS``
    characters: as far as a line of the block reads a long one, about)."""
    return frozenset(stem(_fold(w)) for w in WORD.findall(text.lower()))
