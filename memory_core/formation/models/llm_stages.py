"""Formation stages answered by a language model: segmentation, normalisation, relations.

Each stage is a prompt, an answer model (:class:`.structured.Answer`: its JSON schema
is what the model sees) and a semantic check, run through
:func:`.structured.structured_call` on any :class:`.structured.TextGenerator` (litellm
to a served endpoint, or transformers locally). The answers suit OpenAI strict mode
(every property required, no extra fields; a nullable field is ``T | None`` without a
default) so constrained decoders can enforce them; the semantic checks add what a schema
cannot say (boundaries sorted, names present in the text). An answer that fails either is
retried once, then the stage raises :class:`.interfaces.BackendError`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from itertools import pairwise
from typing import Annotated

from pydantic import ConfigDict, Field, create_model

from ..interfaces import FragmentView, Interpretation, Normalised, RelationCandidate, Vectors
from .structured import Answer, TextGenerator, structured_call

__all__ = [
    "PREDICATE_PATTERN",
    "SPEAKER",
    "LLMNormaliser",
    "LLMRelationExtractor",
    "LLMSegmenter",
]

SPEAKER = "<speaker>"
"""Subject or object meaning the fragment's speaker."""

PREDICATE_PATTERN = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"
"""Predicates are snake_case English verb phrases."""

_SEGMENT_PROMPT = (
    "You split a conversation into topics. The utterances are numbered from 0. "
    "List the numbers b of the utterances after which a new topic starts "
    "(utterance b+1 opens the new topic), in increasing order, each at most once. "
    "Never list the last utterance. "
    'Answer {"boundaries": []} when the utterances stay on one topic.'
)

_NORMALISE_PROMPT = (
    "You identify the language of a text and translate it to English.\n"
    '- "language": the ISO 639-1 code of the text\'s language (two lowercase letters; '
    '"en" for English).\n'
    '- "english": the whole text in natural English (the text itself when it is already '
    "English), keeping every name, number and date.\n"
    '- "names": every proper name in the text (people, places, organisations, works): '
    '"original" copied exactly as written in the text, "english" its usual English form.'
)

_RELATIONS_PROMPT = (
    "You extract the facts a conversation fragment states, as relations "
    "(subject, predicate, object).\n"
    '- "subject": a name as written in the fragment, or "<speaker>" for the person '
    "speaking the fragment (named below).\n"
    '- "predicate": a short English verb phrase in snake_case, such as lives_in, '
    "works_for, likes, sister_of, has_birthday_on.\n"
    '- "object": the other end: a name ("object_is_entity": true) or a literal value '
    'such as a date, number or description ("object_is_entity": false). '
    '"<speaker>" is allowed here too.\n'
    '- "confidence": from 0 to 1, how plainly the fragment states the fact.\n'
    '- "valid_from": when the fact starts to hold, if the fragment says so, else null.\n'
    '- "correction": true when the fragment corrects or updates something said before '
    '("actually", "not anymore", "I moved").\n'
    "Extract only what the fragment states; infer nothing. "
    'Answer {"relations": []} when it states no fact.'
)


class LLMSegmenter:
    """Topic boundaries chosen by a language model from numbered utterances."""

    def __init__(self, generator: TextGenerator) -> None:
        self.generator = generator
        self.interpretation = Interpretation("segmentation", "llm", generator.name, "1")

    def boundaries(self, utterances: Sequence[str], vectors: Vectors | None = None) -> list[int]:
        """Sorted ``b`` with 0 <= b < n - 1: a new topic starts after utterance ``b``."""
        if len(utterances) < 2:
            return []
        numbered = "\n".join(f"[{i}] {' '.join(u.split())}" for i, u in enumerate(utterances))
        messages = [
            {"role": "system", "content": _SEGMENT_PROMPT},
            {"role": "user", "content": f"Utterances:\n{numbered}"},
        ]
        answer = _boundaries(len(utterances))
        result: list[int] = structured_call(
            self.generator, messages, answer, validate=_sorted_unique
        )
        return result


class LLMNormaliser:
    """Language and canonical English text from a language model acting as translator."""

    def __init__(self, generator: TextGenerator) -> None:
        self.generator = generator
        self.interpretation = Interpretation("normalisation", "llm", generator.name, "1")

    def normalise(self, text: str) -> Normalised:
        """English text is kept as is (``translated`` False); other text is translated."""
        if not text.strip():
            return Normalised(lang="und", canonical=text, translated=False)
        messages = [
            {"role": "system", "content": _NORMALISE_PROMPT},
            {"role": "user", "content": text},
        ]
        result: Normalised = structured_call(
            self.generator, messages, _Normalisation, validate=lambda v: _normalised(text, v)
        )
        return result


class LLMRelationExtractor:
    """Typed relations stated in a fragment, extracted by a language model."""

    def __init__(self, generator: TextGenerator) -> None:
        self.generator = generator
        self.interpretation = Interpretation("relations", "llm", generator.name, "1")

    def extract(self, fragment: FragmentView) -> list[RelationCandidate]:
        """The fragment's claims; ``"<speaker>"`` stands for ``fragment.speaker``."""
        if not fragment.text.strip():
            return []
        messages = [
            {"role": "system", "content": _RELATIONS_PROMPT},
            {"role": "user", "content": _fragment_prompt(fragment)},
        ]
        result: list[RelationCandidate] = structured_call(
            self.generator, messages, _Relations, validate=_relations
        )
        return result


class _Boundaries(Answer):
    boundaries: list[int]


@functools.lru_cache(maxsize=256)
def _boundaries(count: int) -> type[_Boundaries]:
    """The segmentation answer for ``count`` utterances: boundaries in 0..count-2."""
    index = Annotated[int, Field(ge=0, le=count - 2)]
    model: type[_Boundaries] = create_model(
        "segmentation", __base__=_Boundaries, boundaries=(list[index], ...)
    )
    return model


def _sorted_unique(value: _Boundaries) -> list[int]:
    boundaries = list(value.boundaries)
    if any(a >= b for a, b in pairwise(boundaries)):
        raise ValueError(
            f"$.boundaries: must be in increasing order without repeats, got {boundaries}"
        )
    return boundaries


class _Name(Answer):
    original: str = Field(min_length=1)
    english: str = Field(min_length=1)


class _Normalisation(Answer):
    model_config = ConfigDict(title="normalisation")

    language: str = Field(pattern="^[a-z]{2}$")
    english: str
    names: list[_Name]


def _normalised(text: str, value: _Normalisation) -> Normalised:
    language = value.language
    if language == "en":
        return Normalised(lang="en", canonical=text, translated=False)
    english = value.english.strip()
    if not english:
        raise ValueError(f"$.english: empty, but the text is in {language!r}")
    names: list[tuple[str, str]] = []
    for index, name in enumerate(value.names):
        original, translated = name.original.strip(), name.english.strip()
        if not original or original not in text:
            raise ValueError(f"$.names[{index}].original: {original!r} does not occur in the text")
        if (original, translated) not in names:
            names.append((original, translated))
    return Normalised(lang=language, canonical=english, translated=True, names=tuple(names))


class _Relation(Answer):
    subject: str = Field(min_length=1)
    predicate: str = Field(pattern=PREDICATE_PATTERN)
    object: str = Field(min_length=1)
    object_is_entity: bool
    confidence: float = Field(ge=0, le=1)
    valid_from: str | None
    correction: bool


class _Relations(Answer):
    model_config = ConfigDict(title="relations")

    relations: list[_Relation]


def _fragment_prompt(fragment: FragmentView) -> str:
    speaker = fragment.speaker or "unknown"
    lines = [f"Speaker ({SPEAKER}): {speaker}, role {fragment.role}"]
    if fragment.mentions:
        lines.append("Names mentioned: " + ", ".join(fragment.mentions))
    lines.append(f"Fragment:\n{fragment.text}")
    return "\n".join(lines)


def _relations(value: _Relations) -> list[RelationCandidate]:
    candidates: list[RelationCandidate] = []
    for index, item in enumerate(value.relations):
        subject, obj = item.subject.strip(), item.object.strip()
        for field, text in (("subject", subject), ("object", obj)):
            if not text:
                raise ValueError(f"$.relations[{index}].{field}: blank")
        valid_from = item.valid_from.strip() if item.valid_from else None
        candidates.append(
            RelationCandidate(
                subject=subject,
                predicate=item.predicate,
                obj=obj,
                obj_is_entity=item.object_is_entity,
                confidence=float(item.confidence),
                valid_from=valid_from or None,
                correction=item.correction,
            )
        )
    return candidates
