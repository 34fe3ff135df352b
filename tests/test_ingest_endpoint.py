"""POST /memory/ingest and GET /memory/search, and recovery of unformed turns at startup."""

from __future__ import annotations

import datetime as dt
from typing import Any

import aiohttp
import pytest

from memory_core import LogMessage, MemoryStore
from proxy.chat.receipt import RECEIPT_TEXT_CHARS
from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy, proxy_config

pytestmark = pytest.mark.e2e

TRANSCRIPT = {
    "conversation_id": "conv-26",
    "messages": [
        {
            "role": "user",
            "name": "Caroline",
            "content": "I went to a LGBTQ support group.",
            "timestamp": "2023-05-08T13:56:00",
            "id": "D1:1",
        },
        {
            "role": "assistant",
            "name": "Melanie",
            "content": "That's brave, Caroline!",
            "timestamp": 1683554161,
            "id": "D1:2",
        },
    ],
}


async def _ingest(proxy: Proxy, payload: Any) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.url}/memory/ingest", json=payload) as response:
            return response.status, await response.json()


async def _search(proxy: Proxy, query: str) -> Any:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/search", params={"q": query}) as response:
            return await response.json()


async def test_ingest_then_search(proxy: Proxy) -> None:
    status, result = await _ingest(proxy, TRANSCRIPT)
    assert status == 200
    assert result == {
        "conversation_id": "conv-26",
        "appended": 2,
        "already_stored": 0,
        "superseded": 0,
        "fragments_formed": 2,
        "formation": "done",
    }
    status, again = await _ingest(proxy, TRANSCRIPT)
    assert (again["appended"], again["already_stored"]) == (0, 2)
    found = await _search(proxy, "support group")
    hit = found["hits"][0]
    assert hit["speaker"] == "Caroline" and hit["ext_id"] == "D1:1"
    assert hit["ts"] == dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC).timestamp()
    assert "[conv-26]\n8 May 2023:\nCaroline: I went to a LGBTQ support group." in found["context"]
    assert found["terms"] == ["support", "group"]
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/stats") as response:
            stats = await response.json()
    assert stats == {
        "tenant": "default",
        "log_messages": 2,
        "fragments": 2,
        "live_fragments": 2,
        "queued": 0,
        "failed": 0,
        "names": stats["names"],
        "held": 0,
        "entities": stats["entities"],
        "relations": stats["relations"],
        "contexts": stats["contexts"],
        "snapshots": 0,
        "bytes": stats["bytes"],
    }
    assert stats["entities"] > 0 and stats["contexts"] > 0 and stats["bytes"] > 0
    assert stats["names"] >= 2  # Caroline, LGBTQ


async def test_ingested_memory_is_used_in_chat(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    # what the chat is given, not how fast: at the default 250 ms budget a loaded
    # machine (load average 2.4 on two cores) let the lookup time out and the request
    # go on without memory, once in six runs
    proxy = await make_proxy(proxy_config(upstream.url, memory={"retrieval_timeout_ms": 60_000}))
    await _ingest(proxy, TRANSCRIPT)
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo",
            messages=[{"role": "user", "content": "Which support group did Caroline go to?"}],
        )
    assert "LGBTQ support group" in upstream.requests[-1].body["messages"][0]["content"]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"messages": []}, "non-empty array"),
        ({"messages": "hi"}, "non-empty array"),
        ({"conversation_id": 5, "messages": [{"role": "user", "content": "x"}]}, "conversation_id"),
        (
            {"messages": [{"role": "user", "content": "x", "timestamp": "last tuesday"}]},
            "timestamp must be epoch seconds or an ISO 8601",
        ),
        ({"messages": [{"role": "bard", "content": "x"}]}, "role must be one of"),
        ({"messages": [7]}, "must be an object"),
        ([1, 2], "must be a JSON object"),
        # before: stored as Python's repr, a speaker entity named "{'a': [1]}" or "True"
        # (the chat endpoint refuses them: the name is a string or absent)
        ({"messages": [{"role": "user", "name": {"a": [1]}, "content": "x"}]}, ".name must"),
        ({"messages": [{"role": "user", "name": True, "content": "x"}]}, ".name must"),
        ({"messages": [{"role": "user", "name": 123, "content": "x"}]}, ".name must"),
        ({"messages": [{"role": "user", "name": ["Ana"], "content": "x"}]}, ".name must"),
        # before: the message's id stored as Python's repr ("{'a': [1]}", "True", "inf")
        ({"messages": [{"role": "user", "id": {"a": [1]}, "content": "x"}]}, "[0].id must"),
        ({"messages": [{"role": "user", "id": True, "content": "x"}]}, "[0].id must"),
        ({"messages": [{"role": "user", "id": 1.5, "content": "x"}]}, "[0].id must"),
        ({"messages": [{"role": "user", "id": ["D1:3"], "content": "x"}]}, "[0].id must"),
    ],
)
async def test_ingest_bad_input(proxy: Proxy, payload: Any, message: str) -> None:
    await _ingest(proxy, TRANSCRIPT)
    status, error = await _ingest(proxy, payload)
    assert status == 400
    assert message in error["error"]["message"]
    found = await _search(proxy, "support group")
    assert len(found["hits"]) == 1  # what was stored before is intact


async def test_a_hit_names_its_conversation_never_by_a_hash(proxy: Proxy) -> None:
    """A conversation whose id is only an identifier is called by what it opened with."""
    opaque = {**TRANSCRIPT, "conversation_id": "c3a7f19c40c62e9d"}
    assert (await _ingest(proxy, opaque))[0] == 200
    assert (await _ingest(proxy, TRANSCRIPT))[0] == 200
    hits = (await _search(proxy, "support group"))["hits"]
    labels = {h["conversation_id"]: h["conversation_label"] for h in hits}
    assert labels == {
        "c3a7f19c40c62e9d": "chat about LGBTQ, went, support",
        "conv-26": "conv-26",
    }, labels


async def test_search_needs_a_query(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/search") as response:
            assert response.status == 400
        async with http.get(f"{proxy.url}/memory/search", params={"q": "x", "k": "many"}) as r:
            assert r.status == 400
            assert "'k'" in (await r.json())["error"]["message"]


async def test_startup_forms_turns_logged_before_a_crash(
    upstream: FakeUpstream, make_proxy: MakeProxy, tmp_path: Any
) -> None:
    config = proxy_config(upstream.url)
    data_dir = tmp_path / "proxy" / "data" / "tenants"
    store = MemoryStore(data_dir / "default.db")
    store.append(
        [
            LogMessage(
                {"role": "user", "content": "The spare key is under the blue pot."}, 1_700_000_000.0
            )
        ]
    )
    store.close()  # logged durably, never formed: the process died here
    proxy = await make_proxy(config)
    await proxy.settle()
    found = await _search(proxy, "spare key")
    assert [h["text"] for h in found["hits"]] == ["The spare key is under the blue pot."]
    assert any(r.get("event") == "recovered" for r in proxy.log_records())


async def test_an_ingest_and_its_formation_each_write_a_log_line_with_counts(
    proxy: Proxy,
) -> None:
    status, _ = await _ingest(proxy, TRANSCRIPT)
    assert status == 200
    status, again = await _ingest(proxy, TRANSCRIPT)  # the same turns: nothing new
    assert status == 200 and again["appended"] == 0
    await proxy.settle()
    ingests = [r for r in proxy.log_records() if r.get("event") == "ingest"]
    assert [(r["messages"], r["appended"], r["already_stored"]) for r in ingests] == [
        (2, 2, 0),
        (2, 0, 2),
    ]
    first = ingests[0]
    assert first["tenant"] == "default" and first["conversation"] == "conv-26"
    assert first["formed"] == 2 and first["formation"] == "done" and first["ms"] >= 0
    formed = [r for r in proxy.log_records() if r.get("event") == "formed"]
    assert len(formed) == 1  # the second ingest formed nothing: no line
    assert formed[0]["tenant"] == "default" and formed[0]["rows"] == 2
    assert formed[0]["passes"] >= 1 and formed[0]["failed"] == 0
    assert {"entities", "relations", "segments", "contexts", "ms"} <= set(formed[0])



async def test_a_hit_shows_a_long_fragment_as_a_receipt_does(proxy: Proxy) -> None:
    """A search answered each hit's whole text: hits of pasted 6 MB messages made one
    ``GET /memory/search?k=200`` a 54 MB answer, serialised on the event loop. A hit's
    text is now cut as a receipt's fragments are (RECEIPT_TEXT_CHARS)."""
    long_text = "Caroline went to the support group in Lisbon. " * 3_000
    payload = {"conversation_id": "paste", "messages": [{"role": "user", "content": long_text}]}
    assert (await _ingest(proxy, payload))[0] == 200
    hits = (await _search(proxy, "support group Lisbon"))["hits"]
    assert hits and all(len(h["text"]) <= RECEIPT_TEXT_CHARS for h in hits)
    cut = [h["text"] for h in hits if len(h["text"]) == RECEIPT_TEXT_CHARS]
    assert cut and all(long_text.startswith(text) for text in cut)
