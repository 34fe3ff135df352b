"""The typed shapes of memory's history as people see it: state, snapshots, diffs, held rows.

Like :mod:`.views`: frozen models that forbid unknown keys, validated by the consumer from what the
producers build (:mod:`memory_core.history.diff`,
:class:`~memory_core.store.memory_store.MemoryStore`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Diff",
    "DiffRow",
    "DiffSection",
    "DiffSource",
    "HistoryState",
]


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HistoryState(_View):
    """Where a tenant's history stands."""

    head: int | None = Field(description="The newest snapshot (null before the first).")
    generation: int = Field(description="Cycles and rollbacks so far (the graph's version).")
    last_rollback_at: float | None = Field(description="Epoch seconds of the last rollback.")
    journal_entries: int = Field(description="Writes of derived memory not yet in a snapshot.")
    journal_bytes: int = Field(description="Their changesets' size in bytes.")
    held: int = Field(description="Log rows held back from formation by a rollback.")


class DiffSource(_View):
    """A fragment that supports a changed row."""

    fragment_id: int
    conversation_id: str | None
    speaker: str | None
    text: str = Field(description="The fragment's first 200 characters.")


class DiffRow(_View):
    """One entity, relation or context added, removed or changed.

    ``values``: the row as it is on the side where it exists (added: after, removed:
    before); for a change, ``{column: [before, after]}`` of each column that changed.
    """

    id: int
    label: str = Field(description="Name, 'subject predicate object', or context label.")
    values: dict[str, Any]
    sources: list[DiffSource]


class DiffSection(_View):
    """The rows of one table that differ (lists cut at the diff's ``limit``)."""

    added: list[DiffRow]
    removed: list[DiffRow]
    changed: list[DiffRow]
    totals: dict[Literal["added", "removed", "changed"], int]


class Diff(_View):
    """From snapshot ``from_snapshot``'s state to ``to_snapshot``'s."""

    from_snapshot: int
    to_snapshot: int
    rows_changed: int = Field(description="Rows of derived memory that differ, all tables.")
    tables: dict[str, dict[str, int]] = Field(
        description="Rows that differ per table and operation (insert, update, delete)."
    )
    entities: DiffSection
    relations: DiffSection
    contexts: DiffSection
