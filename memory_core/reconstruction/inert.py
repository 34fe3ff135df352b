"""Stored text made inert for the memory block: it can neither start a line of its own
nor close or forge the block's delimiters, headings, labels or citations.

Stored text comes from users (and a conversation id from a request header), so nothing
stored may be able to pass for the block's own structure (see :mod:`.reconstruction`):

* :func:`inert` puts content on one line (control characters become spaces, every run of
  whitespace one space) and defuses every tag of the block inside it, in any case or
  spacing, with or without the slash, attributes or its closing bracket, look-alikes
  included (compared by NFKC compatibility form plus the angle brackets, quotation marks
  and slashes listed in ``_LOOK_ALIKES``; invisible format characters inside a tag are
  ignored): its angle brackets become parentheses. Content that ends in the start of a
  tag has its last opener turned into ``(`` too, since the line below could complete it.
* :func:`label` makes a speaker label, heading or name of a statement: one line, at most
  ``limit`` characters, without control characters or any of ``: [ ] < >`` (look-alikes
  too), so a name can never forge a label, a heading or a citation ``[n]``.

Normal text is returned unchanged.
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["inert", "label"]

_NOT_IN_LABEL = frozenset(":[]<>")
_LOOK_ALIKES = {  # beyond NFKC, which already folds the fullwidth and small forms
    **dict.fromkeys("\u2039\u2329\u3008\u27e8\u276e\ufe64\u02c2\u1438", "<"),
    **dict.fromkeys("\u203a\u232a\u3009\u27e9\u276f\ufe65\u02c3\u1433", ">"),
    **dict.fromkeys("\u2044\u2215\u29f8", "/"),
}
_OPENERS = frozenset(c for c, a in _LOOK_ALIKES.items() if a == "<") | {"<", "\ufe64", "\uff1c"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc
_TAG = re.compile(r"<\s*/?\s*retrieved[\W_]*memory[^<>]{0,64}>?", re.IGNORECASE)
_TAG_LETTERS = "retrievedmemory"
_NOT_LETTER = re.compile(r"[\W_]")


def label(value: str | None, limit: int) -> str:
    """``value`` on one line, without control characters or ``: [ ] < >`` (look-alikes
    included), at most ``limit`` characters; may be empty."""
    return _folded_label((value or "")[: 4 * limit], limit)


@functools.lru_cache(maxsize=4096)
def _folded_label(head: str, limit: int) -> str:
    """:func:`label` of a value's head, cached: a lookup labels every line's speaker and
    conversation (about 24 a question) from a handful of values, each folded character by
    character."""
    head = _CONTROL.sub(" ", head)
    kept = "".join(c for c in head if _NOT_IN_LABEL.isdisjoint(_fold(c)))
    return " ".join(kept.split())[:limit].rstrip()


def inert(text: str) -> str:
    """``text`` on one line (control characters and whitespace runs become one space),
    with every block tag in it defused (see the module docstring)."""
    text = " ".join(_CONTROL.sub(" ", text).split())
    return text if _OPENERS.isdisjoint(text) else _defused(text)


def _defused(text: str) -> str:
    """``text`` with the angle brackets of every block tag turned into parentheses, and
    its last opener too when what follows it could be the start of a tag."""
    folded: list[str] = []
    where: list[int] = []  # index in ``text`` of each character of ``folded``
    for index, char in enumerate(text):
        if unicodedata.category(char) != "Cf":  # invisible format characters: skipped
            form = _fold(char)
            folded.append(form)
            where.extend([index] * len(form))
    chars = list(text)
    visible = "".join(folded)
    for match in _TAG.finditer(visible):
        chars[where[match.start()]] = "("
        if match.group().endswith(">"):
            chars[where[match.end() - 1]] = ")"
    last = visible.rfind("<")
    if last >= 0 and _TAG_LETTERS.startswith(_NOT_LETTER.sub("", visible[last + 1 :]).lower()):
        chars[where[last]] = "("
    return "".join(chars)


def _fold(char: str) -> str:
    """What ``char`` looks like: its look-alike, else its compatibility form (NFKC)."""
    return _LOOK_ALIKES.get(char) or unicodedata.normalize("NFKC", char)
