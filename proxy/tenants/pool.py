"""Tenants: API key -> tenant, and each tenant's memory opened on first use and kept.

Each tenant has its own SQLite file ``<data_dir>/tenants/<tenant>.db``; a request only
ever receives the store of the tenant its key maps to (:func:`tenant_of`). The stores
share one pool of reader threads and one admission gate for lookups
(:class:`.memory.RecallGate`); in a cluster a tenant is opened only while this node
holds it (:mod:`proxy.cluster.placement`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from memory_core import (
    DEFAULT_RECEIPT_AGE_S,
    STRATEGIES,
    Backends,
    DreamConfig,
    FormationConfig,
    GraphSettings,
    MemoryStore,
    ReconstructionConfig,
    TokenCounter,
    warm_tokenizers,
)

from ..cluster.placement import Placement
from ..cluster.replication import ReplicationError
from ..config import AuthConfig, Config
from ..errors import ApiError, MemoryMoving, MemoryUnavailable
from .as_of import AsOfCopies
from .memory import Events, RecallGate, RemoteFormation, TenantMemory

__all__ = ["Tenants", "tenant_of", "tenants_of"]


def tenant_of(headers: Mapping[str, str], auth: AuthConfig) -> str:
    """The tenant a request with ``headers`` acts for; raises 401 for an unknown key in
    ``keys`` mode."""
    if auth.mode == "open":
        return "default"
    header = headers.get("Authorization", "")
    scheme, _, key = header.partition(" ")
    key = key.strip() if scheme.lower() == "bearer" else ""
    if not key:
        key = headers.get("X-Api-Key", "").strip()
    tenant = auth.keys.get(key) if key else None
    if tenant is None:
        message = (
            "Incorrect API key provided." if key else "Missing API key (Authorization: Bearer ...)."
        )
        raise ApiError(401, message, type_="invalid_request_error", code="invalid_api_key")
    return tenant


def tenants_of(
    config: Config,
    backends: Backends,
    *,
    events: Events | None = None,
    remote: RemoteFormation | None = None,
) -> Tenants:
    """The tenants of ``config`` (its data folder, formation, retrieval, reconstruction,
    dream and receipt settings); each lookup counts with the requested model's
    tokenizer."""
    return Tenants(
        config.server.data_dir,
        None,
        config.formation,
        backends,
        graph=config.retrieval,
        reconstruction=config.reconstruction,
        receipt_max_age_s=config.memory.receipts_keep_days * 86_400,
        strategy=config.memory.retrieval,
        events=events,
        max_lookups=config.memory.max_concurrent_retrievals,
        remote=remote,
        dream=config.dream,
    )


class Tenants:
    """Opens tenant stores on first use and keeps them open until shutdown."""

    def __init__(
        self,
        data_dir: Path,
        counter: TokenCounter | None,
        formation: FormationConfig,
        backends: Backends,
        *,
        graph: GraphSettings | None = None,
        reconstruction: ReconstructionConfig | None = None,
        receipt_max_age_s: float = DEFAULT_RECEIPT_AGE_S,
        strategy: str = "bm25",
        events: Events | None = None,
        max_lookups: int = 4,
        remote: RemoteFormation | None = None,
        dream: DreamConfig | None = None,
    ) -> None:
        self.folder = data_dir / "tenants"
        self._as_of_folder = data_dir / "as_of"
        AsOfCopies.clear(self._as_of_folder)  # copies a crashed run left behind
        self._copying = threading.Lock()  # one copy as of a snapshot at a time
        self._dream = dream
        self._counter = counter
        self._formation = formation
        self._backends = backends
        self._graph = graph
        self._reconstruction = reconstruction
        self._receipt_max_age_s = receipt_max_age_s
        self._strategy = strategy
        self._warm_graph = STRATEGIES.get(strategy).uses_graph
        self._events = events
        self._remote = remote
        self._open: dict[str, TenantMemory] = {}
        self._lock = threading.Lock()
        self._readers = ThreadPoolExecutor(max_workers=max_lookups, thread_name_prefix="mem-r")
        self._gate = RecallGate(max_lookups)
        self.placement: Placement | None = None
        """In a cluster, which tenants this node may write (:mod:`proxy.cluster.placement`); a
        tenant it does not hold is claimed on first use and raises :class:`MemoryMoving` until then.
        """

    def get(self, tenant: str, *, warm_graph: bool = True) -> TenantMemory:
        """The tenant's memory, opened on first use (its graph then read on the formation
        thread unless ``warm_graph`` is False). In a cluster, raises
        :class:`MemoryMoving` while this node does not hold the tenant (and starts
        claiming it)."""
        placement = self.placement
        if placement is not None and not placement.ready(tenant):
            placement.request(tenant)
            raise MemoryMoving(tenant, placement.node)
        return self._get(tenant, warm_graph)

    def _get(self, tenant: str, warm_graph: bool = True) -> TenantMemory:
        with self._lock:
            memory = self._open.get(tenant)
            if memory is None:
                store = self._store(self.folder / f"{tenant}.db")
                copies = AsOfCopies(
                    self._as_of_folder, tenant, self._store, gate=self._copying
                )
                memory = self._open[tenant] = TenantMemory(
                    tenant, store, self._readers, self._events, self._gate, self._remote, copies
                )
                if self._warm_graph and warm_graph:
                    memory.warm_graph()
            return memory

    def _store(self, path: Path) -> MemoryStore:
        """A store with this proxy's settings (a tenant's file, or a copy as of a snapshot)."""
        events = None if self._events is None else _naming(self._events, path.stem)
        return MemoryStore(
            path,
            events=events,
            counter=self._counter,
            formation=self._formation,
            backends=self._backends,
            graph=self._graph,
            reconstruction=self._reconstruction,
            receipt_max_age_s=self._receipt_max_age_s,
            dream=self._dream,
        )

    async def open(self, tenant: str, *, claim: bool = False) -> TenantMemory:
        """:meth:`get` for the event loop: a store not yet open is opened (created,
        migrated) on a worker thread, so the loop never waits for SQLite. In a cluster,
        with ``claim`` it waits until this node holds the tenant (a write that must not
        be lost), at most ``cluster.claim_wait_s`` (then :class:`MemoryMoving`), and raises
        :class:`MemoryUnavailable` when the claim fails; without, it raises
        :class:`MemoryMoving` meanwhile."""
        placement = self.placement
        if placement is not None:
            if claim:
                try:
                    await asyncio.wait_for(placement.wait(tenant), placement.config.claim_wait_s)
                except ReplicationError as exc:  # an API error here, not a 500
                    raise MemoryUnavailable(str(exc)) from exc
                except TimeoutError:  # another node keeps it in use: the client retries
                    raise MemoryMoving(tenant, placement.node) from None
            elif not placement.ready(tenant):
                placement.request(tenant)
                raise MemoryMoving(tenant, placement.node)
        with self._lock:
            memory = self._open.get(tenant)
        if memory is not None:
            return memory
        return await asyncio.get_running_loop().run_in_executor(None, self._get, tenant)

    async def open_claimed(self, tenant: str) -> None:
        """Open the store of a tenant just claimed (its database in place): the
        placement's hook, before the tenant counts as held."""
        await asyncio.get_running_loop().run_in_executor(None, self._get, tenant)

    async def drop(self, tenant: str) -> None:
        """Close a tenant's store (the placement let it go): later uses claim it again."""
        with self._lock:
            memory = self._open.pop(tenant, None)
        if memory is not None:
            memory.cancel_formation()
            await asyncio.get_running_loop().run_in_executor(None, memory.close)

    def warm_up(self, tenants: Collection[str]) -> None:
        """Load what the first request would otherwise wait for: the encoder (one text,
        one batch and one question through it), the token counter, and each tenant's
        store, graph and lookup path. Runs on a worker thread at start-up, before the
        proxy reports ready."""
        encoder = self._backends.encoder
        encoder.encode(["areamem warm-up"])
        encoder.encode(["areamem warm-up", "a second text"])
        encoder.encode_question("areamem warm-up?")
        if self._counter is not None:
            self._counter.count("areamem warm-up")
        warm_tokenizers()  # each lookup counts with its model's tokenizer
        for tenant in tenants:  # on a reader thread, as a request's lookup would run
            memory = self.get(tenant, warm_graph=False)
            self._readers.submit(memory.warm, self._strategy).result()

    def existing(self) -> list[str]:
        """Tenants with a database on disk (for recovery at startup)."""
        if not self.folder.is_dir():
            return []
        return sorted(p.stem for p in self.folder.glob("*.db"))

    def find(self, tenant: str) -> TenantMemory | None:
        """The tenant's memory if it is open (none opened here)."""
        with self._lock:
            return self._open.get(tenant)

    def opened(self) -> list[TenantMemory]:
        with self._lock:
            return list(self._open.values())

    def close(self) -> None:
        for memory in self.opened():
            memory.close()
        self._readers.shutdown(wait=True)


def _naming(events: Events, tenant: str) -> Events:
    """``events`` with the tenant named in each record (a store's cycles and rollbacks are
    logged in this proxy's log, whoever started them)."""
    return lambda record: events({**record, "tenant": tenant})
