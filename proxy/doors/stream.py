"""Reading a chat-completion event stream as it passes, to present it in another format.

A bridged request of another front door (:mod:`.doors`) is answered by a chat-completion
stream, which its client must receive as its own API's events. :class:`ChatStreamReader`
does the reading common to every such mapping: bytes come in chunks that may split a line
(the bytes a chunk completes are given back at once, a partial line waits for its end),
each ``data:`` line is one JSON chunk, ``[DONE]`` (or :meth:`~ChatStreamReader.close`, for
a stream that ended without it) ends the mapped stream exactly once, and nothing is mapped
after that end. An event reporting an error (``{"error": ...}``, an upstream failing
midway) ends it too, as the door's error event (:attr:`~ChatStreamReader.on_error`):
the chat client's SDK would raise there, so the door's client must not read a whole
answer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..http import sse
from .chat_wire import failure, fast_loads

__all__ = ["ChatStreamReader", "event_objects", "json_object"]


def json_object(raw: bytes) -> dict[str, Any]:
    """``raw`` as a JSON object; empty when it is not one."""
    try:
        value = fast_loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def event_objects(chunks: Sequence[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a whole event stream's ``data:`` lines, in order (anything
    else skipped): what is read of a relayed stream to store its answer."""
    for payload in sse.payloads(chunks):
        try:
            event = fast_loads(payload)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event


class ChatStreamReader(ABC):
    """Base of a chat-stream mapping: subclasses define :meth:`_chunk` and :meth:`_finish`."""

    _lines: sse.Lines | None = None
    _ended: bool = False
    on_error: Callable[[bytes], bytes] | None = None
    """The door's error event for the chat stream's error event (``data: {"error":
    ...}``); None: the mapped stream ends without one."""

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
        if not isinstance(data, dict):
            return b""
        if failure(data):
            self._ended = True
            return b"" if self.on_error is None else self.on_error(sse.event(payload))
        return self._chunk(data)

    @abstractmethod
    def _chunk(self, data: dict[str, Any]) -> bytes:
        """The mapped bytes of one chat chunk."""

    @abstractmethod
    def _finish(self) -> bytes:
        """The mapped stream's end (called once)."""
