"""One line per request and proxy event: JSON lines in ``<data_dir>/logs/proxy.jsonl``,
and on stdout JSON or a short line a person reads (``logging.format``).

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
and the next line tries again. Lines come from the event loop and from threads (the
store's events, formation workers' reports, a shutdown timer): one line is written whole
before the next begins.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Literal, TextIO

__all__ = ["LogFormat", "RequestLog", "console_format", "inert", "text_line", "write_console"]

LogFormat = Literal["auto", "text", "json"]
"""How stdout shows records: ``text`` (one short line a person reads), ``json`` (the
file's lines), ``auto`` (text on a terminal, JSON into a pipe or a file)."""

_LINE_BREAKS = str.maketrans(
    {
        "\x85": "\\u0085",
        "\u2028": "\\u2028",
        "\u2029": "\\u2029",
        **{chr(c): f"\\u{c:04x}" for c in range(0xD800, 0xE000)},
    }
)
"""Characters JSON leaves raw that line readers (``str.splitlines``) split on, and lone
surrogates (a client's ``"\\ud800"`` decodes to one; UTF-8 cannot write it, and the
write would raise): escaped, so one record is always one line the file can hold (they
can only occur inside JSON strings, where the escape reads back as the same text)."""


class RequestLog:
    """Writes request records and proxy events as lines (see the module docstring).

    ``stream`` is stdout's stand-in (``sys.stdout`` when None, read when the log is
    made); ``stdout_format`` how it shows records.
    """

    def __init__(
        self,
        file: Path | None,
        *,
        stdout: bool,
        stdout_format: LogFormat = "json",
        stream: TextIO | None = None,
    ) -> None:
        self._stdout: TextIO | None = (stream or sys.stdout) if stdout else None
        self._text = console_format(stdout_format, self._stdout) == "text"
        self._path = file
        self._file: TextIO | None = None
        self._file_failed = False
        self._lock = threading.Lock()
        if file is not None:
            file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._file = _open(file)

    def write(self, record: dict[str, Any]) -> None:
        """Write one record; ``ts`` (ISO time) is added first. Never raises OSError."""
        now = time.time()
        line = _json_line(record, now)
        shown = text_line(record, now) + "\n" if self._text and self._stdout else line
        with self._lock:
            self._to_file(line)
            if self._stdout is not None:
                self._to_stdout(shown)

    @property
    def stdout_open(self) -> bool:
        """False once stdout failed (its lines go to the file only)."""
        return self._stdout is not None

    def close(self) -> None:
        with self._lock:
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
        self._to_file(_json_line({"event": "stdout_closed", "then": "file only"}, time.time()))


def console_format(wanted: LogFormat, stream: TextIO | None) -> Literal["text", "json"]:
    """The format ``wanted`` means on ``stream`` (``auto``: text on a terminal)."""
    if wanted != "auto":
        return wanted
    try:
        return "text" if stream is not None and stream.isatty() else "json"
    except (OSError, ValueError):
        return "json"


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


def text_line(record: dict[str, Any], when: float | None = None) -> str:
    """``14:03:22 INFO ingest tenant=default conversation=abc messages=4 (12 ms)``:
    local time, level, event, the record's plain fields (nested ones and empty ones left
    out, long values cut), its duration last."""
    clock = time.strftime("%H:%M:%S", time.localtime(time.time() if when is None else when))
    event = str(record.get("event", "log"))
    fields = []
    for key, value in record.items():
        if key in ("event", "ms") or value is None or isinstance(value, dict | list):
            continue
        fields.append(f"{key}={_shown(value)}")
    ms = record.get("ms")
    if ms is None and isinstance(record.get("stages_ms"), dict):
        ms = record["stages_ms"].get("total_ms")
    tail = f" ({ms:.0f} ms)" if isinstance(ms, int | float) else ""
    return f"{clock} {_level(record):<5} {event} {' '.join(fields)}".rstrip() + tail


_WARNINGS = ("_failed", "_unreachable", "_unfinished", "_closed", "_now", "error")


def _level(record: dict[str, Any]) -> str:
    event = str(record.get("event", ""))
    if event == "internal_error":
        return "ERROR"
    status = record.get("status")
    failed = isinstance(status, int) and status >= 500
    if failed or record.get("error") or event.endswith(_WARNINGS):
        return "WARN"
    return "INFO"


def _shown(value: object) -> str:
    text = str(value)
    if len(text) > 80:
        text = text[:77] + "..."
    if not text or any(c.isspace() or c in '"=' or not c.isprintable() for c in text):
        # quoted and escaped: a client's model name or conversation id can hold a line
        # break or a terminal escape sequence, never written raw to a person's terminal
        return inert(json.dumps(text, ensure_ascii=False))
    return text


def inert(text: object) -> str:
    """``text`` for a person's terminal: every character that is not printable (controls,
    line and paragraph separators, format characters such as a bidi override) written as
    its escape, ``\\u001b``; an escape sequence or a line break in stored or sent text
    never acts on the terminal or prints a row of its own."""
    shown = str(text)
    if shown.isprintable():
        return shown
    return "".join(c if c.isprintable() else _escaped(c) for c in shown)


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _json_line(record: dict[str, Any], now: float) -> str:
    """``record`` as the file's line: ``ts`` (ISO time) first, one line whatever it holds."""
    full = {"ts": _stamp(now), **record}
    return json.dumps(full, ensure_ascii=False, default=str).translate(_LINE_BREAKS) + "\n"


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
