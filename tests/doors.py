"""What the tests of the front doors share: a proxy that remembers one fact, and reads
of its memory API (stats, receipts, search)."""

from __future__ import annotations

from typing import Any

import aiohttp

from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy, proxy_config

FACT: dict[str, Any] = {
    "conversation_id": "week-1",
    "messages": [
        {"role": "user", "name": "Rui", "content": "I live in Lisbon with my sister Ana.",
         "timestamp": "2024-03-01T10:00:00"},
        {"role": "assistant", "content": "Lisbon is lovely.", "timestamp": "2024-03-01T10:00:05"},
    ],
}  # fmt: skip
QUESTION = "Do you remember where Rui lives?"
FORCE = {"X-Memory": "force"}


async def remembering(
    make_proxy: MakeProxy, upstream: FakeUpstream, *, serves: str | None = None
) -> Proxy:
    """A proxy in front of ``upstream`` (serving the API ``serves`` natively, if named)
    whose memory holds :data:`FACT`, formed."""
    config = proxy_config(
        upstream.url, memory={"retrieval_timeout_ms": 60_000, "formation_workers": 0}
    )
    if serves is not None:
        config["upstreams"][0]["serves"] = [serves]
    proxy = await make_proxy(config)
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.url}/memory/ingest", json=FACT) as response:
            assert response.status == 200, await response.text()
    return proxy


async def stats(proxy: Proxy) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(f"{proxy.url}/memory/stats") as r:
        return dict(await r.json())


async def receipt(proxy: Proxy, receipt_id: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/receipts/{receipt_id}") as response:
            assert response.status == 200
            return dict(await response.json())


async def search(proxy: Proxy, query: str) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/search", params={"q": query}) as response:
            return list((await response.json())["hits"])
