"""Issue 13's acceptance, through a real proxy: replay, dream, rollback, as of, undo.

Everything goes through the real ingestion path (``POST /memory/ingest``), the real
``openai`` client for chat (the fake upstream records what memory injected), and the
admin API for cycles, snapshots and rollback; SQLite files in a temp folder.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import apsw
import pytest
import yaml

from memory_core.storage.journal import TRACKED
from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy, proxy_config

pytestmark = pytest.mark.e2e

Json = dict[str, Any]


def _turns(conversation: str, day: str, turns: list[tuple[str, str]]) -> Json:
    messages = [
        {
            "role": role,
            **({"name": "Maya"} if role == "user" else {}),
            "content": text,
            "timestamp": f"{day}T10:{i:02d}:00",
        }
        for i, (role, text) in enumerate(turns)
    ]
    return {"conversation_id": conversation, "messages": messages}


FIRST = _turns(
    "week-1",
    "2024-03-01",
    [
        ("user", "I live in Paris and I work at Google."),
        ("assistant", "Paris is lovely. How is Google?"),
        ("user", "I met Bob at the climbing gym yesterday. Bob is a great climber."),
        ("assistant", "Climbing sounds fun."),
        ("user", "My sister Anna loves jazz and she plays the piano."),
        ("assistant", "Nice!"),
    ],
)
LATER = _turns(
    "week-2",
    "2024-03-09",
    [
        ("user", "Robert, also known as Bob, fixed my bike today."),
        ("assistant", "Good friend."),
        ("user", "Actually, I moved to Lisbon last month."),
        ("assistant", "Lisbon is great."),
        ("user", "I work at Apple."),
        ("assistant", "Cool."),
    ],
)
QUESTIONS = (
    "Where does Maya live?",
    "Where does Maya work?",
    "Who fixed the bike?",
    "What does Anna love?",
)


class Admin:
    """The admin API of one proxy, failing loudly on an unexpected status."""

    def __init__(self, http: aiohttp.ClientSession, proxy: Proxy) -> None:
        self.http, self.url = http, proxy.url

    async def call(self, method: str, path: str, *, status: int = 200, **kwargs: Any) -> Any:
        async with self.http.request(method, self.url + path, **kwargs) as response:
            body = await response.text()
            assert response.status == status, f"{method} {path}: {response.status} {body}"
            return json.loads(body)

    async def area(self, question: str, as_of: int | None = None) -> Json:
        params = {"q": question, **({"as_of": str(as_of)} if as_of else {})}
        found = await self.call("GET", "/memory/area", params=params)
        return _stable(found)

    async def areas(self, as_of: int | None = None) -> list[Json]:
        return [await self.area(q, as_of) for q in QUESTIONS]


def _stable(area: Json) -> Json:
    """An area answer without what differs between two reads of one state (the graph's
    version number and the timings)."""
    kept = {k: v for k, v in area.items() if k not in ("graph_version", "timings_ms")}
    plain: dict[str, Any] = json.loads(json.dumps(kept, sort_keys=True))
    return plain


async def _injected(proxy: Proxy, upstream: FakeUpstream, as_of: int | None = None) -> list[str]:
    """The memory block each question gets injected (as the upstream received it)."""
    texts = []
    headers = {"X-Memory": "force", **({"X-Memory-As-Of": str(as_of)} if as_of else {})}
    async with proxy.client() as client:
        for question in QUESTIONS:
            await client.chat.completions.create(
                model="echo",
                messages=[{"role": "user", "content": question}],
                extra_headers=headers,
            )
            first = upstream.requests[-1].body["messages"][0]
            texts.append(first["content"] if first["role"] == "system" else "")
    return texts


def _derived(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of derived memory, table by table, in key order."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {t: list(conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2")) for t in sorted(TRACKED)}
    finally:
        conn.close()


async def _proxy(make_proxy: MakeProxy, upstream: FakeUpstream) -> Proxy:
    """A proxy that stores no chat exchange (the questions must not change memory), runs
    no automatic cycle, and gives lookups all the time they need on a busy machine."""
    config = proxy_config(
        upstream.url,
        memory={"ingest": False, "retrieval_timeout_ms": 60_000, "formation_workers": 0},
        policy={"rules": [{"type": "always"}], "dream": {"enabled": False}},
    )
    return await make_proxy(config)


async def test_dream_rollback_as_of_and_undo(upstream: FakeUpstream, make_proxy: MakeProxy) -> None:
    proxy = await _proxy(make_proxy, upstream)
    database = proxy.data_dir / "tenants" / "default.db"
    async with aiohttp.ClientSession() as http:
        admin = Admin(http, proxy)
        await admin.call("POST", "/memory/ingest", json=FIRST)
        s1 = (await admin.call("POST", "/memory/dream"))["snapshot"]
        areas_s1, texts_s1 = await admin.areas(), await _injected(proxy, upstream)
        assert any("Paris" in text for text in texts_s1)

        await admin.call("POST", "/memory/ingest", json=LATER)
        report = await admin.call("POST", "/memory/dream")
        s2 = report["snapshot"]
        _check_report(report)
        areas_s2, texts_s2 = await admin.areas(), await _injected(proxy, upstream)
        rows_s2 = _derived(database)
        assert areas_s2 != areas_s1 and texts_s2 != texts_s1
        assert any("Lisbon" in text for text in texts_s2)

        # as of S1, while the current state stays S2
        assert await admin.areas(as_of=s1) == areas_s1
        assert await _injected(proxy, upstream, as_of=s1) == texts_s1
        assert await admin.areas() == areas_s2

        restored = await admin.call("POST", "/memory/rollback", json={"snapshot": s1})
        assert restored["restored"] == s1 and restored["held"] == len(LATER["messages"])
        held_texts = {m["text"] for m in restored["held_messages"]}
        assert held_texts == {m["content"] for m in LATER["messages"]}
        assert await admin.areas() == areas_s1
        assert await _injected(proxy, upstream) == texts_s1
        stats = await admin.call("GET", "/memory/stats")
        assert stats["log_messages"] == len(FIRST["messages"]) + len(LATER["messages"])
        assert stats["held"] == len(LATER["messages"])
        assert stats["live_fragments"] == len(FIRST["messages"])

        again = await admin.call("POST", "/memory/dream")
        assert again["released"] == again["formed"] == len(LATER["messages"])
        assert again["totals"].get("merge_entities") == 1  # formed again, consolidated again
        assert (await admin.call("GET", "/memory/stats"))["held"] == 0

        undo = restored["snapshot"] - 1  # the snapshot before the rollback's own
        assert undo == s2
        await admin.call("POST", "/memory/rollback", json={"snapshot": undo})
        assert await admin.areas() == areas_s2
        assert await _injected(proxy, upstream) == texts_s2
        assert _derived(database) == rows_s2  # S2 exactly, row for row
        listed = await admin.call("GET", "/memory/snapshots")
        kinds = [s["kind"] for s in reversed(listed["snapshots"])]
        assert kinds == ["cycle", "cycle", "rollback", "cycle", "rollback"]


def _check_report(report: Json) -> None:
    """The second cycle lists the merge, the change and the conflict, with sources."""
    by_kind: dict[str, list[Json]] = {}
    for decision in report["decisions"]:
        by_kind.setdefault(decision["kind"], []).append(decision)
    [merge] = by_kind["merge_entities"]
    assert set(merge["subjects"]) == {"Bob", "Robert"}
    assert {s["conversation_id"] for s in merge["sources"]} == {"week-1", "week-2"}
    assert "alias statement" in merge["reason"]
    [change] = by_kind["change"]
    assert change["subjects"] == ["Maya lives_in Lisbon", "Maya lives_in Paris"]
    assert {s["text"] for s in change["sources"]} == {
        "Actually, I moved to Lisbon last month.",
        "I live in Paris and I work at Google.",
    }
    [conflict] = by_kind["conflict"]
    assert conflict["subjects"] == ["Maya works_at Apple", "Maya works_at Google"]
    assert len(conflict["sources"]) == 2
    assert report["totals"]["merge_entities"] == 1 and report["rows_changed"] > 0


async def test_queries_during_a_rollback_read_one_version(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await _proxy(make_proxy, upstream)
    question = QUESTIONS[0]
    async with aiohttp.ClientSession() as http:
        admin = Admin(http, proxy)
        await admin.call("POST", "/memory/ingest", json=FIRST)
        s1 = (await admin.call("POST", "/memory/dream"))["snapshot"]
        before = await admin.area(question)
        await admin.call("POST", "/memory/ingest", json=LATER)
        await admin.call("POST", "/memory/dream")
        after = await admin.area(question)
        assert before != after
        seen: list[Json] = []
        stop = asyncio.Event()

        async def ask() -> None:
            while not stop.is_set():
                seen.append(await admin.area(question))

        readers = [asyncio.ensure_future(ask()) for _ in range(3)]
        await asyncio.sleep(0.2)
        await admin.call("POST", "/memory/rollback", json={"snapshot": s1})
        await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(*readers)
    assert seen[0] == after and seen[-1] == before
    assert all(area in (before, after) for area in seen)  # never a mix of the two


async def test_a_second_cycle_for_the_tenant_is_refused(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    from memory_core.store.exclusive import exclusive

    proxy = await _proxy(make_proxy, upstream)
    database = proxy.data_dir / "tenants" / "default.db"
    async with aiohttp.ClientSession() as http:
        admin = Admin(http, proxy)
        await admin.call("POST", "/memory/ingest", json=FIRST)
        with exclusive(database, "a test's cycle"):  # as another process would hold it
            busy = await admin.call("POST", "/memory/dream", status=409)
            assert busy["error"]["code"] == "memory_busy"
            await admin.call("POST", "/memory/rollback", json={"snapshot": 1}, status=409)
        assert (await admin.call("POST", "/memory/dream"))["snapshot"] == 1


async def test_bad_history_input_is_refused_clearly(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await _proxy(make_proxy, upstream)
    async with aiohttp.ClientSession() as http:
        admin = Admin(http, proxy)
        await admin.call("POST", "/memory/ingest", json=FIRST)
        await admin.call("POST", "/memory/dream")
        for body in (
            {"snapshot": True},
            {"snapshot": "1"},
            {"snapshot": 1.0},
            {"snapshot": 10**30},
            {"snapshot": 1, "reform": "yes"},
            {"snapshot": 1, "extra": 1},
            {},
            [1],
        ):
            refused = await admin.call("POST", "/memory/rollback", json=body, status=400)
            assert refused["error"]["type"] == "invalid_request_error", body
        await admin.call("POST", "/memory/rollback", data=b"{", status=400,
                         headers={"Content-Type": "application/json"})  # fmt: skip
        for value in ("abc", "-1", "0", "\u0663", "1e3", "9" * 40, " "):
            await admin.call("GET", "/memory/snapshots", params={"before": value}, status=400)
        for path in ("/memory/snapshots/\u0663", "/memory/snapshots/1/diff/-2"):
            await admin.call("GET", path, status=400)
        async with proxy.client() as client:
            for value in ("abc", "1.5", "-3", "9" * 40):
                try:
                    await client.chat.completions.create(
                        model="echo",
                        messages=[{"role": "user", "content": "hi"}],
                        extra_headers={"X-Memory-As-Of": value},
                    )
                except Exception as exc:  # openai.BadRequestError
                    assert "X-Memory-As-Of" in str(exc), value
                else:
                    raise AssertionError(f"X-Memory-As-Of {value!r} was accepted")
        stats = await admin.call("GET", "/memory/stats")
        assert stats["log_messages"] == len(FIRST["messages"])  # nothing refused was stored


async def _until(check: Any, what: str, limit_s: float = 60.0) -> Any:
    deadline = asyncio.get_running_loop().time() + limit_s
    while True:
        found = await check()
        if found:
            return found
        assert asyncio.get_running_loop().time() < deadline, f"{what} within {limit_s} s"
        await asyncio.sleep(0.1)


async def test_the_dream_policy_starts_cycles_and_is_hot_reloaded(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    config = proxy_config(
        upstream.url,
        memory={"formation_workers": 0},
        policy={"dream": {"enabled": False}},
    )
    proxy = await make_proxy(config)
    scheduler = proxy.services.dreams
    assert scheduler is not None
    scheduler.policy_every = 1  # a look at the policy every tick (a second)

    async def asked(words: str) -> bool:  # the policy was asked and said this
        return words in scheduler.last_decisions.get("default", "")

    async with aiohttp.ClientSession() as http:
        admin = Admin(http, proxy)
        await admin.call("POST", "/memory/ingest", json=FIRST)
        await _until(lambda: asked("disabled"), "the policy asked", 30)
        assert (await admin.call("GET", "/memory/snapshots"))["snapshots"] == []
        config["policy"] = {"dream": {"rules": [{"type": "material", "messages": 4}]}}
        proxy.config_path.write_text(yaml.safe_dump(config, sort_keys=False))

        async def cycled() -> list[Json]:
            return list((await admin.call("GET", "/memory/snapshots"))["snapshots"])

        [snapshot] = await _until(cycled, "an automatic cycle")
        assert snapshot["kind"] == "cycle"
        assert snapshot["trigger"].startswith("policy: rule 1 'material'")
        await _until(lambda: asked("only 0 new messages"), "the policy asked again", 30)
        assert len(await cycled()) == 1  # nothing new since: no second cycle
    events = [r for r in proxy.log_records() if r.get("event", "").startswith("dream")]
    assert [e["event"] for e in events] == ["dream_started", "dream_done"]
    done = events[-1]  # one line, by the store, with what the cycle did
    assert done["tenant"] == "default" and done["formed"] >= 0 and done["rows_changed"] > 0
    assert isinstance(done["decisions"], dict) and done["trigger"].startswith("policy:")
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/metrics") as r:
        assert 'areamem_dream_cycles_total{trigger="policy"} 1.0' in await r.text()


async def test_a_cycle_forms_held_messages_through_the_worker_process(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    config = proxy_config(
        upstream.url,
        memory={"formation_workers": 1, "ingest": False},
        policy={"dream": {"enabled": False}},
    )
    proxy = await make_proxy(config)
    async with aiohttp.ClientSession() as http:
        admin = Admin(http, proxy)
        await admin.call("POST", "/memory/ingest", json=FIRST)  # formed by the worker
        s1 = (await admin.call("POST", "/memory/dream"))["snapshot"]
        await admin.call("POST", "/memory/ingest", json=LATER)
        await admin.call("POST", "/memory/dream")
        restored = await admin.call("POST", "/memory/rollback", json={"snapshot": s1})
        assert restored["held"] == len(LATER["messages"])
        report = await admin.call("POST", "/memory/dream")
        assert report["released"] == report["formed"] == len(LATER["messages"])
        assert report["totals"]["merge_entities"] == 1
        found = await admin.call("GET", "/memory/search", params={"q": "Lisbon"})
        assert any("Lisbon" in hit["text"] for hit in found["hits"])


async def test_copies_as_of_snapshots_are_bounded_and_removed_at_shutdown(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await _proxy(make_proxy, upstream)
    copies = proxy.data_dir / "as_of"
    async with aiohttp.ClientSession() as http:
        admin = Admin(http, proxy)
        snapshots = []
        for i in range(3):
            await admin.call("POST", "/memory/ingest", json={**FIRST, "conversation_id": f"w{i}"})
            snapshots.append((await admin.call("POST", "/memory/dream"))["snapshot"])
        for snapshot in snapshots:
            await admin.area(QUESTIONS[0], as_of=snapshot)
            assert 1 <= len(list(copies.glob("*.db"))) <= 2  # the two most recent kept
    await proxy.server.close()
    assert list(copies.glob("*")) == []


async def _proxy_whose_cycle_model_hangs(
    upstream: FakeUpstream, make_proxy: MakeProxy, *, timeout_s: float
) -> Proxy:
    """A proxy whose cycles ask a model that never answers (until ``timeout_s``); memory
    always consulted, nothing ingested by chat, no cycle of its own accord."""
    upstream.keep_alive = False  # litellm's synchronous client keeps no socket beyond
    llm = {"model": "hang", "api_base": upstream.url, "timeout_s": timeout_s}
    dream = {"backend": "llm", "llm": llm}
    config = proxy_config(
        upstream.url,
        memory={"ingest": False, "retrieval_timeout_ms": 60_000, "formation_workers": 0},
        policy={"rules": [{"type": "always"}], "dream": {"enabled": False}},
        dream=dream,
    )
    return await make_proxy(config)


async def test_chat_goes_on_with_memory_while_a_cycle_waits_for_its_model(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """The cycle's model never answers (until its timeout): meanwhile chat is answered
    at once, with memory; the cycle then reports the failure and merges nothing."""
    proxy = await _proxy_whose_cycle_model_hangs(upstream, make_proxy, timeout_s=2)
    async with aiohttp.ClientSession() as http:
        admin = Admin(http, proxy)
        await admin.call("POST", "/memory/ingest", json=FIRST)
        await admin.call("POST", "/memory/ingest", json=LATER)
        cycle = asyncio.ensure_future(admin.call("POST", "/memory/dream"))
        await _until(lambda: _judging(upstream), "the cycle asking its model", 30)
        began = asyncio.get_running_loop().time()
        texts = await _injected(proxy, upstream)
        assert asyncio.get_running_loop().time() - began < 1.8  # not after the model
        assert not cycle.done()
        assert any("Lisbon" in text for text in texts)
        report = await cycle
    assert report["failures"] and report["totals"].get("merge_entities") is None


async def test_a_rollback_or_a_cycle_asked_while_a_cycle_runs_here_is_refused(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    """In one process the second request found the formation thread busy with the first
    and waited behind it (as long as the cycle's model took), then ran: a rollback asked
    during a cycle undid the cycle it waited for. Refused at once instead, as when another
    process runs the cycle, and nothing changed."""
    proxy = await _proxy_whose_cycle_model_hangs(upstream, make_proxy, timeout_s=4)
    async with aiohttp.ClientSession() as http:
        admin = Admin(http, proxy)
        await admin.call("POST", "/memory/ingest", json=FIRST)
        first = await admin.call("POST", "/memory/dream")
        await admin.call("POST", "/memory/ingest", json=LATER)
        upstream.requests.clear()
        cycle = asyncio.ensure_future(admin.call("POST", "/memory/dream"))
        await _until(lambda: _judging(upstream), "the cycle asking its model", 30)
        began = asyncio.get_running_loop().time()
        rollback = {"snapshot": first["snapshot"]}
        for path, body in (("/memory/rollback", rollback), ("/memory/dream", None)):
            busy = await admin.call("POST", path, json=body, status=409)
            assert busy["error"]["code"] == "memory_busy"
        assert asyncio.get_running_loop().time() - began < 2  # not after the cycle's model
        assert not cycle.done()
        report = await cycle
        listed = await admin.call("GET", "/memory/snapshots")
    assert [s["id"] for s in listed["snapshots"]] == [report["snapshot"], first["snapshot"]]


async def _judging(upstream: FakeUpstream) -> bool:
    return any(r.body.get("model") == "hang" for r in upstream.requests)
