"""Which language a text is in: a vote of common words and letters, cheap, offline and
deterministic.

The languages users of this proxy write most (English, Portuguese, Spanish, French,
German, Italian) are told apart by how many of each one's commonest words a text uses,
each word's vote shared among the languages that use it ("que" is Portuguese, Spanish and
French: a third to each; "muy" is Spanish alone: a whole vote), plus the letters and marks
only some of them write (Spanish "¿", "¡", "ñ"; Portuguese "ã", "õ", "ção"; German "ß").
Good enough to mark a fragment as untranslated non-English, to say what language a
question is asked in, and to tell the word bridge which of memory's words are another
language's (:mod:`memory_core.retrieval.bridge`).

Why shared votes: with one whole vote per listed word, Portuguese and Spanish tied on the
words they share and the tie went to the language listed first; a quarter of the Spanish
turns of LoCoMo conv-30 ("¡Hola, Jon! Qué gusto verte") read as Portuguese (75 of 369).
"""

from __future__ import annotations

import re
from collections import defaultdict

__all__ = ["LANGUAGES", "detect_language"]

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_STOPWORDS = {
    "en": "the a and is are was you i it to of in that have for not with this my what we be"
    " do did how when where why your me so just but about they he she her his at on an"
    " would can will there been had has were from really too",
    "pt": "o a os as que não é um uma com para de do da dos das em no na nos nas eu você"
    " meu minha isso está estou tô tá foi muito mais também mas por pra seu sua ele ela"
    " vai ser tem obrigado obrigada valeu oi olá então isso essa esse já aqui agora bem"
    " quando como onde fazer tudo nossa uau legal demais",
    "es": "el la los las que no es un una con para de del en yo tú mi está eso pero muy"
    " también por su sus él ella ser hay estoy qué cómo gracias hola y me te lo le se al"
    " fue ya aquí ahora bien cuando donde hacer todo genial guau estás eres tengo",
    "fr": "le la les que ne pas est un une avec pour de du en je tu mon ma ce c'est et"
    " des sur vous nous il elle très mais aussi",
    "de": "der die das und ist nicht ein eine mit für ich du mein meine es zu den auch"
    " sehr aber wir sie",
    "it": "il lo la gli le che non è un una con per di del in io tu mio mia questo"
    " anche molto ma sono",
}
_VOTES: dict[str, dict[str, float]] = defaultdict(dict)
for _lang, _words in _STOPWORDS.items():
    for _word in set(_words.split()):
        _VOTES[_word][_lang] = 1.0
for _word, _langs in _VOTES.items():
    for _lang in _langs:
        _langs[_lang] = 1.0 / len(_langs)

_MARKS = (
    ("es", re.compile(r"[¿¡ñÑ]"), 1.0),
    ("pt", re.compile(r"[ãõÃÕ]|ção|ções", re.IGNORECASE), 1.0),
    ("de", re.compile(r"[ßäöÄÖ]"), 0.5),
)


def detect_language(text: str) -> str:
    """ISO 639-1 code of the likeliest language, or ``und`` when too little evidence;
    ties go to English, then to the order of :data:`LANGUAGES`."""
    scores = dict.fromkeys(LANGUAGES, 0.0)
    for word in _WORD.findall(text):
        for lang, vote in _VOTES.get(word.lower(), {}).items():
            scores[lang] += vote
    for lang, mark, weight in _MARKS:
        scores[lang] += weight * len(mark.findall(text))
    best = max(LANGUAGES, key=lambda lang: (scores[lang], lang == "en"))
    if scores[best] > 0:
        return best
    return "en" if text.isascii() and _WORD.search(text) else "und"


LANGUAGES = tuple(_STOPWORDS)
"""The languages told apart, in the order ties go (after English)."""
