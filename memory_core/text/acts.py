"""What a turn does: ask, state, or restate what it was shown.

Memory keeps every turn, but not every turn tells something. A question ("Where does my
cousin live?") is short and made of the very words that will be asked again, so ranked
as a statement it outranks the statement that answers it; an answer that restates the
memory it was shown competes with its own source. This module tells them apart, from
the text alone, in English, Portuguese and Spanish, with no model:

* a sentence **asks** when it ends with ``?`` or opens with ``¿``; or, without the mark
  (people leave it out in chat), when it opens with a request to be told or reminded
  ("tell me", "do you remember", "diz-me", "lembras-te", "dime", "recuérdame") or, in
  English, with a question word followed by an auxiliary ("where does", "what is") or an
  auxiliary followed by a subject ("is she", "do you"). A bare question word does not
  ask: "When I was a kid, I lived in Paris." and "Quando eu era criança ..." state;
* a sentence is **phatic** when every word of it is a greeting, a thanks or another
  conversational word ("Thanks!", "Olá", "¡Genial!");
* a sentence **states** when it neither asks nor is phatic and has three words or more
  (the keywords of a search, "volcano", state nothing);
* a text :func:`asks` when one of its sentences asks; it **is a question**
  (:func:`is_question`) when one asks and every other one is phatic: it tells nothing
  that memory could answer a later question with; what a note on memory's coverage is
  about is the text less its stating sentences (:func:`unstated`);
* an answer **restates** what it was shown (:func:`restated_share`) by the share of its
  content words that the shown text holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .words import STOP_WORDS, WORD, split_sentences, stem

__all__ = [
    "PHATIC_WORDS",
    "READ_CHARS",
    "asks",
    "is_question",
    "restated_share",
    "sentence_asks",
    "sentence_states",
    "stems",
    "tells",
    "unstated",
]

READ_CHARS = 4_000
"""The most characters of a text read to compare it (an answer or a fragment may be
megabytes; a restatement says what it restates early)."""

_REQUEST = re.compile(
    r"[\W_]*(?:"
    # English
    r"(?:can|could|would|will) you (?:please )?(?:tell|remind|recall|remember|say|list|name)\b"
    r"|(?:please )?(?:tell|remind) me\b|do you (?:remember|recall|know)\b"
    r"|(?:remind|tell) us\b|what about\b|how about\b|any idea\b"
    # Portuguese
    r"|(?:diz|diga|conta|conte|lembra|lembre)-me\b|me (?:diz|diga|conta|conte|lembra|lembre)\b"
    r"|(?:você |tu )?(?:se )?lembra(?:s)?(?:-te)?(?: de| do| da| que| quando| onde| quem)\b"
    r"|(?:você |tu )?sabe(?:s)? (?:onde|quando|quem|qual|quais|como|o que|se)\b"
    # Spanish
    r"|(?:dime|díme|dígame|cuéntame|cuénteme|recuérdame|recuérdeme)\b"
    r"|(?:te |se )?(?:acuerdas|acuerda|recuerdas|recuerda)(?: de| que| cuando| dónde| quién)?\b"
    r"|sabes (?:dónde|donde|cuándo|quién|cuál|cómo|qué|si)\b"
    r")",
    re.IGNORECASE,
)
_WH = r"(?:what|who|whom|whose|where|when|why|how|which)"
_AUX = (
    r"(?:do|does|did|is|are|was|were|am|can|could|would|should|will|shall|may|might|"
    r"have|has|had|must|isn't|aren't|wasn't|weren't|don't|doesn't|didn't|won't|can't|"
    r"couldn't|wouldn't|shouldn't|haven't|hasn't)"
)
_PRONOUN = r"(?:i|you|he|she|it|we|they)"
_SUBJECT = r"(?:i|you|he|she|it|we|they|my|your|his|her|our|their|the|this|that|there|[A-Z]\w*)"
_ENGLISH = re.compile(
    rf"[\W_]*(?:{_WH}\s+(?:{_AUX}\b|(?!{_PRONOUN}\b)(?-i:[a-z]+) {_AUX}\b)|{_WH}'(?:s|re)\b"
    r"|how (?:many|much|long|old|often|far|come)\b"
    rf"|{_AUX}\s+(?-i:{_SUBJECT})\b)",
    re.IGNORECASE,
)
_STATING_WORDS = 3
_CLOSERS = frozenset("\"'\u201d\u2019\u00bb)")
"""Closing quotes and brackets after a sentence's last word (skipped, as spaces are)."""
_OPENING = re.compile(r"^[\s\"'\u201c\u2018\u00ab(]+")
PHATIC_WORDS = frozenset(
    (
        # apologies and hesitations, in the three languages
        "sorry", "oops", "hmm", "um", "uh", "desculpa", "desculpe", "perdão", "perdon",
        "perdón", "disculpa", "ups",
        # English
        "hi", "hey", "hello", "hiya", "yo", "thanks", "thank", "you", "thx", "ty", "ok",
        "okay", "cool", "great", "nice", "awesome", "perfect", "wow", "oh", "ah", "yes",
        "yeah", "yep", "no", "nope", "sure", "right", "good", "morning", "evening",
        "night", "bye", "goodbye", "cheers", "lol", "haha", "please", "so", "well",
        "alright", "got", "it", "see", "ya", "much", "very", "a", "lot", "again", "and",
        "sounds", "fine", "exactly", "indeed", "interesting", "amazing", "wonderful",
        # Portuguese
        "olá", "oi", "obrigado", "obrigada", "valeu", "tchau", "adeus", "bom", "boa",
        "dia", "tarde", "noite", "ótimo", "otimo", "óptimo", "perfeito", "legal", "sim",
        "não", "nao", "pois", "claro", "beleza", "muito", "entendi", "certo", "está",
        "ta", "tá", "bem", "fixe", "uau", "então", "até", "logo",
        # Spanish
        "hola", "gracias", "vale", "genial", "perfecto", "bueno", "buenos", "buenas",
        "días", "noches", "sí", "muchas", "claro", "adiós", "chao", "vaya", "entiendo",
        "muy", "bien", "qué", "guay", "hasta", "luego", "pues",
    )
)  # fmt: skip
"""Greetings, thanks, apologies and other conversational words (en, pt, es): a sentence
made of them only is phatic."""


def sentence_asks(sentence: str) -> bool:
    """Whether one sentence asks (see the module docstring)."""
    text = sentence.strip()
    if not text:
        return False
    if _closed(text).endswith(("?", "\uff1f")) or _OPENING.sub("", text).startswith("¿"):
        return True
    return bool(_REQUEST.match(text) or _ENGLISH.match(text))


def _closed(text: str) -> str:
    """``text`` less its closing quotes, brackets and spaces, read from the end once (a
    regular expression ``[...]+$`` tries every start of a run that stops short of the
    end: quadratic in a pasted run of spaces between two words)."""
    end = len(text)
    while end and (text[end - 1].isspace() or text[end - 1] in _CLOSERS):
        end -= 1
    return text[:end]


def _phatic(sentence: str) -> bool:
    found = WORD.findall(sentence.lower())
    return bool(found) and all(w in PHATIC_WORDS for w in found)


def sentence_states(sentence: str) -> bool:
    """Whether one sentence tells something: it does not ask, is not phatic, and has
    at least :data:`_STATING_WORDS` words ("Tom lives in Madrid."; not the keywords of
    a search, "volcano", "Ana's bakery")."""
    found = [token for token in sentence.split() if WORD.search(token)]
    return len(found) >= _STATING_WORDS and not sentence_asks(sentence) and not _phatic(sentence)


def unstated(text: str) -> str:
    """``text`` less its sentences that tell something (:func:`sentence_states`): what
    of it asks or looks something up, the part a note on what memory holds is about."""
    return " ".join(s for s in split_sentences(text) if not sentence_states(s))


def asks(text: str) -> bool:
    """Whether some sentence of ``text`` asks (a question or a request to be told)."""
    return any(sentence_asks(s) for s in split_sentences(text))


def tells(text: str) -> bool:
    """Whether some sentence of ``text`` tells something (:func:`sentence_states`): not
    "Cool! What did it look like?" nor "Thanks, Mel!" (a text that only asks, greets or
    thanks); "Wow! I just signed up for a pottery class." tells. Only the first
    :data:`READ_CHARS` characters are read (a long text tells within them)."""
    return any(sentence_states(s) for s in split_sentences(text[:READ_CHARS]))


def is_question(text: str) -> bool:
    """Whether ``text`` asks and tells nothing: one sentence asks and every other is
    phatic or asks too ("Hi! Where does Ana live?"; not "Ana moved. Did you know?")."""
    sentences = split_sentences(text)
    asking = [sentence_asks(s) for s in sentences]
    return any(asking) and all(a or _phatic(s) for a, s in zip(asking, sentences, strict=True))


def restated_share(answer: str, shown: Iterable[str]) -> float:
    """The share of ``answer``'s content words (stems, of its first
    :data:`READ_CHARS` characters) that ``shown`` holds: 1.0 when all of them, 0.0 when
    none or when the answer has no content word."""
    said = stems(answer)
    if not said:
        return 0.0
    held: set[str] = set()
    for text in shown:
        held.update(stems(text))
    return len(said & held) / len(said)


def stems(text: str) -> frozenset[str]:
    """The stems of every content word of ``text``'s first :data:`READ_CHARS`
    characters (:func:`~.words.content_stems` keeps only the first few dozen)."""
    head = text[:READ_CHARS].lower()
    return frozenset(stem(w) for w in WORD.findall(head) if w not in STOP_WORDS and len(w) > 1)
