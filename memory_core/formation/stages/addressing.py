"""Addressing: which speaker a turn's vocatives call, and by which names.

In a conversation between speaker labels A and B, B's turn right after A's is B's reply
to A, so a vocative in it ("Hey Kate!", "Obrigado, Zé", "¿Qué tal, Pepa?": see
:mod:`memory_core.text.vocatives`) is evidence that A is called Kate. Formation records
the name as a name of A's speaker entity (alias source :data:`VOCATIVE`, with the
fragment that first used it), and links the vocative's mention to A, so every fragment
where the name was used is provenance of it.

The evidence must be consistent; a vocative is left to ordinary linking when:

* the turn has no addressee: the turn before it is by the same speaker or by an unnamed
  one (a chat's user or assistant), or there is none (a conversation's first turn);
* the name already names another entity: another speaker (by their label or as the
  name someone else is addressed by), or a person, place or thing memory already knows
  (a name that is "a third person being talked about" is not the listener's);
* NER reads the name as a place or an organisation ("Paris, France is lovely").

Only then is it taken, and it is then kept apart from the entity's other aliases
(:class:`.linking.EntityCache`). Later, the name in the other speaker's reply to the
speaker still names them when nobody else has it ("Love you Kate"); anywhere else (the
speaker's own turn: "my neighbour Kate") it is somebody else, who founds an entity of
their own. A turn that replies to nobody (a conversation's opening "Hey Mel!") holds
back a vocative of a name memory does not know, and the reply that follows it tells whom
it called (the first turn then holds the alias's provenance).

Known limit: the other speaker, replying to A, telling of *another* Kate never mentioned
before ("I saw Kate yesterday" to the Kate it is) is taken for A.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...storage.tables.entities import VOCATIVE
from ...text.names import ROLE_NAMES
from ...text.vocatives import Vocative, vocatives
from ..interfaces import Mention
from .linking import EntityCache, normalise_name

__all__ = ["VOCATIVE", "Address", "addressee", "addresses"]

_NOT_PEOPLE = frozenset({"LOC", "ORG"})


@dataclass(frozen=True, slots=True)
class Address:
    """A vocative of the turn that calls the speaker ``entity_id`` by a name other than
    its own aliases; ``new``: the name was not yet one the entity is addressed by."""

    vocative: Vocative
    entity_id: int
    new: bool


def addressee(
    cache: EntityCache, speaker: str | None, previous_speaker: str | None
) -> int | None:
    """The speaker entity a turn by ``speaker`` replies to: the previous turn's named
    speaker when it is another one, else None."""
    if not speaker or not previous_speaker:
        return None
    if previous_speaker.casefold() in ROLE_NAMES:
        return None
    if previous_speaker.strip().casefold() == speaker.strip().casefold():
        return None
    listener = cache.speaker_named(previous_speaker)
    own = cache.speaker_named(speaker)
    return None if listener is None or listener == own else listener


def addresses(
    text: str, listener: int | None, cache: EntityCache, mentions: Sequence[Mention]
) -> list[Address]:
    """The vocatives of ``text`` that consistently call ``listener`` (see the module),
    in order; none without a listener."""
    if listener is None:
        return []
    labels = {(m.start, m.end): m.label for m in mentions}
    found: list[Address] = []
    for vocative in vocatives(text):
        if labels.get((vocative.start, vocative.end)) in _NOT_PEOPLE:
            continue
        key = normalise_name(vocative.name)
        if not key or cache.owners(vocative.name) - {listener}:
            continue
        if listener in cache.aliases.get(key, set()):
            continue  # the listener's own name ("Hey Caroline!"): ordinary linking's
        found.append(Address(vocative, listener, listener not in cache.addressed.get(key, set())))
    return found
