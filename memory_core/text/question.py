"""A question as memory reads it: built once per lookup, carried through every step.

Retrieval is fetch, score, gather and render, and each step reads the question: BM25
its content words, the graph its word stems and the names it mentions, the statements
gathered for it the stems it shares with them, the renderer the sentences that share its
words and the coverage note its *foci*. A :class:`Question` is all of that, worked out
once (:meth:`Question.of`) from the text retrieval reads (:func:`question_excerpt`), plus
its language and its vector (encoded on another thread meanwhile: :meth:`Question.vector`
waits for it). No step tokenises the question again.

*Foci* (:func:`foci`) are the question's words, lowercased, without English stop words,
without the built-in question and function words of English, Portuguese and Spanish
(:data:`QUESTION_WORDS`: "remember", "tell", "onde", "cuándo" ...) or conversational
filler, without numbers and words shorter than ``min_chars``, plus the words a
configuration adds; at most :data:`.words.MAX_QUERY_TERMS`. Each keeps its stem (on
case-folded, diacritics-free text, so "Málaga" meets "malaga") and whether the question
writes it as a name (capitalised past the start of a sentence). What a focus means for
the block is :mod:`memory_core.reconstruction.coverage`'s business.

*Times* are the question's own time words resolved against when it is asked ("in May",
"last year", "em maio", "el año pasado") and the dates it writes out ("7 May 2023", "in
December 2023"), as :mod:`.dates` reads them: retrieval favours the fragments said within
them or speaking of them. A question asked at no known time has only the times it writes
out with their year.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from .acts import unstated
from .dates import Span, find
from .language import detect_language
from .lexicon import is_function_word
from .words import (
    MAX_QUERY_TERMS,
    STOP_WORDS,
    STOP_WORDS_BY_LANGUAGE,
    WORD,
    fold,
    query_terms,
    stem,
)

__all__ = [
    "COMMON_VERBS",
    "MAX_TIMES",
    "QUESTION_CHARS",
    "QUESTION_WORDS",
    "RELATIONAL",
    "Focus",
    "Question",
    "foci",
    "focus_words",
    "fold",
    "question_excerpt",
    "times_of",
]

QUESTION_CHARS = 2_000
"""The most characters of a question that retrieval reads (see :func:`question_excerpt`)."""
_MAX_WORD = 40
"""Longer runs of letters are no word a note should repeat (a pasted hash, a base64 blob)."""
_SENTENCE_ENDS = frozenset(".!?¿¡…:;\n")

QUESTION_WORDS = (
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


COMMON_VERBS = (
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
    # Portuguese and Spanish: the light verbs a question relates with ("O que a Beatriz
    # faz?", "¿Qué hace Carlos?"), in the forms questions use
    "fazer", "faz", "fazem", "fez", "fizeram", "fazia", "gosta", "gostam", "gostar", "quer",
    "querem", "queria", "pode", "podem", "dar", "deu", "ver", "viu", "usa", "usar", "hacer",
    "hace", "hacen", "hizo", "hicieron", "hacía", "gusta", "gustan", "quiere", "quieren",
    "puede", "pueden", "dio", "vio", "usar",
)  # fmt: skip
"""The common English verbs (and a few prepositions questions use) by which a question
says how something relates rather than what it is about."""


_IGNORED = frozenset(stem(fold(w)) for w in (*QUESTION_WORDS, *STOP_WORDS))
RELATIONAL = frozenset(stem(fold(w)) for w in COMMON_VERBS)
"""The stems of :data:`COMMON_VERBS`."""

Vector = npt.NDArray[np.float32]


class Focus(NamedTuple):
    """One content focus: the word as the question wrote it (lowercased), its stem (of
    the folded word), and whether the question writes it as a name."""

    word: str
    key: str
    name: bool


def foci(text: str, *, min_chars: int = 3, ignore: Collection[str] = ()) -> tuple[Focus, ...]:
    """Each content focus of ``text``, in order (see the module docstring): words shorter
    than ``min_chars`` and those in ``ignore`` are never foci."""
    ignored = _IGNORED | {stem(fold(w)) for w in ignore} if ignore else _IGNORED
    out: dict[str, tuple[str, bool]] = {}
    for match in WORD.finditer(text):
        written = match.group()
        word = written.lower()
        if not min_chars <= len(word) <= _MAX_WORD or word.isdigit():
            continue
        key = stem(fold(word))
        if key in ignored or is_function_word(word):
            continue
        name = written[0].isupper() and not _opens_sentence(text, match.start())
        if word in out:
            out[word] = (key, out[word][1] or name)
            continue
        if any(k == key for k, _ in out.values()):
            continue
        out[word] = (key, name)
        if len(out) == MAX_QUERY_TERMS:
            break
    return tuple(Focus(word, key, name) for word, (key, name) in out.items())


def _opens_sentence(text: str, start: int) -> bool:
    """Whether only punctuation and spaces (no letter or digit) stand between ``start``
    and a sentence's end or the text's start: a capital there opens a sentence. Read back
    from ``start`` once; a regular expression ``(?:^|[.!?])[\\W_]*$`` searched in the
    text before each word ran over a pasted punctuation run from each of its characters
    (1,500 "!" before a hundred names: 1.3 s a question)."""
    i = start
    while i > 0 and not text[i - 1].isalnum():
        if text[i - 1] in _SENTENCE_ENDS:
            return True
        i -= 1
    return i == 0


def focus_words(text: str, *, min_chars: int = 3, limit: int = 4096) -> list[str]:
    """The distinct lowercased words of ``text`` that a question could focus on (as
    :func:`foci` reads words, without the cap on their number, up to ``limit``), in order:
    the words memory keeps a vector of for the word bridge (alphabetic only: a code or a
    number is never translated)."""
    out: dict[str, None] = {}
    for match in WORD.finditer(text):
        word = match.group().lower()
        if word in out or not min_chars <= len(word) <= _MAX_WORD or not word.isalpha():
            continue
        if stem(fold(word)) in _IGNORED or is_function_word(word):
            continue
        out[word] = None
        if len(out) >= limit:
            break
    return list(out)


def times_of(text: str, at: dt.date | None) -> tuple[Span, ...]:
    """The distinct spans of time ``text`` names, asked on ``at`` (see the module
    docstring). Without a day to resolve against, only what means the same whatever the
    day: dates written out with their year (the spans found against two far-apart days)."""
    if at is not None:
        return tuple(dict.fromkeys(e.span for e in find(text, at)))[:MAX_TIMES]
    one = {e.span for e in find(text, _FAR[0]) if not e.relative}
    return tuple(dict.fromkeys(e.span for e in find(text, _FAR[1]) if e.span in one))[:MAX_TIMES]


MAX_TIMES = 8
"""The most times a question names that retrieval reads (each is a lookup)."""
_FAR = (dt.date(1970, 1, 1), dt.date(2400, 6, 15))


def question_excerpt(text: str, limit: int = QUESTION_CHARS) -> str:
    """What retrieval reads of a question: all of it up to ``limit`` characters; past
    that its first quarter and last three quarters of ``limit``, joined by `` … `` (people
    paste material and then ask, or ask and then paste). Why: a lookup's cost grows with
    its question (terms, foci, encoding), and a pasted megabyte must not hold the reader
    thread and the interpreter while the request waits."""
    if len(text) <= limit:
        return text
    head, tail = limit // 4, limit - limit // 4
    return text[:head].rsplit(" ", 1)[0] + " … " + text[-tail:].split(" ", 1)[-1]


def _unencoded() -> Vector | None:
    return None


@dataclass(frozen=True)
class Question:
    """What every step of a lookup reads of its question (see the module docstring).

    ``text`` is the excerpt retrieval reads; ``terms`` its content words (BM25's query,
    lowercased, in order); ``stems`` their distinct stems in order (the graph's word
    foci); ``content`` the same as a set (what statements and sentences share with it);
    ``foci`` the coverage foci; ``language`` an ISO 639-1 code or ``und``.
    Invariant: all of them are of ``text``, worked out once by :meth:`of`.
    """

    text: str
    terms: tuple[str, ...]
    stems: tuple[str, ...]
    content: frozenset[str]
    foci: tuple[Focus, ...]
    language: str
    encoded: Callable[[], Vector | None] = dataclasses.field(
        default=_unencoded, repr=False, compare=False
    )
    """Waits for the question's vector (None: not encoded)."""
    noted: tuple[Focus, ...] | None = None
    """The foci a note on memory's coverage is about: those of the sentences that do not
    state things (:func:`~.acts.unstated`), so a turn that tells memory something is
    never told "memory holds nothing about" what it just said; None: all of them."""

    bridged: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Each of its words memory lacks with the memory words it was matched to
    (:mod:`memory_core.retrieval.bridge`); they are in ``terms``, ``stems`` and
    ``content`` too."""

    times: tuple[Span, ...] = ()
    """The spans of time the question names (see the module docstring), in text order."""

    def bridging(self, matched: tuple[tuple[str, tuple[str, ...]], ...]) -> Question:
        """This question with ``matched`` words (question word, memory words) added to its
        terms, stems and content; its foci stay its own."""
        extra = [w for _, words in matched for w in words]
        stems = tuple(dict.fromkeys([*self.stems, *map(stem, extra)]))
        return dataclasses.replace(
            self,
            terms=tuple(dict.fromkeys([*self.terms, *extra])),
            stems=stems,
            content=frozenset(stems),
            bridged=matched,
        )

    named: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Each name the question calls a speaker by that is not the speaker's label but how
    the other speaker addresses them ("Kate" for the turns labelled A), with the
    speakers' names (:mod:`memory_core.retrieval.addressed`); in ``terms``, ``stems``
    and ``content`` the speakers' names stand in place of the name asked, as if the
    question had written them."""

    def naming(self, named: tuple[tuple[str, tuple[str, ...]], ...]) -> Question:
        """This question with the speaker names of ``named`` (name asked, speakers'
        names) in place of the names asked in its terms, stems and content; its foci
        stay its own (the coverage note is about what the question wrote)."""
        asked = {t for name, _ in named for t in query_terms(name)}
        extra = [t for _, names in named for name in names for t in query_terms(name)]
        terms = tuple(dict.fromkeys([*(t for t in self.terms if t not in asked), *extra]))
        gone = {stem(t) for t in asked} - {stem(t) for t in terms}
        stems = tuple(dict.fromkeys([*(s for s in self.stems if s not in gone), *map(stem, extra)]))
        return dataclasses.replace(
            self, terms=terms, stems=stems, content=frozenset(stems), named=named
        )

    def translations(self, word: str) -> tuple[str, ...]:
        """The memory words ``word`` was matched to (none when memory uses it)."""
        return next((words for asked, words in self.bridged if asked == word), ())

    @property
    def note_foci(self) -> tuple[Focus, ...]:
        """:attr:`noted`, or every focus."""
        return self.foci if self.noted is None else self.noted

    @classmethod
    def of(
        cls,
        text: str,
        *,
        min_focus_chars: int = 3,
        ignore_foci: Collection[str] = (),
        at: dt.date | None = None,
    ) -> Question:
        """The question ``text`` asks on day ``at`` (None: unknown), read as its
        :func:`question_excerpt`."""
        excerpt = question_excerpt(text)
        language = detect_language(excerpt)
        terms = tuple(query_terms(excerpt, STOP_WORDS_BY_LANGUAGE.get(language, STOP_WORDS)))
        stems = tuple(dict.fromkeys(map(stem, terms)))
        every = foci(excerpt, min_chars=min_focus_chars, ignore=ignore_foci)
        asked = unstated(excerpt)
        noted = None
        if asked != excerpt.strip():
            kept = {f.key for f in foci(asked, min_chars=min_focus_chars, ignore=ignore_foci)}
            noted = tuple(f for f in every if f.key in kept)
        return cls(
            excerpt,
            terms,
            stems,
            frozenset(stems),
            every,
            language,
            noted=noted,
            times=times_of(excerpt, at),
        )

    def encoding(self, encoded: Callable[[], Vector | None]) -> Question:
        """This question, whose vector ``encoded`` waits for."""
        return dataclasses.replace(self, encoded=encoded)

    def vector(self) -> Vector | None:
        """The question's vector (waits for its encoding), or None."""
        return self.encoded()
