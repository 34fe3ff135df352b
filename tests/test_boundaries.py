"""The import boundaries of DESIGN.md §2, checked on the source."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _modules(package: str) -> dict[str, set[str]]:
    """Every absolute module each file of ``package`` imports, by full dotted name."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[str(path.relative_to(ROOT))] = names
    return found


def _imports(package: str) -> dict[str, set[str]]:
    """The top-level packages each file of ``package`` imports."""
    return {
        path: {name.split(".")[0] for name in names} for path, names in _modules(package).items()
    }


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("memory_core", {"aiohttp", "proxy", "policies", "scripts"}),
        (
            "policies",
            {
                "aiohttp",
                "proxy",
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


def test_policies_use_only_the_configuration_module_of_memory_core() -> None:
    """The policy file is read by the one configuration mechanism
    (``memory_core.configuration``, stdlib + yaml + pydantic); nothing else of the memory
    library, so the policy engine stays free of SQL, numerics and models."""
    offenders = {
        path: sorted(n for n in names if n.split(".")[0] == "memory_core")
        for path, names in _modules("policies").items()
    }
    assert {p: n for p, n in offenders.items() if set(n) - {"memory_core.configuration"}} == {}


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


def test_apsw_is_imported_only_by_the_storage_package() -> None:
    """Every read and write of a tenant's file goes through ``memory_core/storage/``
    (one place to hook each transaction's changes for snapshots); the proxy, the policy
    engine, the scripts and the rest of the library never touch SQLite themselves."""
    storage = "memory_core/storage/"
    users = {
        path
        for package in ("memory_core", "proxy", "policies", "scripts")
        for path, names in _imports(package).items()
        if names & {"apsw", "sqlite3"}
    }
    assert users and all(path.startswith(storage) for path in users), sorted(users)


def test_no_sql_text_outside_storage() -> None:
    """No module outside storage holds SQL statements (a guard against queries creeping
    back in as strings passed to a connection it was handed)."""
    statement = re.compile(
        r"\b(SELECT\s+.+\s+FROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b",
        re.IGNORECASE | re.DOTALL,
    )
    offenders = []
    for package in ("memory_core", "proxy", "policies", "scripts"):
        for path in (ROOT / package).rglob("*.py"):
            if str(path.relative_to(ROOT)).startswith("memory_core/storage/"):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and statement.search(node.value)
                ):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


@pytest.mark.parametrize("module", ["memory_core/graph", "memory_core/retrieval/scoring.py"])
def test_the_numeric_core_needs_no_database_and_no_threads(module: str) -> None:
    """The graph engine and fragment scoring are pure functions of arrays: no SQLite, no
    locks or threads (publication and caching live outside, see ``graph_holder``)."""
    target = ROOT / module
    paths = [target] if target.is_file() else sorted(target.rglob("*.py"))
    for path in paths:
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module.split(".")[0])
        assert not names & {"apsw", "sqlite3", "threading", "multiprocessing"}, path
