"""Hostile names and dates through the real proxy (issue 29's features under attack).

Through the real proxy (default policy, the fake upstream's ``recall`` model) with the
real ``openai`` client: a group chat whose ``name`` fields are regular-expression
metacharacters, backslashes, role names, function words, a very long name, combining
marks, zero-width joiners and right-to-left text, whose turns call each other by those
names and say dates at the edges of the calendar. Every request is answered (never a
500), the entities endpoint lists them, and what was said first is still found after.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy
from .live import live

pytestmark = pytest.mark.e2e

NAMES = [
    "K\\1",
    "(.*)",
    "a+b",
    "user",
    "What",
    "Hey",
    "X" * 300,
    "Zoe\u0301",
    "Ka\u200dte",
    "\u05e9\u05e8\u05d4",
    "\u0130lker",
    "Stra\u00dfe",
    "\U0001f642",
    "\\g<0>",
]
LINES = [
    "I restored a violin yesterday, 32 de fevereiro, the 31st of April, in 10000.",
    "Hey {name}! 99999999999 years ago and 1e309 days ago, ayer y anteayer.",
    "Thanks, {name}. Next month I fly to Lisbon, ontem fui ao Porto.",
    "That's lovely, {name}! In \uff12\uff10\uff12\uff13 and \u0662\u0660\u0662\u0663 I was there.",
]


def _group(name: str) -> list[dict[str, Any]]:
    speakers = [name, "Tom"]
    return [
        {"role": "user", "name": speakers[i % 2], "content": line.format(name=name)}
        for i, line in enumerate(LINES)
    ]


async def test_hostile_names_and_dates_are_answered_and_kept(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    user = await live(make_proxy, upstream)
    await user.say("Remember: my cello teacher is called Ines and she lives in Braga.")
    for i, name in enumerate(NAMES):
        await user.chat("Nice chatting, everyone.", history=_group(name), conversation=f"g{i}")
        turn = await user.chat(f"What did {name} restore yesterday? Remember last time?")
        assert turn.answer
    entities = await user.entities()
    speakers = [e["name"] for e in entities if e["is_speaker"]]
    assert len(speakers) == len(set(speakers)) and "(.*)" not in speakers  # no words: unnamed
    assert "Tom" in speakers and "a+b" in speakers
    hits = await user.search("cello teacher Braga")
    assert any("Braga" in h["text"] for h in hits)
    records = user.proxy.log_records()
    assert [r for r in records if r.get("memory_error") or "failed" in str(r.get("event"))] == []
    assert {r.get("status") for r in records if "status" in r} == {200}


@pytest.mark.parametrize(
    "query",
    [
        "name=(.*)",
        "name=K%5C1",
        "name=%ED%A0%80",
        "name=%00",
        "name=" + "x" * 5000,
        "name=Zoe%CC%81",
        "limit=0",
        "limit=-1",
        "limit=1e309",
        "limit=nan",
    ],
)
async def test_entities_by_a_hostile_name_are_answered_or_refused(
    make_proxy: MakeProxy, upstream: FakeUpstream, query: str
) -> None:
    user = await live(make_proxy, upstream)
    await user.chat("Nice chatting, everyone.", history=_group("Zoe\u0301"), conversation="g")
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{user.proxy.url}/memory/entities?{query}") as response:
            body = await response.text()
            assert response.status in (200, 400), body
            if response.status == 200:
                assert isinstance(json.loads(body)["entities"], list)


@pytest.mark.parametrize("path", ["/memory/search", "/memory/area"])
async def test_hostile_questions_to_the_inspection_endpoints_are_answered(
    make_proxy: MakeProxy, upstream: FakeUpstream, path: str
) -> None:
    """Questions naming hostile names and dates, and pasted runs that were quadratic in
    the text functions ("[", "!" before names, spaces between words), answer 200 or 400."""
    user = await live(make_proxy, upstream)
    await user.chat("Nice chatting, everyone.", history=_group("Ka\u200dte"), conversation="g")
    questions = [
        "What did Ka\u200dte restore last May 2023, the last week of May?",
        "[" * 100_000,
        "!" * 1_500 + "x " + "Ana Bob Cid Dan Eve " * 20,
        "where " + " " * 100_000 + "now?",
        "Zoe\u0301 " * 5_000,
        "mañana por la mañana, 99999999999 years ago, 1e309 days ago",
    ]
    async with aiohttp.ClientSession() as http:
        for question in questions:
            async with http.get(f"{user.proxy.url}{path}", params={"q": question}) as response:
                assert response.status in (200, 400), await response.text()


@pytest.mark.parametrize(
    "query",
    ["limit=%D9%A1%D9%A2", "limit=1_0", "limit=%2B5", "limit=%2012%20", "limit=12%0A", "limit="],
)
async def test_a_count_not_written_in_ascii_digits_is_refused(
    make_proxy: MakeProxy, upstream: FakeUpstream, query: str
) -> None:
    """A count is what OpenAPI says it is, an integer written in ASCII digits, as a
    snapshot id already was: Arabic-Indic digits ("١٢"), "1_0", "+5", spaces and a line
    break around it were read by Python's int() as 12, 10, 5, 12; an empty one as bad."""
    user = await live(make_proxy, upstream)
    async with aiohttp.ClientSession() as http:
        for path in ("/memory/entities", "/memory/receipts", "/memory/snapshots"):
            async with http.get(f"{user.proxy.url}{path}?{query}") as response:
                body = await response.json()
                assert response.status == 400, body
                assert body["error"]["param"] == "limit"


async def test_a_page_of_another_site_cannot_use_the_proxy_through_the_browser(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    """In ``auth.mode: open`` (the default) a page of any site the user visits could
    send the proxy simple requests (``fetch(url, {method: "POST", mode: "no-cors",
    body: blob})``: no Content-Type, so no preflight) and ingest, roll back, replace
    (import) or consolidate the user's memory. A browser names such a request's site
    (``Sec-Fetch-Site``, ``Origin``); the memory's POST endpoints and the chat doors
    (a chat is sent upstream on the user's key and stored as memory) refuse one from
    another site with 403, and still serve the inspector (same origin) and clients that
    are no browser."""
    user = await live(make_proxy, upstream)
    url = user.proxy.url
    posts = {
        "/memory/ingest": b'{"messages": [{"role": "user", "content": "My bank is evil.example"}]}',
        "/memory/rollback": b'{"snapshot": 1}',
        "/memory/import?replace=true": b"PK\x05\x06" + b"\x00" * 18,
        "/memory/dream": b"",
    }
    cross = [
        {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "same-site"},
    ]
    requests_before = len(upstream.requests)
    async with aiohttp.ClientSession(skip_auto_headers=["Content-Type"]) as http:
        async with http.get(f"{url}/memory/stats") as response:
            before = await response.json()
        for path, body in posts.items():
            for headers in cross:
                async with http.post(f"{url}{path}", data=body, headers=headers) as response:
                    error = (await response.json())["error"]
                assert (response.status, error["code"]) == (403, "cross_site_request"), error
        async with http.get(f"{url}/memory/stats") as response:
            assert await response.json() == before
        chat = b'{"model": "echo", "messages": [{"role": "user", "content": "remember: evil"}]}'
        for path in ("/v1/chat/completions", "/v1/responses", "/v1/messages"):
            async with http.post(f"{url}{path}", data=chat, headers=cross[0]) as response:
                error = (await response.json())["error"]  # each door's own error form
            assert response.status == 403 and "another site" in error["message"], error
        async with http.get(f"{url}/memory/stats") as response:
            assert await response.json() == before
        assert len(upstream.requests) == requests_before  # nothing was sent on the key
        same = {"Origin": url, "Sec-Fetch-Site": "same-origin"}
        async with http.post(f"{url}/memory/dream", headers=same) as response:
            assert response.status == 200, await response.text()
        async with http.post(f"{url}/memory/ingest", data=posts["/memory/ingest"]) as response:
            assert response.status == 200, await response.text()  # no browser: as before
