"""Start-up and shutdown of the real ``areamem serve`` process (issue 9, defects 8 and 11).

The proxy runs as a subprocess on a loopback port in front of the in-process fake
upstream; signals are real. Waits are hang guards (the process must end), never timings
asserted as figures.
"""

from __future__ import annotations

import asyncio
import json
import signal
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from proxy.fake_upstream import FakeUpstream
from proxy.http.request_log import RequestLog

from .served import Served, chat, ready, serve_config

pytestmark = pytest.mark.e2e

@pytest.fixture
def serve(tmp_path: Path, upstream: FakeUpstream) -> Iterator[Any]:
    started: list[Served] = []

    def start(**memory: Any) -> Served:
        config = serve_config(tmp_path, upstream.url, memory=memory)
        served = Served(config, "--port", "0", keep_stderr=False)
        started.append(served)
        served.banner()
        return served

    yield start
    for served in started:
        served.kill()


async def _ingest_background(served: Served, turns: int) -> None:
    messages = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Note {i}: Ana met Bo in Lisbon.",
        }
        for i in range(turns)
    ]
    async with aiohttp.ClientSession() as http:
        async with http.post(
            served.url + "/memory/ingest",
            params={"form": "background"},
            json={"conversation_id": "bulk", "messages": messages},
        ) as r:
            assert r.status == 200, await r.text()


async def _queued(served: Served) -> int:
    async with aiohttp.ClientSession() as http, http.get(served.url + "/memory/stats") as r:
        return int((await r.json())["queued"])


async def test_ready_only_once_warm_and_sigterm_after_a_chat_exits_promptly(serve: Any) -> None:
    served = serve()
    statuses = await ready(served)
    assert statuses[-1] == 200 and set(statuses) <= {200, 503}
    assert await chat(served, "hello") == 200
    began = time.monotonic()
    served.signal(signal.SIGTERM)
    assert served.wait(30) == 0
    events = [r.get("event") for r in served.records()]
    assert events.index("ready") < events.index("chat") < events.index("shutdown")
    assert time.monotonic() - began < 30


async def test_sigterm_during_formation_exits_within_grace_and_keeps_the_queue(
    serve: Any,
) -> None:
    served = serve(formation_grace_ms=0)
    await ready(served)
    await _ingest_background(served, 1000)
    await asyncio.sleep(0.5)  # formation is running on its thread now
    served.signal(signal.SIGTERM)
    assert served.wait(30) == 0  # grace 2 s; the formation batch is left behind
    again = serve()
    await ready(again)
    for _ in range(1200):  # the rows left queued are formed after the restart
        if await _queued(again) == 0:
            break
        await asyncio.sleep(0.1)
    assert await _queued(again) == 0


async def test_a_second_signal_exits_at_once(serve: Any) -> None:
    served = serve(formation_grace_ms=0)
    await ready(served)
    await _ingest_background(served, 3000)
    first = await _queued(served)
    for _ in range(600):  # formation is under way, so the first signal waits its grace
        if await _queued(served) < first:
            break
        await asyncio.sleep(0.1)
    served.signal(signal.SIGTERM)
    await asyncio.sleep(0.02)  # delivered (not merged with the next), shutdown under way
    served.signal(signal.SIGTERM)
    assert served.wait(30) == 1
    assert "shutdown_now" in [r.get("event") for r in served.records()]


def test_a_record_written_after_the_log_is_closed_still_reaches_the_file(tmp_path: Path) -> None:
    """CI regression: a second SIGTERM landed after shutdown had closed the log; the
    process exited at once (code 1) but its ``shutdown_now`` line reached stdout only."""
    path = tmp_path / "logs" / "proxy.jsonl"
    log = RequestLog(path, stdout=False)
    log.write({"event": "shutdown"})
    log.close()
    log.write({"event": "shutdown_now"})
    events = [json.loads(line)["event"] for line in path.read_text().splitlines()]
    assert events == ["shutdown", "shutdown_now"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
