"""The fast path's HTTP/1.1 client against a scripted server on loopback: framing (length,
chunked at every split, close-delimited, interim answers, no-body statuses), keep-alive
reuse and its limits, a stale pooled connection, and every way an upstream can break."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from proxy.config import UpstreamConfig
from proxy.errors import UpstreamError
from proxy.http.headers import Forward
from proxy.upstream import fast as upstream
from proxy.upstream.http1 import (
    Http1Client,
    Http1ConnectError,
    Http1Disconnected,
    Http1Error,
    Http1ProtocolError,
)

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]
"""Serves one connection; the int counts the connections the server accepted so far."""


class Scripted:
    """A loopback server whose connections run ``script``; keeps the requests it read."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[tuple[bytes, bytes]] = []
        self.accepted = 0
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> Scripted:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1/chat/completions"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            await self.script(reader, writer, self.accepted)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        body = await reader.readexactly(length)
        self.requests.append((head, body))
        return body


def answers(*replies: bytes, keep_open: bool = True) -> Callable[[Scripted], Script]:
    """A script answering each request of a connection with the next reply."""

    def make(server: Scripted) -> Script:
        async def script(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int
        ) -> None:
            for reply in replies:
                await server.read_request(reader)
                writer.write(reply)
                await writer.drain()
            if keep_open:
                await reader.read()  # until the client closes

        return script

    return make


async def serve(make: Callable[[Scripted], Script]) -> Scripted:
    server = Scripted(lambda r, w, n: asyncio.sleep(0))
    server.script = make(server)
    return await server.__aenter__()


def client(url: str, **kwargs: float) -> Http1Client:
    settings = {"connect_timeout_s": 2.0, "read_timeout_s": 2.0} | kwargs
    return Http1Client(url, **settings)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def connected(
    make: Callable[[Scripted], Script], **settings: float
) -> AsyncIterator[tuple[Scripted, Http1Client]]:
    """A scripted server and a client of it, both closed afterwards."""
    server = await serve(make)
    http = client(server.url, **settings)
    try:
        yield server, http
    finally:
        await http.close()
        await server.__aexit__()


OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{"a":1}'


async def test_length_framed_answers_reuse_one_connection_and_send_the_request_as_given() -> None:
    async with connected(answers(OK, OK)) as (server, http):
        for _ in range(2):
            response = await http.post(
                "/v1/chat/completions?api-version=1", [("X-Trace", "é ok")], b'{"q":1}'
            )
            assert (response.status, await response.read()) == (200, b'{"a":1}')
            assert response.headers["content-type"] == "application/json"
        assert http.connections_made == 1 and server.accepted == 1
        head, body = server.requests[0]
        assert head.startswith(b"POST /v1/chat/completions?api-version=1 HTTP/1.1\r\n")
        assert b"\r\nHost: 127.0.0.1:" in head and b"\r\nContent-Length: 7\r\n" in head
        assert "X-Trace: é ok".encode() in head and body == b'{"q":1}'


CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5;ext=1\r\nhello\r\n1\r\n \r\nA\r\nworld!!!!!\r\n0\r\nX-Trailer: t\r\n\r\n"
)


@pytest.mark.parametrize("split", range(1, len(CHUNKED), 7))
async def test_a_chunked_answer_split_anywhere_reads_whole_and_keeps_the_connection(
    split: int,
) -> None:
    def make(server: Scripted) -> Script:
        async def script(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int
        ) -> None:
            for _ in range(2):
                await server.read_request(reader)
                writer.write(CHUNKED[:split])
                await writer.drain()
                await asyncio.sleep(0.005)
                writer.write(CHUNKED[split:])
                await writer.drain()
            await reader.read()

        return script

    async with connected(make) as (_server, http):
        for _ in range(2):
            response = await http.post("/x", [], b"{}")
            assert await response.read() == b"hello world!!!!!"
        assert http.connections_made == 1


async def test_chunks_arrive_as_sent_before_the_answer_ends() -> None:
    release = asyncio.Event()

    def make(server: Scripted) -> Script:
        async def script(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int
        ) -> None:
            await server.read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\ndata: \r\n")
            await writer.drain()
            await release.wait()
            writer.write(b"2\r\nok\r\n0\r\n\r\n")
            await writer.drain()
            await reader.read()

        return script

    async with connected(make) as (_server, http):
        response = await http.post("/x", [], b"{}")
        parts = response.chunks()
        assert await anext(parts) == b"data: "  # before the rest was even written
        release.set()
        assert [p async for p in parts] == [b"ok"]


async def test_a_close_delimited_answer_ends_at_the_close_and_is_not_reused() -> None:
    async with connected(answers(b"HTTP/1.1 200 OK\r\n\r\nall of it", keep_open=False)) as (
        _server,
        http,
    ):
        response = await http.post("/x", [], b"{}")
        assert await response.read() == b"all of it"
        response = await http.post("/x", [], b"{}")
        assert await response.read() == b"all of it"
        assert http.connections_made == 2


async def test_interim_answers_are_skipped_and_no_body_statuses_keep_the_connection() -> None:
    continue_then_ok = (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n" + OK
    )
    no_content = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
    async with connected(answers(continue_then_ok, no_content, OK)) as (_server, http):
        first = await http.post("/x", [], b"{}")
        assert (first.status, await first.read()) == (200, b'{"a":1}')
        second = await http.post("/x", [], b"{}")
        assert (second.status, await second.read()) == (204, b"")
        third = await http.post("/x", [], b"{}")
        assert await third.read() == b'{"a":1}'
        assert http.connections_made == 1


async def test_connection_close_in_the_answer_is_honoured() -> None:
    close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi"
    async with connected(answers(close, keep_open=False)) as (_server, http):
        for _ in range(2):
            response = await http.post("/x", [], b"{}")
            assert await response.read() == b"hi"
        assert http.connections_made == 2


async def test_a_pooled_connection_the_upstream_closed_while_idle_is_not_reused() -> None:
    def make(server: Scripted) -> Script:
        async def script(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int
        ) -> None:
            await server.read_request(reader)
            writer.write(OK)
            await writer.drain()
            # closes right after answering, without saying so (an idle timeout)

        return script

    async with connected(make) as (server, http):
        for _ in range(3):
            response = await http.post("/x", [], b"{}")
            assert await response.read() == b'{"a":1}'
            await asyncio.sleep(0.02)
        assert server.accepted == 3 and len(server.requests) == 3  # each request sent once


async def test_a_request_the_upstream_dropped_on_a_reused_connection_is_sent_again_once() -> None:
    def make(server: Scripted) -> Script:
        async def script(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int
        ) -> None:
            await server.read_request(reader)
            writer.write(OK)
            await writer.drain()
            if n == 1:
                await server.read_request(reader)  # the second request: closed unanswered
                return
            await reader.read()

        return script

    async with connected(make) as (server, http):
        for _ in range(2):
            response = await http.post("/x", [], b"{}")
            assert await response.read() == b'{"a":1}'
        assert http.connections_made == 2 and len(server.requests) == 3


async def test_a_close_in_the_middle_of_the_body_fails_and_is_not_retried() -> None:
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part"
    async with connected(answers(cut, keep_open=False)) as (server, http):
        response = await http.post("/x", [], b"{}")
        with pytest.raises(Http1Disconnected) as caught:
            await response.read()
        assert caught.value.answered
        assert len(server.requests) == 1


async def test_a_close_before_any_answer_on_a_new_connection_is_an_error_not_a_retry() -> None:
    def make(server: Scripted) -> Script:
        async def script(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int
        ) -> None:
            await server.read_request(reader)  # and close without a word

        return script

    async with connected(make) as (server, http):
        with pytest.raises(Http1Disconnected) as caught:
            await http.post("/x", [], b"{}")
        assert not caught.value.answered
        assert len(server.requests) == 1


async def test_a_silent_upstream_times_out_between_bytes_not_in_total() -> None:
    def make(server: Scripted) -> Script:
        async def script(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int
        ) -> None:
            await server.read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(4):  # 0.4 s in all, each gap under the 0.25 s timeout
                await asyncio.sleep(0.1)
                writer.write(b"1\r\n.\r\n")
                await writer.drain()
            await asyncio.sleep(5)  # then silence

        return script

    async with connected(make, read_timeout_s=0.25) as (_server, http):
        response = await http.post("/x", [], b"{}")
        got = []
        with pytest.raises(TimeoutError):
            async for part in response.chunks():
                got.append(part)
        assert b"".join(got) == b"...."


@pytest.mark.parametrize(
    ("reply", "what"),
    [
        (b"HTTP/2 200 OK\r\n\r\n", "invalid status line"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "invalid status line"),
        (b"HTTP/1.1 200 OK\r\nNo-Colon\r\n\r\n", "invalid header line"),
        (b"HTTP/1.1 200 OK\r\nA: 1\r\n folded\r\n\r\n", "invalid header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", "head larger"),
        (b"HTTP/1.1 101 Switching\r\n\r\n", "switched protocols"),
    ],
)
async def test_a_malformed_head_is_a_protocol_error(reply: bytes, what: str) -> None:
    async with connected(answers(reply)) as (_server, http):
        with pytest.raises(Http1ProtocolError, match=what):
            await http.post("/x", [], b"{}")


@pytest.mark.parametrize(
    "body",
    [b"zz\r\nab\r\n0\r\n\r\n", b"2\r\nabXX0\r\n\r\n", b"1" * 5000],
)
async def test_a_malformed_chunked_body_is_a_protocol_error(body: bytes) -> None:
    reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    async with connected(answers(reply)) as (_server, http):
        response = await http.post("/x", [], b"{}")
        with pytest.raises(Http1ProtocolError):
            await response.read()


async def test_a_body_past_the_read_limit_is_refused() -> None:
    async with connected(answers(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789")) as (
        _server,
        http,
    ):
        response = await http.post("/x", [], b"{}")
        with pytest.raises(Http1ProtocolError, match="larger than 4"):
            await response.read(limit=4)


async def test_control_characters_in_a_header_are_refused_before_anything_is_sent() -> None:
    async with connected(answers(OK)) as (server, http):
        for name, value in (("X-A", "1\r\nX-Injected: 1"), ("X-B\n", "1"), ("X-C", "a\0b")):
            with pytest.raises(Http1Error, match="cannot be sent"):
                await http.post("/x", [(name, value)], b"{}")
        assert server.requests == [] and http.connections_made == 0


async def test_an_unreachable_origin_is_a_connect_error() -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    http = client(f"http://127.0.0.1:{port}/v1")
    with pytest.raises(Http1ConnectError, match=f"127.0.0.1:{port}"):
        await http.post("/x", [], b"{}")
    await http.close()


async def test_a_cancelled_caller_leaves_no_connection_to_reuse() -> None:
    gate = asyncio.Event()

    def make(server: Scripted) -> Script:
        async def script(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int
        ) -> None:
            await server.read_request(reader)
            if n == 1:
                await gate.wait()  # never answers the first connection's request
                return
            writer.write(OK)
            await writer.drain()
            await reader.read()

        return script

    server = await serve(make)
    http = client(server.url)
    try:
        pending = asyncio.ensure_future(http.post("/x", [], b"{}"))
        await asyncio.sleep(0.05)
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        response = await http.post("/x", [], b"{}")
        assert await response.read() == b'{"a":1}'
    finally:
        gate.set()
        await http.close()
        await server.__aexit__()
    assert http.connections_made == 2


async def test_the_connection_limit_queues_callers_instead_of_opening_more() -> None:
    async with connected(answers(OK, OK, OK), limit=1) as (_server, http):

        async def one() -> bytes:
            response = await http.post("/x", [], b"{}")
            return await response.read()

        # gather answers a list (typeshed says a tuple)
        assert list(await asyncio.gather(one(), one(), one())) == [b'{"a":1}'] * 3
        assert http.connections_made == 1


async def test_a_large_answer_read_slowly_arrives_whole() -> None:
    size = 6 * 1024 * 1024
    payload = bytes(range(256)) * (size // 256)

    def make(server: Scripted) -> Script:
        async def script(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int
        ) -> None:
            await server.read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + payload)
            await writer.drain()
            await reader.read()

        return script

    async with connected(make, read_timeout_s=5, buffer_limit=64 * 1024) as (_server, http):
        response = await http.post("/x", [], b"{}")
        got = bytearray()
        async for part in response.chunks():
            got += part
            await asyncio.sleep(0)  # a consumer slower than the socket
        assert bytes(got) == payload


async def test_headers_travel_as_utf8_bytes_both_ways() -> None:
    reply = "HTTP/1.1 200 OK\r\nX-Detail: é 日本\r\nContent-Length: 2\r\n\r\nok".encode()
    async with connected(answers(reply)) as (server, http):
        response = await http.post("/x", [("X-Name", "日本"), ("X-Raw", "a\udce9b")], b"{}")
        assert response.headers["X-Detail"] == "é 日本"
        assert await response.read() == b"ok"
        head = server.requests[0][0]
        assert "X-Name: 日本".encode() in head
        assert b"X-Raw: a\xe9b\r\n" in head  # a byte aiohttp decoded as an escape, as sent
        with pytest.raises(Http1Error, match="not encodable"):
            await http.post("/x", [("X-Bad", "\ud800")], b"{}")


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (b'HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{"a":123456}', "larger than 8 bytes"),
        (b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"cut"', "upstream answer incomplete"),
        (b"garbage\r\n\r\n", "upstream request failed: invalid status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n", "invalid Content-Length"),
    ],
)
async def test_the_fast_path_names_a_broken_answer(
    reply: bytes, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cut body, a malformed head, and (the limit made 8 bytes) an answer too large."""
    monkeypatch.setattr(upstream, "MAX_REPLY_BYTES", 8)
    async with connected(answers(reply, keep_open=False)) as (server, _http):
        base = server.url.removesuffix("/chat/completions")
        fast = upstream.FastUpstream(UpstreamConfig(model="*", provider="openai", api_base=base))
        try:
            with pytest.raises(UpstreamError, match=message) as caught:
                await fast.complete({}, b"{}", Forward())
            assert caught.value.status == 502
        finally:
            await fast.close()


async def test_a_large_request_reaches_a_slow_reader_whole_and_a_stalled_one_times_out() -> None:
    body = bytes(range(256)) * (5 * 1024 * 1024 // 256)  # 20 send slices

    def make(server: Scripted) -> Script:
        async def script(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int
        ) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            if n == 2:
                await asyncio.sleep(5)  # takes nothing of the body
                return
            got = bytearray()
            while len(got) < len(body):
                got += await reader.read(64 * 1024)
                await asyncio.sleep(0.001)
            server.requests.append((head, bytes(got)))
            writer.write(OK)
            await writer.drain()
            await reader.read()

        return script

    async with connected(make, read_timeout_s=1.0) as (server, http):
        response = await http.post("/x", [], body)
        assert await response.read() == b'{"a":1}'
        assert server.requests[0][1] == body
        stalled = client(server.url, read_timeout_s=0.3)
        try:
            with pytest.raises(TimeoutError, match="took none of the request"):
                await stalled.post("/x", [], body)
        finally:
            await stalled.close()
