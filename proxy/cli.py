"""``areamem`` command line: ``areamem serve --config PATH [--host] [--port] [--data-dir]``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from aiohttp import web

from policies import PolicyError

from .app import build_services, create_app
from .config import Config, load_config
from .errors import ConfigError

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
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
    _banner(config)
    web.run_app(
        create_app(services),
        host=config.server.host,
        port=config.server.port,
        print=None,
        access_log=None,
        handle_signals=True,
    )
    return 0


def _banner(config: Config) -> None:
    host = config.server.host
    shown = f"[{host}]" if ":" in host else host
    print(f"areamem proxy on http://{shown}:{config.server.port}/v1", flush=True)
    print(f"  config:  {config.source}", flush=True)
    print(
        f"  policy:  {config.policy_path}"
        + (f" (key '{config.policy_key}')" if config.policy_key else ""),
        flush=True,
    )
    print(f"  data:    {config.server.data_dir}  (log: {config.log_file})", flush=True)
    for up in config.upstreams:
        path = "fast path" if up.uses_fast_path else "litellm"
        print(
            f"  upstream {up.model!r} -> {up.provider} {up.api_base or '(provider default)'} "
            f"[{path}]",
            flush=True,
        )
