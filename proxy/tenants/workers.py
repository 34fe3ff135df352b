"""Formation worker processes, supervised from the event loop: start, assign, restart, stop.

``memory.formation_workers: N`` (N > 0) moves formation out of the request process into
N processes running :func:`memory_core.worker.loop.run` (``spawn`` start method: a fresh
interpreter, never a fork of this threaded process). Each has one duplex pipe, read here
with ``loop.add_reader`` (no thread), and its process sentinel watched the same way.

- **Assign**: a tenant goes to worker ``crc32(tenant) % N``, always the same one, so one
  tenant's file has one formation writer at a time.
- **Notify**: right after an exchange is durably logged, :meth:`notify` sends the
  tenant's name, unless a message for it is already waiting in that worker's pipe (at
  most one per tenant: the pipe never fills and ``send`` never blocks the loop). Asked
  again while one waits, the tenant is sent again once the worker reports it
  :class:`~memory_core.worker.loop.Took` it, so a row appended while a pass ran is never left
  behind.
- **Formed**: each committed pass is reported with the tenant; ``on_formed`` then lets
  the proxy's store read the new rows past its graph cursors.
- **Restart**: a worker that dies (kill -9, out of memory, a crashing row) is counted,
  logged and started again (at once the first time, then with a growing delay while it
  keeps dying); the new one is sent every tenant the dead one had waiting or in hand.
  Nothing is lost with it: the durable queue holds the work, and the attempt counting of
  :mod:`memory_core.formation.pipeline` gives a row that kills the worker up after
  ``MAX_ATTEMPTS`` tries. A chat never waits for a worker.
- **Stop**: :meth:`stop` asks each worker to finish its pass in progress and exit,
  waits up to the grace, then terminates (and kills) what is left; queued rows are formed
  at the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import pickle
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from memory_core import MemoryCoreError
from memory_core.worker import Failed, Form, Formed, Idle, Ready, Stop, Took, WorkerSettings, run

from ..http.metrics import Metrics

__all__ = ["FormationWorkers", "WorkerState"]

Events = Callable[[dict[str, Any]], None]
OnFormed = Callable[[str, tuple[str, ...]], None]
_POLL_S = 0.02
_STABLE_S = 30.0
"""A worker alive this long before it dies is restarted at once (not a crash loop)."""
_MAX_DELAY_S = 10.0
_KILL_WAIT_S = 2.0
_REAP_WAIT_S = 1.0
"""Longest wait to reap a worker whose sentinel closed (microseconds in practice)."""


@dataclass(frozen=True)
class WorkerState:
    """One worker as ``/healthz`` shows it."""

    index: int
    pid: int | None
    alive: bool
    ready: bool
    restarts: int
    priority: str | None  # how it yields the CPU, once ready: ``idle`` or ``nice``


@dataclass
class _Track:
    """One tenant's notifications: asked (``wanted``), sent, taken and done generations."""

    wanted: int = 0
    sent: int = 0
    taken: int = 0
    done: int = 0
    formed: int = 0
    error: str | None = None
    waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)


@dataclass
class _Slot:
    """One worker position: its current process and what it was given."""

    index: int
    process: BaseProcess | None = None
    conn: Connection | None = None
    ready: bool = False
    priority: str | None = None
    restarts: int = 0
    crashes: int = 0
    started: float = 0.0
    waiting: set[str] = field(default_factory=set)  # sent, not yet taken
    busy: str | None = None  # taken, not yet idle
    exited: asyncio.Event = field(default_factory=asyncio.Event)


class FormationWorkers:
    """``count`` formation worker processes for the tenants under ``settings.folder``."""

    def __init__(
        self, settings: WorkerSettings, count: int, *, metrics: Metrics, events: Events
    ) -> None:
        if count < 1:
            raise ValueError(f"at least one formation worker, got {count}")
        self._settings = settings
        self._metrics = metrics
        self._events = events
        self._slots = [_Slot(i) for i in range(count)]
        self._tracks: dict[str, _Track] = {}
        self._on_formed: OnFormed = lambda tenant, names: None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._restarts: dict[int, asyncio.TimerHandle] = {}
        self._stopping = False

    def start(self, on_formed: OnFormed) -> None:
        """Start every worker (from the event loop); ``on_formed(tenant, names)`` is called
        on the loop after each committed pass."""
        self._loop = asyncio.get_running_loop()
        self._on_formed = on_formed
        for slot in self._slots:
            self._launch(slot)

    def notify(self, tenant: str) -> None:
        """The tenant has newly logged rows: its worker forms them soon."""
        track = self._tracks.setdefault(tenant, _Track())
        track.wanted += 1
        slot = self._slot(tenant)
        if tenant not in slot.waiting:
            self._send(slot, tenant)

    async def form(self, tenant: str) -> int:
        """Have the tenant's worker form what is queued now; returns the rows formed
        meanwhile. Raises :class:`MemoryCoreError` when its pass failed."""
        self.notify(tenant)
        track = self._tracks[tenant]
        before = track.formed
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        track.waiters.append((track.wanted, done))
        await done
        return track.formed - before

    async def idle(self) -> None:
        """Wait until no worker has a tenant waiting or in hand (tests, draining)."""
        while any(s.waiting or s.busy for s in self._slots) and not self._stopping:
            await asyncio.sleep(_POLL_S)

    def states(self) -> list[WorkerState]:
        """Each worker's process, liveness and restarts."""
        return [
            WorkerState(
                s.index,
                s.process.pid if s.process else None,
                bool(s.process and s.process.is_alive()),
                s.ready,
                s.restarts,
                s.priority,
            )
            for s in self._slots
        ]

    async def stop(self, grace_s: float) -> bool:
        """Let each worker finish its pass in progress within ``grace_s``, then end what
        is left. Returns whether every worker exited by itself."""
        self._stopping = True
        for handle in self._restarts.values():
            handle.cancel()
        for slot in self._slots:
            self._send_raw(slot, Stop())
        live = [s for s in self._slots if s.process is not None]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_all_set(live), grace_s)
        late = [s.index for s in live if not s.exited.is_set()]
        for slot in live:
            await self._end(slot)
        if late:
            self._events({"event": "formation_workers_ended", "workers": late, "grace_s": grace_s})
        for track in self._tracks.values():
            for _, waiter in track.waiters:
                waiter.cancel()
        return not late

    # --- processes -------------------------------------------------------------------

    def _launch(self, slot: _Slot) -> None:
        self._restarts.pop(slot.index, None)
        if self._stopping or self._loop is None:
            return
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe(duplex=True)
        process = context.Process(
            target=run,
            args=(self._settings, theirs),
            name=f"areamem-formation-{slot.index}",
            daemon=True,
        )
        process.start()
        theirs.close()
        slot.process, slot.conn, slot.ready, slot.priority = process, ours, False, None
        slot.started, slot.exited = time.monotonic(), asyncio.Event()
        self._loop.add_reader(ours.fileno(), self._on_readable, slot)
        self._loop.add_reader(process.sentinel, self._on_exit, slot)
        again = sorted(slot.waiting | ({slot.busy} if slot.busy else set()))
        slot.waiting.clear()
        slot.busy = None
        for tenant in again:
            self._send(slot, tenant)

    def _on_exit(self, slot: _Slot) -> None:
        """The worker process ended: read what it said last, then restart it."""
        process = slot.process
        assert process is not None and self._loop is not None
        self._loop.remove_reader(process.sentinel)
        self._on_readable(slot)
        self._close_conn(slot)
        # the sentinel closes as the process exits, a moment before the kernel lets it be
        # reaped: a join(0) then finds no exit code (seen under load, the log said None)
        process.join(_REAP_WAIT_S)
        slot.exited.set()
        if self._stopping:
            return
        lived = time.monotonic() - slot.started
        slot.crashes = 1 if lived >= _STABLE_S else slot.crashes + 1
        slot.restarts += 1
        self._metrics.formation_worker_restarts.inc()
        delay = 0.0 if slot.crashes <= 1 else min(0.5 * 2 ** (slot.crashes - 2), _MAX_DELAY_S)
        self._events(
            {
                "event": "formation_worker_died",
                "worker": slot.index,
                "pid": process.pid,
                "exitcode": process.exitcode,
                "tenant": slot.busy,
                "restart_in_s": delay,
            }
        )
        self._restarts[slot.index] = self._loop.call_later(delay, self._launch, slot)

    async def _end(self, slot: _Slot) -> None:
        """Terminate, then kill, a worker still running; reap it."""
        process = slot.process
        if process is None:
            return
        for signal_it in (process.terminate, process.kill):
            if slot.exited.is_set() or process.exitcode is not None:
                break
            signal_it()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(slot.exited.wait(), _KILL_WAIT_S)
        if self._loop is not None and not slot.exited.is_set():
            self._loop.remove_reader(process.sentinel)
            self._close_conn(slot)
        process.join(_KILL_WAIT_S)

    def _close_conn(self, slot: _Slot) -> None:
        conn, slot.conn = slot.conn, None
        if conn is not None and self._loop is not None:
            self._loop.remove_reader(conn.fileno())
            conn.close()

    # --- messages --------------------------------------------------------------------

    def _slot(self, tenant: str) -> _Slot:
        return self._slots[zlib.crc32(tenant.encode()) % len(self._slots)]

    def _send(self, slot: _Slot, tenant: str) -> None:
        """Ask the slot's worker for the tenant (kept waiting while it restarts: the new
        worker is sent it)."""
        track = self._tracks.setdefault(tenant, _Track())
        track.sent = track.wanted
        slot.waiting.add(tenant)
        self._send_raw(slot, Form(tenant))

    def _send_raw(self, slot: _Slot, message: Form | Stop) -> None:
        if slot.conn is None:
            return
        with contextlib.suppress(OSError):  # it died: restarted, it is sent this again
            # what Connection.send writes, without building a ForkingPickler per message
            slot.conn.send_bytes(pickle.dumps(message))

    def _on_readable(self, slot: _Slot) -> None:
        """One message per call: the loop calls again while the pipe stays readable
        (level-triggered), so no ``poll`` (each builds a selector) on the event loop."""
        conn = slot.conn
        try:
            if conn is not None:
                self._handle(slot, conn.recv())
        except (EOFError, OSError):
            if conn is not None and self._loop is not None:
                self._loop.remove_reader(conn.fileno())

    def _handle(self, slot: _Slot, message: object) -> None:
        if isinstance(message, Ready):
            slot.ready, slot.priority = True, message.priority
        elif isinstance(message, Took):
            self._took(slot, message.tenant)
        elif isinstance(message, Formed):
            self._tracks.setdefault(message.tenant, _Track()).formed += message.processed
            self._events(
                {
                    "event": "formed",
                    "tenant": message.tenant,
                    "rows": message.processed,
                    "entities": message.entities,
                    "relations": message.relations,
                    "contexts": message.contexts,
                    "by": f"worker {slot.index}",
                    "ms": message.ms,
                }
            )
            self._on_formed(message.tenant, message.names)
        elif isinstance(message, Failed):
            self._failed(message)
        elif isinstance(message, Idle):
            self._idle(slot, message.tenant)

    def _took(self, slot: _Slot, tenant: str) -> None:
        slot.waiting.discard(tenant)
        slot.busy = tenant
        track = self._tracks.setdefault(tenant, _Track())
        track.taken, track.error = track.sent, None
        if track.wanted > track.sent:  # asked again while it waited: form once more
            self._send(slot, tenant)

    def _failed(self, message: Failed) -> None:
        self._tracks.setdefault(message.tenant, _Track()).error = message.error
        self._metrics.memory_failures.labels(stage="formation").inc()
        self._events(
            {"event": "formation_failed", "tenant": message.tenant, "error": message.error}
        )

    def _idle(self, slot: _Slot, tenant: str) -> None:
        if slot.busy == tenant:
            slot.busy = None
        track = self._tracks.setdefault(tenant, _Track())
        track.done = max(track.done, track.taken)
        still: list[tuple[int, asyncio.Future[None]]] = []
        for target, waiter in track.waiters:
            if target > track.done:
                still.append((target, waiter))
            elif not waiter.done():
                if track.error is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(MemoryCoreError(track.error))
        track.waiters = still


async def _all_set(slots: list[_Slot]) -> None:
    for slot in slots:
        await slot.exited.wait()
