"""SQLite connections, the one transaction helper, and the retry of writes under contention.

Every tenant's memory is one SQLite file opened through apsw with the settings of
apsw's best practice: WAL (readers never block the writer), foreign keys on, a busy
timeout, and ``synchronous=NORMAL`` (a commit survives a process crash; only an OS crash
may lose the last transactions, never corrupt the file). The file is created private
(mode 0600; SQLite gives its ``-wal`` and ``-shm`` files the same mode), in a folder
created 0700.

All writes go through :func:`transaction`. A store writes through more than one
connection (appends and receipts on one, formation on another), so the outermost
transaction is ``BEGIN IMMEDIATE``: it takes the write lock before its first read,
waiting up to the busy timeout for it. A deferred transaction that read first would
instead fail at once (``SQLITE_BUSY_SNAPSHOT``, no busy wait) whenever the other
connection committed between its read and its first write. Nested use is a savepoint.
Lock contention that outlasts the busy timeout leaves as :class:`StorageBusyError`;
:func:`retry_busy` retries such an operation a bounded number of times with backoff.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeAlias, TypeVar

import apsw

from ..errors import StorageBusyError, StorageError
from . import journal as _journal

__all__ = [
    "JSON_IN",
    "Connection",
    "connect",
    "copy_database",
    "integrity_check",
    "json_array",
    "open_plain",
    "read_snapshot",
    "reading",
    "retry_busy",
    "sqlite_versions",
    "transaction",
]

T = TypeVar("T")

Connection: TypeAlias = apsw.Connection
"""An open tenant database; modules outside :mod:`memory_core.storage` only pass it on."""

JSON_IN = "IN (SELECT value FROM json_each(?))"
"""``x IN`` a list passed as one JSON parameter (:func:`json_array`): a list of any
length costs one SQL variable (SQLite allows 32766 per statement)."""

_BUSY_TIMEOUT_MS = 10_000
_FILE_MODE = 0o600
_FOLDER_MODE = 0o700
_RETRY_ATTEMPTS = 6
_RETRY_FIRST_DELAY_S = 0.05
_RETRY_MAX_DELAY_S = 2.0
_savepoints = itertools.count()


def json_array(values: Iterable[object]) -> str:
    """``values`` (strings or numbers) as the parameter of :data:`JSON_IN`."""
    return json.dumps(list(values), default=int)  # numpy integers too


def _prepare_file(path: Path) -> None:
    """Create ``path``'s folder (0700) and an empty ``path`` (0600) unless they exist.

    SQLite creates a missing database with the process umask (usually 0644) and gives
    the ``-wal``/``-shm`` files the database's mode, so creating the file first keeps
    all three private. Existing files and folders are left as they are.
    """
    path.parent.mkdir(mode=_FOLDER_MODE, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, _FILE_MODE)
    except FileExistsError:
        return
    except OSError as exc:
        raise StorageError(f"cannot create memory database {path}: {exc}") from exc
    os.close(fd)


def connect(path: Path, *, readonly: bool = False) -> Connection:
    """Open ``path`` with the project's pragmas; raises :class:`StorageError`."""
    flags = (
        apsw.SQLITE_OPEN_READONLY
        if readonly
        else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    )
    if not readonly:
        _prepare_file(path)
    try:
        conn = apsw.Connection(str(path), flags=flags)
        conn.set_busy_timeout(_BUSY_TIMEOUT_MS)
        if not readonly:
            _write_ahead(conn)
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=NORMAL")
    except apsw.Error as exc:
        raise StorageError(f"cannot open memory database {path}: {exc}") from exc
    return conn


def _write_ahead(conn: Connection) -> None:
    """Put the file in WAL mode. On a file not yet in it this needs an exclusive lock that
    SQLite does not wait for with the busy handler: while another process creates the
    same new store (its migrations' write transaction, or its own switch to WAL), it fails
    at once with "database is locked". So it is tried again within the busy timeout."""
    deadline = time.monotonic() + _BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except apsw.BusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


@contextlib.contextmanager
def transaction(
    conn: Connection, *, journal: bool = True, outcome: _journal.Outcome | None = None
) -> Iterator[Connection]:
    """Run the block atomically: commit on success, roll back on any exception.

    Outermost: ``BEGIN IMMEDIATE`` (the write lock first, see the module docstring), and
    with ``journal`` what the block changes in derived memory is appended to the journal
    before the commit (:mod:`.journal`); only migrations and the history's own
    operations (which record their changes themselves) pass False; ``outcome``, when
    given, says afterwards whether the transaction journaled anything.
    Nested (a transaction is already open on ``conn``, ours or apsw's ``with conn``): a
    savepoint, so helpers compose without knowing whether one is open. apsw errors
    leave as :class:`StorageError` (:class:`StorageBusyError` for lock contention).
    """
    try:
        if conn.in_transaction:
            with _savepoint(conn):
                yield conn
        elif journal:
            with _journaled(conn, outcome or _journal.Outcome()):
                yield conn
        else:
            with _immediate(conn):
                yield conn
    except (apsw.BusyError, apsw.LockedError) as exc:
        raise StorageBusyError(f"database is locked: {exc}") from exc
    except apsw.Error as exc:
        raise StorageError(f"database error: {exc}") from exc


@contextlib.contextmanager
def reading(what: str) -> Iterator[None]:
    """Run a read outside :func:`transaction` with its apsw errors translated: they leave
    as ``StorageError(f"{what}: {exc}")`` (:class:`StorageBusyError` for contention), so
    no apsw exception ever leaves this package."""
    try:
        yield
    except (apsw.BusyError, apsw.LockedError) as exc:
        raise StorageBusyError(f"{what}: {exc}") from exc
    except apsw.Error as exc:
        raise StorageError(f"{what}: {exc}") from exc


@contextlib.contextmanager
def read_snapshot(conn: Connection, what: str) -> Iterator[Connection]:
    """Run several reads in one read transaction (they all see the same committed state),
    apsw errors translated as by :func:`reading`. Never write inside it."""
    with reading(what), conn:
        yield conn


@contextlib.contextmanager
def _immediate(conn: Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # an error may already have ended it
            conn.execute("ROLLBACK")
        raise


@contextlib.contextmanager
def _journaled(conn: Connection, outcome: _journal.Outcome) -> Iterator[None]:
    """An immediate transaction whose changes to derived memory are journaled."""
    recorder = _journal.Recorder(conn)
    outcome.recorded = False
    try:
        with _immediate(conn):
            yield
            recorded = _journal.record(conn, recorder)
        outcome.recorded = recorded
    finally:
        recorder.close()


@contextlib.contextmanager
def _savepoint(conn: Connection) -> Iterator[None]:
    name = f"areamem_{next(_savepoints)}"
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(apsw.SQLError):  # gone with an aborted transaction
                conn.execute(f"ROLLBACK TO {name}")
                conn.execute(f"RELEASE {name}")
        raise
    conn.execute(f"RELEASE {name}")


def retry_busy(
    operation: Callable[[], T],
    *,
    attempts: int = _RETRY_ATTEMPTS,
    first_delay_s: float = _RETRY_FIRST_DELAY_S,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``operation()``, run again (doubling the pause, at most 2 s) while it raises
    :class:`StorageBusyError`, up to ``attempts`` runs in all; the last error leaves.

    Each run already waits up to the busy timeout (10 s) for the lock, so with the
    defaults an operation fails only after the lock was held by others for about a
    minute. ``operation`` must be a whole transaction (it is run again from the start).
    """
    delay = first_delay_s
    for _ in range(attempts - 1):
        try:
            return operation()
        except StorageBusyError:
            sleep(delay)
            delay = min(2 * delay, _RETRY_MAX_DELAY_S)
    return operation()


def sqlite_versions() -> dict[str, str]:
    """The SQLite library and apsw versions in use (for benchmark reports)."""
    return {"sqlite": apsw.sqlite_lib_version(), "apsw": apsw.apsw_version()}


def open_plain(path: Path) -> Connection:
    """``path`` opened read-only as it is: no pragma, nothing created, nothing migrated
    (for checks of a file another process writes). apsw errors are the caller's."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(_BUSY_TIMEOUT_MS)
    return conn


def integrity_check(path: Path) -> str:
    """``PRAGMA integrity_check`` of ``path``, opened read-only: ``ok``, the problems, or
    why it could not be run (``cannot open: ...``, ``integrity_check failed: ...``)."""
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as exc:
        return f"cannot open: {exc}"
    try:
        conn.set_busy_timeout(_BUSY_TIMEOUT_MS)
        rows = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
    except apsw.Error as exc:
        return f"integrity_check failed: {exc}"
    finally:
        conn.close()
    return "; ".join(rows)[:500] or "(no answer)"


def copy_database(source: Connection, path: Path) -> None:
    """A consistent copy of ``source``'s database at ``path`` (created private), made
    with SQLite's backup API in one step: one read of every page at one instant, writers
    going on meanwhile (WAL). For a full copy; a snapshot never needs one."""
    _prepare_file(path)
    try:
        dest = apsw.Connection(str(path))
    except apsw.Error as exc:
        raise StorageError(f"cannot create {path}: {exc}") from exc
    try:
        with dest.backup("main", source, "main") as backup:
            while not backup.done:
                backup.step(-1)
    except apsw.Error as exc:
        raise StorageError(f"cannot copy memory to {path}: {exc}") from exc
    finally:
        dest.close()
