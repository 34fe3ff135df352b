"""The lean front (proxy/http/front.py): what it serves itself, what it hands to aiohttp, and
that a client sees one server either way. Raw sockets against a real proxy on loopback.

Which server answered shows in the ``Server`` header: ``areamem`` for the front,
aiohttp's own for a request it was handed.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import pytest

from proxy.fake_upstream import FakeUpstream
from proxy.http.front import MAX_HEAD, parse_head

from .conftest import MakeProxy, Proxy, proxy_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

_Answer = tuple[int, dict[str, str], bytes]
_BODY = json.dumps({"model": "echo", "messages": [{"role": "user", "content": "hello"}]}).encode()


def _request(body: bytes = _BODY, *, path: str = "/v1/chat/completions", extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"X-Memory: off\r\n{extra}Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def _port(proxy: Proxy) -> int:
    return int(proxy.url.rsplit(":", 1)[1])


class _Responses:
    """Reads HTTP/1.1 responses (Content-Length or chunked) off one socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.data = sock, b""

    def _fill(self) -> None:
        more = self.sock.recv(65536)
        if not more:
            raise EOFError("closed")
        self.data += more

    def _until(self, marker: bytes) -> bytes:
        while marker not in self.data:
            self._fill()
        part, self.data = self.data.split(marker, 1)
        return part

    def _exactly(self, size: int) -> bytes:
        while len(self.data) < size:
            self._fill()
        part, self.data = self.data[:size], self.data[size:]
        return part

    def next(self) -> _Answer:
        lines = self._until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
        if status == 100:
            return self.next()
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while size := int(self._until(b"\r\n"), 16):
                body += self._exactly(size)
                self._exactly(2)
            self._exactly(2)
            return status, headers, body
        return status, headers, self._exactly(int(headers.get("content-length", "0")))

    def closed(self) -> bool:
        try:
            self._fill()
        except (EOFError, ConnectionResetError):
            return True
        return False


async def _exchange(port: int, payload: bytes, count: int) -> list[_Answer]:
    def run() -> list[_Answer]:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(payload)
            reader = _Responses(sock)
            return [reader.next() for _ in range(count)]

    return await asyncio.get_running_loop().run_in_executor(None, run)


async def _proxy_with(make_proxy: MakeProxy, upstream: FakeUpstream, **server: Any) -> Proxy:
    """A proxy whose ``server:`` section has ``server`` on top of the test defaults."""
    config = proxy_config(upstream.url)
    config["server"].update(server)
    return await make_proxy(config)


def _chat_lines(proxy: Proxy) -> list[dict[str, Any]]:
    return [r for r in proxy.log_records() if r.get("event") == "chat"]


# -- the head parser ------------------------------------------------------------------


def test_the_front_serves_only_heads_it_fully_understands() -> None:
    ok = b"POST /v1/chat/completions?api-version=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 12"
    head = parse_head(ok, 100)
    assert head is not None and head.length == 12 and head.query == "api-version=1"
    assert head.route == "/v1/chat/completions" and not head.close
    closing = parse_head(b"POST /chat/completions HTTP/1.1\r\nConnection: keep-alive, Close", 9)
    assert closing is not None and closing.close and closing.length == 0
    handed_over = [
        b"GET /v1/chat/completions HTTP/1.1\r\nHost: x",
        b"POST /v1/chat/completions HTTP/1.0\r\nHost: x",
        b"POST /v1/chat/completions/ HTTP/1.1\r\nHost: x",
        b"POST /v1//chat/completions HTTP/1.1\r\nHost: x",
        b"POST /v1/chat/completions#x HTTP/1.1\r\nHost: x",
        b"POST  /v1/chat/completions HTTP/1.1\r\nHost: x",
        b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked",
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked",
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5",
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: -5",
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5 5",
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 101",  # past max_body
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: " + b"9" * 40,
        b"POST /v1/chat/completions HTTP/1.1\r\nExpect: 100-continue",
        b"POST /v1/chat/completions HTTP/1.1\r\nUpgrade: h2c",
        b"POST /v1/chat/completions HTTP/1.1\r\nX-A: 1\r\n folded",
        b"POST /v1/chat/completions HTTP/1.1\r\nX-A : 1",
        b"POST /v1/chat/completions HTTP/1.1\r\nno colon",
        b"POST /v1/chat/completions HTTP/1.1\r\nX-A: caf\xc3\xa9",
        b"POST /v1/chat/completions HTTP/1.1\r\nX-A: a\x00b",
        b"POST /v1/chat/completions HTTP/1.1\r\nX-A: a\nX-B: b",
        b"POST /v1/chat/completions HTTP/1.1\r\nX-A: a\rX-B: b",
        b"POST /v1/chat/completions HTTP/1.1" + b"\r\nX-A: 1" * 101,
    ]
    for raw in handed_over:
        assert parse_head(raw, 100) is None, raw


# -- served by the front --------------------------------------------------------------


async def test_chat_is_answered_by_the_front_with_the_openai_client(proxy: Proxy) -> None:
    async with proxy.client() as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="echo", messages=[{"role": "user", "content": "front door"}]
        )
        assert raw.headers["server"] == "areamem" and raw.headers["date"]
        assert raw.parse().choices[0].message.content == "echo: front door"
        chunks = [
            c.choices[0].delta.content
            async for c in await client.chat.completions.create(
                model="echo", messages=[{"role": "user", "content": "a b"}], stream=True
            )
            if c.choices and c.choices[0].delta.content
        ]
        assert "".join(chunks).strip() == "echo: a b"
    await proxy.settle()
    assert [line["status"] for line in _chat_lines(proxy)] == [200, 200]


async def test_pipelined_requests_are_answered_in_order(proxy: Proxy) -> None:
    first = json.dumps({"model": "echo", "messages": [{"role": "user", "content": "one"}]})
    second = json.dumps(
        {"model": "echo", "stream": True, "messages": [{"role": "user", "content": "two"}]}
    )
    payload = _request(first.encode()) + _request(second.encode()) + _request()
    answers = await _exchange(_port(proxy), payload, 3)
    assert [(status, h["server"]) for status, h, _ in answers] == [(200, "areamem")] * 3
    assert b"echo: one" in answers[0][2] and b"two" in answers[1][2]
    assert answers[1][1]["content-type"] == "text/event-stream"
    assert answers[1][2].rstrip().endswith(b"data: [DONE]")


async def test_a_connection_moves_to_aiohttp_for_other_routes_and_stays_correct(
    proxy: Proxy,
) -> None:
    healthz = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    answers = await _exchange(_port(proxy), _request() + healthz + _request(), 3)
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert answers[0][1]["server"] == "areamem"
    assert answers[1][1]["server"] != "areamem" and json.loads(answers[1][2])["status"] == "ok"
    assert answers[2][1]["server"] != "areamem" and b"echo: hello" in answers[2][2]


@pytest.mark.parametrize(
    ("name", "payload", "status"),
    [
        (
            "chunked body",
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Memory: off\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
            + b"%x\r\n" % len(_BODY) + _BODY + b"\r\n0\r\n\r\n",
            200,
        ),
        ("expect 100-continue", _request(extra="Expect: 100-continue\r\n"), 200),
        ("HTTP/1.0", _request().replace(b"HTTP/1.1", b"HTTP/1.0", 1), 200),
        ("non-ASCII header", _request(extra="X-Title: caf\u00e9\r\n"), 200),
        ("GET", b"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n", 405),
        ("two lengths", _request(extra="Content-Length: 3\r\n"), 400),
        (
            "length and chunked",
            _request(extra="Transfer-Encoding: chunked\r\n"),
            400,
        ),
        ("folded header", _request(extra="X-A: 1\r\n folded\r\n"), 400),
    ],
)
async def test_what_the_front_hands_over_is_answered_as_aiohttp_answers_it(
    proxy: Proxy, name: str, payload: bytes, status: int
) -> None:
    if name == "non-ASCII header":
        payload = payload.replace("caf\u00e9".encode(), "caf\u00e9".encode("utf-8"))
    (answer,) = await _exchange(_port(proxy), payload, 1)
    assert answer[0] == status, (name, answer)
    assert answer[1]["server"] != "areamem"
    if status == 200:
        assert b"echo: hello" in answer[2]


async def test_a_head_past_the_limit_goes_to_aiohttp_which_refuses_it(proxy: Proxy) -> None:
    payload = _request(extra=f"X-Big: {'a' * (MAX_HEAD + 10)}\r\n")
    (answer,) = await _exchange(_port(proxy), payload, 1)
    assert answer[0] in (400, 431) and answer[1]["server"] != "areamem"


async def test_a_body_past_the_limit_is_refused(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await _proxy_with(make_proxy, upstream, max_body_bytes=2000)
    (answer,) = await _exchange(_port(proxy), _request(b"x" * 5000), 1)
    assert answer[0] == 413 and b"server.max_body_bytes" in answer[2]


# -- limits -----------------------------------------------------------------------------


async def test_an_answer_sent_before_the_body_arrived_closes_the_connection(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    config = proxy_config(upstream.url)
    config["auth"] = {"mode": "keys", "keys": {"sk-good": "alice"}}
    proxy = await make_proxy(config)

    def run() -> tuple[int, bool]:
        with socket.create_connection(("127.0.0.1", _port(proxy)), timeout=10) as sock:
            head = _request(b"x" * 1000, extra="Authorization: Bearer sk-wrong\r\n")
            sock.sendall(head[:-900])  # the head and a tenth of the body
            reader = _Responses(sock)
            status, headers, _ = reader.next()
            assert headers["connection"] == "close"
            return status, reader.closed()

    assert await asyncio.get_running_loop().run_in_executor(None, run) == (401, True)


async def test_a_client_that_leaves_mid_body_is_logged_as_gone(proxy: Proxy) -> None:
    def run() -> None:
        with socket.create_connection(("127.0.0.1", _port(proxy)), timeout=10) as sock:
            sock.sendall(_request()[:-5])
            time.sleep(0.2)

    await asyncio.get_running_loop().run_in_executor(None, run)
    for _ in range(100):
        await proxy.settle()
        if _chat_lines(proxy):
            break
        await asyncio.sleep(0.05)
    (line,) = _chat_lines(proxy)
    assert line["outcome"] == "client_disconnected" and line["status"] == 499


async def test_an_idle_keep_alive_connection_is_closed_after_the_header_timeout(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await _proxy_with(make_proxy, upstream, header_timeout_s=0.3)

    def run() -> tuple[int, bool, float]:
        with socket.create_connection(("127.0.0.1", _port(proxy)), timeout=10) as sock:
            sock.sendall(_request())
            reader = _Responses(sock)
            status = reader.next()[0]
            began = time.monotonic()
            return status, reader.closed(), time.monotonic() - began

    status, closed, waited = await asyncio.get_running_loop().run_in_executor(None, run)
    assert status == 200 and closed and waited < 5


async def test_shutdown_lets_a_request_in_flight_finish_and_closes_idle_connections(
    make_proxy: MakeProxy,
) -> None:
    slow = await FakeUpstream(first_token_s=0.3).start()
    try:
        proxy = await make_proxy(proxy_config(slow.url))
        loop = asyncio.get_running_loop()
        idle = socket.create_connection(("127.0.0.1", _port(proxy)), timeout=10)
        answer = asyncio.ensure_future(_exchange(_port(proxy), _request(), 1))
        await asyncio.sleep(0.1)  # the request is at the upstream
        await proxy.server.close()
        ((status, headers, body),) = await answer
        assert status == 200 and b"echo: hello" in body and headers["connection"] == "close"
        assert await loop.run_in_executor(None, idle.recv, 10) == b""
        idle.close()
    finally:
        await slow.stop()


async def test_a_client_that_reads_nothing_of_a_whole_answer_is_dropped(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await _proxy_with(make_proxy, upstream, write_timeout_s=0.5)
    upstream.script.append("x" * 20_000_000)  # far larger than the socket buffers
    sock = socket.create_connection(("127.0.0.1", _port(proxy)))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    front = proxy.server.front
    try:
        sock.sendall(_request())  # ... and never read the answer
        for _ in range(50):
            await asyncio.sleep(0.1)
            await proxy.settle()
            if _chat_lines(proxy) and not front.connections:
                break
        (line,) = _chat_lines(proxy)
        assert line["status"] == 200  # answered: handed to the transport
        assert not front.connections  # then dropped, its buffer freed
    finally:
        sock.close()
