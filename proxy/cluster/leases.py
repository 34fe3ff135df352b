"""Leases: at most one node writes a tenant at a time ("no two writers").

A tenant's lease lives in the replica store beside its replica, as one small JSON file per
epoch: ``<root>/leases/<tenant>/<epoch as 20 digits>.json`` holding ``node``, ``holder``
(the process, a random token per :class:`Leases`), ``epoch``, ``expires_at`` and
``acquired_at`` (wall-clock epoch seconds). The current lease is the one
with the highest epoch. Taking a lease is compare-and-swap by exclusive create: the taker
creates epoch ``current + 1``, and of several nodes racing for it exactly one create
succeeds; the winner then checks that its epoch is the highest (a taker that stalled
after reading may find its epoch taken and pruned meanwhile, its name free again). The
holder renews by rewriting its own epoch's file (atomically), and releases by rewriting
it with ``expires_at = 0``; both only while its epoch is still the highest.

Invariants:

* an epoch is renewed and released only by the process that took it, never by another
  with the same node name (the node restarted within its lease, or two nodes given one
  name): that one waits for the expiry as any other node does;
* epochs only grow, and an epoch has one holder for its whole life: a lease that expired or
  was released is never renewed again (someone may already have taken over), only succeeded
  by a new epoch — so the epoch is also a fencing token;
* ``previous_node`` of a lease is the holder of the epoch before it: a node whose own name is
  there knows nobody wrote the tenant since it did, so its local copy is current; otherwise
  it restores from the replica before writing;
* old epoch files beyond the newest :data:`KEEP_EPOCHS` are pruned after each takeover.

Clocks. Expiry compares a time one node wrote with another node's clock, so nodes need
synchronised clocks (NTP). A holder stops writing ``margin`` seconds before its lease
expires (:meth:`Lease.valid`) and renews well before that: with ``margin`` at least twice the
worst clock skew, the old holder has stopped before any other node sees the lease expired.
A holder that pauses longer than ``margin`` between checking its lease and writing (a stall,
a frozen VM) can still overlap a successor, as with any lease without a fencing check at the
storage.

Stores. :class:`LeaseStore` is the few operations the protocol needs; :class:`FileLeaseStore`
implements it on a filesystem path shared by the nodes (``file://`` roots: NFS, EFS, or a
local disk for nodes on one host). An S3 store would implement ``create`` as a PUT with
``If-None-Match: *`` (412 means the epoch is taken), ``replace`` as a plain PUT, ``epochs``
as ListObjectsV2 on the tenant's prefix: the protocol above is unchanged. It is not written
yet. All functions do blocking IO; async callers run them in a thread.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit

from ..config import TENANT_NAME
from ..errors import ProxyError
from .durable import TEMP_PREFIX, fsync_dir, replace_file, write_temp

__all__ = [
    "KEEP_EPOCHS",
    "FileLeaseStore",
    "Lease",
    "LeaseError",
    "LeaseStore",
    "Leases",
    "lease_store",
]

KEEP_EPOCHS = 3
"""How many of a tenant's newest epoch files survive pruning."""

_EPOCH_FILE = re.compile(r"(\d{20})\.json")
_STALE_TEMP_S = 3600.0


class LeaseError(ProxyError):
    """The lease store is unreachable, holds a malformed lease, or was named wrongly."""


@dataclass(frozen=True)
class Lease:
    """A node's right to write ``tenant`` until ``expires_at`` (wall-clock epoch seconds).

    ``expires_at == 0`` marks a released lease. ``previous_node`` is the holder of
    ``epoch - 1`` (None for the first epoch, or when that file was pruned).
    """

    tenant: str
    node: str
    epoch: int
    expires_at: float
    acquired_at: float
    previous_node: str | None = None
    holder: str = ""
    """The process that holds it (:attr:`Leases.holder`): a node's name alone does not
    tell a restarted process, or a second node given the same name, from the holder."""

    @property
    def released(self) -> bool:
        """Whether the holder gave the lease up."""
        return self.expires_at == 0

    def valid(self, now: float, margin: float = 0.0) -> bool:
        """Whether the holder may still write at ``now``: ``margin`` seconds short of expiry,
        so clock skew between nodes (up to ``margin / 2``) cannot let two nodes write."""
        return now < self.expires_at - margin


class LeaseStore(Protocol):
    """Where lease files live. ``create`` must be atomic and exclusive: of concurrent creates
    of one epoch exactly one returns True, and a reader never sees a partial file."""

    def epochs(self, tenant: str) -> list[int]:
        """The tenant's epochs present, ascending."""
        ...

    def read(self, tenant: str, epoch: int) -> bytes | None:
        """An epoch's file, or None when it is absent."""
        ...

    def create(self, tenant: str, epoch: int, body: bytes) -> bool:
        """Create an epoch's file with ``body``; False when it already exists."""
        ...

    def replace(self, tenant: str, epoch: int, body: bytes) -> None:
        """Atomically overwrite an epoch's file."""
        ...

    def delete(self, tenant: str, epoch: int) -> None:
        """Remove an epoch's file (absent is fine)."""
        ...

    def put_note(self, tenant: str, name: str, body: bytes) -> None:
        """Atomically write the tenant's note ``name`` (not a lease: last writer wins)."""
        ...

    def read_note(self, tenant: str, name: str) -> bytes | None:
        """The tenant's note ``name``, or None."""
        ...


class FileLeaseStore:
    """Lease files under ``<root>/leases/`` on a filesystem every node mounts.

    An exclusive create writes a private temp file and hard-links it to the epoch's name
    (``link`` fails when the name exists, and the linked file is complete): an
    ``O_CREAT|O_EXCL`` create would be just as exclusive but visible empty for a moment. The
    filesystem must support hard links (NFS, EFS and local disks do). Files and folders are
    fsynced before an operation returns.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def epochs(self, tenant: str) -> list[int]:
        try:
            names = os.listdir(self._folder(tenant))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise LeaseError(f"cannot list leases of {tenant!r} under {self.root}: {exc}") from exc
        return sorted(int(m[1]) for name in names if (m := _EPOCH_FILE.fullmatch(name)))

    def read(self, tenant: str, epoch: int) -> bytes | None:
        return _read_or_none(self._path(tenant, epoch))

    def create(self, tenant: str, epoch: int, body: bytes) -> bool:
        folder = self._folder(tenant)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            temp = write_temp(folder, body, 0o644)
            try:
                os.link(temp, self._path(tenant, epoch))
            except FileExistsError:
                return False
            finally:
                temp.unlink(missing_ok=True)
            fsync_dir(folder)
        except OSError as exc:
            raise LeaseError(f"cannot create {self._path(tenant, epoch)}: {exc}") from exc
        _remove_stale_temps(folder)
        return True

    def replace(self, tenant: str, epoch: int, body: bytes) -> None:
        path = self._path(tenant, epoch)
        try:
            replace_file(path, body, 0o644)
        except OSError as exc:
            raise LeaseError(f"cannot rewrite {path}: {exc}") from exc

    def delete(self, tenant: str, epoch: int) -> None:
        try:
            self._path(tenant, epoch).unlink(missing_ok=True)
        except OSError as exc:
            raise LeaseError(f"cannot delete {self._path(tenant, epoch)}: {exc}") from exc

    def put_note(self, tenant: str, name: str, body: bytes) -> None:
        folder = self._folder(tenant)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            replace_file(folder / f"{name}.note", body, 0o644)
        except OSError as exc:
            raise LeaseError(f"cannot write note {name} of {tenant!r}: {exc}") from exc

    def _replace(self, path: Path, body: bytes) -> None:
        """Write ``body`` to a temp file beside ``path`` and rename it over ``path``."""
        temp = write_temp(path.parent, body, 0o644)
        try:
            os.replace(temp, path)
        finally:
            temp.unlink(missing_ok=True)
        fsync_dir(path.parent)

    def read_note(self, tenant: str, name: str) -> bytes | None:
        return _read_or_none(self._folder(tenant) / f"{name}.note")

    def _folder(self, tenant: str) -> Path:
        return self.root / "leases" / _checked(tenant)

    def _path(self, tenant: str, epoch: int) -> Path:
        return self._folder(tenant) / f"{epoch:020d}.json"

class Leases:
    """The lease protocol over a :class:`LeaseStore` (see the module docstring).

    ``now`` is always the caller's wall clock (``time.time()``), passed in so that every
    decision is reproducible; ``ttl_s`` is how long a lease lasts from ``now``.
    """

    def __init__(self, store: LeaseStore, holder: str | None = None) -> None:
        self.store = store
        self.holder = holder if holder is not None else secrets.token_hex(8)
        """Who this object acts for: one process (a random token by default). A lease is
        renewed or released only by the holder that took it."""

    def current(self, tenant: str) -> Lease | None:
        """The tenant's lease of the highest epoch (expired or released ones included), or
        None when the tenant never had one."""
        epochs = self.store.epochs(_checked(tenant))
        return self._lease(tenant, epochs[-1]) if epochs else None

    def acquire(self, tenant: str, node: str, ttl_s: float, now: float) -> Lease | None:
        """Take the tenant for ``node``: a new epoch when there is no lease or the current one
        expired or was released; a renewal when this holder took it as ``node``; None when
        another node, or another process of ``node``, holds it or won the race for the new
        epoch."""
        _check_node(node)
        _check_ttl(ttl_s)
        held = self.current(tenant)
        if held is not None and held.valid(now):
            ours = (held.node, held.holder) == (node, self.holder)
            return self.renew(held, ttl_s, now) if ours else None
        epoch = held.epoch + 1 if held is not None else 1
        previous = held.node if held else None
        lease = Lease(tenant, node, epoch, now + ttl_s, now, previous, self.holder)
        if not self.store.create(tenant, epoch, _body(lease)):
            return None
        if self.store.epochs(tenant)[-1:] != [epoch]:
            # this node stalled after reading: newer epochs came and pruned this one, so
            # the create found its name free; the newest epoch holds the tenant, not this
            self.store.delete(tenant, epoch)
            return None
        self._prune(tenant, epoch)
        return lease

    def renew(self, lease: Lease, ttl_s: float, now: float) -> Lease | None:
        """Extend ``lease`` to ``now + ttl_s``; None when it is lost: a higher epoch exists,
        or it expired or was released (never resurrected: someone may have taken over)."""
        _check_ttl(ttl_s)
        stored = self._still_ours(lease)
        if stored is None or not stored.valid(now):
            return None
        renewed = replace(stored, expires_at=now + ttl_s)
        self.store.replace(lease.tenant, lease.epoch, _body(renewed))
        if self.store.epochs(lease.tenant)[-1:] != [lease.epoch]:
            return None  # a successor appeared meanwhile: it wins
        return renewed

    def release(self, lease: Lease) -> bool:
        """Give ``lease`` up (``expires_at = 0``) so another node may take the tenant at
        once; False (nothing written) when it is no longer the highest epoch."""
        stored = self._still_ours(lease)
        if stored is None:
            return False
        released = replace(stored, expires_at=0.0)
        self.store.replace(lease.tenant, lease.epoch, _body(released))
        return True

    def want(self, tenant: str, node: str, now: float) -> None:
        """Tell the holder that ``node`` is being sent the tenant (the router moved it, or
        the node came back): a holder that is not serving it any more releases it at its
        next renewal instead of waiting for its idle release."""
        _check_node(node)
        body = json.dumps({"node": node, "holder": self.holder, "at": now}).encode()
        self.store.put_note(_checked(tenant), "wanted", body)

    def wanted(self, tenant: str) -> tuple[str, float] | None:
        """The node that last asked for the tenant, and when; None when none asked, or this
        holder did (another process with this node's name asking is another node asking)."""
        body = self.store.read_note(_checked(tenant), "wanted")
        if body is None:
            return None
        try:
            data = json.loads(body)
            asker, at = str(data["node"]), _time(data["at"])
            if data.get("holder") == self.holder:
                return None
            return asker, at
        except (ValueError, KeyError, TypeError, OverflowError, AttributeError):
            return None  # a torn or foreign note asks for nothing

    def _still_ours(self, lease: Lease) -> Lease | None:
        """The stored state of ``lease`` when its epoch is still the highest and this holder
        holds it as ``lease.node``, else None."""
        current = self.current(lease.tenant)
        if current is None or current.epoch != lease.epoch:
            return None
        if (current.node, current.holder) != (lease.node, self.holder):
            return None
        return current

    def _lease(self, tenant: str, epoch: int) -> Lease | None:
        body = self.store.read(tenant, epoch)
        if body is None:
            return None
        return _parse(tenant, epoch, body, self._holder(tenant, epoch - 1))

    def _holder(self, tenant: str, epoch: int) -> str | None:
        """The node that held ``epoch``, or None when unknown. Only reported, never decided
        on: a torn or edited old file must not make the current lease unreadable."""
        body = self.store.read(tenant, epoch) if epoch >= 1 else None
        try:
            return _parse(tenant, epoch, body).node if body is not None else None
        except LeaseError:
            return None

    def _prune(self, tenant: str, newest: int) -> None:
        for epoch in self.store.epochs(tenant):
            if epoch <= newest - KEEP_EPOCHS:
                self.store.delete(tenant, epoch)


def lease_store(root: str) -> LeaseStore:
    """The lease store of a replica root: ``file:///shared/path`` (the only kind written so
    far; ``s3://`` needs conditional PUT, see the module docstring)."""
    parts = urlsplit(root)
    if parts.scheme != "file":
        raise LeaseError(
            f"no lease store for {root!r}: only file:// roots are supported "
            "(an S3 store needs conditional PUT with If-None-Match: *)"
        )
    if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
        raise LeaseError(f"a file:// lease root needs an absolute local path: {root!r}")
    return FileLeaseStore(Path(unquote(parts.path)))


def _body(lease: Lease) -> bytes:
    fields = {
        "node": lease.node,
        "epoch": lease.epoch,
        "expires_at": lease.expires_at,
        "acquired_at": lease.acquired_at,
        "holder": lease.holder,
    }
    return json.dumps(fields, sort_keys=True).encode()


def _parse(tenant: str, epoch: int, body: bytes, previous_node: str | None = None) -> Lease:
    try:
        fields = json.loads(body)
        node, expires_at, acquired_at = fields["node"], fields["expires_at"], fields["acquired_at"]
        holder = fields.get("holder", "")  # none in a lease written before holders
        if fields["epoch"] != epoch or not isinstance(node, str) or not isinstance(holder, str):
            raise ValueError(fields)
        times = _time(expires_at), _time(acquired_at)
        return Lease(tenant, node, epoch, *times, previous_node, holder)
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise LeaseError(f"malformed lease {epoch} of tenant {tenant!r}: {body[:200]!r}") from exc


def _time(value: object) -> float:
    """A stored time: a finite JSON number. An infinite expiry (``1e400``) would keep the
    tenant from every node for good, a NaN one would read as expired: both are corrupt."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"a time must be a number, not {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"a time must be finite, not {value!r}")
    return float(value)


def _checked(tenant: str) -> str:
    """``tenant`` when it is a safe single path component (the proxy's tenant names)."""
    if not TENANT_NAME.fullmatch(tenant):
        raise LeaseError(f"invalid tenant name for a lease: {tenant!r}")
    return tenant


def _check_node(node: str) -> None:
    if not node or not node.isprintable():
        raise LeaseError(f"invalid node name for a lease: {node!r}")


def _check_ttl(ttl_s: float) -> None:
    if not 0 < ttl_s < math.inf:
        raise ValueError(f"a lease lasts a positive, finite time, not ttl_s={ttl_s}")


def _read_or_none(path: Path) -> bytes | None:
    """A lease store file's bytes; None when it does not exist."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LeaseError(f"cannot read {path}: {exc}") from exc


def _remove_stale_temps(folder: Path) -> None:
    """Drop temp files a crashed writer left behind (untouched for an hour: never one that
    a live writer is about to link or rename)."""
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        cutoff = os.stat(folder).st_mtime - _STALE_TEMP_S  # the store's clock, not ours
        for entry in entries:
            with contextlib.suppress(OSError):
                if entry.name.startswith(TEMP_PREFIX) and entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
