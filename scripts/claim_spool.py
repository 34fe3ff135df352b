"""Exchanges answered while a cluster node claims their tenant, then ``kill -9``: what
is kept (docs/scaling.md, "What can be lost").

One node (``python -m proxy serve`` with a ``cluster:`` section, its own Litestream) in
front of the fake upstream, in a temporary folder, on loopback. Two tenants:

* ``held``: claimed first, so the node holds it; ``--exchanges`` concurrent chats give
  the baseline answer latency;
* ``ghosted``: its lease is taken beforehand by a node that never comes (``ghost``, for
  an hour), so the node claims it for the whole run; the same number of concurrent chats
  are answered without memory while the claim waits.

Then the node's whole process group is SIGKILLed, the ghost's lease released, and the
node started again on the same data folder: it replays its spool, claims ``ghosted`` and
logs the exchanges. Every answered turn is then looked up in the tenant's database
(``<data_dir>/tenants/ghosted.db``, read-only).

Prints the latency table (p50, p95, max, and the claim's p50 over the baseline's) and the
loss table. ``--check`` exits 1 when a turn is lost or stored twice.

    python scripts/claim_spool.py --exchanges 20 --check
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from _common import Turn, compare_turns, percentile, render_table, stored_turns

from proxy.cluster.leases import Leases, lease_store
from proxy.fake_upstream import FakeUpstream

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent
KEYS = {"sk-held": "held", "sk-ghosted": "ghosted"}
_READY_S = 120.0
_REPLAY_S = 60.0


@dataclass
class Node:
    process: subprocess.Popen[str]
    url: str


def node_config(folder: Path, upstream: str, replica: Path) -> Path:
    document: dict[str, Any] = {
        "server": {"host": HOST, "port": 0, "data_dir": str(folder / "data")},
        "auth": {"mode": "keys", "keys": KEYS},
        "upstreams": [{"model": "*", "provider": "openai", "api_base": upstream}],
        "logging": {"stdout": False, "file": True},
        "memory": {"formation_workers": 0},
        "cluster": {
            "node": "a",
            "replica": replica.as_uri(),
            "lease_ttl_s": 4.0,
            "lease_renew_s": 1.0,
            "idle_release_s": 600,
        },
    }
    path = folder / "node.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def start(config: Path) -> Node:
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--config", str(config), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        start_new_session=True,  # its own process group: Litestream dies with it
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    if " on " not in first:
        raise SystemExit(f"the node did not start: {first!r}")
    return Node(process, first.split(" on ", 1)[1].strip().removesuffix("/v1"))


async def until(check: Any, limit_s: float, what: str) -> float:
    began = time.monotonic()
    while not await check():
        if time.monotonic() - began > limit_s:
            raise SystemExit(f"{what}: not within {limit_s:.0f} s")
        await asyncio.sleep(0.1)
    return time.monotonic() - began


async def status(http: aiohttp.ClientSession, url: str, key: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        async with http.get(url, headers=headers) as response:
            return response.status
    except aiohttp.ClientError:
        return 0


async def chats(
    http: aiohttp.ClientSession, node: Node, key: str, tenant: str, count: int
) -> tuple[list[float], Counter[Turn]]:
    """``count`` concurrent chats, each a new conversation; returns their latencies and
    the turns they should have stored."""
    turns: Counter[Turn] = Counter()

    async def one(i: int) -> float:
        text = f"Fact {tenant}-{i}: the parcel {tenant}{i:04d} left for Évora."
        conversation = f"{tenant}-{i}"
        began = time.perf_counter()
        async with http.post(
            f"{node.url}/v1/chat/completions",
            json={"model": "echo", "messages": [{"role": "user", "content": text}]},
            headers={"Authorization": f"Bearer {key}", "X-Conversation-Id": conversation},
        ) as response:
            body = await response.json()
            if response.status != 200:
                raise SystemExit(f"chat answered {response.status}: {body}")
        took = time.perf_counter() - began
        turns[(conversation, "user", text)] += 1
        turns[(conversation, "assistant", body["choices"][0]["message"]["content"])] += 1
        return took

    latencies = await asyncio.gather(*(one(i) for i in range(count)))
    return list(latencies), turns


def kill_group(node: Node) -> None:
    os.killpg(node.process.pid, signal.SIGKILL)
    node.process.wait()


def stop(node: Node) -> None:
    node.process.send_signal(signal.SIGTERM)
    try:
        node.process.wait(30)
    except subprocess.TimeoutExpired:
        kill_group(node)


async def run(count: int, folder: Path) -> bool:
    upstream = await FakeUpstream().start()
    replica = folder / "replica"
    config = node_config(folder, upstream.url, replica)
    leases = Leases(lease_store(replica.as_uri()))
    ghost = leases.acquire("ghosted", "ghost", 3600, time.time())
    assert ghost is not None
    node = start(config)
    spool = folder / "data" / "spool" / "ghosted"
    try:
        async with aiohttp.ClientSession() as http:
            await until(lambda: _ok(http, node.url + "/readyz"), _READY_S, "ready")
            await status(http, node.url + "/memory/stats", "sk-held")  # starts the claim
            await until(
                lambda: _ok(http, node.url + "/memory/stats", "sk-held"), _READY_S, "held"
            )
            held, _ = await chats(http, node, "sk-held", "held", count)
            claimed, expected = await chats(http, node, "sk-ghosted", "ghosted", count)
        kill_group(node)
        spooled = len(list(spool.glob("*.json")))
        assert leases.release(ghost)
        node = start(config)
        async with aiohttp.ClientSession() as http:
            replay_s = await until(
                lambda: _ok(http, node.url + "/memory/stats", "sk-ghosted", spool),
                _REPLAY_S,
                "spool replayed",
            )
        stored = stored_turns(folder / "data" / "tenants" / "ghosted.db", None)
    finally:
        stop(node)
        await upstream.stop()

    lost, doubled = compare_turns(expected, stored)
    base = percentile(held, 50)
    rows = [
        [name, str(len(values)), *(f"{percentile(values, q) * 1000:.0f}" for q in (50, 95)),
         f"{max(values) * 1000:.0f}", f"{percentile(values, 50) / base:.2f}"]
        for name, values in (("held (baseline)", held), ("while claiming", claimed))
    ]
    print(f"one cluster node, {count} concurrent chats per tenant\n")
    print(render_table(["answers", "n", "p50 ms", "p95 ms", "max ms", "p50 / baseline"], rows))
    print()
    print(render_table(
        ["turns answered", "spooled at the kill", "stored after restart", "lost", "twice",
         "replayed within"],
        [[str(sum(expected.values())), f"{spooled} exchanges",
          str(sum(stored[t] for t in expected)), str(len(lost)), str(len(doubled)),
          f"{replay_s:.1f} s"]],
    ))
    return not lost and not doubled


async def _ok(
    http: aiohttp.ClientSession, url: str, key: str | None = None, empty: Path | None = None
) -> bool:
    if empty is not None and any(empty.glob("*.json")):
        return False
    return await status(http, url, key) == 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exchanges", type=int, default=20, help="chats per tenant")
    parser.add_argument("--check", action="store_true", help="exit 1 on a lost turn")
    args = parser.parse_args()
    if args.exchanges < 1:
        parser.error("--exchanges must be at least 1")
    with tempfile.TemporaryDirectory(prefix="areamem-spool-") as folder:
        kept = asyncio.run(run(args.exchanges, Path(folder)))
    print("\nreproduce: python scripts/claim_spool.py " + " ".join(sys.argv[1:]))
    if args.check:
        print("PASS" if kept else "FAIL", " every answered turn stored once")
        sys.exit(0 if kept else 1)


if __name__ == "__main__":
    main()
