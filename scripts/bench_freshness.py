"""Freshness: seconds from an answer until what it said is retrievable.

What it measures: a proxy (child process, ``areamem serve``) in front of the fake
upstream (child process), ``memory.formation_workers`` set per run (``--workers 0,1``).
Facts are told one per chat, each with a word no other text holds; after each answer
``GET /memory/search?q=<word>`` is polled (every ``--poll-ms``) until the fact's turn is
returned, then the next fact follows ``--gap-s`` later. The time from the end of the
answer to that search is the fact's freshness:
logging, the formation pass (in the proxy or in a worker) and its commit.

Two phases per run: ``light`` (nothing else happens) and ``loaded`` (``--clients``
concurrent clients send other chats, each a new conversation, each client waiting
``--think-s`` between its chats, all the while). Reported per run and phase: freshness
p50/p95/max in seconds, for ``loaded`` the other chats' latency p50/p95 (the answering
the facts' formation runs beside), and the rows still queued for formation at the end
(a queue that grows means the chats arrive faster than formation forms them: freshness
is then the time to work through the backlog, whatever runs it; ``--think-s 0`` shows it,
the fake upstream answering at once).

Usage (from the project root, with the project's virtual environment)::

    python scripts/bench_freshness.py
    python scripts/bench_freshness.py --workers 0,1 --facts 20 --clients 50 --json out.json

Everything runs on 127.0.0.1 in a temporary folder removed at the end; the child
processes are stopped on exit, error and Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from _common import percentile, render_table, sigterm_as_interrupt
from bench_overhead import HOST, BenchError, LocalStack

__all__ = ["main"]

MODEL = "bench-echo"
_WORKER_START_S = 120.0
_FILLER = (
    "Could you summarise the plan for the garden this spring?",
    "What is a good way to keep bread fresh for a week?",
    "Give me three ideas for a rainy afternoon with kids.",
    "How long should I rest after a long run?",
)


@dataclass
class Phase:
    """One run's figures in one phase."""

    workers: int
    phase: str
    freshness_s: list[float] = field(default_factory=list)
    missed: int = 0
    chat_ms: list[float] = field(default_factory=list)
    chat_errors: int = 0
    queued_after: int = 0


class _Stack(LocalStack):
    """The bench stack with ``memory.formation_workers`` set."""

    def __init__(self, workdir: Path, workers: int) -> None:
        super().__init__(workdir)
        self.workers = workers

    def config(self) -> Path:
        path = self.workdir / "config.yaml"
        config = {
            "server": {"host": HOST, "port": 0, "data_dir": str(self.data_dir)},
            "auth": {"mode": "open"},
            "upstreams": [
                {"model": "*", "provider": "openai", "api_base": f"{self.upstream_url}/v1"}
            ],
            "logging": {"stdout": False, "file": True},
            "memory": {"retrieval": "bm25", "formation_workers": self.workers},
            "policy": {"rules": [{"type": "first_turn"}]},
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return path


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    sigterm_as_interrupt()
    phases: list[Phase] = []
    try:
        for workers in args.workers:
            with (
                tempfile.TemporaryDirectory(prefix="bench-freshness-") as folder,
                _Stack(Path(folder), workers) as stack,
            ):
                phases.extend(asyncio.run(_run(stack, workers, args)))
    except BenchError as exc:
        print(f"bench_freshness: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench_freshness: interrupted", file=sys.stderr)
        return 130
    print(_table(phases))
    if args.json:
        args.json.write_text(json.dumps([asdict(p) for p in phases], indent=2), encoding="utf-8")
    return 0


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="0,1", help="formation_workers values (0,1)")
    parser.add_argument("--facts", type=int, default=20, help="facts per phase (20)")
    parser.add_argument("--clients", type=int, default=50, help="other clients, loaded (50)")
    parser.add_argument("--think-s", type=float, default=5.0, help="between a client's chats (5)")
    parser.add_argument("--gap-s", type=float, default=1.0, help="after a fact is found (1)")
    parser.add_argument("--poll-ms", type=float, default=20.0, help="search poll period (20)")
    parser.add_argument("--timeout", type=float, default=60.0, help="give a fact up after (60 s)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    args.workers = [int(w) for w in args.workers.split(",") if w.strip()]
    return args


async def _run(stack: LocalStack, workers: int, args: argparse.Namespace) -> list[Phase]:
    url = stack.proxy_url
    async with aiohttp.ClientSession() as http:
        await _ready(http, url, workers)
        light = Phase(workers, "light")
        await _tell_facts(http, url, light, args)
        light.queued_after = await _queued(http, url)
        loaded = Phase(workers, "loaded")
        stop = asyncio.Event()
        others = [
            asyncio.create_task(_chatter(http, url, loaded, stop, args.think_s))
            for _ in range(args.clients)
        ]
        await asyncio.sleep(args.think_s + 1.0)  # every client is on before the first fact
        try:
            await _tell_facts(http, url, loaded, args)
            loaded.queued_after = await _queued(http, url)
        finally:
            stop.set()
            await asyncio.gather(*others, return_exceptions=True)
    return [light, loaded]


async def _ready(http: aiohttp.ClientSession, url: str, workers: int) -> None:
    """Until ``/readyz`` is 200 and every formation worker has loaded its models."""
    deadline = time.monotonic() + _WORKER_START_S
    while time.monotonic() < deadline:
        async with http.get(url + "/readyz") as ready, http.get(url + "/healthz") as health:
            states = (await health.json()).get("formation_workers", [])
            if ready.status == 200 and sum(s["ready"] for s in states) >= workers:
                return
        await asyncio.sleep(0.1)
    raise BenchError(f"the proxy or its formation workers not ready within {_WORKER_START_S} s")


async def _tell_facts(
    http: aiohttp.ClientSession, url: str, phase: Phase, args: argparse.Namespace
) -> None:
    for _ in range(args.facts):
        word = "zq" + uuid.uuid4().hex[:10]
        fact = f"Remember that my locker code word is {word} from now on."
        if await _chat(http, url, fact) is None:
            raise BenchError("a fact's chat failed")
        told = time.perf_counter()
        while not await _found(http, url, word):
            if time.perf_counter() - told > args.timeout:
                phase.missed += 1
                break
            await asyncio.sleep(args.poll_ms / 1000)
        else:
            phase.freshness_s.append(time.perf_counter() - told)
        await asyncio.sleep(args.gap_s)  # under load: the other chats go on meanwhile


async def _chat(http: aiohttp.ClientSession, url: str, text: str) -> float | None:
    """One chat in a new conversation; its latency in ms, None when it failed."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}]}
    began = time.perf_counter()
    headers = {"X-Conversation-Id": uuid.uuid4().hex}
    async with http.post(url + "/v1/chat/completions", json=body, headers=headers) as r:
        await r.read()
        return (time.perf_counter() - began) * 1000 if r.status == 200 else None


async def _queued(http: aiohttp.ClientSession, url: str) -> int:
    async with http.get(url + "/memory/stats") as r:
        return int((await r.json())["queued"])


async def _found(http: aiohttp.ClientSession, url: str, word: str) -> bool:
    async with http.get(url + "/memory/search", params={"q": word, "k": "3"}) as r:
        if r.status != 200:  # 503 memory busy under load: poll again
            return False
        hits: list[dict[str, Any]] = (await r.json())["hits"]
    return any(word in hit["text"] for hit in hits)


async def _chatter(
    http: aiohttp.ClientSession, url: str, phase: Phase, stop: asyncio.Event, think_s: float
) -> None:
    i = 0
    with contextlib.suppress(TimeoutError):  # a random start: the clients do not march
        await asyncio.wait_for(stop.wait(), random.uniform(0, think_s))
    while not stop.is_set():
        ms = await _chat(http, url, f"{_FILLER[i % len(_FILLER)]} (#{i})")
        if ms is None:
            phase.chat_errors += 1
        else:
            phase.chat_ms.append(ms)
        i += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), think_s)


def _table(phases: Sequence[Phase]) -> str:
    rows = []
    for p in phases:
        s = p.freshness_s
        chats = p.chat_ms
        rows.append(
            [
                f"workers={p.workers} {p.phase}",
                str(len(s)),
                f"{percentile(s, 50):.2f}",
                f"{percentile(s, 95):.2f}",
                f"{max(s):.2f}" if s else "-",
                str(p.missed),
                f"{percentile(chats, 50):.1f}" if chats else "-",
                f"{percentile(chats, 95):.1f}" if chats else "-",
                str(len(chats)),
                str(p.chat_errors),
                str(p.queued_after),
            ]
        )
    headers = [
        "run", "facts", "fresh p50 s", "p95 s", "max s", "missed",
        "other chat p50 ms", "p95 ms", "other chats", "errors", "queued after",
    ]  # fmt: skip
    return render_table(headers, rows)


if __name__ == "__main__":
    raise SystemExit(main())
