"""Every front door in front of an upstream whose answers have fields of the wrong type.

A broken or hostile OpenAI-compatible upstream can put any JSON value anywhere: a choice
that is a string, a tool call whose ``index`` is null or whose ``function`` is a string,
usage counts of ``"12"`` or ``1e400``, an event nested 5,000 deep. The client still gets
a whole answer in its own door's format (read by its real SDK), and what is stored is
that answer. The upstream here is a real HTTP server on loopback that answers the bytes
a test gives it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import anthropic
import pytest
from aiohttp import web

from .conftest import MakeProxy, Proxy, proxy_config
from .doors import search

pytestmark = pytest.mark.e2e

WORD = "zanzibarite"
"""A word only the upstream's answer holds (found by search once stored)."""


def _chunk(choices: Any, **extra: Any) -> bytes:
    return b"data: " + json.dumps({"id": "c1", "choices": choices, **extra}).encode() + b"\n\n"


def _delta(**delta: Any) -> list[dict[str, Any]]:
    return [{"index": 0, "delta": delta}]


ODD_STREAM = [
    _chunk(["not a choice"]),
    _chunk([{"index": 0, "delta": "not a delta"}]),
    _chunk(_delta(content=f"The {WORD} ")),
    _chunk(_delta(tool_calls=[5, "x"])),
    _chunk(_delta(tool_calls={"index": 0})),
    _chunk(_delta(content="answer.")),
    b'data: {"id": ' + b"[" * 5000 + b"]" * 5000 + b"}\n\n",  # past any JSON reader's depth
    _chunk(_delta(tool_calls=[{"index": None, "id": "call_1", "function": "get_weather"}])),
    _chunk(_delta(tool_calls=[{"index": "z", "function": {"name": 7, "arguments": 8}}])),
    b'data: {"id": "c1", "choices": [], "usage": {"prompt_tokens": "12", '
    b'"completion_tokens": 1e400}}\n\n',
    _chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
    b"data: [DONE]\n\n",
]
ODD_WHOLE = (
    b'{"id": "c1", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": '
    b'"stop", "message": {"role": "assistant", "content": "The ' + WORD.encode() + b' answer.", '
    b'"tool_calls": ["x", 5, {"id": "call_1", "function": "get_weather"}, {"id": "call_2", '
    b'"function": {"name": "f", "arguments": "' + b"[" * 5000 + b'"}}]}}], '
    b'"usage": {"prompt_tokens": "12", "completion_tokens": 1e400}}'
)

FAILING_STREAM = [
    _chunk(_delta(content=f"The {WORD} ")),
    b'data: {"error": {"message": "overloaded midway", "type": "server_error"}}\n\n',
    _chunk(_delta(content="answer.")),
    b"data: [DONE]\n\n",
]
"""An upstream that fails midway with an error event (as OpenAI's servers do), then goes
on: the ``openai`` SDK raises at the error, so the answer never reached the client whole."""

HTML = b"<html><body>Service temporarily unavailable</body></html>"
SURROGATE_ERROR = b'{"error": {"message": "bad \\ud800 input", "type": "invalid_request_error"}}'
"""An error whose message escapes a lone surrogate: valid JSON, no UTF-8 text."""
DEEP = b'{"error": ' + b"[" * 5000 + b"]" * 5000 + b"}"


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


NATIVE_FAILING = {
    "/v1/messages": [
        _event("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "model": "m", "usage": {"input_tokens": 3, "output_tokens": 0}}}),
        _event("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}}),
        _event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                       "delta": {"type": "text_delta", "text": f"The {WORD}"}}),
        _event("error", {"type": "error", "error": {"type": "overloaded_error",
                                                    "message": "Overloaded"}}),
    ],
    "/v1/responses": [
        _event("response.created", {"type": "response.created", "sequence_number": 0,
                                    "response": {"id": "resp_1", "object": "response",
                                                 "status": "in_progress", "output": []}}),
        _event("response.output_text.delta", {"type": "response.output_text.delta",
                                              "sequence_number": 1, "item_id": "msg_1",
                                              "output_index": 0, "content_index": 0,
                                              "delta": f"The {WORD}"}),
        _event("error", {"type": "error", "sequence_number": 2, "code": "server_error",
                         "message": "The server had an error", "param": None}),
    ],
}  # fmt: skip
"""Native streams (an upstream that ``serves`` the door's API) failing midway with the
API's ``error`` event, where each SDK raises or stops: no answer reached the client whole."""


@pytest.fixture
async def odd_upstream() -> AsyncIterator[str]:
    """A chat-completions upstream answering :data:`ODD_STREAM` or :data:`ODD_WHOLE`
    (model ``message-is-a-string``: a choice whose message is a string; ``html``:
    :data:`HTML`, a gateway's page answered with status 200; ``labelled-text``:
    :data:`ODD_WHOLE` said to be Latin-1 text; ``deep-<status>``: that status with
    :data:`DEEP`; ``surrogate-400`` and ``surrogate-mid-stream``: :data:`SURROGATE_ERROR`
    as a 400 or as the event after the first chunk; model
    ``error-mid-stream``: :data:`FAILING_STREAM`, ``error-mid-stream-apart`` the same with
    a pause after each chunk)."""

    async def answer(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if body["model"] == "message-is-a-string":
            return web.json_response({"id": "c1", "choices": [{"message": "x"}]})
        if body["model"] == "surrogate-400":
            return web.Response(status=400, body=SURROGATE_ERROR, content_type="application/json")
        if body["model"].startswith("deep-"):  # deep-400, deep-401: an error so nested
            return web.Response(status=int(body["model"][5:]), body=DEEP)
        if body["model"] == "html":
            return web.Response(body=HTML, content_type="text/html")
        if body["model"] == "labelled-text":
            return web.Response(body=ODD_WHOLE, content_type="text/plain", charset="latin-1")
        if not body.get("stream"):
            return web.Response(body=ODD_WHOLE, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        failing = body["model"].startswith("error-mid-stream")
        chunks = FAILING_STREAM if failing else ODD_STREAM
        if body["model"] == "surrogate-mid-stream":
            chunks = [FAILING_STREAM[0], b"data: " + SURROGATE_ERROR + b"\n\n"]
        for chunk in chunks:
            await response.write(chunk)
            if body["model"] == "error-mid-stream-apart":  # each chunk read on its own
                await asyncio.sleep(0.05)
        await response.write_eof()
        return response

    async def native(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in NATIVE_FAILING[request.path]:
            await response.write(chunk)
        await response.write_eof()
        return response

    async def models(request: web.Request) -> web.Response:
        return web.Response(body=DEEP, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    app.router.add_post("/v1/messages", native)
    app.router.add_post("/v1/responses", native)
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    await runner.cleanup()


async def _chat(proxy: Proxy, stream: bool) -> str:
    """The chat door relays the upstream's chunks as they are (the SDK would refuse the
    odd ones): read by hand, the stream must be whole, up to its end marker."""
    asked = {"model": "odd", "messages": [{"role": "user", "content": "Tell me."}],
             "stream": stream}  # fmt: skip
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.base_url}/chat/completions", json=asked) as response:
            assert response.status == 200
            raw = await response.read()
    if not stream:
        return str(json.loads(raw)["choices"][0]["message"]["content"])
    assert raw.endswith(b"data: [DONE]\n\n")
    pieces = []
    for line in raw.split(b"\n"):
        if line.startswith(b'data: {"id": "c1", "choices"'):  # not the nested one
            for choice in json.loads(line[6:])["choices"]:
                delta = choice.get("delta") if isinstance(choice, dict) else None
                pieces.append(delta.get("content") or "" if isinstance(delta, dict) else "")
    return "".join(pieces)


async def _messages(proxy: Proxy, stream: bool) -> str:
    async with anthropic.AsyncAnthropic(
        base_url=proxy.url, api_key="sk-anything", max_retries=0
    ) as client:
        asked: dict[str, Any] = {"model": "odd", "max_tokens": 50,
                                 "messages": [{"role": "user", "content": "Tell me."}]}  # fmt: skip
        if not stream:
            message = await client.messages.create(**asked)
            return "".join(b.text for b in message.content if b.type == "text")
        kinds, pieces = [], []
        async for event in await client.messages.create(**asked, stream=True):
            kinds.append(event.type)
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                pieces.append(event.delta.text)
        assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
        return "".join(pieces)


async def _responses(proxy: Proxy, stream: bool) -> str:
    async with proxy.client() as client:
        if not stream:
            response = await client.responses.create(model="odd", input="Tell me.")
            return response.output_text
        kinds, pieces = [], []
        async for event in await client.responses.create(
            model="odd", input="Tell me.", stream=True
        ):
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                pieces.append(event.delta)
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        return "".join(pieces)


DOORS = {"chat": _chat, "messages": _messages, "responses": _responses}


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("door", list(DOORS))
async def test_fields_of_the_wrong_type_in_an_answer_never_break_it_and_it_is_stored(
    odd_upstream: str, make_proxy: MakeProxy, door: str, stream: bool
) -> None:
    proxy = await make_proxy(proxy_config(odd_upstream))
    text = await DOORS[door](proxy, stream)
    assert text == f"The {WORD} answer."
    await proxy.settle()
    (record,) = [r for r in proxy.log_records() if r.get("event") == "chat"]
    assert (record["status"], record["outcome"]) == (200, "ok")
    assert any(WORD in hit["text"] for hit in await search(proxy, WORD))


async def test_a_choice_whose_message_is_a_string_is_relayed_as_the_upstream_sent_it(
    odd_upstream: str, make_proxy: MakeProxy
) -> None:
    proxy = await make_proxy(proxy_config(odd_upstream))
    asked = {"model": "message-is-a-string", "messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.base_url}/chat/completions", json=asked) as response:
            assert response.status == 200
            assert await response.json() == {"id": "c1", "choices": [{"message": "x"}]}


async def _failing_chat(proxy: Proxy, model: str) -> None:
    """Relayed as the upstream sent it, the error event included (where the ``openai``
    SDK raises ``APIError``)."""
    asked = {"model": model, "stream": True,
             "messages": [{"role": "user", "content": "Tell me."}]}  # fmt: skip
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.base_url}/chat/completions", json=asked) as response:
            raw = await response.read()
    assert b"".join(FAILING_STREAM) == raw


async def _failing_messages(proxy: Proxy, model: str) -> None:
    """Read whole (the ``anthropic`` SDK raises at the ``error`` event, before the
    proxy's end of the exchange): the error is the last event, no ``message_stop``."""
    asked = {"model": model, "max_tokens": 50, "stream": True,
             "messages": [{"role": "user", "content": "Tell me."}]}  # fmt: skip
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.url}/v1/messages", json=asked) as response:
            raw = await response.read()
    events = [block.split(b"\n") for block in raw.split(b"\n\n") if block]
    kinds = [lines[0].removeprefix(b"event: ").decode() for lines in events]
    assert kinds == ["message_start", "content_block_start", "content_block_delta", "error"]
    error = json.loads(events[-1][1].removeprefix(b"data: "))
    assert error == {"type": "error", "error": {"type": "api_error",
                                                "message": "overloaded midway"}}  # fmt: skip


async def _failing_responses(proxy: Proxy, model: str) -> None:
    events: list[Any] = []
    async with proxy.client() as client:
        async for event in await client.responses.create(
            model=model, input="Tell me.", stream=True
        ):
            events.append(event)
    assert events[-1].type == "error" and events[-1].message == "overloaded midway"
    assert events[-1].sequence_number == events[-2].sequence_number + 1
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert deltas == [f"The {WORD} "]


@pytest.mark.parametrize("model", ["error-mid-stream", "error-mid-stream-apart"])
@pytest.mark.parametrize(
    "door", [_failing_chat, _failing_messages, _failing_responses], ids=list(DOORS)
)
async def test_an_error_event_midway_reaches_the_client_and_no_answer_is_stored(
    odd_upstream: str,
    make_proxy: MakeProxy,
    door: Callable[[Proxy, str], Awaitable[None]],
    model: str,
) -> None:
    proxy = await make_proxy(proxy_config(odd_upstream))
    await door(proxy, model)
    await proxy.settle()
    (record,) = [r for r in proxy.log_records() if r.get("event") == "chat"]
    assert record["ingested"] == 1  # the question; no answer the client never got whole
    assert not any(WORD in hit["text"] for hit in await search(proxy, WORD))


@pytest.mark.parametrize("path", list(NATIVE_FAILING))
async def test_a_native_stream_failing_midway_is_relayed_and_no_answer_is_stored(
    odd_upstream: str, make_proxy: MakeProxy, path: str
) -> None:
    config = proxy_config(odd_upstream)
    config["upstreams"][0]["serves"] = ["messages", "responses"]
    proxy = await make_proxy(config)
    asked: dict[str, Any] = {"model": "native", "stream": True}
    if path == "/v1/messages":
        asked |= {"max_tokens": 50, "messages": [{"role": "user", "content": "Tell me."}]}
    else:
        asked |= {"input": "Tell me."}
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url + path, json=asked) as response:
            assert await response.read() == b"".join(NATIVE_FAILING[path])
    await proxy.settle()
    (record,) = [r for r in proxy.log_records() if r.get("event") == "chat"]
    assert record["ingested"] == 1
    assert not any(WORD in hit["text"] for hit in await search(proxy, WORD))


async def test_a_page_that_is_no_completion_is_a_502_in_a_bridged_doors_shape(
    odd_upstream: str, make_proxy: MakeProxy
) -> None:
    """A gateway's page answered with 200 has no answer a bridged door could present:
    a 502 in the door's shape, never an empty message the model seems to have said; the
    chat door relays it as it came, as it relays every answer."""
    proxy = await make_proxy(proxy_config(odd_upstream))
    tell = [{"role": "user", "content": "Tell me."}]
    async with aiohttp.ClientSession() as http:
        chat = {"model": "html", "messages": tell}
        async with http.post(f"{proxy.base_url}/chat/completions", json=chat) as response:
            assert (response.status, await response.read()) == (200, HTML)
        messages = {"model": "html", "max_tokens": 50, "messages": tell}
        async with http.post(f"{proxy.base_url}/messages", json=messages) as response:
            assert response.status == 502
            error = await response.json()
            assert (error["type"], error["error"]["type"]) == ("error", "api_error")
        async with http.post(
            f"{proxy.base_url}/responses", json={"model": "html", "input": "Tell me."}
        ) as response:
            assert response.status == 502
            assert (await response.json())["error"]["code"] == "upstream_error"
    await proxy.settle()
    records = [r for r in proxy.log_records() if r.get("event") == "chat"]
    assert [(r["api"], r["status"], r["ingested"]) for r in records] == [
        ("chat", 200, 1), ("messages", 502, 0), ("responses", 502, 0)
    ]  # fmt: skip


@pytest.mark.parametrize("door", ["messages", "responses"])
async def test_a_bridged_answer_is_json_whatever_the_upstreams_label(
    odd_upstream: str, make_proxy: MakeProxy, door: str
) -> None:
    proxy = await make_proxy(proxy_config(odd_upstream))
    asked: dict[str, Any] = {"model": "labelled-text", "max_tokens": 50, "input": "Tell me.",
                             "messages": [{"role": "user", "content": "Tell me."}]}  # fmt: skip
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.base_url}/{door}", json=asked) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == "application/json; charset=utf-8"
            assert WORD in (await response.read()).decode()


@pytest.mark.parametrize(("status", "answered"), [(400, 400), (401, 502)])
async def test_an_error_body_nested_past_any_reader_is_answered_logged_and_counted(
    odd_upstream: str, make_proxy: MakeProxy, status: int, answered: int
) -> None:
    proxy = await make_proxy(proxy_config(odd_upstream))
    asked = {"model": f"deep-{status}", "max_tokens": 50,
             "messages": [{"role": "user", "content": "Tell me."}]}  # fmt: skip
    async with aiohttp.ClientSession() as http:
        for door in ("chat/completions", "messages"):
            async with http.post(f"{proxy.base_url}/{door}", json=asked) as response:
                assert response.status == answered
                error = await response.json()
                assert "upstream" in json.dumps(error)
    await proxy.settle()
    records = [(r["api"], r["status"]) for r in proxy.log_records() if r.get("event") == "chat"]
    assert records == [("chat", answered), ("messages", answered)]


async def test_a_model_list_nested_past_any_reader_is_checked_and_logged(
    odd_upstream: str, make_proxy: MakeProxy
) -> None:
    """The start-up check of an upstream whose ``/models`` answers :data:`DEEP` (it raised
    RecursionError: the check of every upstream gave up, nothing logged)."""
    proxy = await make_proxy(proxy_config(odd_upstream))
    for _ in range(200):  # the start-up check runs in the background
        checked = [r for r in proxy.log_records() if r.get("event") == "upstream_ok"]
        if checked:
            break
        await asyncio.sleep(0.05)
    assert checked and (checked[0]["status"], checked[0]["models"]) == (200, None)


@pytest.mark.parametrize("door", ["messages", "responses"])
async def test_an_upstream_error_holding_a_lone_surrogate_is_said_in_the_doors_shape(
    odd_upstream: str, make_proxy: MakeProxy, door: str
) -> None:
    proxy = await make_proxy(proxy_config(odd_upstream))
    asked: dict[str, Any] = {"max_tokens": 50, "input": "Tell me.",
                             "messages": [{"role": "user", "content": "Tell me."}]}  # fmt: skip
    async with aiohttp.ClientSession() as http:
        url = f"{proxy.base_url}/{door}"
        async with http.post(url, json={**asked, "model": "surrogate-400"}) as response:
            assert response.status == 400
            error = json.loads(await response.read())
        message = error["error"]["message"]
        assert "bad \ud800 input" in message and (error.get("type") == "error") is (
            door == "messages"
        )
        stream = {**asked, "model": "surrogate-mid-stream", "stream": True}
        async with http.post(url, json=stream) as response:
            events = (await response.read()).split(b"\n\n")
    last = json.loads([e for e in events if e][-1].split(b"data: ", 1)[1])
    said = last["error"]["message"] if door == "messages" else last["message"]
    assert said == "bad \ud800 input"
    await proxy.settle()
    records = [r["status"] for r in proxy.log_records() if r.get("event") == "chat"]
    assert records == [400, 200]
