"""Formation in worker processes (``memory.formation_workers: 1``).

A real proxy on loopback in front of the fake upstream; the worker is a real process
(killed with a real SIGKILL); the shutdown test runs ``areamem serve`` as a subprocess
and looks for what it left in ``/proc``. Waits are deadlines that polls must beat,
never timings asserted as figures.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from openai.types.chat import ChatCompletionMessageParam

from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy, proxy_config
from .served import Served

pytestmark = pytest.mark.e2e

WORKERS = {"formation_workers": 1}
_START_S = 60.0  # a worker loads its models first (seconds, more on a busy machine)


async def _health(url: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(url + "/healthz") as r:
        assert r.status == 200
        return dict(await r.json())


async def _worker_ready(url: str, *, restarts: int = 0) -> dict[str, Any]:
    """The worker's health entry once it has restarted ``restarts`` times and is ready."""
    deadline = time.monotonic() + _START_S
    while time.monotonic() < deadline:
        (worker,) = (await _health(url))["formation_workers"]
        if worker["ready"] and worker["alive"] and worker["restarts"] >= restarts:
            return dict(worker)
        await asyncio.sleep(0.05)
    raise AssertionError(f"formation worker not ready within {_START_S} s")


async def _queued(http: aiohttp.ClientSession, url: str) -> int:
    async with http.get(url + "/memory/stats") as r:
        return int((await r.json())["queued"])


async def _found(proxy: Proxy, query: str, text: str) -> bool:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/search", params={"q": query}) as r:
            hits = (await r.json())["hits"] if r.status == 200 else []
    return any(text in hit["text"] for hit in hits)


def _formed_once(data_dir: Path) -> tuple[int, int, int, int]:
    """(log rows, log rows with fragments, fragments, queued rows) of the default tenant."""
    with sqlite3.connect(f"file:{data_dir / 'tenants' / 'default.db'}?mode=ro", uri=True) as db:
        logged = db.execute("SELECT COUNT(*) FROM log").fetchone()[0]
        formed, fragments = db.execute(
            "SELECT COUNT(DISTINCT log_id), COUNT(*) FROM fragments"
        ).fetchone()
        queued = db.execute("SELECT COUNT(*) FROM queue").fetchone()[0]
    return int(logged), int(formed), int(fragments), int(queued)


def _assert_yields(worker: dict[str, Any]) -> None:
    """The worker runs below the proxy: under SCHED_IDLE where it may come back from it
    (its guard thread alone under the normal policy), else at nice 19; /healthz says
    which."""
    pid, tasks = worker["pid"], Path(f"/proc/{worker['pid']}/task")
    policies = {os.sched_getscheduler(int(t.name)) for t in tasks.iterdir()}
    assert os.getpriority(os.PRIO_PROCESS, pid) == 19
    if worker["priority"] == "idle":
        assert os.sched_getscheduler(pid) == os.SCHED_IDLE
        assert policies == {os.SCHED_IDLE, os.SCHED_OTHER}
    else:
        assert worker["priority"] == "nice" and policies == {os.SCHED_OTHER}


async def test_a_fact_told_is_recalled_by_the_next_chat_within_seconds(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await make_proxy(proxy_config(upstream.url, memory=WORKERS))
    worker = await _worker_ready(proxy.url)
    _assert_yields(worker)
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo",
            messages=[{"role": "user", "content": "My sister Ana keeps bees in Porto."}],
        )
        told = time.monotonic()
        while not await _found(proxy, "sister bees", "Ana keeps bees"):
            assert time.monotonic() - told < 30, "not retrievable 30 s after the answer"
            await asyncio.sleep(0.05)
        await proxy.settle()  # the graph has read the new rows too
        question: ChatCompletionMessageParam = {
            "role": "user", "content": "Do you remember what my sister keeps?"
        }
        await client.chat.completions.create(model="echo", messages=[question])
    memory = upstream.requests[-1].body["messages"][-2]
    assert "<retrieved_memory>" in memory["content"]
    assert "Ana keeps bees in Porto" in memory["content"]
    assert proxy.services.tenants.get("default").store.names.mentioned("Ana")  # names learned
    formed = [r for r in proxy.log_records() if r.get("event") == "formed"]
    assert formed and all(r["by"].startswith("worker ") for r in formed)  # a line each pass
    assert sum(r["rows"] for r in formed) >= 2 and all(r["ms"] > 0 for r in formed)


async def test_a_killed_worker_is_restarted_and_every_exchange_is_formed_once(
    upstream: FakeUpstream, make_proxy: MakeProxy
) -> None:
    proxy = await make_proxy(proxy_config(upstream.url, memory=WORKERS))
    pid = (await _worker_ready(proxy.url))["pid"]

    async def chat(i: int) -> None:
        async with proxy.client() as client:
            await client.chat.completions.create(
                model="echo",
                messages=[{"role": "user", "content": f"Note {i}: Bo fed the cat in Lyon."}],
            )

    await asyncio.gather(*(chat(i) for i in range(10)))
    os.kill(pid, signal.SIGKILL)  # mid-run: formation of those ten is under way
    await asyncio.gather(*(chat(i) for i in range(10, 20)))  # answered meanwhile
    worker = await _worker_ready(proxy.url, restarts=1)
    assert worker["pid"] != pid
    await proxy.settle()  # the new worker forms what the dead one left
    logged, formed, fragments, queued = _formed_once(proxy.data_dir)
    assert logged == 40 and queued == 0
    assert formed == logged == fragments  # every row formed, none twice
    assert b"areamem_formation_worker_restarts_total 1.0" in proxy.services.metrics.render()
    died = [r for r in proxy.log_records() if r.get("event") == "formation_worker_died"]
    assert len(died) == 1 and died[0]["exitcode"] == -signal.SIGKILL


def _children(pid: int) -> set[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"  # exited, waiting for init to reap it


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
async def test_sigterm_stops_the_workers_and_leaves_no_process(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    config = proxy_config(upstream.url, memory=WORKERS)
    config["server"].update({"data_dir": str(tmp_path / "data"), "shutdown_grace_s": 2})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    served = Served(path, "--port", "0", keep_stderr=False)
    try:
        served.banner()
        worker = await _worker_ready(served.url)
        children = _children(served.process.pid)
        assert worker["pid"] in children
        body = {"model": "echo", "messages": [{"role": "user", "content": "Ants farm aphids."}]}
        async with aiohttp.ClientSession() as http:
            async with http.post(served.url + "/v1/chat/completions", json=body) as r:
                assert r.status == 200
            while await _queued(http, served.url):
                await asyncio.sleep(0.05)  # formed: the worker waits for work now
        served.signal(signal.SIGTERM)
        assert served.wait(30) == 0
        deadline = time.monotonic() + 10
        while not all(_gone(child) for child in children):
            assert time.monotonic() < deadline, [c for c in children if not _gone(c)]
            await asyncio.sleep(0.05)
    finally:
        served.kill()
    events = [r.get("event") for r in served.records()]
    assert "formation_workers_ended" not in events  # stopped by asking, not by a kill
