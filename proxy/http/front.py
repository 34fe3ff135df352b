"""The lean front: ``POST /v1/chat/completions`` answered straight off the socket.

Why: aiohttp's server cost about as much per request as everything else the proxy does
with memory off (on loopback a bare aiohttp hop added +0.19-0.25 ms, a raw asyncio
relay +0.08-0.13; areamem with memory off +0.33-0.39, issue 11). The front reads a
request head in one pass over its bytes and writes an answer in one write.

What it serves: a request it fully understands. HTTP/1.1, ``POST`` to one of the chat
routes, a head of printable ASCII with token header names, at most one
``Content-Length`` of digits within ``server.max_body_bytes``, and no
``Transfer-Encoding``, ``Expect`` or ``Upgrade``. Everything else (another route or
method, a chunked or oversized body, HTTP/1.0, ``Expect: 100-continue``, non-ASCII
header bytes, a head past :data:`MAX_HEAD` bytes, bare line feeds) is handed over, with
the connection and every byte read of it, to aiohttp, which answers it as it answers
every other route and refuses a malformed request with its 400. So the front never
decides what an odd request means, and what it does serve is answered by the same
handler (:func:`proxy.chat.handler.answer_chat`) through :class:`proxy.http.client_io.ClientIO`.
A connection handed over stays with aiohttp.

Limits, as aiohttp's: a connection that sends no complete head within
``server.header_timeout_s`` (or idles that long between requests) is closed; the body
must arrive within ``server.body_timeout_s`` (the handler answers 408); a client that
reads nothing for ``server.write_timeout_s`` is dropped (by the handler); a client that
goes away cancels its request's handler; one that reads nothing of a whole answer for
``server.write_timeout_s`` is dropped (here: the answer is handed to the transport at
once). Pipelined requests are answered in order; while
a request is answered, reading pauses once a head's worth of the next has arrived. A
connection whose request body was not read whole is closed after its answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus

from multidict import CIMultiDict, CIMultiDictProxy

from ..chat.handler import CLIENT_CLOSED, answer_chat
from ..errors import internal_error_body
from ..services import Services

__all__ = ["MAX_HEAD", "FrontServer", "Head", "parse_head"]

MAX_HEAD = 8190
"""The largest request head the front serves (aiohttp's limit for one line): a longer
one, complete or not, goes to aiohttp, which takes heads of many such lines."""
_MAX_HEADERS = 100
_ROUTES = {route.encode(): route for route in ("/v1/chat/completions", "/chat/completions")}
_HEAD_BYTES = re.compile(rb"[\t\r\n\x20-\x7e]*")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_QUERY = re.compile(rb"[\x21-\x22\x24-\x7e]*")  # visible ASCII but '#'
_FRAMING = ("Transfer-Encoding", "Expect", "Upgrade")
_REASONS = {s.value: s.phrase for s in HTTPStatus}
_SERVER = "areamem"


@dataclass(frozen=True)
class Head:
    """A request head the front serves."""

    route: str
    query: str
    headers: CIMultiDictProxy[str]
    length: int
    close: bool


def parse_head(head: bytes, max_body: int) -> Head | None:
    """The head (without its blank line) when the front serves it, else None (hand over)."""
    if not _HEAD_BYTES.fullmatch(head) or head.count(b"\r") != head.count(b"\n"):
        return None  # non-ASCII, control bytes, or a bare CR or LF
    lines = head.split(b"\r\n")
    method, _, rest = lines[0].partition(b" ")
    target, _, version = rest.partition(b" ")
    path, _, query = target.partition(b"?")
    route = _ROUTES.get(path)
    if method != b"POST" or version != b"HTTP/1.1" or route is None:
        return None
    if not _QUERY.fullmatch(query) or len(lines) > _MAX_HEADERS + 1:
        return None
    pairs: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            return None  # obs-fold, a space before the colon, no colon
        pairs.append((name.decode("ascii"), value.strip(b" \t").decode("ascii")))
    headers = CIMultiDictProxy(CIMultiDict(pairs))
    length = _length(headers, max_body)
    if length is None or any(name in headers for name in _FRAMING):
        return None
    return Head(route, query.decode("ascii"), headers, length, _closes(headers))


def _length(headers: CIMultiDictProxy[str], max_body: int) -> int | None:
    """The body's length: 0 without ``Content-Length``; None when it is not one plain
    number within ``max_body``."""
    values = headers.getall("Content-Length", [])
    if not values:
        return 0
    if len(values) > 1 or not values[0].isdigit() or len(values[0]) > 18:
        return None
    length = int(values[0])
    return length if length <= max_body else None


def _closes(headers: CIMultiDictProxy[str]) -> bool:
    return any(
        token.strip().lower() == "close"
        for value in headers.getall("Connection", [])
        for token in value.split(",")
    )


class _DateHeader:
    """The ``Date`` value, formatted once a second."""

    def __init__(self) -> None:
        self._second, self._value = -1, ""

    def __call__(self) -> str:
        now = int(time.time())
        if now != self._second:
            self._second, self._value = now, formatdate(now, usegmt=True)
        return self._value


_date = _DateHeader()


def _head_bytes(status: int, headers: Mapping[str, str], extra: list[tuple[str, str]]) -> bytes:
    """A response head; raises ValueError for a header that would break its framing."""
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}"]
    for name, value in (*headers.items(), *extra):
        if "\r" in name or "\n" in name or "\r" in value or "\n" in value or ":" in name:
            raise ValueError(f"header {name[:40]!r} holds a line break or colon")
        lines.append(f"{name}: {value}")
    lines.append(f"Date: {_date()}")
    lines.append(f"Server: {_SERVER}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")


class _Request:
    """:class:`proxy.http.client_io.ClientIO` for one request the front serves."""

    def __init__(self, conn: _Connection, head: Head, body: bytearray) -> None:
        self._conn, self._head = conn, head
        self.body = body
        self.waiting: asyncio.Future[None] | None = None
        self.status = CLIENT_CLOSED
        self.started = False
        self.ended = False

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self._head.headers

    @property
    def query_string(self) -> str:
        return self._head.query

    @property
    def content_length(self) -> int | None:
        return self._head.length

    def body_ready(self) -> bool:
        return len(self.body) >= self._head.length

    async def read(self) -> bytes:
        if not self.body_ready():
            self.waiting = asyncio.get_running_loop().create_future()
            await self.waiting
        return bytes(self.body)

    def closes(self) -> bool:
        """Whether the connection closes after this answer."""
        return self._head.close or self._conn.closing or not self.body_ready()

    async def send(
        self,
        status: int,
        body: bytes,
        headers: Mapping[str, str],
        content_type: str = "application/json",
        charset: str | None = None,
    ) -> None:
        if self.started:  # a failure after the stream began: nothing can be said now
            self.abort()
            return
        if self._conn.gone():  # the client left as the answer was ready: nobody to tell
            return
        kind = f"{content_type}; charset={charset}" if charset else content_type
        extra = [] if "Content-Type" in headers else [("Content-Type", kind)]
        extra.append(("Content-Length", str(len(body))))
        if self.closes():
            extra.append(("Connection", "close"))
        self._conn.write(_head_bytes(status, headers, extra) + body)
        self._conn.watch_drain()
        self.status, self.started, self.ended = status, True, True

    async def start(self, status: int, headers: Mapping[str, str]) -> None:
        extra = [("Transfer-Encoding", "chunked")]
        if self.closes():
            extra.append(("Connection", "close"))
        head = _head_bytes(status, headers, extra)
        self.status, self.started = status, True
        await self._conn.send(head)

    async def write(self, data: bytes) -> None:
        if data:
            await self._conn.send(b"%x\r\n%b\r\n" % (len(data), data))

    async def end(self) -> None:
        await self._conn.send(b"0\r\n\r\n")
        self.ended = True

    def abort(self) -> None:
        self._conn.abort()


class _Connection(asyncio.Protocol):
    """One client connection, until it closes or is handed over to aiohttp."""

    def __init__(self, front: FrontServer) -> None:
        self._front = front
        self._svc = front.services
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._request: _Request | None = None
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._drained: asyncio.Future[None] | None = None
        self._drain_timer: asyncio.TimerHandle | None = None
        self._paused_reading = False
        self._lost = False
        self.closing = False

    # -- asyncio callbacks ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._front.connections.add(self)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        request = self._request
        if request is None:
            self._buffer += data
            self._next()
            return
        missing = (request.content_length or 0) - len(request.body)
        if missing > 0:
            request.body += data[:missing]
            data = data[missing:]
            if request.body_ready() and request.waiting is not None:
                request.waiting.set_result(None)
        if data:
            self._buffer += data
            if len(self._buffer) > MAX_HEAD and not self._paused_reading:
                self._pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._front.connections.discard(self)
        self._stop_timer()
        if self._drain_timer is not None:
            self._drain_timer.cancel()
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self._drained is not None and not self._drained.done():
            self._drained.set_exception(ConnectionResetError("the client closed the connection"))
            self._drained.exception()  # retrieved here: a writer may not be waiting

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None
        if self._drain_timer is not None:
            self._drain_timer.cancel()
            self._drain_timer = None

    # -- writing (from the handler) ---------------------------------------------------

    def gone(self) -> bool:
        return self._lost or self._transport is None or self._transport.is_closing()

    def write(self, data: bytes) -> None:
        if self.gone():
            raise ConnectionResetError("the client closed the connection")
        assert self._transport is not None
        self._transport.write(data)

    async def send(self, data: bytes) -> None:
        """Write, then wait while the client reads slower than the answer comes."""
        self.write(data)
        if self._drained is not None:
            await asyncio.shield(self._drained)

    def watch_drain(self) -> None:
        """After a whole answer was handed over unread by the client (the transport holds
        more than its high-water mark): drop the connection unless the client reads some
        of it within ``server.write_timeout_s``, as a stream's writes are bounded."""
        if self._drained is None or self._drain_timer is not None:
            return
        limit = self._svc.config.server.write_timeout_s
        self._drain_timer = asyncio.get_running_loop().call_later(limit, self.abort)

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    # -- requests ---------------------------------------------------------------------

    def _next(self) -> None:
        """Serve the buffered head, hand the connection over, or wait for more."""
        end = self._buffer.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
        if end < 0:
            if len(self._buffer) > MAX_HEAD or b"\n\n" in self._buffer:
                self._hand_over()
            return
        head = parse_head(bytes(self._buffer[:end]), self._svc.config.server.max_body_bytes)
        if head is None:
            self._hand_over()
            return
        self._stop_timer()
        start, stop = end + 4, end + 4 + head.length
        body = self._buffer[start:stop]
        del self._buffer[:stop]
        self._request = _Request(self, head, body)
        self._task = asyncio.get_running_loop().create_task(self._serve(self._request, head))

    async def _serve(self, request: _Request, head: Head) -> None:
        try:
            await answer_chat(self._svc, request)
        except asyncio.CancelledError:
            pass  # the client went away: the handler logged it
        except Exception as exc:  # answer_chat answers its own errors: a defect here
            self._svc.log.write({"event": "internal_error", "path": head.route, "error": repr(exc)})
            with contextlib.suppress(Exception):
                await request.send(500, internal_error_body(exc), {})
        finally:
            self._svc.metrics.http_requests.labels(
                route=head.route, status=str(request.status)
            ).inc()
        self._finished(request)

    def _finished(self, request: _Request) -> None:
        self._request, self._task = None, None
        if self._lost or self._transport is None:
            return
        if not request.ended or request.closes():
            self._transport.close()
            return
        if self._paused_reading:
            self._paused_reading = False
            self._transport.resume_reading()
        self._await_head()
        if self._buffer:
            self._next()

    def _hand_over(self) -> None:
        """Give the connection, and every byte read of it, to aiohttp."""
        self._stop_timer()
        self._front.connections.discard(self)
        transport = self._transport
        assert transport is not None
        if self._paused_reading:
            transport.resume_reading()
        protocol = self._front.fallback()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        data, self._buffer = bytes(self._buffer), bytearray()
        if data:
            protocol.data_received(data)

    # -- timers and flow --------------------------------------------------------------

    def _await_head(self) -> None:
        timeout = self._svc.config.server.header_timeout_s
        self._timer = asyncio.get_running_loop().call_later(timeout, self._head_timeout)

    def _head_timeout(self) -> None:
        self._timer = None
        if self._request is None and self._transport is not None:
            self._transport.close()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _pause_reading(self) -> None:
        assert self._transport is not None
        self._paused_reading = True
        self._transport.pause_reading()

    def close_when_idle(self) -> bool:
        """Shutdown: close now if no request is in flight (True), else after it."""
        self.closing = True
        if self._request is None and self._transport is not None:
            self._transport.close()
            return True
        return False

    @property
    def task(self) -> asyncio.Task[None] | None:
        return self._task


class FrontServer:
    """The protocol factory for the listening socket, and its shutdown.

    ``fallback`` makes the protocol a handed-over connection continues with (aiohttp's
    ``web.Server`` of the same app)."""

    def __init__(self, services: Services, fallback: Callable[[], asyncio.Protocol]) -> None:
        self.services = services
        self.fallback = fallback
        self.connections: set[_Connection] = set()

    def protocol(self) -> asyncio.Protocol:
        return _Connection(self)

    async def shutdown(self, grace_s: float) -> None:
        """Close idle connections now, let requests in flight finish within ``grace_s``
        (each connection closes after its answer), then cancel what is left."""
        for conn in list(self.connections):
            conn.close_when_idle()
        tasks = [c.task for c in self.connections if c.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        for conn in list(self.connections):
            conn.abort()
