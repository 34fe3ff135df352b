"""Server-sent events, written and read in one place.

Every stream the proxy relays, maps or makes itself (chat completions, the Responses and
Messages doors' events, its own answers to in-chat commands, the fake upstream's) is a
sequence of events: an optional ``event: <name>`` line, one ``data: <payload>`` line, and a
blank line. Chat completions end with ``data: [DONE]``; a payload is one JSON value and
holds no raw newline, so a line that starts ``data:`` is always an event's data, never a
piece of a payload.

Reading comes in two kinds: a whole relayed stream read after it passed (:func:`payloads`:
what is stored of its answer), and a stream read as it passes, in chunks that may split
a line (:class:`Lines`: what another door maps chunk by chunk). :func:`done_end` finds
where the end marker's line ends, across a chunk boundary, so that the exchange can be
stored between the marker and the blank line that lets a client act on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

__all__ = [
    "DONE",
    "DONE_PAYLOAD",
    "ERROR_PREFIX",
    "Lines",
    "count",
    "data_of",
    "done_end",
    "event",
    "payloads",
]

DONE_PAYLOAD = b"[DONE]"
DONE = b"data: [DONE]\n\n"
"""The event that ends a chat-completion stream."""
ERROR_PREFIX = b'data: {"error"'
"""How the proxy's own error event starts (an upstream that failed mid-stream): the
stream's last event, which a door rewrites in its own format."""
_DATA = b"data:"
_DONE_LINE = re.compile(rb"(?:^|\n)data: ?\[DONE\]")
"""The end marker as an SSE line; ``[DONE]`` inside a JSON string (a model asked to say
it) can never start a line, a JSON string holding no raw newline."""
_DONE_REACH = 16


def event(data: bytes, name: str | None = None) -> bytes:
    """One event: ``event: <name>`` when named, then ``data: <data>`` and the blank line.
    ``data`` is one payload (a JSON value, encoded): it must hold no newline."""
    if name is None:
        return b"data: " + data + b"\n\n"
    return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"


def data_of(line: bytes) -> bytes | None:
    """The payload of a ``data:`` line (stripped), or None for any other line."""
    if not line.startswith(_DATA):
        return None
    return line[len(_DATA) :].strip()


def count(chunk: bytes) -> int:
    """How many events a relayed chunk holds, by its ``data:`` markers (cheap, for a
    stream relayed untouched; a payload that itself says ``data:`` counts once more)."""
    return chunk.count(_DATA)


def payloads(chunks: Sequence[bytes]) -> Iterator[bytes]:
    """The payload of every ``data:`` line of a whole stream, in order."""
    for line in b"".join(chunks).split(b"\n"):
        payload = data_of(line)
        if payload is not None:
            yield payload


class Lines:
    """A stream's lines as its chunks arrive: the lines a chunk completes come out at
    once (stripped), a partial one waits for its end.

    A partial line is kept as its pieces and joined once, when its end arrives: joining
    at every piece would copy a long line (an answer of megabytes in one event, arriving
    in small pieces) once per piece, quadratic in its length."""

    def __init__(self) -> None:
        self._pending: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes."""
        self._pending.append(chunk)
        if b"\n" not in chunk:
            return []
        *lines, rest = b"".join(self._pending).split(b"\n")
        self._pending = [rest]
        return [line.strip() for line in lines]


def done_end(previous: bytes | None, chunk: bytes) -> int | None:
    """Where in ``chunk`` the end-marker line ends (0 when it ended in ``previous``), or
    None without one. ``previous`` (the chunk before) lends its last bytes, as the line
    may be split between the two."""
    lent = b"" if previous is None else previous[-_DONE_REACH:]
    window = lent + chunk
    found = _DONE_LINE.search(window) if previous is None else _done_after_start(window)
    return None if found is None else max(0, found.end() - len(lent))


def _done_after_start(window: bytes) -> re.Match[bytes] | None:
    """The marker after a newline only: the window's start is mid-line."""
    found = _DONE_LINE.search(window)
    if found is not None and found.start() == 0 and not window.startswith(b"\n"):
        return _DONE_LINE.search(window, 1)  # from 1 on, ``^`` cannot match
    return found
