"""Formation settings: which backend runs each stage, and the linking/context thresholds.

Read once from the ``formation:`` section of ``config.yaml`` (or built in code) into
frozen objects. Every key is optional; the defaults are the offline backends that work on
a fresh machine with no downloads. :func:`parse_formation` reports the dotted key of any
invalid value through :class:`FormationConfigError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import MemoryCoreError

__all__ = [
    "CausalLMConfig",
    "ContextConfig",
    "FormationConfig",
    "FormationConfigError",
    "LLMConfig",
    "LinkingConfig",
    "StageConfig",
    "parse_formation",
]

DEFAULT_CAUSAL_LM = "mistralai/Ministral-3-3B-Instruct-2512"
_BACKENDS = {
    "segmentation": ("embedding", "llm", "transformers"),
    "normalisation": ("none", "llm"),
    "ner": ("lexical", "transformers"),
    "mentions": ("minilm", "transformers"),
    "relations": ("patterns", "llm", "transformers"),
}
_DEFAULT_BACKEND = {
    "segmentation": "embedding",
    "normalisation": "none",
    "ner": "lexical",
    "mentions": "minilm",
    "relations": "patterns",
}
_LIMITS = (
    "batch_size",
    "max_text_chars",
    "max_mentions_per_fragment",
    "max_mention_chars",
    "max_claims_per_fragment",
    "max_cooccurrence_pairs",
)
_DEFAULT_MODEL = {
    "ner": "dslim/bert-large-NER",
    "mentions": "google-bert/bert-base-multilingual-uncased",
}


class FormationConfigError(MemoryCoreError):
    """An invalid ``formation`` setting; ``key`` is its dotted path."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key, self.reason = key, reason


@dataclass(frozen=True)
class StageConfig:
    """One stage's backend, and the model a transformers backend loads."""

    backend: str
    model: str | None = None
    model_path: str | None = None


@dataclass(frozen=True)
class LLMConfig:
    """The served LLM that ``llm`` backends call through litellm."""

    provider: str = "openai"
    model: str = DEFAULT_CAUSAL_LM
    api_base: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 60.0


@dataclass(frozen=True)
class CausalLMConfig:
    """The local causal LM that ``transformers`` segmentation/relation backends load."""

    model: str = DEFAULT_CAUSAL_LM
    model_path: str | None = None


@dataclass(frozen=True)
class LinkingConfig:
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


@dataclass(frozen=True)
class ContextConfig:
    """When a segment joins an existing context, and when a fragment joins a second one."""

    join: float = 0.5
    secondary: float = 0.4
    secondary_ratio: float = 0.85
    max_contexts_per_fragment: int = 3


@dataclass(frozen=True)
class FormationConfig:
    """Every formation setting."""

    stages: Mapping[str, StageConfig] = field(
        default_factory=lambda: {
            s: StageConfig(b, _DEFAULT_MODEL.get(s)) for s, b in _DEFAULT_BACKEND.items()
        }
    )
    llm: LLMConfig = LLMConfig()
    causal_lm: CausalLMConfig = CausalLMConfig()
    linking: LinkingConfig = LinkingConfig()
    contexts: ContextConfig = ContextConfig()
    segment_threshold: float | None = None
    batch_size: int = 64
    row_time_budget_s: float = 10.0
    """Seconds one queued row may spend in the stages before the write (its share of the
    batched ones included); a row over budget is recorded as failed and skipped, then
    retried alone, and given up after the pipeline's attempt limit. Checked between
    stages: a single backend call is bounded by its own limits (``llm.timeout_s``, the
    caps below)."""
    max_text_chars: int = 100_000
    """The most characters of one message the stages read (normalisation, embedding,
    segmentation, NER, relations); the log, the fragment and its full-text index keep the
    whole text."""
    max_mentions_per_fragment: int = 100
    """The most mentions linked per fragment (the first, in text order)."""
    max_mention_chars: int = 100
    """The longest name a mention, or the entity of an extracted claim, may have."""
    max_claims_per_fragment: int = 100
    """The most extracted relations stored per fragment (the first found)."""
    max_cooccurrence_pairs: int = 500
    """The most co-occurrence relations per fragment (between entities mentioned nearest
    each other first): m distinct entities give m(m-1)/2 pairs otherwise."""

    def stage(self, name: str) -> StageConfig:
        return self.stages[name]


def parse_formation(raw: Any, key: str = "formation") -> FormationConfig:
    """Typed settings from the parsed YAML ``formation`` mapping (None means defaults)."""
    section = _mapping(raw, key)
    allowed = {
        *_BACKENDS,
        *_LIMITS,
        "row_time_budget_s",
        "llm",
        "causal_lm",
        "linking",
        "contexts",
    }
    _only(section, key, allowed)
    stages = {name: _stage(section.get(name), f"{key}.{name}", name) for name in _BACKENDS}
    default = FormationConfig()
    limits = {
        name: _count(section.get(name, getattr(default, name)), f"{key}.{name}") for name in _LIMITS
    }
    budget = section.get("row_time_budget_s", default.row_time_budget_s)
    if isinstance(budget, bool) or not isinstance(budget, int | float) or budget <= 0:
        raise FormationConfigError(
            f"{key}.row_time_budget_s", f"must be a number > 0, got {budget!r}"
        )
    return FormationConfig(
        stages=stages,
        llm=_llm(section.get("llm"), f"{key}.llm"),
        causal_lm=_causal(section.get("causal_lm"), f"{key}.causal_lm"),
        linking=_numbers(LinkingConfig, section.get("linking"), f"{key}.linking"),
        contexts=_numbers(ContextConfig, section.get("contexts"), f"{key}.contexts"),
        segment_threshold=_threshold(section.get("segmentation"), f"{key}.segmentation"),
        row_time_budget_s=float(budget),
        **limits,
    )


def _count(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FormationConfigError(key, f"must be an integer >= 1, got {value!r}")
    return value


def _mapping(value: Any, key: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FormationConfigError(key, f"must be a mapping, got {type(value).__name__}")
    return value


def _only(section: Mapping[str, Any], key: str, allowed: set[str]) -> None:
    unknown = sorted(set(map(str, section)) - allowed)
    if unknown:
        raise FormationConfigError(
            f"{key}.{unknown[0]}", f"unknown key (allowed: {', '.join(sorted(allowed))})"
        )


def _string(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise FormationConfigError(key, f"must be a non-empty string, got {value!r}")
    return value


def _optional(value: Any, key: str) -> str | None:
    return None if value is None else _string(value, key)


def _stage(value: Any, key: str, name: str) -> StageConfig:
    section = _mapping(value, key)
    extra = {"threshold"} if name == "segmentation" else set()
    _only(section, key, {"backend", "model", "model_path", *extra})
    backend = section.get("backend", _DEFAULT_BACKEND[name])
    if backend not in _BACKENDS[name]:
        raise FormationConfigError(
            f"{key}.backend", f"must be one of {', '.join(_BACKENDS[name])}, got {backend!r}"
        )
    model = section.get("model", _DEFAULT_MODEL.get(name))
    return StageConfig(
        backend,
        _optional(model, f"{key}.model"),
        _optional(section.get("model_path"), f"{key}.model_path"),
    )


def _threshold(value: Any, key: str) -> float | None:
    raw = _mapping(value, key).get("threshold")
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not -1 <= raw <= 1:
        raise FormationConfigError(f"{key}.threshold", f"must be a number in [-1, 1], got {raw!r}")
    return float(raw)


def _llm(value: Any, key: str) -> LLMConfig:
    section = _mapping(value, key)
    _only(section, key, {"provider", "model", "api_base", "api_key_env", "timeout_s"})
    default = LLMConfig()
    timeout = section.get("timeout_s", default.timeout_s)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise FormationConfigError(f"{key}.timeout_s", f"must be a number > 0, got {timeout!r}")
    return LLMConfig(
        provider=_string(section.get("provider", default.provider), f"{key}.provider"),
        model=_string(section.get("model", default.model), f"{key}.model"),
        api_base=_optional(section.get("api_base"), f"{key}.api_base"),
        api_key_env=_optional(section.get("api_key_env"), f"{key}.api_key_env"),
        timeout_s=float(timeout),
    )


def _causal(value: Any, key: str) -> CausalLMConfig:
    section = _mapping(value, key)
    _only(section, key, {"model", "model_path"})
    return CausalLMConfig(
        model=_string(section.get("model", DEFAULT_CAUSAL_LM), f"{key}.model"),
        model_path=_optional(section.get("model_path"), f"{key}.model_path"),
    )


def _numbers(kind: Any, value: Any, key: str) -> Any:
    section = _mapping(value, key)
    default = kind()
    fields = {f for f in default.__dataclass_fields__}
    _only(section, key, fields)
    values = {}
    for name, raw in section.items():
        expected = type(getattr(default, name))
        if (
            isinstance(raw, bool)
            or not isinstance(raw, int | float)
            or (expected is int and not isinstance(raw, int))
        ):
            raise FormationConfigError(f"{key}.{name}", f"must be a number, got {raw!r}")
        values[name] = expected(raw)
    return kind(**values)
