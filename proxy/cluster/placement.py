"""Which tenants this node may write, in a cluster (``cluster:`` in the config).

HAProxy sends each proxy key to one node (consistent hashing); any node serves any tenant
it is sent, but only under the tenant's lease (:mod:`.leases`), so no tenant is ever
written by two nodes at once. A claim, started by the tenant's first request here:

1. takes the lease (a new epoch), waiting while another node's lease is valid (a dead
   node's expires ``lease_ttl_s`` after its last renewal; a live one releases a tenant it
   has not served for ``idle_release_s``);
2. keeps the local database when this node held the epoch just before (nobody else wrote
   since), else restores it from the newest replica of an earlier epoch that holds one;
3. opens the store and registers the database with Litestream under this epoch's own
   replica path, ``<replica>/tenants/<tenant>/e<epoch>``.

The replica path per epoch fences a writer that lost its lease without knowing it (a
paused process, a partitioned node): its late uploads land where no later holder reads,
never interleaved with the new holder's. While a claim runs, the tenant is not
:meth:`Placement.ready`: chat goes on without memory, and an exchange waits for the claim
before it is logged (:meth:`Placement.wait`), on disk in the node's spool meanwhile
(:mod:`proxy.chat.ingest`).

Every lease change is a log line ``{"event": "lease", "tenant", "node", "epoch",
"action"}`` (``acquired``, ``lost``, ``released`` with its ``cause``), which
``scripts/cluster.py`` checks for overlaps. Renewals happen every ``lease_renew_s``; a
renewal that fails (another node took the lease, or this node could not renew before the
expiry) drops the tenant at once: unregistered from Litestream first, then its store closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import ClusterConfig
from ..http.metrics import Metrics
from .leases import Lease, LeaseError, Leases
from .replication import Litestream, ReplicationError, replica_url

__all__ = ["Placement", "TenantPlace"]

RESTORE_EPOCHS = 5
"""How many earlier epochs' replicas a claim tries, newest first (a holder that died
before its first upload left an empty replica: the one before it holds the state)."""
_CONTROL_TIMEOUT_S = 5.0
"""How long letting a tenant go waits for Litestream (ship, unregister): a daemon that does
not answer must not keep the node from stopping."""
_SAFETY_MARGIN = 0.25
"""A holder stops writing this share of ``lease_ttl_s`` before its lease expires."""

Events = Callable[[dict[str, Any]], None]


@dataclass
class TenantPlace:
    """This node's hold on one tenant."""

    tenant: str
    state: str = "claiming"
    """``claiming`` (waiting for the lease), ``restoring``, ``ready``, ``lost``,
    ``released`` or ``failed``."""
    lease: Lease | None = None
    acquired_at: float | None = None
    released_at: float | None = None
    restore_ms: float | None = None
    restored_from: int | None = None
    error: str | None = None
    last_used: float = field(default_factory=time.monotonic)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def report(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "state": self.state,
            "epoch": self.lease.epoch if self.lease else None,
            "acquired_at": self.acquired_at,
            "released_at": self.released_at,
            "restore_ms": self.restore_ms,
            "restored_from_epoch": self.restored_from,
            "error": self.error,
        }


class Placement:
    """The tenants this node holds; ``open_store(tenant)`` opens a tenant's store (on a
    worker thread) once its database is in place, ``drop_store(tenant)`` closes it when the
    tenant goes (both from :class:`~proxy.tenants.pool.Tenants`)."""

    def __init__(
        self,
        config: ClusterConfig,
        folder: Path,
        leases: Leases,
        litestream: Litestream,
        *,
        open_store: Callable[[str], Awaitable[None]],
        drop_store: Callable[[str], Awaitable[None]],
        events: Events,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.node = config.node
        self.folder = folder
        self._leases = leases
        self._litestream = litestream
        self._open_store = open_store
        self._drop_store = drop_store
        self._events = events
        self._clock = clock
        self._places: dict[str, TenantPlace] = {}
        self._letting_go: dict[str, asyncio.Event] = {}
        """Tenants being let go, each with the event set once that is done."""
        self._loop: asyncio.Task[None] | None = None
        self._stopping = False
        self._metrics = metrics
        self.lag_s = 0.0
        self._litestream_answers = True
        self._litestream_answered_at = clock()
        if metrics is not None:
            metrics.replication_lag.labels(node=self.node).set_function(lambda: self.lag_s)

    # -- the request path --------------------------------------------------------------

    def ready(self, tenant: str) -> bool:
        """Whether this node may write ``tenant`` now (its lease valid, with a margin)."""
        place = self._places.get(tenant)
        if place is None or place.state != "ready" or place.lease is None:
            return False
        return place.lease.valid(self._clock(), self._margin)

    def request(self, tenant: str) -> TenantPlace:
        """Note a request for ``tenant`` and start claiming it when this node does not hold
        it (never waits)."""
        place = self._places.get(tenant)
        if place is None or (place.state in ("lost", "released", "failed") and place.task is None):
            place = self._places[tenant] = TenantPlace(tenant)
        place.last_used = time.monotonic()
        if place.task is None and place.state == "claiming" and not self._stopping:
            place.task = asyncio.create_task(self._claim(place), name=f"claim-{tenant}")
        return place

    async def wait(self, tenant: str) -> None:
        """Claim ``tenant`` if needed and wait until this node may write it; raises
        :class:`ReplicationError` when the claim failed or the node is stopping."""
        while True:
            place = self.request(tenant)
            if not self._stopping:
                await place.ready.wait()
            if self.ready(tenant):
                return
            if self._stopping:
                raise ReplicationError(f"tenant {tenant} not claimed: this node is stopping")
            if place.state == "failed":
                raise ReplicationError(f"tenant {tenant} could not be claimed: {place.error}")
            await asyncio.sleep(self.config.lease_renew_s)  # lost meanwhile: claim again

    def places(self) -> list[dict[str, Any]]:
        return [p.report() for p in sorted(self._places.values(), key=lambda p: p.tenant)]

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._loop = asyncio.create_task(self._renewals(), name="lease-renewals")

    async def stop(self) -> None:
        """Ship what each held tenant has, then release its lease (the next node takes it
        at once, from a complete replica). Claims in progress are called off, and whatever
        waits for one is told so (:meth:`wait` raises)."""
        self._stopping = True
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        for place in list(self._places.values()):
            if place.task is not None:
                place.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await place.task
            if place.state == "ready":
                await self._let_go(place, "released", ship=True, cause="stopping")
            elif place.state == "restoring" and place.lease is not None:
                # a claim called off after taking the lease: nothing was written under it,
                # so the next node may take the tenant at once rather than wait it out
                await self._let_go(place, "released", ship=False, cause="stopping")
            place.ready.set()  # wakes waiters: wait() raises from now on

    # -- claims ------------------------------------------------------------------------

    @property
    def _margin(self) -> float:
        return self.config.lease_ttl_s * _SAFETY_MARGIN

    async def _claim(self, place: TenantPlace) -> None:
        tenant = place.tenant
        try:
            letting_go = self._letting_go.get(tenant)
            if letting_go is not None:  # the place before is still being let go
                await letting_go.wait()
            lease = await self._acquire(tenant)
            place.lease, place.acquired_at, place.state = lease, self._clock(), "restoring"
            self._event(tenant, lease.epoch, "acquired", previous_node=lease.previous_node)
            began, existed = time.perf_counter(), self._db(tenant).exists()
            place.restored_from = await self._put_in_place(lease)
            await self._open_store(tenant)
            db = self._db(tenant)
            with contextlib.suppress(ReplicationError):  # a registration left by a lost epoch
                await self._litestream.unregister(db)
            await self._litestream.register(db, self._replica(tenant, lease.epoch))
            _mark(self._marker(tenant), lease.epoch)
            took = time.perf_counter() - began
            place.restore_ms = round(took * 1000, 1)
            place.state = "ready"
            kept = "kept" if existed else "new"
            self._count("restored" if place.restored_from is not None else kept, took)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the next request claims again
            self._count("failed", None)
            place.state, place.error = "failed", f"{type(exc).__name__}: {exc}"
            self._events({"event": "claim_failed", "tenant": tenant, "error": place.error})
            if place.lease is not None:
                await self._let_go(place, "released", ship=False, cause="claim_failed")
                place.state = "failed"
        finally:
            place.task = None
            place.ready.set()

    async def _acquire(self, tenant: str) -> Lease:
        """The lease, once no other node holds a valid one (polled twice a renewal period;
        the holder is told this node wants it, see :meth:`_renew`)."""
        while True:
            now = self._clock()
            lease = await asyncio.to_thread(
                self._leases.acquire, tenant, self.node, self.config.lease_ttl_s, now
            )
            if lease is not None:
                return lease
            await asyncio.to_thread(self._leases.want, tenant, self.node, now)
            await asyncio.sleep(self.config.lease_renew_s / 2)

    async def _put_in_place(self, lease: Lease) -> int | None:
        """Make the local database the tenant's latest state; the epoch it was restored
        from, or None when the local one is kept (or the tenant is new)."""
        tenant, db = lease.tenant, self._db(lease.tenant)
        if db.exists() and _marked(self._marker(tenant)) == lease.epoch - 1:
            return None  # this node held the epoch before: nobody wrote since
        first = lease.epoch - 1
        for epoch in range(first, max(0, first - RESTORE_EPOCHS), -1):
            restored = await self._litestream.restore(
                db, self._replica(tenant, epoch), timeout_s=self.config.restore_timeout_s
            )
            if restored:
                return epoch
        return None  # no replica anywhere: a new tenant (or one never replicated)

    # -- renewals ----------------------------------------------------------------------

    async def _renewals(self) -> None:
        while True:
            await asyncio.sleep(self.config.lease_renew_s)
            for place in [p for p in self._places.values() if p.state == "ready"]:
                try:
                    await self._renew(place)
                except (LeaseError, ReplicationError, OSError) as exc:
                    self._events({"event": "renewal_failed", "tenant": place.tenant,
                                  "error": str(exc)})  # fmt: skip
                    if place.lease is not None and not place.lease.valid(
                        self._clock(), self._margin
                    ):
                        await self._let_go(place, "lost", ship=False)
            await self._measure_lag()

    async def _renew(self, place: TenantPlace) -> None:
        """Renew, unless the tenant is idle here, or another node asked for it since this
        one took it and this one has not served it for two renewal periods (the router
        sends it elsewhere now): then release it, its changes shipped first."""
        assert place.lease is not None
        quiet = time.monotonic() - place.last_used
        if quiet > self.config.idle_release_s:
            await self._let_go(place, "released", ship=True, cause="idle")
            return
        if quiet > 2 * self.config.lease_renew_s:
            wanted = await asyncio.to_thread(self._leases.wanted, place.tenant)
            if wanted is not None and wanted[1] > place.lease.acquired_at:
                await self._let_go(place, "released", ship=True, cause="asked")
                return
        renewed = await asyncio.to_thread(
            self._leases.renew, place.lease, self.config.lease_ttl_s, self._clock()
        )
        if renewed is None:
            await self._let_go(place, "lost", ship=False)
        else:
            place.lease = renewed

    async def _let_go(
        self, place: TenantPlace, why: str, *, ship: bool, cause: str | None = None
    ) -> None:
        """Stop writing ``place``'s tenant: it is not ready from now on; Litestream stops
        replicating it (after shipping what it has when ``ship``), its store is closed,
        and a released lease is given up. ``cause`` (why it is released: ``asked``,
        ``idle``, ``stopping``, ``claim_failed``) goes into the lease line.

        Whoever waits on the place's ready event is woken at the end (a new event took its
        place: they waited for ever), and a claim of the tenant started meanwhile waits
        for the end (it renewed the lease about to be released, as its own)."""
        woken, place.ready = place.ready, asyncio.Event()
        place.state, place.released_at = why, self._clock()
        done = self._letting_go[place.tenant] = asyncio.Event()
        try:
            await self._stop_writing(place, why, ship=ship, cause=cause)
        finally:
            if self._letting_go.get(place.tenant) is done:
                del self._letting_go[place.tenant]
            done.set()
            woken.set()

    async def _stop_writing(
        self, place: TenantPlace, why: str, *, ship: bool, cause: str | None
    ) -> None:
        lease = place.lease
        db = self._db(place.tenant)
        bound = max(_CONTROL_TIMEOUT_S, 2 * self.config.sync_interval_s)
        try:
            if ship:
                await self._litestream.sync(db, timeout_s=bound)
        except ReplicationError as exc:
            self._events({"event": "sync_failed", "tenant": place.tenant, "error": str(exc)})
        with contextlib.suppress(ReplicationError):
            await self._litestream.unregister(db, timeout_s=bound)
        await self._drop_store(place.tenant)
        if lease is not None:
            if why == "released" and not await asyncio.to_thread(self._leases.release, lease):
                place.state = why = "lost"  # another node had taken it already
            self._event(place.tenant, lease.epoch, why, **({"cause": cause} if cause else {}))

    async def _measure_lag(self) -> None:
        """Update :attr:`lag_s`. While Litestream cannot be asked (its daemon died, its
        socket is gone) nothing is known to be shipped: the lag is the time since it last
        answered, when a tenant is held, so that it grows (it stayed at its last value, and
        a failover lost every exchange since without a sign). Each change is logged."""
        try:
            self.lag_s = await self._lag()
        except (ReplicationError, OSError) as exc:
            if self._litestream_answers:
                self._litestream_answers = False
                self._events({"event": "replication_failed", "node": self.node,
                              "error": str(exc)})  # fmt: skip
            held = any(p.state == "ready" for p in self._places.values())
            self.lag_s = self._clock() - self._litestream_answered_at if held else 0.0
            return
        self._litestream_answered_at = self._clock()
        if not self._litestream_answers:
            self._litestream_answers = True
            self._events({"event": "replication_resumed", "node": self.node})

    async def _lag(self) -> float:
        """The longest a commit of a held tenant has waited for its upload: for each
        database changed since its last upload, the time since that upload."""
        statuses = {s.path: s for s in await self._litestream.databases()}
        now, worst = self._clock(), 0.0
        for place in self._places.values():
            if place.state != "ready":
                continue
            db = self._db(place.tenant).resolve()
            status = statuses.get(db)
            wal = db.with_name(db.name + "-wal")
            changed = max((p.stat().st_mtime for p in (db, wal) if p.exists()), default=0.0)
            synced = status.last_sync_at if status and status.last_sync_at else 0.0
            if changed > synced:
                worst = max(worst, now - synced if synced else now - changed)
        return worst

    def _count(self, outcome: str, took: float | None) -> None:
        if self._metrics is None:
            return
        self._metrics.tenant_claims.labels(node=self.node, outcome=outcome).inc()
        if took is not None:
            self._metrics.tenant_claim_seconds.labels(node=self.node).observe(took)

    # -- names -------------------------------------------------------------------------

    def _db(self, tenant: str) -> Path:
        return self.folder / f"{tenant}.db"

    def _marker(self, tenant: str) -> Path:
        return self.folder / f"{tenant}.epoch"

    def _replica(self, tenant: str, epoch: int) -> str:
        return replica_url(self.config.replica, tenant, epoch)

    def _event(self, tenant: str, epoch: int, action: str, **extra: Any) -> None:
        event = {"event": "lease", "tenant": tenant, "node": self.node, "epoch": epoch}
        self._events({**event, "action": action, "at": self._clock(), **extra})


def _mark(path: Path, epoch: int) -> None:
    """Record that this node writes the tenant under ``epoch`` (read at the next claim)."""
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(str(epoch))
    temp.replace(path)


def _marked(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
