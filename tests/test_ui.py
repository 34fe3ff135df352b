"""The inspector's serving (``proxy/api/ui.py``) and the receipts list it shows
(``GET /memory/receipts``), on a real proxy on loopback in front of the fake upstream.

The browser itself is driven in ``test_ui_browser.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from memory_core import MemoryStore
from memory_core.formation import Backends
from proxy import build_services, load_config
from proxy.api import ui
from proxy.api.routes import add_routes, build_document
from proxy.api.schemas import ReceiptsResponse
from proxy.fake_upstream import FakeUpstream
from proxy.server import ProxyServer

from .conftest import Proxy, proxy_config
from .test_openapi import Client, _conforms

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
KEYS = {"sk-alice": "alice", "sk-bob": "bob"}
ALICE = {"Authorization": "Bearer sk-alice"}
BOB = {"Authorization": "Bearer sk-bob"}
FILES = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "index.html": "text/html; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


def wire(app: web.Application) -> None:
    """The inspector's routes are the app's own (the route table's)."""
    served = {route.resource.canonical for route in app.router.routes() if route.resource}
    assert {"/memory/receipts", "/ui", "/ui/{file}"} <= served


@contextlib.asynccontextmanager
async def inspected_proxy(
    config: dict[str, Any], folder: Path, backends: Backends
) -> AsyncIterator[Proxy]:
    """A real proxy on loopback (as ``conftest.make_proxy`` starts one) with the
    inspector's routes."""
    folder.mkdir(parents=True, exist_ok=True)
    config_path = folder / "config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    loaded = load_config(config_path)
    services = build_services(loaded, backends=backends)
    server = ProxyServer(services)
    wire(server.runner.app)
    await server.start("127.0.0.1", 0)
    try:
        for _ in range(1200):
            if services.state == "ready":
                break
            await asyncio.sleep(0.05)
        url = f"http://127.0.0.1:{server.port}"
        yield Proxy(url, config_path, loaded.server.data_dir, services, server)
    finally:
        await server.close()


@pytest.fixture
async def open_proxy(
    upstream: FakeUpstream, tmp_path: Path, backends: Backends
) -> AsyncIterator[Proxy]:
    async with inspected_proxy(proxy_config(upstream.url), tmp_path / "open", backends) as proxy:
        yield proxy


@pytest.fixture
async def keyed_proxy(
    upstream: FakeUpstream, tmp_path: Path, backends: Backends
) -> AsyncIterator[Proxy]:
    config = proxy_config(upstream.url, auth={"keys": KEYS})
    async with inspected_proxy(config, tmp_path / "keyed", backends) as proxy:
        yield proxy


# --- the page and its files -------------------------------------------------------------


async def test_the_page_and_its_files_are_served(open_proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(open_proxy.url + "/ui") as page:
            assert page.status == 200
            assert page.headers["Content-Type"] == "text/html; charset=utf-8"
            _check_security(page.headers)
            html = await page.text()
        assert '<script src="/ui/app.js" defer></script>' in html
        for name, kind in FILES.items():
            async with http.get(f"{open_proxy.url}/ui/{name}") as answer:
                assert answer.status == 200, name
                assert answer.headers["Content-Type"] == kind
                _check_security(answer.headers)
                body = await answer.read()
            assert body == (ui.STATIC / name).read_bytes()
            tag = answer.headers["ETag"]
            async with http.get(
                f"{open_proxy.url}/ui/{name}", headers={"If-None-Match": tag}
            ) as again:
                assert again.status == 304 and await again.read() == b""
                assert again.headers["ETag"] == tag


async def test_the_page_is_also_served_at_its_folder_with_a_query(open_proxy: Proxy) -> None:
    """``/ui/?q=...&tenant=...`` (the inspector's own address for a question) is the page."""
    async with aiohttp.ClientSession() as http:
        async with http.get(open_proxy.url + "/ui/?q=Where+does+Rui+live%3F&tenant=t") as page:
            assert page.status == 200
            assert page.headers["Content-Type"] == "text/html; charset=utf-8"
            _check_security(page.headers)
            assert await page.read() == (ui.STATIC / "index.html").read_bytes()


def _check_security(headers: Any) -> None:
    policy = headers["Content-Security-Policy"]
    assert policy == ui.CONTENT_SECURITY_POLICY
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"
    assert directives["connect-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in policy and "http" not in policy and "*" not in policy
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "no-cache"
    assert headers["ETag"].startswith('"')


async def test_the_page_needs_no_key_but_its_data_does(keyed_proxy: Proxy) -> None:
    """The page holds no data (a browser cannot send a bearer key when it navigates);
    every datum it shows comes from the API, which wants the key."""
    async with aiohttp.ClientSession() as http:
        async with http.get(keyed_proxy.url + "/ui") as page:
            assert page.status == 200
        async with http.get(keyed_proxy.url + "/memory/receipts") as data:
            assert data.status == 401
            assert (await data.json())["error"]["code"] == "invalid_api_key"


TRAVERSALS = [
    "/ui/../config.yaml",
    "/ui/..%2fconfig.yaml",
    "/ui/%2e%2e/config.yaml",
    "/ui/%2e%2e%2fconfig.yaml",
    "/ui/%252e%252e%252fconfig.yaml",
    "/ui/vendor/../../ui.py",
    "/ui/vendor/..%2f..%2fui.py",
    "/ui/..%5c..%5cui.py",
    "/ui/..\\..\\ui.py",
    "/ui/%2fetc%2fpasswd",
    "/ui//etc/passwd",
    "/ui/./app.js/../../ui.py",
    "/ui/../../proxy/ui.py",
    "/ui/../../api/ui.py",
    "/ui/app.js%00.html",
    "/ui/.hidden",
]


async def test_paths_outside_the_files_are_refused(open_proxy: Proxy) -> None:
    """Raw request lines (no client normalises them): never another file, never 200."""
    secrets = [
        open_proxy.config_path.read_text()[:40],
        "CONTENT_SECURITY_POLICY",  # proxy/api/ui.py
        "root:x:0:0",  # /etc/passwd
    ]
    host, port = open_proxy.url.removeprefix("http://").split(":")
    for path in TRAVERSALS:
        status, body = await _raw_get(host, int(port), path)
        assert status in (400, 404), (path, status)
        assert not any(secret in body for secret in secrets), path


async def _raw_get(host: str, port: int, path: str) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, body = raw.decode("utf-8", "replace").partition("\r\n\r\n")
    return int(head.split(" ", 2)[1]), body


async def test_only_the_folders_files_of_served_types_are_served(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / ".git").mkdir()
    files = {
        "index.html": "<p>page</p>",
        "sub/x.css": "p {}",
        "secret.py": "KEY = 1",
        ".hidden.js": "1",
        ".git/config.js": "1",
        "notes.md": "#",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    app = web.Application()
    add_routes(app, tmp_path)
    (tmp_path / "late.js").write_text("1")  # added after the routes: not served
    async with TestClient(TestServer(app)) as client:
        for name in files:
            answer = await client.get(f"/ui/{name}")
            assert (answer.status == 200) == (name in ("index.html", "sub/x.css")), name
        assert (await client.get("/ui/late.js")).status != 200
        assert await (await client.get("/ui")).text() == "<p>page</p>"
    with pytest.raises(FileNotFoundError, match=r"index\.html"):
        add_routes(web.Application(), tmp_path / "sub")


def test_the_page_is_plain_and_same_origin() -> None:
    """No inline script, style or handler (the CSP would refuse them), nothing from
    another origin, and no way to put API text into the page as markup."""
    html = (ui.STATIC / "index.html").read_text()
    assert re.findall(r"<script\b[^>]*>", html) == ['<script src="/ui/app.js" defer>']
    assert not re.search(r"\sstyle=|<style|\son[a-z]+=", html, re.IGNORECASE)
    for url in re.findall(r'(?:src|href)="([^"]*)"', html):
        assert url.startswith("/ui/"), url
    # The graph is SVG: its namespace is a name, not an address anything is fetched from.
    script = (ui.STATIC / "app.js").read_text().replace('"http://www.w3.org/2000/svg"', "")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "new Function", "setAttribute(\"style", "http://", "https://"):  # fmt: skip
        assert sink not in script, sink


# --- GET /memory/receipts ---------------------------------------------------------------


async def _chat(
    http: aiohttp.ClientSession, proxy: Proxy, headers: dict[str, str], text: str
) -> str:
    chat = {"model": "echo", "messages": [{"role": "user", "content": text}]}
    async with http.post(
        proxy.base_url + "/chat/completions", json=chat, headers={**headers, "X-Memory": "force"}
    ) as answer:
        assert answer.status == 200, await answer.text()
        return answer.headers["X-Memory-Receipt"]


async def _receipts(
    http: aiohttp.ClientSession, proxy: Proxy, headers: dict[str, str], **params: str
) -> tuple[int, Any]:
    async with http.get(proxy.url + "/memory/receipts", headers=headers, params=params) as answer:
        return answer.status, await answer.json()


async def test_receipts_list_the_callers_newest(keyed_proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http:
        first = await _chat(http, keyed_proxy, ALICE, "Do you remember the trip?")
        second = await _chat(http, keyed_proxy, ALICE, "And the boat?")
        await keyed_proxy.settle()
        status, body = await _receipts(http, keyed_proxy, ALICE)
        assert status == 200
        listed = ReceiptsResponse.model_validate(body)
        assert listed.tenant == "alice"
        assert [r.id for r in listed.receipts] == [second, first]
        newest = listed.receipts[0]
        assert newest.model == "echo" and newest.retrieve
        assert newest.reason == "header X-Memory: force" and newest.memory_error is None
        times = [r.created_at or 0.0 for r in listed.receipts]
        assert times == sorted(times, reverse=True) and times[-1] > 0
        status, body = await _receipts(http, keyed_proxy, ALICE, limit="1")
        assert status == 200 and [r["id"] for r in body["receipts"]] == [second]
        status, body = await _receipts(http, keyed_proxy, BOB)
        assert status == 200 and body == {"tenant": "bob", "receipts": []}
        for wrong in ("0", "10001", "x", "-1"):
            status, body = await _receipts(http, keyed_proxy, ALICE, limit=wrong)
            assert status == 400 and body["error"]["param"] == "limit", wrong
        status, body = await _receipts(http, keyed_proxy, {})
        assert status == 401


def test_a_receipt_of_another_shape_lists_as_blanks(tmp_path: Path) -> None:
    """A stored body that is not what the proxy writes breaks no list."""
    store = MemoryStore(tmp_path / "m.db")
    try:
        store.save_receipt("rcpt_odd", {"model": 5, "decision": "x", "tokens": -3,
                                        "area": {"fragments": "none"}})  # fmt: skip
        store.save_receipt("rcpt_empty", {})
        rows = store.recent_receipts(10)
    finally:
        store.close()
    assert [r.id for r in rows] == ["rcpt_empty", "rcpt_odd"]
    odd = rows[1]
    assert (odd.model, odd.retrieve, odd.reason, odd.fragments, odd.tokens) == (
        "5", False, "", 0, 0
    )  # fmt: skip


# --- the OpenAPI document ---------------------------------------------------------------


async def test_the_inspectors_routes_are_described_and_answer_as_described(
    open_proxy: Proxy,
) -> None:
    """The inspector's routes are in the document (``test_openapi`` checks that the app
    serves exactly the document's operations), and each of their answers fits it."""
    document = build_document()
    app = open_proxy.server.runner.app
    served = {
        (route.resource.canonical, route.method.lower())
        for route in app.router.routes()
        if route.resource is not None and route.method != "HEAD"
    }
    described = {(path, method) for path, item in document["paths"].items() for method in item}
    ours = {("/ui", "get"), ("/ui/{file}", "get"), ("/memory/receipts", "get")}
    assert ours <= served and ours <= described
    async with aiohttp.ClientSession() as http:
        client = Client(http, open_proxy.url)
        await _chat(http, open_proxy, {}, "Do you remember?")
        await open_proxy.settle()
        page = await client.call("GET", "/ui")
        await client.call("GET", "/ui/app.js", "/ui/{file}")
        await client.call("GET", "/ui/style.css", "/ui/{file}")
        tag = {k.lower(): v for k, v in page.headers.items()}["etag"]
        await client.call("GET", "/ui", headers={"If-None-Match": tag})
        missing = await client.call("GET", "/ui/nope.js", "/ui/{file}")
        listed = await client.call("GET", "/memory/receipts")
        refused = await client.call("GET", "/memory/receipts", params={"limit": "0"})
    assert missing.status == 404 and missing.json()["error"]["code"] == "not_found"
    assert listed.status == 200 and len(listed.json()["receipts"]) == 1
    assert refused.status == 400
    assert {e.status for e in client.seen} == {200, 304, 400, 404}
    assert "304" in document["paths"]["/ui"]["get"]["responses"]
    for exchange in client.seen:
        if exchange.status != 304:  # no body, so nothing to check against a schema
            _conforms(document, exchange)
