"""The one exception tree of memory_core; apsw errors are wrapped once, in :mod:`.storage`."""

from __future__ import annotations

__all__ = [
    "DreamBusyError",
    "EncoderChangedError",
    "ExportFileError",
    "InvalidInputError",
    "MemoryChangedError",
    "MemoryCoreError",
    "MemoryNotEmptyError",
    "SegmenterWeightsError",
    "SnapshotNotFoundError",
    "StorageBusyError",
    "StorageError",
]


class MemoryCoreError(Exception):
    """Root of every error memory_core raises on purpose."""


class StorageError(MemoryCoreError):
    """The SQLite database could not be opened, migrated, read or written."""


class StorageBusyError(StorageError):
    """Another connection held the database's write lock for longer than we waited."""


class InvalidInputError(MemoryCoreError):
    """A transcript or message handed to memory_core is not of the expected shape."""


class SnapshotNotFoundError(MemoryCoreError):
    """No snapshot with that id (never taken, or pruned)."""


class DreamBusyError(MemoryCoreError):
    """A consolidation cycle or a rollback already runs for this tenant."""


class MemoryChangedError(MemoryCoreError):
    """Memory was rolled back or consolidated by another process since the graph was read:
    a lookup now would mix two states, so it is refused until the graph is read again."""


class EncoderChangedError(MemoryCoreError):
    """The store's vectors were made by another encoder than the configured one, and
    ``formation.encoder.on_change`` is ``refuse``: a lookup would compare vectors of two
    spaces. The message names both encoders and how to form memory again."""


class SegmenterWeightsError(MemoryCoreError):
    """A trained segmenter's weights cannot be used: the file or its manifest is missing,
    unreadable, truncated or edited (its sha256 differs from the manifest's), or made for
    another sentence encoder or feature version. ``path`` names the offending file."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class ExportFileError(MemoryCoreError):
    """An export cannot be imported: not an areamem export, truncated or corrupt (a part's
    sha256 differs from the manifest's), of a newer format version, or of another schema.
    Nothing stored was changed."""


class MemoryNotEmptyError(MemoryCoreError):
    """An import into a tenant that already holds memory, without ``replace``."""
