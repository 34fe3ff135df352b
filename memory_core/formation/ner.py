"""Lexical NER, the offline default: capitalised spans, quoted terms and known aliases.

Known aliases are found whatever their case ("lisbon" once Lisbon is known), so names
memory already holds keep being recognised even when the user types in lower case.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..names import extract_names
from .interfaces import Interpretation, Mention

__all__ = ["LexicalNER"]


class LexicalNER:
    """Capitalised spans not merely opening a sentence, quoted terms, known names."""

    interpretation = Interpretation("ner", "lexical", "capitalised-quoted-known", "1")

    def mentions(self, text: str, known: Sequence[str] = ()) -> list[Mention]:
        spans: dict[tuple[int, int], Mention] = {}
        for name in [*extract_names(text), *known]:
            for match in _occurrences(text, name):
                start, end = match.span()
                if not any(s <= start and end <= e for s, e in spans):
                    spans = {k: v for k, v in spans.items() if not (start <= k[0] and k[1] <= end)}
                    spans[(start, end)] = Mention(start, end, text[start:end])
        return sorted(spans.values(), key=lambda m: m.start)


def _occurrences(text: str, name: str) -> list[re.Match[str]]:
    if not name.strip():
        return []
    pattern = r"(?<![\w])" + re.escape(name) + r"(?![\w])"
    return list(re.finditer(pattern, text, flags=re.IGNORECASE))
