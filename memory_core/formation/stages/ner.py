"""Lexical NER, the offline default: capitalised spans, quoted terms and known aliases.

Known aliases are found whatever their case ("lisbon" once Lisbon is known), so names
memory already holds keep being recognised even when the user types in lower case.

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
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from ...text.names import extract_names
from ...text.words import WORD
from ..interfaces import Interpretation, Mention

__all__ = ["LexicalNER", "occurrences"]

_SEPARATOR = "\x00"  # never a word character: joins a name's words into one key


class LexicalNER:
    """Capitalised spans not merely opening a sentence, quoted terms, known names."""

    interpretation = Interpretation("ner", "lexical", "capitalised-quoted-known", "1")

    def mentions(self, text: str, known: Sequence[str] = ()) -> list[Mention]:
        found = occurrences(text, [*extract_names(text), *known])
        spans = _outermost(itertools.chain.from_iterable(found.values()))
        return [Mention(start, end, text[start:end]) for start, end in spans]


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
