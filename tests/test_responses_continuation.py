"""Native Responses turns chained by ``previous_response_id`` (issue 29, seventh stop),
with the real ``openai`` SDK (``client.responses.create``) against a real proxy whose
upstream serves the Responses API (the fake upstream, at the network edge).

Such a request holds only its new input; each turn used to be stored as a conversation
of its own. Now the turns land in the conversation of the response they continue, after
the messages stored with it, in order and once each, across a restart; another tenant's
id, an unknown one and garbage continue nothing. Below: the response ids read from an
upstream's answer (whole or streamed; none from an answer without one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import apsw
import openai
import pytest

from memory_core import conversation_id
from proxy.doors.responses_wire import response_id_of, response_id_of_events
from proxy.fake_upstream import FakeUpstream
from proxy.http import sse

from .conftest import MakeProxy, Proxy, proxy_config

pytestmark = pytest.mark.e2e

INSTRUCTIONS = "Be terse."
TURNS = ("My cat is called Tom.", "What colour is Tom?", "And how old is he?")
KEYS = {"sk-alice": "alice", "sk-bob": "bob"}
BOB = "Bob here. What is my cat called?"


def _config(upstream: FakeUpstream) -> dict[str, Any]:
    config = proxy_config(upstream.url, auth={"mode": "keys", "keys": KEYS})
    config["upstreams"][0]["serves"] = ["responses"]
    return config


def _rows(proxy: Proxy, tenant: str) -> list[tuple[Any, ...]]:
    """``(conversation, position, role, text, hash, parent)`` of each logged message."""
    path = proxy.data_dir / "tenants" / f"{tenant}.db"
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return list(
            conn.execute(
                "SELECT conversation_id, position, role, text, hash, parent_hash FROM log"
                " ORDER BY id"
            )
        )
    finally:
        conn.close()


def _chained(rows: list[tuple[Any, ...]]) -> bool:
    """Whether ``rows`` (one conversation's, in order) form one chain from its start."""
    return all(
        row[1] == i and row[5] == (rows[i - 1][4] if i else None) for i, row in enumerate(rows)
    )


async def _turn(
    proxy: Proxy, text: str, previous: str | None, *, stream: bool, key: str = "sk-alice",
    headers: dict[str, str] | None = None,
) -> str:  # fmt: skip
    """One turn (``text`` only, with the instructions, continuing ``previous``); the
    answer's response id."""
    after = previous if previous is not None else openai.omit  # omitted: not sent at all
    async with proxy.client(key) as client:
        if not stream:
            answer = await client.responses.create(
                model="echo", instructions=INSTRUCTIONS, input=text,
                previous_response_id=after, extra_headers=headers,
            )  # fmt: skip
            assert answer.output_text == f"echo: {text}"
            return str(answer.id)
        events = await client.responses.create(
            model="echo", instructions=INSTRUCTIONS, input=text, stream=True,
            previous_response_id=after, extra_headers=headers,
        )  # fmt: skip
        ids = {event.response.id async for event in events
               if event.type in ("response.created", "response.completed")}  # fmt: skip
        assert len(ids) == 1
        return ids.pop()


def _expected(turns: tuple[str, ...]) -> list[tuple[str, str]]:
    said = [("system", INSTRUCTIONS)]
    for text in turns:
        said += [("user", text), ("assistant", f"echo: {text}")]
    return said


@pytest.mark.parametrize("stream", [False, True])
async def test_turns_chained_by_previous_response_id_continue_one_conversation_in_order(
    upstream: FakeUpstream, make_proxy: MakeProxy, stream: bool
) -> None:
    proxy = await make_proxy(_config(upstream))
    previous = None
    for text in TURNS:
        previous = await _turn(proxy, text, previous, stream=stream)
        await proxy.settle()
    sent = upstream.requests[-1].body  # forwarded as sent: the new input, the id named
    assert sent["previous_response_id"] == f"resp_fake_{len(TURNS) - 1}"
    items = sent["input"] if isinstance(sent["input"], list) else [sent["input"]]
    assert [i if isinstance(i, str) else i["content"] for i in items
            if isinstance(i, str) or i.get("role") == "user"] == [TURNS[-1]]  # fmt: skip
    rows = _rows(proxy, "alice")
    first = conversation_id([{"role": "system", "content": INSTRUCTIONS},
                             {"role": "user", "content": TURNS[0]}])  # fmt: skip
    assert {row[0] for row in rows} == {first}
    assert [(row[2], row[3]) for row in rows] == _expected(TURNS)
    assert _chained(rows)
    chats = [r for r in proxy.log_records() if r.get("event") == "chat"]
    assert [r["conversation"] for r in chats] == [first] * len(TURNS)


async def test_the_chain_survives_a_restart(upstream: FakeUpstream, make_proxy: MakeProxy) -> None:
    config = _config(upstream)
    proxy = await make_proxy(config)
    first = await _turn(proxy, TURNS[0], None, stream=False)
    await proxy.settle()
    await proxy.server.close()
    again = await make_proxy(config)  # the same folder: the same tenant files
    second = await _turn(again, TURNS[1], first, stream=True)
    await again.settle()
    await _turn(again, TURNS[2], second, stream=False)
    await again.settle()
    rows = _rows(again, "alice")
    assert len({row[0] for row in rows}) == 1
    assert [(row[2], row[3]) for row in rows] == _expected(TURNS)
    assert _chained(rows)


async def test_another_tenants_response_id_continues_nothing_of_theirs(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await make_proxy(_config(upstream))
    alices = await _turn(proxy, TURNS[0], None, stream=False)
    await proxy.settle()
    await _turn(proxy, BOB, alices, stream=False, key="sk-bob")
    await _turn(proxy, TURNS[1], alices, stream=True)  # Alice's own continuation still works
    await proxy.settle()
    assert upstream.requests[-2].body["previous_response_id"] == alices  # the upstream decides
    bobs = _rows(proxy, "bob")
    own = conversation_id([{"role": "system", "content": INSTRUCTIONS},
                           {"role": "user", "content": BOB}])  # fmt: skip
    assert [(row[0], row[1], row[2]) for row in bobs] == [
        (own, 0, "system"), (own, 1, "user"), (own, 2, "assistant")
    ]  # fmt: skip
    alice = _rows(proxy, "alice")
    assert [(row[2], row[3]) for row in alice] == _expected(TURNS[:2])
    assert len({row[0] for row in alice}) == 1 and _chained(alice)


async def test_an_explicit_conversation_header_still_wins(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """A header naming the response's own conversation continues it; one naming another
    conversation puts the turn there (as a conversation's opening, as before)."""
    proxy = await make_proxy(_config(upstream))
    first = await _turn(proxy, TURNS[0], None, stream=False, headers={"X-Conversation-Id": "a"})
    await proxy.settle()
    await _turn(proxy, TURNS[1], first, stream=False, headers={"X-Conversation-Id": "b"})
    await _turn(proxy, TURNS[2], first, stream=True, headers={"X-Conversation-Id": "a"})
    await proxy.settle()
    rows = _rows(proxy, "alice")
    in_a = [row for row in rows if row[0] == "a"]
    assert [(row[2], row[3]) for row in in_a] == _expected((TURNS[0], TURNS[2]))
    assert _chained(in_a)
    assert [(row[1], row[2], row[3]) for row in rows if row[0] == "b"] == [
        (0, "system", INSTRUCTIONS), (1, "user", TURNS[1]), (2, "assistant", f"echo: {TURNS[1]}")
    ]  # fmt: skip


async def test_garbage_previous_response_ids(upstream: FakeUpstream, make_proxy: MakeProxy) -> None:
    """A non-string or over-long id: a clear 400 naming it, nothing forwarded or stored;
    an unknown one: forwarded unchanged (the upstream decides), the turn a conversation
    of its own; an empty one names none."""
    proxy = await make_proxy(_config(upstream))
    async with proxy.client("sk-alice") as client:
        for bad in (123, {"id": "resp_1"}, ["resp_1"], True, "r" * 257):
            with pytest.raises(openai.BadRequestError) as caught:
                await client.responses.create(
                    model="echo", input="hi", extra_body={"previous_response_id": bad}
                )
            assert caught.value.param == "previous_response_id"
            assert caught.value.code == "invalid_request"
    assert upstream.requests == []
    for unknown in ("resp_never_seen", "", "x" * 256):
        await _turn(proxy, f"Hello {len(unknown)}", unknown, stream=False)
        assert upstream.requests[-1].body["previous_response_id"] == unknown
    await proxy.settle()
    rows = _rows(proxy, "alice")
    assert len({row[0] for row in rows}) == 3
    assert [row[1] for row in rows] == [0, 1, 2] * 3


def _events(*events: Mapping[str, object]) -> list[bytes]:
    return [sse.event(json.dumps(e).encode(), str(e["type"])) for e in events]


def test_a_response_id_is_read_from_a_whole_answer_or_its_stream_else_none() -> None:
    whole = {"id": "resp_1", "object": "response", "status": "completed", "output": []}
    assert response_id_of(json.dumps(whole).encode()) == "resp_1"
    for odd in ({**whole, "id": None}, {**whole, "id": 7}, {**whole, "id": ""},
                {**whole, "id": "r" * 300}, {**whole, "status": "failed"},
                {"id": "resp_1", "object": "chat.completion"}):  # fmt: skip
        assert response_id_of(json.dumps(odd).encode()) is None
    assert response_id_of(b"not json") is None
    created = {"type": "response.created", "response": {"id": "resp_2", "output": []}}
    done = {"type": "response.completed", "response": {"id": "resp_2", "output": []}}
    assert response_id_of_events(_events(created, done)) == "resp_2"
    assert response_id_of_events(_events(done)) == "resp_2"
    assert response_id_of_events(_events({"type": "response.output_text.delta"})) is None
    failed = {"type": "response.failed", "response": {"id": "resp_2"}}
    assert response_id_of_events(_events(created, failed)) is None
    assert response_id_of_events(_events(created, {"type": "error", "message": "x"})) is None


async def test_the_policy_counts_the_turns_a_continued_request_follows(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """A continued request holds one user turn; the policy reads it as the conversation's
    third, not as a first turn each time (``first_turn`` fired on every turn and
    ``every_n_turns`` never did)."""
    config = _config(upstream)
    config["policy"] = {"rules": [{"type": "first_turn"}, {"type": "every_n_turns", "n": 3}]}
    proxy = await make_proxy(config)
    previous = None
    for text in TURNS:
        previous = await _turn(proxy, text, previous, stream=False)
        await proxy.settle()
    chats = [r for r in proxy.log_records() if r.get("event") == "chat"]
    assert [r["decision"] for r in chats] == [True, False, True]
    assert "first turn of the conversation" in chats[0]["reason"]
    assert "user turn 3 is a multiple of 3" in chats[2]["reason"]


async def test_continuing_an_earlier_response_again_branches_there(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """Two turns naming the same response (a regenerated or edited turn): the second
    branches after that response, and the first one's turns are superseded, as an edited
    chat history's are."""
    proxy = await make_proxy(_config(upstream))
    first = await _turn(proxy, TURNS[0], None, stream=False)
    await proxy.settle()
    await _turn(proxy, TURNS[1], first, stream=False)
    await proxy.settle()
    await _turn(proxy, TURNS[2], first, stream=True)
    await proxy.settle()
    rows = _rows(proxy, "alice")
    assert len({row[0] for row in rows}) == 1
    assert [(row[1], row[2], row[3]) for row in rows[3:]] == [
        (3, "user", TURNS[1]), (4, "assistant", f"echo: {TURNS[1]}"),
        (3, "user", TURNS[2]), (4, "assistant", f"echo: {TURNS[2]}"),
    ]  # fmt: skip
    assert rows[5][5] == rows[2][4]  # the new branch hangs off the first answer
    path = proxy.data_dir / "tenants" / "alice.db"
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        superseded = [r[0] for r in conn.execute(
            "SELECT log.text FROM superseded JOIN log ON log.id = superseded.log_id"
            " ORDER BY log.id")]  # fmt: skip
    finally:
        conn.close()
    assert superseded == [TURNS[1], f"echo: {TURNS[1]}"]
