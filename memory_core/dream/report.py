"""The typed report of a consolidation cycle: every decision with its reason and sources.

Kept with the cycle's snapshot (``snapshots.report``) and returned by the cycle; like
:mod:`memory_core.views`, frozen models that forbid unknown keys.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from ..history.views import DiffSource

__all__ = ["DECISION_KINDS", "Claim", "Decision", "DecisionKind", "DreamReport", "naming"]

DecisionKind = Literal[
    "merge_entities",
    "keep_entities",
    "merge_contexts",
    "link_contexts",
    "keep_contexts",
    "strengthen",
    "reinforce",
    "decay",
    "change",
    "conflict",
]
DECISION_KINDS: tuple[str, ...] = get_args(DecisionKind)


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Claim(_View):
    """A relation a decision is about, named: what it says and where it was said."""

    relation: int
    fragment: int
    subject: str
    predicate: str
    object: str
    text: str = Field(description='The claim in words, e.g. "Jon lives in Rome".')


def naming(verb: str, newer: Claim, older: Claim | None, *, arrow: str = "->") -> str:
    """A change or conflict in words, the claims quoted: ``corrects "Jon lives in Paris"
    -> "Jon lives in Rome" (relation 18, fragment 412 -> relation 25, fragment 430)``."""
    if older is None:
        return f'{verb} "{newer.text}" (relation {newer.relation}, fragment {newer.fragment})'
    return (
        f'{verb} "{older.text}" {arrow} "{newer.text}" (relation {older.relation},'
        f" fragment {older.fragment} {arrow} relation {newer.relation},"
        f" fragment {newer.fragment})"
    )


class Decision(_View):
    """One thing a cycle did (or chose not to do), why, and the fragments behind it."""

    kind: DecisionKind
    reason: str
    subjects: list[str] = Field(description="What it is about: names, labels, statements.")
    ids: list[int] = Field(description="Row ids: entities, contexts or relations.")
    sources: list[DiffSource]
    by: str = Field(description="Who decided: the judge's label, or 'cycle' for rules.")
    claims: list[Claim] = Field(
        default_factory=list,
        description="For a change or conflict, its relations named: the newer one first.",
    )


class DreamReport(_View):
    """What one consolidation cycle did."""

    snapshot: int = Field(description="The snapshot the cycle ended in.")
    cycle: int = Field(description="Cycles of this memory so far, this one included.")
    trigger: str = Field(description="Why it ran: 'demand', or the policy's reason.")
    started_at: float
    elapsed_ms: float
    released: int = Field(description="Held log rows queued again before forming.")
    formed: int = Field(description="Log rows formed before consolidating.")
    material: dict[str, int] = Field(description="What was new since the last cycle.")
    decisions: list[Decision] = Field(description="At most dream.max_reported per kind.")
    totals: dict[str, int] = Field(description="Decisions per kind, all of them.")
    failures: list[str] = Field(description="What a judge could not decide (left as is).")
    rows_changed: int = Field(description="Rows of derived memory the snapshot holds.")
    snapshot_bytes: int = Field(description="The snapshot's changeset size.")
    generation: int
