"""The time expressions of fragments with the days they mean, and the fragments of a span.

Formation writes, for each fragment, the expressions :func:`memory_core.text.dates.find`
resolved against its turn's date (``fragment_dates``, migration 013): the words as said,
where they are in the text, and the first and last day they mean (ISO dates, which
compare as text). The fragment's own text is never changed. Retrieval asks which of its
candidates were said within a question's span or speak of a day within it
(:func:`matching`), and which live fragments speak of it (:func:`dated_within`).

Invariant: ``first_day <= last_day`` (a CHECK); every read leaves out the fragments
retrieval leaves out (superseded, forgotten: :func:`.fragments.hidden_ids`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from typing import NamedTuple

from ..db import JSON_IN, Connection, json_array, reading
from ..values import stored_text, stored_timestamp
from .fragments import hidden_ids

__all__ = ["DateRow", "Days", "arm_backfill", "backfill_after", "dated_within", "end_backfill",
           "expressions_of", "insert", "matching", "move_backfill", "said_within", "undated"]

_DAY_SECONDS = 86_400.0


class Days(NamedTuple):
    """The first and last day of a span, inclusive (``first <= last``)."""

    first: dt.date
    last: dt.date


class DateRow(NamedTuple):
    """One time expression of a fragment's text (:class:`memory_core.text.dates
    .TimeExpression`, as stored): where it is, its words, the days it means."""

    start: int
    end: int
    words: str
    days: Days
    granularity: str
    approximate: bool
    relative: bool


def insert(conn: Connection, fragment_id: int, expressions: Sequence[DateRow]) -> None:
    """Keep ``expressions`` (of the fragment's text, in text order) beside the fragment."""
    conn.executemany(
        "INSERT INTO fragment_dates (fragment_id, position, start, end, words, first_day,"
        " last_day, granularity, approximate, relative) VALUES (?,?,?,?,?,?,?,?,?,?)",
        [
            (
                fragment_id,
                position,
                e.start,
                e.end,
                e.words,
                e.days.first.isoformat(),
                e.days.last.isoformat(),
                e.granularity,
                int(e.approximate),
                int(e.relative),
            )
            for position, e in enumerate(expressions)
        ],
    )


def backfill_after(conn: Connection) -> int | None:
    """The last fragment id the pending backfill has dated (0: none yet), or None when no
    backfill is pending (migrations 013 and 014 arm it)."""
    with reading("cannot read the date backfill"):
        row = conn.execute("SELECT after FROM date_backfill WHERE id = 1").fetchone()
    return None if row is None else int(row[0])


def move_backfill(conn: Connection, after: int) -> None:
    """Record that the backfill has dated every fragment up to ``after`` (in its batch's
    transaction)."""
    conn.execute("UPDATE date_backfill SET after = ? WHERE id = 1", (after,))


def arm_backfill(conn: Connection, fragment_ids: Collection[int]) -> None:
    """A backfill pending from the first of ``fragment_ids`` that is still a fragment
    (from the lower place when one is pending already; nothing when none is)."""
    conn.execute(
        "INSERT INTO date_backfill (id, after) SELECT 1, first - 1 FROM"
        f" (SELECT min(id) AS first FROM fragments WHERE id {JSON_IN}) WHERE first IS NOT NULL"
        " ON CONFLICT (id) DO UPDATE SET after = min(after, excluded.after)",
        (json_array(fragment_ids),),
    )


def end_backfill(conn: Connection) -> None:
    """The backfill is done: no open reads the fragments again."""
    conn.execute("DELETE FROM date_backfill")


def undated(conn: Connection, after: int, limit: int) -> list[tuple[int, str, float | None]]:
    """``(id, text, ts)`` of up to ``limit`` fragments with an id above ``after`` and no
    expression kept, in id order (what :mod:`memory_core.formation.dates` dates)."""
    with reading("cannot read fragments"):
        return [
            (int(i), stored_text(text), stored_timestamp(ts))
            for i, text, ts in conn.execute(
                "SELECT id, text, ts FROM fragments f WHERE id > ? AND NOT EXISTS"
                " (SELECT 1 FROM fragment_dates d WHERE d.fragment_id = f.id)"
                " ORDER BY id LIMIT ?",
                (after, limit),
            )
        ]


def expressions_of(conn: Connection, fragment_id: int) -> list[tuple[str, str, str, str]]:
    """``(words, first_day, last_day, granularity)`` of each expression kept for the
    fragment, in text order."""
    with reading("cannot read fragment dates"):
        return [
            (str(w), str(a), str(b), str(g))
            for w, a, b, g in conn.execute(
                "SELECT words, first_day, last_day, granularity FROM fragment_dates"
                " WHERE fragment_id = ? ORDER BY position",
                (fragment_id,),
            )
        ]


def dated_within(conn: Connection, span: Days, *, limit: int) -> list[int]:
    """Up to ``limit`` live fragments with an expression meaning a day of ``span``, the
    narrowest expressions first (a day before a month), then the newest fragment."""
    with reading("cannot read fragment dates"):
        found = [
            int(row[0])
            for row in conn.execute(
                "SELECT fragment_id FROM fragment_dates WHERE first_day <= ? AND last_day >= ?"
                " GROUP BY fragment_id ORDER BY min(julianday(last_day) - julianday(first_day)),"
                " fragment_id DESC LIMIT ?",
                (span.last.isoformat(), span.first.isoformat(), limit),
            )
        ]
    hidden = hidden_ids(conn, found)
    return [f for f in found if f not in hidden]


def said_within(conn: Connection, span: Days, *, limit: int) -> list[int]:
    """Up to ``limit`` live fragments said on a day of ``span`` (their turn's UTC day),
    the earliest first."""
    low, high = _seconds(span.first), _seconds(span.last) + _DAY_SECONDS
    with reading("cannot read fragments"):
        found = [
            int(row[0])
            for row in conn.execute(
                "SELECT id FROM fragments WHERE ts >= ? AND ts < ? ORDER BY ts, id LIMIT ?",
                (low, high, limit),
            )
        ]
    hidden = hidden_ids(conn, found)
    return [f for f in found if f not in hidden]


def matching(
    conn: Connection, fragment_ids: Collection[int], spans: Sequence[Days]
) -> set[int]:
    """Those of ``fragment_ids`` said on a day of one of ``spans`` (their turn's UTC day)
    or with an expression meaning one."""
    if not fragment_ids or not spans:
        return set()
    ids = json_array(fragment_ids)
    said = " OR ".join(["(ts >= ? AND ts < ?)"] * len(spans))
    speaks = " OR ".join(["(first_day <= ? AND last_day >= ?)"] * len(spans))
    seconds = [t for s in spans for t in (_seconds(s.first), _seconds(s.last) + _DAY_SECONDS)]
    days = [d for span in spans for d in (span.last.isoformat(), span.first.isoformat())]
    with reading("cannot read fragment dates"):  # one statement for every span
        return {
            int(row[0])
            for row in conn.execute(
                f"SELECT id FROM fragments WHERE id {JSON_IN} AND ({said})"
                f" UNION SELECT fragment_id FROM fragment_dates WHERE fragment_id {JSON_IN}"
                f" AND ({speaks})",
                (ids, *seconds, ids, *days),
            )
        }


def _seconds(day: dt.date) -> float:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()
