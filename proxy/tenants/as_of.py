"""Answers "as of" a snapshot: a tenant's memory as it was then, beside the current one.

``X-Memory-As-Of: <snapshot>`` on a chat request, and ``as_of=`` on ``/memory/search`` and
``/memory/area``, read from a copy of the tenant's file whose derived memory was rolled
back to the snapshot (:meth:`memory_core.MemoryStore.materialize`); the tenant's own
memory is never touched. A copy costs a copy of the file and a read of its graph, so it
is made on first use, on a worker thread, one at a time in the whole proxy (``gate``: a
client asking for many snapshots cannot make many copies at once), and kept (the ``keep``
most recently used per tenant); a snapshot's state never changes, so a kept copy never
goes stale. Copies live
in ``<data_dir>/as_of`` and are deleted when dropped, at shutdown, and at the next start
after a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from memory_core import MemoryStore

__all__ = ["AsOfCopies"]

_SUFFIXES = ("", "-wal", "-shm", ".dream.lock")


class AsOfCopies:
    """One tenant's copies as of snapshots (used from the event loop)."""

    def __init__(
        self,
        folder: Path,
        tenant: str,
        open_store: Callable[[Path], MemoryStore],
        *,
        gate: threading.Lock | None = None,
        keep: int = 2,
    ) -> None:
        self._folder = folder
        self._gate = gate or threading.Lock()
        self._tenant = tenant
        self._open = open_store
        self._keep = keep
        self._copies: OrderedDict[int, asyncio.Future[MemoryStore]] = OrderedDict()

    @staticmethod
    def clear(folder: Path) -> None:
        """Delete every copy in ``folder`` (left by a run that stopped without closing)."""
        if folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)

    async def store(self, source: MemoryStore, snapshot: int) -> MemoryStore:
        """The store as of ``snapshot`` (made now unless kept); raises what making it
        raised (:class:`memory_core.errors.SnapshotNotFoundError` for an unknown id)."""
        pending = self._copies.get(snapshot)
        if pending is None:
            loop = asyncio.get_running_loop()
            pending = loop.run_in_executor(None, self._make, source, snapshot)
            self._copies[snapshot] = pending
            self._evict()
        self._copies.move_to_end(snapshot)
        try:
            return await asyncio.shield(pending)
        except BaseException:
            if pending.done() and self._copies.get(snapshot) is pending:
                del self._copies[snapshot]
            raise

    def _make(self, source: MemoryStore, snapshot: int) -> MemoryStore:
        with self._gate:
            return self._made(source, snapshot)

    def _made(self, source: MemoryStore, snapshot: int) -> MemoryStore:
        self._folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self._folder / f"{self._tenant}-{snapshot}-{uuid.uuid4().hex[:12]}.db"
        try:
            source.materialize(snapshot, path)
            store = self._open(path)
        except BaseException:
            _remove(path)
            raise
        try:
            store.warm_graph()
        except BaseException:
            store.close()
            _remove(path)
            raise
        return store

    def _evict(self) -> None:
        while len(self._copies) > self._keep:
            _, oldest = self._copies.popitem(last=False)
            if oldest.done():
                _discard(oldest)
            else:
                oldest.add_done_callback(_discard)

    def close(self) -> None:
        """Close and delete every copy now (one still being made, once made)."""
        for pending in self._copies.values():
            if pending.done():
                _discard(pending)
            else:
                pending.add_done_callback(_discard)
        self._copies.clear()


def _discard(done: asyncio.Future[MemoryStore]) -> None:
    if done.cancelled() or done.exception() is not None:
        return
    store = done.result()
    store.close()
    _remove(store.path)


def _remove(path: Path) -> None:
    for suffix in _SUFFIXES:
        with contextlib.suppress(OSError):
            path.with_name(path.name + suffix).unlink()
