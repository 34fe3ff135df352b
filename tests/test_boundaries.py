"""The import boundaries of DESIGN.md §2, checked on the source."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _imports(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("memory_core", {"aiohttp", "proxy", "policies", "scripts"}),
        (
            "policies",
            {
                "aiohttp",
                "proxy",
                "memory_core",
                "scripts",
                "apsw",
                "sqlite3",
                "litellm",
                "socket",
                "urllib",
                "http",
                "requests",
                "httpx",
            },
        ),
        ("proxy", {"scripts", "apsw", "sqlite3"}),
    ],
)
def test_forbidden_imports(package: str, forbidden: set[str]) -> None:
    offenders = {
        path: sorted(names & forbidden)
        for path, names in _imports(package).items()
        if names & forbidden
    }
    assert offenders == {}


def test_importing_has_no_side_effects() -> None:
    code = (
        "import os, sys\n"
        "before = dict(os.environ)\n"
        "import proxy, memory_core, policies, proxy.cli, proxy.fake_upstream\n"
        "assert dict(os.environ) == before, 'environment changed at import'\n"
        "assert 'litellm' not in sys.modules, 'litellm imported eagerly'\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.stdout.strip() == "ok", result.stderr
