"""``POST /v1/responses`` with the real ``openai`` SDK (``client.responses.create``)
against a real proxy.

Two ways through, each tested whole: *native* (the routed upstream serves
``/v1/responses``: the fake upstream's own Responses endpoint gets the request raw, the
memory an input message right before the latest user item, everything else as sent,
``previous_response_id``, built-in tools and reasoning items included) and *bridged* (an
upstream that serves chat completions only: it gets a chat completion with the memory
message before the last user message, and the SDK gets a proper response or event stream
back). Stream and not, function calls, errors, receipts, and the exchange stored.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.types.responses import Response

from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy, proxy_config
from .doors import FORCE, QUESTION, receipt, remembering, search, stats

pytestmark = pytest.mark.e2e

# A function tool as clients send it; the SDK's FunctionToolParam requires ``strict``,
# which the API does not: the calls that send it ignore arg-type and list-item.
TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def _client(proxy: Proxy, key: str = "sk-anything") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=proxy.base_url, api_key=key, max_retries=0)


async def _text(answer: Any, stream: bool) -> str:
    """The answer's text (a stream's deltas joined, checked against its final response)."""
    if not stream:
        return str(answer.output_text)
    pieces: list[str] = []
    final = None
    async for event in answer:
        if event.type == "response.output_text.delta":
            pieces.append(event.delta)
        elif event.type == "response.completed":
            final = event.response
    assert final is not None and final.output_text == "".join(pieces)
    return "".join(pieces)


@pytest.mark.parametrize("stream", [False, True])
async def test_native_memory_goes_right_before_the_latest_user_item_and_the_rest_is_untouched(
    upstream: FakeUpstream, make_proxy: MakeProxy, stream: bool
) -> None:
    proxy = await remembering(make_proxy, upstream, serves="responses")
    before = (await stats(proxy))["log_messages"]
    items: list[dict[str, Any]] = [
        {"role": "developer", "content": "Answer briefly."},
        {"role": "user", "content": [{"type": "input_text", "text": "Hello."}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque=="},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": "{\"city\": \"Porto\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "Rainy"},
        {"role": "user", "content": [{"type": "input_text", "text": QUESTION}]},
        {"type": "item_reference", "id": "msg_after"},
    ]  # fmt: skip
    sent: dict[str, Any] = {
        "model": "echo",
        "instructions": "Be terse.",
        "input": items,
        "previous_response_id": "resp_earlier",
        "tools": [TOOL, {"type": "web_search_preview"}],
        "reasoning": {"effort": "low", "summary": "auto"},
        "store": True,
        "metadata": {"user": "u-1"},
    }
    async with _client(proxy) as client:
        raw = await client.responses.with_raw_response.create(
            **sent, stream=stream, extra_headers=FORCE, extra_body={"x_custom": [1, "two"]}
        )
        answer = await _text(raw.parse(), stream)
    assert answer == f"echo: {QUESTION}"
    got = upstream.requests[-1]
    assert got.query == "" and got.body.get("stream", False) is stream
    assert {k: got.body[k] for k in sent if k != "input"} == {
        k: v for k, v in sent.items() if k != "input"
    }
    assert got.body["x_custom"] == [1, "two"]
    memory = got.body["input"][5]
    assert got.body["input"][:5] == items[:5] and got.body["input"][6:] == items[5:]
    assert memory["role"] == "system" and "<retrieved_memory>" in memory["content"]
    assert "Lisbon" in memory["content"]
    await proxy.settle()
    shown = await receipt(proxy, raw.headers["X-Memory-Receipt"])
    assert shown["injected_text"] == memory["content"] and shown["decision"]["retrieve"]
    # instructions, developer, hello, the call, its output, the question, and the answer
    assert (await stats(proxy))["log_messages"] == before + 7


@pytest.mark.parametrize("stream", [False, True])
async def test_bridged_to_chat_completions_with_memory_before_the_last_user_message(
    upstream: FakeUpstream, make_proxy: MakeProxy, stream: bool
) -> None:
    proxy = await remembering(make_proxy, upstream)
    async with _client(proxy) as client:
        raw = await client.responses.with_raw_response.create(
            model="echo",
            instructions="Be terse.",
            input=QUESTION,
            max_output_tokens=64,
            temperature=0.3,
            text={"format": {"type": "json_schema", "name": "answer", "schema": {
                "type": "object"}}},
            stream=stream,
            extra_headers=FORCE,
        )  # fmt: skip
        response = raw.parse()
        answer = await _text(response, stream)
    assert answer == f"echo: {QUESTION}"
    chat = upstream.requests[-1].body
    assert [m["role"] for m in chat["messages"]] == ["system", "system", "user"]
    assert chat["messages"][0]["content"] == "Be terse."
    assert "<retrieved_memory>" in chat["messages"][1]["content"]
    assert chat["messages"][2]["content"] == QUESTION
    assert (chat["max_tokens"], chat["temperature"]) == (64, 0.3)
    assert chat["response_format"]["json_schema"]["name"] == "answer"
    if not stream:
        assert isinstance(response, Response)
        assert response.status == "completed" and response.model == "echo"
        assert response.usage is not None
        assert response.usage.output_tokens == len(answer.split())
    assert raw.headers["X-Memory-Receipt"].startswith("rcpt_")
    await proxy.settle()
    found = await search(proxy, "remember where Rui lives")
    assert any(QUESTION in hit["text"] for hit in found)
    assert any(answer in hit["text"] for hit in await search(proxy, answer))


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("stream", [False, True])
async def test_function_calls_and_their_outputs(
    upstream: FakeUpstream, make_proxy: MakeProxy, native: bool, stream: bool
) -> None:
    proxy = await remembering(make_proxy, upstream, serves="responses" if native else None)
    asked: list[dict[str, Any]] = [{"role": "user", "content": "Weather where Rui lives?"}]
    async with _client(proxy) as client:
        first = await client.responses.create(
            model="call-tool", input=asked, tools=[TOOL], stream=stream  # type: ignore[arg-type, list-item]
        )
        call = await _call(first, stream)
        assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"city": "Lisbon"})
        turns = [
            *asked,
            {"type": "function_call", **call},
            {"type": "function_call_output", "call_id": call["call_id"], "output": "Sunny"},
            {"role": "user", "content": "And do you remember my sister?"},
        ]
        answer = await client.responses.create(
            model="echo", input=turns, tools=[TOOL], extra_headers=FORCE  # type: ignore[arg-type, list-item]
        )
    assert answer.output_text == "echo: And do you remember my sister?"
    got = upstream.requests[-1].body
    if native:
        assert got["input"][:3] == turns[:3] and got["input"][4] == turns[3]
        assert "<retrieved_memory>" in got["input"][3]["content"]
    else:
        assert [m["role"] for m in got["messages"]] == ["user", "assistant", "tool", "system",
                                                        "user"]  # fmt: skip
        assert got["messages"][1]["tool_calls"][0]["id"] == call["call_id"]
        assert got["messages"][2] == {"role": "tool", "tool_call_id": call["call_id"],
                                      "content": "Sunny"}  # fmt: skip
        assert got["tools"][0]["function"]["parameters"] == TOOL["parameters"]


async def test_a_function_output_given_as_text_parts_reaches_the_model_as_text(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """An output of ``input_text`` parts (as the Responses API allows) was bridged as the
    JSON of the parts: the model read ``[{"type": "input_text", ...}]``."""
    proxy = await make_proxy(proxy_config(upstream.url))
    output = [{"type": "input_text", "text": "Sunny"}, {"type": "input_text", "text": ", 24 C"}]
    turns = [
        {"role": "user", "content": "Weather?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": output},
    ]
    async with _client(proxy) as client:
        await client.responses.create(model="echo", input=turns)  # type: ignore[arg-type]
    (tool,) = [m for m in upstream.requests[-1].body["messages"] if m["role"] == "tool"]
    assert tool == {"role": "tool", "tool_call_id": "call_1", "content": [
        {"type": "text", "text": "Sunny"}, {"type": "text", "text": ", 24 C"}]}  # fmt: skip


async def _call(answer: Any, stream: bool) -> dict[str, Any]:
    """The first function call of an answer (a stream's from its events)."""
    if not stream:
        item = next(i for i in answer.output if i.type == "function_call")
        return {"call_id": item.call_id, "name": item.name, "arguments": item.arguments}
    found: dict[str, Any] = {}
    kinds: list[str] = []
    async for event in answer:
        kinds.append(event.type)
        if event.type == "response.output_item.done" and event.item.type == "function_call":
            item = event.item
            found = {"call_id": item.call_id, "name": item.name, "arguments": item.arguments}
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    return found


USER = [{"role": "user", "content": "Look."}]
FILE = {"type": "input_file", "file_id": "file-1"}
INLINE = {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JV"}


@pytest.mark.parametrize("native", [True, False])
async def test_an_input_of_only_files_is_served_whole_never_refused_or_dropped(
    upstream: FakeUpstream, make_proxy: MakeProxy, native: bool
) -> None:
    config = proxy_config(upstream.url)
    if native:
        config["upstreams"][0]["serves"] = ["responses"]
    proxy = await make_proxy(config)
    sent = [{"role": "user", "content": [FILE, INLINE]}]
    async with _client(proxy) as client:
        await client.responses.create(model="echo", input=sent)  # type: ignore[arg-type]
    got = upstream.requests[-1].body
    if native:
        assert got["input"] == sent
    else:
        inline = {"filename": "a.pdf", "file_data": INLINE["file_data"]}
        files = [{"type": "file", "file": {"file_id": "file-1"}}, {"type": "file", "file": inline}]
        assert got["messages"] == [{"role": "user", "content": files}]
    await proxy.settle()
    assert (await stats(proxy))["log_messages"] == 2  # the input and the answer


async def test_a_part_chat_completions_cannot_carry_is_refused_when_bridged_naming_it(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await make_proxy(proxy_config(upstream.url))
    parts = [{"type": "input_text", "text": "Look."}, {"type": "input_image", "file_id": "f-2"}]
    sent = [{"role": "user", "content": parts}]
    stored = [{"type": "item_reference", "id": "msg_1"}, {"type": "web_search_call", "id": "w"}]
    async with _client(proxy) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.responses.create(model="echo", input=sent)  # type: ignore[arg-type]
        assert caught.value.param == "input[0].content[1]"
        for item in stored:  # items only the Responses API holds: never silently left out
            with pytest.raises(openai.BadRequestError) as caught:
                await client.responses.create(model="echo", input=[item, *USER])  # type: ignore[list-item]
            assert caught.value.param == "input[0]"
    assert upstream.requests == []


async def test_errors_keep_the_openai_shape_and_name_what_cannot_be_bridged(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    config = proxy_config(upstream.url, auth={"keys": {"sk-alice": "alice"}})
    config["upstreams"] = [
        {"model": "fail-503", "provider": "openai", "api_base": upstream.url,
         "serves": ["responses"]},
        {"model": "*", "provider": "openai", "api_base": upstream.url},
    ]  # fmt: skip
    proxy = await make_proxy(config)
    async with _client(proxy, "sk-alice") as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.responses.create(
                model="echo", input="hi", previous_response_id="resp_1"
            )
        assert caught.value.code == "unsupported_parameter"
        assert caught.value.param == "previous_response_id"
        with pytest.raises(openai.BadRequestError) as caught:
            await client.responses.create(
                model="echo", input="hi", tools=[{"type": "web_search_preview"}]
            )
        assert caught.value.param == "tools[0]"
        for tools in ({"type": "function", "name": "f"}, "get_weather"):
            with pytest.raises(openai.BadRequestError, match="'tools' must be an array"):
                await client.responses.create(model="echo", input="hi", tools=tools)  # type: ignore[arg-type]
        with pytest.raises(openai.BadRequestError, match="user message"):
            await client.responses.create(
                model="echo", input=[{"role": "assistant", "content": "only me"}]
            )
        bad_text = [{"role": "user", "content": [{"type": "input_text", "text": 1e308}]}]
        with pytest.raises(openai.BadRequestError, match=r"input\[0\]\.content\[0\]\.text"):
            await client.responses.create(model="echo", input=bad_text)  # type: ignore[arg-type]
        with pytest.raises(openai.RateLimitError):  # bridged
            await client.responses.create(model="fail-429", input="hi")
        with pytest.raises(openai.InternalServerError) as failed:  # native, relayed as is
            await client.responses.create(model="fail-503", input="hi")
        assert "fake upstream failure 503" in str(failed.value)
    async with _client(proxy, "sk-nobody") as stranger:
        with pytest.raises(openai.AuthenticationError):
            await stranger.responses.create(model="echo", input="hi")
    assert sum(1 for r in upstream.requests if r.body.get("model") == "echo") == 0


async def test_a_stream_that_dies_midway_ends_with_an_error_event(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await make_proxy(proxy_config(upstream.url))
    async with _client(proxy) as client:
        stream = await client.responses.create(
            model="die-mid-stream", input="a b c d e f", stream=True
        )
        kinds: list[str] = []
        events: list[Any] = []
        async for event in stream:
            kinds.append(event.type)
            events.append(event)
    assert kinds[0] == "response.created" and kinds[-1] == "error"
    assert "response.completed" not in kinds
    error = events[-1]
    assert error.code == "upstream_disconnected"
    assert error.sequence_number == events[-2].sequence_number + 1
