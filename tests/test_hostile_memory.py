"""Hostile sequences against the newest derived memory (fragment dates, the date
backfill, aliases): two processes opening one old store, kills, rollbacks and
transfers, each checked against the full contents of the derived tables."""

from __future__ import annotations

from pathlib import Path

import apsw

from memory_core import LogMessage, MemoryStore
from memory_core.formation import Backends
from memory_core.storage.db import connect, transaction
from memory_core.storage.migrations import MIGRATIONS, migrate

T0 = 1_683_504_000.0 + 3_600  # 8 May 2023, 01:00 UTC

_TURNS = (
    ("I adopted a puppy named Biscuit yesterday.", T0),
    ("We went hiking last week.", T0 + 5),
    ("No dates here.", T0 + 15),
)


def _say(store: MemoryStore, *turns: tuple[str, float], conversation: str = "c1") -> None:
    messages = []
    for text, ts in turns:
        messages.append(LogMessage({"role": "user", "name": "Ana", "content": text}, ts))
        messages.append(LogMessage({"role": "assistant", "content": "I see."}, ts + 1))
    store.append(messages, conversation=conversation, source="ingest")
    store.form_all()


def _as_before_migration_013(path: Path) -> None:
    conn = connect(path)
    with transaction(conn, journal=False):
        conn.execute("DROP TABLE fragment_dates; DROP INDEX fragments_ts; DROP TABLE date_backfill")
        conn.execute(
            "DELETE FROM migrations WHERE name IN ('013_fragment_dates', '014_date_backfill')"
        )
    conn.close()


def _rows(conn: apsw.Connection, table: str) -> list[tuple[object, ...]]:
    return sorted(conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)


def test_a_second_process_migrating_between_the_read_and_the_write_is_no_error(
    tmp_path: Path, backends: Backends
) -> None:
    """Two processes opening one store of before migration 013 at once: both read which
    migrations were applied, one applies 013 and 014, and the other then applied 013
    again ("table fragment_dates already exists", the open failed). Each migration now
    checks, under the write lock, that no one applied it since."""
    path = tmp_path / "old.db"
    store = MemoryStore(path, backends=backends)
    _say(store, *_TURNS)
    store.close()
    _as_before_migration_013(path)
    first, second = connect(path), connect(path)
    begun = 0

    def other_process_migrates_first(cursor: object, sql: str, bindings: object) -> bool:
        nonlocal begun
        begun += sql.strip().upper().startswith("BEGIN IMMEDIATE")
        if begun == 2 and sql.strip().upper().startswith("BEGIN IMMEDIATE"):
            assert migrate(second) == ["013_fragment_dates", "014_date_backfill"]
        return True

    first.exec_trace = other_process_migrates_first
    assert migrate(first) == []
    first.exec_trace = None
    names = [row[0] for row in first.execute("SELECT name FROM migrations ORDER BY name")]
    assert names == sorted(name for name, _ in MIGRATIONS)
    first.close()
    second.close()
    again = MemoryStore(path, backends=backends)
    with again.lookup() as conn:
        dates = _rows(conn, "fragment_dates")
    assert sorted(str(row[4]) for row in dates) == ["last week", "yesterday"]  # once each
    again.close()
