"""Which language a text is in: a stopword vote, cheap, offline and deterministic.

The languages users of this proxy write most (English, Portuguese, Spanish, French,
German, Italian) are told apart by how many of each one's commonest words a text uses:
good enough to mark a fragment as untranslated non-English so a later translator can
pick it up, and to say what language a question is asked in.
"""

from __future__ import annotations

import re

__all__ = ["detect_language"]

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_STOPWORDS = {
    "en": "the and is are was you i it to of in that have for not with this my what we be",
    "pt": "o a os as que não é um uma com para de do da em eu você meu minha isso está",
    "es": "el la los las que no es un una con para de del en yo tú mi está eso pero",
    "fr": "le la les que ne pas est un une avec pour de du en je tu mon ma ce c'est",
    "de": "der die das und ist nicht ein eine mit für ich du mein meine es zu den",
    "it": "il lo la gli le che non è un una con per di del in io tu mio mia questo",
}
_SETS = {lang: frozenset(words.split()) for lang, words in _STOPWORDS.items()}


def detect_language(text: str) -> str:
    """ISO 639-1 code of the likeliest language, or ``und`` when too little evidence."""
    words = [w.lower() for w in _WORD.findall(text)]
    if not words:
        return "und"
    scores = {lang: sum(w in stop for w in words) for lang, stop in _SETS.items()}
    best = max(scores, key=lambda lang: (scores[lang], lang == "en"))
    return best if scores[best] > 0 else ("en" if text.isascii() else "und")
