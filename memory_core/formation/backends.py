"""Building the stage backends a :class:`FormationConfig` asks for.

Each stage has a registry of backend factories by name (:data:`SEGMENTERS`,
:data:`NORMALISERS`, :data:`NER_BACKENDS`, :data:`MENTION_ENCODERS`,
:data:`RELATION_EXTRACTORS`); configuration checks a stage's ``backend`` against its
registry's names, and :func:`build_backends` calls the registered factory.

Offline defaults need nothing but the packages: the shipped MiniLM, lexical NER, pattern
relations. ``llm`` backends call a served model through litellm (one client shared by
every such stage); ``transformers`` backends load local models, and a missing one fails
at :func:`build_backends` time, naming the model and its config key.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from ..registry import Registry
from ..text.e5 import E5Encoder
from ..text.embeddings import Encoder, MiniLMEncoder
from ..text.similarity import IDENTITY, CosineScale
from .config import STAGE_CHOICES, EncoderConfig, FormationConfig
from .interfaces import (
    Interpretation,
    MentionDetector,
    MentionEncoder,
    Normaliser,
    RelationExtractor,
    Segmenter,
    Vectors,
)
from .models.structured import TextGenerator
from .pipeline import Backends
from .stages.boundary_model import load_boundary_model, shipped_manifest
from .stages.ner import LexicalNER
from .stages.normalise import StopwordNormaliser
from .stages.relations import PatternRelations
from .stages.segmenter import DEFAULT_THRESHOLD, EmbeddingSegmenter
from .stages.trained_segmenter import TrainedSegmenter

__all__ = [
    "MENTION_ENCODERS",
    "NER_BACKENDS",
    "NORMALISERS",
    "RELATION_EXTRACTORS",
    "SEGMENTERS",
    "STAGE_BACKENDS",
    "BuildContext",
    "SentenceEncoder",
    "build_backends",
]

T = TypeVar("T")
_log = logging.getLogger(__name__)
_Generators = Callable[[str], TextGenerator]


class SentenceEncoder:
    """A sentence :class:`Encoder` seen as a formation :class:`MentionEncoder`, which
    also encodes questions (:meth:`encode_question`)."""

    def __init__(self, encoder: Encoder) -> None:
        self._encoder = encoder
        self.name = encoder.name
        self.dimension = encoder.dimension
        self.multilingual = bool(getattr(encoder, "multilingual", False))
        self.cosine_scale: CosineScale = getattr(encoder, "cosine_scale", IDENTITY)
        """Where the encoder's cosines lie against MiniLM's, on which every formation
        threshold is stated (:mod:`memory_core.text.similarity`)."""
        """Whether the encoder puts a text and its translation close (e5: yes; MiniLM,
        trained on English: no)."""
        # version 2: a named speaker's fragments are encoded after the speaker's name
        # (formation/pipeline.py: _embedded); a store made at version 1 is formed again
        self.interpretation = Interpretation(
            "embedding", "sentence-transformers", encoder.name, version="2"
        )

    def encode(self, texts: Sequence[str]) -> Vectors:
        return self._encoder.encode(texts)

    def encode_question(self, text: str) -> Vectors:
        """A question's vector: the encoder's question path when it has one (MiniLM's
        ``question_weights``, e5's ``query: `` prefix), else its own ``encode``."""
        if isinstance(self._encoder, MiniLMEncoder | E5Encoder):
            return self._encoder.encode_question(text)
        return self._encoder.encode([text])

    def encode_words(self, words: Sequence[str]) -> Vectors:
        """Single words' vectors for the word bridge: the encoder's word path when it has
        one (e5's ``query: `` prefix), else its own ``encode``."""
        path = getattr(self._encoder, "encode_words", None)
        return path(words) if callable(path) else self._encoder.encode(words)

    def reuse_key(self, text: str) -> str | None:
        """The key under which the question vector of ``text`` may stand for its stored
        vector (:mod:`memory_core.storage.tables.question_vectors`), or None when the question
        path computes anything else (then a stored text is always encoded). The key is a
        digest of the encoder's identity (model, runtime, wordpiece cap) and the text."""
        encoder = self._encoder
        if not isinstance(encoder, MiniLMEncoder) or not encoder.question_is_stored:
            return None
        identity = f"{encoder.name}\0{encoder.runtime}\0{encoder.max_tokens}\0{text}"
        return hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class BuildContext:
    """What a stage factory may use: the settings, the shared sentence encoder, and the
    shared text generators (``llm`` served, ``transformers`` local; built once each)."""

    config: FormationConfig
    sentence: SentenceEncoder
    generator: _Generators


_Factory = Callable[[BuildContext], T]

SEGMENTERS: Registry[_Factory[Segmenter]] = Registry(STAGE_CHOICES["segmentation"])
NORMALISERS: Registry[_Factory[Normaliser]] = Registry(STAGE_CHOICES["normalisation"])
NER_BACKENDS: Registry[_Factory[MentionDetector]] = Registry(STAGE_CHOICES["ner"])
MENTION_ENCODERS: Registry[_Factory[MentionEncoder]] = Registry(STAGE_CHOICES["mentions"])
RELATION_EXTRACTORS: Registry[_Factory[RelationExtractor]] = Registry(STAGE_CHOICES["relations"])
STAGE_BACKENDS: Mapping[str, Registry[Any]] = {
    "segmentation": SEGMENTERS,
    "normalisation": NORMALISERS,
    "ner": NER_BACKENDS,
    "mentions": MENTION_ENCODERS,
    "relations": RELATION_EXTRACTORS,
}
"""Stage name -> the registry of its backends (on the names
:data:`~memory_core.formation.config.STAGE_CHOICES` declares)."""


def sentence_encoder(config: EncoderConfig) -> Encoder:
    """The sentence encoder ``config`` names (built lazily: nothing loads until the first
    text is encoded)."""
    if config.model == "e5":  # the runtime is onnx or onnx-int8 (checked by the config)
        return E5Encoder(int8=config.runtime == "onnx-int8")
    return MiniLMEncoder(runtime=config.runtime, question_weights=config.question_weights)


def build_backends(config: FormationConfig, encoder: Encoder | None = None) -> Backends:
    """The backends of every stage, sharing one sentence encoder and one LLM client."""
    sentence = SentenceEncoder(encoder or sentence_encoder(config.encoder))

    @cache
    def generator(kind: str) -> TextGenerator:
        return _llm(config) if kind == "llm" else _causal(config)

    context = BuildContext(config, sentence, generator)
    return Backends(
        normaliser=NORMALISERS.get(config.stage("normalisation").backend)(context),
        encoder=sentence,
        segmenter=SEGMENTERS.get(config.stage("segmentation").backend)(context),
        ner=NER_BACKENDS.get(config.stage("ner").backend)(context),
        mentions=MENTION_ENCODERS.get(config.stage("mentions").backend)(context),
        relations=RELATION_EXTRACTORS.get(config.stage("relations").backend)(context),
    )


def _embedding_segmenter(context: BuildContext) -> EmbeddingSegmenter:
    threshold = context.config.segment_threshold
    scale = context.sentence.cosine_scale
    return EmbeddingSegmenter(
        context.sentence,
        threshold=scale.threshold(DEFAULT_THRESHOLD if threshold is None else threshold),
    )


def _trained_segmenter(context: BuildContext) -> Segmenter:
    """The trained segmenter with the weights for the configured encoder (those of
    ``formation.segmentation.model_path`` when set, else the shipped ones); the
    ``embedding`` heuristic, logged and labelled as a fallback, when none are shipped for
    it. Weights that exist but do not check out raise ``SegmenterWeightsError``."""
    sentence, path = context.sentence, context.config.stage("segmentation").model_path
    manifest = Path(path) if path else shipped_manifest(sentence.name)
    if manifest is None:
        fallback = _embedding_segmenter(context)
        _log.warning(
            "formation.segmentation: no trained segmenter weights for the encoder %r;"
            " using the embedding heuristic",
            sentence.name,
        )
        version = f"{fallback.interpretation.version}-fallback-no-trained-weights"
        fallback.interpretation = replace(fallback.interpretation, version=version)
        return fallback
    model = load_boundary_model(manifest, sentence.name, sentence.dimension)
    return TrainedSegmenter(sentence, model)


def _generated_segmenter(kind: str) -> _Factory[Segmenter]:
    def build(context: BuildContext) -> Segmenter:
        from .models.llm_stages import LLMSegmenter

        return LLMSegmenter(context.generator(kind))

    return build


def _llm_normaliser(context: BuildContext) -> Normaliser:
    from .models.llm_stages import LLMNormaliser

    return LLMNormaliser(context.generator("llm"))


def _transformers_ner(context: BuildContext) -> MentionDetector:
    from .models.hf import TransformersNER

    stage = context.config.stage("ner")
    ner = TransformersNER(str(stage.model), stage.model_path, config_key="formation.ner")
    ner.load()
    return ner


def _transformers_mentions(context: BuildContext) -> MentionEncoder:
    from .models.hf import TransformersMentionEncoder

    stage = context.config.stage("mentions")
    encoder = TransformersMentionEncoder(
        str(stage.model), stage.model_path, config_key="formation.mentions"
    )
    encoder.load()
    return encoder


def _generated_relations(kind: str) -> _Factory[RelationExtractor]:
    def build(context: BuildContext) -> RelationExtractor:
        from .models.llm_stages import LLMRelationExtractor

        return LLMRelationExtractor(context.generator(kind))

    return build


SEGMENTERS.register("trained", _trained_segmenter)
SEGMENTERS.register("embedding", _embedding_segmenter)
SEGMENTERS.register("llm", _generated_segmenter("llm"))
SEGMENTERS.register("transformers", _generated_segmenter("transformers"))
NORMALISERS.register("none", lambda _: StopwordNormaliser())
NORMALISERS.register("llm", _llm_normaliser)
NER_BACKENDS.register("lexical", lambda _: LexicalNER())
NER_BACKENDS.register("transformers", _transformers_ner)
MENTION_ENCODERS.register("minilm", lambda c: c.sentence)
MENTION_ENCODERS.register("transformers", _transformers_mentions)
RELATION_EXTRACTORS.register("patterns", lambda _: PatternRelations())
RELATION_EXTRACTORS.register("llm", _generated_relations("llm"))
RELATION_EXTRACTORS.register("transformers", _generated_relations("transformers"))


def _llm(config: FormationConfig) -> TextGenerator:
    from .models.llm import LiteLLMGenerator

    llm = config.llm
    key = os.environ.get(llm.api_key_env) if llm.api_key_env else None
    return LiteLLMGenerator(
        provider=llm.provider,
        model=llm.model,
        api_base=llm.api_base,
        api_key=key,
        timeout_s=llm.timeout_s,
    )


def _causal(config: FormationConfig) -> TextGenerator:
    from .models.hf import TransformersGenerator

    causal = config.causal_lm
    generator = TransformersGenerator(
        causal.model, causal.model_path, config_key="formation.causal_lm"
    )
    generator.load()
    return generator
