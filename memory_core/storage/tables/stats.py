"""Counts of what a tenant's database holds, for health, metrics and benchmarks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..db import Connection, reading
from .log import MAX_ATTEMPTS

__all__ = ["TABLES", "Counts", "counts", "row_counts"]

TABLES = frozenset(
    {
        "log",
        "queue",
        "branches",
        "superseded",
        "fragments",
        "fragment_vectors",
        "contexts",
        "segments",
        "fragment_contexts",
        "fragment_links",
        "entities",
        "aliases",
        "mentions",
        "relations",
        "mutations",
        "formation_failures",
        "receipts",
    }
)
"""The tables :func:`row_counts` may count."""


@dataclass(frozen=True, slots=True)
class Counts:
    """Log rows, fragments (all and live), queued rows, rows formation gave up, rows a
    rollback holds back, and the rows of derived memory a person asks about."""

    log_messages: int
    fragments: int
    live_fragments: int
    queued: int
    failed: int
    held: int = 0
    entities: int = 0
    relations: int = 0
    contexts: int = 0
    snapshots: int = 0


def counts(conn: Connection) -> Counts:
    """The store's :class:`Counts`, read in one statement (one consistent snapshot)."""
    with reading("cannot read store statistics"):
        row = conn.execute(
            "SELECT (SELECT count(*) FROM log), (SELECT count(*) FROM fragments),"
            " (SELECT count(*) FROM fragments WHERE superseded = 0),"
            " (SELECT count(*) FROM queue WHERE attempts < ?),"
            " (SELECT count(*) FROM queue WHERE attempts >= ?),"
            " (SELECT count(*) FROM held), (SELECT count(*) FROM entities),"
            " (SELECT count(*) FROM relations), (SELECT count(*) FROM contexts),"
            " (SELECT count(*) FROM snapshots)",
            (MAX_ATTEMPTS, MAX_ATTEMPTS),
        ).fetchone()
    assert row is not None
    return Counts(*row)


def row_counts(conn: Connection, tables: Sequence[str]) -> dict[str, int]:
    """Rows per table of ``tables`` (each one of :data:`TABLES`), in one statement."""
    unknown = sorted(set(tables) - TABLES)
    if unknown:
        raise ValueError(f"not a table of memory: {', '.join(unknown)}")
    columns = ", ".join(f"(SELECT count(*) FROM {table})" for table in tables)
    with reading("cannot count rows"):
        row = conn.execute(f"SELECT {columns}").fetchone()
    assert row is not None
    return dict(zip(tables, map(int, row), strict=True))
