"""``areamem`` command line.

``areamem serve --config PATH [--host H] [--port N] [--data-dir DIR]`` runs the proxy;
``areamem memory entities|contexts|relations [--tenant T] [--entity E] [--json]`` shows
what formation built for a tenant, reading its database directly. The history commands
act on a tenant's database directly too, safely beside a running proxy (it reads the
graph again within a second, and two cycles or rollbacks never run at once for a tenant):

- ``areamem dream [--tenant T] [--json]``: one consolidation cycle now, its report;
- ``areamem snapshots [--tenant T] [--limit N] [--json]``: the snapshot chain;
- ``areamem diff A B [--tenant T] [--json]``: what differs from snapshot A to B;
- ``areamem rollback SNAPSHOT|--undo [--tenant T] [--reform] [--json]``: restore a snapshot.

``areamem search|stats|receipts|export|import`` (:mod:`.tools`) read a tenant's memory as the
``/memory`` endpoints do, and move it to a file and back. ``areamem --version`` prints the
package's version; each subcommand's ``--help`` has a line of description and an example.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from memory_core import BackendError, MemoryCoreError, MemoryStore, limit_blas_threads
from memory_core.configuration import ConfigurationError

from ..app import build_services
from ..cluster.replication import ReplicationError
from ..config import Config, load_config
from ..errors import ListenError
from ..http.request_log import write_console
from ..server import ProxyServer, bind
from ..services import Services
from ..upstream.urls import shown_url
from . import history as cli_history
from . import tools as cli_tools
from .parsing import command, package_version, tenant_options, whole
from .terminal import inert, inert_lines

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``areamem`` command line: its options and every subcommand's."""
    parser = argparse.ArgumentParser(
        prog="areamem",
        description="areamem: an OpenAI-compatible proxy that gives chat clients a long-term"
        " memory, and the tools to inspect and operate that memory.",
        epilog="Each command has its own help: areamem COMMAND --help",
    )
    parser.add_argument("--version", action="version", version=f"areamem {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = command(
        commands, "serve", "run the OpenAI-compatible proxy",
        "areamem serve --config config.yaml --port 8080",
    )  # fmt: skip
    serve.add_argument("--config", default="config.yaml", help="config file (default: config.yaml)")
    serve.add_argument("--host", help="listen address (overrides server.host)")
    serve.add_argument("--port", type=int, help="listen port (overrides server.port)")
    serve.add_argument("--data-dir", help="data folder (overrides server.data_dir)")
    serve.add_argument(
        "--log-format",
        choices=("auto", "text", "json"),
        help="stdout's log lines: text (short, for people), json, auto: text on a terminal"
        " (overrides logging.format; the log file is always JSON lines)",
    )
    _memory_parser(commands)
    cli_history.add_parsers(commands)
    cli_tools.add_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run; returns the process exit code (2: bad config)."""
    args = build_parser().parse_args(argv)
    if args.command == "memory":
        return _memory_command(args)
    if args.command in cli_history.COMMANDS:
        return cli_history.run(args)
    if args.command in cli_tools.COMMANDS:
        return cli_tools.run(args)
    try:
        config = load_config(
            args.config,
            host=args.host,
            port=args.port,
            data_dir=args.data_dir,
            log_format=args.log_format,
        )
        sockets = bind(config.server.host, config.server.port)  # before any slow start-up
    except ListenError as exc:
        _say(f"areamem: {exc}")
        return 1
    except ConfigurationError as exc:
        _say(f"areamem: configuration error: {exc}")
        return 2
    try:
        services = build_services(config)
    except (ConfigurationError, BackendError) as exc:
        # ConfigError, and a PolicyError from the first policy load: file:line: key: reason
        _say(f"areamem: configuration error: {exc}")
        return 2
    except ReplicationError as exc:  # no litestream binary
        _say(f"areamem: cannot run as a cluster node: {exc}")
        return 1
    except OSError as exc:  # a folder it makes under data_dir (the spool) cannot be
        used = exc.filename or config.server.data_dir
        _say(
            f"areamem: configuration error: {config.source}: server.data_dir:"
            f" cannot use {used}: {exc.strerror or exc}"
        )
        return 2
    limit_blas_threads()
    sys.setswitchinterval(config.server.switch_interval_ms / 1000)
    try:
        asyncio.run(_serve(config, services, sockets))
    except ReplicationError as exc:  # the node's Litestream daemon did not start
        _say(f"areamem: cannot run as a cluster node: {exc}")
        return 1
    return 0


def _memory_parser(commands: Any) -> None:
    memory = command(
        commands, "memory", "show what formation built for a tenant: entities, contexts, relations",
        "areamem memory relations --tenant alice --entity Maya",
    )  # fmt: skip
    memory.add_argument("view", choices=("entities", "contexts", "relations"))
    memory.add_argument("--entity", help="relations of this entity (name or alias)")
    memory.add_argument("--name", help="entities with this name or alias")
    memory.add_argument(
        "--limit", type=whole(1, 10_000), default=50, help="most rows shown (default: 50)"
    )
    tenant_options(memory)


def _memory_command(args: argparse.Namespace) -> int:
    """``areamem memory entities|contexts|relations``: read one tenant's store directly."""
    try:
        _, path = cli_history.tenant_database(args)
    except cli_history.Refused as exc:
        print(f"areamem: {inert(exc)}", file=sys.stderr)
        return exc.status
    store = MemoryStore(path)
    try:
        rows = _view(store, args)
    except MemoryCoreError as exc:
        print(f"areamem: {inert(exc)}", file=sys.stderr)
        return 1
    finally:
        store.close()
    print(json.dumps(rows, indent=2, ensure_ascii=False) if args.json else _table(args.view, rows))
    return 0


def _view(store: MemoryStore, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The view's rows as JSON (what ``--json`` prints and the table reads)."""
    views: Sequence[BaseModel]
    if args.view == "entities":
        views = store.entities(limit=args.limit, name=args.name)
    elif args.view == "contexts":
        views = store.contexts(limit=args.limit)
    else:
        views = store.relations(entity=args.entity, limit=args.limit)
    return [view.model_dump(mode="json") for view in views]


def _table(view: str, rows: list[dict[str, Any]]) -> str:
    if not rows:
        return f"no {view}"
    if view == "entities":
        lines = [
            f"{r['id']:>5}  {r['name'][:30]:<30} {r['label']:<5} {r['mentions']:>6}  "
            + ", ".join(
                a["alias"] + (f" ({a['lang']})" if a["lang"] not in (None, "en", "und") else "")
                for a in r["aliases"]
            )[:80]
            for r in rows
        ]
        header = f"{'id':>5}  {'name':<30} {'label':<5} {'ment.':>6}  aliases"
    elif view == "contexts":
        lines = [
            f"{r['id']:>5}  {r['label'][:40]:<40} {r['size']:>5} {r['segments']:>5}  "
            + ", ".join(r["conversations"])[:60]
            for r in rows
        ]
        header = f"{'id':>5}  {'label':<40} {'size':>5} {'segs':>5}  conversations"
    else:
        lines = [
            f"{r['id']:>5}  {r['subject'][:20]:<20} {r['predicate'][:18]:<18} "
            f"{str(r['object'])[:20]:<20} {r['status']:<10} {r['mutation']['kind'] or '':<13}"
            f" {r['source']['conversation_id']}: {r['source']['fragment_text'][:50]}"
            for r in rows
        ]
        header = (
            f"{'id':>5}  {'subject':<20} {'predicate':<18} {'object':<20} {'status':<10}"
            f" {'mutation':<13} source"
        )
    return inert_lines([header, *lines])


SHUTDOWN_SLACK_S = 10.0
"""Past twice ``server.shutdown_grace_s`` and this long after the first signal, the
process exits whatever still runs (the connections' grace, then the app's; a shutdown
step that hangs must not make the proxy unstoppable)."""


async def _serve(config: Config, services: Services, sockets: Sequence[socket.socket]) -> None:
    """Serve until SIGINT/SIGTERM, then shut down within ``server.shutdown_grace_s``.

    The first signal stops accepting connections; requests in flight and post-answer
    work get the grace period; formation not yet started is left in the durable queue
    (formed at the next start). If work is still running past the grace (a formation
    batch in its thread), the process exits without waiting for it: every write is a
    SQLite transaction, so that is as safe as a crash. A second signal exits at once,
    and so does a shutdown still running past :data:`SHUTDOWN_SLACK_S`. A signal stops
    the process whatever its log line does (the line is written after the stop is set).
    """
    server = ProxyServer(services)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    bound_s = 2 * config.server.shutdown_grace_s + SHUTDOWN_SLACK_S

    def on_signal(sig: signal.Signals) -> None:
        if stop.is_set():
            _log(services, {"event": "shutdown_now", "signal": sig.name})
            _exit_now(1)
        stop.set()
        _exit_later(bound_s, services)
        _log(services, {"event": "shutdown", "signal": sig.name})

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        await server.start(config.server.host, config.server.port, sockets)
        _banner(config, server.port)
        await stop.wait()
    finally:
        await server.close()
    if not services.stopped_cleanly:
        _exit_now(0)


def _log(services: Services, record: dict[str, Any]) -> None:
    with contextlib.suppress(Exception):  # a signal's work never hangs on its log line
        services.log.write(record)


def _exit_later(after_s: float, services: Services) -> None:
    """Exit (status 1) if the process still runs ``after_s`` from now (a thread: a busy
    event loop cannot hold it back)."""

    def overdue() -> None:
        _log(services, {"event": "shutdown_overdue", "after_s": after_s})
        _exit_now(1)

    timer = threading.Timer(after_s, overdue)
    timer.daemon = True
    timer.start()


def _exit_now(code: int) -> None:
    """Leave without joining worker threads (their SQLite writes are transactions)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe must not keep the process
            stream.flush()
    os._exit(code)


def _say(text: str) -> None:
    """A line on stderr, if stderr is still there."""
    write_console(sys.stderr, text + "\n")


def _banner(config: Config, port: int) -> None:
    host = config.server.host
    shown = f"[{host}]" if ":" in host else host
    key = f" (key '{config.policy_key}')" if config.policy_key else ""
    lines = [
        f"areamem proxy on http://{shown}:{port}/v1",
        f"  config:  {config.source}",
        f"  policy:  {config.policy_path}{key}",
        f"  data:    {config.server.data_dir}  (log: {config.log_file})",
    ]
    for up in config.upstreams:
        path = "fast path" if up.uses_fast_path else "litellm"
        base = shown_url(up.api_base) if up.api_base else "(provider default)"
        lines.append(f"  upstream {up.model!r} -> {up.provider} {base} [{path}]")
    lines.append(f"  inspector: http://{shown}:{port}/ui  (memory, areas, receipts, snapshots)")
    lines.append(f"  threads: the interpreter switches every {sys.getswitchinterval() * 1000:g} ms")
    write_console(sys.stdout, "\n".join(lines) + "\n")
