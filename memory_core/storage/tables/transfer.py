"""The rows of a tenant's memory, table by table, for export and import.

What travels is the log and every table of derived memory and its history, verbatim (row
ids included, so an imported memory answers as the exported one did); not the receipts
(records of requests, not memory), the migrations table (the schema is checked instead:
:func:`schema`) nor the full-text index's own tables (the index is rebuilt from the
fragments: :func:`load`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apsw

from ...errors import ExportFileError, StorageError
from ..db import Connection, reading

__all__ = [
    "SKIPPED",
    "check_references",
    "clear",
    "columns",
    "is_empty",
    "load",
    "rebuild_index",
    "rows",
    "schema",
    "tables",
]

SKIPPED = frozenset({"receipts", "migrations"})
"""Tables an export leaves out (see the module docstring)."""
_FTS = "fragments_fts"
_BATCH = 500


def schema(conn: Connection) -> list[str]:
    """The migrations applied to this file, in order (what its tables' shapes follow)."""
    with reading("cannot read the schema's version"):
        return [str(r[0]) for r in conn.execute("SELECT name FROM migrations ORDER BY name")]


def tables(conn: Connection) -> list[str]:
    """The tables an export holds, in a fixed order."""
    with reading("cannot list the tables of memory"):
        found = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name"
        ).fetchall()
    return [str(n) for (n,) in found if n not in SKIPPED and not str(n).startswith(f"{_FTS}_")]


def columns(conn: Connection, table: str) -> list[str]:
    """``table``'s columns, in their declared order."""
    _known(conn, table)
    with reading(f"cannot read the columns of {table}"):
        return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")]


def rows(conn: Connection, table: str, names: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    """Every row of ``table`` (the values of ``names``), in a fixed order."""
    _known(conn, table)
    selected = ", ".join(f'"{n}"' for n in names)
    order = ", ".join(str(i + 1) for i in range(len(names)))
    with reading(f"cannot read {table}"):
        yield from conn.execute(f"SELECT {selected} FROM {table} ORDER BY {order}")


def is_empty(conn: Connection) -> bool:
    """Whether the file holds no memory yet: no log row, no fragment, no snapshot."""
    with reading("cannot read whether memory is empty"):
        row = conn.execute(
            "SELECT (SELECT count(*) FROM log) + (SELECT count(*) FROM fragments)"
            " + (SELECT count(*) FROM snapshots)"
        ).fetchone()
    return row is not None and int(row[0]) == 0


def clear(conn: Connection, names: Iterable[str]) -> None:
    """Inside the caller's transaction: delete every row of the tables ``names`` (the
    log's guards against deletes are lifted for it, then put back). Foreign keys are
    checked at the commit from here on, so tables may be loaded in any order."""
    conn.execute("PRAGMA defer_foreign_keys = ON")
    guards = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'log'"
    ).fetchall()
    for name, _ in guards:
        conn.execute(f'DROP TRIGGER "{name}"')
    for table in names:
        _known(conn, table)
        conn.execute(f"DELETE FROM {table}")
    for _, sql in guards:
        conn.execute(str(sql))


def load(
    conn: Connection, table: str, names: Sequence[str], values: Iterable[Sequence[Any]]
) -> int:
    """Inside the caller's transaction: insert ``values`` into ``table``; how many. Rows
    the table's rules refuse (a duplicate id, a missing value, a check, a value of the
    wrong type or past SQLite's 64-bit integers) raise :class:`ExportFileError` naming the
    rule: what is loaded comes from a file, and a file can be edited by hand."""
    _known(conn, table)
    marks = ", ".join("?" for _ in names)
    sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})"
    count = 0
    batch: list[Sequence[Any]] = []
    for row in values:
        batch.append(row)
        if len(batch) == _BATCH:
            _insert(conn, sql, table, batch)
            count, batch = count + len(batch), []
    if batch:
        _insert(conn, sql, table, batch)
    return count + len(batch)


def _insert(conn: Connection, sql: str, table: str, batch: list[Sequence[Any]]) -> None:
    try:
        conn.executemany(sql, batch)
    except (apsw.ConstraintError, apsw.MismatchError, apsw.TooBigError) as exc:
        raise ExportFileError(
            f"the export's rows of {table} break this store's rules: {exc}"
        ) from exc
    except OverflowError as exc:
        raise ExportFileError(
            f"the export's rows of {table} hold a number too large for SQLite: {exc}"
        ) from exc


def check_references(conn: Connection) -> None:
    """Inside the caller's transaction, once every table is loaded: raise
    :class:`ExportFileError` if a loaded row refers to a row the export lacks (foreign
    keys are checked only at the commit, see :func:`clear`, where a failure could not name
    the table)."""
    broken = list(itertools.islice(conn.execute("PRAGMA foreign_key_check"), 3))
    if broken:
        shown = ", ".join(f"{t} row {r} -> {p}" for t, r, p, _ in broken)
        raise ExportFileError(f"the export's rows refer to rows of tables it lacks: {shown}")


def rebuild_index(conn: Connection) -> None:
    """Inside the caller's transaction: the fragments' full-text index built again."""
    conn.execute(f"INSERT INTO {_FTS}({_FTS}) VALUES ('rebuild')")


def _known(conn: Connection, table: str) -> None:
    """Table names reach SQL text: only those of this file are accepted."""
    if table not in tables(conn):
        raise StorageError(f"not a table of memory: {table!r}")
