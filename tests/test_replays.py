"""The node's own retries of its spool (:mod:`proxy.cluster.replays`) over a real spool
folder: a tenant whose replay fails is tried again after a wait that doubles up to a cap,
with jitter; the task ends by itself once nothing waits and at stop, leaving what it had
not stored on disk; an entry another task handles is never replayed twice. The whole node
is in ``test_cluster_node.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memory_core import LogMessage
from proxy.cluster.replays import SpoolReplays, retry_delay
from proxy.cluster.spool import Spool

pytestmark = pytest.mark.cluster

TURN = (LogMessage({"role": "user", "content": "Ana keeps bees."}, 1_700_000_000.0),)


class _Log:
    """A tenant's log behind a claim that fails ``failures`` times, then appends: what
    :func:`proxy.chat.ingest.replay_spool` does with the spool, by the same rules."""

    def __init__(self, spool: Spool, failures: int, *, hold_s: float = 0.0) -> None:
        self.spool, self.failures, self.hold_s = spool, failures, hold_s
        self.stored: list[Path] = []
        self.replays: SpoolReplays | None = None
        self.calls = 0
        self.raise_first: Exception | None = None

    async def replay(self, tenant: str) -> None:
        self.calls += 1
        if self.raise_first is not None:
            error, self.raise_first = self.raise_first, None
            raise error
        for entry in self.spool.pending(tenant):
            if not self.spool.take(entry):
                continue
            try:
                await asyncio.sleep(self.hold_s)  # the claim's wait
            except BaseException:
                self.spool.put_back(entry)
                raise
            if self.failures > 0:
                self.failures -= 1
                self.spool.put_back(entry)
                assert self.replays is not None
                self.replays.nudge()  # as replay_spool tells the node
                return
            self.stored.append(entry.path)
            self.spool.remove(entry)


def _replays(
    tmp_path: Path, failures: int, *, hold_s: float = 0.0, high_s: float = 0.04
) -> tuple[SpoolReplays, _Log, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    spool = Spool(tmp_path / "spool", events.append)
    log = _Log(spool, failures, hold_s=hold_s)
    log.replays = SpoolReplays(
        spool, log.replay, node="a", low_s=0.01, high_s=high_s, events=events.append,
        draw=lambda: 1.0,
    )  # fmt: skip
    return log.replays, log, events


def test_the_wait_doubles_up_to_its_cap_and_jitters_in_its_upper_half() -> None:
    assert [retry_delay(n, 1.0, 60.0, 1.0) for n in range(1, 9)] == [
        1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0
    ]  # fmt: skip
    assert retry_delay(1, 1.0, 60.0, 0.0) == 0.5 and retry_delay(7, 1.0, 60.0, 0.0) == 30.0
    assert retry_delay(10_000, 1.0, 60.0, 0.5) == 45.0  # no overflow after days of failures


@pytest.mark.timeout(10)
async def test_a_failing_tenant_is_retried_with_a_growing_wait_then_stored(
    tmp_path: Path,
) -> None:
    replays, log, events = _replays(tmp_path, failures=4)
    entry = log.spool.put("t", "c", TURN)
    log.spool.put_back(entry)  # the store that wrote it gave up
    replays.nudge()
    while replays.running:
        await asyncio.sleep(0.01)
    assert log.stored == [entry.path] and not entry.path.exists() and len(log.spool) == 0
    retries = [e for e in events if e["event"] == "spool_retry"]
    assert [(e["attempt"], e["retry_in_s"], e["pending"]) for e in retries] == [
        (1, 0.01, 1), (2, 0.02, 1), (3, 0.04, 1), (4, 0.04, 1)
    ]  # fmt: skip


@pytest.mark.timeout(10)
async def test_stop_calls_off_an_attempt_and_leaves_the_entry_on_disk(tmp_path: Path) -> None:
    replays, log, _ = _replays(tmp_path, failures=0, hold_s=30.0)
    entry = log.spool.put("t", None, TURN)
    log.spool.put_back(entry)
    replays.nudge()
    await asyncio.sleep(0.05)  # in the attempt, its entry taken
    assert replays.running and not log.spool.waiting("t")
    await replays.stop()
    assert not replays.running and entry.path.exists() and log.stored == []
    assert log.spool.waiting("t")  # given back: the next start replays it
    replays.nudge()  # nothing starts it again
    assert not replays.running
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "spool-replays"]
    (again,) = Spool(tmp_path / "spool", lambda event: None).pending("t")
    assert again.path == entry.path


@pytest.mark.timeout(10)
async def test_an_entry_another_task_handles_is_left_to_it_then_retried_once_given_back(
    tmp_path: Path,
) -> None:
    """A request's own store holds its entry while it waits for the claim: the retries
    do not replay it beside that store; when the store gives it back, they do, once."""
    replays, log, _ = _replays(tmp_path, failures=0)
    held = log.spool.put("t", None, TURN)  # taken by the store that wrote it
    replays.nudge()
    await asyncio.sleep(0.05)
    assert not replays.running and log.stored == [] and held.path.exists()
    log.spool.put_back(held)  # the store gave up
    replays.nudge()
    replays.nudge()  # told twice: still one replay
    while replays.running:
        await asyncio.sleep(0.01)
    assert log.stored == [held.path]


@pytest.mark.timeout(10)
async def test_a_replay_that_raises_is_reported_and_retried(tmp_path: Path) -> None:
    """A replay that raises something else than a refused append (the spool folder gone
    read-only under the removal: ``PermissionError``) must not end the retries."""
    replays, log, events = _replays(tmp_path, failures=0)
    entry = log.spool.put("t", None, TURN)
    log.spool.put_back(entry)
    log.raise_first = PermissionError("spool folder read-only")
    replays.nudge()
    while replays.running:
        await asyncio.sleep(0.01)
    assert log.stored == [entry.path] and log.calls == 2
    (failed,) = [e for e in events if e["event"] == "spool_replay_failed"]
    assert failed["error"] == "PermissionError: spool folder read-only"


@pytest.mark.timeout(10)
async def test_a_tenant_whose_claim_waits_long_does_not_hold_up_the_others(
    tmp_path: Path,
) -> None:
    """Each attempt may wait ``claim_wait_s`` (30 s by default) for its claim: tried one
    after the other, a node with many tenants held elsewhere reached the last one only
    after all the others' waits."""
    events: list[dict[str, Any]] = []
    spool = Spool(tmp_path / "spool", events.append)
    stored: list[str] = []

    async def replay(tenant: str) -> None:
        for entry in spool.pending(tenant):
            if spool.take(entry):
                if tenant == "a-slow":
                    try:
                        await asyncio.sleep(30)  # another node keeps it
                    finally:
                        spool.put_back(entry)
                stored.append(tenant)
                spool.remove(entry)

    replays = SpoolReplays(
        spool, replay, node="a", low_s=0.01, high_s=0.04, events=events.append
    )
    for tenant in ("a-slow", "b-fast"):
        spool.put_back(spool.put(tenant, None, TURN))
    replays.nudge()
    for _ in range(100):
        if stored:
            break
        await asyncio.sleep(0.01)
    assert stored == ["b-fast"] and spool.count("a-slow") == 1  # still in its attempt
    await replays.stop()
    assert spool.waiting("a-slow") and not replays.running
