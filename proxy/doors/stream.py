"""Reading a chat-completion event stream as it passes, to present it in another format.

A bridged request of another front door (:mod:`.doors`) is answered by a chat-completion
stream, which its client must receive as its own API's events. :class:`ChatStreamReader`
does the reading common to every such mapping: bytes come in chunks that may split a line
(the bytes a chunk completes are given back at once, a partial line waits for its end),
each ``data:`` line is one JSON chunk, ``[DONE]`` (or :meth:`~ChatStreamReader.close`, for
a stream that ended without it) ends the mapped stream exactly once, and nothing is mapped
after that end.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

from ..http import sse
from .chat_wire import fast_loads

__all__ = ["ChatStreamReader", "event_objects", "json_object"]


def json_object(raw: bytes) -> dict[str, Any]:
    """``raw`` as a JSON object; empty when it is not one."""
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def event_objects(chunks: Sequence[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a whole event stream's ``data:`` lines, in order (anything
    else skipped): what is read of a relayed stream to store its answer."""
    for payload in sse.payloads(chunks):
        try:
            event = json.loads(payload)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event


class ChatStreamReader(ABC):
    """Base of a chat-stream mapping: subclasses define :meth:`_chunk` and :meth:`_finish`."""

    _lines: sse.Lines | None = None
    _ended: bool = False

    def feed(self, chunk: bytes) -> bytes:
        """The mapped bytes of the lines ``chunk`` completes."""
        if self._lines is None:
            self._lines = sse.Lines()
        return b"".join(self._line(line) for line in self._lines.feed(chunk))

    def close(self) -> bytes:
        """Whatever is still due when the chat stream ended (without ``[DONE]``)."""
        return b"" if self._ended else self._end()

    def _end(self) -> bytes:
        self._ended = True
        return self._finish()

    def _line(self, line: bytes) -> bytes:
        payload = sse.data_of(line)
        if payload is None or self._ended:
            return b""
        if payload == sse.DONE_PAYLOAD:
            return self._end()
        try:
            data = fast_loads(payload)
        except ValueError:
            return b""
        return self._chunk(data) if isinstance(data, dict) else b""

    @abstractmethod
    def _chunk(self, data: dict[str, Any]) -> bytes:
        """The mapped bytes of one chat chunk."""

    @abstractmethod
    def _finish(self) -> bytes:
        """The mapped stream's end (called once)."""
