"""SIGKILL of ``areamem dream`` and ``areamem rollback`` mid-write leaves memory whole.

A child process runs the real command on a real tenant file; once it says it is writing
(its last step before the write transaction) it is killed after a few milliseconds,
at a different moment each round. Afterwards the file passes SQLite's integrity check,
its foreign keys and full-text index are consistent, and the areas of fixed questions
are exactly those of one of the two states the command goes between (the state before,
or the completed command's, both computed beforehand on copies), and so is every row of
derived memory: never a mix, never a half-written snapshot.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from memory_core import LogMessage, MemoryStore
from memory_core.formation import Backends
from memory_core.storage import integrity_check
from memory_core.storage.db import connect
from memory_core.storage.journal import TRACKED
from memory_core.storage.tables import history as history_rows

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ("Who went to Lisbon?", "Where did Greta go?", "Who travelled with Hugo?")
NAMES = ("Anna", "Bob", "Carla", "Dmitri", "Elena", "Farid", "Greta", "Hugo")
PLACES = ("Paris", "Lisbon", "Rome", "Oslo", "Cairo", "Lima")
DELAYS_MS = (0, 15)


def _messages(first: int, count: int) -> list[LogMessage]:
    return [
        LogMessage(
            {
                "role": "user",
                "name": "Maya",
                "content": f"{NAMES[i % 8]} and {NAMES[(i * 3 + 1) % 8]} went to"
                f" {PLACES[i % 6]} with me on trip {i}.",
            },
            1.7e9 + i * 60,
        )
        for i in range(first, first + count)
    ]


def _areas(path: Path, backends: Backends) -> list[Any]:
    """The areas of :data:`QUESTIONS` in the store at ``path`` (its graph read afresh),
    without what differs between two reads of one state."""
    store = MemoryStore(path, backends=backends)
    try:
        found = [
            store.explain_area(q, limit=8).model_dump(
                mode="json", exclude={"graph_version", "timings_ms"}
            )
            for q in QUESTIONS
        ]
    finally:
        store.close()
    plain: list[Any] = json.loads(json.dumps(found, sort_keys=True))
    return plain


def _rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of derived memory, table by table, in key order, but the clock's
    readings (the same command run twice stamps two times)."""
    conn = connect(path)
    try:
        rows = {}
        for table in sorted(TRACKED):
            names = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            kept = ", ".join(n for n in names if n != "created_at")
            where = " WHERE key <> 'last_cycle_at'" if table == "dream_state" else ""
            rows[table] = list(conn.execute(f"SELECT {kept} FROM {table}{where} ORDER BY 1, 2"))
        return rows
    finally:
        conn.close()


State = tuple[dict[str, list[tuple[Any, ...]]], list[Any]]


def _state(path: Path, backends: Backends) -> State:
    return _rows(path), _areas(path, backends)


def _consistent(path: Path) -> None:
    assert integrity_check(path) == "ok"
    conn = connect(path)
    try:
        assert list(conn.execute("PRAGMA foreign_key_check")) == []
        conn.execute("INSERT INTO fragments_fts (fragments_fts) VALUES ('integrity-check')")
        assert history_rows.state(conn).generation >= 1
    finally:
        conn.close()


def _copy(source: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("-wal", "-shm"):
        dest.with_name(dest.name + suffix).unlink(missing_ok=True)
    conn = connect(source)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    shutil.copyfile(source, dest)


@pytest.fixture(scope="module")
def tenant(tmp_path_factory: pytest.TempPathFactory, backends: Backends) -> Path:
    """A config and a tenant with one snapshot and formation since (the saved state)."""
    folder = tmp_path_factory.mktemp("crash")
    config = {
        "server": {"data_dir": str(folder / "data")},
        "upstreams": [{"model": "*", "provider": "openai", "api_base": "http://127.0.0.1:9/v1"}],
        "formation": {"encoder": {"model": "minilm"}},  # the backends the store was made with
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    saved = folder / "saved.db"
    store = MemoryStore(saved, backends=backends)
    store.append(_messages(0, 150), conversation="trip-1")
    store.form_all()
    store.dream()
    store.append(_messages(150, 150), conversation="trip-2")
    store.form_all()  # formed, in the journal, not yet in a snapshot
    store.close()
    return folder


def _run_killed(folder: Path, args: list[str], cue: str, delay_ms: float) -> int:
    """Run ``areamem <args>`` on the tenant; SIGKILL it ``delay_ms`` after it prints
    ``cue`` (unless it ended first). Returns its exit status."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "proxy", *args, "--config", str(folder / "config.yaml")]
    with subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    ) as child:
        assert child.stderr is not None
        for line in child.stderr:
            if cue in line:
                time.sleep(delay_ms / 1000)
                child.send_signal(signal.SIGKILL)
                break
        return child.wait(timeout=120)


def _expected(folder: Path, backends: Backends, act: str) -> tuple[State, State]:
    """The state before, and after the command completed (run in-process on a copy)."""
    before = folder / "expect" / "before.db"
    _copy(folder / "saved.db", before)
    after = folder / "expect" / f"after-{act}.db"
    _copy(folder / "saved.db", after)
    store = MemoryStore(after, backends=backends)
    if act == "dream":
        store.dream()
    else:
        store.rollback(1)
    store.close()
    return _state(before, backends), _state(after, backends)


@pytest.mark.parametrize(
    ("act", "args", "cue"),
    [
        ("dream", ["dream"], "dream: writing"),
        ("rollback", ["rollback", "1"], "rollback: restoring"),
    ],
)
def test_sigkill_mid_write_leaves_one_whole_state(
    tenant: Path, backends: Backends, act: str, args: list[str], cue: str
) -> None:
    before, after = _expected(tenant, backends, act)
    assert before != after
    database = tenant / "data" / "tenants" / "default.db"
    outcomes = []
    for delay in DELAYS_MS:
        _copy(tenant / "saved.db", database)
        status = _run_killed(tenant, args, cue, delay)
        _consistent(database)
        state = _state(database, backends)
        assert state in (before, after), f"{act} killed {delay} ms after '{cue}': a mix"
        conn = connect(database)
        head = history_rows.head(conn)
        conn.close()
        completed = state == after
        assert head == (2 if completed else 1)  # the snapshot is there iff the state is
        outcomes.append((status, completed))
    # the first kill, at once, lands inside the write: its transaction was rolled back
    assert outcomes[0] == (-signal.SIGKILL, False), outcomes
