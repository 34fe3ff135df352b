"""Building the stage backends a :class:`FormationConfig` asks for.

Offline defaults need nothing but the packages: the shipped MiniLM, lexical NER, pattern
relations. ``llm`` backends call a served model through litellm (one client shared by
every such stage); ``transformers`` backends load local models, and a missing one fails
at :func:`build_backends` time, naming the model and its config key.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import cache

from ..embeddings import Encoder, MiniLMEncoder
from .config import FormationConfig
from .interfaces import (
    Interpretation,
    MentionDetector,
    MentionEncoder,
    Normaliser,
    RelationExtractor,
    Segmenter,
    Vectors,
)
from .ner import LexicalNER
from .normalise import StopwordNormaliser
from .pipeline import Backends
from .relations import PatternRelations
from .segmenter import EmbeddingSegmenter
from .structured import TextGenerator

__all__ = ["SentenceEncoder", "build_backends"]

_Generators = Callable[[str], TextGenerator]


class SentenceEncoder:
    """A sentence :class:`Encoder` seen as a formation :class:`MentionEncoder`."""

    def __init__(self, encoder: Encoder) -> None:
        self._encoder = encoder
        self.name = encoder.name
        self.dimension = encoder.dimension
        self.interpretation = Interpretation("embedding", "sentence-transformers", encoder.name)

    def encode(self, texts: Sequence[str]) -> Vectors:
        return self._encoder.encode(texts)


def build_backends(config: FormationConfig, encoder: Encoder | None = None) -> Backends:
    """The backends of every stage, sharing one sentence encoder and one LLM client."""
    sentence = SentenceEncoder(encoder or MiniLMEncoder())

    @cache
    def generator(kind: str) -> TextGenerator:
        return _llm(config) if kind == "llm" else _causal(config)

    return Backends(
        normaliser=_normaliser(config, generator),
        encoder=sentence,
        segmenter=_segmenter(config, sentence, generator),
        ner=_ner(config),
        mentions=_mentions(config, sentence),
        relations=_relations(config, generator),
    )


def _segmenter(
    config: FormationConfig, sentence: SentenceEncoder, generator: _Generators
) -> Segmenter:
    backend = config.stage("segmentation").backend
    if backend == "embedding":
        return EmbeddingSegmenter(sentence, threshold=config.segment_threshold)
    from .llm_stages import LLMSegmenter

    return LLMSegmenter(generator(backend))


def _normaliser(config: FormationConfig, generator: _Generators) -> Normaliser:
    if config.stage("normalisation").backend == "llm":
        from .llm_stages import LLMNormaliser

        return LLMNormaliser(generator("llm"))
    return StopwordNormaliser()


def _ner(config: FormationConfig) -> MentionDetector:
    stage = config.stage("ner")
    if stage.backend == "transformers":
        from .hf import TransformersNER

        ner = TransformersNER(str(stage.model), stage.model_path, config_key="formation.ner")
        ner.load()
        return ner
    return LexicalNER()


def _mentions(config: FormationConfig, sentence: SentenceEncoder) -> MentionEncoder:
    stage = config.stage("mentions")
    if stage.backend == "transformers":
        from .hf import TransformersMentionEncoder

        encoder = TransformersMentionEncoder(
            str(stage.model), stage.model_path, config_key="formation.mentions"
        )
        encoder.load()
        return encoder
    return sentence


def _relations(config: FormationConfig, generator: _Generators) -> RelationExtractor:
    backend = config.stage("relations").backend
    if backend == "patterns":
        return PatternRelations()
    from .llm_stages import LLMRelationExtractor

    return LLMRelationExtractor(generator(backend))


def _llm(config: FormationConfig) -> TextGenerator:
    from .llm import LiteLLMGenerator

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
    from .hf import TransformersGenerator

    causal = config.causal_lm
    generator = TransformersGenerator(
        causal.model, causal.model_path, config_key="formation.causal_lm"
    )
    generator.load()
    return generator
