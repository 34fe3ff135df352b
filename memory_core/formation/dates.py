"""The time expressions formation keeps for a fragment, and for the fragments formed before
it kept any.

A fragment's expressions are found in its turn's own words (as written: they are what
"yesterday" was said in) and resolved against its turn's UTC day
(:mod:`memory_core.text.dates`), then stored beside it
(:mod:`memory_core.storage.tables.dates`). A store that formed fragments before migration
013 gets theirs once, when it is opened after the migration (:func:`date_formed`), in
batches, so nothing depends on when a fragment was formed. The backfill keeps where it
has reached in the batch's own transaction (``date_backfill``, migration 014): a kill
partway resumes at the next open, and an open by another process at the same time
dates nothing twice.
"""

from __future__ import annotations

from ..storage import Connection, transaction
from ..storage.tables import dates as date_rows
from ..text.dates import day_of, find

__all__ = ["date_formed", "date_rows_of"]

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
    """Keep the expressions of every fragment with none stored yet past where the pending
    backfill has reached (all of them, right after migration 013), one transaction per
    batch that also records how far it got; the backfill ends when none is left. Returns
    the fragments dated. Each batch is read inside its write transaction, so two
    processes opening the store at once never date one fragment twice; with none pending
    (every open but the few after a migration, a kill or a rollback that armed one) it
    only reads that none is, taking no write lock."""
    if date_rows.backfill_after(conn) is None:
        return 0
    dated = 0
    while True:
        with transaction(conn):
            after = date_rows.backfill_after(conn)
            if after is None:
                return dated
            batch = date_rows.undated(conn, after, _BATCH)
            if not batch:
                date_rows.end_backfill(conn)
                return dated
            for fragment_id, text, ts in batch:
                rows = date_rows_of(text, ts)
                date_rows.insert(conn, fragment_id, rows)
                dated += bool(rows)
            date_rows.move_backfill(conn, batch[-1][0])
