"""Coverage: which of the question's foci the memory block holds something about.

A model given memory that does not mention what was asked may guess from what it was
given; told "memory holds nothing about: cat", it can say it does not know. So each
content focus of the question gets a verdict:

* The foci are the question's content words (:attr:`~memory_core.text.question.Question.foci`:
  without the built-in question and function words of English, Portuguese and
  Spanish, numbers, words shorter than ``min_chars`` and ``coverage.ignore``; see
  :func:`ask`). A question without any (a greeting) gets no note.
* A focus is *covered* when its stem is a word of a fragment or statement the block
  renders (of its first 4,000 characters), or of a speaker's name, or the start of one
  ("Mel" for Melanie); or, when the caller says what memory holds (``held``), when at
  least ``held_min_fragments`` fragments of the whole memory use it (``where``:
  ``memory``). The note is "memory holds nothing about", and it must be true of memory,
  not just of the block: on the LoCoMo dev set, judged by the block alone, a third of
  the questions got a note, mostly naming verbs and adjectives that the memory holds
  but the ten fragments happen not to use ("decide", "promote", "temporary"); judged by
  memory, a note names what was never said (a typo, a city never mentioned).
  Comparison is by :func:`~memory_core.text.words.stem` on case-folded, diacritics-free words, so
  "puppies" meets "puppy" and "Málaga" meets "malaga"; a synonym does not (a false
  "nothing about" is the worse error, and a synonym a memory holds is rarely one it
  holds nowhere else). :class:`Coverage` reports each verdict for the receipt.
* The note names an uncovered focus that is a name (written capitalised past the start
  of a sentence: "Barcelona", "Jean") always; another word only when at most
  ``max_covered_share`` of the question's foci are covered ("did she mention her cat?":
  half) and it is not a common verb (:data:`.text.question.COMMON_VERBS`: "receive",
  "choose"). A word missing from a question whose other words memory holds is mostly
  how the question says it, not what it is about ("how many attended the party she
  hosted?" when memory says she "threw" it), and a verb is how a question relates what
  it names ("what did Gina receive from the contest?" when memory says she "won a
  trophy" there). Months and
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

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..text.question import RELATIONAL, Question, fold
from ..text.words import WORD, stem
from .config import CoverageConfig

__all__ = ["NO_FOCI", "Coverage", "FocusVerdict", "Shown", "ask", "assess", "note"]

_READ_CHARS = 4000
_MIN_PREFIX = 3


def ask(text: str, config: CoverageConfig, at: dt.date | None = None) -> Question:
    """The :class:`Question` ``text`` asks on day ``at``, its foci as ``config`` counts
    them."""
    return Question.of(
        text, min_focus_chars=config.min_chars, ignore_foci=config.ignore, at=at
    )


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


@dataclass(frozen=True, slots=True)
class Shown:
    """A text the block renders, for coverage: where it is, what it says, how similar
    to the question it is (None: unknown)."""

    where: str
    text: str
    similarity: float | None = None


def assess(
    question: Question | None,
    shown: Sequence[Shown],
    config: CoverageConfig,
    held: Callable[[str], int] | None = None,
) -> Coverage:
    """The verdict of each focus of ``question`` (built by :func:`ask` with ``config``)
    against what the block renders and, with ``held`` (a word -> the fragments of memory
    that use it), what memory holds."""
    wanted = question.note_foci if question is not None else ()
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
        for v, focus in zip(verdicts, wanted, strict=True)
        if not v.covered and (v.name or (mostly_missing and focus.key not in RELATIONAL))
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
    return frozenset(stem(fold(w)) for w in WORD.findall(text.lower()))
