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


_PUBLIC = {"memory_core", "memory_core.configuration", "memory_core.views", "memory_core.worker"}
"""What of memory_core the proxy may import: the names the package exports, the one
configuration dialect, the typed views people see, and the formation worker's protocol."""


def test_the_proxy_uses_memory_core_through_its_public_surface_only() -> None:
    """Never ``memory_core.storage`` (its rows are re-exported by ``memory_core``), never
    a module inside a package: what the proxy needs is named at the top, so memory_core's
    layout can change without touching the proxy."""
    offenders = {
        path: sorted(n for n in names if n.split(".")[0] == "memory_core" and n not in _PUBLIC)
        for path, names in _modules("proxy").items()
    }
    assert {p: n for p, n in offenders.items() if n} == {}


def test_every_name_memory_core_exports_is_there() -> None:
    """``memory_core.__all__`` and its lazy table agree, and each name resolves."""
    import memory_core

    homes = {name for names in memory_core._HOMES.values() for name in names}
    assert set(memory_core.__all__) == homes
    assert all(getattr(memory_core, name) is not None for name in memory_core.__all__)


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


def _module_names() -> dict[str, Path]:
    """Every module of the project's packages by dotted name (a package by its own)."""
    found = {}
    for package in ("proxy", "memory_core", "policies"):
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports: every import statement, at module
    level, inside functions and under ``TYPE_CHECKING`` alike (a cycle broken by a late
    import is still a cycle); ``from p import m`` counts as importing ``p.m`` when ``m``
    is a module, else ``p``."""
    modules = _module_names()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    edges.add(target if target in modules else base)
        graph[name] = {e for e in edges if e in modules and e != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_through_others() -> None:
    """No import cycle between the project's modules, however it is hidden: a registry
    that configuration checks names against lives in a leaf (see
    :class:`memory_core.registry.Names`), and retrieval reads the store through a
    protocol (:class:`memory_core.retrieval.recall.Memory`)."""
    graph = _import_graph()
    assert {"memory_core.store.memory_store", "proxy.chat.handler"} <= set(graph)
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    """The check itself: a planted two-module and three-module cycle are both found."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c", "a"}, "f": set()}
    assert _cycles(graph) == [["a", "b"], ["c", "d", "e"]]
