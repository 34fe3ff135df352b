"""One JSON line per request and proxy event, to stdout and ``<data_dir>/logs/proxy.jsonl``.

Only the fields the proxy chooses are written (never headers or bodies), so API keys
and upstream keys cannot reach the log. The file is created readable by its owner only
(0600, its folder 0700): it names tenants and conversations. Each line is flushed at
once for ``tail -f``. A record written after ``close`` (a second signal while the
proxy shuts down) is still appended: the file is opened for that one line.

Invariants: :meth:`RequestLog.write` never raises for an output that fails, so no log
line can break a request, a shutdown or a signal handler. The file is written first and
whatever stdout does: a stdout whose reader went away (``areamem serve | head``, a
``tee`` stopped by Ctrl-C) is dropped at its first failed write, once, and that is
recorded in the file (``stdout_closed``); a failed file write is said on stderr once
and the next line tries again.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

__all__ = ["RequestLog", "write_console"]

_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
"""Characters JSON leaves raw that line readers (``str.splitlines``) split on: escaped,
so one record is always one line (they can only occur inside JSON strings)."""


class RequestLog:
    """Writes request records and proxy events as lines (see the module docstring).

    ``stream`` is stdout's stand-in (``sys.stdout`` when None, read when the log is
    made).
    """

    def __init__(
        self,
        file: Path | None,
        *,
        stdout: bool,
        stream: TextIO | None = None,
    ) -> None:
        self._stdout: TextIO | None = (stream or sys.stdout) if stdout else None
        self._path = file
        self._file: TextIO | None = None
        self._file_failed = False
        if file is not None:
            file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._file = _open(file)

    def write(self, record: dict[str, Any]) -> None:
        """Write one record; ``ts`` (ISO time) is added first. Never raises OSError."""
        now = time.time()
        full = {"ts": _stamp(now), **record}
        line = json.dumps(full, ensure_ascii=False, default=str).translate(_LINE_BREAKS) + "\n"
        self._to_file(line)
        if self._stdout is not None:
            self._to_stdout(line)

    @property
    def stdout_open(self) -> bool:
        """False once stdout failed (its lines go to the file only)."""
        return self._stdout is not None

    def close(self) -> None:
        if self._file is not None:
            file, self._file = self._file, None
            with contextlib.suppress(OSError):
                file.close()

    def _to_file(self, line: str) -> None:
        if self._path is None:
            return
        try:
            if self._file is None:  # closed: this line still counts
                with _open(self._path) as late:
                    late.write(line)
            else:
                self._file.write(line)
                self._file.flush()
            self._file_failed = False
        except OSError as exc:
            if not self._file_failed:
                self._file_failed = True
                _say(f"areamem: cannot write the log file {self._path}: {exc}")

    def _to_stdout(self, line: str) -> None:
        stream = self._stdout
        if stream is None or write_console(stream, line):
            return
        self._stdout = None
        self._to_file(
            json.dumps({"ts": _stamp(time.time()), "event": "stdout_closed", "then": "file only"})
            + "\n"
        )


def write_console(stream: TextIO, text: str) -> bool:
    """Write and flush ``text``; False when the stream failed (its reader went away).

    A failed stream's file descriptor is then pointed at ``/dev/null``: what its buffer
    still holds would fail again at every later flush, the interpreter's last one too
    (which would turn a clean exit into status 120)."""
    try:
        stream.write(text)
        stream.flush()
        return True
    except (OSError, ValueError):
        _drop(stream)
        return False


def _stamp(now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"


def _drop(stream: TextIO) -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError):  # no descriptor (a test's StringIO): nothing to keep
        pass


def _say(text: str) -> None:
    """A line on stderr, if stderr is still there."""
    write_console(sys.stderr, text + "\n")


def _open(path: Path) -> TextIO:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    return os.fdopen(fd, "a", encoding="utf-8", buffering=1)
