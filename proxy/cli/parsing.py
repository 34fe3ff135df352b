"""What every ``areamem`` subcommand's parser shares: a line of description and an
example in its help, the tenant options, the argument types that refuse what the store
could not take (before it is opened), and the package's version."""

from __future__ import annotations

import argparse
import importlib.metadata
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import TENANT_NAME

__all__ = [
    "SNAPSHOT_ID",
    "command",
    "package_version",
    "question",
    "tenant_name",
    "tenant_options",
    "whole",
]

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


def whole(low: int, high: int) -> Callable[[str], int]:
    """An argument type: a whole number from ``low`` to ``high`` written in ASCII digits
    (a count or id past SQLite's 64-bit integers would fail deep in the store)."""

    def parse(text: str) -> int:
        digits = text.strip().removeprefix("-")
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 19):
            value = None
        else:
            value = int(text)
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be a whole number from {low} to {high}, got {text[:40]!r}"
            )
        return value

    return parse


SNAPSHOT_ID = whole(1, (1 << 63) - 1)
"""A snapshot id: a positive SQLite integer."""


def tenant_name(text: str) -> str:
    """An argument type: a tenant name the config accepts (it names the database file,
    so a path, a hidden name or a line break is refused)."""
    if not TENANT_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"tenant {text[:80]!r} must be 1-64 ASCII letters, digits, - _ . (not starting"
            " with . or -): it names the tenant's database file"
        )
    return text


def question(text: str) -> str:
    """An argument type: a question that is not blank."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be blank")
    return text


def tenant_options(parser: argparse.ArgumentParser, *, json_output: bool = True) -> None:
    """``--config``, ``--data-dir``, ``--tenant`` (and ``--json``)."""
    parser.add_argument(
        "--config", default="config.yaml", help="config file (default: config.yaml)"
    )
    parser.add_argument("--data-dir", help="data folder (overrides server.data_dir)")
    parser.add_argument(
        "--tenant", type=tenant_name, default="default", help="tenant (default: default)"
    )
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
