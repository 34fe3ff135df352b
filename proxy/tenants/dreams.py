"""Automatic consolidation cycles: the dream policy asked about every open tenant.

Every :data:`POLICY_TICKS` seconds, the policy (the ``dream:`` section of the trigger
policy, hot-reloaded with it:
:mod:`policies.dream`) weighs what the tenant's memory says (messages since the last
cycle, the last cycle and rollback: :meth:`memory_core.MemoryStore.dream_status`) and how
long the tenant has been idle. A cycle it starts runs in the background on the tenant's
formation thread and never blocks chat (lookups read the state before it until its
graph is read); one automatic cycle runs at a time in the whole proxy, and one starts only
while the proxy is ready and its event loop keeps time (``quiet``), so consolidating many
tenants never takes more than one core from the answers, and never while they queue. A
cycle on demand (``POST /memory/dream``) does not wait for this one, but two cycles never
run at once for one tenant (:mod:`memory_core.store.exclusive`).

The same tick reads the graph of an open tenant again when another process (the
``areamem`` command line) rolled its memory back or consolidated it, and, every
:data:`CHECKPOINT_TICKS` ticks, folds a journal grown past ``dream.journal_entries`` or
``dream.journal_bytes`` into a checkpoint snapshot (it stays bounded when cycles are rare
or switched off).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from memory_core import DreamBusyError, DreamStatus, MemoryCoreError
from policies.dream import DreamPolicy, DreamState

from .memory import TenantMemory
from .pool import Tenants

__all__ = ["DreamScheduler"]

Events = Callable[[dict[str, Any]], None]
CHECKPOINT_TICKS = 30
POLICY_TICKS = 5
Done = Callable[[str, float, str, int], None]


class DreamScheduler:
    """Starts the cycles the dream policy asks for (see the module docstring)."""

    def __init__(
        self,
        tenants: Tenants,
        policy: Callable[[], DreamPolicy],
        *,
        events: Events,
        done: Done,
        failed: Callable[[], None],
        quiet: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._tenants = tenants
        self._policy = policy
        self._events = events
        self._done = done
        self._failed = failed
        self._quiet = quiet
        self._clock = clock
        self._running: asyncio.Task[None] | None = None
        self._ticks = 0
        self.policy_every = POLICY_TICKS
        """Ticks between two looks at the policy (the idle and schedule rules count in
        seconds and minutes: every few seconds is soon enough)."""
        self.last_decisions: dict[str, str] = {}
        """The last reason the policy gave per tenant (for ``/healthz``-style views)."""

    @property
    def running(self) -> asyncio.Task[None] | None:
        """The automatic cycle in progress, if any."""
        return self._running if self._running is not None and not self._running.done() else None

    async def watch(self, interval_s: float = 1.0) -> None:
        """Tick every ``interval_s`` until cancelled (a failing tick is logged)."""
        while True:
            try:
                await self.tick()
            except Exception as exc:  # the watcher never dies of one tenant
                error = f"{type(exc).__name__}: {exc}"
                self._events({"event": "dream_tick_failed", "error": error})
            await asyncio.sleep(interval_s)

    async def tick(self) -> None:
        """One look at every open tenant: what another process changed (each tick), the
        journal's bounds (every :data:`CHECKPOINT_TICKS`), the policy (every
        :data:`POLICY_TICKS`, while no automatic cycle runs and the proxy is quiet). The
        reads for all tenants run in one job on a worker thread, not on the reader threads
        the lookups use."""
        self._ticks += 1
        opened = self._tenants.opened()
        for memory in await asyncio.to_thread(_moved, opened):
            await self._reread(memory)
        if self._ticks % CHECKPOINT_TICKS == 0:
            for memory in opened:
                if not memory.dreaming:
                    await self._checkpoint(memory)
        if self._ticks % self.policy_every == 0 and self.running is None and self._quiet():
            statuses = await asyncio.to_thread(_statuses, opened, self._events)
            for memory, status in statuses:
                if self._consider(memory, status):
                    break

    async def _checkpoint(self, memory: TenantMemory) -> None:
        try:
            snapshot = await memory.checkpoint()
        except DreamBusyError:
            return  # a cycle or rollback folds the journal itself
        except MemoryCoreError as exc:
            error = str(exc)
            self._events({"event": "checkpoint_failed", "tenant": memory.name, "error": error})
            return
        if snapshot is not None:
            self._events({"event": "checkpoint", "tenant": memory.name, "snapshot": snapshot})

    async def _reread(self, memory: TenantMemory) -> None:
        try:
            if await memory.check_generation():
                self._events({"event": "graph_reread", "tenant": memory.name,
                              "why": "memory rolled back or consolidated elsewhere"})  # fmt: skip
        except MemoryCoreError as exc:
            error = str(exc)
            self._events({"event": "graph_reread_failed", "tenant": memory.name, "error": error})

    def _consider(self, memory: TenantMemory, status: DreamStatus) -> bool:
        """Ask the policy about one tenant; start its cycle if it says so (whether it did)."""
        state = DreamState(
            now=self._clock(),
            idle_s=memory.idle_s,
            new_messages=status.new_messages,
            last_cycle_at=status.last_cycle_at,
            first_new_at=status.first_new_at,
            last_rollback_at=status.last_rollback_at,
            running=memory.dreaming,
        )
        decision = self._policy().decide(memory.name, state)
        self.last_decisions[memory.name] = decision.reason
        if decision.run:
            self._running = asyncio.ensure_future(self._cycle(memory, decision.reason))
        return decision.run

    async def _cycle(self, memory: TenantMemory, reason: str) -> None:
        trigger = f"policy: {reason}"
        self._events({"event": "dream_started", "tenant": memory.name, "trigger": trigger})
        began = time.perf_counter()
        try:
            report = await memory.dream(trigger)
        except DreamBusyError as exc:  # a cycle on demand, or another process, got there first
            self._events({"event": "dream_skipped", "tenant": memory.name, "why": str(exc)})
        except Exception as exc:  # logged and counted: the next tick may try again
            self._failed()
            error = str(exc) if isinstance(exc, MemoryCoreError) else f"{type(exc).__name__}: {exc}"
            self._events({"event": "dream_failed", "tenant": memory.name, "error": error})
        else:
            self._done(memory.name, time.perf_counter() - began, trigger, report.snapshot)


def _moved(opened: Sequence[TenantMemory]) -> list[TenantMemory]:
    """The tenants whose memory another process rolled back or consolidated (a small read
    each; one that fails is left for the next tick)."""
    moved = []
    for memory in opened:
        with contextlib.suppress(MemoryCoreError):
            if memory.store.generation_moved():
                moved.append(memory)
    return moved


def _statuses(
    opened: Sequence[TenantMemory], events: Events
) -> list[tuple[TenantMemory, DreamStatus]]:
    """What the policy weighs, for each tenant with no cycle running (a tenant whose
    status cannot be read is logged and skipped)."""
    found = []
    for memory in opened:
        if memory.dreaming:
            continue
        try:
            found.append((memory, memory.store.dream_status()))
        except MemoryCoreError as exc:
            events({"event": "dream_status_failed", "tenant": memory.name, "error": str(exc)})
    return found
