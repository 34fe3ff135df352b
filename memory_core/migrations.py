"""Named, append-only schema migrations, recorded in the database itself.

A migration is applied once, in order, inside a transaction together with the row that
records it; never edit a published migration, add a new one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import apsw

from .db import transaction

__all__ = ["MIGRATIONS", "migrate"]

Migration = Callable[[apsw.Connection], None]


def _m001_log(conn: apsw.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE log (
            id INTEGER PRIMARY KEY,
            hash TEXT NOT NULL UNIQUE,
            parent_hash TEXT,
            conversation_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            role TEXT NOT NULL,
            name TEXT,
            ext_id TEXT,
            message TEXT NOT NULL,
            text TEXT NOT NULL,
            ts REAL NOT NULL,
            logged_at REAL NOT NULL,
            source TEXT NOT NULL
        );
        CREATE INDEX log_parent ON log(parent_hash);
        CREATE INDEX log_conversation ON log(conversation_id, position);
        CREATE TRIGGER log_no_update BEFORE UPDATE ON log
            BEGIN SELECT RAISE(ABORT, 'the log is append-only'); END;
        CREATE TRIGGER log_no_delete BEFORE DELETE ON log
            BEGIN SELECT RAISE(ABORT, 'the log is append-only'); END;
        CREATE TABLE queue (
            log_id INTEGER PRIMARY KEY REFERENCES log(id),
            queued_at REAL NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT
        );
        CREATE TABLE branches (
            id INTEGER PRIMARY KEY,
            abandoned_hash TEXT NOT NULL,
            replacement_hash TEXT NOT NULL,
            detected_at REAL NOT NULL
        );
        CREATE TABLE superseded (
            log_id INTEGER PRIMARY KEY REFERENCES log(id),
            branch_id INTEGER NOT NULL REFERENCES branches(id)
        );
        """
    )


def _m002_fragments(conn: apsw.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE fragments (
            id INTEGER PRIMARY KEY,
            log_id INTEGER NOT NULL REFERENCES log(id),
            conversation_id TEXT NOT NULL,
            role TEXT NOT NULL,
            speaker TEXT,
            text TEXT NOT NULL,
            lang TEXT NOT NULL DEFAULT 'und',
            canonical TEXT NOT NULL,
            translated INTEGER NOT NULL DEFAULT 0,
            ts REAL NOT NULL,
            superseded INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL
        );
        CREATE INDEX fragments_log ON fragments(log_id);
        CREATE VIRTUAL TABLE fragments_fts USING fts5(
            speaker, canonical, content='fragments', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TABLE entities (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE COLLATE NOCASE,
            mentions INTEGER NOT NULL DEFAULT 0,
            first_seen REAL NOT NULL,
            last_seen REAL NOT NULL
        );
        """
    )


def _m003_receipts(conn: apsw.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE receipts (
            id TEXT PRIMARY KEY,
            created_at REAL NOT NULL,
            body TEXT NOT NULL
        );
        """
    )


MIGRATIONS: tuple[tuple[str, Migration], ...] = (
    ("001_log", _m001_log),
    ("002_fragments", _m002_fragments),
    ("003_receipts", _m003_receipts),
)


def migrate(conn: apsw.Connection) -> list[str]:
    """Apply every migration not yet recorded; return the names applied now."""
    with transaction(conn):
        conn.execute(
            "CREATE TABLE IF NOT EXISTS migrations"
            " (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        done = {row[0] for row in conn.execute("SELECT name FROM migrations")}
    applied = []
    for name, migration in MIGRATIONS:
        if name in done:
            continue
        with transaction(conn):
            migration(conn)
            conn.execute("INSERT INTO migrations VALUES (?, ?)", (name, time.time()))
        applied.append(name)
    return applied
