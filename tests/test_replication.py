"""Litestream replication for real: daemons in a temp folder, ``file://`` replicas, and WAL
databases written with the stdlib's sqlite3 (the tests may; the proxy goes through storage)."""

from __future__ import annotations

import asyncio
import os
import signal
import site
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from pathlib import Path

import pytest

from proxy.cluster.replication import (
    DAEMON_SYNC_INTERVAL_S,
    Litestream,
    ReplicationError,
    litestream_binary,
    replica_url,
)

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parent.parent


def write(db: Path, *values: str) -> None:
    """Append ``values`` to table ``t`` of ``db`` (created in WAL mode when missing)."""
    db.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA journal_mode=wal")
        conn.execute("CREATE TABLE IF NOT EXISTS t (v TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [(v,) for v in values])
        conn.commit()


def rows(db: Path) -> list[str]:
    with closing(sqlite3.connect(db)) as conn:
        return [v for (v,) in conn.execute("SELECT v FROM t ORDER BY rowid")]


def gone(pgid: int) -> bool:
    """Whether no live process of the process group ``pgid`` is left (zombies waiting for
    a reaper count as gone)."""
    for entry in os.listdir("/proc"):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return False
    return True


async def wait_until(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Litestream]:
    daemon = Litestream(litestream_binary(), tmp_path / "n1")
    await daemon.start()
    yield daemon
    await daemon.stop()


def test_the_binary_is_the_one_installed_beside_python() -> None:
    binary = litestream_binary()
    assert binary == Path(sys.executable).parent / "litestream"
    assert os.access(binary, os.X_OK)


def test_replica_urls_put_each_tenant_under_the_root() -> None:
    assert replica_url("file:///srv/replicas/", "alice") == "file:///srv/replicas/tenants/alice"
    assert replica_url("s3://bucket/prefix", "bob") == "s3://bucket/prefix/tenants/bob"
    assert (
        replica_url("s3://b/p/?endpoint=http://minio:9000&forcePathStyle=true", "bob", 3)
        == "s3://b/p/tenants/bob/e3?endpoint=http://minio:9000&forcePathStyle=true"
    )
    for bad in ("../x", "a/b", "", ".hidden"):
        with pytest.raises(ReplicationError):
            replica_url("file:///srv", bad)


async def test_committed_rows_reach_a_restore_on_another_node(
    node: Litestream, tmp_path: Path
) -> None:
    db, url = tmp_path / "n1" / "tenants" / "alice.db", f"file://{tmp_path}/replicas/alice"
    write(db, "a", "b")
    await node.register(db, url)
    await node.register(db, url)  # idempotent
    write(db, "c")
    await node.sync(db)
    [status] = await node.databases()
    assert (status.path, status.status) == (db, "replicating")
    assert status.last_sync_at is not None and abs(status.last_sync_at - time.time()) < 60

    elsewhere = tmp_path / "n2" / "tenants" / "alice.db"
    assert await node.restore(elsewhere, url)
    assert rows(elsewhere) == ["a", "b", "c"]
    with closing(sqlite3.connect(elsewhere)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert sorted(os.listdir(elsewhere.parent)) == ["alice.db"]  # no staging left behind


async def test_failover_continues_the_same_replica(tmp_path: Path) -> None:
    """Node 1 writes and dies; node 2 restores, registers its copy on the same replica and
    writes on; a third restore holds every row of both."""
    binary, url = litestream_binary(), f"file://{tmp_path}/replicas/t"
    first, second = Litestream(binary, tmp_path / "n1"), Litestream(binary, tmp_path / "n2")
    db1, db2 = tmp_path / "n1" / "t.db", tmp_path / "n2" / "t.db"
    await first.start()
    try:
        write(db1, "one", "two")
        await first.register(db1, url)
        write(db1, "three")
        await first.sync(db1)
    finally:
        await first.stop()

    await second.start()
    try:
        assert await second.restore(db2, url)
        await second.register(db2, url)
        write(db2, "four")
        await second.sync(db2)
        assert [d.path for d in await second.databases()] == [db2]
        await second.unregister(db2)
        assert await second.databases() == []
    finally:
        await second.stop()

    third = tmp_path / "n3" / "t.db"
    assert await second.restore(third, url)  # restoring needs no daemon
    assert rows(third) == ["one", "two", "three", "four"]


async def test_an_empty_replica_restores_nothing_and_touches_nothing(tmp_path: Path) -> None:
    daemon = Litestream(litestream_binary(), tmp_path / "n1")  # never started
    target = tmp_path / "data" / "t.db"
    assert not await daemon.restore(target, f"file://{tmp_path}/nowhere")
    assert os.listdir(target.parent) == []

    write(target, "kept")
    os.makedirs(tmp_path / "empty")
    assert not await daemon.restore(target, f"file://{tmp_path}/empty")
    assert rows(target) == ["kept"]
    assert sorted(os.listdir(target.parent)) == ["t.db"]


async def test_a_restore_drops_the_stale_wal_of_the_file_it_replaces(
    node: Litestream, tmp_path: Path
) -> None:
    db, url = tmp_path / "n1" / "t.db", f"file://{tmp_path}/replicas/t"
    write(db, "replicated")
    await node.register(db, url)
    await node.sync(db)
    target = tmp_path / "n2" / "t.db"
    write(target, "stale")
    for sidecar in ("t.db-wal", "t.db-shm"):
        (target.parent / sidecar).write_bytes(b"left by a crashed writer" * 100)
    assert await node.restore(target, url)
    assert not (target.parent / "t.db-wal").exists()
    assert not (target.parent / "t.db-shm").exists()
    assert rows(target) == ["replicated"]


async def test_registration_guards(node: Litestream, tmp_path: Path) -> None:
    db, url = tmp_path / "n1" / "t.db", f"file://{tmp_path}/replicas/t"
    with pytest.raises(ReplicationError, match="no such database file"):
        await node.register(db, url)
    write(db, "x")
    await node.register(db, url)
    with pytest.raises(ReplicationError, match="already replicating"):
        await node.register(db, f"file://{tmp_path}/replicas/other")
    with pytest.raises(ReplicationError, match="registered for replication"):
        await node.restore(db, url)


async def test_a_dead_daemon_is_reported_with_its_log(node: Litestream, tmp_path: Path) -> None:
    db = tmp_path / "n1" / "t.db"
    write(db, "x")
    await node.register(db, f"file://{tmp_path}/replicas/t")
    pid = node.pid
    assert pid is not None
    os.killpg(pid, signal.SIGKILL)
    await wait_until(lambda: node.pid is None)
    with pytest.raises(ReplicationError) as caught:
        await node.sync(db)
    message = str(caught.value)
    assert "litestream sync" in message and "control socket" in message
    assert "the daemon exited with -9" in message and "litestream.log" in message


async def test_commands_without_a_daemon_fail_clearly(tmp_path: Path) -> None:
    daemon = Litestream(litestream_binary(), tmp_path / "n1")
    with pytest.raises(ReplicationError, match="control socket"):
        await daemon.databases()


async def test_a_file_in_the_sockets_place_is_refused(tmp_path: Path) -> None:
    daemon = Litestream(litestream_binary(), tmp_path / "n1")
    (tmp_path / "n1").mkdir()
    daemon.socket_path.write_text("a file in the socket's place")
    with pytest.raises(ReplicationError, match="not a socket"):
        await daemon.start(timeout_s=5)
    assert daemon.pid is None


def fake_litestream(tmp_path: Path, body: str) -> Path:
    """A stand-in ``litestream`` running the shell ``body`` whatever its arguments."""
    binary = tmp_path / "fake-litestream"
    binary.write_text(f"#!/bin/sh\n{body}\n")
    binary.chmod(0o755)
    return binary


async def test_a_daemon_that_exits_at_start_is_reported_with_its_log(tmp_path: Path) -> None:
    binary = fake_litestream(tmp_path, 'echo "fatal: cannot open the store" >&2; exit 1')
    daemon = Litestream(binary, tmp_path / "n1")
    with pytest.raises(ReplicationError, match=r"(?s)exited at start.*cannot open the store"):
        await daemon.start(timeout_s=5)


async def test_a_daemon_that_never_answers_is_killed(tmp_path: Path) -> None:
    """One that even ignores SIGTERM: its whole process group is killed after the grace."""
    binary = fake_litestream(tmp_path, "trap '' TERM; echo waiting; sleep 30; sleep 30")
    daemon = Litestream(binary, tmp_path / "n1")
    started = asyncio.create_task(daemon.start(timeout_s=0.3))
    await wait_until(lambda: daemon.pid is not None)
    pid = daemon.pid
    assert pid is not None
    with pytest.raises(ReplicationError, match=r"(?s)did not answer.*waiting"):
        await started
    assert gone(pid)


async def test_a_missing_binary_is_a_replication_error(tmp_path: Path) -> None:
    daemon = Litestream(tmp_path / "no-litestream", tmp_path / "n1")
    with pytest.raises(ReplicationError, match="cannot start"):
        await daemon.start()
    with pytest.raises(ReplicationError, match="cannot run"):
        await daemon.restore(tmp_path / "t.db", f"file://{tmp_path}/r")


async def test_stop_leaves_no_process(tmp_path: Path) -> None:
    daemon = Litestream(litestream_binary(), tmp_path / "n1")
    await daemon.start()
    pid = daemon.pid
    assert pid is not None and not gone(pid)  # litestream and its watchdog
    await daemon.stop()
    assert daemon.pid is None and gone(pid)
    await daemon.stop()  # idempotent


def test_the_daemon_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    """A node killed outright leaves no daemon replicating tenants it no longer holds."""
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from proxy.cluster.replication import Litestream, litestream_binary\n"
        "async def main():\n"
        "    daemon = Litestream(litestream_binary(), Path(sys.argv[1]))\n"
        "    await daemon.start()\n"
        "    print(daemon.pid, flush=True)\n"
        "    await asyncio.sleep(60)\n"
        "asyncio.run(main())\n"
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "n1")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    ) as parent:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        assert not gone(pid)
        parent.kill()
    deadline = time.monotonic() + 5
    while not gone(pid):
        assert time.monotonic() < deadline, "the daemon outlived its parent"
        time.sleep(0.05)


def test_sync_intervals_litestream_cannot_honour_are_refused(tmp_path: Path) -> None:
    for bad in (0.0, -1.0, DAEMON_SYNC_INTERVAL_S + 0.5, 60.0):
        with pytest.raises(ValueError, match="sync_interval_s"):
            Litestream(litestream_binary(), tmp_path, sync_interval_s=bad)


async def test_a_short_sync_interval_ships_each_commit_within_it(tmp_path: Path) -> None:
    """Litestream ships a registered database every second on its own; with a shorter
    ``sync_interval_s`` the pacer forces syncs, so commits reach the replica sooner."""
    interval = 0.2
    daemon = Litestream(litestream_binary(), tmp_path / "n1", sync_interval_s=interval)
    db, replica = tmp_path / "n1" / "t.db", tmp_path / "replicas" / "t"
    write(db, "first")
    await daemon.start()
    try:
        await daemon.register(db, f"file://{replica}")
        await daemon.sync(db)
        lags = []
        for i in range(5):
            shipped = _files(replica)
            write(db, f"row {i}")
            committed = time.monotonic()
            await wait_until(lambda: _files(replica) != shipped, timeout_s=5)  # noqa: B023
            lags.append(time.monotonic() - committed)
            await asyncio.sleep(0.07 * i)
    finally:
        await daemon.stop()
    assert max(lags) < interval + 0.5, lags
    assert sum(lags) / len(lags) < 0.4, lags  # Litestream's own 1 s cadence averages 0.5 s


def _files(folder: Path) -> set[str]:
    return {str(p) for p in folder.rglob("*") if p.is_file()}


def _serve_without_litestream(
    tmp_path: Path, litestream: str | None
) -> subprocess.CompletedProcess[str]:
    """``areamem serve`` of a cluster node run by an interpreter with no ``litestream``
    beside it (a link to it in a folder of its own) and none on ``PATH``; or, given
    ``litestream``, that script as the one beside it."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "python").symlink_to(os.path.realpath(sys.executable))
    if litestream is not None:
        (bin_ / "litestream").write_text(litestream)
        (bin_ / "litestream").chmod(0o755)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"server: {{host: 127.0.0.1, port: 0, data_dir: {tmp_path / 'data'}}}\n"
        "upstreams: [{model: '*', provider: openai, api_base: 'http://127.0.0.1:9/v1'}]\n"
        "memory: {formation_workers: 0}\n"
        f"cluster: {{node: a, replica: '{(tmp_path / 'replica').as_uri()}'}}\n"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join([str(ROOT), *site.getsitepackages()]),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HOME": str(tmp_path),
    }
    return subprocess.run(
        [str(bin_ / "python"), "-m", "proxy", "serve", "--config", str(config)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("litestream", "says"),
    [
        (None, "no litestream binary"),
        ("#!/bin/sh\necho 'cannot open the socket' >&2\nexit 3\n", "cannot open the socket"),
    ],
)
def test_a_node_without_a_working_litestream_says_so_in_one_line(
    tmp_path: Path, litestream: str | None, says: str
) -> None:
    """Both were a traceback (the daemon's failure at start from inside aiohttp's start-up)."""
    done = _serve_without_litestream(tmp_path, litestream)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("areamem:")]
    assert line.startswith("areamem: cannot run as a cluster node: ") and says in done.stderr


async def test_a_restore_removes_the_staging_a_killed_restore_left(tmp_path: Path) -> None:
    """A node killed during a restore left its staging folder (a partial or whole copy of
    the tenant's database) beside the database for good: one more copy at every such
    kill. The next restore of that database, by the same node, removes it first."""
    daemon = Litestream(litestream_binary(), tmp_path / "n1")  # restoring needs no daemon
    target = tmp_path / "data" / "t.db"
    write(target, "kept")
    left = tmp_path / "data" / ".t.db.restore-k1ll3d00"
    left.mkdir(mode=0o700)
    (left / "t.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 4000)  # cut mid-copy
    others = [".u.db.restore-k1ll3d00", ".t.db.restore-x.db.restore-k1ll3d00"]  # other tenants'
    for name in others:
        (tmp_path / "data" / name).mkdir()
    assert not await daemon.restore(target, f"file://{tmp_path}/nowhere")
    assert sorted(os.listdir(target.parent)) == sorted([*others, "t.db"])
    assert rows(target) == ["kept"]


def _corrupt(db: Path) -> None:
    """Give ``db`` an index with fewer entries than its table (what Litestream 0.5.17's
    replica of a tenant restored to in a probe of two nodes racing for it: an answered
    exchange's row gone, ``wrong # of entries in index``; upstream issue #1164)."""
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("CREATE INDEX t_v ON t(v) WHERE v > 'b'")
        conn.execute("PRAGMA writable_schema=ON")
        conn.execute("UPDATE sqlite_master SET sql = 'CREATE INDEX t_v ON t(v)' WHERE name = 't_v'")
        conn.commit()


async def test_a_replica_that_restores_to_a_corrupt_database_is_refused(
    node: Litestream, tmp_path: Path
) -> None:
    """It was put in place as the tenant's database and served, rows missing."""
    db, url = tmp_path / "n1" / "t.db", f"file://{tmp_path}/replicas/t"
    write(db, "a", "b", "c")
    _corrupt(db)
    await node.register(db, url)
    await node.sync(db)
    target = tmp_path / "n2" / "t.db"
    write(target, "kept")
    with pytest.raises(ReplicationError, match="integrity check failed"):
        await node.restore(target, url)
    assert rows(target) == ["kept"] and sorted(os.listdir(target.parent)) == ["t.db"]
