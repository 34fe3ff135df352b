"""What the memory block shows beside fragments, and when it says memory has nothing.

Read once from ``config.yaml`` (``reconstruction:``) into these frozen objects and passed
to the store; the defaults are the documented ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from ..configuration import ConfigModel, ListOf

__all__ = [
    "DEFAULT_RECONSTRUCTION",
    "CoverageConfig",
    "CoverageSection",
    "ReconstructionConfig",
    "ReconstructionSection",
]


@dataclass(frozen=True)
class CoverageConfig:
    """When the block says which of the question's foci memory holds nothing about.

    ``note``: name the uncovered foci; ``held_min_fragments``: a word that at least this
    many fragments of memory use is held (no note names it); ``max_covered_share``: an
    uncovered word that is not a name is named only when at most this share of the foci
    is covered; ``when_empty``: when no
    focus is covered and no fragment is at least ``empty_below_similarity`` similar to
    the question (cosine), the note is the whole block; ``min_chars``: shorter words are
    not foci; ``max_listed``: foci named at most; ``ignore``: more words that are never
    foci (beyond the built-in question and function words of English, Portuguese and
    Spanish).
    """

    note: bool = True
    held_min_fragments: int = 1
    max_covered_share: float = 0.5
    when_empty: bool = True
    empty_below_similarity: float = 0.5
    min_chars: int = 3
    max_listed: int = 6
    ignore: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReconstructionConfig:
    """``max_statements``: statements rendered at most (0: none); ``facts``: which
    statements are rendered, ``question`` (those about the question: a fact that shares
    a content word with it beyond its subject, a change or conflict that shares any) or
    ``all``; ``disputed_marker``: the word that opens a conflict's line; ``coverage``:
    see :class:`CoverageConfig`."""

    max_statements: int = 8
    facts: str = "question"
    disputed_marker: str = "Disputed"
    coverage: CoverageConfig = field(default_factory=CoverageConfig)


DEFAULT_RECONSTRUCTION = ReconstructionConfig()


def _marker(value: str) -> str:
    """A marker opens a statement line: one short word or phrase that cannot pass for
    the block's structure."""
    if not 1 <= len(value.strip()) <= 32:
        raise ValueError("must be 1 to 32 characters")
    if any(c in "[]<>:" or not c.isprintable() for c in value):
        raise ValueError("must not contain control characters or any of [ ] < > :")
    return value.strip()


class CoverageSection(ConfigModel):
    """``reconstruction.coverage`` in config.yaml (see :class:`CoverageConfig`)."""

    note: bool = CoverageConfig.note
    held_min_fragments: int = Field(CoverageConfig.held_min_fragments, ge=1)
    max_covered_share: float = Field(CoverageConfig.max_covered_share, ge=0, le=1)
    when_empty: bool = CoverageConfig.when_empty
    empty_below_similarity: float = Field(CoverageConfig.empty_below_similarity, ge=-1, le=1)
    min_chars: int = Field(CoverageConfig.min_chars, ge=1, le=64)
    max_listed: int = Field(CoverageConfig.max_listed, ge=1, le=64)
    ignore: ListOf[Annotated[str, Field(max_length=100)]] = Field((), max_length=10_000)


class ReconstructionSection(ConfigModel):
    """The ``reconstruction:`` section of config.yaml."""

    max_statements: int = Field(ReconstructionConfig.max_statements, ge=0, le=100)
    facts: Literal["question", "all"] = "question"
    disputed_marker: Annotated[str, AfterValidator(_marker)] = ReconstructionConfig.disputed_marker
    coverage: CoverageSection = CoverageSection()

    def config(self) -> ReconstructionConfig:
        """The settings this section describes."""
        return ReconstructionConfig(
            max_statements=self.max_statements,
            facts=self.facts,
            disputed_marker=self.disputed_marker,
            coverage=CoverageConfig(**self.coverage.model_dump()),
        )
