"""Memory's history: snapshots of derived memory, rollback to any of them, and diffs.

Every write of derived memory is journaled as a changeset (:mod:`.storage.journal`). A
snapshot folds the journal (and, for a consolidation cycle, the cycle's own change) into
one changeset, appended to a chain: snapshot ``k``'s changeset takes the state of
snapshot ``k-1`` to its own. Its size and the time to take it follow the rows changed
since the previous snapshot, never the size of memory; nothing is ever copied whole.

Rollback to ``t`` applies, in one transaction, the inverse of every later changeset
(combined first, so a row added and removed in between costs nothing): memory is then
exactly as it was at ``t``, row ids included, so the same question gives the same area
and the same text. What was formed but not yet in a snapshot is first folded into a
*checkpoint* snapshot, and the rollback is itself recorded as a snapshot (its changeset
is the inverse path), so a rollback can be undone by rolling back to the snapshot before
it, which its report names (``undo``). The chain stays linear: every snapshot's parent is
the one before it. A rollback is one entry for a person (:func:`describe_snapshot` folds the
checkpoint taken for it into the rollback's line), but two rows stay in the chain: the
checkpoint is the only snapshot holding the state just before, which an undo must reach
exactly.

The log is never rolled back. The rows whose fragments the rollback removed, and the rows still
queued, are *held* (:mod:`memory_core.storage.tables.history`): formation skips them until they are
released (the next cycle, or at once on request), so the restored state can be inspected first and
nothing said is lost; rows whose fragments the rollback brings back are neither held nor queued, so
nothing is formed twice.

All of it runs in transactions that record their own changes (``journal=False``): a
crash anywhere leaves the previous head intact and the store consistent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SnapshotNotFoundError, StorageError
from ..storage import Connection, connect, copy_database, journal, transaction
from ..storage import changesets as cs
from ..storage.tables import dates as date_rows
from ..storage.tables import history as rows
from ..storage.tables.history import HeldRow, MemoryState, SnapshotRow
from ..storage.tables.stats import row_counts

__all__ = [
    "TOTALS",
    "HeldRow",
    "MemoryState",
    "Restored",
    "SnapshotRow",
    "checkpoint",
    "describe_snapshot",
    "fold",
    "materialize",
    "path_between",
    "release",
    "rollback",
    "undo_of",
]

TOTALS = ("fragments", "entities", "aliases", "mentions", "relations", "contexts")
"""Tables whose row counts a snapshot keeps (kept up by each snapshot's own changes)."""


@dataclass(frozen=True)
class Restored:
    """What a rollback did: the snapshot whose state memory now has (``target``), the
    snapshot recording the rollback (``snapshot``), the checkpoint taken first (None when
    nothing was pending), rows changed, and the held log rows."""

    target: int
    snapshot: int
    checkpoint: int | None
    rows_changed: int
    tally: dict[str, dict[str, int]]
    held: int
    """Log rows held now (all of them, not only by this rollback)."""
    newly_held: int
    formed_again: int
    """Held or queued rows whose fragments the rollback brought back (no longer held)."""
    generation: int = 0
    report: dict[str, Any] = field(default_factory=dict)
    undo: int | None = None
    """The snapshot whose state memory had just before (the checkpoint, else the head):
    rolling back to it undoes this rollback exactly."""


def fold(
    conn: Connection,
    *,
    kind: str,
    now: float,
    report: dict[str, Any],
    own: bytes = b"",
    target: int | None = None,
) -> int:
    """Inside the caller's transaction: append a snapshot holding the journal's entries
    (then removed) and ``own`` (a change the caller recorded itself); its id."""
    entries = journal.pending(conn)
    changeset = cs.combine([c for _, c in entries] + [own])
    tally = cs.tally(changeset)
    parent = rows.head(conn)
    counts = _counts(conn, parent, tally)
    snapshot_id = rows.insert_snapshot(
        conn,
        parent=parent,
        kind=kind,
        target=target,
        created_at=now,
        changeset=changeset,
        rows_changed=_rows_changed(tally),
        counts=counts,
        report=report,
    )
    if entries:
        rows.drop_journal(conn, entries[-1][0])
    return snapshot_id


def rollback(
    conn: Connection,
    target: int,
    *,
    now: float,
    report: dict[str, Any] | None = None,
) -> Restored:
    """Restore derived memory to snapshot ``target`` (one transaction); raises
    :class:`SnapshotNotFoundError` for an unknown id and :class:`StorageError` when
    memory is not in the state the chain expects (nothing changed then)."""
    with transaction(conn, journal=False):
        if rows.snapshot(conn, target) is None:
            raise SnapshotNotFoundError(f"no snapshot {target}")
        checkpoint = None
        if journal.pending(conn):
            checkpoint = fold(
                conn,
                kind="checkpoint",
                now=now,
                report={"reason": f"before rollback to {target}", "before_rollback": target},
            )
        head = rows.head(conn)
        assert head is not None
        path = _inverse_path(conn, target, head)
        applied = cs.apply(conn, path)
        _redate_kept(conn, path)
        formed_again = len(applied.logs_added)
        rows.unhold(conn, applied.logs_added)
        newly_held = rows.hold_queued(conn, now, target)
        newly_held += rows.hold(conn, applied.logs_removed - applied.logs_added, now, target)
        held = rows.held_count(conn)
        body = {
            **(report or {}),
            "restored": target,
            "checkpoint": checkpoint,
            "undo": head,
            "held": held,
            "newly_held": newly_held,
            "formed_again": formed_again,
        }
        snapshot_id = fold(conn, kind="rollback", now=now, report=body, own=path, target=target)
        rows.bump(conn, rollback_at=now)
        generation = rows.state(conn).generation
    return Restored(
        target,
        snapshot_id,
        checkpoint,
        _rows_changed(applied.tally),
        applied.tally,
        held,
        newly_held,
        formed_again,
        generation,
        body,
        head,
    )


def _redate_kept(conn: Connection, path: bytes) -> None:
    """Arm the date backfill for the fragments ``path`` took the expressions of but kept.

    A fragment's expressions are formed with it, so a rollback removes them only with the
    fragment, except those the backfill after migration 013 added to fragments formed
    before it: rolling back past that backfill would leave them undated for good (a
    question by date would miss them, never the fragments formed later)."""
    undated = {
        int(c.old[0])  # type: ignore[call-overload]  # the fragment id, an integer
        for c in cs.changes(path)
        if c.table == "fragment_dates" and c.op == "delete" and c.old is not None
    }
    date_rows.arm_backfill(conn, undated)


def checkpoint(conn: Connection, *, now: float, entries: int, size: int, keep: int) -> int | None:
    """Fold the journal into a checkpoint snapshot (one transaction) when it holds more
    than ``entries`` writes or ``size`` bytes; prune to ``keep`` snapshots. The new
    snapshot's id, or None. Memory's state does not change (no new generation)."""
    with transaction(conn, journal=False):
        count, total = rows.journal_size(conn)
        if count == 0 or (count <= entries and total <= size):
            return None
        snapshot_id = fold(
            conn,
            kind="checkpoint",
            now=now,
            report={"reason": f"the journal held {count} writes ({total} bytes)"},
        )
        rows.prune(conn, keep)
        return snapshot_id


def release(conn: Connection, now: float) -> int:
    """Queue every held row again (one transaction); how many."""
    with transaction(conn, journal=False):
        return rows.release_held(conn, now)


def path_between(conn: Connection, first: int, second: int) -> bytes:
    """The changeset that takes the state of snapshot ``first`` to that of ``second``."""
    for snapshot_id in (first, second):
        if rows.snapshot(conn, snapshot_id) is None:
            raise SnapshotNotFoundError(f"no snapshot {snapshot_id}")
    if first <= second:
        return cs.combine(c for _, c in rows.changesets_after(conn, first, second))
    return _inverse_path(conn, second, first)


def materialize(source: Connection, target: int, dest: Path, *, now: float) -> None:
    """A copy of the database at ``dest`` whose derived memory is snapshot ``target``'s
    (answers "as of" it); the source is not changed. Costs a full copy of the file."""
    if rows.snapshot(source, target) is None:
        raise SnapshotNotFoundError(f"no snapshot {target}")
    copy_database(source, dest)
    conn = connect(dest)
    try:
        rollback(conn, target, now=now, report={"as_of": target})
    finally:
        conn.close()


def describe_snapshot(row: SnapshotRow) -> str:
    """What a snapshot is, in words: ``cycle 3 (demand)``, ``rollback to 7 (undo: 11)``,
    ``formation`` (a checkpoint of what formation wrote), or ``formation, saved before
    rollback to 7`` (the checkpoint a rollback took first: part of that rollback)."""
    if row.kind == "cycle":
        cycle, trigger = row.report.get("cycle"), row.report.get("trigger")
        return f"cycle {cycle}" + (f" ({trigger})" if trigger else "")
    if row.kind == "rollback":
        return f"rollback to {row.target} (undo: rollback to {undo_of(row)})"
    before = _before_rollback(row)
    if before is not None:
        return f"formation, saved before rollback to {before}"
    return "formation"


def undo_of(row: SnapshotRow) -> int | None:
    """For a rollback's snapshot, the snapshot whose state memory had just before it
    (rolling back to it undoes the rollback); None for other snapshots."""
    if row.kind != "rollback":
        return None
    undo = row.report.get("undo")
    return int(undo) if isinstance(undo, int) else row.id - 1  # reports before ``undo``


def _before_rollback(row: SnapshotRow) -> int | None:
    """The rollback target a checkpoint was taken for (None for an ordinary one)."""
    target = row.report.get("before_rollback")
    if isinstance(target, int):
        return target
    reason = str(row.report.get("reason", ""))
    prefix = "before rollback to "
    rest = reason[len(prefix) :]
    return int(rest) if reason.startswith(prefix) and rest.isdigit() else None


def _inverse_path(conn: Connection, target: int, head: int) -> bytes:
    """The changeset from the head's state back to ``target``'s."""
    later = rows.changesets_after(conn, target, head)
    return cs.combine(cs.invert(c) for _, c in reversed(later))


def _rows_changed(tally: dict[str, dict[str, int]]) -> int:
    return sum(sum(per.values()) for per in tally.values())


def _counts(
    conn: Connection, parent: int | None, tally: dict[str, dict[str, int]]
) -> dict[str, Any]:
    """The snapshot's ``counts``: rows changed per table and operation, and the totals of
    :data:`TOTALS` (the parent's plus this change; counted once, on the first)."""
    before = rows.snapshot(conn, parent) if parent is not None else None
    totals_before = before.counts.get("totals") if before is not None else None
    if isinstance(totals_before, dict):
        totals = {
            t: int(totals_before.get(t, 0))
            + tally.get(t, {}).get("insert", 0)
            - tally.get(t, {}).get("delete", 0)
            for t in TOTALS
        }
    else:
        totals = _count_rows(conn)
    return {"changed": tally, "totals": totals}


def _count_rows(conn: Connection) -> dict[str, int]:
    try:
        return row_counts(conn, TOTALS)
    except StorageError:
        return {}

