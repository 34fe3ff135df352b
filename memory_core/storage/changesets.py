"""Changesets of derived memory: combine, invert, read and apply them (SQLite's session
extension through apsw).

A changeset is the net change of one or more transactions to the tables of
:data:`.journal.TRACKED`, row by row (primary key, old values, new values). Combining
changesets ``a`` then ``b`` gives one changeset with the effect of applying both (a row
inserted by ``a`` and deleted by ``b`` vanishes from it); inverting one gives the change
that undoes it. So the state of memory at an earlier snapshot is the current state with
the inverse of every later changeset applied, at a cost that follows the rows changed
since, not the size of memory.

Applying (:func:`apply`) runs inside the caller's transaction. A change whose row is not
as the changeset expects (a conflict: the row is missing, holds other values, or a
constraint fails) aborts the whole application with :class:`StorageError` naming it:
memory is restored exactly or not at all. The fragments' full-text rows, which the
journal does not record, are rebuilt for every fragment the changeset touches.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import apsw

from ..errors import StorageError
from .db import JSON_IN, Connection, json_array

__all__ = [
    "UNCHANGED",
    "Applied",
    "Change",
    "apply",
    "changes",
    "columns",
    "combine",
    "current",
    "invert",
    "tally",
]

UNCHANGED: object = apsw.no_change
"""The value of a column an update leaves as it was (in :attr:`Change.old`/``new``)."""

_OPS = {"INSERT": "insert", "DELETE": "delete", "UPDATE": "update"}
_MAX_CONFLICTS_SHOWN = 3


@dataclass(frozen=True, slots=True)
class Change:
    """One changed row: ``op`` is ``insert``, ``delete`` or ``update``; ``old``/``new``
    are the row's values before/after (None for an insert's old and a delete's new; an
    update holds :data:`UNCHANGED` for columns it leaves alone, and its key in ``old``)."""

    table: str
    op: str
    old: tuple[object, ...] | None
    new: tuple[object, ...] | None

    @property
    def key(self) -> object:
        """The row's primary key (its first column: every tracked table but
        ``fragment_contexts`` has one integer key first; that one's is its first two)."""
        row = self.old if self.old is not None else self.new
        assert row is not None
        return (row[0], row[1]) if self.table == "fragment_contexts" else row[0]


@dataclass
class Applied:
    """What :func:`apply` changed: rows per table and operation, and the fragments
    touched (their ids; their full-text rows were rebuilt)."""

    tally: dict[str, dict[str, int]] = field(default_factory=dict)
    fragments: set[int] = field(default_factory=set)
    logs_removed: set[int] = field(default_factory=set)
    """Log rows whose fragment the changeset deleted."""
    logs_added: set[int] = field(default_factory=set)
    """Log rows whose fragment the changeset inserted."""


def combine(changesets: Iterable[bytes]) -> bytes:
    """One changeset with the effect of applying ``changesets`` in order."""
    builder = apsw.ChangesetBuilder()  # type: ignore[no-untyped-call]
    try:
        for changeset in changesets:
            if changeset:
                builder.add(changeset)
        return bytes(builder.output())
    except apsw.Error as exc:
        raise StorageError(f"cannot combine changesets: {exc}") from exc
    finally:
        builder.close()


def invert(changeset: bytes) -> bytes:
    """The changeset that undoes ``changeset``."""
    if not changeset:
        return b""
    try:
        return bytes(apsw.Changeset.invert(changeset))
    except apsw.Error as exc:
        raise StorageError(f"cannot invert a changeset: {exc}") from exc


def changes(changeset: bytes) -> Iterator[Change]:
    """Every changed row of ``changeset`` (values copied out)."""
    if not changeset:
        return
    try:
        for change in apsw.Changeset.iter(changeset):
            old = None if change.old is None else tuple(change.old)
            new = None if change.new is None else tuple(change.new)
            yield Change(change.name, _OPS[change.op], old, new)
    except apsw.Error as exc:
        raise StorageError(f"cannot read a changeset: {exc}") from exc


def tally(changeset: bytes) -> dict[str, dict[str, int]]:
    """Rows changed per table and operation."""
    counts: dict[str, dict[str, int]] = {}
    for change in changes(changeset):
        per = counts.setdefault(change.table, {})
        per[change.op] = per.get(change.op, 0) + 1
    return counts


def columns(conn: Connection, table: str) -> list[str]:
    """The column names of ``table``, in the order changesets hold their values."""
    try:
        return [str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")]
    except apsw.Error as exc:
        raise StorageError(f"cannot read the columns of {table}: {exc}") from exc


def current(conn: Connection, table: str, key: object) -> tuple[object, ...] | None:
    """Row ``key`` of the tracked ``table`` (one keyed by ``id``) as memory holds it now."""
    try:
        found = conn.execute(f"SELECT * FROM {table} WHERE id = ?", (key,)).fetchone()
    except apsw.Error as exc:
        raise StorageError(f"cannot read row {key} of {table}: {exc}") from exc
    return None if found is None else tuple(found)


def apply(conn: Connection, changeset: bytes) -> Applied:
    """Apply ``changeset`` inside the caller's transaction; raises :class:`StorageError`
    (nothing applied) when a row is not as it expects."""
    applied = Applied()
    if not changeset:
        return applied
    for change in changes(changeset):
        per = applied.tally.setdefault(change.table, {})
        per[change.op] = per.get(change.op, 0) + 1
        if change.table == "fragments":
            _note_fragment(applied, change)
    fragments = sorted(applied.fragments)
    conflicts: list[str] = []

    def conflict(reason: int, change: apsw.TableChange) -> int:
        if len(conflicts) < _MAX_CONFLICTS_SHOWN:
            conflicts.append(_describe(reason, change))
        return int(apsw.SQLITE_CHANGESET_ABORT)

    try:
        _unindex(conn, fragments)
        apsw.Changeset.apply(changeset, conn, conflict=conflict)
        _index(conn, fragments)
    except apsw.Error as exc:
        shown = "; ".join(conflicts) or str(exc)
        raise StorageError(f"memory is not in the state this change expects: {shown}") from exc
    return applied


def _note_fragment(applied: Applied, change: Change) -> None:
    """A fragment row's id, and the log rows whose fragment the change removes or adds
    (the log id is the second column). Formation never changes a fragment's log id, but a
    fragment id freed by a rollback is given to the next message formed, so a changeset
    that crosses both holds one row going from one message to another: an update that
    removes the first message's fragment and adds the second's."""
    applied.fragments.add(int(str(change.key)))
    old = _log_id(change.old) if change.op != "insert" else None
    new = _log_id(change.new) if change.op != "delete" else None
    if old is not None and old != new:
        applied.logs_removed.add(old)
    if new is not None and new != old:
        applied.logs_added.add(new)


def _log_id(row: tuple[object, ...] | None) -> int | None:
    """A fragment row's log id, None when the change does not hold it (an update that
    leaves it as it is)."""
    value = None if row is None else row[1]
    return value if isinstance(value, int) else None


def _describe(reason: int, change: apsw.TableChange) -> str:
    kind = str(apsw.mapping_session_conflict.get(reason, reason)).removeprefix(
        "SQLITE_CHANGESET_"
    )
    if reason == apsw.SQLITE_CHANGESET_FOREIGN_KEY:
        return f"{kind.lower()}: {change.fk_conflicts} foreign key(s) left dangling"
    row = change.old if change.old is not None else change.new
    key = None if row is None else row[0]
    return f"{kind.lower()} on {change.name} row {key} ({_OPS[change.op]})"


def _unindex(conn: Connection, fragment_ids: Sequence[int]) -> None:
    """Take the fragments' current full-text rows out of the index (those that exist)."""
    if fragment_ids:
        conn.execute(
            "INSERT INTO fragments_fts (fragments_fts, rowid, speaker, canonical)"
            f" SELECT 'delete', id, speaker, canonical FROM fragments WHERE id {JSON_IN}",
            (json_array(fragment_ids),),
        )


def _index(conn: Connection, fragment_ids: Sequence[int]) -> None:
    """Index the fragments as they are now (those that exist)."""
    if fragment_ids:
        conn.execute(
            "INSERT INTO fragments_fts (rowid, speaker, canonical)"
            f" SELECT id, speaker, canonical FROM fragments WHERE id {JSON_IN}",
            (json_array(fragment_ids),),
        )
