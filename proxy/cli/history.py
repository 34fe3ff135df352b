"""``areamem dream|snapshots|diff|rollback``: memory's history from the command line.

Each acts on one tenant's database directly, with the config's settings, safely beside a
running proxy: the proxy reads the graph again within a second of a cycle or rollback
made here, its formation worker reloads what it keeps in memory, and two cycles or
rollbacks never run at once for one tenant (exit status 3 when one already runs).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from memory_core import (
    BackendError,
    DreamBusyError,
    MemoryCoreError,
    MemoryStore,
    limit_blas_threads,
)

from ..config import Config, load_config
from ..errors import ConfigError

__all__ = ["COMMANDS", "Refused", "add_parsers", "run", "tenant_database"]


COMMANDS = ("dream", "snapshots", "diff", "rollback")


def _tenant_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", default="config.yaml", help="config file (default: config.yaml)"
    )
    parser.add_argument("--data-dir", help="data folder (overrides server.data_dir)")
    parser.add_argument("--tenant", default="default", help="tenant (default: default)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def add_parsers(commands: Any) -> None:
    dream = commands.add_parser("dream", help="run a consolidation cycle on a tenant now")
    _tenant_options(dream)
    listing = commands.add_parser("snapshots", help="list a tenant's snapshots")
    listing.add_argument("--limit", type=int, default=20, help="newest shown (default: 20)")
    _tenant_options(listing)
    diff = commands.add_parser("diff", help="what differs between two snapshots")
    diff.add_argument("first", type=int, help="from this snapshot's state")
    diff.add_argument("second", type=int, help="to this snapshot's state")
    diff.add_argument("--limit", type=int, default=50, help="rows listed per section")
    _tenant_options(diff)
    rollback = commands.add_parser("rollback", help="restore a tenant's memory to a snapshot")
    rollback.add_argument("snapshot", type=int, help="the snapshot to restore")
    rollback.add_argument(
        "--reform", action="store_true", help="form the held messages now (not at the next cycle)"
    )
    _tenant_options(rollback)


class Refused(Exception):
    """A command that cannot run: its message, and the exit status to leave with."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def tenant_database(args: argparse.Namespace) -> tuple[Config, Path]:
    """The config (``--config``, ``--data-dir``) and the database of ``--tenant``;
    :class:`Refused` when the config is invalid (2) or the tenant has no memory (1)."""
    try:
        config = load_config(args.config, data_dir=args.data_dir)
    except ConfigError as exc:
        raise Refused(f"configuration error: {exc}", 2) from exc
    path = config.server.data_dir / "tenants" / f"{args.tenant}.db"
    if not path.is_file():
        raise Refused(f"no memory for tenant '{args.tenant}' (expected {path})", 1)
    return config, path


def run(args: argparse.Namespace) -> int:
    """Open the tenant's store with the config's settings and run one history command."""
    try:
        config, path = tenant_database(args)
    except Refused as exc:
        print(f"areamem: {exc}", file=sys.stderr)
        return exc.status
    limit_blas_threads()
    store = MemoryStore(
        path,
        formation=config.formation,
        graph=config.retrieval,
        reconstruction=config.reconstruction,
        dream=config.dream,
    )
    try:
        body = _history(store, args)
    except MemoryCoreError as exc:
        print(f"areamem: {exc}", file=sys.stderr)
        return 3 if isinstance(exc, DreamBusyError) else 1
    except BackendError as exc:
        print(f"areamem: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    print(json.dumps(body, indent=2, ensure_ascii=False) if args.json else _history_text(body))
    return 0


def _history(store: MemoryStore, args: argparse.Namespace) -> dict[str, Any]:
    if args.command == "dream":
        def step(name: str) -> None:
            print(f"dream: {name}", file=sys.stderr, flush=True)

        return {"report": store.dream(trigger="demand (areamem dream)", on_step=step).model_dump()}
    if args.command == "snapshots":
        rows = store.snapshots(limit=max(1, args.limit))
        return {
            "state": store.history_state().model_dump(),
            "snapshots": [dataclasses.asdict(row) for row in rows],
        }
    if args.command == "diff":
        return {"diff": store.diff(args.first, args.second, limit=max(1, args.limit)).model_dump()}
    print(f"rollback: restoring snapshot {args.snapshot}", file=sys.stderr, flush=True)
    restored = store.rollback(args.snapshot)
    formed = 0
    if args.reform:
        store.release_held()
        formed = store.form_all()
    held = [dataclasses.asdict(row) for row in store.held_rows(limit=100)]
    return {"rollback": {**dataclasses.asdict(restored), "reformed": formed}, "held": held}


def _history_text(body: dict[str, Any]) -> str:
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
        return "\n".join(lines)
    if "snapshots" in body:
        state = body["state"]
        lines = [
            f"head {state['head']}, generation {state['generation']}, held {state['held']},"
            f" journal {state['journal_entries']} entries ({state['journal_bytes']} bytes)"
        ]
        lines += [
            f"{s['id']:>6}  {s['kind']:<10} {s['rows_changed']:>8} rows {s['bytes']:>10} bytes"
            + (f"  -> state of {s['target']}" if s["target"] else "")
            for s in body["snapshots"]
        ]
        return "\n".join(lines)
    if "diff" in body:
        d = body["diff"]
        lines = [f"from {d['from_snapshot']} to {d['to_snapshot']}: {d['rows_changed']} rows"]
        for section in ("entities", "relations", "contexts"):
            part = d[section]
            lines.append(f"{section}: {part['totals']}")
            for kind in ("added", "removed", "changed"):
                lines += [f"  {kind[0]} #{row['id']} {row['label']}" for row in part[kind]]
        return "\n".join(lines)
    r = body["rollback"]
    lines = [
        f"restored snapshot {r['target']} (recorded as snapshot {r['snapshot']};"
        f" undo: areamem rollback {r['snapshot'] - 1})",
        f"  {r['rows_changed']} rows changed; held {r['held']} messages"
        f" ({r['newly_held']} new); formed now {r['reformed']}",
    ]
    lines += [
        f"  held #{h['log_id']} [{h['conversation_id']}] {h['text'][:70]}" for h in body["held"]
    ]
    return "\n".join(lines)
