"""Formation in a worker process: the loop that forms tenants' queues and reports back.

A supervisor (the proxy's :mod:`proxy.tenants.workers`) starts :func:`run` in a
process of its own (``spawn`` start method: a fresh interpreter, nothing forked from a
process with threads) and talks to it over one duplex pipe:

- in: :class:`Form` (this tenant has new queued rows), :class:`Stop` (finish the pass
  in progress, then exit);
- out: :class:`Ready` (backends loaded), :class:`Took` (the tenant's queue is being
  drained now), :class:`Formed` (a pass committed: the reader side may refresh its
  graph), :class:`Failed` (a pass raised; its rows stay queued with an attempt counted),
  :class:`Idle` (the tenant's queue was drained, or the worker is stopping).

Why a process: a formation pass (model calls, Python) holds the GIL, so in the request
process it slowed the answers; here it runs beside them. The durable queue is the only
hand-over: a message lost with a crashed worker loses no work (the next start forms what
is queued), and rows are claimed with their attempt counted before the stages run
(:mod:`.formation.pipeline`), so a row that kills the worker is given up after
``MAX_ATTEMPTS`` tries instead of crashing it forever. One tenant is formed by one
worker at a time (the supervisor assigns tenants by a stable hash), so SQLite sees one
formation writer per file.

The worker exits when told, when its pipe closes (the supervisor is gone) or when its
parent process changes; it ignores SIGINT (a Ctrl-C in a terminal reaches the whole
process group: the supervisor decides when the worker stops).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from ..blas import limit_blas_threads
from ..errors import MemoryCoreError
from ..formation import Backends, FormationConfig, build_backends
from ..store.memory_store import MemoryStore
from .priority import Priority

__all__ = [
    "Failed",
    "Form",
    "Formed",
    "Idle",
    "Ready",
    "Stop",
    "Took",
    "WorkerSettings",
    "run",
]

_PARENT_CHECK_S = 1.0
GATHER_S = 0.1
"""How long a worker lets further exchanges arrive before it forms what is due. Back to
back requests on two cores were formed one exchange a pass: about 10 ms of CPU each,
taken from the next request's retrieval. Waiting this long forms a burst in one pass
(fixed costs paid once, one graph refresh for all) for 0.1 s more of freshness."""
NICENESS = 19
"""How much lower the worker's CPU priority is than the proxy's (``nice``): on a small
machine formation and retrieval compete for the same cores, and a question must not wait
for the formation of the previous answer. In the proxy over five LoCoMo conversations,
back to back: question encoding 8.5 -> 6.1 ms p50 from nice 10 to 19. Where it may, the
worker goes further, under ``SCHED_IDLE`` while it keeps up (:mod:`memory_core.worker.priority`)."""


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker needs, sent to the new process (picklable)."""

    folder: Path
    """Where tenant files live: ``<folder>/<tenant>.db``."""
    formation: FormationConfig


@dataclass(frozen=True)
class Form:
    """The tenant has queued rows (appended after this message was sent, at the latest)."""

    tenant: str


@dataclass(frozen=True)
class Stop:
    """Finish the pass in progress, then exit."""


@dataclass(frozen=True)
class Ready:
    """The worker loaded its backends and waits for work; ``priority``: how it yields the
    CPU (:attr:`~memory_core.worker.priority.Priority.mode`: ``idle`` or ``nice``)."""

    pid: int
    priority: str = "nice"


@dataclass(frozen=True)
class Took:
    """The worker took the tenant's :class:`Form` and drains its queue now."""

    tenant: str


@dataclass(frozen=True)
class Formed:
    """A pass committed ``processed`` rows; ``names`` are the aliases it learned; what it
    created and its wall time, for the proxy's log line."""

    tenant: str
    processed: int
    names: tuple[str, ...]
    entities: int = 0
    relations: int = 0
    contexts: int = 0
    ms: float = 0.0


@dataclass(frozen=True)
class Failed:
    """A pass raised (its rows stay queued, an attempt counted against each)."""

    tenant: str
    error: str


@dataclass(frozen=True)
class Idle:
    """The worker is done with the tenant it :class:`Took` (queue drained, or stopping)."""

    tenant: str


def run(settings: WorkerSettings, conn: Connection) -> None:
    """The worker process's body: load the backends once, then form what is asked."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):  # a platform without nice: same priority
        os.nice(NICENESS)
    limit_blas_threads()
    backends = build_backends(settings.formation)
    backends.encoder.encode(["areamem formation worker warm-up"])
    priority = Priority(pending=lambda: conn.poll(0))  # poll reads nothing: safe beside recv
    priority.start()
    worker = _Worker(settings, backends, conn, priority)
    try:
        conn.send(Ready(os.getpid(), priority.mode))
        worker.serve()
    except (BrokenPipeError, EOFError):
        pass  # the supervisor is gone: what is queued waits for the next start
    finally:
        worker.close()
        priority.stop()


class _Worker:
    """Forms one tenant at a time, oldest request first; one store per tenant."""

    def __init__(
        self, settings: WorkerSettings, backends: Backends, conn: Connection, priority: Priority
    ) -> None:
        self._settings = settings
        self._backends = backends
        self._conn = conn
        self._priority = priority
        self._parent = os.getppid()
        self._due: dict[str, None] = {}  # insertion-ordered set
        self._stores: dict[str, MemoryStore] = {}
        self.stopping = False

    def serve(self) -> None:
        while not self.stopping:
            if not self._due:
                self._receive(wait=True)
                continue
            self._gather()
            tenant = next(iter(self._due))
            del self._due[tenant]
            self._form(tenant)
            self._receive(wait=False)
            if not self._due:
                self._priority.done()

    def _gather(self) -> None:
        """Take what else arrives within :data:`GATHER_S` before forming: exchanges that
        come in a burst are formed in one pass instead of one pass each."""
        deadline = time.monotonic() + GATHER_S
        while not self.stopping:
            left = deadline - time.monotonic()
            if left <= 0 or not self._conn.poll(left):
                return
            self._receive(wait=False)

    def _receive(self, *, wait: bool) -> None:
        """Take every message waiting (with ``wait``: at least one, or a reason to stop)."""
        while wait and not self._conn.poll(_PARENT_CHECK_S):
            if os.getppid() != self._parent:
                self.stopping = True
                return
        while self._conn.poll(0):
            message = self._conn.recv()
            if isinstance(message, Stop):
                self.stopping = True
            elif isinstance(message, Form):
                self._due[message.tenant] = None
                self._priority.busy()

    def _form(self, tenant: str) -> None:
        """Drain the tenant's queue pass by pass, reporting each commit; a stop asked
        meanwhile ends it after the pass in progress (the rest stays queued)."""
        self._conn.send(Took(tenant))
        try:
            store = self._store(tenant)
            while not self.stopping:
                began = time.perf_counter()
                result = store.form()
                if result.processed:
                    ms = round((time.perf_counter() - began) * 1000, 1)
                    self._conn.send(
                        Formed(
                            tenant,
                            result.processed,
                            result.names,
                            result.entities,
                            result.relations,
                            result.contexts,
                            ms,
                        )
                    )
                if result.processed == 0 and result.failed == 0:
                    break
                self._receive(wait=False)
        except (BrokenPipeError, EOFError):
            raise
        except Exception as exc:  # reported; the rows stay queued with an attempt counted
            error = str(exc) if isinstance(exc, MemoryCoreError) else f"{type(exc).__name__}: {exc}"
            self._conn.send(Failed(tenant, error))
        self._conn.send(Idle(tenant))

    def _store(self, tenant: str) -> MemoryStore:
        store = self._stores.get(tenant)
        if store is None:
            path = self._settings.folder / f"{tenant}.db"
            store = self._stores[tenant] = MemoryStore(
                path, formation=self._settings.formation, backends=self._backends
            )
        return store

    def close(self) -> None:
        for store in self._stores.values():
            store.close()
        self._stores.clear()
