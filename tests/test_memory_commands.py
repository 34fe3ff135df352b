"""In-chat ``/memory`` commands through every front door, with the real SDKs.

Each command is answered by the proxy in the door's own format (stream or not) and never
reaches the upstream; a history that holds earlier commands is forwarded, read and stored
without them; a forgotten fragment is never retrieved (search, chat, area, as of a
snapshot, after a rollback) until the forget is undone; memory switched off in one
conversation is neither consulted nor written there, and what was said meanwhile stays
unknown after it is switched on again.
"""

from __future__ import annotations

import re
from typing import Any, cast

import aiohttp
import anthropic
import apsw
import pytest
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputParam

from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy
from .doors import FACT, FORCE, QUESTION, remembering, search, stats

pytestmark = pytest.mark.e2e

DOORS = ("chat", "responses", "messages")
Turn = dict[str, Any]


async def say(proxy: Proxy, door: str, history: list[Turn], *, stream: bool = False,
              headers: dict[str, str] | None = None) -> str:  # fmt: skip
    """The answer's text to ``history`` (chat messages: user and assistant text turns),
    sent through ``door`` with its SDK."""
    extra = headers or {}
    # ``history`` holds plain user and assistant text turns, which each door's message
    # TypedDicts describe as they are.
    if door == "chat":
        async with proxy.client() as client:
            if not stream:
                done = await client.chat.completions.create(
                    model="echo",
                    messages=cast("list[ChatCompletionMessageParam]", history),
                    extra_headers=extra,
                )
                return str(done.choices[0].message.content)
            chunks = await client.chat.completions.create(
                model="echo",
                messages=cast("list[ChatCompletionMessageParam]", history),
                stream=True,
                extra_headers=extra,
            )
            return "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
    if door == "responses":
        async with proxy.client() as client:
            if not stream:
                answer = await client.responses.create(
                    model="echo",
                    input=cast("ResponseInputParam", history),
                    extra_headers=extra,
                )
                return str(answer.output_text)
            events = await client.responses.create(
                model="echo",
                input=cast("ResponseInputParam", history),
                stream=True,
                extra_headers=extra,
            )
            deltas = [e.delta async for e in events if e.type == "response.output_text.delta"]
            return "".join(deltas)
    async with anthropic.AsyncAnthropic(base_url=proxy.url, api_key="sk-x", max_retries=0) as sdk:
        if not stream:
            message = await sdk.messages.create(
                model="echo",
                max_tokens=64,
                messages=cast("list[MessageParam]", history),
                extra_headers=extra,
            )
            return "".join(b.text for b in message.content if b.type == "text")
        found = await sdk.messages.create(
            model="echo",
            max_tokens=64,
            messages=cast("list[MessageParam]", history),
            stream=True,
            extra_headers=extra,
        )
        texts = [e.delta.text async for e in found
                 if e.type == "content_block_delta" and e.delta.type == "text_delta"]  # fmt: skip
        return "".join(texts)


def user(text: str) -> Turn:
    return {"role": "user", "content": text}


def assistant(text: str) -> Turn:
    return {"role": "assistant", "content": text}


def _fragment_id(answer: str, text: str) -> int:
    """The id ``/memory search`` shows for the fragment holding ``text``."""
    for line in answer.splitlines():
        if text in line:
            found = re.search(r"#(\d+)", line)
            assert found is not None, line
            return int(found.group(1))
    raise AssertionError(f"{text!r} not in {answer!r}")


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("stream", [False, True])
async def test_every_command_through_every_door(
    upstream: FakeUpstream, make_proxy: MakeProxy, door: str, stream: bool
) -> None:
    proxy = await remembering(make_proxy, upstream, serves=None if door == "chat" else door)
    opening = [user("Hello there."), assistant("Hi!")]

    async def ask(command: str) -> str:
        before = len(upstream.requests)
        answer = await say(proxy, door, [*opening, user(command)], stream=stream)
        assert len(upstream.requests) == before  # answered by the proxy, never forwarded
        return answer

    helped = await ask("/memory help")
    for verb in ("why", "search", "forget", "unforget", "off", "on"):
        assert f"/memory {verb}" in helped
    assert "Unknown command `/memory frobnicate`" in await ask("/memory frobnicate")
    assert "has consulted memory yet" in await ask("/memory why")

    found = await ask("/memory search Lisbon sister")
    lisbon = _fragment_id(found, "I live in Lisbon")
    asked = await say(proxy, door, [*opening, user(QUESTION)], stream=stream, headers=FORCE)
    assert asked == f"echo: {QUESTION}"
    why = await ask("/memory why")
    assert "header X-Memory: force" in why and f"#{lisbon}" in why
    assert "<retrieved_memory>" in why and "Lisbon" in why

    forgot = await ask(f"/memory forget #{lisbon}")
    offered = re.search(r"/memory unforget (\d+)", forgot)
    assert offered is not None, forgot
    forget_id = int(offered.group(1))
    assert "Forgot 1 fragment" in forgot
    assert "I live in Lisbon" not in await ask("/memory search Lisbon sister")
    undone = await ask(f"/memory unforget {forget_id}")
    assert f"Undid forget {forget_id}" in undone
    assert f"#{lisbon}" in await ask("/memory search Lisbon sister")
    assert "No forget in force" in await ask("/memory unforget")

    assert "now off" in await ask("/memory off")
    assert "already off" in await ask("/memory off")
    assert "now on" in await ask("/memory on")
    await proxy.settle()
    commands = [r for r in proxy.log_records() if r.get("event") == "chat" and r["command"]]
    assert {r["api"] for r in commands} == {door} and len(commands) == 13
    assert all(r["status"] == 200 and r["ingested"] == 0 for r in commands)


async def test_a_forgotten_fragment_is_never_retrieved_until_the_forget_is_undone(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await remembering(make_proxy, upstream)
    async with aiohttp.ClientSession() as http:
        first = await _json(http, "POST", f"{proxy.url}/memory/dream")
        answer = await _confirmed(proxy, "/memory forget Lisbon")
        assert "Forgot 2 fragments (2 messages)" in answer and "Lisbon is lovely" in answer
        assert "Undid forget" in await say(proxy, "chat", [user("/memory unforget")])
        answer = await _confirmed(proxy, "/memory forget lisbon SISTER")
        assert "Forgot 1 fragment (1 message)" in answer
        assert not await _lisbon_hits(proxy)
        area = await _json(http, "GET", f"{proxy.url}/memory/area", params={"q": QUESTION})
        assert "I live in Lisbon" not in str(area)
        as_of = await _json(http, "GET", f"{proxy.url}/memory/search",
                            params={"q": "Lisbon", "as_of": str(first["snapshot"])})  # fmt: skip
        assert "I live in Lisbon" not in str(as_of["hits"])
        await say(proxy, "chat", [user(QUESTION)], headers=FORCE)
        sent = upstream.requests[-1].body["messages"]
        assert "I live in Lisbon" not in str(sent)

        # consolidation and rollback neither undo nor repeat a forget
        second = await _json(http, "POST", f"{proxy.url}/memory/dream")
        assert second["snapshot"] > first["snapshot"]
        back = await _json(http, "POST", f"{proxy.url}/memory/rollback",
                           json={"snapshot": first["snapshot"]})  # fmt: skip
        assert back["snapshot"] == first["snapshot"] or back
        assert not await _lisbon_hits(proxy)
        listed = await _json(http, "GET", f"{proxy.url}/memory/forgets")
        assert [(f["request"], f["messages"], f["undone_at"]) for f in listed["forgets"]] == [
            ("lisbon SISTER", 1, None),
            ("Lisbon", 2, listed["forgets"][1]["undone_at"]),
        ]
        assert listed["forgets"][1]["undone_at"] is not None

        assert "Undid forget" in await say(proxy, "chat", [user("/memory unforget")])
        assert await _lisbon_hits(proxy)
        await say(proxy, "chat", [user(QUESTION)], headers=FORCE)
        assert "I live in Lisbon" in str(upstream.requests[-1].body["messages"])
        as_of = await _json(http, "GET", f"{proxy.url}/memory/search",
                            params={"q": "Lisbon", "as_of": str(first["snapshot"])})  # fmt: skip
        assert "I live in Lisbon" in str(as_of["hits"])
        listed = await _json(http, "GET", f"{proxy.url}/memory/forgets")
        assert listed["forgets"][0]["undone_at"] is not None


async def _confirmed(proxy: Proxy, command: str) -> str:
    """``command`` (a forget by words), then its confirmation in the same conversation,
    as a chat client sends it: the answer to the confirmation. The listing forgets
    nothing."""
    listing = await say(proxy, "chat", [user(command)])
    assert "Nothing is forgotten until you confirm" in listing, listing
    assert "I live in Lisbon" in str(await search(proxy, "Lisbon sister"))
    history = [user(command), assistant(listing), user("/memory forget confirm")]
    return await say(proxy, "chat", history)


async def test_a_forget_listed_before_a_rollback_confirms_nothing_after_it(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """The listing names fragment ids; the rollback removes those fragments and frees
    their ids, and the next message formed takes them. A confirm must not forget that
    message, which the user was never shown."""
    proxy = await remembering(make_proxy, upstream)
    here = {"X-Conversation-Id": "forgetting"}
    cat, bike = (
        {"conversation_id": f"week-{n}",
         "messages": [{"role": "user", "content": text, "timestamp": f"2024-03-0{n}T10:00:00"}]}
        for n, text in ((2, "I adopted a cat named Tom."), (3, "I bought a red bike."))
    )  # fmt: skip
    async with aiohttp.ClientSession() as http:
        first = await _json(http, "POST", f"{proxy.url}/memory/dream")
        await _json(http, "POST", f"{proxy.url}/memory/ingest", json=cat)
        listing = await say(proxy, "chat", [user("/memory forget cat Tom")], headers=here)
        tom = _fragment_id(listing, "I adopted a cat named Tom.")
        await _json(http, "POST", f"{proxy.url}/memory/rollback",
                    json={"snapshot": first["snapshot"]})  # fmt: skip
        await _json(http, "POST", f"{proxy.url}/memory/ingest", json=bike)
        hits = await search(proxy, "red bike")
        assert [h["fragment_id"] for h in hits if "red bike" in h["text"]] == [tom]
        answer = await say(proxy, "chat", [user("/memory forget confirm")], headers=here)
        assert "Forgot" not in answer and "No forget waits" in answer
        assert "I bought a red bike." in str(await search(proxy, "red bike"))
        assert (await _json(http, "GET", f"{proxy.url}/memory/forgets"))["forgets"] == []


async def _lisbon_hits(proxy: Proxy) -> list[dict[str, Any]]:
    return [h for h in await search(proxy, "Lisbon sister") if "I live in Lisbon" in h["text"]]


async def _json(http: aiohttp.ClientSession, method: str, url: str, **kwargs: Any) -> Any:
    async with http.request(method, url, **kwargs) as response:
        assert response.status == 200, await response.text()
        return await response.json()


@pytest.mark.parametrize("door", DOORS)
async def test_earlier_commands_are_never_forwarded_read_or_stored(
    upstream: FakeUpstream, make_proxy: MakeProxy, door: str
) -> None:
    proxy = await remembering(make_proxy, upstream, serves=None if door == "chat" else door)
    before = (await stats(proxy))["log_messages"]
    history = [
        user("/memory search Lisbon"),
        assistant("**Memory for 'Lisbon'** ... #1 Rui: I live in Lisbon"),
        user("I just adopted a cat named Miso."),
        assistant("Congratulations!"),
        user("/memory why"),
        assistant("No turn of this conversation has consulted memory yet."),
        user("What is my cat called?"),
    ]
    assert await say(proxy, door, history) == "echo: What is my cat called?"
    sent = upstream.requests[-1].body
    turns = sent.get("messages") or sent.get("input")
    assert "/memory" not in str(turns) and "consulted memory" not in str(turns)
    assert "Miso" in str(turns)
    await proxy.settle()
    assert (await stats(proxy))["log_messages"] == before + 4  # 2 kept turns, question, answer
    assert not [h for h in await search(proxy, "consulted memory turn") if "/memory" in h["text"]]
    assert [h for h in await search(proxy, "cat Miso") if "Miso" in h["text"]]


async def test_memory_off_in_one_conversation(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await remembering(make_proxy, upstream)
    off = {**FORCE, "X-Conversation-Id": "private"}
    opened = [user("Hi."), assistant("Hello."), user("/memory off")]
    assert "now off" in await say(proxy, "chat", opened, headers=off)
    before = (await stats(proxy))["log_messages"]
    secret = [*opened, assistant("Memory is now off"), user("My PIN is 4321. " + QUESTION)]
    await say(proxy, "chat", secret, headers=off)
    assert "<retrieved_memory>" not in str(upstream.requests[-1].body)  # force is overridden
    await say(proxy, "chat", [user(QUESTION)], headers=FORCE)  # another conversation
    assert "<retrieved_memory>" in str(upstream.requests[-1].body)
    await proxy.settle()
    stored = (await stats(proxy))["log_messages"]
    assert stored == before + 2  # only the other conversation's question and answer

    resumed = [*secret, assistant("ok"), user("/memory on")]
    assert "now on" in await say(proxy, "chat", resumed, headers=off)
    later = [*resumed, assistant("Memory is now on"), user("I like jazz. " + QUESTION)]
    await say(proxy, "chat", later, headers=off)
    assert "<retrieved_memory>" in str(upstream.requests[-1].body)
    forwarded = str(upstream.requests[-1].body["messages"])
    assert "My PIN is 4321" in forwarded and "/memory" not in forwarded  # the model has it
    await proxy.settle()
    assert (await stats(proxy))["log_messages"] == stored + 4  # Hi, Hello, jazz, answer
    assert not [h for h in await search(proxy, "PIN 4321") if "4321" in h["text"]]
    assert [h for h in await search(proxy, "jazz") if "jazz" in h["text"]]


async def test_bad_command_arguments_get_clear_answers(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await remembering(make_proxy, upstream)
    async with aiohttp.ClientSession() as http:
        many = {"conversation_id": "many", "messages": [
            user(f"Note {i}: the blue kettle is on shelf {i}.") for i in range(105)]}  # fmt: skip
        await _json(http, "POST", f"{proxy.url}/memory/ingest", json=many)
    for command, expected in [
        ("/memory forget", "Say what to forget"),
        ("/memory forget the of and", "no word to look for"),
        ("/memory forget blue kettle", "more than 100 fragments"),
        ("/memory forget #999999", "Not found (or forgotten already): #999999"),
        ("/memory forget " + " ".join(f"#{i}" for i in range(1, 20_000)), "at most 100"),
        ("/memory forget zebra unicorn", "Nothing to forget"),
        ("/memory unforget abc", "takes a forget's number"),
        ("/memory unforget 77", "No forget 77 in force"),
        ("/memory search", "Say what to look for"),
        ("/memory search zebra unicorn", "Nothing in memory matches"),
        ("  /MEMORY   HELP  ", "Memory commands"),
    ]:
        assert expected in await say(proxy, "chat", [user(command)]), command
    assert FACT["messages"][0]["content"] in str(await search(proxy, "Lisbon sister"))
    assert await say(proxy, "chat", [user("/memoryless talk")]) == "echo: /memoryless talk"


async def test_forget_by_words_lists_first_and_confirms_only_what_it_listed(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """The listing forgets nothing; a confirm names ids of the listing or nothing, in the
    conversation that listed them; anything else is refused with nothing forgotten."""
    proxy = await remembering(make_proxy, upstream)
    here = {"X-Conversation-Id": "forgetting"}

    async def ask(command: str, headers: dict[str, str] = here) -> str:
        return await say(proxy, "chat", [user(command)], headers=headers)

    listing = await ask("/memory forget Lisbon")
    assert "Would forget 2 fragments" in listing and "I live in Lisbon" in listing
    lisbon = _fragment_id(listing, "I live in Lisbon")
    lovely = _fragment_id(listing, "Lisbon is lovely")
    assert len(await _lisbon_hits(proxy)) == 1  # nothing forgotten by the listing
    for command, expected in [
        ("/memory forget confirm #999999", "Not in the list for 'Lisbon': #999999"),
        (f"/memory forget confirm #{lisbon} #424242", "Not in the list for 'Lisbon': #424242"),
        # five thousand ids, none listed: the answer names ten
        (
            f"/memory forget confirm {' '.join(f'#{i}' for i in range(10**6, 10**6 + 5000))}",
            "and 4990 more",
        ),
        ("/memory forget confirm please", "takes ids from the list"),
        ("/memory forget confirm #12345678901234567890", "takes ids from the list"),
    ]:
        answer = await ask(command)
        assert expected in answer, (command, answer)
        assert len(answer) < 2_000 and "Forgot" not in answer
    assert len(await _lisbon_hits(proxy)) == 1
    other = {"X-Conversation-Id": "elsewhere"}
    assert "No forget waits" in await ask(f"/memory forget confirm #{lisbon}", other)

    done = await ask(f"/memory forget confirm #{lisbon}, #{lisbon}")  # named twice: once
    assert "Forgot 1 fragment (1 message)" in done and "Lisbon is lovely" not in done
    assert not await _lisbon_hits(proxy)
    assert "Lisbon is lovely" in str(await search(proxy, "Lisbon lovely"))
    assert "No forget waits" in await ask(f"/memory forget confirm #{lovely}")
    assert "No forget waits" in await ask("/memory forget cancel")


async def test_hostile_forget_arguments_get_clear_answers(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await remembering(make_proxy, upstream)
    here = {"X-Conversation-Id": "hostile"}

    async def ask(command: str) -> str:
        return await say(proxy, "chat", [user(command)], headers=here)

    huge = "/memory forget " + "Lisbon sister " * 60_000  # 840 KB of words
    answer = await ask(huge)
    assert "Would forget 1 fragment" in answer and len(answer) < 2_000
    done = await ask("/memory forget confirm")
    assert "Forgot 1 fragment" in done and len(done) < 2_000
    async with aiohttp.ClientSession() as http:
        listed = await _json(http, "GET", f"{proxy.url}/memory/forgets")
    assert len(listed["forgets"][0]["request"]) <= 502  # a pasted page is not kept whole
    assert "Undid forget" in await ask("/memory unforget")

    for command in [
        "/memory forget Lisbon 🇵🇹 ✨",  # symbols are no words: "Lisbon" is looked for
        "/memory forget LISBON\u200b",
        "/memory forget \u202eLisbon\u202c",
        "/memory forget Lisbon, Lisbon, Lisbon",
    ]:
        assert "Would forget 2 fragments" in await ask(command), command
    for command in [
        "/memory forget Li\u200bsbon",  # a zero-width space splits the word
        "/memory forget Lisbonne",
        "/memory forget 北京 Лиссабон",
        "/memory forget \x00\x01 zebra",
        "/memory forget #12345678901234567890",  # too long for an id: words
    ]:
        answer = await ask(command)
        assert "Nothing to forget for" in answer and len(answer) < 2_000, command
    assert "No forget waits" in await ask("/memory forget confirm")  # none held by those
    assert "Not found (or forgotten already): #0, #999999" in await ask("/memory forget #0 #999999")
    assert len(await _lisbon_hits(proxy)) == 1  # none of it forgot anything


async def test_a_receipt_stored_oddly_never_fails_a_chat_or_the_receipt_endpoint(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """Whatever is stored, however odd, never turns a chat into a 500: a receipt whose
    body is not JSON, or is JSON of other shapes ("area": 5), made ``/memory why`` a 500
    (JSONDecodeError, AttributeError), and ``GET /memory/receipts/{id}`` an anonymous
    500 ``internal_error``. Now the command says what it can, and the endpoint answers a
    500 ``memory_error`` naming the receipt."""
    proxy = await remembering(make_proxy, upstream)
    opening = [user("Hello there."), assistant("Hi!")]
    await say(proxy, "chat", [*opening, user(QUESTION)], headers=FORCE)
    await proxy.settle()
    db = apsw.Connection(str(proxy.data_dir / "tenants" / "default.db"))
    db.execute("PRAGMA busy_timeout = 5000")
    [(own,)] = db.execute("SELECT id FROM receipts")
    db.execute("UPDATE receipts SET body = 'not json' WHERE id = ?", (own,))
    odd = '{"conversation_id": "odd", "area": 5, "decision": "x", "tokens": "many"}'
    db.execute("INSERT INTO receipts (id, created_at, body) VALUES ('rcpt_odd', 1.8e9, ?)", (odd,))
    db.close()
    why = await say(proxy, "chat", [*opening, user("/memory why")])
    assert "cannot be read" in why, why
    headers = {"X-Conversation-Id": "odd"}
    odd_why = await say(proxy, "chat", [user("/memory why")], headers=headers)
    assert "Last memory lookup" in odd_why and "Found 0 fragments" in odd_why, odd_why
    async with aiohttp.ClientSession() as http:
        for receipt in (own, "rcpt_odd"):
            async with http.get(f"{proxy.url}/memory/receipts/{receipt}") as response:
                error = (await response.json())["error"]
            assert (response.status, error["code"]) == (500, "memory_error"), error
            assert receipt in error["message"]
