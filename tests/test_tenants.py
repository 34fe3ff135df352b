"""Keys map to tenants; each tenant's memory is its own file and nothing crosses."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import aiohttp
import openai
import pytest

from memory_core import LogMessage, MemoryStore
from memory_core.formation import Backends, FormationSummary
from proxy.fake_upstream import FakeUpstream
from proxy.tenants.memory import TenantMemory

from .conftest import MakeProxy, Proxy, proxy_config

pytestmark = pytest.mark.e2e

KEYS = {"sk-alice": "alice", "sk-bob": "bob"}


@pytest.fixture
async def keyed(upstream: FakeUpstream, make_proxy: MakeProxy) -> Proxy:
    return await make_proxy(proxy_config(upstream.url, auth={"keys": KEYS}))


async def test_unknown_or_missing_key_is_401(keyed: Proxy, upstream: FakeUpstream) -> None:
    async with keyed.client("sk-mallory") as client:
        with pytest.raises(openai.AuthenticationError) as caught:
            await client.chat.completions.create(
                model="echo", messages=[{"role": "user", "content": "hi"}]
            )
    assert caught.value.code == "invalid_api_key"
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{keyed.url}/memory/search", params={"q": "x"}) as response:
            assert response.status == 401
            assert (await response.json())["error"]["code"] == "invalid_api_key"
    assert upstream.requests == []


async def test_tenants_do_not_share_memory(keyed: Proxy, upstream: FakeUpstream) -> None:
    async with keyed.client("sk-alice") as alice, keyed.client("sk-bob") as bob:
        await alice.chat.completions.create(
            model="echo",
            messages=[
                {"role": "user", "content": "My locker combination is 4471 at the Zephyr gym."}
            ],
        )
        await keyed.settle()
        await bob.chat.completions.create(
            model="echo",
            messages=[
                {"role": "user", "content": "Do you remember the Zephyr gym locker combination?"}
            ],
        )
        await keyed.settle()
        await alice.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "Remember the Zephyr gym locker?"}]
        )
    bob_sent = upstream.requests[1].body["messages"]
    assert all("4471" not in str(m["content"]) for m in bob_sent)
    alice_sent = upstream.requests[2].body["messages"]
    assert "4471" in alice_sent[0]["content"]
    folder = keyed.data_dir / "tenants"
    assert sorted(p.name for p in folder.glob("*.db")) == ["alice.db", "bob.db"]
    await keyed.settle()
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer sk-bob"}) as http:
        async with http.get(f"{keyed.url}/memory/search", params={"q": "locker combination"}) as r:
            hits = (await r.json())["hits"]
    assert hits and all("4471" not in h["text"] for h in hits)


async def test_receipts_are_per_tenant(keyed: Proxy) -> None:
    async with keyed.client("sk-alice") as alice:
        raw = await alice.chat.completions.with_raw_response.create(
            model="echo", messages=[{"role": "user", "content": "first question"}]
        )
    receipt_id = raw.headers["X-Memory-Receipt"]
    await keyed.settle()
    async with aiohttp.ClientSession() as http:
        async with http.get(
            f"{keyed.url}/memory/receipts/{receipt_id}", headers={"Authorization": "Bearer sk-bob"}
        ) as response:
            assert response.status == 404
        async with http.get(
            f"{keyed.url}/memory/receipts/{receipt_id}",
            headers={"Authorization": "Bearer sk-alice"},
        ) as response:
            assert (await response.json())["tenant"] == "alice"


async def test_an_exchange_stored_after_a_pass_found_the_queue_empty_is_formed(
    tmp_path: Path, backends: Backends
) -> None:
    """In-process formation: a row appended after ``form_all``'s last look at the queue,
    while its pass is still finishing, used to wait for the next exchange."""
    store = MemoryStore(tmp_path / "t.db", backends=backends)
    memory = TenantMemory("t", store, ThreadPoolExecutor(1))
    loop = asyncio.get_running_loop()
    real = store.form_summary
    calls: list[int] = []

    def form_all_then_an_exchange_arrives(on_pass: object = None) -> FormationSummary:
        summary = real()
        formed = summary.rows
        if not calls:  # the first pass: its queue is empty now, the pass not yet over
            store.append(
                [LogMessage({"role": "user", "content": "the late exchange"}, 1_700_000_001.0)],
                conversation="c2",
            )
            scheduled = threading.Event()

            def schedule() -> None:
                memory.form_soon(0.0, 1.0)
                scheduled.set()

            loop.call_soon_threadsafe(schedule)
            assert scheduled.wait(5)
        calls.append(formed)
        return summary

    store.form_summary = form_all_then_an_exchange_arrives  # type: ignore[method-assign]
    store.append([LogMessage({"role": "user", "content": "first"}, 1_700_000_000.0)])
    pending = memory.form_soon(0.0, 1.0)
    assert pending is not None
    assert await asyncio.wait_for(pending, 30) == 2
    assert calls == [1, 1]
    assert store.stats().queued == 0
    memory.close()
