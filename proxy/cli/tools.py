"""``areamem search|stats|receipts|export|import``: a tenant's memory from the command line.

Each reads (or, for ``import``, writes) one tenant's database directly with the config's
settings, safely beside a running proxy, and prints what the matching ``/memory`` endpoint
answers (``--json``: the same body) or a short text of it:

- ``areamem search QUERY``: the hits and the block memory would inject for QUERY;
- ``areamem stats``: counts (messages, fragments, entities, relations, contexts,
  snapshots) and the database's size;
- ``areamem receipts``: the newest receipts, what was injected per request;
- ``areamem export FILE`` / ``areamem import FILE [--replace]``: the tenant's memory to one
  file and back (:mod:`memory_core.transfer`: the log and derived memory verbatim, so the
  import answers as the export did).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from memory_core import STRATEGIES, BackendError, MemoryCoreError, MemoryStore

from ..api.memory import search_response
from ..api.schemas import ReceiptsResponse, ReceiptSummary, StatsResponse
from .history import Refused, local_time, open_store, tenant_database
from .parsing import command, question, tenant_options, whole
from .terminal import inert, inert_lines

__all__ = ["COMMANDS", "add_parsers", "run"]

COMMANDS = ("search", "stats", "receipts", "export", "import")


def add_parsers(commands: Any) -> None:
    search = command(
        commands, "search", "show the hits and the block memory would inject for a question",
        'areamem search "where does Maya live?" --tenant alice',
    )  # fmt: skip
    search.add_argument("query", type=question, help="the question, as a user would write it")
    search.add_argument(
        "-k", type=whole(1, 200), default=8, help="fragments retrieved, 1-200 (default: 8)"
    )
    search.add_argument(
        "--budget", type=whole(1, 100_000), default=600, help="block tokens (default: 600)"
    )
    search.add_argument(
        "--strategy", choices=STRATEGIES.names(), help="retrieval (default: memory.retrieval)"
    )
    tenant_options(search)
    stats = command(
        commands, "stats", "count what a tenant's memory holds", "areamem stats --tenant alice"
    )
    tenant_options(stats)
    receipts = command(
        commands, "receipts", "list the newest receipts: what memory injected per request",
        "areamem receipts --tenant alice --limit 5",
    )  # fmt: skip
    receipts.add_argument(
        "--limit", type=whole(1, 10_000), default=20, help="newest shown (default: 20)"
    )
    tenant_options(receipts)
    export = command(
        commands, "export", "write a tenant's memory (log and derived memory) to one file",
        "areamem export alice.areamem --tenant alice",
    )  # fmt: skip
    export.add_argument("file", type=Path, help="the file to write (replaced if it exists)")
    tenant_options(export)
    load = command(
        commands, "import", "load an export into a tenant (refused if it holds memory)",
        "areamem import alice.areamem --tenant alice2",
        "areamem import alice.areamem --tenant alice --replace",
    )  # fmt: skip
    load.add_argument("file", type=Path, help="a file written by areamem export")
    load.add_argument(
        "--replace", action="store_true", help="replace what the tenant holds (default: refuse)"
    )
    tenant_options(load)


def run(args: argparse.Namespace) -> int:
    """Open the tenant's store and run one of :data:`COMMANDS`; the exit status."""
    try:
        config, path = tenant_database(args, new=args.command == "import")
    except Refused as exc:
        print(f"areamem: {inert(exc)}", file=sys.stderr)
        return exc.status
    made = not path.exists()  # an import into a new tenant that fails leaves no file
    store = open_store(config, path, args.tenant)
    status = 0
    try:
        body, text = _COMMANDS[args.command](store, args, config.memory.retrieval)
    except MemoryCoreError as exc:
        print(f"areamem: {inert(exc)}", file=sys.stderr)
        status = 1
    except BackendError as exc:
        print(f"areamem: {inert(exc)}", file=sys.stderr)
        status = 2
    finally:
        store.close()
    if status:
        if made:
            for end in ("", "-wal", "-shm", ".dream.lock"):
                Path(f"{path}{end}").unlink(missing_ok=True)
        return status
    print(json.dumps(body, indent=2, ensure_ascii=False) if args.json else text)
    return 0


_Result = tuple[dict[str, Any], str]


def _search(store: MemoryStore, args: argparse.Namespace, strategy: str) -> _Result:
    began = time.perf_counter()
    recall = store.retrieve(
        args.strategy or strategy, args.query, limit=args.k, budget_tokens=args.budget
    )
    body = search_response(args.query, recall, time.perf_counter() - began)
    lines = [f"{len(body.hits)} hits, block of {body.tokens} tokens ({body.elapsed_ms:.0f} ms)"]
    lines += [
        f"  {h.score:7.3f}  #{h.fragment_id} [{h.conversation_id}] {h.text[:80]}" for h in body.hits
    ]
    block = (body.context or "(no block: nothing found)").split("\n")
    return _json(body), inert_lines([*lines, "", *block])


def _stats(store: MemoryStore, args: argparse.Namespace, _: str) -> _Result:
    body = StatsResponse(tenant=args.tenant, **dict(store.stats()))
    counted = body.model_dump(exclude={"tenant", "bytes"})
    lines = [f"{name.replace('_', ' '):<15} {value:>10,}" for name, value in counted.items()]
    return _json(body), "\n".join([*lines, f"{'database':<15} {_size(body.bytes):>10}"])


def _receipts(store: MemoryStore, args: argparse.Namespace, _: str) -> _Result:
    rows = store.recent_receipts(args.limit)
    summaries = [ReceiptSummary.model_validate(dataclasses.asdict(r)) for r in rows]
    body = ReceiptsResponse(tenant=args.tenant, receipts=summaries)
    lines = [
        f"{local_time(r.created_at) if r.created_at else '?':<19}  {r.id}  {r.model[:20]:<20}"
        f" {'memory' if r.retrieve else 'none':<6} {r.shown:>3} shown {r.tokens:>5} tokens"
        f"  {r.memory_error or r.reason}"[:160]
        for r in body.receipts
    ]
    return _json(body), inert_lines(lines) or "no receipts"


def _export(store: MemoryStore, args: argparse.Namespace, _: str) -> _Result:
    manifest = store.export(args.file, tenant=args.tenant)
    return _transferred(manifest.as_json(), f"exported tenant '{args.tenant}' to {args.file}")


def _import(store: MemoryStore, args: argparse.Namespace, _: str) -> _Result:
    manifest = store.import_export(args.file, replace=args.replace)
    done = f"imported {args.file} (tenant '{manifest.tenant}', {manifest.created_at})"
    return _transferred(manifest.as_json(), f"{done} into tenant '{args.tenant}'")


def _transferred(manifest: dict[str, Any], done: str) -> _Result:
    counts = manifest["counts"]
    shown = ("log", "fragments", "entities", "relations", "contexts", "snapshots")
    return {"manifest": manifest}, inert(f"{done}: " + ", ".join(f"{counts[t]} {t}" for t in shown))


def _json(body: BaseModel) -> dict[str, Any]:
    return body.model_dump(mode="json")


def _size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB"):
        if value < 1024:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


_COMMANDS = {
    "search": _search,
    "stats": _stats,
    "receipts": _receipts,
    "export": _export,
    "import": _import,
}
