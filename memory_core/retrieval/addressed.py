"""Names people are called by: a question that calls a speaker by the name the other
speaker addresses them with reads as if it named the speaker.

Formation learns that the speaker labelled A is called "Kate" when the other speaker
says "Hey Kate!" to A (``vocative`` aliases: :mod:`memory_core.formation.stages
.addressing`). "What does Kate do?" then must find A's own turns, which carry A's label
and rarely the name "Kate": the graph's entity focus already reaches A's entity through
the alias, and this step puts A's label in place of "Kate" in the question's BM25 terms
and word foci (:meth:`~memory_core.text.question.Question.naming`) and in the text its
vector is encoded from (:func:`as_named`: A's turns are encoded after A's label), as if
the question had named A.

Only when the name is unambiguous: when every entity memory knows by that name is a
speaker addressed by it. A third person who really is called Kate ("I saw Kate
yesterday") keeps the name, and the question then names both and favours neither (the
entity focus spreads over the two; no label is added).

Cost: one pass of the question through the graph's name index (the area's entity foci
make the same one), and set lookups per name found; a question that calls a speaker so
is encoded again (its first encoding started before memory was read).
"""

from __future__ import annotations

import re
import unicodedata

from ..index.memory_graph import MemoryGraph
from ..text.question import QUESTION_CHARS, Question, question_excerpt
from ..text.words import normalise_name

__all__ = ["addressed", "as_named"]


def addressed(question: Question, graph: MemoryGraph) -> Question:
    """``question`` with the speakers it calls by another name named as well (see the
    module); the same question when it calls none."""
    named: list[tuple[str, tuple[str, ...]]] = []
    for name in graph.names.mentioned(question.text):
        key = normalise_name(name)
        speakers = graph.addressed.get(key)
        if not speakers:
            continue
        owners = {n for n in graph.aliases.get(key, ()) if graph.has(n)}
        if not owners or not owners <= speakers.keys():
            continue  # somebody else is called that too
        labels = tuple(dict.fromkeys(speakers[n] for n in sorted(owners)))
        named.append((name, labels))
    return question.naming(tuple(named)) if named else question


def as_named(question: Question) -> str:
    """The question's text with each name of :attr:`~.Question.named` replaced by the
    speakers' names (whole words, any case, accents composed or not: the name index
    finds "Zoé" written "Zoe" and a combining accent, so the text is read composed), cut
    as a question is (:func:`~memory_core.text.question.question_excerpt`): a speaker's
    label can be long and a question can repeat the name, and the text is encoded."""
    if not question.named:
        return question.text
    text = unicodedata.normalize("NFC", question.text)
    for name, speakers in question.named:
        written = unicodedata.normalize("NFC", name)
        pattern = re.compile(rf"(?<!\w){re.escape(written)}(?!\w)", re.IGNORECASE)
        labels = " / ".join(speakers)[:QUESTION_CHARS]  # a megabyte label: its head
        text = question_excerpt(pattern.sub(labels.replace("\\", "\\\\"), text))
    return text
