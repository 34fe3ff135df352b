"""One tenant's database file and the three connections a store works through.

A store reads and writes through three connections, each behind its own lock: the
writer (appends, receipts), the reader (search, inspection) and one for formation, so a
search never waits for a formation pass (WAL lets the reader see the last committed
state) and an append never waits for formation's model calls. The writer and the
formation connection take SQLite's write lock in turn (:func:`.db.transaction`).
Whoever uses a connection holds its lock.
"""

from __future__ import annotations

import threading
from pathlib import Path

from .db import Connection, connect
from .migrations import migrate

__all__ = ["Storage"]


class Storage:
    """The file at ``path`` (created private and migrated on open) and its connections."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.write_lock = threading.Lock()
        self.read_lock = threading.Lock()
        self.form_lock = threading.Lock()
        self.writer: Connection = connect(path)
        try:
            self.migrated: tuple[str, ...] = tuple(migrate(self.writer))
            """The migrations applied when this file was opened (none: it was current)."""
            self.reader: Connection = connect(path)
        except BaseException:
            self.writer.close()
            raise
        try:
            self.forming: Connection = connect(path)
        except BaseException:
            self.writer.close()
            self.reader.close()
            raise

    def close(self) -> None:
        """Close the three connections, each once its lock is free (idempotent)."""
        with self.form_lock, self.write_lock, self.read_lock:
            self.writer.close()
            self.reader.close()
            self.forming.close()
