"""Snapshots, the state of memory's history, and the log rows a rollback holds back.

``snapshots`` is an ordered chain: each row's ``changeset`` takes the state of the row
before it (``parent``) to its own, so the state at snapshot ``t`` is the current state
with the inverse of every later changeset applied (see :mod:`memory_core.history.snapshots`).
The current state is the newest snapshot's (the *head*) plus the journal's entries.

``memory_state`` (one row) counts ``generation`` (every cycle and rollback: what the
memory graph must be read again for) and ``derived_version`` (every write of derived
memory, :mod:`.journal`), and keeps the time of the last rollback. ``held`` keeps the log
rows a rollback took out of formation (with their queue state) until they are released.
None of these are derived memory: a rollback never rolls them back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..db import JSON_IN, Connection, json_array, reading

__all__ = [
    "HeldRow",
    "MemoryState",
    "SnapshotRow",
    "bump",
    "bump_past",
    "changesets_after",
    "drop_journal",
    "head",
    "held_count",
    "held_rows",
    "hold",
    "hold_queued",
    "insert_snapshot",
    "journal_size",
    "prune",
    "release_held",
    "snapshot",
    "snapshots",
    "state",
    "state_is_sound",
    "unhold",
]


@dataclass(frozen=True, slots=True)
class SnapshotRow:
    """A snapshot without its changeset (``counts`` and ``report``: its JSON objects)."""

    id: int
    parent: int | None
    kind: str
    target: int | None
    created_at: float
    bytes: int
    rows_changed: int
    counts: dict[str, Any]
    report: dict[str, Any]


@dataclass(frozen=True, slots=True)
class MemoryState:
    """The bookkeeping row: see the module docstring."""

    generation: int
    derived_version: int
    last_rollback_at: float | None


@dataclass(frozen=True, slots=True)
class HeldRow:
    """A log row held back from formation, with what is shown of it."""

    log_id: int
    conversation_id: str
    role: str
    text: str
    ts: object
    held_at: float
    snapshot_id: int | None


_SNAPSHOT_COLUMNS = (
    "id, parent, kind, target, created_at, bytes, rows_changed, counts, report"
)


def _snapshot(row: Sequence[Any]) -> SnapshotRow:
    return SnapshotRow(
        int(row[0]),
        None if row[1] is None else int(row[1]),
        str(row[2]),
        None if row[3] is None else int(row[3]),
        float(row[4]),
        int(row[5]),
        int(row[6]),
        dict(json.loads(row[7])),
        dict(json.loads(row[8])),
    )


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def head(conn: Connection) -> int | None:
    """The newest snapshot's id (None before the first)."""
    row = conn.execute("SELECT max(id) FROM snapshots").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def snapshot(conn: Connection, snapshot_id: int) -> SnapshotRow | None:
    """One snapshot, or None (for anything that is no 64-bit integer too: SQLite cannot
    bind an int past 64 bits, and would find snapshot 1 for ``1.0``, ``True`` or ``"1"``)."""
    if type(snapshot_id) is not int or not _INT64_MIN <= snapshot_id <= _INT64_MAX:
        return None
    with reading("cannot read snapshots"):
        row = conn.execute(
            f"SELECT {_SNAPSHOT_COLUMNS} FROM snapshots WHERE id = ?", (snapshot_id,)
        ).fetchone()
    return None if row is None else _snapshot(row)


def snapshots(conn: Connection, *, limit: int, before: int | None = None) -> list[SnapshotRow]:
    """The newest ``limit`` snapshots (older than ``before`` when given), newest first;
    bounds past 64 bits (which SQLite cannot bind) read as the farthest it can."""
    before = None if before is None else max(_INT64_MIN, min(before, _INT64_MAX))
    limit = min(limit, _INT64_MAX)
    bound = " WHERE id < ?" if before is not None else ""
    args: tuple[int, ...] = (before, limit) if before is not None else (limit,)
    with reading("cannot read snapshots"):
        rows = conn.execute(
            f"SELECT {_SNAPSHOT_COLUMNS} FROM snapshots{bound} ORDER BY id DESC LIMIT ?", args
        )
        return [_snapshot(row) for row in rows]


def changesets_after(conn: Connection, first: int, last: int) -> list[tuple[int, bytes]]:
    """``(id, changeset)`` of the snapshots with ids in ``(first, last]``, oldest first."""
    rows = conn.execute(
        "SELECT id, changeset FROM snapshots WHERE id > ? AND id <= ? ORDER BY id",
        (first, last),
    )
    return [(int(i), bytes(c)) for i, c in rows]


def insert_snapshot(
    conn: Connection,
    *,
    parent: int | None,
    kind: str,
    target: int | None,
    created_at: float,
    changeset: bytes,
    rows_changed: int,
    counts: dict[str, Any],
    report: dict[str, Any],
) -> int:
    """Append a snapshot to the chain; its id."""
    conn.execute(
        "INSERT INTO snapshots (parent, kind, target, created_at, changeset, bytes,"
        " rows_changed, counts, report) VALUES (?,?,?,?,?,?,?,?,?)",
        (
            parent,
            kind,
            target,
            created_at,
            changeset,
            len(changeset),
            rows_changed,
            json.dumps(counts, sort_keys=True),
            json.dumps(report, ensure_ascii=False, default=str),
        ),
    )
    return int(conn.last_insert_rowid())


def drop_journal(conn: Connection, through: int) -> None:
    """Remove the journal entries up to id ``through`` (a snapshot took them in)."""
    conn.execute("DELETE FROM journal WHERE id <= ?", (through,))


def journal_size(conn: Connection) -> tuple[int, int]:
    """``(entries, bytes)`` of the journal."""
    row = conn.execute("SELECT count(*), coalesce(sum(length(changeset)), 0) FROM journal")
    entries, size = row.fetchone() or (0, 0)
    return int(entries), int(size)


def prune(conn: Connection, keep: int) -> list[int]:
    """Drop the oldest snapshots beyond the newest ``keep`` (no rollback can reach them
    any more); the ids dropped."""
    rows = conn.execute(
        "SELECT id FROM snapshots ORDER BY id DESC LIMIT -1 OFFSET ?", (keep,)
    )
    dropped = [int(row[0]) for row in rows]
    if dropped:
        conn.execute("DELETE FROM snapshots WHERE id <= ?", (max(dropped),))
    return dropped


def state(conn: Connection) -> MemoryState:
    """The bookkeeping row."""
    row = conn.execute(
        "SELECT generation, derived_version, last_rollback_at FROM memory_state"
    ).fetchone()
    if row is None:
        return MemoryState(0, 0, None)
    return MemoryState(int(row[0]), int(row[1]), None if row[2] is None else float(row[2]))


_COUNTER_MAX = 1 << 62
"""The most a generation or derived version may be: far past any count of cycles, yet
moved on by one without leaving SQLite's 64-bit integers."""


def state_is_sound(conn: Connection) -> bool:
    """Whether the bookkeeping row is one row of whole-number counters that can be moved
    on (an import loads it from a file)."""
    row = conn.execute(
        "SELECT count(*), sum(typeof(generation) = 'integer' AND generation BETWEEN 0 AND ?1"
        " AND typeof(derived_version) = 'integer' AND derived_version BETWEEN 0 AND ?1)"
        " FROM memory_state",
        (_COUNTER_MAX,),
    ).fetchone()
    return row is not None and row[0] == 1 and row[1] == 1


def bump(conn: Connection, *, rollback_at: float | None = None) -> None:
    """A cycle or a rollback changed memory wholesale: a new generation (and a new derived
    version); a rollback also records its time."""
    conn.execute(
        "UPDATE memory_state SET generation = generation + 1,"
        " derived_version = derived_version + 1,"
        " last_rollback_at = coalesce(?, last_rollback_at)",
        (rollback_at,),
    )


def bump_past(conn: Connection, replaced: MemoryState) -> None:
    """Memory was replaced by another's, its bookkeeping row included (an import): a
    generation and a derived version past both the replaced memory's and the loaded one's,
    so no reader or former that read the replaced memory takes the new one for it (the
    loaded counters, bumped by one, could equal those it had read)."""
    conn.execute(
        "UPDATE memory_state SET generation = max(generation, ?) + 1,"
        " derived_version = max(derived_version, ?) + 1",
        (replaced.generation, replaced.derived_version),
    )


# -- held rows ----------------------------------------------------------------------------


def hold_queued(conn: Connection, now: float, snapshot_id: int | None) -> int:
    """Move every queued row (given-up ones too, with their attempts) to ``held``."""
    conn.execute(
        "INSERT OR IGNORE INTO held (log_id, attempts, last_error, held_at, snapshot_id)"
        " SELECT log_id, attempts, last_error, ?, ? FROM queue",
        (now, snapshot_id),
    )
    moved = conn.changes()
    conn.execute("DELETE FROM queue")
    return int(moved)


def hold(conn: Connection, log_ids: Iterable[int], now: float, snapshot_id: int | None) -> int:
    """Hold those of the log rows ``log_ids`` that memory holds no fragment of (it no
    longer holds what they formed); returns how many were not held already."""
    conn.execute(
        "INSERT OR IGNORE INTO held (log_id, held_at, snapshot_id)"
        " SELECT value, ?, ? FROM json_each(?) WHERE value IN (SELECT id FROM log)"
        " AND NOT EXISTS (SELECT 1 FROM fragments f WHERE f.log_id = value)",
        (now, snapshot_id, json_array(log_ids)),
    )
    return int(conn.changes())


def unhold(conn: Connection, log_ids: Iterable[int]) -> None:
    """The rows ``log_ids`` are formed in memory as it is now: neither held nor queued."""
    ids = json_array(log_ids)
    conn.execute(f"DELETE FROM held WHERE log_id {JSON_IN}", (ids,))
    conn.execute(f"DELETE FROM queue WHERE log_id {JSON_IN}", (ids,))


def release_held(conn: Connection, now: float) -> int:
    """Queue every held row again (with the attempts it had); how many."""
    conn.execute(
        "INSERT OR IGNORE INTO queue (log_id, queued_at, attempts, last_error)"
        " SELECT log_id, ?, attempts, last_error FROM held",
        (now,),
    )
    released = conn.changes()
    conn.execute("DELETE FROM held")
    return int(released)


def held_count(conn: Connection) -> int:
    row = conn.execute("SELECT count(*) FROM held").fetchone()
    return 0 if row is None else int(row[0])


def held_rows(conn: Connection, *, limit: int, chars: int = 200) -> list[HeldRow]:
    """The held rows, oldest first (at most ``limit``, texts cut at ``chars``)."""
    with reading("cannot read held rows"):
        return [
            HeldRow(int(lid), str(conv), str(role), str(text or ""), ts, float(at), snap)
            for lid, conv, role, text, ts, at, snap in conn.execute(
                "SELECT h.log_id, l.conversation_id, l.role, substr(l.text, 1, ?), l.ts,"
                " h.held_at, h.snapshot_id FROM held h JOIN log l ON l.id = h.log_id"
                " ORDER BY h.log_id LIMIT ?",
                (chars, limit),
            )
        ]
