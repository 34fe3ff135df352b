"""Lexical names: the capitalised spans a message mentions (first-version entities).

This is the offline default of the NER stage: a run of capitalised words that does not
merely open a sentence ("Melanie", "New York", "Open WebUI"), plus quoted terms. It is
deliberately conservative; the formation pipeline replaces it with real NER and linking.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["NameIndex", "extract_names"]

_WORD = re.compile(r"[^\W\d_][\w'\u2019-]*", re.UNICODE)
_SENTENCE_ENDS = frozenset(".!?…:")
_POSSESSIVE = re.compile(r"(['\u2019]s?|-)$")
_QUOTED = re.compile(r"[\"“«]([^\"”»\n]{2,40})[\"”»]")
_COMMON = frozenset(
    [
        "i",
        "i'm",
        "i've",
        "i'd",
        "i'll",
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "my",
        "your",
        "our",
        "their",
        "his",
        "her",
        "he",
        "she",
        "we",
        "they",
        "you",
        "me",
        "us",
        "them",
        "yes",
        "no",
        "ok",
        "okay",
        "hi",
        "hey",
        "hello",
        "thanks",
        "thank",
        "oh",
        "wow",
        "well",
        "so",
        "and",
        "but",
        "or",
        "if",
        "when",
        "what",
        "why",
        "how",
        "who",
        "where",
        "which",
        "do",
        "does",
        "did",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "can",
        "could",
        "would",
        "should",
        "will",
        "just",
        "also",
        "really",
        "sure",
        "great",
        "good",
        "nice",
    ]
)
_MAX_WORDS = 4


def extract_names(text: str) -> list[str]:
    """Names mentioned in ``text``, in order of appearance, without duplicates."""
    names: list[str] = []
    run: list[str] = []
    last_end = 0
    for match in _WORD.finditer(text):
        word = match.group()
        raw_gap = text[last_end : match.start()]
        gap = raw_gap.strip()
        sentence_start = last_end == 0 or "\n" in raw_gap or gap[-1:] in _SENTENCE_ENDS
        if run and (gap or len(run) == _MAX_WORDS):
            names.append(" ".join(run))
            run = []
        if word[0].isupper() and word.lower() not in _COMMON and (run or not sentence_start):
            run.append(_POSSESSIVE.sub("", word))
        elif run:
            names.append(" ".join(run))
            run = []
        last_end = match.end()
    if run:
        names.append(" ".join(run))
    names.extend(m.group(1).strip() for m in _QUOTED.finditer(text))
    unique: dict[str, str] = {}
    for name in names:
        if len(name) >= 2:
            unique.setdefault(name.lower(), name)
    return list(unique.values())


class NameIndex:
    """The set of known names, answering "which known names does this text mention?".

    Lookups tokenise the text once and test word n-grams (up to four words) against a
    set, so the cost follows the text's length, not the number of names known.
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._names: dict[str, str] = {}
        self.add(names)

    def add(self, names: Iterable[str]) -> None:
        """Learn more names (case-insensitive)."""
        for name in names:
            key = " ".join(w.lower() for w in _WORD.findall(name))
            if key and key not in _COMMON:
                self._names.setdefault(key, name)

    def names(self) -> list[str]:
        """The display form of every known name."""
        return list(self._names.values())

    def __len__(self) -> int:
        return len(self._names)

    def mentioned(self, text: str) -> list[str]:
        """Known names that occur in ``text`` as whole words, longest first."""
        words = [w.lower() for w in _WORD.findall(text)]
        found: dict[str, str] = {}
        for size in range(_MAX_WORDS, 0, -1):
            for start in range(len(words) - size + 1):
                key = " ".join(words[start : start + size])
                if key in self._names:
                    found.setdefault(key, self._names[key])
        return list(found.values())
