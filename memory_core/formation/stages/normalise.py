"""Normalisation without a translator: detect the language, keep the text as canonical.

Language detection is :func:`memory_core.text.language.detect_language` (a stopword
vote): good enough to mark a fragment as untranslated non-English so a later translator
can pick it up.
"""

from __future__ import annotations

from ...text.language import detect_language
from ..interfaces import Interpretation, Normalised

__all__ = ["StopwordNormaliser"]


class StopwordNormaliser:
    """Keeps the original text as canonical (untranslated) and records its language."""

    interpretation = Interpretation("normalisation", "none", "stopword-language-vote", "1")

    def normalise(self, text: str) -> Normalised:
        return Normalised(lang=detect_language(text), canonical=text, translated=False)
