"""Storage: the only package that talks to SQLite (through apsw) and holds SQL.

A tenant's memory is one SQLite file (:class:`Storage` opens it, runs the named
migrations of :mod:`.migrations` and holds its three connections with their locks).
The SQL lives here, one module per family of tables, as functions that take a
connection and take or return typed rows:

- :mod:`.log`: the append-only log, branches and superseded rows, the formation queue
  (:data:`~memory_core.storage.tables.log.MAX_ATTEMPTS`) and formation failures; -
  :mod:`memory_core.storage.tables.fragments`: fragments, their FTS5 index and vectors, fragment
  links, BM25 search (:class:`~memory_core.storage.tables.fragments.Hit`);
- :mod:`memory_core.storage.tables.contexts`: contexts, segments, memberships;
- :mod:`memory_core.storage.tables.entities`: entities, aliases, mentions;
- :mod:`memory_core.storage.tables.relations`: relations and their mutation records;
- :mod:`memory_core.storage.tables.receipts`: receipts; :mod:`memory_core.storage.tables.stats`:
  counts;
- :mod:`memory_core.storage.tables.question_vectors`: question vectors kept for formation;
- :mod:`memory_core.storage.tables.responses`: which conversation each relayed response
  continues (bounded);
- :mod:`.journal`: every transaction's changes to derived memory (session extension);
  :mod:`.changesets`: combining, inverting, reading and applying them;
  :mod:`.history`: snapshots, held rows and the bookkeeping row;
- :mod:`.dream`: what the Dreamer reads and writes.

Invariants:
 - Every write runs inside :func:`transaction` (``BEGIN IMMEDIATE`` outermost, a savepoint when
nested): write functions never open one themselves, except the one-call operations that are a whole
transaction (:func:`~memory_core.storage.tables.receipts.save`). It is the one entry for writes, so
one hook there can see every change a transaction makes.
- No apsw exception leaves this package: writes fail as :class:`StorageError`
  (:class:`StorageBusyError` for lock contention) from :func:`transaction`; so do the
  reads that formation makes inside its write transaction and those the memory graph
  makes inside :func:`read_snapshot` (the ``*_since`` functions); every other read
  wraps its own errors (:func:`reading`).
- Stored values read back defensively (:mod:`.values`): no stored value breaks a reader.
- Rows that are read in bulk (every entity, every graph edge) are apsw's plain tuples
  under a named type alias, so formation and the memory graph pay nothing per row for
  them; the other rows are frozen dataclasses.

Outside this package nothing imports apsw or runs SQL text: other modules pass a
:data:`Connection` on.
"""

from .connections import Storage
from .db import (
    Connection,
    connect,
    copy_database,
    integrity_check,
    read_snapshot,
    reading,
    retry_busy,
    sqlite_versions,
    transaction,
)

__all__ = [
    "Connection",
    "Storage",
    "connect",
    "copy_database",
    "integrity_check",
    "read_snapshot",
    "reading",
    "retry_busy",
    "sqlite_versions",
    "transaction",
]
