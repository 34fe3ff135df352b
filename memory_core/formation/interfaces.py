"""The seams of formation: one small interface per stage, and what flows between them.

Every backend carries an :class:`Interpretation` (stage, backend, model, version) that is
stored with everything it produced, so memory formed by one model can be told from memory
formed by another and re-formed when a backend changes.

Backends raise :class:`BackendError` when they cannot produce a valid output (a missing
model, an unreachable endpoint, output that fails validation after the retry); the
pipeline records the failure and stores nothing from that backend for that input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ..errors import MemoryCoreError
from ..text.similarity import CosineScale

__all__ = [
    "BackendError",
    "Backends",
    "FragmentView",
    "Interpretation",
    "Mention",
    "MentionDetector",
    "MentionEncoder",
    "Normalised",
    "Normaliser",
    "QuestionEncoder",
    "RelationCandidate",
    "RelationExtractor",
    "Segmenter",
    "Vectors",
]

Vectors = npt.NDArray[np.float32]


class BackendError(MemoryCoreError):
    """A formation backend failed; ``raw`` keeps the offending model output, if any."""

    def __init__(self, message: str, *, raw: str | None = None) -> None:
        super().__init__(message)
        self.raw = raw


@dataclass(frozen=True)
class Interpretation:
    """Which backend and model version produced a stage's output."""

    stage: str
    backend: str
    model: str
    version: str = "1"

    @property
    def label(self) -> str:
        """``stage:backend:model@version``, the string stored beside derived rows."""
        return f"{self.stage}:{self.backend}:{self.model}@{self.version}"


class Segmenter(Protocol):
    """Topic segmentation of a run of utterances.

    ``boundaries`` returns sorted indices ``b`` meaning "a new topic starts after
    utterance ``b``" (0 <= b < len(utterances) - 1). ``vectors`` are the utterances'
    MiniLM embeddings when the pipeline has them (row i for utterance i); a backend that
    does not need them ignores them.
    """

    interpretation: Interpretation

    def boundaries(
        self, utterances: Sequence[str], vectors: Vectors | None = None
    ) -> list[int]: ...


@dataclass(frozen=True)
class Normalised:
    """A fragment's language and canonical English text.

    ``names`` pairs each proper name as written in the original with its English form
    (``("Alemanha", "Germany")``), so linking can record other-language aliases.
    ``translated`` is False when the text was kept as is (no translator configured, or
    already English).
    """

    lang: str
    canonical: str
    translated: bool
    names: tuple[tuple[str, str], ...] = ()


class Normaliser(Protocol):
    """Language detection and translation to canonical English."""

    interpretation: Interpretation

    def normalise(self, text: str) -> Normalised: ...


@dataclass(frozen=True)
class Mention:
    """A span ``text[start:end]`` naming something; ``label`` as NER tags it (PER, LOC, ORG,
    MISC). ``relation`` is the speaker's relation the text names it by, when it says so
    ("sister" for "my sister Marta", "a minha irmã Marta"): formation stores it as the
    claim ``has_<relation>`` (see :mod:`memory_core.text.kinship`)."""

    start: int
    end: int
    surface: str
    label: str = "MISC"
    confidence: float = 1.0
    relation: str | None = None


class MentionDetector(Protocol):
    """NER: the mentions in a (canonical) text. ``known`` are names memory already has."""

    interpretation: Interpretation

    def mentions(self, text: str, known: Sequence[str] = ()) -> list[Mention]: ...


class MentionEncoder(Protocol):
    """Context representations of mentions: one L2-normalised vector per text."""

    interpretation: Interpretation
    dimension: int

    def encode(self, texts: Sequence[str]) -> Vectors: ...


class QuestionEncoder(MentionEncoder, Protocol):
    """The sentence encoder of a store: texts to store, and questions to retrieve with."""

    def encode_question(self, text: str) -> Vectors: ...

    def encode_words(self, words: Sequence[str]) -> Vectors:
        """Single words' vectors (the word bridge's: :mod:`memory_core.retrieval.bridge`)."""
        ...

    multilingual: bool
    """Whether a text and its translation get close vectors."""
    cosine_scale: CosineScale
    """Where its cosines lie against MiniLM's (:mod:`memory_core.text.similarity`)."""

    def reuse_key(self, text: str) -> str | None:
        """Where a question's vector may serve as the stored vector of the same text: its
        key (see :mod:`memory_core.storage.tables.question_vectors`); else None."""
        ...


@dataclass(frozen=True)
class RelationCandidate:
    """A typed claim found in a fragment, before linking and mutation classification.

    ``subject``/``obj`` are surface names (or ``"<speaker>"`` for the fragment's speaker);
    ``obj_is_entity`` tells an entity object from a literal value. ``correction`` is set
    when the text marks the claim as correcting or updating an earlier one.
    """

    subject: str
    predicate: str
    obj: str
    obj_is_entity: bool = True
    confidence: float = 1.0
    valid_from: str | None = None
    correction: bool = False
    evidence: str = ""


@dataclass(frozen=True)
class FragmentView:
    """What a relation extractor sees of a fragment."""

    text: str
    speaker: str | None
    role: str
    mentions: tuple[str, ...] = field(default_factory=tuple)


class RelationExtractor(Protocol):
    """Typed relations stated in a fragment."""

    interpretation: Interpretation

    def extract(self, fragment: FragmentView) -> list[RelationCandidate]: ...


@dataclass(frozen=True)
class Backends:
    """The stage backends of one store (see :mod:`.backends` for building them)."""

    normaliser: Normaliser
    encoder: QuestionEncoder
    segmenter: Segmenter
    ner: MentionDetector
    mentions: MentionEncoder
    relations: RelationExtractor
