"""What flows through a formation pass: one queued row's stage outputs, and failures."""

from __future__ import annotations

from dataclasses import dataclass, field

from .interfaces import Mention, Normalised, RelationCandidate, Vectors

__all__ = ["Failure", "Item"]


@dataclass
class Item:
    """One queued log row and everything the pre-write stages made of it."""

    log_id: int
    conversation: str
    role: str
    speaker: str
    text: str
    ts: float
    superseded: bool
    name: str | None = None
    normalised: Normalised | None = None
    vector: Vectors | None = None
    text_vector: Vectors | None = None
    """The vector of the text alone when :attr:`vector` also encodes the speaker's name
    (``pipeline._embedded``): the context of the turn's mentions, so entities of one
    speaker do not all look alike; None when the two are the same."""
    mentions: list[Mention] = field(default_factory=list)
    mention_vectors: list[Vectors | None] = field(default_factory=list)
    speaker_vector: Vectors | None = None
    claims: list[RelationCandidate] = field(default_factory=list)
    new_segment: bool = False
    fragment_id: int = 0
    previous: int | None = None
    """The conversation's fragment before this one (set when the fragment is placed)."""
    entity_ids: list[int] = field(default_factory=list)
    attempts: int = 0
    """Formation attempts counted against the row, this one included once claimed."""
    failed: str | None = None
    """Why this attempt skipped the row (it stays queued), or None."""
    sources: tuple[int, ...] = ()
    """The fragments the row restates, as logged (an answer given memory)."""
    kind: str = "stated"
    """What the row does (see :mod:`memory_core.text.acts`): ``stated``, ``asked`` or
    ``restated``; only a statement's claims become relations."""

    @property
    def topic(self) -> Vectors | None:
        """What the turn is about, as a vector: its text alone (:attr:`text_vector`) where
        the stored vector also encodes the speaker. Contexts and entities are placed by
        it, so one speaker's turns about two topics are not one topic."""
        return self.vector if self.text_vector is None else self.text_vector

    def fresh(self) -> Item:
        """The same row, without what an earlier attempt made of it."""
        return Item(
            self.log_id,
            self.conversation,
            self.role,
            self.speaker,
            self.text,
            self.ts,
            self.superseded,
            self.name,
            attempts=self.attempts,
            sources=self.sources,
        )


@dataclass
class Failure:
    """A backend failure to record: stage, interpretation, input row, error, raw output."""

    stage: str
    interpretation: str
    log_id: int | None
    error: str
    raw: str | None
