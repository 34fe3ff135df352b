"""Files written so that a crash leaves either the old state or the new one, whole.

A file is first written under a hidden temporary name (``.tmp-…``) in its final folder
and fsynced; the caller then links or renames it into place and fsyncs the folder
(:func:`fsync_dir`), so the new name survives power loss with its content. A leftover
temporary file means a writer died before the rename: it was never visible.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

__all__ = ["TEMP_PREFIX", "fsync_dir", "replace_file", "write_temp"]

TEMP_PREFIX = ".tmp-"


def write_temp(folder: Path, body: bytes, mode: int) -> Path:
    """Write ``body`` to a new temporary file in ``folder`` (created with ``mode``),
    fsynced; returns its path."""
    temp = folder / f"{TEMP_PREFIX}{uuid.uuid4().hex}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        _write_all(fd, body)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        temp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return temp


def _write_all(fd: int, body: bytes) -> None:
    """Write all of ``body``: one ``write`` may land short (a disk filling up, a file size
    limit, over 2 GiB), and a file renamed into place cut short would be taken as whole;
    the next write of what is left raises instead (``ENOSPC``, ``EFBIG``)."""
    view = memoryview(body)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(f"no progress writing a file ({len(view)} bytes left)")
        view = view[written:]


def replace_file(path: Path, body: bytes, mode: int) -> None:
    """Put ``body`` at ``path`` whole (a new file, or over the old one): a temporary file
    beside it, renamed over it, the folder fsynced. No temporary file is left behind."""
    temp = write_temp(path.parent, body, mode)
    try:
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a folder's entries (a rename, a link) durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
