"""Everything a request handler needs, built once per app and passed explicitly."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from memory_core import MemoryCoreError
from policies import PolicyEngine, PolicyStore

from .chat.turn import TurnServices
from .cluster.placement import Placement
from .cluster.replays import SpoolReplays
from .cluster.replication import Litestream
from .cluster.spool import Spool
from .config import Config
from .http.lag import LoopLag
from .http.metrics import Metrics
from .http.request_log import RequestLog
from .tenants.dreams import DreamScheduler
from .tenants.memory import TenantMemory
from .tenants.pool import Tenants
from .tenants.workers import FormationWorkers
from .upstream.router import Router

__all__ = ["SERVICES", "Services"]

_POLL_S = 0.05


@dataclass
class Services:
    """The app's long-lived parts. ``background`` holds post-answer work until done."""

    config: Config
    router: Router
    tenants: Tenants
    policies: PolicyStore
    engine: PolicyEngine
    metrics: Metrics
    log: RequestLog
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    lag: LoopLag = field(default_factory=LoopLag)
    dreams: DreamScheduler | None = None
    """Automatic consolidation cycles (:mod:`proxy.tenants.dreams`), started with the app."""
    workers: FormationWorkers | None = None
    """Formation worker processes (``memory.formation_workers`` > 0), else None:
    formation then runs on each tenant's formation thread."""
    placement: Placement | None = None
    """In a cluster, the tenants this node holds (:mod:`proxy.cluster.placement`), else None."""
    spool: Spool | None = None
    """In a cluster, exchanges waiting for their tenant's claim, on disk
    (:mod:`proxy.cluster.spool`)."""
    replays: SpoolReplays | None = None
    """In a cluster, the node's own retries of its spool (:mod:`proxy.cluster.replays`)."""
    litestream: Litestream | None = None
    """In a cluster, the Litestream daemon this node runs (None with an external one)."""
    state: str = "starting"
    """``starting`` until models and graphs are loaded, then ``ready``; ``stopping`` once
    shutdown began (``/readyz`` answers 200 only when ready)."""
    stopped_cleanly: bool = True
    """False when shutdown left formation running past its grace (its rows stay queued
    in the durable log; the process must then exit without waiting for the thread)."""

    @functools.cached_property
    def turns(self) -> TurnServices:
        """What each chat turn's memory uses (:mod:`.chat.turn`): failures, decisions,
        lookups and appends counted in this app's metrics, events in its log, and in a
        cluster the node's placement, spool and its retries (read on first use: after
        wiring)."""
        metrics = self.metrics
        replays = self.replays
        return TurnServices(
            tenants=self.tenants,
            engine=self.engine,
            settings=self.config.memory,
            lag=self.lag,
            log=self.log.write,
            spawn=self.spawn,
            watch_formation=self.watch_formation,
            source="proxy",
            failed=lambda stage: metrics.memory_failures.labels(stage=stage).inc(),
            decided=lambda d: metrics.decisions.labels(
                retrieve=str(d.retrieve).lower(), rule=d.rule or "none"
            ).inc(),
            looked_up=metrics.retrieval_seconds.observe,
            ingested=metrics.ingested.inc,
            placement=self.placement,
            spool=self.spool,
            spool_waits=replays.nudge if replays is not None else lambda: None,
        )

    def spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` after the answer; kept referenced until it finishes."""
        task = asyncio.get_running_loop().create_task(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def watch_formation(self, tenant: str, pending: asyncio.Future[int]) -> None:
        """Keep a scheduled formation pass referenced until it ends; a failure is logged
        and counted (its rows stay queued and are retried by the next pass): a background
        pass has nobody else to report to."""
        self.spawn(self._formation_outcome(tenant, pending))

    async def _formation_outcome(self, tenant: str, pending: asyncio.Future[int]) -> None:
        try:
            await pending
        except Exception as exc:
            self.metrics.memory_failures.labels(stage="formation").inc()
            error = str(exc) if isinstance(exc, MemoryCoreError) else f"{type(exc).__name__}: {exc}"
            self.log.write({"event": "formation_failed", "tenant": tenant, "error": error})

    def note_dream(self, tenant: str, seconds: float, trigger: str, snapshot: int) -> None:
        """A consolidation cycle completed: counted and timed (the store logs it, with
        counts, whoever started it)."""
        kind = "demand" if trigger == "demand" else "policy"
        self.metrics.dream_cycles.labels(trigger=kind).inc()
        self.metrics.dream_seconds.observe(seconds)

    def note_rollback(self, tenant: str, seconds: float, target: int, snapshot: int) -> None:
        """A rollback completed: counted and timed (the store logs it, with counts)."""
        self.metrics.rollbacks.inc()
        self.metrics.rollback_seconds.observe(seconds)

    def start_workers(self) -> None:
        """Start the formation worker processes, if any (from the event loop)."""
        if self.workers is not None:
            self.workers.start(self._formed)

    def _formed(self, tenant: str, names: tuple[str, ...]) -> None:
        """A worker committed a pass: the tenant's graph reads what it added."""
        memory = self.tenants.find(tenant)
        if memory is not None:  # not open here: its graph is read when it is opened
            self.spawn(self._refresh(memory, names))

    async def _refresh(self, memory: TenantMemory, names: tuple[str, ...]) -> None:
        try:
            await memory.refresh_graph(names)
        except Exception as exc:  # the next pass's refresh reads these rows again
            self.metrics.memory_failures.labels(stage="graph_refresh").inc()
            error = str(exc) if isinstance(exc, MemoryCoreError) else f"{type(exc).__name__}: {exc}"
            self.log.write({"event": "graph_refresh_failed", "tenant": memory.name, "error": error})

    async def drain(self) -> None:
        """Wait for all post-answer work, formation included (tests, scripts)."""
        while True:
            if self.workers is not None:
                await self.workers.idle()
            if not self.background:
                return
            for memory in self.tenants.opened():
                memory.hurry()  # formation waiting for a quiet moment starts now
            await asyncio.gather(*list(self.background), return_exceptions=True)

    async def stop(self, grace_s: float) -> bool:
        """Shutdown: formation not yet started is called off (its rows stay queued and
        are formed at the next start); everything else in flight gets ``grace_s``, a
        formation worker's pass in progress included (a worker still busy then is
        ended: its pass is a transaction). Returns whether everything in this process
        finished (else ``stopped_cleanly`` is False)."""
        self.state = "stopping"
        deadline = time.monotonic() + grace_s
        for memory in self.tenants.opened():
            memory.cancel_formation()
        workers = None
        if self.workers is not None:  # asked to stop now, at the same time as the rest
            workers = asyncio.ensure_future(self.workers.stop(grace_s))
        pending = list(self.background)
        if pending:
            await asyncio.wait(pending, timeout=grace_s)
        while (busy := [m.name for m in self.tenants.opened() if m.forming() or m.dreaming]) and (
            time.monotonic() < deadline
        ):
            await asyncio.sleep(_POLL_S)  # a batch on a formation thread cannot be cancelled
        if workers is not None:
            await workers
        self.stopped_cleanly = not busy and all(t.done() for t in pending)
        if not self.stopped_cleanly:
            self.log.write({"event": "shutdown_unfinished", "forming": busy, "grace_s": grace_s})
        return self.stopped_cleanly


SERVICES: web.AppKey[Services] = web.AppKey("services", Services)
