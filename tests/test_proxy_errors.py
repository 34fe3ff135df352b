"""Every kind of bad input and upstream failure gets a specific OpenAI-style error."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import aiohttp
import openai
import pytest
from pydantic import BaseModel

import proxy.chat.handler as chat_module
from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy, proxy_config

pytestmark = pytest.mark.e2e

USER = [{"role": "user", "content": "hello"}]


async def _post(
    proxy: Proxy, data: bytes | str, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{proxy.base_url}/chat/completions",
            data=data,
            headers={"Content-Type": "application/json", **(headers or {})},
        ) as r:
            return r.status, await r.json()


@pytest.mark.parametrize(
    ("body", "message", "param"),
    [
        (b"{not json", "not valid JSON", None),
        (b"", "body is empty", None),
        (b"[1, 2]", "must be a JSON object", None),
        (json.dumps({"messages": USER}).encode(), "'model' is required", "model"),
        (json.dumps({"model": 5, "messages": USER}).encode(), "'model' is required", "model"),
        (json.dumps({"model": "echo"}).encode(), "'messages' is required", "messages"),
        (json.dumps({"model": "echo", "messages": []}).encode(), "must not be empty", "messages"),
        (json.dumps({"model": "echo", "messages": "hi"}).encode(), "must be an array", "messages"),
        (
            json.dumps(
                {"model": "echo", "messages": [{"role": "wizard", "content": "x"}]}
            ).encode(),
            "role must be one of",
            "messages[0].role",
        ),
        (
            json.dumps({"model": "echo", "messages": [{"role": "user", "content": 3}]}).encode(),
            "content must be a string",
            "messages[0].content",
        ),
        (
            json.dumps(
                {"model": "echo", "messages": [{"role": "system", "content": "x"}]}
            ).encode(),
            "at least one user message",
            "messages",
        ),
        (
            json.dumps({"model": "echo", "stream": "yes", "messages": USER}).encode(),
            "'stream' must be a boolean",
            "stream",
        ),
    ],
)
async def test_bad_request_bodies(
    proxy: Proxy, upstream: FakeUpstream, body: bytes, message: str, param: str | None
) -> None:
    status, error = await _post(proxy, body)
    assert status == 400
    assert message in error["error"]["message"]
    assert error["error"]["param"] == param
    assert error["error"]["type"] == "invalid_request_error"
    assert upstream.requests == []


async def test_body_over_the_limit_is_413(upstream: FakeUpstream, make_proxy: MakeProxy) -> None:
    config = proxy_config(upstream.url)
    config["server"]["max_body_bytes"] = 4096
    proxy = await make_proxy(config)
    big = json.dumps({"model": "echo", "messages": [{"role": "user", "content": "x" * 10_000}]})
    status, error = await _post(proxy, big)
    assert status == 413
    assert error["error"]["code"] == "request_too_large"
    assert "4096" in error["error"]["message"]
    assert upstream.requests == []


async def test_unknown_model_is_404(upstream: FakeUpstream, make_proxy: MakeProxy) -> None:
    config = proxy_config(upstream.url)
    config["upstreams"][0]["model"] = "gpt-*"
    proxy = await make_proxy(config)
    async with proxy.client() as client:
        with pytest.raises(openai.NotFoundError) as caught:
            await client.chat.completions.create(model="llama", messages=USER)  # type: ignore[arg-type]
    assert caught.value.code == "model_not_found"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_upstream_refusing_connections_is_502(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(proxy_config(f"http://127.0.0.1:{_closed_port()}/v1"))
    async with proxy.client() as client:
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(model="echo", messages=USER)  # type: ignore[arg-type]
    assert caught.value.status_code == 502
    assert caught.value.code == "upstream_unreachable"


async def test_an_upstream_url_holding_a_key_is_never_shown(make_proxy: MakeProxy) -> None:
    """An ``api_base`` may carry credentials (``https://user:key@host``, ``?api-key=``):
    the 502 a client gets, its log line and the start-up check's line show the URL
    without them."""
    base = f"http://alice:sk-secret@127.0.0.1:{_closed_port()}/v1?api-key=sk-query"
    proxy = await make_proxy(proxy_config(base))
    async with proxy.client() as client:
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(model="echo", messages=USER)  # type: ignore[arg-type]
    assert "sk-" not in str(caught.value.message) and "127.0.0.1" in str(caught.value.message)
    await proxy.settle()
    for _ in range(100):  # the start-up check runs in the background
        if any(r.get("event") == "upstream_unreachable" for r in proxy.log_records()):
            break
        await asyncio.sleep(0.05)
    logged = json.dumps(proxy.log_records())
    assert "upstream_unreachable" in logged and "http://127.0.0.1:" in logged
    assert "sk-secret" not in logged and "sk-query" not in logged and "alice" not in logged


async def test_a_stream_refused_before_its_first_byte_is_timed(make_proxy: MakeProxy) -> None:
    """The upstream latency a dashboard shows includes calls that never got a byte back
    (they were left out, so an outage looked fast)."""
    proxy = await make_proxy(proxy_config(f"http://127.0.0.1:{_closed_port()}/v1"))
    async with proxy.client() as client:
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(model="echo", messages=USER, stream=True)  # type: ignore[arg-type]
    await proxy.settle()
    async with aiohttp.ClientSession() as http, http.get(f"{proxy.url}/metrics") as response:
        metrics = await response.text()
    assert 'areamem_upstream_seconds_count{api="chat",stream="true"} 1.0' in metrics
    assert 'areamem_request_seconds_count{api="chat",stream="true"} 1.0' in metrics
    assert 'areamem_requests_total{api="chat",status="502",stream="true"} 1.0' in metrics


async def test_upstream_timeout_is_504(upstream: FakeUpstream, make_proxy: MakeProxy) -> None:
    config = proxy_config(upstream.url)
    config["upstreams"][0]["timeout_s"] = 0.3
    proxy = await make_proxy(config)
    async with proxy.client() as client:
        for stream in (False, True):
            with pytest.raises(openai.APIStatusError) as caught:
                await client.chat.completions.create(model="hang", messages=USER, stream=stream)  # type: ignore[arg-type]
            assert caught.value.status_code == 504
            assert caught.value.code == "upstream_timeout"


@pytest.mark.parametrize("status", [400, 429, 500, 503])  # 401/403 become 502: test_wire_fidelity
async def test_upstream_status_is_relayed(proxy: Proxy, status: int) -> None:
    async with proxy.client() as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model=f"fail-{status}", messages=USER)  # type: ignore[arg-type]
    assert caught.value.status_code == status
    assert caught.value.code == f"fake_{status}"  # the upstream's own error object


async def test_upstream_dying_mid_stream(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http:
        body = {
            "model": "die-mid-stream",
            "stream": True,
            "messages": [{"role": "user", "content": "a b c d e f"}],
        }
        async with http.post(f"{proxy.base_url}/chat/completions", json=body) as response:
            assert response.status == 200
            text = (await response.read()).decode()
    events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert json.loads(events[0])["choices"][0]["delta"]["content"] == "echo:"
    error = json.loads(events[-1])["error"]
    assert error["code"] == "upstream_disconnected"
    await proxy.settle()
    record = [r for r in proxy.log_records() if r.get("event") == "chat"][-1]
    assert record["outcome"] == "upstream_disconnected"


async def test_client_disconnecting_mid_stream(proxy: Proxy, upstream: FakeUpstream) -> None:
    upstream.slow_delay_s = 0.2
    async with aiohttp.ClientSession() as http:
        body = {
            "model": "slow",
            "stream": True,
            "messages": [{"role": "user", "content": " ".join(["word"] * 30)}],
        }
        response = await http.post(f"{proxy.base_url}/chat/completions", json=body)
        await response.content.readany()
        response.close()  # hang up after the first chunk
    for _ in range(100):
        await proxy.settle()
        records = [r for r in proxy.log_records() if r.get("event") == "chat"]
        if records:
            break
        await asyncio.sleep(0.05)
    assert records[-1]["outcome"] == "client_disconnected"
    # the proxy still serves requests afterwards
    async with proxy.client() as client:
        reply = await client.chat.completions.create(model="echo", messages=USER)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "echo: hello"


async def test_unknown_route_is_openai_style_404(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/v1/nothing") as response:
            assert response.status == 404
            assert (await response.json())["error"]["code"] == "not_found"


async def test_memory_failure_lets_the_request_through(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    # a budget no loaded machine's event loop lag sheds the lookup within (at 250 ms, a
    # loop 125 ms late skips it: counted as retrieval_skipped, never reaching the store)
    proxy = await make_proxy(proxy_config(upstream.url, memory={"retrieval_timeout_ms": 60_000}))
    memory = proxy.services.tenants.get("default")
    memory.store.close()  # a broken store: every memory call now fails
    async with proxy.client() as client:
        reply = await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "remember my plans?"}]
        )
    assert reply.choices[0].message.content == "echo: remember my plans?"
    assert upstream.requests[-1].body["messages"] == [
        {"role": "user", "content": "remember my plans?"}
    ]
    await proxy.settle()
    record = [r for r in proxy.log_records() if r.get("event") == "chat"][-1]
    assert record["memory_error"]
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/metrics") as response:
            metrics = await response.text()
    assert 'areamem_memory_failures_total{stage="retrieval"} 1.0' in metrics


async def test_a_receipt_that_breaks_its_contract_is_counted_and_chat_goes_on(
    proxy: Proxy, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receipt is built and validated on the tenant's writer thread; if that fails
    (a producer drifted from the typed contract), the answer is unaffected, nothing is
    stored under the receipt id, and the failure is counted."""
    class Strict(BaseModel):
        number: int

    def broken(*_: Any, **__: Any) -> Any:
        return Strict.model_validate({"number": "not a number"})

    monkeypatch.setattr(chat_module, "receipt_of", broken)
    async with proxy.client() as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="echo",
            messages=[{"role": "user", "content": "remember my plans?"}],
            extra_headers={"X-Memory": "force"},
        )
    assert raw.parse().choices[0].message.content == "echo: remember my plans?"
    receipt = raw.headers["X-Memory-Receipt"]
    await proxy.settle()
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/receipts/{receipt}") as response:
            assert response.status == 404
        async with http.get(f"{proxy.url}/metrics") as response:
            metrics = await response.text()
    assert 'areamem_memory_failures_total{stage="receipt"} 1.0' in metrics


@pytest.mark.parametrize("field", ["model", "user"])
async def test_a_lone_surrogate_in_a_logged_field_is_answered_and_logged(
    proxy: Proxy, field: str
) -> None:
    """``"\\ud800"`` is valid JSON that decodes to a lone surrogate; where the request log
    writes the field, the request is still answered (never a 500) and logged."""
    body = {"model": "echo", "messages": [{"role": "user", "content": "hi"}]}
    raw = json.dumps(body).replace('"echo"' if field == "model" else '"hi"}]', (
        '"echo\\ud800"' if field == "model" else '"hi"}], "user": "u\\ud800"'
    ))  # fmt: skip
    status, answer = await _post(proxy, raw)
    assert status < 500, answer
    await proxy.settle()
    records = [r for r in proxy.log_records() if r.get("event") == "chat"]
    assert records and records[-1]["status"] == status


async def test_an_upstream_url_with_a_query_keeps_it_after_the_endpoint(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """An ``api_base`` holding a query (Azure's ``?api-version=``): requests go to
    ``<path>/chat/completions?<query>`` and the start-up check to ``<path>/models?<query>``
    (the endpoint was pasted after the query: the chat went to ``/v1`` itself, a 404)."""
    proxy = await make_proxy(proxy_config(f"{upstream.url}/?api-version=2024-06-01"))
    async with proxy.client() as client:
        reply = await client.chat.completions.create(model="echo", messages=USER)  # type: ignore[arg-type]
    assert reply.choices[0].message.content
    assert upstream.requests[-1].query == "api-version=2024-06-01"
    for _ in range(100):  # the start-up check runs in the background
        checked = [r for r in proxy.log_records() if r.get("event") == "upstream_ok"]
        if checked:
            break
        await asyncio.sleep(0.05)
    assert checked and checked[0]["status"] == 200 and checked[0]["models"]
