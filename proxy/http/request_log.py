"""One JSON line per request, to stdout and ``<data_dir>/logs/proxy.jsonl``.

Only the fields the proxy chooses are written (never headers or bodies), so API keys
and upstream keys cannot reach the log. The file is created readable by its owner only
(0600, its folder 0700): it names tenants and conversations. Each line is flushed at
once for ``tail -f``. A record written after ``close`` (a second signal while the
proxy shuts down) is still appended: the file is opened for that one line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

__all__ = ["RequestLog"]

_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
"""Characters JSON leaves raw that line readers (``str.splitlines``) split on: escaped,
so one record is always one line (they can only occur inside JSON strings)."""


class RequestLog:
    """Writes request records and proxy events as JSON lines."""

    def __init__(self, file: Path | None, *, stdout: bool) -> None:
        self._stdout: TextIO | None = sys.stdout if stdout else None
        self._path = file
        self._file: TextIO | None = None
        if file is not None:
            file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._file = _open(file)

    def write(self, record: dict[str, Any]) -> None:
        """Write one record; ``ts`` (ISO time) is added first."""
        stamp = (
            time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
            + f".{int(time.time() * 1000) % 1000:03d}Z"
        )
        line = json.dumps({"ts": stamp, **record}, ensure_ascii=False, default=str)
        line = line.translate(_LINE_BREAKS) + "\n"
        for stream in (self._stdout, self._file):
            if stream is not None:
                stream.write(line)
                stream.flush()
        if self._file is None and self._path is not None:  # closed: this line still counts
            with _open(self._path) as late:
                late.write(line)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _open(path: Path) -> TextIO:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    return os.fdopen(fd, "a", encoding="utf-8", buffering=1)
