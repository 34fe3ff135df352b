"""Cluster nodes (``cluster:`` in the config) in one process, with real Litestream
daemons, a shared ``file://`` replica and leases, in front of the fake upstream.

A node that receives a tenant it does not hold answers at once without memory while it
claims the tenant; the exchange is stored once the claim is done. When the node that
held a tenant stops renewing (its process is as good as dead: renewals and Litestream
stopped, nothing released), another node takes the tenant once the lease expires,
restores it from the replica and answers with its memory; the first node, when it comes
back, finds its lease lost and stops writing the tenant. The lease log never shows two
nodes holding one tenant at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from proxy.cluster.leases import Leases, lease_store
from proxy.config import load_config
from proxy.errors import ConfigError
from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, Proxy, proxy_config

pytestmark = pytest.mark.cluster

FACT = "My sister Ana lives in Lisbon and keeps bees."
QUESTION = "Where does my sister Ana live?"
TTL_S = 2.0
RENEW_S = 0.4


def _node(upstream: FakeUpstream, replica: Path, node: str) -> dict[str, Any]:
    config = proxy_config(upstream.url)
    config["cluster"] = {
        "node": node,
        "replica": replica.as_uri(),
        "lease_ttl_s": TTL_S,
        "lease_renew_s": RENEW_S,
        "sync_interval_s": 0.2,
        "idle_release_s": 60,
    }
    return config


async def _chat(proxy: Proxy, text: str, conversation: str) -> tuple[str, str | None]:
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{proxy.url}/v1/chat/completions",
            json={"model": "echo", "messages": [{"role": "user", "content": text}]},
            headers={"X-Memory": "force", "X-Conversation-Id": conversation},
        ) as response:
            assert response.status == 200, await response.text()
            body = await response.json()
            return body["choices"][0]["message"]["content"], response.headers.get(
                "X-Memory-Receipt"
            )


async def _places(proxy: Proxy) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/cluster/tenants") as response:
            assert response.status == 200
            return list((await response.json())["tenants"])


async def _until(check: Any, within_s: float) -> float:
    began = time.monotonic()
    while not await check():
        assert time.monotonic() - began < within_s, "not within the time allowed"
        await asyncio.sleep(0.05)
    return time.monotonic() - began


async def _remembers(proxy: Proxy) -> bool:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/memory/search", params={"q": "Ana bees"}) as response:
            if response.status == 503:
                assert (await response.json())["error"]["code"] == "memory_moving"
                return False
            assert response.status == 200, await response.text()
            return any("keeps bees" in h["text"] for h in (await response.json())["hits"])


def _leases(*proxies: Proxy) -> list[dict[str, Any]]:
    return sorted(
        (r for p in proxies for r in p.log_records() if r.get("event") == "lease"),
        key=lambda r: r["at"],
    )


@pytest.mark.timeout(120)
async def test_a_dead_nodes_tenant_is_taken_over_with_its_memory(
    upstream: FakeUpstream, make_proxy: MakeProxy, tmp_path: Path
) -> None:
    replica = tmp_path / "replica"
    first = await make_proxy(_node(upstream, replica, "a"), name="a")
    second = await make_proxy(_node(upstream, replica, "b"), name="b")

    # first contact: answered at once, without memory, and stored once the claim is done
    answer, _ = await _chat(first, FACT, "c1")
    assert answer == f"echo: {FACT}"
    await first.settle()
    assert await _until(lambda: _remembers(first), 30) >= 0
    (place,) = await _places(first)
    assert (place["state"], place["epoch"], place["restored_from_epoch"]) == ("ready", 1, None)

    # "kill" a: it stops renewing and replicating, and releases nothing
    placement, litestream = first.services.placement, first.services.litestream
    assert placement is not None and litestream is not None
    await asyncio.sleep(0.5)  # one sync interval and more: the fact is in the replica
    assert placement._loop is not None
    placement._loop.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await placement._loop
    await litestream.stop(grace_s=0)
    killed = time.monotonic()

    # b answers (without memory: its memory is not in place yet), then with a's memory
    # once a's lease expired (renewed at most RENEW_S before the kill)
    answer, _ = await _chat(second, QUESTION, "c2")
    assert answer == f"echo: {QUESTION}"
    await _until(lambda: _remembers(second), 30)
    assert time.monotonic() - killed >= TTL_S - RENEW_S
    # the request log is written after the answer is sent, by the log's own writer
    await _until(lambda: _logged_chat(second), 10)
    first_answer = next(r for r in second.log_records() if r.get("event") == "chat")
    assert "taking over the memory of tenant default" in first_answer["memory_error"]
    (taken,) = await _places(second)
    assert (taken["state"], taken["epoch"], taken["restored_from_epoch"]) == ("ready", 2, 1)
    _, receipt = await _chat(second, QUESTION, "c3")
    assert receipt is not None
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{second.url}/memory/receipts/{receipt}") as response:
            found = (await response.json())["area"]["fragments"]
    assert any("keeps bees" in f["text"] for f in found)

    # a comes back: its renewal finds the lease lost, and it stops writing the tenant
    await litestream.start()
    await placement.start()
    await _until(lambda: _lost(first), 10)
    assert first.services.tenants.find("default") is None
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{first.url}/memory/stats") as response:
            assert response.status == 503
            assert response.headers["Retry-After"] == "1"

    # the router sends the tenant back to a: b, no longer served it, lets go when asked,
    # and a restores b's epoch (the exchanges b stored included)
    answer, _ = await _chat(first, "Back on a.", "c4")
    assert answer == "echo: Back on a."
    await _until(lambda: _remembers(first), 30)
    (back,) = [p for p in await _places(first) if p["state"] == "ready"]
    assert (back["epoch"], back["restored_from_epoch"]) == (3, 2)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{first.url}/memory/search", params={"q": "sister Ana live"}) as r:
            assert any(QUESTION in h["text"] for h in (await r.json())["hits"])  # said on b

    events = [(r["node"], r["epoch"], r["action"]) for r in _leases(first, second)]
    assert events == [
        ("a", 1, "acquired"), ("b", 2, "acquired"), ("a", 1, "lost"),
        ("b", 2, "released"), ("a", 3, "acquired"),
    ]  # fmt: skip
    (given_up,) = [r for r in _leases(second) if r["action"] == "released"]
    assert given_up["cause"] == "asked"  # asked for it, not idle for idle_release_s (60)


async def _logged_chat(proxy: Proxy) -> bool:
    return any(r.get("event") == "chat" for r in proxy.log_records())


async def _lost(proxy: Proxy) -> bool:
    return [p["state"] for p in await _places(proxy)] in (["lost"], ["claiming"])


async def test_cluster_config_is_checked(upstream: FakeUpstream, tmp_path: Path) -> None:
    config = _node(upstream, tmp_path / "replica", "a")
    config["cluster"]["lease_renew_s"] = TTL_S * 0.75
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match="lease_renew_s must be at most half"):
        load_config(path)
    config["cluster"].update(lease_renew_s=RENEW_S, replica="s3://bucket/prefix")
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=r"cluster\.leases"):
        load_config(path)
    config["cluster"]["leases"] = (tmp_path / "leases").as_uri()
    path.write_text(yaml.safe_dump(config))
    assert load_config(path).cluster is not None
    config["cluster"].update(spool_retry_min_s=90, spool_retry_max_s=60)
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=r"spool_retry_min_s \(90\) must be at most spool_re"):
        load_config(path)
    config["cluster"].update(spool_retry_min_s=0)
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=r"cluster\.spool_retry_min_s"):
        load_config(path)


@pytest.mark.timeout(120)
async def test_an_exchange_answered_during_a_claim_outlives_the_node(
    upstream: FakeUpstream, make_proxy: MakeProxy, tmp_path: Path
) -> None:
    """An exchange answered while the node waits for the tenant (its holder has not let
    go) is on disk before its answer completes; the node stops before the claim ends,
    and when it starts again it claims the tenant and stores the exchange."""
    replica = tmp_path / "replica"
    leases = Leases(lease_store(replica.as_uri()))
    ghost = leases.acquire("default", "ghost", 600, time.time())  # never lets go by itself
    assert ghost is not None
    config = _node(upstream, replica, "a")
    config["server"]["shutdown_grace_s"] = 1
    # the answer waits for the exchange to be durable: the spool, not the claim (which
    # would hold it for the whole ingest_wait_ms, longer than this test may run)
    config["memory"] = {"ingest_wait_ms": 600_000}
    first = await make_proxy(config, name="a")
    answer, _ = await _chat(first, FACT, "c1")
    assert answer == f"echo: {FACT}"
    folder = first.data_dir / "spool" / "default"
    (entry,) = folder.glob("*.json")  # written before the answer completed
    assert FACT in entry.read_text()
    assert [p["state"] for p in await _places(first)] == ["claiming"]
    assert b'areamem_spooled_exchanges{node="a"} 1.0' in first.services.metrics.render()
    await first.server.close()  # stops while the claim still waits for the ghost
    assert entry.exists()
    failed = [r for r in first.log_records() if r.get("event") == "ingest_failed"]
    assert "this node is stopping" in failed[0]["error"]

    assert leases.release(ghost)
    again = await make_proxy(config, name="a")  # the same data folder
    await _until(lambda: _remembers(again), 30)
    await again.settle()
    assert not list(folder.glob("*.json"))
    assert b'areamem_spooled_exchanges{node="a"} 0.0' in again.services.metrics.render()
    (replayed,) = [r for r in again.log_records() if r.get("event") == "spool_replayed"]
    assert replayed["ingested"] == 2  # the question and its answer


@pytest.mark.timeout(60)
async def test_ingest_for_a_tenant_that_cannot_be_claimed_is_a_clear_503(
    upstream: FakeUpstream, make_proxy: MakeProxy, tmp_path: Path
) -> None:
    """A claim that fails (here: the tenant's lease file is torn) made ``/memory/ingest``
    answer 500 ``internal_error`` naming only ``ReplicationError``; chat goes on without
    memory, nothing is written, and once the lease is repaired the transcript is stored."""
    replica = tmp_path / "replica"
    torn = replica / "leases" / "default" / f"{1:020d}.json"
    torn.parent.mkdir(parents=True)
    torn.write_text('{"node": "b", "epoch": 1, "expi')
    proxy = await make_proxy(_node(upstream, replica, "a"), name="a")
    transcript = {"messages": [{"role": "user", "content": FACT}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.url}/memory/ingest", json=transcript) as response:
            assert response.status == 503, await response.text()
            assert response.headers["Retry-After"]
            error = (await response.json())["error"]
        assert error["code"] == "memory_unavailable"
        assert "could not be claimed" in error["message"]
        assert "malformed lease 1" in error["message"]
        answer, _ = await _chat(proxy, QUESTION, "c1")
        assert answer == f"echo: {QUESTION}"
        assert not (proxy.data_dir / "tenants" / "default.db").exists()
        torn.unlink()
        async with http.post(f"{proxy.url}/memory/ingest", json=transcript) as response:
            assert response.status == 200, await response.text()
            assert (await response.json())["appended"] == 1


async def test_an_ingest_for_a_tenant_another_node_keeps_answers_503_after_claim_wait_s(
    upstream: FakeUpstream, make_proxy: MakeProxy, tmp_path: Path
) -> None:
    """Another node holds the tenant (and keeps it while in use): ``/memory/ingest``
    waited for the claim with no end (the client's own timeout was the only one). It
    waits ``cluster.claim_wait_s`` and answers 503 ``memory_moving`` with
    ``Retry-After``; nothing is written here."""
    replica = tmp_path / "replica"
    held = replica / "leases" / "default" / f"{1:020d}.json"
    held.parent.mkdir(parents=True)
    now = time.time()
    lease = {"node": "b", "epoch": 1, "expires_at": now + 600, "acquired_at": now, "holder": "b1"}
    held.write_text(json.dumps(lease))
    config = _node(upstream, replica, "a")
    config["cluster"]["claim_wait_s"] = 0.5
    proxy = await make_proxy(config, name="a")
    transcript = {"messages": [{"role": "user", "content": FACT}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.url}/memory/ingest", json=transcript) as response:
            assert response.status == 503, await response.text()
            assert response.headers["Retry-After"]
            assert (await response.json())["error"]["code"] == "memory_moving"
    assert not (proxy.data_dir / "tenants" / "default.db").exists()


async def _held(proxy: Proxy) -> bool:
    return [p["state"] for p in await _places(proxy)] == ["ready"]


async def _lag(proxy: Proxy) -> float:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{proxy.url}/cluster/tenants") as response:
            return float((await response.json())["replication_lag_s"])


@pytest.mark.timeout(60)
async def test_a_dead_litestream_daemon_is_reported_and_its_lag_grows(
    upstream: FakeUpstream, make_proxy: MakeProxy, tmp_path: Path
) -> None:
    """The daemon killed under a node holding a tenant: chat went on, unreplicated, with
    ``areamem_replication_lag_seconds`` frozen at its last value and nothing logged, so
    nothing told the operator that a failover would lose every later exchange."""
    proxy = await make_proxy(_node(upstream, tmp_path / "replica", "a"), name="a")
    await _chat(proxy, FACT, "c1")
    await _until(lambda: _held(proxy), 30)
    daemon = proxy.services.litestream
    assert daemon is not None and daemon.pid is not None
    os.killpg(daemon.pid, signal.SIGKILL)

    async def lagging() -> bool:
        await _chat(proxy, QUESTION, "c1")  # still answered
        return await _lag(proxy) > 2 * RENEW_S

    await _until(lagging, 30)
    (failed,) = [r for r in proxy.log_records() if r.get("event") == "replication_failed"]
    assert failed["node"] == "a" and failed["error"]
    assert [p["state"] for p in await _places(proxy)] == ["ready"]


@pytest.mark.timeout(60)
async def test_two_nodes_given_one_name_never_write_a_tenant_together(
    upstream: FakeUpstream, make_proxy: MakeProxy, tmp_path: Path
) -> None:
    """The second node named ``a`` renewed the first one's lease as its own and both
    served the tenant, under one epoch, with memory and replication: two writers. Now it
    waits like any other node; the first lets go when asked."""
    replica = tmp_path / "replica"
    first = await make_proxy(_node(upstream, replica, "a"), name="first")
    second = await make_proxy(_node(upstream, replica, "a"), name="second")
    await _chat(first, FACT, "c1")
    await _until(lambda: _held(first), 30)
    await _chat(second, QUESTION, "c2")
    await _until(lambda: _held(second), 30)
    (taken,) = await _places(second)
    assert (taken["epoch"], taken["restored_from_epoch"]) == (2, 1)
    (given,) = await _places(first)
    assert (given["state"], given["epoch"]) == ("released", 1)
    assert await _remembers(second)


def _retrying(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` whose stores give up on a claim after 0.3 s and whose spool is retried
    every 0.05 s at first, 0.2 s at most."""
    config["cluster"].update(claim_wait_s=0.3, spool_retry_min_s=0.05, spool_retry_max_s=0.2)
    return config


async def _spooled_while_another_node_holds(
    upstream: FakeUpstream, make_proxy: MakeProxy, replica: Path
) -> tuple[Proxy, Leases, Any]:
    """A node whose one exchange was spooled during a claim that failed: another node
    (a ghost) holds the tenant for 600 s; the store waited ``claim_wait_s`` and gave up."""
    leases = Leases(lease_store(replica.as_uri()))
    ghost = leases.acquire("default", "ghost", 600, time.time())
    assert ghost is not None
    proxy = await make_proxy(_retrying(_node(upstream, replica, "a")), name="a")
    answer, _ = await _chat(proxy, FACT, "c1")
    assert answer == f"echo: {FACT}"
    await proxy.settle()
    (failed,) = [r for r in proxy.log_records() if r.get("event") == "ingest_failed"]
    assert "taking over the memory" in failed["error"]  # memory_moving, after 0.3 s
    assert len(list((proxy.data_dir / "spool" / "default").glob("*.json"))) == 1
    return proxy, leases, ghost


def _retries(proxy: Proxy) -> list[dict[str, Any]]:
    return [r for r in proxy.log_records() if r.get("event") == "spool_retry"]


@pytest.mark.timeout(60)
async def test_an_exchange_whose_claim_failed_is_stored_with_no_further_request(
    upstream: FakeUpstream, make_proxy: MakeProxy, tmp_path: Path
) -> None:
    """The store of an exchange answered during a claim gave up (the holder kept the
    tenant past ``claim_wait_s``): the entry stayed in the spool until the tenant's next
    request or the node's next start, although its answer had gone out whole. The node
    now retries it by itself, with a backoff, and stores it once the holder lets go."""
    replica = tmp_path / "replica"
    proxy, leases, ghost = await _spooled_while_another_node_holds(upstream, make_proxy, replica)

    async def retried_twice() -> bool:
        return len(_retries(proxy)) >= 2

    await _until(retried_twice, 10)
    first = _retries(proxy)[0]
    assert (first["tenant"], first["pending"]) == ("default", 1)
    assert 0 < first["retry_in_s"] <= 0.2
    assert leases.release(ghost)
    folder = proxy.data_dir / "spool" / "default"

    async def emptied() -> bool:
        return not list(folder.glob("*.json"))

    await _until(emptied, 10)  # no request for the tenant meanwhile
    (replayed,) = [r for r in proxy.log_records() if r.get("event") == "spool_replayed"]
    assert replayed["ingested"] == 2
    metrics = proxy.services.metrics.render()
    assert b'areamem_spool_replay_attempts_total{node="a",outcome="failed"}' in metrics
    assert b'areamem_spool_replay_attempts_total{node="a",outcome="stored"} 1.0' in metrics
    assert b'areamem_spooled_exchanges{node="a"} 0.0' in metrics
    replays = proxy.services.replays
    assert replays is not None
    await _until(lambda: _done(replays.running), 5)  # nothing left: it ends by itself
    await _until(lambda: _remembers(proxy), 30)  # formed in the background


async def _done(running: bool) -> bool:
    return not running


@pytest.mark.timeout(90)
async def test_a_node_stopped_while_retrying_its_spool_leaves_it_for_its_next_start(
    upstream: FakeUpstream, make_proxy: MakeProxy, tmp_path: Path
) -> None:
    """Stopping a node whose spool is being retried ends the retries at once (no task
    left behind, nothing replayed twice); the entry stays on disk and the next start
    stores it."""
    replica = tmp_path / "replica"
    proxy, leases, ghost = await _spooled_while_another_node_holds(upstream, make_proxy, replica)

    async def retried() -> bool:
        return bool(_retries(proxy))

    await _until(retried, 10)
    replays = proxy.services.replays
    assert replays is not None and replays.running
    await proxy.server.close()
    assert not replays.running
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "spool-replays"]
    (entry,) = (proxy.data_dir / "spool" / "default").glob("*.json")
    assert FACT in entry.read_text()

    assert leases.release(ghost)
    again = await make_proxy(_retrying(_node(upstream, replica, "a")), name="a")

    async def stored() -> bool:
        return not entry.exists()

    await _until(stored, 20)
    await again.settle()
    replayed = [r for r in again.log_records() if r.get("event") == "spool_replayed"]
    assert [r["ingested"] for r in replayed] == [2]
    assert await _remembers(again)
