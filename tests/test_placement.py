"""A node's placement (:mod:`proxy.cluster.placement`) driven directly: real leases on a
folder, and a Litestream whose binary is a stand-in script (as in ``test_replication``),
so a claim can be caught in the middle of its restore."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from proxy.cluster.leases import Leases, lease_store
from proxy.cluster.placement import Placement
from proxy.cluster.replication import Litestream, ReplicationError
from proxy.config import ClusterConfig

pytestmark = pytest.mark.cluster


async def _nothing(tenant: str) -> None:
    return None


def _placement(
    tmp_path: Path,
    litestream: str,
    cluster: dict[str, Any],
    *,
    events: Callable[[dict[str, Any]], None] = lambda event: None,
    open_store: Callable[[str], Awaitable[None]] = _nothing,
    drop_store: Callable[[str], Awaitable[None]] = _nothing,
) -> Placement:
    """Node ``a``'s placement over real leases in ``tmp_path``'s replica folder, with a
    Litestream whose binary is the shell script ``litestream``; ``cluster``: the other
    settings of its :class:`ClusterConfig`."""
    replica = (tmp_path / "replica").as_uri()
    binary = tmp_path / "litestream"
    binary.write_text(litestream)
    binary.chmod(0o755)
    config = ClusterConfig.model_validate({"node": "a", "replica": replica, **cluster})
    return Placement(
        config, tmp_path / "tenants", Leases(lease_store(replica)),
        Litestream(binary, tmp_path / "ls"),
        open_store=open_store, drop_store=drop_store, events=events,
    )  # fmt: skip


@pytest.mark.timeout(30)
async def test_a_node_stopped_while_a_claim_restores_releases_the_lease(tmp_path: Path) -> None:
    """The claim was called off with its lease left held (and Litestream registration and
    store in place): the next node waited out the whole lease instead of taking the tenant
    at once, although a stop promises to release every lease."""
    replica = (tmp_path / "replica").as_uri()
    leases = Leases(lease_store(replica))
    ghost = leases.acquire("t", "ghost", 60, time.time())
    assert ghost is not None and leases.release(ghost)  # epoch 2 restores from epoch 1
    events: list[dict[str, Any]] = []
    placement = _placement(
        tmp_path,
        '#!/bin/sh\n[ "$1" = restore ] && exec sleep 30\nexit 1\n',  # restores hang
        {"lease_ttl_s": 60.0, "lease_renew_s": 10.0},
        events=events.append,
    )
    await placement.start()
    placement.request("t")
    while [p["state"] for p in placement.places()] != ["restoring"]:
        await asyncio.sleep(0.01)
    await placement.stop()
    current = leases.current("t")
    assert current is not None and (current.node, current.epoch) == ("a", 2)
    assert current.released
    assert [(e["action"], e.get("cause")) for e in events if e["event"] == "lease"] == [
        ("acquired", None), ("released", "stopping")
    ]


_SLOW_SYNC = """#!/bin/sh
case "$1" in
  register) echo '{"status": "registered"}' ;;
  sync) sleep 1; echo '{}' ;;
  list) echo '{"databases": []}' ;;
  restore) ;;
  *) echo '{}' ;;
esac
"""


@pytest.mark.timeout(30)
async def test_a_request_while_the_tenant_is_let_go_claims_it_after(tmp_path: Path) -> None:
    """A request that came while the node was letting the tenant go (shipping it before
    the release) started a claim at once: it renewed the lease about to be released, as
    its own, and the release that followed gave it up under the new claim, which went on
    serving the tenant with a released lease (another node could take it: two writers),
    its store closed by the old let-go."""
    replica = (tmp_path / "replica").as_uri()
    opened: list[str] = []

    async def open_store(tenant: str) -> None:
        opened.append(f"open {tenant}")
        (tmp_path / "tenants" / f"{tenant}.db").touch()  # what Litestream registers

    async def drop_store(tenant: str) -> None:
        opened.append(f"drop {tenant}")

    events: list[dict[str, Any]] = []
    leases = Leases(lease_store(replica))
    placement = _placement(
        tmp_path,
        _SLOW_SYNC,
        {"lease_ttl_s": 2.0, "lease_renew_s": 0.2, "idle_release_s": 0.5},
        events=events.append,
        open_store=open_store,
        drop_store=drop_store,
    )
    await placement.start()
    try:
        await placement.wait("t")  # epoch 1, then idle: released after 0.5 s
        while [p["state"] for p in placement.places()] != ["released"]:
            await asyncio.sleep(0.01)
        await placement.wait("t")  # during the let-go's shipping
        assert placement.ready("t")
        current = leases.current("t")
        assert current is not None and current.epoch == 2 and not current.released
        assert opened == ["open t", "drop t", "open t"]
    finally:
        await placement.stop()


@pytest.mark.timeout(30)
async def test_a_claim_that_fails_after_taking_the_lease_wakes_whoever_waits(
    tmp_path: Path,
) -> None:
    """Letting the lease go replaced the place's ready event, so the requests waiting for
    the claim (an exchange to store, a ``/memory/ingest``) waited on the old one for ever:
    here a Litestream that refuses the registration (its daemon gone)."""

    async def open_store(tenant: str) -> None:
        (tmp_path / "tenants" / f"{tenant}.db").touch()

    placement = _placement(
        tmp_path,
        '#!/bin/sh\n[ "$1" = register ] && exit 1\necho "{}"\n',
        {},
        open_store=open_store,
    )
    await placement.start()
    try:
        with pytest.raises(ReplicationError, match=r"could not be claimed.*register"):
            await asyncio.wait_for(placement.wait("t"), 10)
        current = Leases(lease_store((tmp_path / "replica").as_uri())).current("t")
        assert current is not None and current.released  # let go at once
    finally:
        await placement.stop()
