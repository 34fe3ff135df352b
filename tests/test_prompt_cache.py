"""Prompt-cache stability: over a conversation with memory at every turn, what reaches the
upstream before the injected block is, byte for byte, what the previous turn's request
held before its block (the history as the client sent it, in order, untouched: no
earlier block left in it, no key reordered, no whitespace changed, the system prompt as
sent), through every door, native and bridged. A provider's prefix cache then covers
the whole conversation but the latest exchange and the block.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from proxy.doors.chat_wire import message_offset
from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy, proxy_config
from .doors import FACT, FORCE, remembering

pytestmark = pytest.mark.e2e

MARK = "<retrieved_memory>"
SYSTEM = "Be terse. Zwięźle, s'il vous plaît."
TURNS = [
    "Do you remember where Rui lives?",
    "And who does Rui live with?",
    "Remember anything else about Rui's sister Ana?",
    "What city was it again, the one Rui lives in?",
]
REPLIES = ["Lisbon, I believe.", "With his sister Ana.", "Only that she lives in Lisbon too."]


def _history(upto: int) -> list[dict[str, str]]:
    """The client's turns before user turn ``upto`` and that turn (a name and
    non-ASCII text in them, as clients send)."""
    messages: list[dict[str, str]] = []
    for i in range(upto + 1):
        messages.append({"role": "user", "content": TURNS[i]})
        if i < upto:
            messages.append({"role": "assistant", "content": REPLIES[i] + " ✓"})
    return messages


def _chat_body(upto: int) -> bytes:
    """A chat request written the way no serializer would rewrite it back: spaces, an
    escaped character, the messages key after the model."""
    messages = [{"role": "system", "content": SYSTEM}, *_history(upto)]
    text = json.dumps(messages, ensure_ascii=True, indent=1)
    return ('{ "model" : "echo",\n "messages" : ' + text + ', "temperature": 1E0 }').encode()


def _responses_body(upto: int) -> bytes:
    return json.dumps({"model": "echo", "instructions": SYSTEM, "input": _history(upto)}).encode()


def _messages_body(upto: int) -> bytes:
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    return json.dumps(
        {"model": "echo", "max_tokens": 64, "system": system, "messages": _history(upto)}
    ).encode()


DOORS = {
    "chat": ("/v1/chat/completions", _chat_body),
    "responses": ("/v1/responses", _responses_body),
    "messages": ("/v1/messages", _messages_body),
}


async def _converse(proxy: Proxy, upstream: FakeUpstream, door: str) -> list[tuple[bytes, Any]]:
    """Every turn through ``door`` with memory forced; what the upstream got each time."""
    path, body = DOORS[door]
    headers = {**FORCE, "Content-Type": "application/json", "X-Conversation-Id": f"c-{door}"}
    sent = []
    async with aiohttp.ClientSession() as http:
        for upto in range(len(TURNS)):
            async with http.post(proxy.url + path, data=body(upto), headers=headers) as r:
                assert r.status == 200, await r.text()
            sent.append((upstream.requests[-1].raw, upstream.requests[-1].body))
    return sent


def _items(body: dict[str, Any]) -> tuple[str, list[Any]]:
    """The key of the request's list of turns and the list."""
    key = "input" if "input" in body else "messages"
    return key, list(body[key])


def _before_memory(body: dict[str, Any]) -> int:
    """How many turns come before the injected block (before the turn holding it, when
    the block is a part of the last user turn, as in the Messages API)."""
    _, items = _items(body)
    for index, item in enumerate(items):
        if MARK in json.dumps(item, ensure_ascii=False):
            return index
    raise AssertionError(f"no memory block in {body}")


def _same_prefix(previous: tuple[bytes, Any], current: tuple[bytes, Any]) -> None:
    (raw_before, before), (raw_now, now) = previous, current
    kept = _before_memory(before)
    key, items = _items(now)
    assert [json.dumps(i) for i in items[:kept]] == [json.dumps(i) for i in _items(before)[1][
        :kept]]  # fmt: skip
    assert MARK not in json.dumps(items[:_before_memory(now)], ensure_ascii=False)
    assert {k: v for k, v in now.items() if k != key} == {
        k: v for k, v in before.items() if k != key
    }
    assert list(now) == list(before)  # the keys in the same order
    if key == "messages":  # the bytes themselves, up to the block's turn
        cut_before, cut_now = message_offset(raw_before, kept), message_offset(raw_now, kept)
        assert cut_before is not None and cut_now is not None
        assert raw_now[:cut_now] == raw_before[:cut_before]


@pytest.mark.parametrize(
    ("door", "serves"),
    [
        ("chat", None),
        ("responses", "responses"),
        ("responses", None),
        ("messages", "messages"),
        ("messages", None),
    ],
    ids=["chat", "responses-native", "responses-bridged", "messages-native", "messages-bridged"],
)
async def test_each_turn_keeps_the_previous_turns_prefix_up_to_its_memory_block(
    upstream: FakeUpstream, make_proxy: MakeProxy, door: str, serves: str | None
) -> None:
    proxy = await remembering(make_proxy, upstream, serves=serves)
    sent = await _converse(proxy, upstream, door)
    for previous, current in itertools.pairwise(sent):
        _same_prefix(previous, current)
    turns = [_before_memory(body) for _, body in sent]
    assert turns == sorted(turns) and turns[-1] > turns[0]  # the block moves forward


async def test_chat_to_an_anthropic_upstream_through_litellm_keeps_the_system_prompt(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """litellm lifts a leading system message into Anthropic's ``system``; the memory
    message (a system one, mid-conversation) must not join it there, where it would
    change the start of every prompt: it stays in the last user turn."""
    config = proxy_config(
        upstream.url.removesuffix("/v1"),
        memory={"retrieval_timeout_ms": 60_000, "formation_workers": 0},
    )
    config["upstreams"][0]["provider"] = "anthropic"
    proxy = await make_proxy(config)
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.url}/memory/ingest", json=FACT) as response:
            assert response.status == 200
    sent = await _converse(proxy, upstream, "chat")
    assert all(body["system"] == [{"type": "text", "text": SYSTEM}] for _, body in sent)
    for previous, current in itertools.pairwise(sent):
        _same_prefix(previous, current)


async def test_chat_history_reaches_the_upstream_as_the_client_wrote_it(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """Not re-serialized: the client's bytes up to the latest user message, then the
    block, then the client's bytes again."""
    proxy = await remembering(make_proxy, upstream)
    sent = await _converse(proxy, upstream, "chat")
    for upto, (raw, body) in enumerate(sent):
        client = _chat_body(upto)
        at = _before_memory(body)
        cut = message_offset(client, at)
        assert cut is not None and raw.startswith(client[:cut])
        assert raw.endswith(client[cut:])


async def test_the_fake_upstream_records_each_body_byte_for_byte(tmp_path: Path) -> None:
    record = tmp_path / "upstream.jsonl"
    server = await FakeUpstream(record=record).start()
    bodies = [b'{"model": "echo", "messages": [{"role": "user", "content": "caf\\u00e9"}]}',
              '{"model":"echo","input":"olá"}'.encode()]  # fmt: skip
    try:
        async with aiohttp.ClientSession() as http:
            for path, body in zip(("/chat/completions", "/responses"), bodies, strict=True):
                async with http.post(server.url + path, data=body) as response:
                    assert response.status == 200
    finally:
        await server.stop()
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["path"] for line in lines] == ["/v1/chat/completions", "/v1/responses"]
    assert [line["raw"].encode("utf-8", "surrogateescape") for line in lines] == bodies
