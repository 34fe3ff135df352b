"""What a conversation is called in the memory block: a short label, never a hash.

A client that names its conversations (``X-Conversation-Id: trip-to-porto``, LoCoMo's
``conv-26``) gets its name back. An id that is only an identifier — the proxy's own
(``c`` and 15 hex digits, derived from the first messages), a UUID from Open WebUI, a
ULID — tells a model and a person nothing, so the conversation is called by what it
opened with: ``chat about Beatriz, Coimbra, livraria`` (up to three content words of
its first user message that memory keeps, names first, greetings and apologies left
out), or ``chat`` when there is none.
"""

from __future__ import annotations

import re

from .acts import PHATIC_WORDS
from .kept import kept_when_short
from .question import foci

__all__ = ["MAX_LABEL_WORDS", "is_opaque", "label_of"]

MAX_LABEL_WORDS = 3
"""Content words of the opening message a label shows."""
_READ_CHARS = 400
_HEX = re.compile(r"[0-9a-f]+", re.IGNORECASE)
_SEPARATORS = re.compile(r"[-_:.]")
_OPAQUE_DIGITS = 4
_OPAQUE_LENGTH = 16


_KEPT_IDS = 1024
_KEPT_ID_CHARS = 256
"""The answers of :func:`is_opaque` are kept for the latest ids of at most this many
characters (:mod:`.kept`; the block asks it of every line's conversation; the proxy's ids
are at most 200 characters, a library caller's may be longer and is answered every
time)."""


@kept_when_short(_KEPT_IDS, _KEPT_ID_CHARS)
def is_opaque(conversation_id: str) -> bool:
    """Whether ``conversation_id`` is an identifier only: separators aside, at least 8
    hexadecimal digits with 3 decimal ones among them (a hash, a UUID), or a run of 16 or
    more letters and digits with 4 digits or more (a ULID, a random token)."""
    plain = _SEPARATORS.sub("", conversation_id.strip())
    digits = sum(c.isdigit() for c in plain)
    if len(plain) >= 8 and _HEX.fullmatch(plain) and digits >= 3:
        return True
    return len(plain) >= _OPAQUE_LENGTH and plain.isalnum() and digits >= _OPAQUE_DIGITS


def label_of(conversation_id: str, opening: str | None) -> str:
    """The conversation's label: its id unless :func:`is_opaque`, else ``chat about``
    the opening's first content words (names first), else ``chat``."""
    if conversation_id.strip() and not is_opaque(conversation_id):
        return conversation_id
    found = [f for f in foci((opening or "")[:_READ_CHARS]) if f.word not in PHATIC_WORDS]
    names = [f.word for f in found if f.name]
    words = [*names, *(f.word for f in found if not f.name)][:MAX_LABEL_WORDS]
    if not words:
        return "chat"
    spelled = {f.word: _as_written(f.word, opening or "") for f in found}
    return "chat about " + ", ".join(spelled[w] for w in words)


def _as_written(word: str, text: str) -> str:
    """``word`` as ``text`` first writes it (a name keeps its capital)."""
    match = re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE)
    return match.group() if match else word
