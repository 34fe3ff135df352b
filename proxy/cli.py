"""``areamem`` command line: ``areamem serve --config PATH [--host] [--port] [--data-dir]``."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

from aiohttp import web

from policies import PolicyError

from .app import build_services, create_app
from .config import Config, load_config
from .errors import ConfigError
from .services import Services

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run; returns the process exit code (2: bad config)."""
    parser = argparse.ArgumentParser(prog="areamem", description="areamem memory proxy")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the OpenAI-compatible proxy")
    serve.add_argument("--config", default="config.yaml", help="config file (default: config.yaml)")
    serve.add_argument("--host", help="listen address (overrides server.host)")
    serve.add_argument("--port", type=int, help="listen port (overrides server.port)")
    serve.add_argument("--data-dir", help="data folder (overrides server.data_dir)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, host=args.host, port=args.port, data_dir=args.data_dir)
        services = build_services(config)
    except (ConfigError, PolicyError) as exc:
        print(f"areamem: configuration error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(config, services))
    except OSError as exc:
        print(
            f"areamem: cannot listen on {config.server.host}:{config.server.port}: {exc}",
            file=sys.stderr,
        )
        return 1
    return 0


async def _serve(config: Config, services: Services) -> None:
    """Serve until SIGINT/SIGTERM, then drain post-answer work and close cleanly."""
    runner = web.AppRunner(create_app(services), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, config.server.host, config.server.port)
        await site.start()
        _banner(config, int(runner.addresses[0][1]))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


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
        base = up.api_base or "(provider default)"
        lines.append(f"  upstream {up.model!r} -> {up.provider} {base} [{path}]")
    print("\n".join(lines), flush=True)
