"""Regressions of issue 9's hostile review, proxy side: each test names its defect.

A real proxy on loopback, the real ``openai`` client or a raw aiohttp/socket client, the
fake upstream at the network edge, real SQLite files in a temp folder.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket
import stat
from pathlib import Path
from typing import Any

import aiohttp
import apsw
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from proxy.config import load_config
from proxy.errors import ConfigError, RetrievalSkipped
from proxy.fake_upstream import FakeUpstream
from proxy.http.request_log import RequestLog
from proxy.http.server_log import server_logger
from proxy.http.sse import done_end as _done_end

from .conftest import MakeProxy, Proxy, proxy_config

pytestmark = pytest.mark.e2e

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello there"}]


async def _post(
    proxy: Proxy,
    data: bytes | str,
    *,
    path: str = "/v1/chat/completions",
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.url + path,
            data=io.BytesIO(data.encode() if isinstance(data, str) else data),
            headers={"Content-Type": "application/json", **(headers or {})},
        ) as r:
            return r.status, await r.json(content_type=None)


def _log_rows(proxy: Proxy, tenant: str = "default") -> list[tuple[str, str, str]]:
    """(conversation, role, text) of every logged message, read from the tenant's file."""
    path = proxy.data_dir / "tenants" / f"{tenant}.db"
    if not path.exists():
        return []
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return list(conn.execute("SELECT conversation_id, role, text FROM log ORDER BY id"))
    finally:
        conn.close()


def _chat_lines(proxy: Proxy) -> list[dict[str, Any]]:
    return [r for r in proxy.log_records() if r.get("event") == "chat"]


async def _metric(proxy: Proxy, name: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/metrics") as r:
        text = await r.text()
    return "\n".join(line for line in text.splitlines() if line.startswith(name))


def _chat_body(**extra: Any) -> bytes:
    return json.dumps({"model": "echo", "messages": USER, **extra}).encode()


# -- defect 5: 500 instead of 400; every request logged and counted ----------------------


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (
            b'{"model": "echo", "messages": [{"role": "user", "content": "hi"}], "x": '
            + b"[" * 5000
            + b"]" * 5000
            + b"}",
            400,
            "nested more than",
        ),
        (
            b'{"model": "echo", "messages": [{"role": "user", "content": "a\\ud800b"}]}',
            400,
            "lone UTF-16 surrogate",
        ),
        (
            json.dumps(
                {
                    "model": "echo",
                    "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}],
                }
            ).encode(),
            400,
            "content[0].text must be a string",
        ),
        (
            json.dumps(
                {"model": "echo", "messages": [*USER, {"role": "assistant", "tool_calls": "oops"}]}
            ).encode(),
            400,
            "tool_calls must be an array",
        ),
        (
            json.dumps({"model": "echo", "messages": [{"role": "user", "content": [5]}]}).encode(),
            400,
            "content[0] must be an object",
        ),
        (
            json.dumps(
                {"model": "echo", "messages": [{"role": "user", "name": 7, "content": "x"}]}
            ).encode(),
            400,
            "name must be a string",
        ),
    ],
)
async def test_hostile_bodies_are_400_logged_and_counted(
    proxy: Proxy, upstream: FakeUpstream, body: bytes, status: int, message: str
) -> None:
    got, error = await _post(proxy, body)
    assert got == status
    assert message in error["error"]["message"]
    await proxy.settle()
    lines = _chat_lines(proxy)
    assert [line["status"] for line in lines] == [status]
    assert f'status="{status}"' in await _metric(proxy, "areamem_requests_total")
    assert upstream.requests == []


async def test_plain_text_content_type_is_415(proxy: Proxy, upstream: FakeUpstream) -> None:
    got, error = await _post(proxy, _chat_body(), headers={"Content-Type": "text/plain"})
    assert got == 415
    assert "application/json" in error["error"]["message"]
    await proxy.settle()
    assert [line["status"] for line in _chat_lines(proxy)] == [415]
    assert upstream.requests == []


async def test_a_lone_surrogate_in_ingest_is_400_and_memory_still_works(proxy: Proxy) -> None:
    body = b'{"messages": [{"role": "user", "content": "x\\udfff"}]}'
    got, error = await _post(proxy, body, path="/memory/ingest")
    assert got == 400 and "surrogate" in error["error"]["message"]
    got, _ = await _post(proxy, _chat_body(), headers={"X-Memory": "force"})
    assert got == 200


# -- defect 2: one timestamp bricks a tenant ---------------------------------------------


@pytest.mark.parametrize("stamp", [b"1e308", b"-1e12", b"Infinity", b"-Infinity", b"NaN", b"1e999"])
async def test_odd_timestamps_are_refused_and_memory_keeps_working(
    proxy: Proxy, stamp: bytes
) -> None:
    body = (
        b'{"messages": [{"role": "user", "content": "fine", "timestamp": 1700000000},'
        b' {"role": "user", "content": "odd", "timestamp": ' + stamp + b"}]}"
    )
    got, error = await _post(proxy, body, path="/memory/ingest")
    assert got == 400
    assert error["error"]["param"] == "messages[1].timestamp"
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url + "/memory/search", params={"q": "fine"}) as r:
            assert r.status == 200
    async with proxy.client() as client:
        for memory in ("force", "auto"):
            reply = await client.chat.completions.with_raw_response.create(
                model="echo", messages=USER, extra_headers={"X-Memory": memory}
            )
            assert reply.http_response.status_code == 200


# -- defect 3: long histories silently not stored ----------------------------------------


async def test_a_chat_of_33001_messages_is_stored(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    # formation of 33,000 turns is not the point here: it waits (and is called off at
    # shutdown, its rows staying queued)
    config = proxy_config(upstream.url, memory={"formation_grace_ms": 600_000})
    proxy = await make_proxy(config)
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"}
        for i in range(33_001)
    ]
    got, _ = await _post(proxy, json.dumps({"model": "echo", "messages": messages}))
    assert got == 200
    line = await _chat_line(proxy)
    assert line["memory_error"] is None
    assert line["ingested"] == 33_002  # the history and the answer
    assert len(_log_rows(proxy)) == 33_002


async def _chat_line(proxy: Proxy) -> dict[str, Any]:
    """The first chat log line, once written (without waiting for formation)."""
    for _ in range(600):
        lines = _chat_lines(proxy)
        if lines:
            return lines[0]
        await asyncio.sleep(0.05)
    raise AssertionError("no chat log line within 30 s")


async def test_ingest_refuses_more_than_its_documented_limit(proxy: Proxy) -> None:
    messages = [{"role": "user", "content": "x"}] * 100_001
    got, error = await _post(proxy, json.dumps({"messages": messages}), path="/memory/ingest")
    assert got == 400 and "at most 100000 messages" in error["error"]["message"]


# -- defect 4: answered means stored ------------------------------------------------------


async def test_a_non_streamed_answer_is_stored_before_the_client_gets_it(proxy: Proxy) -> None:
    async with proxy.client() as client:
        conversation = {"X-Conversation-Id": "stored-first"}
        reply = await client.chat.completions.create(
            model="echo", messages=USER, extra_headers=conversation
        )
        rows = _log_rows(proxy)  # read at once: no settle, no waiting for background work
        assert ("stored-first", "user", "hello there") in rows
        assert ("stored-first", "assistant", reply.choices[0].message.content) in rows


async def _streamed(proxy: Proxy, conversation: str) -> str:
    """The text of one streamed answer, read to its end with the openai client."""
    async with proxy.client() as client:
        stream = await client.chat.completions.create(
            model="echo",
            messages=USER,
            stream=True,
            extra_headers={"X-Conversation-Id": conversation},
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])


async def test_a_streamed_answer_is_stored_before_its_done_marker(proxy: Proxy) -> None:
    text = await _streamed(proxy, "stream-stored-first")
    rows = _log_rows(proxy)  # read at once: no settle
    assert ("stream-stored-first", "assistant", text) in rows


async def test_concurrent_streams_are_all_stored_exactly_once(proxy: Proxy) -> None:
    async with proxy.client() as client:

        async def one(i: int) -> str:
            stream = await client.chat.completions.create(
                model="echo",
                messages=[{"role": "user", "content": f"question number {i}"}],
                stream=i % 2 == 0,
                extra_headers={"X-Conversation-Id": f"c{i}", "X-Memory": "force"},
            )
            if i % 2:
                return f"c{i}"
            assert isinstance(stream, openai.AsyncStream)
            async for _ in stream:
                pass
            return f"c{i}"

        answered = await asyncio.gather(*(one(i) for i in range(40)))
        await proxy.settle()
        rows = _log_rows(proxy)
        for conversation in answered:
            mine = [role for conv, role, _ in rows if conv == conversation]
            assert mine == ["user", "assistant"], conversation


# -- defect 7: abandoned requests keep running --------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_a_client_that_leaves_cancels_the_upstream_call(
    make_proxy: MakeProxy, stream: bool
) -> None:
    upstream = await FakeUpstream(first_token_s=30).start()
    try:
        proxy = await make_proxy(proxy_config(upstream.url))
        body = _chat_body(stream=stream)
        async with aiohttp.ClientSession() as http:
            with pytest.raises(asyncio.TimeoutError):
                async with http.post(
                    proxy.base_url + "/chat/completions",
                    data=body,
                    headers={"Content-Type": "application/json", "X-Conversation-Id": "gone"},
                    timeout=aiohttp.ClientTimeout(total=0.5),
                ) as r:
                    await r.read()
        for _ in range(100):  # the proxy notices the disconnect and cancels upstream
            if upstream.in_flight == 0:
                break
            await asyncio.sleep(0.05)
        assert upstream.in_flight == 0
        await proxy.settle()
        (line,) = _chat_lines(proxy)
        assert line["outcome"] == "client_disconnected" and line["status"] == 499
        assert [role for conv, role, _ in _log_rows(proxy) if conv == "gone"] == ["user"]
    finally:
        await upstream.stop()


# -- defect 9: no server-side read timeouts -----------------------------------------------


async def test_slow_headers_and_a_short_body_are_cut(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    config = proxy_config(upstream.url)
    config["server"].update({"header_timeout_s": 0.5, "body_timeout_s": 0.5})
    proxy = await make_proxy(config)
    port = int(proxy.url.rsplit(":", 1)[1])
    loop = asyncio.get_running_loop()

    def slowloris() -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            return sock.recv(1024)  # b"" once the server closes the connection

    assert await loop.run_in_executor(None, slowloris) == b""

    def short_body() -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                b'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model"'
            )
            return sock.recv(4096)

    answer = await loop.run_in_executor(None, short_body)
    assert answer.startswith(b"HTTP/1.1 408")
    assert b"server.body_timeout_s" in answer


# -- defect 11: cold start ----------------------------------------------------------------


async def test_ready_after_warm_up(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http:
        for _ in range(200):
            async with http.get(proxy.url + "/readyz") as r:
                if r.status == 200:
                    break
            await asyncio.sleep(0.05)
        assert r.status == 200
        async with http.get(proxy.url + "/healthz") as r:
            assert (await r.json())["status"] == "ok"
    proxy.services.state = "stopping"
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/readyz") as r:
        assert r.status == 503 and (await r.json())["status"] == "stopping"
    assert any(r.get("event") == "ready" for r in proxy.log_records())


# -- defect 12: smaller ---------------------------------------------------------------------


async def test_files_are_private(proxy: Proxy) -> None:
    async with proxy.client() as client:
        await client.chat.completions.create(model="echo", messages=USER)
        await proxy.settle()

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    assert mode(proxy.data_dir) == 0o700
    assert mode(proxy.data_dir / "logs") == 0o700
    assert mode(proxy.data_dir / "logs" / "proxy.jsonl") == 0o600


async def test_metrics_can_require_a_proxy_key(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    config = proxy_config(
        upstream.url, auth={"mode": "keys", "keys": {"sk-a": "a"}, "metrics": "keys"}
    )
    proxy = await make_proxy(config)
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url + "/metrics") as r:
            assert r.status == 401
        async with http.get(proxy.url + "/metrics", headers={"Authorization": "Bearer sk-a"}) as r:
            assert r.status == 200 and "areamem_requests" in await r.text()


@pytest.mark.parametrize("tenant", ["t" * 65, "../etc", ".hidden", "a b", "é"])
def test_tenant_names_are_checked_in_the_config(tmp_path: Path, tenant: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        json.dumps(
            {
                "upstreams": [{"model": "*", "provider": "openai"}],
                "auth": {"mode": "keys", "keys": {"sk": tenant}},
            }
        )
    )
    with pytest.raises(ConfigError, match=r"auth\.keys"):
        load_config(path)


def test_tenants_whose_names_differ_only_in_case_are_refused(tmp_path: Path) -> None:
    """``Alice`` and ``alice`` were two tenants sharing one database file, one spool folder
    and one lease on a case-insensitive filesystem (macOS by default, some network
    shares): each read and wrote the other's memory. The same tenant named by two keys
    stays allowed."""
    path = tmp_path / "config.yaml"
    keys = {"sk-1": "alice", "sk-2": "alice", "sk-3": "Alice"}
    document = {"upstreams": [{"model": "*", "provider": "openai"}], "auth": {"mode": "keys"}}
    path.write_text(json.dumps({**document, "auth": {"mode": "keys", "keys": keys}}))
    with pytest.raises(ConfigError, match=r"auth\.keys.*'Alice' and 'alice'.*only in case"):
        load_config(path)
    del keys["sk-3"]
    path.write_text(json.dumps({**document, "auth": {"mode": "keys", "keys": keys}}))
    assert set(load_config(path).auth.keys.values()) == {"alice"}


async def test_a_retrieval_timeout_is_in_the_receipt(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    config = proxy_config(upstream.url, memory={"retrieval_timeout_ms": 1, "retrieval": "area"})
    proxy = await make_proxy(config)
    async with proxy.client() as client:
        reply = await client.chat.completions.with_raw_response.create(
            model="echo", messages=USER, extra_headers={"X-Memory": "force"}
        )
        receipt_id = reply.headers["X-Memory-Receipt"]
        await proxy.settle()
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{proxy.url}/memory/receipts/{receipt_id}") as r:
                receipt = await r.json()
        # over a 1 ms budget the lookup times out, or is shed before it starts
    assert receipt["memory_error"].startswith(("retrieval exceeded 1 ms", "retrieval skipped"))


async def test_a_conversation_header_is_checked(proxy: Proxy) -> None:
    async with proxy.client() as client:
        with pytest.raises(openai.BadRequestError, match="X-Conversation-Id"):
            await client.chat.completions.create(
                model="echo", messages=USER, extra_headers={"X-Conversation-Id": "x" * 201}
            )


# -- defect 4: the retrieval budget bounds the wait ---------------------------------------


async def test_lookups_past_the_limit_are_skipped_at_once(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    config = proxy_config(upstream.url, memory={"max_concurrent_retrievals": 1})
    proxy = await make_proxy(config)
    memory = proxy.services.tenants.get("default")
    gate = memory._gate
    gate.in_flight = gate.limit  # every reader slot taken by lookups still running
    try:
        async with proxy.client() as client:
            reply = await client.chat.completions.with_raw_response.create(
                model="echo", messages=USER, extra_headers={"X-Memory": "force"}
            )
            assert reply.http_response.status_code == 200
    finally:
        gate.in_flight = 0
    await proxy.settle()
    (line,) = _chat_lines(proxy)
    assert line["memory_error"].startswith("retrieval skipped: 1 lookups already in flight")
    assert 'stage="retrieval_skipped"' in await _metric(proxy, "areamem_memory_failures_total")


async def test_a_lookup_that_would_start_past_its_deadline_is_not_run(proxy: Proxy) -> None:
    memory = proxy.services.tenants.get("default")
    with pytest.raises(RetrievalSkipped, match="past its time budget"):
        await memory.recall("anything", limit=5, budget_tokens=100, exclude_hashes=(), deadline=0.0)
    assert memory._gate.in_flight == 0  # the slot is given back


async def test_lookups_are_shed_while_the_event_loop_runs_late(proxy: Proxy) -> None:
    proxy.services.lag._samples.extend([0.2] * 5)  # 200 ms late, over half of 250 ms
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo", messages=USER, extra_headers={"X-Memory": "force"}
        )
    await proxy.settle()
    (line,) = _chat_lines(proxy)
    assert "retrieval skipped: the proxy is overloaded (event loop" in line["memory_error"]


async def test_done_said_by_the_model_does_not_end_the_stored_answer(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    upstream.script.append("before data: [DONE] and after it")
    text = await _streamed(proxy, "says-done")
    assert text == "before data: [DONE] and after it"
    await proxy.settle()
    assert ("says-done", "assistant", text) in _log_rows(proxy)


@pytest.mark.parametrize(
    ("previous", "chunk", "cut"),
    [
        (None, b"data: [DONE]\n\n", 12),
        (b'data: {"a": 1}\n\n', b"data: [DONE]\n\n", 12),
        (b'data: {"a": 1}\n\ndata: [DO', b"NE]\n\n", 3),
        (b'data: {"a": 1}\n\ndata: [DONE]', b"\n\n", 0),
        (b'data: {"a": 1}\n\n', b'data: {"c": "x\\ndata: [DONE]"}\n\n', None),
        (b'data: {"c": "data: [DONE]', b' more"}\n\n', None),
    ],
)
def test_the_end_marker_is_found_only_as_a_line(
    previous: bytes | None, chunk: bytes, cut: int | None
) -> None:
    assert _done_end(previous, chunk) == cut


async def test_search_while_every_lookup_slot_is_taken_is_503_not_500(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await make_proxy(proxy_config(upstream.url, memory={"max_concurrent_retrievals": 1}))
    gate = proxy.services.tenants.get("default")._gate
    gate.in_flight = gate.limit
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(proxy.url + "/memory/search", params={"q": "x"}) as r:
                assert r.status == 503
                assert r.headers["Retry-After"] == "1"
                assert (await r.json())["error"]["code"] == "memory_busy"
    finally:
        gate.in_flight = 0


async def test_a_streaming_client_that_stops_reading_is_dropped(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    config = proxy_config(upstream.url)
    config["server"]["write_timeout_s"] = 0.5
    proxy = await make_proxy(config)
    upstream.script.append("x" * 20_000_000)  # one chunk far larger than socket buffers
    port = int(proxy.url.rsplit(":", 1)[1])
    body = _chat_body(stream=True)
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        sock.sendall(request)  # ... and never read the answer
        line = await _chat_line(proxy)
    finally:
        sock.close()
    assert line["outcome"] == "client_disconnected" and line["status"] == 499
    assert upstream.in_flight == 0


@pytest.mark.parametrize("conversation", ["x" * 201, "a\nb", "   ", 5])
async def test_an_ingest_conversation_id_is_checked(proxy: Proxy, conversation: object) -> None:
    body = json.dumps({"conversation_id": conversation, "messages": USER})
    got, error = await _post(proxy, body, path="/memory/ingest")
    assert got == 400 and error["error"]["param"] == "conversation_id"


async def test_a_request_head_aiohttp_refuses_is_one_log_record_not_a_traceback(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    """aiohttp answers a head it cannot parse (a request line past 8 KiB, a header
    without a colon) with 400 before any handler runs, and reported each with
    ``logger.exception``: a dozen lines of traceback on stderr per request, at any
    client's will, and no line in the request log nor count in ``/metrics``. Each is
    now one request-log record and counted as route ``unparsed``."""
    port = int(proxy.url.rsplit(":", 1)[1])
    heads = [
        b"GET /memory/search?q=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nno colon \x1b[2J here\r\n\r\n",
    ]

    def send(head: bytes) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(head)
            return sock.recv(4096)

    loop = asyncio.get_running_loop()
    with caplog.at_level(logging.DEBUG):
        for head in heads:
            assert (await loop.run_in_executor(None, send, head)).split(b" ")[1] == b"400"
    await proxy.settle()
    assert not [r for r in caplog.records if r.name.startswith("aiohttp")]
    bad = [r for r in proxy.log_records() if r.get("event") == "bad_request"]
    assert [r["status"] for r in bad] == [400, 400]
    assert all(r["remote"] == "127.0.0.1" and r["error"] for r in bad)
    counted = proxy.services.metrics.render().decode()
    assert 'areamem_http_requests_total{route="unparsed",status="400"} 2.0' in counted


def test_another_aiohttp_report_keeps_its_traceback_in_one_record(tmp_path: Path) -> None:
    """What else aiohttp reports through the server's logger (an error outside every
    handler) is one record that keeps the end of its traceback, not a lost one."""
    log = RequestLog(tmp_path / "proxy.jsonl", stdout=False)
    counted: list[int] = []
    logger = server_logger(log, counted.append)
    try:
        raise RuntimeError("broken\nline")
    except RuntimeError as exc:
        logger.exception("Error handling request from %s", "127.0.0.1", exc_info=exc)
    log.close()
    [line] = (tmp_path / "proxy.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["event"] == "http_server_error" and record["remote"] == "127.0.0.1"
    assert "RuntimeError: broken" in record["traceback"] and counted == []
