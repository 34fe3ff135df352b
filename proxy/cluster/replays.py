"""Spooled exchanges retried by the node itself, not left waiting for traffic.

Why: an exchange answered while its tenant was being claimed is in the spool
(:mod:`.spool`) until the claim succeeds and the request that spooled it appends it. When
that store gives up (the holder kept the tenant past ``cluster.claim_wait_s``, the claim
failed, a 503), the entry was replayed only at the tenant's next append or the node's
next start: with no further traffic for the tenant it stayed on disk for good, although
its answer went out whole and the proxy promises such an answer is stored.

:class:`SpoolReplays` is one task per node that runs while any tenant has entries waiting
(on disk, taken by no task) and ends by itself once none does; :meth:`SpoolReplays.nudge`
starts it again (at start, when a store or a replay gives an entry back). Each waiting
tenant is tried at once, then, while its replay fails, again after a wait that doubles
from ``cluster.spool_retry_min_s`` up to ``cluster.spool_retry_max_s``, each wait drawn in
its upper half (jitter: nodes that failed together do not retry in step). Invariants:

* one replay of a tenant at a time from here (tenants due together are tried together,
  :data:`CONCURRENT_TENANTS` at most); an entry a request's own store or another
  replay is handling is skipped (:meth:`~.spool.Spool.take`), never replayed twice;
* a failed attempt leaves its entries on disk, given back (:meth:`~.spool.Spool.put_back`)
  by the replay; :meth:`SpoolReplays.stop` cancels an attempt in progress, which gives its
  entry back the same way: the next start replays it (a kill at any point only repeats a
  no-op append, see :mod:`.spool`);
* each failed attempt is a log line ``{"event": "spool_retry", "tenant", "pending",
  "attempt", "retry_in_s"}`` and each attempt is counted in
  ``areamem_spool_replay_attempts_total{node, outcome}`` (``stored``, ``failed``); the
  entries waiting are ``areamem_spooled_exchanges{node}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..http.metrics import Metrics
from .spool import Spool

__all__ = ["SpoolReplays", "retry_delay"]

Events = Callable[[dict[str, Any]], None]

CONCURRENT_TENANTS = 16
"""Tenants retried at once: each attempt may wait ``cluster.claim_wait_s`` for its claim,
so one after the other, the last of many tenants held elsewhere waited for all the
others' waits."""


def retry_delay(attempt: int, low_s: float, high_s: float, draw: float) -> float:
    """The wait after the ``attempt``-th failure in a row (from 1): ``low_s`` doubled at
    each failure, at most ``high_s``, scaled into its upper half by ``draw`` in [0, 1]."""
    ceiling = min(high_s, low_s * 2.0 ** min(attempt - 1, 64))
    return ceiling * (0.5 + 0.5 * draw)


@dataclass
class _Backoff:
    attempts: int = 0
    due: float = 0.0


class SpoolReplays:
    """Retries the spool's waiting entries: ``replay(tenant)`` appends a tenant's waiting
    entries (and gives back those it could not); it is called from the event loop."""

    def __init__(
        self,
        spool: Spool,
        replay: Callable[[str], Awaitable[Any]],
        *,
        node: str,
        low_s: float,
        high_s: float,
        events: Events,
        metrics: Metrics | None = None,
        draw: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._spool = spool
        self._replay = replay
        self._node = node
        self._low_s, self._high_s = low_s, high_s
        self._events = events
        self._metrics = metrics
        self._draw = draw
        self._clock = clock
        self._backoff: dict[str, _Backoff] = {}
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(CONCURRENT_TENANTS)
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    @property
    def running(self) -> bool:
        """Whether the retry task is running (it ends once no entry waits)."""
        return self._task is not None and not self._task.done()

    def nudge(self) -> None:
        """An entry may be waiting: look again now (a tenant already waiting out a
        backoff keeps it), starting the task when it is not running."""
        if self._stopped:
            return
        self._wake.set()
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="spool-replays"
            )

    async def stop(self) -> None:
        """End the retries (an attempt in progress is called off, its entry left on
        disk); nothing starts them again."""
        self._stopped = True
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while not self._stopped:
            self._wake.clear()
            waiting = [t for t in self._spool.tenants() if self._spool.waiting(t)]
            self._backoff = {t: self._backoff.get(t, _Backoff()) for t in waiting}
            if not waiting:
                return
            now = self._clock()
            due = [t for t in waiting if self._backoff[t].due <= now]
            if due:
                await asyncio.gather(*(self._attempt(t) for t in due))
            await self._sleep()

    async def _sleep(self) -> None:
        """Until the next tenant is due, or a nudge (or at once when one is due)."""
        if not self._backoff:
            return
        due = min(b.due for b in self._backoff.values()) - self._clock()
        if due > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), due)

    async def _attempt(self, tenant: str) -> None:
        async with self._slots:
            await self._try(tenant)

    async def _try(self, tenant: str) -> None:
        try:
            await self._replay(tenant)
        except Exception as exc:  # the entries stay on disk; the next attempt says more
            self._events({"event": "spool_replay_failed", "tenant": tenant,
                          "error": f"{type(exc).__name__}: {exc}"})  # fmt: skip
        if not self._spool.waiting(tenant):
            self._backoff.pop(tenant, None)
            self._count("stored")
            return
        backoff = self._backoff.setdefault(tenant, _Backoff())
        backoff.attempts += 1
        delay = retry_delay(backoff.attempts, self._low_s, self._high_s, self._draw())
        backoff.due = self._clock() + delay
        self._count("failed")
        self._events({"event": "spool_retry", "tenant": tenant, "node": self._node,
                      "pending": self._spool.count(tenant), "attempt": backoff.attempts,
                      "retry_in_s": round(delay, 3)})  # fmt: skip

    def _count(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.spool_replay_attempts.labels(node=self._node, outcome=outcome).inc()
