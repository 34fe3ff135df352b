"""A lean HTTP/1.1 client for the fast path: keep-alive connections to one origin.

Why not aiohttp's client: on the reference machine it costs about 0.15 ms a call in
Python (request and response objects, tracing, timers, the cookie jar, a stream reader),
a third of what the proxy adds to a request with memory off; the upstream hop only
needs one request shape (``POST`` with a body of known length) and one answer (a status,
headers, a body). This module writes the request in one ``write`` and parses the answer
in a protocol callback, with the limits a hostile upstream calls for.

What it implements of RFC 9112: status line and header fields (obsolete line folding
refused), interim ``1xx`` answers skipped, bodies framed by ``Transfer-Encoding:
chunked`` (extensions and trailers read and dropped), by ``Content-Length`` or by the
connection's close; no body for ``204``/``304``. A connection goes back to the pool only
after a complete answer that leaves nothing unread and keeps the connection alive; a
request that failed on a pooled connection before any byte of its answer arrived (the
upstream had closed it while idle) is sent again once on a new one.

Invariants: every wait for bytes is bounded by ``read_timeout_s`` (between arrivals, not
in total: a long stream is fine, a silent one is not); at most ``buffer_limit`` unread
body bytes are held before the socket stops being read (a slow client back-pressures the
upstream); a connection whose caller was cancelled or failed is closed, never reused.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from multidict import CIMultiDict, CIMultiDictProxy

__all__ = [
    "Http1Client",
    "Http1ConnectError",
    "Http1Disconnected",
    "Http1Error",
    "Http1ProtocolError",
    "Http1Response",
]

MAX_HEAD_BYTES = 64 * 1024
"""The most an answer's status line and headers may take (aiohttp's limit is 8 KiB a
line; a larger head is a broken or hostile upstream)."""
MAX_HEADERS = 256
MAX_CHUNK_LINE = 4096
BUFFER_LIMIT = 1024 * 1024
"""Unread body bytes held before reading from the socket pauses."""
SEND_SLICE = 256 * 1024
"""A request body is written this much at a time, each slice once the socket took the
last (a multi-megabyte body copied into the transport at once held the event loop for
milliseconds, ~7 ms for the default 8 MiB limit)."""
_NO_BODY = frozenset({204, 304})


class Http1Error(Exception):
    """Root of this client's errors."""


class Http1ConnectError(Http1Error):
    """The origin could not be reached (refused, unresolvable, TLS handshake failed)."""


class Http1Disconnected(Http1Error):
    """The connection closed before the answer was complete."""

    def __init__(self, message: str, *, answered: bool) -> None:
        super().__init__(message)
        self.answered = answered
        """Whether any byte of the answer had arrived (a retry is safe only if not)."""


class Http1ProtocolError(Http1Error):
    """The origin's bytes are not a valid HTTP/1.1 answer (or exceed the limits)."""


@dataclass(frozen=True)
class _Origin:
    host: str
    port: int
    tls: bool
    host_header: str

    @classmethod
    def of(cls, url: str) -> _Origin:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        host = parts.hostname
        shown = f"[{host}]" if ":" in host else host
        default = port == (443 if tls else 80)
        return cls(host, port, tls, shown if default else f"{shown}:{port}")


class Http1Client:
    """Keep-alive HTTP/1.1 connections to the origin of ``base_url``.

    ``limit`` bounds the open connections (callers past it wait for one to be released);
    idle connections older than ``keepalive_s`` are closed instead of reused.
    """

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout_s: float,
        read_timeout_s: float,
        limit: int = 256,
        keepalive_s: float = 60.0,
        buffer_limit: int = BUFFER_LIMIT,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.origin = _Origin.of(base_url)
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.keepalive_s = keepalive_s
        self.buffer_limit = buffer_limit
        self._ssl = (ssl_context or ssl.create_default_context()) if self.origin.tls else None
        self._idle: deque[_Connection] = deque()
        self._slots = asyncio.Semaphore(limit)
        self._open: set[_Connection] = set()
        self.closed = False
        self.connections_made = 0
        """Connections opened so far (the pool's reuse is observable in tests)."""

    async def post(
        self, target: str, headers: Sequence[tuple[str, str]], body: bytes
    ) -> Http1Response:
        """Send ``POST target`` with ``body``; returns once the answer's head arrived.

        Raises :class:`Http1ConnectError`, :class:`Http1Disconnected`,
        :class:`Http1ProtocolError` or ``TimeoutError``. The caller must read the body
        (:meth:`Http1Response.read` or :meth:`Http1Response.chunks`) or
        :meth:`Http1Response.close` the answer.
        """
        if self.closed:
            raise Http1Error("client closed")
        head = self._head(target, headers, len(body))
        await self._slots.acquire()
        try:
            connection, reused = self._take()
            if connection is None:
                connection = await self._connect()
            try:
                return await self._exchange(connection, head, body)
            except Http1Disconnected as exc:
                if not reused or exc.answered:
                    raise
            connection = await self._connect()  # the idle connection had been closed
            return await self._exchange(connection, head, body)
        except BaseException:
            self._slots.release()
            raise

    async def _exchange(self, connection: _Connection, head: bytes, body: bytes) -> Http1Response:
        try:
            await connection.send(head, body)
            status, reason, headers = await connection.read_head()
            connection.start_body(status, headers)
        except BaseException:
            connection.abort()
            raise
        return Http1Response(self, connection, status, reason, headers)

    def _head(self, target: str, headers: Sequence[tuple[str, str]], length: int) -> bytes:
        lines = [f"POST {target} HTTP/1.1", f"Host: {self.origin.host_header}"]
        for name, value in headers:
            if not _safe(name) or not _safe(value) or ":" in name or not name:
                raise Http1Error(
                    f"header {name!r} cannot be sent (a control character, or an empty name "
                    "or one with a colon)"
                )
            lines.append(f"{name}: {value}")
        lines.append(f"Content-Length: {length}")
        # UTF-8 as aiohttp writes headers; surrogate escapes give back the exact bytes of a
        # client header that aiohttp's server decoded that way
        try:
            return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as exc:  # a lone surrogate no byte stands for
            raise Http1Error(f"a header cannot be sent (not encodable: {exc.reason})") from exc

    def _take(self) -> tuple[_Connection | None, bool]:
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if connection.usable and now - connection.idle_since < self.keepalive_s:
                return connection, True
            connection.abort()
        return None, False

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        origin = self.origin
        try:
            _, connection = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(self, loop),
                    origin.host,
                    origin.port,
                    ssl=self._ssl,
                    server_hostname=origin.host if self._ssl else None,
                ),
                timeout=self.connect_timeout_s,
            )
        except TimeoutError as exc:
            raise Http1ConnectError(
                f"cannot connect to {origin.host}:{origin.port}: no answer within "
                f"{self.connect_timeout_s:g} s"
            ) from exc
        except (OSError, ssl.SSLError) as exc:
            raise Http1ConnectError(
                f"cannot connect to {origin.host}:{origin.port}: {exc}"
            ) from exc
        self.connections_made += 1
        self._open.add(connection)
        return connection

    def _release(self, connection: _Connection, reusable: bool) -> None:
        self._slots.release()
        if reusable and connection.usable and not self.closed:
            connection.idle_since = time.monotonic()
            self._idle.append(connection)
        else:
            connection.abort()

    def _forget(self, connection: _Connection) -> None:
        self._open.discard(connection)

    async def close(self) -> None:
        """Close every connection; pending answers fail as disconnected."""
        self.closed = True
        for connection in list(self._open):
            connection.abort()
        self._idle.clear()


def _safe(text: str) -> bool:
    return "\r" not in text and "\n" not in text and "\0" not in text


class Http1Response:
    """An answer whose head arrived: ``status``, ``reason``, ``headers``; the body is
    read once, whole (:meth:`read`) or as it arrives (:meth:`chunks`)."""

    def __init__(
        self,
        client: Http1Client,
        connection: _Connection,
        status: int,
        reason: str,
        headers: CIMultiDictProxy[str],
    ) -> None:
        self.status, self.reason, self.headers = status, reason, headers
        self._client, self._connection = client, connection
        self._done = False

    async def read(self, limit: int | None = None) -> bytes:
        """The whole body (at most ``limit`` bytes, else :class:`Http1ProtocolError`)."""
        parts: list[bytes] = []
        size = 0
        async for part in self.chunks():
            size += len(part)
            if limit is not None and size > limit:
                self.close()
                raise Http1ProtocolError(f"answer body larger than {limit} bytes")
            parts.append(part)
        return b"".join(parts)

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The body's bytes as they arrive (de-chunked), until its end."""
        if self._done:
            return
        try:
            while True:
                part = await self._connection.read_body()
                if part is None:
                    break
                yield part
        except BaseException:
            self.close()
            raise
        self._finish(self._connection.reusable())

    def close(self) -> None:
        """Give up the answer: the connection is closed, not reused."""
        self._finish(False)

    def _finish(self, reusable: bool) -> None:
        if not self._done:
            self._done = True
            self._client._release(self._connection, reusable)


class _Connection(asyncio.Protocol):
    """One socket: bytes in, parsed on demand by the coroutine waiting for them."""

    def __init__(self, client: Http1Client, loop: asyncio.AbstractEventLoop) -> None:
        self._client, self._loop = client, loop
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._eof = False
        self._lost: BaseException | None = None
        self._reset = False
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._writing_paused = False
        self._writable: asyncio.Future[None] | None = None
        self._answered = False
        self.idle_since = 0.0
        # body framing of the current answer
        self._remaining: int | None = None  # bytes left: fixed length, or current chunk
        self._chunked = False
        self._chunk_state = 0  # 0: size line, 1: data, 2: CRLF after data, 3: trailers
        self._until_close = False
        self._keep_alive = True
        self._body_done = False

    # -- protocol callbacks --------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._answered = True
        self._buffer += data
        if len(self._buffer) > self._client.buffer_limit and not self._paused:
            self._paused = True
            assert self._transport is not None
            self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._reset = exc is not None
        self._lost = exc
        self._client._forget(self)
        self._wake()
        self._wake_writer()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake_writer()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_writer(self) -> None:
        waiter, self._writable = self._writable, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- the caller's side ---------------------------------------------------------

    @property
    def usable(self) -> bool:
        return (
            self._transport is not None
            and not self._transport.is_closing()
            and not self._eof
            and not self._buffer
        )

    async def send(self, head: bytes, body: bytes) -> None:
        """Write the request: in one write when small, else slice by slice as the socket
        takes them (each wait bounded by ``read_timeout_s``)."""
        transport = self._transport
        assert transport is not None
        if transport.is_closing() or self._eof:
            raise Http1Disconnected("connection closed before the request", answered=False)
        self._answered = False
        if len(body) <= SEND_SLICE:
            transport.write(head + body)
            return
        transport.write(head)
        view = memoryview(body)
        for start in range(0, len(body), SEND_SLICE):
            if self._writing_paused and not self._eof:
                waiter = self._writable = self._loop.create_future()
                timer = self._loop.call_later(
                    self._client.read_timeout_s, _expire, waiter, _NOT_TAKEN
                )
                try:
                    await waiter
                finally:
                    timer.cancel()
            if self._eof:
                raise self._disconnected()
            transport.write(view[start : start + SEND_SLICE])

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    async def _more(self) -> None:
        """Wait for bytes (or the end), at most ``read_timeout_s``."""
        if self._eof:
            raise self._disconnected()
        if self._paused:
            self._paused = False
            assert self._transport is not None
            self._transport.resume_reading()
        waiter = self._waiter = self._loop.create_future()
        timer = self._loop.call_later(self._client.read_timeout_s, _expire, waiter, _SILENT)
        try:
            await waiter
        finally:
            timer.cancel()

    def _disconnected(self) -> Http1Disconnected:
        why = f": {self._lost}" if self._lost else ""
        return Http1Disconnected(
            f"the upstream closed the connection before the answer ended{why}",
            answered=self._answered,
        )

    async def read_head(self) -> tuple[int, str, CIMultiDictProxy[str]]:
        """The next final (non-1xx) answer's status, reason and headers."""
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > MAX_HEAD_BYTES:
                    raise Http1ProtocolError(f"answer head larger than {MAX_HEAD_BYTES} bytes")
                if self._eof:
                    raise self._disconnected()
                await self._more()
                continue
            if end > MAX_HEAD_BYTES:
                raise Http1ProtocolError(f"answer head larger than {MAX_HEAD_BYTES} bytes")
            head = bytes(self._buffer[:end])
            del self._buffer[: end + 4]
            status, reason, headers, version = _parse_head(head)
            if 100 <= status < 200 and status != 101:
                continue  # interim answer (100 Continue, 103 Early Hints)
            if status == 101:
                raise Http1ProtocolError("upstream switched protocols (101)")
            self._keep_alive = version == "HTTP/1.1"
            connection = headers.get("Connection", "").lower()
            if "close" in connection:
                self._keep_alive = False
            elif "keep-alive" in connection:
                self._keep_alive = True
            return status, reason, CIMultiDictProxy(headers)

    def start_body(self, status: int, headers: CIMultiDictProxy[str]) -> None:
        """Set the body framing of the answer whose head was just read."""
        self._chunked, self._until_close, self._body_done = False, False, False
        self._remaining, self._chunk_state = None, 0
        if status in _NO_BODY:
            self._remaining, self._body_done = 0, True
            return
        codings = [
            c.strip().lower()
            for value in headers.getall("Transfer-Encoding", [])
            for c in value.split(",")
            if c.strip()
        ]
        if codings:
            if codings[-1] != "chunked":
                self._until_close, self._keep_alive = True, False
            else:
                self._chunked = True
            return
        lengths = {v.strip() for v in headers.getall("Content-Length", [])}
        if not lengths:
            self._until_close, self._keep_alive = True, False
            return
        if len(lengths) > 1 or not all(v.isdigit() for v in lengths):
            raise Http1ProtocolError(f"invalid Content-Length {sorted(lengths)}")
        self._remaining = int(lengths.pop())
        self._body_done = self._remaining == 0

    def reusable(self) -> bool:
        return self._body_done and self._keep_alive and self.usable

    async def read_body(self) -> bytes | None:
        """The next piece of the body; None at its end."""
        while True:
            if self._body_done:
                return None
            part = self._take_body()
            if part:
                return part
            if self._body_done:
                return None
            if self._eof:
                if self._until_close and not self._buffer and not self._reset:
                    self._body_done = True
                    return None
                raise self._disconnected()
            await self._more()

    def _take_body(self) -> bytes:
        """Body bytes available now under the framing (may be empty)."""
        buf = self._buffer
        if self._until_close:
            data = bytes(buf)
            buf.clear()
            return data
        if not self._chunked:
            assert self._remaining is not None
            data = bytes(buf[: self._remaining])
            del buf[: len(data)]
            self._remaining -= len(data)
            self._body_done = self._remaining == 0
            return data
        out: list[bytes] = []
        while buf:
            if self._chunk_state == 0:  # size line
                end = buf.find(b"\r\n")
                if end < 0:
                    if len(buf) > MAX_CHUNK_LINE:
                        raise Http1ProtocolError("chunk size line too long")
                    break
                self._remaining = _chunk_size(bytes(buf[:end]))
                del buf[: end + 2]
                self._chunk_state = 1 if self._remaining else 3
            elif self._chunk_state == 1:  # data
                assert self._remaining is not None
                data = bytes(buf[: self._remaining])
                del buf[: len(data)]
                self._remaining -= len(data)
                out.append(data)
                if self._remaining == 0:
                    self._chunk_state = 2
            elif self._chunk_state == 2:  # CRLF after the data
                if len(buf) < 2:
                    break
                if buf[:2] != b"\r\n":
                    raise Http1ProtocolError("chunk data not followed by CRLF")
                del buf[:2]
                self._chunk_state = 0
            else:  # trailer section: lines until an empty one
                end = buf.find(b"\r\n")
                if end < 0:
                    if len(buf) > MAX_HEAD_BYTES:
                        raise Http1ProtocolError("trailers too large")
                    break
                del buf[: end + 2]
                if end == 0:
                    self._body_done = True
                    break
        return b"".join(out)


_SILENT = "no bytes from the upstream within the read timeout"
_NOT_TAKEN = "the upstream took none of the request within the read timeout"


def _expire(waiter: asyncio.Future[None], why: str) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError(why))


def _chunk_size(line: bytes) -> int:
    size = line.split(b";", 1)[0].strip()
    if not size or len(size) > 16 or any(c not in b"0123456789abcdefABCDEF" for c in size):
        raise Http1ProtocolError(f"invalid chunk size {line[:40]!r}")
    return int(size, 16)


def _parse_head(head: bytes) -> tuple[int, str, CIMultiDict[str], str]:
    """Status, reason, headers and version of an answer's head (decoded as aiohttp's
    client decodes it: UTF-8, other bytes kept as surrogate escapes)."""
    lines = head.decode("utf-8", "surrogateescape").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code, _, reason = rest.partition(" ")
    if version not in ("HTTP/1.1", "HTTP/1.0") or len(code) != 3 or not code.isdigit():
        raise Http1ProtocolError(f"invalid status line {lines[0][:80]!r}")
    if len(lines) - 1 > MAX_HEADERS:
        raise Http1ProtocolError(f"more than {MAX_HEADERS} header fields")
    headers: CIMultiDict[str] = CIMultiDict()
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or line[0] in " \t":
            raise Http1ProtocolError(f"invalid header line {line[:80]!r}")
        headers.add(name, value.strip(" \t"))
    return int(code), reason, headers, version
