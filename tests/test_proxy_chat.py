"""Chat through the proxy with the real openai client: forwarding, streaming, memory."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolUnionParam

from memory_core.errors import StorageError
from memory_core.formation import Backends
from proxy.chat import handler
from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy, proxy_config

pytestmark = pytest.mark.e2e


async def test_non_stream_answer_is_relayed(proxy: Proxy, upstream: FakeUpstream) -> None:
    async with proxy.client() as client:
        reply = await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "hello there"}]
        )
    assert reply.choices[0].message.content == "echo: hello there"
    assert reply.usage is not None and reply.usage.prompt_tokens == 10
    assert upstream.requests[0].body["model"] == "echo"


async def test_stream_chunks_arrive_as_produced(proxy: Proxy, upstream: FakeUpstream) -> None:
    upstream.slow_delay_s = 0.1
    text = "one two three four five"
    arrivals: list[float] = []
    pieces: list[str] = []
    async with proxy.client() as client:
        stream = await client.chat.completions.create(
            model="slow", stream=True, messages=[{"role": "user", "content": text}]
        )
        async for chunk in stream:
            arrivals.append(time.perf_counter())
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
    assert "".join(pieces) == "echo: " + text
    # six words, 0.1 s apart at the upstream: relayed one by one, not buffered to the end
    assert arrivals[-1] - arrivals[0] > 0.3


async def test_unchanged_fields_are_forwarded_untouched(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    tools: list[ChatCompletionToolUnionParam] = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "and this picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
    ]
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo",
            messages=messages,
            tools=tools,
            response_format={"type": "json_object"},
            temperature=0.2,
            extra_body={"custom_field": {"nested": [1, 2]}},
            extra_headers={"X-Memory": "off"},
        )
    body = upstream.requests[0].body
    assert body["messages"] == messages
    assert body["tools"] == tools
    assert body["response_format"] == {"type": "json_object"}
    assert body["temperature"] == 0.2
    assert body["custom_field"] == {"nested": [1, 2]}


async def test_memory_from_one_conversation_reaches_another(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo",
            messages=[{"role": "user", "content": "My sister Ana keeps bees in Porto."}],
        )
        await proxy.settle()
        history: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Quick question about hobbies."},
            {"role": "assistant", "content": "Sure."},
            {"role": "user", "content": "Do you remember what my sister keeps?"},
        ]
        raw = await client.chat.completions.with_raw_response.create(model="echo", messages=history)
    receipt_id = raw.headers.get("X-Memory-Receipt")
    assert receipt_id
    sent = upstream.requests[-1].body["messages"]
    assert sent[:3] == history[:3]  # everything before stays identical
    assert sent[-1] == history[-1]
    memory = sent[-2]
    assert memory["role"] == "system"
    assert "<retrieved_memory>" in memory["content"]
    assert "Ana keeps bees in Porto" in memory["content"]
    assert len(sent) == len(history) + 1
    await proxy.settle()
    receipt = await _receipt(proxy, receipt_id)
    assert receipt["decision"]["retrieve"] is True
    assert "remember" in receipt["decision"]["reason"]
    assert receipt["injected_text"] == memory["content"]
    assert any("bees" in f["text"] for f in receipt["area"]["fragments"])
    assert receipt["tokens"] > 0


async def test_memory_role_user_and_stream_injection(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await make_proxy(proxy_config(upstream.url, memory={"role": "user"}))
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "The launch code name is Bluefin."}]
        )
        await proxy.settle()
        raw = await client.chat.completions.with_raw_response.create(
            model="echo",
            stream=True,
            messages=[{"role": "user", "content": "What was the launch code name, remember?"}],
        )
        stream = raw.parse()
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text.startswith("echo:")
    sent = upstream.requests[-1].body["messages"]
    await proxy.settle()
    receipt = await _receipt(proxy, raw.headers["X-Memory-Receipt"])
    assert sent[0]["role"] == "user" and "Bluefin" in sent[0]["content"], receipt
    # the streamed answer was assembled and ingested
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/search", params={"q": "launch code"}) as r:
            found = await r.json()
    assert any(h["role"] == "assistant" and h["text"].startswith("echo:") for h in found["hits"])


async def test_a_streamed_answer_too_long_to_keep_is_relayed_whole_and_not_stored(
    proxy: Proxy, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream was kept whole until stored, with no bound: an upstream streaming without
    end filled the proxy's memory. Past the bound the relay goes on, only the request's
    turns are stored, and the log line says why."""
    monkeypatch.setattr(handler, "MAX_KEPT_STREAM_BYTES", 3000)
    words = " ".join(f"word{i}" for i in range(300))
    async with proxy.client() as client:
        stream = await client.chat.completions.create(
            model="echo", stream=True, messages=[{"role": "user", "content": words}]
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert text == "echo: " + words
        short = await client.chat.completions.create(
            model="echo", stream=True, messages=[{"role": "user", "content": "short one"}]
        )
        assert "".join([c.choices[0].delta.content or "" async for c in short if c.choices])
    await proxy.settle()
    chats = [r for r in proxy.log_records() if r.get("event") == "chat"]
    assert [(r["outcome"], r["ingested"]) for r in chats] == [("ok", 1), ("ok", 2)]
    assert "answer not stored: the stream passed 3,000 bytes" in chats[0]["memory_error"]
    assert chats[1]["memory_error"] is None
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/search", params={"q": "word7"}) as r:
            found = (await r.json())["hits"]
    assert found and all(h["role"] == "user" for h in found)


async def test_receipt_of_unknown_id_is_404(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/receipts/rcpt_nope") as response:
            assert response.status == 404
            assert (await response.json())["error"]["code"] == "receipt_not_found"


async def test_models_health_and_metrics(proxy: Proxy) -> None:
    async with proxy.client() as client:
        models = await client.models.list()
        await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "hi"}]
        )
    assert [m.id for m in models.data] == ["echo"]
    await proxy.settle()
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/healthz") as response:
            health = await response.json()
        async with http.get(f"{proxy.url}/metrics") as response:
            metrics = await response.text()
    assert health["status"] == "ok"
    assert 'areamem_requests_total{api="chat",status="200",stream="false"} 1.0' in metrics
    assert "areamem_decisions_total" in metrics
    assert "areamem_upstream_seconds_bucket" in metrics
    assert "areamem_retrieval_seconds_count" in metrics


async def test_request_log_line(proxy: Proxy) -> None:
    secret = "sk-very-secret-key"
    async with proxy.client(secret) as client:
        await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "log me"}]
        )
    await proxy.settle()
    records = [r for r in proxy.log_records() if r.get("event") == "chat"]
    assert len(records) == 1
    record = records[0]
    assert record["tenant"] == "default" and record["model"] == "echo" and record["stream"] is False
    assert record["decision"] is True and "first turn" in record["reason"]
    assert record["status"] == 200 and record["ingested"] == 2
    assert {"parse_ms", "policy_ms", "upstream_ms", "total_ms"} <= set(record["stages_ms"])
    assert record["receipt"].startswith("rcpt_")
    assert secret not in (proxy.data_dir / "logs" / "proxy.jsonl").read_text()


async def test_litellm_path_non_stream_and_stream(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    config = proxy_config(upstream.url)
    config["upstreams"][0]["fast_path"] = False
    proxy = await make_proxy(config)
    async with proxy.client() as client:
        reply = await client.chat.completions.create(
            model="echo",
            messages=[{"role": "user", "content": "via litellm"}],
            extra_body={"custom_field": 7},
        )
        stream = await client.chat.completions.create(
            model="echo",
            stream=True,
            messages=[{"role": "user", "content": "streamed via litellm"}],
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        try:
            await client.chat.completions.create(
                model="fail-429", messages=[{"role": "user", "content": "x"}]
            )
        except openai.RateLimitError as exc:
            status = exc.status_code
    assert reply.choices[0].message.content == "echo: via litellm"
    assert upstream.requests[0].body["custom_field"] == 7
    assert text == "echo: streamed via litellm"
    assert status == 429


async def test_upstream_key_comes_from_the_environment_and_is_never_logged(
    upstream: FakeUpstream, make_proxy: MakeProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AREAMEM_TEST_UPSTREAM_KEY", "sk-upstream-secret")
    config = proxy_config(upstream.url)
    config["upstreams"][0]["api_key_env"] = "AREAMEM_TEST_UPSTREAM_KEY"
    proxy = await make_proxy(config)
    async with proxy.client("sk-client-secret") as client:
        await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "hi"}]
        )
    await proxy.settle()
    headers = upstream.requests[0].headers
    assert headers["Authorization"] == "Bearer sk-upstream-secret"
    assert headers["Accept-Encoding"] == "identity"  # relayed bytes are never compressed
    log = (proxy.data_dir / "logs" / "proxy.jsonl").read_text()
    assert "sk-upstream-secret" not in log and "sk-client-secret" not in log


async def test_area_retrieval_in_the_proxy(upstream: FakeUpstream, make_proxy: MakeProxy) -> None:
    # a generous lookup budget: a loaded test machine must not skip memory here
    memory_settings = {"retrieval": "area", "retrieval_timeout_ms": 30_000}
    proxy = await make_proxy(proxy_config(upstream.url, memory=memory_settings))
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo",
            messages=[{"role": "user", "content": "My sister Ana keeps bees in Porto."}],
        )
        await proxy.settle()
        raw = await client.chat.completions.with_raw_response.create(
            model="echo", messages=[{"role": "user", "content": "Remember what Ana keeps?"}]
        )
    memory = upstream.requests[-1].body["messages"][0]
    assert "Ana keeps bees in Porto" in memory["content"]
    await proxy.settle()
    receipt = await _receipt(proxy, raw.headers["X-Memory-Receipt"])
    assert receipt["area"]["kind"] == "area (graph + bm25)"
    assert isinstance(receipt["graph_version"], int)  # the version the query pinned
    area = receipt["graph_area"]
    assert area["graph_version"] == receipt["graph_version"]
    assert "entity:Ana" in area["foci"]
    assert area["region"]["representative"] in area["region"]["nodes"]
    assert any(kind == "fragment" for kind, _ in area["region"]["nodes"])
    assert {"coverage", "convergence", "mass", "hub_penalty", "support"} <= set(
        area["region"]["score"]
    )
    ranked = area["fragments"]  # every injected fragment with the terms of its score
    assert [f["id"] for f in ranked] == [f["id"] for f in receipt["area"]["fragments"]]
    terms = {"bm25", "activation", "convergence", "similarity", "area", "date", "context"}
    assert all(set(f["terms"]) == terms for f in ranked)
    weights = {
        "bm25": 1.0, "activation": 0.5, "convergence": 1.0, "similarity": 0.5, "area": 0.1,
        "date": 0.5, "context": 0.4,
    }  # fmt: skip
    for f in ranked:  # the context (the better neighbour's score) is weighed as a term
        assert f["score"] == pytest.approx(
            f["factor"] * sum(weights[t] * v for t, v in f["terms"].items()), abs=1e-3
        )


async def _receipt(proxy: Proxy, receipt_id: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/receipts/{receipt_id}") as response:
            assert response.status == 200
            return dict(await response.json())


async def _queued(proxy: Proxy) -> int:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/stats") as response:
            return int((await response.json())["queued"])


async def _until_formed(proxy: Proxy, within_s: float) -> float:
    """Seconds until the exchange is logged (it is, after the answer) and then formed."""
    began = time.monotonic()
    while await _queued(proxy) == 0 and time.monotonic() - began < within_s:
        await asyncio.sleep(0.01)  # the answer arrives before its exchange is logged
    while await _queued(proxy) and time.monotonic() - began < within_s:
        await asyncio.sleep(0.02)
    return time.monotonic() - began


async def test_formation_waits_for_a_quiet_moment(
    upstream: FakeUpstream, make_proxy: MakeProxy, backends: Backends
) -> None:
    backends.encoder.encode(["loaded before the clock starts"])
    config = proxy_config(upstream.url, memory={"formation_grace_ms": 2000})
    proxy = await make_proxy(config)
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "Bees live in hives."}]
        )
        await asyncio.sleep(0.5)
        assert await _queued(proxy) == 2  # logged, not formed: the tenant may still be busy
        await _until_formed(proxy, within_s=20)
    assert await _queued(proxy) == 0


async def test_formation_is_deferred_at_most_max_defer(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    config = proxy_config(
        upstream.url, memory={"formation_grace_ms": 60_000, "formation_max_defer_ms": 300}
    )
    proxy = await make_proxy(config)
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "Wasps build paper nests."}]
        )
        waited = await _until_formed(proxy, within_s=40)
    assert await _queued(proxy) == 0, proxy.log_records()
    assert waited < 30  # not the 60 s grace (formation itself may be slow on a busy CI)


async def test_draining_forms_what_waits_at_once(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await make_proxy(proxy_config(upstream.url, memory={"formation_grace_ms": 60_000}))
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "Ants farm aphids."}]
        )
    began = time.monotonic()
    await proxy.settle()
    assert await _queued(proxy) == 0 and time.monotonic() - began < 30


async def test_a_failed_formation_pass_is_logged_and_counted(
    upstream: FakeUpstream, make_proxy: MakeProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = await make_proxy(proxy_config(upstream.url))
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "Moths follow the moon."}]
        )
        await proxy.settle()
        memory = proxy.services.tenants.get("default")

        def broken(on_pass: object = None) -> int:
            raise StorageError("disk full")

        monkeypatch.setattr(memory.store, "form_summary", broken)
        await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "Owls hunt at night."}]
        )
        await proxy.settle()
    failures = [r for r in proxy.log_records() if r.get("event") == "formation_failed"]
    assert failures and failures[0]["error"] == "disk full" and failures[0]["tenant"] == "default"
    assert await _queued(proxy) == 2  # still queued for the next pass, nothing lost


@pytest.mark.parametrize(("context_turns", "named"), [(0, False), (1, True)])
async def test_earlier_user_turns_join_the_foci_when_configured(
    upstream: FakeUpstream, make_proxy: MakeProxy, context_turns: int, named: bool
) -> None:
    proxy = await make_proxy(proxy_config(upstream.url, memory={"context_turns": context_turns}))
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo",
            messages=[{"role": "user", "content": "My sister Ana keeps bees in Porto."}],
        )
        await proxy.settle()
        raw = await client.chat.completions.with_raw_response.create(
            model="echo",
            messages=[
                {"role": "user", "content": "Tell me about Ana, please."},
                {"role": "assistant", "content": "Sure, what would you like to know?"},
                {"role": "user", "content": "Remember what she keeps?"},
            ],
            extra_headers={"X-Memory": "force"},
        )
    await proxy.settle()
    receipt = await _receipt(proxy, raw.headers["X-Memory-Receipt"])
    assert ("entity:Ana" in receipt["graph_area"]["foci"]) is named, receipt


async def test_memory_off_stores_nothing_and_logs_the_usage(proxy: Proxy) -> None:
    """``X-Memory: off`` skips the log write entirely (no store round trip on the
    answer's path); the answer's usage is still read, after it, for the log line."""
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo",
            messages=[{"role": "user", "content": "My cat Io sleeps on the router."}],
            extra_headers={"X-Memory": "off"},
        )
        stream = await client.chat.completions.create(
            model="echo",
            stream=True,
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "Io also likes the printer."}],
            extra_headers={"X-Memory": "off"},
        )
        async for _ in stream:
            pass
    await proxy.settle()
    chats = [r for r in proxy.log_records() if r.get("event") == "chat"]
    assert [(r["stream"], r["ingested"], r["outcome"]) for r in chats] == [
        (False, 0, "ok"),
        (True, 0, "ok"),
    ]
    assert chats[0]["usage"]["prompt_tokens"] == 10
    assert chats[1]["usage"] is not None
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/stats") as resp:
            stats = await resp.json()
    assert stats["log_messages"] == 0
