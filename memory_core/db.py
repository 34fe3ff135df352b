"""SQLite connections and the one transaction helper.

Every tenant's memory is one SQLite file opened through apsw with the settings of
apsw's best practice: WAL (readers never block the writer), foreign keys on, a busy
timeout, and ``synchronous=NORMAL`` (a commit survives a process crash; only an OS crash
may lose the last transactions, never corrupt the file). All writes go through
:func:`transaction`, which nests through savepoints.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import apsw

from .errors import StorageError

__all__ = ["connect", "transaction"]

_BUSY_TIMEOUT_MS = 10_000


def connect(path: Path, *, readonly: bool = False) -> apsw.Connection:
    """Open ``path`` with the project's pragmas; raises :class:`StorageError`."""
    flags = (
        apsw.SQLITE_OPEN_READONLY
        if readonly
        else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    )
    try:
        conn = apsw.Connection(str(path), flags=flags)
        conn.set_busy_timeout(_BUSY_TIMEOUT_MS)
        if not readonly:
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=NORMAL")
    except apsw.Error as exc:
        raise StorageError(f"cannot open memory database {path}: {exc}") from exc
    return conn


@contextlib.contextmanager
def transaction(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """Run the block atomically: commit on success, roll back on any exception.

    Nested use becomes a savepoint (apsw's ``with conn``), so helpers can be composed
    without knowing whether a transaction is already open. apsw errors leave as
    :class:`StorageError`.
    """
    try:
        with conn:
            yield conn
    except apsw.Error as exc:
        raise StorageError(f"database error: {exc}") from exc
