"""The inspector end to end: Debian's headless chromium, driven by Playwright, against a
real proxy on loopback (in front of the fake upstream) holding real memory.

Memory is ingested through ``/memory/ingest`` (a person, a place, a correction, and a
hostile fragment), consolidated twice (``POST /memory/dream``: two snapshots), and
consulted once by a chat request (a receipt). The page is loaded with a proxy key, a
question searched; the area drawn must have the node count ``/memory/area`` gives for
the same question, a citation clicked must select the fragment it names, the hostile
fragment must show as text and run nothing, the snapshots diff and a rollback goes
through its confirmation. A screenshot is saved in the test's folder.

A second test reads a big memory (twelve conversations, 300+ graph nodes) at 1280x800 as
a new user would: the graph's labels measured in the page (computed font size, bounding
boxes), the question in the address, the diff's words, a rollback's refresh; its
screenshots are copied to ``$AREAMEM_UI_SHOTS`` when that is set.

Needs ``/usr/bin/chromium`` (``apt-get install chromium``; ``make test`` installs it):
without it the test fails, it is never skipped. Nothing is downloaded.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from playwright.async_api import ConsoleMessage, Page, ViewportSize, async_playwright, expect

from memory_core.formation import Backends
from proxy.fake_upstream import FakeUpstream

from .conftest import Proxy, proxy_config
from .test_ui import inspected_proxy
from .ui_memory import conversations

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
    await expect(page.locator("#graph svg").first).to_be_attached()
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
    await page.click("#receipts-panel > summary h2")
    await page.locator("#receipts tbody button", has_text=receipt).click()
    await expect(page.locator("#receipt-title")).to_contain_text("header X-Memory: force")
    await page.locator("#receipt-context a.citation").first.click()
    await expect(page.locator("#receipt-fragments li.selected")).to_have_count(1)


async def _history(page: Page, first: int, second: int) -> None:
    """The snapshots listed, their diff, a rollback cancelled and then confirmed."""
    rows = page.locator("#snapshots tbody tr")
    await page.click("#history-panel > summary h2")
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


# --- at a glance: a big memory at 1280x800 -----------------------------------------------

GLANCE: ViewportSize = {"width": 1280, "height": 800}
BIG_QUESTION = "Where does Rui live?"
OTHER_QUESTION = "Who works at Atelier Norte?"
MIN_LABEL_PX = 11.0
MAX_DRAWN = 25
HEX_ID = re.compile(r"\b[0-9a-f]{12,}\b")
BYTE_BLOB = re.compile(r"<\d+ bytes>")
EPOCH = re.compile(r"\b1[5-9]\d{8}(\.\d+)?\b")
SHOTS = "AREAMEM_UI_SHOTS"
"""A folder to copy the screenshots to (the test's own folder keeps them anyway)."""

_LABELS = """() => [...document.querySelectorAll('#graph .glabel')]
  .filter((e) => e.offsetParent !== null)
  .map((e) => {
    const r = e.getBoundingClientRect();
    return { text: e.textContent, title: e.title, size: parseFloat(getComputedStyle(e).fontSize),
             left: r.left, top: r.top, right: r.right, bottom: r.bottom };
  })"""


async def test_a_big_memory_reads_at_a_glance(
    upstream: FakeUpstream, tmp_path: Path, backends: Backends
) -> None:
    """Over 300 nodes of memory, at 1280x800: a readable number of nodes drawn (the rest
    folded), every label at least 11 px and none overlapping another, sessions named not
    hashed, the question in the address (restored on reload, back and forward), a page
    that fits, a diff in words and local times, and panels that follow a rollback."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (or `make browser`)")
    config = proxy_config(
        upstream.url, auth={"keys": {KEY: "ui"}}, memory={"retrieval_timeout_ms": 30_000}
    )
    async with inspected_proxy(config, tmp_path / "proxy", backends) as proxy:
        first, second = await _remember_a_lot(proxy)
        async with async_playwright() as pw:
            context = await pw.chromium.launch_persistent_context(
                str(tmp_path / "profile"),
                executable_path=str(CHROMIUM),
                headless=True,
                args=CHROMIUM_ARGS,
                viewport=GLANCE,
            )
            try:
                page = context.pages[0] if context.pages else await context.new_page()
                await _glance(page, proxy, tmp_path, first, second)
            finally:
                await context.close()


async def _remember_a_lot(proxy: Proxy) -> tuple[int, int]:
    """Twelve conversations in two cycles; the graph an area query reads holds 300+ nodes."""
    bodies = conversations()
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {KEY}"}) as http:

        async def call(method: str, path: str, **kwargs: Any) -> Any:
            async with http.request(method, proxy.url + path, **kwargs) as answer:
                assert answer.status == 200, (path, await answer.text())
                return await answer.json()

        for body in bodies[: len(bodies) // 2]:
            await call("POST", "/memory/ingest", json=body)
        first = (await call("POST", "/memory/dream"))["snapshot"]
        for body in bodies[len(bodies) // 2 :]:
            await call("POST", "/memory/ingest", json=body)
        second = (await call("POST", "/memory/dream"))["snapshot"]
        area = await call("GET", "/memory/area", params={"q": BIG_QUESTION, "k": "8"})
    assert area["graph"]["nodes"] >= 300, area["graph"]
    assert area["area"] is not None and len(area["area"]["nodes"]) > MAX_DRAWN
    return first, second


async def _glance(page: Page, proxy: Proxy, folder: Path, first: int, second: int) -> None:
    page.set_default_timeout(15_000)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda message: _csp_violation(message, problems))
    await page.goto(proxy.url + "/ui/")
    await page.fill("#key", KEY)
    await page.click("#key-form button[type=submit]")
    await expect(page.locator("#tenant-state")).to_have_text("tenant ui")
    await page.fill("#q", BIG_QUESTION)
    await page.click("#search-form button[type=submit]")
    await _drawn(page)
    assert "q=Where+does+Rui+live%3F" in page.url and "tenant=ui" in page.url, page.url
    await _shoot(page, folder, "glance-viewport.png")
    await _shoot(page, folder, "glance-full.png", full=True)
    await _readable(page)
    assert await page.evaluate("document.documentElement.scrollHeight") <= 2 * GLANCE["height"]
    await _node_list(page)
    await _unfolded(page, folder)
    await _address(page, proxy)
    await _diff_and_rollback(page, proxy, folder, first, second)
    assert problems == []


async def _drawn(page: Page, question: str = BIG_QUESTION) -> None:
    graph = page.locator("#graph")
    await expect(graph).to_have_attribute("data-state", "drawn")
    await expect(graph).to_have_attribute("data-question", question)
    shown = int(await graph.get_attribute("data-shown-count") or 0)
    total = int(await graph.get_attribute("data-node-count") or 0)
    assert 0 < shown <= MAX_DRAWN < total, (shown, total)
    edges = int(await graph.get_attribute("data-edge-count") or 0)
    assert 0 < edges <= 2 * shown, (edges, shown)  # a skeleton, not every edge
    await expect(page.locator("#graph-more")).to_have_text(f"+{total - shown} more")


async def _readable(page: Page) -> list[dict[str, Any]]:
    """Every visible label of the graph at least 11 px, no two overlapping, no hash."""
    labels: list[dict[str, Any]] = await page.evaluate(_LABELS)
    assert len(labels) >= 10, labels
    small = [(label["text"], label["size"]) for label in labels if label["size"] < MIN_LABEL_PX]
    assert small == [], small
    overlapping = [
        (a["text"], b["text"])
        for i, a in enumerate(labels)
        for b in labels[i + 1 :]
        if a["left"] < b["right"] and b["left"] < a["right"]
        and a["top"] < b["bottom"] and b["top"] < a["bottom"]
    ]
    assert overlapping == [], overlapping
    hashed = [label["title"] for label in labels if HEX_ID.search(label["title"])]
    assert hashed == [], hashed
    sizes = sorted(label["size"] for label in labels)
    print(f"{len(labels)} labels, {sizes[0]}-{sizes[-1]} px, 0 overlapping")  # in -s runs
    return labels


async def _node_list(page: Page) -> None:
    """The node list numbers every node in full (10, 11, ... not clipped)."""
    await page.click("#nodes-details > summary")
    numbers = await page.evaluate(
        """() => { const list = document.getElementById('area-nodes').getBoundingClientRect();
           return [...document.querySelectorAll('#area-nodes .n')].map((n) => {
             const r = n.getBoundingClientRect();
             const whole = n.scrollWidth <= n.clientWidth;
             return [n.textContent, r.left >= list.left - 0.5, whole]; }); }"""
    )
    assert len(numbers) > 9
    assert [n[0] for n in numbers] == [f"{i}." for i in range(1, len(numbers) + 1)]
    assert all(inside and whole for _, inside, whole in numbers), numbers
    await page.click("#nodes-details > summary")


async def _unfolded(page: Page, folder: Path) -> None:
    """"+N more" draws the whole area, still readable, and folds back."""
    total = await page.locator("#graph").get_attribute("data-node-count")
    await page.click("#graph-more")
    await expect(page.locator("#graph")).to_have_attribute("data-shown-count", total or "")
    labels = await _readable(page)
    assert any(" · 2024-04-" in label["title"] for label in labels), "no session drawn"
    await _shoot(page, folder, "glance-unfolded.png", selector="#area-panel")
    await page.click("#all-edges")
    every = int(await page.locator("#graph").get_attribute("data-edge-count") or 0)
    assert every > 2 * len(labels), every
    await page.click("#all-edges")
    await page.click("#graph-more")
    await _drawn(page)


async def _address(page: Page, proxy: Proxy) -> None:
    """The question lives in the address: restored on reload, back and forward."""
    await page.reload()
    await expect(page.locator("#q")).to_have_value(BIG_QUESTION)
    await _drawn(page)
    await page.fill("#q", OTHER_QUESTION)
    await page.click("#search-form button[type=submit]")
    await expect(page).to_have_url(re.compile(r"q=Who\+works\+at\+Atelier\+Norte"))
    await _drawn(page, OTHER_QUESTION)
    await page.go_back()
    await expect(page.locator("#q")).to_have_value(BIG_QUESTION)
    await _drawn(page)
    await page.go_forward()
    await expect(page.locator("#q")).to_have_value(OTHER_QUESTION)
    await _drawn(page, OTHER_QUESTION)
    await page.goto(f"{proxy.url}/ui/?q=Where+does+Rui+live%3F&tenant=someone-else")
    await expect(page.locator("#tenant-warning")).to_contain_text("someone-else")
    await _drawn(page)
    await page.goto(f"{proxy.url}/ui/?q=Where+does+Rui+live%3F&tenant=ui")
    await expect(page.locator("#tenant-warning")).to_be_hidden()
    await _drawn(page)


async def _diff_and_rollback(
    page: Page, proxy: Proxy, folder: Path, first: int, second: int
) -> None:
    """The diff in words and local times; after a rollback the diff shows what it changed
    and the area is drawn again from memory as it now is."""
    await page.click("#history-panel > summary h2")
    await expect(page.locator(f"#snapshots tr[data-snapshot='{second}']")).to_have_count(1)
    await page.select_option("#diff-from", str(first))
    await page.select_option("#diff-to", str(second))
    await page.click("#diff-form button[type=submit]")
    diff = page.locator("#diff")
    await expect(diff).to_have_attribute("data-to", str(second))
    await expect(diff).to_contain_text("context vector changed")
    text = await diff.inner_text()
    assert not BYTE_BLOB.search(text) and not EPOCH.search(text), text[:2000]
    await _shoot(page, folder, "glance-diff.png", selector="#history-panel")
    await page.locator(f"#snapshots button[data-snapshot='{first}']").click()
    await page.click("#rollback-confirm")
    notice = page.locator("#rollback-result")
    await expect(notice).to_contain_text(f"Memory restored to snapshot #{first}")
    made = re.search(r"recorded as snapshot #(\d+)", await notice.inner_text())
    assert made is not None
    await expect(page.locator("body")).to_have_attribute("data-rollbacks", "1")
    await expect(diff).to_have_attribute("data-from", str(second))
    await expect(diff).to_have_attribute("data-to", made.group(1))
    text = await diff.inner_text()
    assert not BYTE_BLOB.search(text) and not EPOCH.search(text), text[:2000]
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {KEY}"}) as http:
        params = {"q": BIG_QUESTION, "k": "8"}
        async with http.get(proxy.url + "/memory/area", params=params) as answer:
            now = await answer.json()
    await expect(page.locator("#graph")).to_have_attribute(
        "data-node-count", str(len(now["area"]["nodes"]))
    )
    await _shoot(page, folder, "glance-after-rollback.png", full=True)


async def _shoot(page: Page, folder: Path, name: str, *, full: bool = False,
                 selector: str | None = None) -> None:
    """A screenshot in the test's folder (and in $AREAMEM_UI_SHOTS when set)."""
    path = folder / name
    if selector is None:
        await page.screenshot(path=str(path), full_page=full)
    else:
        await page.locator(selector).screenshot(path=str(path))
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000, len(data)
    shots = os.environ.get(SHOTS)
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        (Path(shots) / name).write_bytes(data)
