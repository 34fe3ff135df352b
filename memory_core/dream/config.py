"""The Dreamer's settings: the ``dream:`` section of config.yaml, read into a frozen model.

When a cycle runs is the policy's business (the ``dream:`` section of the trigger policy,
:mod:`policies.dream`); this section says how one consolidates.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field

from ..configuration import ConfigModel, ConfigurationError, Document, Name, validate
from ..errors import MemoryCoreError
from ..formation.config import LLMConfig
from ..registry import Names
from ..text.similarity import CosineScale

__all__ = [
    "DEFAULT_CONSOLIDATION_MODEL",
    "JUDGE_CHOICES",
    "DreamConfig",
    "DreamConfigError",
    "parse_dream",
]

DEFAULT_CONSOLIDATION_MODEL = "areamem-consolidation"
"""The served model the ``llm`` backend asks by default (DESIGN.md §8 names a fine-tuned
consolidation model; any chat model that follows a JSON schema works)."""

Similarity = Annotated[float, Field(ge=-1.0, le=1.0, allow_inf_nan=False)]
Share = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


class DreamConfigError(MemoryCoreError, ValueError):
    """A ``dream`` setting built in code is invalid."""


JUDGE_CHOICES = Names(
    "consolidation backend",
    {
        "rules": "offline: names, context vectors and thresholds",
        "llm": "a served model through litellm decides each candidate",
    },
)
"""The judges ``dream.backend`` may name (each registered in :data:`.judges.JUDGES`)."""


def _backend(name: str) -> str:
    return JUDGE_CHOICES.check(name)


def _consolidation_llm() -> LLMConfig:
    return LLMConfig(model=DEFAULT_CONSOLIDATION_MODEL)


class DreamConfig(ConfigModel):
    """How a consolidation cycle decides: the ``dream:`` section of config.yaml."""

    backend: Annotated[Name, AfterValidator(_backend)] = "rules"
    """``rules`` (offline) or ``llm`` (the model of ``llm`` decides each candidate)."""
    llm: LLMConfig = Field(default_factory=_consolidation_llm)
    entity_similarity: Similarity = 0.45
    """Two entities that share a name are one when their mention contexts agree at least
    this much (cosine of their context vectors), or when memory says one is the other
    (an alias statement or a translation)."""
    context_merge: Similarity = 0.9
    """Two contexts from different conversations whose centroids are this similar are one
    topic: merged."""
    context_link: Similarity = 0.75
    """... this similar: related topics, linked (an edge of the graph between them)."""
    max_links_per_context: int = Field(3, ge=0, le=100)
    max_strength: Share = 0.99
    """The strength of a restated claim (1 - prod(1 - confidence) over its sources) stops
    here."""
    cooccurrence_decay: Annotated[float, Field(gt=0.0, le=1.0)] = 0.9
    """Each cycle a co-occurrence is not seen again, its edges weigh this much less."""
    cooccurrence_floor: Share = 0.25
    """... never below this share of their weight."""
    max_pairs: int = Field(1000, ge=1, le=100_000)
    """Candidate pairs (entities; contexts) judged per cycle at most."""

    def scaled(self, scale: CosineScale) -> DreamConfig:
        """These settings for an encoder whose cosines lie on ``scale`` (the similarities
        here are on MiniLM's: :mod:`memory_core.text.similarity`); themselves for MiniLM."""
        if scale.identity:
            return self
        return self.model_copy(
            update={
                "entity_similarity": scale.threshold(self.entity_similarity),
                "context_merge": scale.threshold(self.context_merge),
                "context_link": scale.threshold(self.context_link),
            }
        )
    batch_size: int = Field(16, ge=1, le=200)
    """Candidates per request to the ``llm`` backend."""
    keep_snapshots: int = Field(1000, ge=1, le=1_000_000)
    """Snapshots kept (the oldest beyond are dropped: no rollback reaches them)."""
    max_reported: int = Field(5000, ge=1, le=100_000)
    """Decisions of each kind listed in a cycle's report (all are counted)."""
    journal_entries: int = Field(5000, ge=1)
    """Writes of derived memory kept in the journal before they are folded into a
    checkpoint snapshot even without a cycle (so the journal stays bounded when cycles
    are rare or off)."""
    journal_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    """... or once their changesets hold this many bytes."""



def parse_dream(raw: Any, key: str = "dream") -> DreamConfig:
    """Typed settings from a ``dream`` mapping built in code (None means defaults)."""
    try:
        return validate(DreamConfig, raw, Document.of(raw), (key,))
    except ConfigurationError as exc:
        raise DreamConfigError(f"{exc.key}: {exc.reason}") from None
