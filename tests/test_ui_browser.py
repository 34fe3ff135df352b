"""The inspector end to end: Debian's headless chromium, driven by Playwright, against a
real proxy on loopback (in front of the fake upstream) holding real memory.

Memory is ingested through ``/memory/ingest`` (a person, a place, a correction, and a
hostile fragment), consolidated twice (``POST /memory/dream``: two snapshots), and
consulted once by a chat request (a receipt). The page is loaded with a proxy key, a
question searched; the area drawn must have the node count ``/memory/area`` gives for
the same question, a citation clicked must select the fragment it names, the hostile
fragment must show as text and run nothing, the snapshots diff and a rollback goes
through its confirmation. A screenshot is saved in the test's folder.

Needs ``/usr/bin/chromium`` (``apt-get install chromium``; ``make test`` installs it):
without it the test fails, it is never skipped. Nothing is downloaded.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from playwright.async_api import ConsoleMessage, Page, async_playwright, expect

from memory_core.formation import Backends
from proxy.fake_upstream import FakeUpstream

from .conftest import Proxy, proxy_config
from .test_ui import inspected_proxy

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
KEY = "sk-inspector"
QUESTION = "Where does Rui live?"
HOSTILE = 'Where I live: <img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def _said(conversation: str, day: str, *turns: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "conversation_id": conversation,
        "messages": [
            {"role": role, "name": name, "content": text, "timestamp": f"{day}T10:0{i}:00"}
            for i, (role, name, text) in enumerate(turns)
        ],
    }


BEFORE = _said(
    "week-1",
    "2024-03-01",
    ("user", "Rui", "I live in Lisbon with my sister Ana."),
    ("assistant", "Bot", "Lisbon is a lovely city, Rui."),
)
AFTER = _said(
    "week-2",
    "2024-03-09",
    ("user", "Rui", "Actually, I moved to Porto last month."),
    ("assistant", "Bot", "Porto it is!"),
    ("user", "Rui", HOSTILE),
)


async def test_the_inspector_in_chromium(
    upstream: FakeUpstream, tmp_path: Path, backends: Backends
) -> None:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the inspector's browser test drives Debian's chromium; "
            "install it with `apt-get install chromium` (or `make browser`)"
        )
    config = proxy_config(
        upstream.url, auth={"keys": {KEY: "ui"}}, memory={"retrieval_timeout_ms": 30_000}
    )
    async with inspected_proxy(config, tmp_path / "proxy", backends) as proxy:
        expected = await _remember(proxy)
        async with async_playwright() as pw:
            context = await pw.chromium.launch_persistent_context(
                str(tmp_path / "profile"),
                executable_path=str(CHROMIUM),
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1400, "height": 1000},
            )
            try:
                page = context.pages[0] if context.pages else await context.new_page()
                await _inspect(page, proxy, expected, tmp_path)
            finally:
                await context.close()


async def _remember(proxy: Proxy) -> dict[str, Any]:
    """Memory in two cycles, one receipt; what the API says about the question."""
    headers = {"Authorization": f"Bearer {KEY}"}
    async with aiohttp.ClientSession(headers=headers) as http:

        async def call(method: str, path: str, **kwargs: Any) -> Any:
            async with http.request(method, proxy.url + path, **kwargs) as answer:
                assert answer.status == 200, (path, await answer.text())
                return await answer.json()

        await call("POST", "/memory/ingest", json=BEFORE)
        first = (await call("POST", "/memory/dream"))["snapshot"]
        await call("POST", "/memory/ingest", json=AFTER)
        second = (await call("POST", "/memory/dream"))["snapshot"]
        chat = {"model": "echo", "messages": [{"role": "user", "content": QUESTION}]}
        async with http.post(
            proxy.base_url + "/chat/completions", json=chat, headers={"X-Memory": "force"}
        ) as answer:
            assert answer.status == 200
            receipt = answer.headers["X-Memory-Receipt"]
        await proxy.settle()
        found = await call("GET", "/memory/search", params={"q": QUESTION, "k": "8"})
        area = await call("GET", "/memory/area", params={"q": QUESTION, "k": "8"})
    assert area["area"] is not None
    return {
        "snapshots": (first, second),
        "receipt": receipt,
        "nodes": len(area["area"]["nodes"]),
        "porto": _citation_of(found, "Porto last month"),
    }


def _citation_of(found: dict[str, Any], words: str) -> tuple[int, int]:
    """The citation number of the block's fragment line holding ``words``, and the id of
    the hit holding them."""
    line = next(ln for ln in found["context"].splitlines() if words in ln and ln.startswith("["))
    match = re.match(r"\[(\d+)\]", line)
    assert match is not None, line
    number = int(match.group(1))
    fragment = next(h["fragment_id"] for h in found["hits"] if words in h["text"])
    return number, fragment


async def _inspect(page: Page, proxy: Proxy, expected: dict[str, Any], folder: Path) -> None:
    page.set_default_timeout(10_000)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda message: _csp_violation(message, problems))
    await page.goto(proxy.url + "/ui")
    await expect(page.locator("body[data-ready='1']")).to_have_count(1)

    await expect(page.locator("#entities-error")).to_contain_text("401")  # shown, not swallowed
    await page.fill("#key", KEY)
    await page.click("#key-form button[type=submit]")
    await expect(page.locator("#entities-error")).to_be_hidden()
    await expect(page.locator("#entities tbody")).to_contain_text("Rui")

    await _search(page, expected)
    await _click_citation(page, *expected["porto"])
    await _no_script_ran(page)
    await _receipt(page, expected["receipt"])
    await expect(page.locator("#relations tr.mutation-change")).not_to_have_count(0)
    screenshot = folder / "inspector.png"
    await page.screenshot(path=str(screenshot), full_page=True)
    await _history(page, *expected["snapshots"])
    assert problems == []
    data = screenshot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 30_000, len(data)


def _csp_violation(message: ConsoleMessage, problems: list[str]) -> None:
    if "Content Security Policy" in message.text:
        problems.append(f"CSP: {message.text}")


async def _search(page: Page, expected: dict[str, Any]) -> None:
    await page.fill("#q", QUESTION)
    await page.click("#search-form button[type=submit]")
    graph = page.locator("#graph")
    await expect(graph).to_have_attribute("data-state", "drawn")
    await expect(graph).to_have_attribute("data-node-count", str(expected["nodes"]))
    await expect(page.locator("#area-nodes li")).to_have_count(expected["nodes"])
    await expect(page.locator("#area-nodes li.rep")).to_have_count(1)
    await expect(page.locator("#graph canvas").first).to_be_attached()
    await expect(page.locator("#context")).to_contain_text("<retrieved_memory>")


async def _click_citation(page: Page, number: int, fragment: int) -> None:
    selected = page.locator("#fragments li.selected")
    await expect(selected).to_have_count(0)
    await page.locator(f"#context a.citation[data-citation='{number}']").first.click()
    await expect(selected).to_have_count(1)
    await expect(selected).to_have_attribute("data-fragment-id", str(fragment))
    await expect(selected).to_contain_text("Actually, I moved to Porto last month.")
    await expect(page.locator("#graph")).to_have_attribute("data-selected-fragment", str(fragment))


async def _no_script_ran(page: Page) -> None:
    """The hostile fragment is on the page as its text, and nothing of it ran."""
    await expect(page.locator("#fragments")).to_contain_text(
        '<img src=x onerror="window.__pwned=1">'
    )
    assert await page.evaluate("() => window.__pwned") is None
    assert await page.locator("img, #fragments script, #context script").count() == 0


async def _receipt(page: Page, receipt: str) -> None:
    """The receipt listed; opened, its block's citations select its fragments too."""
    await page.locator("#receipts tbody button", has_text=receipt).click()
    await expect(page.locator("#receipt-title")).to_contain_text("header X-Memory: force")
    await page.locator("#receipt-context a.citation").first.click()
    await expect(page.locator("#receipt-fragments li.selected")).to_have_count(1)


async def _history(page: Page, first: int, second: int) -> None:
    """The snapshots listed, their diff, a rollback cancelled and then confirmed."""
    rows = page.locator("#snapshots tbody tr")
    await expect(page.locator(f"#snapshots tr[data-snapshot='{first}']")).to_have_count(1)
    await expect(page.locator(f"#snapshots tr[data-snapshot='{second}']")).to_have_count(1)
    await page.select_option("#diff-from", str(first))
    await page.select_option("#diff-to", str(second))
    await page.click("#diff-form button[type=submit]")
    await expect(page.locator("#diff")).to_contain_text("Porto")
    listed = await rows.count()
    back = page.locator(f"#snapshots button[data-snapshot='{first}']")
    dialog = page.locator("#rollback-dialog")
    await back.click()
    await expect(dialog).to_be_visible()
    await expect(page.locator("#rollback-question")).to_contain_text(f"snapshot #{first}")
    await page.click("#rollback-cancel")
    await expect(dialog).to_be_hidden()
    await expect(rows).to_have_count(listed)
    await back.click()
    await page.click("#rollback-confirm")
    await expect(page.locator("#rollback-result")).to_contain_text(
        f"Memory restored to snapshot #{first}"
    )
    await expect(rows.filter(has_text=f"rollback → #{first}")).to_have_count(1)
    assert await rows.count() > listed  # the rollback's snapshot (and a checkpoint's)
