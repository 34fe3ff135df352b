"""One consolidation cycle or rollback at a time per tenant, across processes.

The proxy, the ``areamem`` command line and scripts may all act on one tenant's file.
An advisory lock on ``<database>.dream.lock`` (``flock``: held by an open file, so two
holders conflict even inside one process, and released by the kernel when its process
dies, SIGKILL included) makes a second cycle or rollback fail at once with
:class:`DreamBusyError` instead of interleaving with the first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from ..errors import DreamBusyError, StorageError

__all__ = ["exclusive"]


@contextlib.contextmanager
def exclusive(database: Path, what: str) -> Iterator[None]:
    """Hold the tenant's lock for the block; raises :class:`DreamBusyError` when another
    cycle or rollback holds it (``what`` names the one refused)."""
    path = database.with_name(database.name + ".dream.lock")
    try:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    except OSError as exc:
        raise StorageError(f"cannot open {path}: {exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DreamBusyError(
                f"cannot start {what}: a consolidation cycle or a rollback is already"
                f" running for {database.stem}"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
