"""What every ``areamem`` subcommand's parser shares: a line of description and an
example in its help, the tenant options, and the package's version."""

from __future__ import annotations

import argparse
import importlib.metadata
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["command", "package_version", "tenant_options"]

_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def command(commands: Any, name: str, summary: str, *examples: str) -> argparse.ArgumentParser:
    """A subcommand whose help opens with ``summary`` and ends with ``examples``."""
    lines = "\n".join(f"  {example}" for example in examples)
    return commands.add_parser(  # type: ignore[no-any-return]
        name,
        help=summary,
        description=f"{summary[0].upper()}{summary[1:]}.",
        epilog=f"example{'s' if len(examples) > 1 else ''}:\n{lines}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def tenant_options(parser: argparse.ArgumentParser, *, json_output: bool = True) -> None:
    """``--config``, ``--data-dir``, ``--tenant`` (and ``--json``)."""
    parser.add_argument(
        "--config", default="config.yaml", help="config file (default: config.yaml)"
    )
    parser.add_argument("--data-dir", help="data folder (overrides server.data_dir)")
    parser.add_argument("--tenant", default="default", help="tenant (default: default)")
    if json_output:
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def package_version() -> str:
    """The installed package's version, else the one ``pyproject.toml`` declares."""
    try:
        return importlib.metadata.version("areamem")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        with _PYPROJECT.open("rb") as file:
            return str(tomllib.load(file)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"
