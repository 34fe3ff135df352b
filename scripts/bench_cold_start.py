"""Cold start: is the first chat after a restart as fast as the hundredth?

A proxy is started on a folder holding one tenant with ``--fragments`` synthetic turns,
restarted (a new process: nothing loaded), and sent ``--requests`` chats one after the
other, each forcing memory (``X-Memory: force``). The first request goes out either once
``/readyz`` answers 200 (``--wait ready``, what a load balancer does) or as soon as the
process accepts connections (``--wait listen``). Prints, per request number, the client's
time and the proxy's own ``retrieval_ms`` (from its log), and the ratio of the first to
the median of the rest.

Usage (from the project root, with the project's virtual environment)::

    python scripts/bench_cold_start.py [--fragments 2000] [--requests 100]
        [--retrieval area|bm25] [--wait ready|listen]

Everything runs on 127.0.0.1 in a temporary folder removed at the end; the child
processes are stopped on exit, error and Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import aiohttp
from _common import percentile, render_table, sigterm_as_interrupt
from _synthetic import synthetic_conversation
from bench_overhead import BenchError
from load import PacedStack, chat_records

_TURNS_PER_CONVERSATION = 20
_READY_POLL_S = 0.05


async def _ingest(stack: PacedStack, fragments: int, seed: int) -> None:
    rng = random.Random(seed)
    async with aiohttp.ClientSession(stack.proxy_url) as http:
        for start in range(0, fragments, _TURNS_PER_CONVERSATION):
            size = min(_TURNS_PER_CONVERSATION, fragments - start)
            payload = {
                "conversation_id": f"cold-{start}",
                "messages": synthetic_conversation(rng, size),
            }
            async with http.post("/memory/ingest", json=payload) as r:
                if r.status != 200:
                    raise BenchError(f"/memory/ingest: HTTP {r.status}: {await r.text()}")


async def _until_ready(http: aiohttp.ClientSession) -> None:
    for _ in range(int(120 / _READY_POLL_S)):
        async with http.get("/readyz") as r:
            if r.status == 200:
                return
        await asyncio.sleep(_READY_POLL_S)
    raise BenchError("the proxy was not ready within 120 s")


async def _chats(stack: PacedStack, requests: int, wait: str) -> tuple[float, list[float]]:
    """Seconds from the restart to the first request, and each request's client ms."""
    began = time.perf_counter()
    async with aiohttp.ClientSession(stack.proxy_url) as http:
        if wait == "ready":
            await _until_ready(http)
        first_after = time.perf_counter() - began
        times = []
        for i in range(requests):
            body = {
                "model": "echo",
                "messages": [{"role": "user", "content": f"What did Maya say about hiking {i}?"}],
            }
            start = time.perf_counter()
            async with http.post(
                "/v1/chat/completions", json=body, headers={"X-Memory": "force"}
            ) as r:
                await r.read()
                if r.status != 200:
                    raise BenchError(f"chat: HTTP {r.status}")
            times.append((time.perf_counter() - start) * 1000)
    return first_after, times


def _retrieval_ms(log_file: Path, expected: int) -> list[float]:
    for _ in range(200):
        records = chat_records(log_file, prefix="")
        if len(records) >= expected:
            return [float(r["stages_ms"].get("retrieval_ms", 0.0)) for r in records[-expected:]]
        time.sleep(0.05)
    raise BenchError("the proxy's log lines did not all arrive")


def _table(times: Sequence[float], retrieval: Sequence[float]) -> str:
    rest_t, rest_r = times[1:], retrieval[1:]
    rows = [
        ("request 1", f"{times[0]:.2f}", f"{retrieval[0]:.2f}"),
        ("request 2", f"{times[1]:.2f}", f"{retrieval[1]:.2f}"),
        (
            "requests 2.. median",
            f"{statistics.median(rest_t):.2f}",
            f"{statistics.median(rest_r):.2f}",
        ),
        ("requests 2.. p99", f"{percentile(rest_t, 99):.2f}", f"{percentile(rest_r, 99):.2f}"),
        (
            "first / median of the rest",
            f"{times[0] / statistics.median(rest_t):.2f}",
            f"{retrieval[0] / max(statistics.median(rest_r), 1e-9):.2f}",
        ),
    ]
    return render_table(("", "client ms", "proxy retrieval_ms"), rows)


def main(argv: Sequence[str] | None = None) -> int:
    sigterm_as_interrupt()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragments", type=int, default=2000, help="turns preloaded (2000)")
    parser.add_argument("--requests", type=int, default=100, help="chats after the restart (100)")
    parser.add_argument("--retrieval", choices=("area", "bm25"), default="area")
    parser.add_argument("--wait", choices=("ready", "listen"), default="ready")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.requests < 2 or args.fragments < 1:
        parser.error("--requests must be >= 2 and --fragments >= 1")
    try:
        with (
            tempfile.TemporaryDirectory(prefix="areamem-cold-") as folder,
            PacedStack(
                Path(folder), retrieval=args.retrieval, first_token_ms=0, tokens_per_s=0
            ) as stack,
        ):
            asyncio.run(_ingest(stack, args.fragments, args.seed))
            stack.kill_proxy()
            stack.start_proxy()  # returns once the process accepts connections
            first_after, times = asyncio.run(_chats(stack, args.requests, args.wait))
            retrieval = _retrieval_ms(stack.log_file, args.requests)
    except BenchError as exc:
        print(f"bench_cold_start: {exc}", file=sys.stderr)
        return 1
    print(
        f"cold start: {args.fragments} turns stored, retrieval={args.retrieval}, "
        f"wait={args.wait}: first request {first_after:.2f} s after the process listened"
    )
    print(_table(times, retrieval))
    print(json.dumps({"first_after_s": first_after, "client_ms": times, "retrieval_ms": retrieval}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
