"""``areamem dream|snapshots|diff|rollback``: memory's history from the command line.

Each acts on one tenant's database directly, with the config's settings, safely beside a
running proxy: the proxy reads the graph again within a second of a cycle or rollback
made here, its formation worker reloads what it keeps in memory, and two cycles or
rollbacks never run at once for one tenant (exit status 3 when one already runs). A cycle
or rollback made here is logged in the proxy's log file (``logging.file``), one line
with counts, as one the proxy makes is.

A rollback is one entry of ``areamem snapshots`` (the checkpoint it took first, which
holds the state just before it, is shown on its line), and ``areamem rollback --undo``
undoes the last one exactly.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

from memory_core import (
    BackendError,
    DreamBusyError,
    MemoryCoreError,
    MemoryStore,
    SnapshotRow,
    describe_snapshot,
    limit_blas_threads,
    undo_of,
)

from ..config import Config, load_config
from ..errors import ConfigError
from ..http.request_log import RequestLog
from .parsing import SNAPSHOT_ID, command, tenant_options, whole
from .terminal import inert, inert_lines

__all__ = [
    "COMMANDS",
    "Refused",
    "add_parsers",
    "local_time",
    "open_store",
    "run",
    "tenant_database",
]


COMMANDS = ("dream", "snapshots", "diff", "rollback")


def add_parsers(commands: Any) -> None:
    dream = command(
        commands, "dream", "run a consolidation cycle on a tenant now", "areamem dream --tenant bo"
    )
    tenant_options(dream)
    listing = command(
        commands, "snapshots", "list a tenant's snapshots, newest first, with their local times",
        "areamem snapshots --tenant alice --limit 10",
    )  # fmt: skip
    listing.add_argument(
        "--limit", type=whole(1, 10_000), default=20, help="newest shown (default: 20)"
    )
    tenant_options(listing)
    diff = command(
        commands, "diff", "show what differs between two snapshots", "areamem diff 3 5"
    )
    diff.add_argument("first", type=SNAPSHOT_ID, help="from this snapshot's state")
    diff.add_argument("second", type=SNAPSHOT_ID, help="to this snapshot's state")
    diff.add_argument("--limit", type=whole(1, 10_000), default=50, help="rows listed per section")
    tenant_options(diff)
    rollback = command(
        commands, "rollback", "restore a tenant's memory to a snapshot (the log is kept)",
        "areamem rollback 3 --tenant alice", "areamem rollback --undo   # undo the last rollback",
    )  # fmt: skip
    target = rollback.add_mutually_exclusive_group(required=True)
    target.add_argument("snapshot", type=SNAPSHOT_ID, nargs="?", help="the snapshot to restore")
    target.add_argument(
        "--undo", action="store_true", help="undo the last rollback (it must be the newest entry)"
    )
    rollback.add_argument(
        "--reform", action="store_true", help="form the held messages now (not at the next cycle)"
    )
    tenant_options(rollback)


class Refused(Exception):
    """A command that cannot run: its message, and the exit status to leave with."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def tenant_database(args: argparse.Namespace, *, new: bool = False) -> tuple[Config, Path]:
    """The config (``--config``, ``--data-dir``) and the database of ``--tenant``;
    :class:`Refused` when the config is invalid (2) or the tenant has no memory (1;
    with ``new``, a tenant without memory is fine: its database is made when opened)."""
    try:
        config = load_config(args.config, data_dir=args.data_dir)
    except ConfigError as exc:
        raise Refused(f"configuration error: {exc}", 2) from exc
    path = config.server.data_dir / "tenants" / f"{args.tenant}.db"
    if not new and not path.is_file():
        raise Refused(f"no memory for tenant '{args.tenant}' (expected {path})", 1)
    return config, path


def open_store(config: Config, path: Path, tenant: str) -> MemoryStore:
    """The tenant's store with the config's settings; its cycles, rollbacks and imports
    are logged in the proxy's log file, one line each, as the proxy's own are."""
    limit_blas_threads()

    def logged(record: dict[str, Any]) -> None:
        if config.logging.file:  # opened for the line: a command writes one or two
            log = RequestLog(config.log_file, stdout=False)
            try:
                log.write({**record, "tenant": tenant, "via": "cli"})
            finally:
                log.close()

    return MemoryStore(
        path,
        formation=config.formation,
        graph=config.retrieval,
        reconstruction=config.reconstruction,
        dream=config.dream,
        events=logged,
    )


def run(args: argparse.Namespace) -> int:
    """Open the tenant's store with the config's settings and run one history command."""
    try:
        config, path = tenant_database(args)
    except Refused as exc:
        print(f"areamem: {inert(exc)}", file=sys.stderr)
        return exc.status
    store = open_store(config, path, args.tenant)
    try:
        body = _history(store, args)
    except Refused as exc:
        print(f"areamem: {inert(exc)}", file=sys.stderr)
        return exc.status
    except MemoryCoreError as exc:
        print(f"areamem: {inert(exc)}", file=sys.stderr)
        return 3 if isinstance(exc, DreamBusyError) else 1
    except BackendError as exc:
        print(f"areamem: {inert(exc)}", file=sys.stderr)
        return 2
    finally:
        store.close()
    text = inert_lines(_history_text(body))
    print(json.dumps(body, indent=2, ensure_ascii=False) if args.json else text)
    return 0


def _history(store: MemoryStore, args: argparse.Namespace) -> dict[str, Any]:
    if args.command == "dream":
        def step(name: str) -> None:
            print(f"dream: {name}", file=sys.stderr, flush=True)

        return {"report": store.dream(trigger="demand (areamem dream)", on_step=step).model_dump()}
    if args.command == "snapshots":
        rows = store.snapshots(limit=args.limit)
        return {
            "state": store.history_state().model_dump(),
            "snapshots": [_listed(row) for row in rows],
        }
    if args.command == "diff":
        return {"diff": store.diff(args.first, args.second, limit=args.limit).model_dump()}
    target = _undo_target(store) if args.undo else args.snapshot
    print(f"rollback: restoring snapshot {target}", file=sys.stderr, flush=True)
    restored = store.rollback(target)
    formed = 0
    if args.reform:
        store.release_held()
        formed = store.form_all()
    held = [dataclasses.asdict(row) for row in store.held_rows(limit=100)]
    return {"rollback": {**dataclasses.asdict(restored), "reformed": formed}, "held": held}


def _undo_target(store: MemoryStore) -> int:
    """The snapshot that undoes the last rollback (refused when the newest snapshot is
    not a rollback: what to undo would be unclear)."""
    newest = store.snapshots(limit=1)
    undo = undo_of(newest[0]) if newest else None
    if undo is None:
        what = f"snapshot {newest[0].id} is a {newest[0].kind}" if newest else "no snapshots"
        raise Refused(f"nothing to undo: the newest entry is not a rollback ({what})", 1)
    return undo


def local_time(epoch: float) -> str:
    """``epoch`` in this machine's time zone, to the second (what a person reads)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def _listed(row: SnapshotRow) -> dict[str, Any]:
    """A snapshot as ``--json`` lists it: its row, its time in ISO 8601 (local, with the
    offset), what it is in words, and for a checkpoint a rollback took, that rollback."""
    when = dt.datetime.fromtimestamp(row.created_at).astimezone()
    body = {
        **dataclasses.asdict(row),
        "time": when.isoformat(timespec="seconds"),
        "description": describe_snapshot(row),
        "undo": undo_of(row),
    }
    if row.kind == "checkpoint" and "before_rollback" in row.report:
        body["part_of_rollback"] = row.id + 1
    return body


def _snapshot_lines(listed: list[dict[str, Any]]) -> list[str]:
    """One line per snapshot; a rollback's checkpoint is told on the rollback's line."""
    lines = [f"{'id':>6}  {'time (local)':<19}  {'rows':>7}  what"]
    for s in listed:
        if "part_of_rollback" in s:
            continue
        what = s["description"]
        if s["kind"] == "rollback":
            saved = any(o.get("part_of_rollback") == s["id"] for o in listed)
            what = (
                f"rollback to {s['target']} (undo: areamem rollback --undo, back to"
                f" {'the state just before, saved as ' if saved else ''}snapshot {s['undo']})"
            )
        lines.append(
            f"{s['id']:>6}  {local_time(s['created_at']):<19}  {s['rows_changed']:>7}  {what}"
        )
    return lines


def _history_text(body: dict[str, Any]) -> list[str]:
    """The lines a person reads (each made inert by the caller)."""
    if "report" in body:
        r = body["report"]
        lines = [
            f"cycle {r['cycle']} -> snapshot {r['snapshot']} ({r['elapsed_ms']:.0f} ms,"
            f" {r['rows_changed']} rows, {r['snapshot_bytes']} bytes)",
            f"  released {r['released']}, formed {r['formed']}; new: {r['material']}",
            *(f"  {k}: {n}" for k, n in sorted(r["totals"].items())),
            *(f"  - {d['kind']}: {d['reason']}" for d in r["decisions"][:40]),
            *(f"  failure: {f}" for f in r["failures"]),
        ]
        return lines
    if "snapshots" in body:
        state = body["state"]
        lines = [
            f"head {state['head']}, generation {state['generation']}, held {state['held']},"
            f" journal {state['journal_entries']} entries ({state['journal_bytes']} bytes)"
        ]
        return lines + _snapshot_lines(body["snapshots"])
    if "diff" in body:
        d = body["diff"]
        lines = [f"from {d['from_snapshot']} to {d['to_snapshot']}: {d['rows_changed']} rows"]
        for section in ("entities", "relations", "contexts"):
            part = d[section]
            lines.append(f"{section}: {part['totals']}")
            for kind in ("added", "removed", "changed"):
                lines += [f"  {kind[0]} #{row['id']} {row['label']}" for row in part[kind]]
        return lines
    r = body["rollback"]
    lines = [
        f"restored snapshot {r['target']} (recorded as snapshot {r['snapshot']};"
        f" undo: areamem rollback --undo, which restores snapshot {r['undo']})",
        f"  {r['rows_changed']} rows changed; held {r['held']} messages"
        f" ({r['newly_held']} new); formed now {r['reformed']}",
    ]
    lines += [
        f"  held #{h['log_id']} [{h['conversation_id']}] {h['text'][:70]}" for h in body["held"]
    ]
    return lines
