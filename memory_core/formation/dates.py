"""The time expressions formation keeps for a fragment, and for the fragments formed before
it kept any.

A fragment's expressions are found in its turn's own words (as written: they are what
"yesterday" was said in) and resolved against its turn's UTC day
(:mod:`memory_core.text.dates`), then stored beside it
(:mod:`memory_core.storage.tables.dates`). A store that formed fragments before migration
013 gets theirs once, when it is opened after the migration (:func:`date_formed`), in
batches, so nothing depends on when a fragment was formed.
"""

from __future__ import annotations

from ..storage import Connection, transaction
from ..storage.tables import dates as date_rows
from ..text.dates import day_of, find

__all__ = ["BACKFILLED_BY", "date_formed", "date_rows_of"]

BACKFILLED_BY = "013_fragment_dates"
"""The migration after which a store's earlier fragments are dated (:func:`date_formed`)."""
_BATCH = 2_000


def date_rows_of(text: str, ts: float | None) -> list[date_rows.DateRow]:
    """The rows to keep for a fragment of ``text`` said at ``ts`` (none when its day is
    unknown)."""
    day = day_of(ts)
    if day is None:
        return []
    return [
        date_rows.DateRow(
            e.start,
            e.end,
            e.words,
            date_rows.Days(e.span.first, e.span.last),
            e.span.granularity,
            e.span.approximate,
            e.relative,
        )
        for e in find(text, day)
    ]


def date_formed(conn: Connection) -> int:
    """Keep the expressions of every fragment that has none stored yet (all of them,
    right after the migration), one transaction per batch; the fragments dated."""
    dated, after = 0, 0
    while True:
        batch = date_rows.undated(conn, after, _BATCH)
        if not batch:
            return dated
        with transaction(conn):
            for fragment_id, text, ts in batch:
                rows = date_rows_of(text, ts)
                date_rows.insert(conn, fragment_id, rows)
                dated += bool(rows)
        after = batch[-1][0]
