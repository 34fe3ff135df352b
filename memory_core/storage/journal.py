"""The journal: every transaction's changes to derived memory, kept until a snapshot.

Derived memory is everything formation and the Dreamer write (:data:`TRACKED`); the log,
the queue, receipts and bookkeeping are not. :func:`.db.transaction` records each
outermost transaction with SQLite's session extension (``apsw.Session``, filtered to
:data:`TRACKED`) and, just before it commits, appends the transaction's changeset to the
``journal`` table and bumps ``memory_state.derived_version`` — in the same transaction,
so a change to derived memory and its record commit together or not at all (a crash
anywhere loses neither alone). A snapshot (:mod:`.history`) takes the journal in.

What a session records: for each row a transaction touched, its value before the
transaction (or that it did not exist) and, when the changeset is made, its value now;
a row changed and changed back, or written inside a savepoint that was rolled back,
records nothing. The changeset therefore holds exactly the net change of the
transaction, and its size follows the rows changed, never the size of memory.

The full-text index of fragments (``fragments_fts``, a virtual table over shadow
tables whose pages FTS5 rewrites as it merges segments) is not recorded: whoever applies
a changeset rebuilds the index rows of the fragments it touches (:mod:`.changesets`).
"""

from __future__ import annotations

import time

import apsw

Connection = apsw.Connection  # not from .db: .db imports this module

__all__ = ["TRACKED", "Outcome", "Recorder", "derived_version", "pending", "record"]

TRACKED = frozenset(
    {
        "fragments",
        "fragment_vectors",
        "contexts",
        "segments",
        "fragment_contexts",
        "fragment_links",
        "open_segments",
        "entities",
        "aliases",
        "mentions",
        "relations",
        "mutations",
        "dream_state",
        "merges",
        "context_links",
        "relation_groups",
        "fragment_dates",
    }
)
"""The tables of derived memory: what snapshots cover and a rollback restores."""


class Outcome:
    """Filled by :func:`.db.transaction` for a caller that must know whether its
    transaction wrote derived memory (and so moved ``derived_version`` by one)."""

    recorded: bool = False


def _tracked(table: str) -> bool:
    return table in TRACKED


class Recorder:
    """Records what a transaction on ``conn`` changes in :data:`TRACKED` tables.

    Start it before the transaction's first write; :meth:`changeset` may be called
    before the commit (the changes so far). Close it once the transaction ended.
    """

    def __init__(self, conn: Connection) -> None:
        self._session = apsw.Session(conn, "main")
        self._session.table_filter(_tracked)

    @property
    def empty(self) -> bool:
        return bool(self._session.is_empty)

    def changeset(self) -> bytes:
        """The net change recorded so far (``b""`` when nothing changed)."""
        return b"" if self._session.is_empty else bytes(self._session.changeset())

    def close(self) -> None:
        self._session.close()


def record(conn: Connection, recorder: Recorder) -> bool:
    """Append what ``recorder`` saw to the journal, inside the transaction (nothing when
    it saw no change to derived memory); whether it appended."""
    if recorder.empty:
        return False
    changeset = recorder.changeset()
    if not changeset:
        return False
    conn.execute(
        "INSERT INTO journal (changeset, created_at) VALUES (?, ?)", (changeset, time.time())
    )
    conn.execute("UPDATE memory_state SET derived_version = derived_version + 1")
    return True


def derived_version(conn: Connection) -> int:
    """How many times derived memory was written (by anyone): a writer that keeps
    derived memory in memory (formation's caches) reloads them when this moved since its
    own last write."""
    row = conn.execute("SELECT derived_version FROM memory_state").fetchone()
    return 0 if row is None else int(row[0])


def pending(conn: Connection) -> list[tuple[int, bytes]]:
    """``(id, changeset)`` of every journal entry, oldest first."""
    rows = conn.execute("SELECT id, changeset FROM journal ORDER BY id")
    return [(int(i), bytes(c)) for i, c in rows]
