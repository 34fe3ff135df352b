"""``POST /v1/messages`` with the real ``anthropic`` SDK against a real proxy.

Two ways through, each tested whole: *native* (the routed upstream serves
``/v1/messages``: the fake upstream's own Messages endpoint gets the request raw, memory
as a text block of the last user turn, everything else as sent) and *bridged* (an
upstream that serves chat completions only: the fake gets a chat completion with the
memory message before the last user message, and the SDK gets a proper message or event
stream back). Stream and not, tool use, errors, receipts, and the exchange stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

import aiohttp
import anthropic
import pytest
from anthropic.types import Message, MessageParam, TextBlock, ToolParam

from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy, proxy_config
from .doors import FORCE, QUESTION, receipt, remembering, search, stats

pytestmark = pytest.mark.e2e

TOOL: ToolParam = {
    "name": "get_weather",
    "description": "Weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def _client(proxy: Proxy, key: str = "sk-anything") -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=proxy.url, api_key=key, max_retries=0)


@pytest.mark.parametrize("stream", [False, True])
async def test_native_memory_goes_in_the_last_user_turn_and_the_rest_arrives_unchanged(
    upstream: FakeUpstream, make_proxy: MakeProxy, stream: bool
) -> None:
    proxy = await remembering(make_proxy, upstream, serves="messages")
    before = (await stats(proxy))["log_messages"]
    sent: dict[str, Any] = {
        "model": "echo",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "Hello."},
            {"role": "assistant", "content": [{"type": "text", "text": "Hi!"}]},
            {"role": "user", "content": QUESTION},
        ],
        "metadata": {"user_id": "u-1"},
        "tools": [TOOL],
    }
    async with _client(proxy) as client:
        raw = await client.messages.with_raw_response.create(
            **sent,
            stream=stream,
            extra_headers=FORCE,
            extra_body={"x_custom": [1, "two"], "temperature": 0.2},
        )
        answer = await _text(await raw.parse(), stream)
    assert answer == f"echo: {QUESTION}"
    got = upstream.requests[-1].body
    assert {k: got[k] for k in sent if k != "messages"} == {k: sent[k] for k in sent
                                                           if k != "messages"}  # fmt: skip
    assert (got["x_custom"], got["temperature"]) == ([1, "two"], 0.2)
    assert got.get("stream", False) is stream
    assert got["messages"][:2] == sent["messages"][:2]
    memory, question = got["messages"][2]["content"]
    assert memory["type"] == "text" and "<retrieved_memory>" in memory["text"]
    assert "Lisbon" in memory["text"] and question == {"type": "text", "text": QUESTION}
    await proxy.settle()
    shown = await receipt(proxy, raw.headers["X-Memory-Receipt"])
    assert shown["injected_text"] == memory["text"] and shown["decision"]["retrieve"]
    assert (await stats(proxy))["log_messages"] == before + 5  # system, 3 turns, the answer


async def _text(message: Any, stream: bool) -> str:
    """The answer's text (a stream's deltas joined)."""
    if not stream:
        return "".join(b.text for b in message.content if b.type == "text")
    pieces = []
    async for event in message:
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            pieces.append(event.delta.text)
    return "".join(pieces)


@pytest.mark.parametrize("stream", [False, True])
async def test_bridged_to_chat_completions_with_memory_before_the_last_user_message(
    upstream: FakeUpstream, make_proxy: MakeProxy, stream: bool
) -> None:
    proxy = await remembering(make_proxy, upstream)
    async with _client(proxy) as client:
        raw = await client.messages.with_raw_response.create(
            model="echo",
            max_tokens=64,
            system="Be terse.",
            messages=[{"role": "user", "content": [{"type": "text", "text": QUESTION}]}],
            stop_sequences=["END"],
            stream=stream,
            extra_headers=FORCE,
        )
        message = await raw.parse()
        answer = await _text(message, stream)
    assert answer == f"echo: {QUESTION}"
    chat = upstream.requests[-1].body
    roles = [m["role"] for m in chat["messages"]]
    assert roles == ["system", "system", "user"]
    assert chat["messages"][0]["content"] == "Be terse."
    assert "<retrieved_memory>" in chat["messages"][1]["content"]
    assert chat["messages"][2]["content"] == QUESTION
    assert (chat["max_tokens"], chat["stop"]) == (64, ["END"])
    if not stream:
        assert isinstance(message, Message)
        assert (message.stop_reason, message.usage.output_tokens) == (
            "end_turn",
            len(answer.split()),
        )
    assert raw.headers["X-Memory-Receipt"].startswith("rcpt_")
    await proxy.settle()
    found = await search(proxy, "remember where Rui lives")
    assert any(QUESTION in hit["text"] for hit in found)


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("stream", [False, True])
async def test_tool_use_and_tool_results(
    upstream: FakeUpstream, make_proxy: MakeProxy, native: bool, stream: bool
) -> None:
    proxy = await remembering(make_proxy, upstream, serves="messages" if native else None)
    asked: list[MessageParam] = [
        {"role": "user", "content": "What is the weather where Rui lives?"}
    ]
    async with _client(proxy) as client:
        first = await client.messages.create(
            model="call-tool", max_tokens=64, tools=[TOOL], messages=asked, stream=stream
        )
        call = await _tool_use(first, stream)
        assert (call["name"], call["input"]) == ("get_weather", {"city": "Lisbon"})
        turns: list[Mapping[str, Any]] = [
            *asked,
            {"role": "assistant", "content": [{"type": "tool_use", **call}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call["id"], "content": "Sunny, 24 C"},
                {"type": "text", "text": "And do you remember my sister?"},
            ]},
        ]  # fmt: skip
        answer = await client.messages.create(
            model="echo", max_tokens=64, tools=[TOOL], extra_headers=FORCE,
            # the tool_use block is the call as the answer gave it (id, name, input)
            messages=cast("list[MessageParam]", turns),
        )
    first_block = answer.content[0]
    assert isinstance(first_block, TextBlock)
    assert first_block.text == "echo: And do you remember my sister?"
    got = upstream.requests[-1].body
    if native:
        blocks = got["messages"][-1]["content"]
        assert [b["type"] for b in blocks] == ["tool_result", "text", "text"]
        assert "<retrieved_memory>" in blocks[1]["text"]
        assert (
            got["messages"][:2] == turns[:2] or got["messages"][1]["content"][0]["id"] == call["id"]
        )
    else:
        roles = [m["role"] for m in got["messages"]]
        assert roles == ["user", "assistant", "tool", "system", "user"]
        assert got["messages"][1]["tool_calls"][0]["function"]["name"] == "get_weather"
        assert got["messages"][2] == {"role": "tool", "tool_call_id": call["id"],
                                      "content": "Sunny, 24 C"}  # fmt: skip
        assert got["tools"][0]["function"]["parameters"] == TOOL["input_schema"]


async def _tool_use(message: Any, stream: bool) -> dict[str, Any]:
    """The first tool_use block of an answer (a stream's assembled)."""
    if not stream:
        block = next(b for b in message.content if b.type == "tool_use")
        return {"id": block.id, "name": block.name, "input": block.input}
    found: dict[str, Any] = {}
    partial: list[str] = []
    async for event in message:
        if event.type == "content_block_start" and event.content_block.type == "tool_use":
            found = {"id": event.content_block.id, "name": event.content_block.name}
        elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
            partial.append(event.delta.partial_json)
        elif event.type == "message_delta":
            assert event.delta.stop_reason == "tool_use"
    return {**found, "input": json.loads("".join(partial))}


PDF = {
    "type": "document",
    "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"},
}
NOTE = {
    "type": "document",
    "title": "plan",
    "source": {"type": "text", "media_type": "text/plain", "data": "The plan is to sail."},
}
FILE_ON_ANTHROPIC = {"type": "document", "source": {"type": "file", "file_id": "file_1"}}


@pytest.mark.parametrize("native", [True, False])
async def test_a_turn_of_only_documents_is_served_whole_never_refused_or_dropped(
    upstream: FakeUpstream, make_proxy: MakeProxy, native: bool
) -> None:
    config = proxy_config(upstream.url)
    if native:
        config["upstreams"][0]["serves"] = ["messages"]
    proxy = await make_proxy(config)
    turns = [{"role": "user", "content": [PDF, NOTE]}]
    async with _client(proxy) as client:
        await client.messages.create(model="echo", max_tokens=64, messages=turns)  # type: ignore[arg-type]
    got = upstream.requests[-1].body["messages"]
    if native:
        assert got == turns
    else:
        pdf = {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0xLjQK"}}
        note = {"type": "text", "text": "The plan is to sail."}
        assert got == [{"role": "user", "content": [pdf, note]}]
    await proxy.settle()
    assert (await stats(proxy))["log_messages"] == 2  # the turn and the answer


async def test_a_block_chat_completions_cannot_carry_is_refused_when_bridged_naming_it(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await make_proxy(proxy_config(upstream.url))
    turns = [{"role": "user", "content": [{"type": "text", "text": "Read it."}, FILE_ON_ANTHROPIC]}]
    search = {"type": "web_search_20250305", "name": "web_search"}  # run by Anthropic
    async with _client(proxy) as client:
        with pytest.raises(anthropic.BadRequestError, match="serves the Messages API itself"):
            await client.messages.create(model="echo", max_tokens=64, messages=turns)  # type: ignore[arg-type]
        with pytest.raises(anthropic.BadRequestError, match=r"tools\[1\]"):
            await client.messages.create(
                model="echo", max_tokens=64, tools=[TOOL, search],  # type: ignore[list-item]
                messages=[{"role": "user", "content": "Search."}],
            )  # fmt: skip
        for stop in ("END", ["END", 7]):  # a stop never said would be no stop at all
            with pytest.raises(anthropic.BadRequestError, match="stop_sequences"):
                await client.messages.create(
                    model="echo", max_tokens=64, stop_sequences=stop,  # type: ignore[arg-type]
                    messages=[{"role": "user", "content": "Count."}],
                )  # fmt: skip
    assert upstream.requests == []


async def test_errors_are_anthropic_error_objects(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    config = proxy_config(upstream.url, auth={"keys": {"sk-alice": "alice"}})
    config["upstreams"] = [
        {"model": "fail-529", "provider": "openai", "api_base": upstream.url,
         "serves": ["messages"]},
        {"model": "*", "provider": "openai", "api_base": upstream.url},
    ]  # fmt: skip
    proxy = await make_proxy(config)
    hello: list[MessageParam] = [{"role": "user", "content": "hi"}]
    async with _client(proxy, "sk-alice") as client:
        with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
            await client.messages.create(model="echo", max_tokens=0, messages=hello)
        for model, error in (("fail-429", anthropic.RateLimitError),  # bridged
                             ("fail-529", anthropic.OverloadedError)):  # native  # fmt: skip
            with pytest.raises(error) as caught:
                await client.messages.create(model=model, max_tokens=8, messages=hello)
            assert caught.value.body["type"] == "error"  # type: ignore[index]
    async with _client(proxy, "sk-nobody") as stranger:
        with pytest.raises(anthropic.AuthenticationError):
            await stranger.messages.create(model="echo", max_tokens=8, messages=hello)
    async with aiohttp.ClientSession() as http:
        headers = {"x-api-key": "sk-alice", "Content-Type": "application/json"}
        async with http.post(f"{proxy.url}/v1/messages", data=b"{oops",
                             headers=headers) as response:  # fmt: skip
            body = await response.json()
    assert response.status == 400 and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
