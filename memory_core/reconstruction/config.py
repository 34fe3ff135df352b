"""What the memory block shows beside fragments, and when it says memory has nothing.

Read once from ``config.yaml`` (``reconstruction:``) into these frozen models (on the
shared :class:`~memory_core.configuration.ConfigModel`: the section as written is the
settings the store reads) and passed to the store; the defaults are the documented ones.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from ..configuration import ConfigModel, ListOf

__all__ = ["DEFAULT_RECONSTRUCTION", "CoverageConfig", "ReconstructionConfig"]


class CoverageConfig(ConfigModel):
    """When the block says which of the question's foci memory holds nothing about
    (``reconstruction.coverage``).

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
    held_min_fragments: int = Field(1, ge=1)
    max_covered_share: float = Field(0.5, ge=0, le=1)
    when_empty: bool = True
    empty_below_similarity: float = Field(0.5, ge=-1, le=1)
    min_chars: int = Field(3, ge=1, le=64)
    max_listed: int = Field(6, ge=1, le=64)
    ignore: ListOf[Annotated[str, Field(max_length=100)]] = Field((), max_length=10_000)


def _marker(value: str) -> str:
    """A marker opens a statement line: one short word or phrase that cannot pass for
    the block's structure."""
    if not 1 <= len(value.strip()) <= 32:
        raise ValueError("must be 1 to 32 characters")
    if any(c in "[]<>:" or not c.isprintable() for c in value):
        raise ValueError("must not contain control characters or any of [ ] < > :")
    return value.strip()


class ReconstructionConfig(ConfigModel):
    """The ``reconstruction:`` section: ``max_statements``: statements rendered at most
    (0: none); ``facts``: which statements are rendered, ``question`` (those about the
    question: a fact that shares a content word with it beyond its subject, a change or
    conflict that shares any) or ``all``; ``disputed_marker``: the word that opens a
    conflict's line; ``coverage``: see :class:`CoverageConfig`."""

    max_statements: int = Field(8, ge=0, le=100)
    facts: Literal["question", "all"] = "question"
    disputed_marker: Annotated[str, AfterValidator(_marker)] = "Disputed"
    coverage: CoverageConfig = CoverageConfig()


DEFAULT_RECONSTRUCTION = ReconstructionConfig()
