"""The one exception tree of memory_core; apsw errors are wrapped once, in :mod:`.storage`."""

from __future__ import annotations

__all__ = ["InvalidInputError", "MemoryCoreError", "StorageBusyError", "StorageError"]


class MemoryCoreError(Exception):
    """Root of every error memory_core raises on purpose."""


class StorageError(MemoryCoreError):
    """The SQLite database could not be opened, migrated, read or written."""


class StorageBusyError(StorageError):
    """Another connection held the database's write lock for longer than we waited."""


class InvalidInputError(MemoryCoreError):
    """A transcript or message handed to memory_core is not of the expected shape."""
