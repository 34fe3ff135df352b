"""``GET /memory/export`` and ``POST /memory/import`` on a real proxy: one tenant's memory
moved to another gives the same search answers; a bad file, a tenant holding memory and a
body past ``server.max_body_bytes`` are refused and change nothing."""

from __future__ import annotations

import asyncio
import io
import zipfile
from typing import Any

import aiohttp
import pytest

from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, proxy_config
from .test_inspection import TRANSCRIPT

pytestmark = pytest.mark.e2e

KEYS = {"sk-alice": "alice", "sk-bob": "bob"}
QUESTIONS = ("Where does Rui live?", "Who is Ana?")


def _as(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _search(http: aiohttp.ClientSession, url: str, key: str) -> list[Any]:
    found = []
    for question in QUESTIONS:
        params = {"q": question, "strategy": "area"}
        async with http.get(f"{url}/memory/search", params=params, headers=_as(key)) as r:
            assert r.status == 200
            body = await r.json()
        found.append((body["hits"], body["context"]))
    return found


async def test_export_and_import_over_http(upstream: FakeUpstream, make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(
        proxy_config(upstream.url, auth={"keys": KEYS}, server={
            "host": "127.0.0.1", "port": 0, "data_dir": "data", "max_body_bytes": 1 << 20
        })
    )  # fmt: skip
    url = proxy.url
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{url}/memory/ingest", json=TRANSCRIPT, headers=_as("sk-alice")) as r:
            assert r.status == 200
        async with http.get(f"{url}/memory/export", headers=_as("sk-alice")) as r:
            assert r.status == 200 and r.content_type == "application/zip"
            assert 'filename="alice.areamem"' in r.headers["Content-Disposition"]
            exported = await r.read()
        assert not list((proxy.data_dir / "exports").iterdir())  # the scratch file is gone

        async def load(body: bytes, query: str = "") -> tuple[int, Any]:
            async with http.post(
                f"{url}/memory/import{query}", data=io.BytesIO(body), headers=_as("sk-bob")
            ) as r:
                return r.status, await r.json()

        status, body = await load(exported[: len(exported) // 2])
        assert (status, body["error"]["code"]) == (400, "invalid_export")
        status, body = await load(b"x" * (2 << 20))
        assert status == 413
        status, body = await load(exported)
        assert status == 200 and body["from_tenant"] == "alice"
        assert body["counts"]["log"] == len(TRANSCRIPT["messages"])
        found = await _search(http, url, "sk-alice")
        assert found[0][0] and await _search(http, url, "sk-bob") == found
        status, body = await load(exported)
        assert (status, body["error"]["code"]) == (409, "memory_not_empty")
        status, body = await load(exported, "?replace=true")
        assert status == 200 and body["replaced"] is True
    events = [r for r in proxy.log_records() if r.get("event") == "import"]
    assert [(e["tenant"], e["from_tenant"]) for e in events] == [("bob", "alice")] * 2


async def test_one_export_at_a_time_per_tenant(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """Each export is a copy of the memory on disk until it is sent: while one is written
    or sent, another of the same tenant is a 409 ``export_busy`` (another tenant's is
    not), and the next one after it is served."""
    proxy = await make_proxy(proxy_config(upstream.url, auth={"keys": KEYS}))
    url = proxy.url
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{url}/memory/ingest", json=TRANSCRIPT, headers=_as("sk-alice")) as r:
            assert r.status == 200
        alice = proxy.services.tenants.get("alice")
        alice.exporting = True  # as while a large export is still being sent
        async with http.get(f"{url}/memory/export", headers=_as("sk-alice")) as r:
            assert r.status == 409 and (await r.json())["error"]["code"] == "export_busy"
            assert r.headers["Retry-After"] == "5"
        async with http.get(f"{url}/memory/export", headers=_as("sk-bob")) as r:
            assert r.status == 200
        alice.exporting = False
        for _ in range(2):  # released after each, once its scratch copy is gone
            async with http.get(f"{url}/memory/export", headers=_as("sk-alice")) as r:
                assert r.status == 200 and len(await r.read()) > 0
            for _ in range(500):  # the handler ends just after the client has read it all
                if not alice.exporting:
                    break
                await asyncio.sleep(0.01)
            assert not alice.exporting


async def test_a_refused_import_names_no_path_of_the_server(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """The body is kept in a scratch file of the data folder while it is read: a refusal
    said that file's path ("/srv/areamem/data/exports/bob-<uuid>.areamem: not an areamem
    export"), telling any key holder where the proxy keeps its data. It says "the
    uploaded export" instead."""
    proxy = await make_proxy(proxy_config(upstream.url, auth={"keys": KEYS}))
    manifest_only = io.BytesIO()
    with zipfile.ZipFile(manifest_only, "w") as archive:
        archive.writestr("manifest.json", '{"format": "areamem-export", "version": 1}')
    async with aiohttp.ClientSession() as http:
        for body in (b"PK\x03\x04 not a zip", b"[" * 1000, manifest_only.getvalue()):
            async with http.post(
                f"{proxy.url}/memory/import", data=body, headers=_as("sk-bob")
            ) as r:
                error = (await r.json())["error"]
            assert (r.status, error["code"]) == (400, "invalid_export")
            assert error["message"].startswith("the uploaded export"), error["message"]
            assert str(proxy.data_dir) not in error["message"]


async def test_an_import_without_a_key_is_refused_before_its_body_is_read(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """``POST /memory/import`` read the body (up to ``server.max_body_bytes``, decoded
    from gzip too) before it asked whose key it was: anyone could make the proxy take in
    megabytes per request before the 401. The key is checked first, as chat does: a
    request without one is a 401 whatever its body (here one the body's checks refuse)."""
    proxy = await make_proxy(proxy_config(upstream.url, auth={"keys": KEYS}))
    async with aiohttp.ClientSession() as http:
        headers = {"Content-Type": "text/plain"}
        async with http.post(f"{proxy.url}/memory/import", data=b"x", headers=headers) as r:
            assert r.status == 401, await r.text()
