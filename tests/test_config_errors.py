"""Every section of config.yaml reports a mistake the same way: ``file:line: key: reason``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memory_core.configuration import ConfigurationError, read_yaml
from memory_core.registry import Names, Registry, UnknownNameError
from memory_core.retrieval.strategies import STRATEGIES
from proxy import ConfigError, load_config
from proxy.config import Config

ROOT = Path(__file__).resolve().parent.parent
HEAD = """\
upstreams:
  - model: "*"
    provider: openai
"""
"""Three lines every case starts with; the section under test begins on line 4."""

# (section, text from line 4, line, dotted key, part of the reason)
CASES = [
    # server
    ("server", "server:\n  port: '80'\n", 5, "server.port", "must be an integer, got string '80'"),
    ("server", "server:\n  prot: 80\n", 5, "server.prot", "did you mean 'port'?"),
    ("server", "server:\n  max_body_bytes: 10\n", 5, "server.max_body_bytes", "must be >= 1024"),
    ("server", "server:\n  port: 99999\n", 5, "server.port", "must be <= 65535"),
    # auth
    ("auth", "auth:\n  keys: [alice]\n", 5, "auth.keys", "must be a mapping of proxy key"),
    ("auth", "auth:\n  metric: keys\n", 5, "auth.metric", "did you mean 'metrics'?"),
    ("auth", "auth:\n  mode: open\n  metrics: keys\n", 6, "auth.metrics", "needs auth.mode"),
    ("auth", "auth:\n  keys:\n    sk-1: ../etc\n", 5, "auth.keys", "tenant '../etc' must be"),
    ("auth", "auth:\n  mode: keys\n", 4, "auth.keys", "at least one key"),
    # reconstruction
    ("reconstruction", "reconstruction:\n  facts: some\n", 5, "reconstruction.facts",
     "must be 'question' or 'all', got 'some'"),
    ("reconstruction", "reconstruction:\n  max_statements: -1\n", 5,
     "reconstruction.max_statements", "must be >= 0"),
    ("reconstruction", "reconstruction:\n  disputed_marker: '[x]'\n", 5,
     "reconstruction.disputed_marker", "must not contain control characters or any of"),
    ("reconstruction", "reconstruction:\n  coverage:\n    max_covered_share: 2\n", 6,
     "reconstruction.coverage.max_covered_share", "must be <= 1"),
    ("reconstruction", "reconstruction:\n  coverage:\n    notes: true\n", 6,
     "reconstruction.coverage.notes", "did you mean 'note'?"),
    ("memory", "memory:\n  receipts_keep_days: 0\n", 5, "memory.receipts_keep_days",
     "must be > 0"),
    # upstreams
    (
        "upstreams",
        "  - model: m\n    provider: openai\n    fast_path: 'yes'\n",
        6,
        "upstreams[1].fast_path",
        "must be true or false, got string 'yes'",
    ),
    (
        "upstreams",
        "  - model: m\n    provider: openai\n    api_bse: http://x\n",
        6,
        "upstreams[1].api_bse",
        "did you mean 'api_base'?",
    ),
    (
        "upstreams",
        "  - model: m\n    provider: openai\n    timeout_s: 0\n",
        6,
        "upstreams[1].timeout_s",
        "must be >= 0.001, got 0",
    ),
    (
        "upstreams",
        "  - provider: openai\n",
        4,
        "upstreams[1].model",
        "missing required key 'model'",
    ),
    # memory
    (
        "memory",
        "memory:\n  ingest: 1\n",
        5,
        "memory.ingest",
        "must be true or false, got integer 1",
    ),
    ("memory", "memory:\n  retrival: bm25\n", 5, "memory.retrival", "did you mean 'retrieval'?"),
    (
        "memory",
        "memory:\n  retrieval: bm26\n",
        5,
        "memory.retrieval",
        "unknown retrieval strategy 'bm26'; did you mean 'bm25'? (one of: area, bm25)",
    ),
    ("memory", "memory:\n  role: assistant\n", 5, "memory.role", "must be 'system' or 'user'"),
    (
        "memory",
        "memory:\n  formation_workers: 100000\n",
        5,
        "memory.formation_workers",
        "must be <= 64",
    ),
    (
        "memory",
        "memory:\n  max_concurrent_retrievals: 1000000000\n",
        5,
        "memory.max_concurrent_retrievals",
        "must be <= 256",
    ),
    # logging
    ("logging", "logging: [stdout]\n", 4, "logging", "must be a mapping, got a list"),
    ("logging", "logging:\n  files: false\n", 5, "logging.files", "did you mean 'file'?"),
    ("logging", "logging:\n  stdout: maybe\n", 5, "logging.stdout", "must be true or false"),
    # formation
    (
        "formation",
        "formation:\n  batch_size: 2.5\n",
        5,
        "formation.batch_size",
        "must be an integer, got number 2.5",
    ),
    (
        "formation",
        "formation:\n  ner:\n    modle: x\n",
        6,
        "formation.ner.modle",
        "did you mean 'model'?",
    ),
    (
        "formation",
        "formation:\n  relations:\n    backend: pattern\n",
        6,
        "formation.relations.backend",
        "unknown relations backend 'pattern'; did you mean 'patterns'? (one of: patterns, llm,",
    ),
    (
        "formation",
        "formation:\n  segmentation:\n    threshold: 2\n",
        6,
        "formation.segmentation.threshold",
        "must be <= 1",
    ),
    # retrieval
    (
        "retrieval",
        "retrieval:\n  pulse:\n    gamma: high\n",
        6,
        "retrieval.pulse.gamma",
        "must be a number, got string 'high'",
    ),
    (
        "retrieval",
        "retrieval:\n  area:\n    radus: 3\n",
        6,
        "retrieval.area.radus",
        "did you mean 'radius'?",
    ),
    (
        "retrieval",
        "retrieval:\n  operator: bogus\n",
        5,
        "retrieval.operator",
        "unknown operator 'bogus' (one of: pulse, wave)",
    ),
    (
        "retrieval",
        "retrieval:\n  traversal:\n    mentions: [1, -1]\n",
        6,
        "retrieval.traversal.mentions",
        "multiplier must be finite and >= 0",
    ),
    (
        "retrieval",
        "retrieval:\n  scoring:\n    seeds: 0\n",
        6,
        "retrieval.scoring.seeds",
        "must be >= 1, got 0",
    ),
    (
        "retrieval",
        "retrieval:\n  scoring:\n    bm25: true\n",
        6,
        "retrieval.scoring.bm25",
        "must be a number, got boolean true",
    ),
    (
        "retrieval",
        "retrieval:\n  scoring:\n    similarity: .inf\n",
        6,
        "retrieval.scoring.similarity",
        "must be a finite number",
    ),
    (
        "retrieval",
        "retrieval:\n  scoring: {bm25: 0, activation: 0, convergence: 0, similarity: 0, area: 0,"
        " date: 0}\n",
        5,
        "retrieval.scoring",
        "at least one term weight must be positive",
    ),
    (
        "retrieval",
        "retrieval:\n  scoring:\n    candidates: 1000000000000\n",
        6,
        "retrieval.scoring.candidates",
        "must be <= 10000",
    ),
    (
        "retrieval",
        "retrieval:\n  scoring:\n    seed: 3\n",
        6,
        "retrieval.scoring.seed",
        "did you mean 'seeds'?",
    ),
    # policy, inline
    ("policy", "policy:\n  enabled: 1\n", 5, "policy.enabled", "must be true or false"),
    (
        "policy",
        "policy:\n  budget_token: 5\n",
        5,
        "policy.budget_token",
        "did you mean 'budget_tokens'?",
    ),
    (
        "policy",
        "policy:\n  rules:\n    - type: every_n_turns\n      n: 0\n",
        7,
        "policy.rules[1] (every_n_turns).n",
        "must be >= 1, got 0",
    ),
    ("policy", "policy: 3\n", 4, "policy", "must be a file path or the policy itself"),
    # the top level and the YAML itself
    ("top", "sever:\n  port: 1\n", 4, "sever", "did you mean 'server'?"),
    ("top", "server:\n  port: 1\n  port: 2\n", 6, "server.port", "duplicate key 'port'"),
]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("section", "text", "line", "key", "reason"), CASES)
def test_each_section_reports_file_line_and_key(
    tmp_path: Path, section: str, text: str, line: int, key: str, reason: str
) -> None:
    path = _write(tmp_path, HEAD + text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    error = caught.value
    assert (error.file, error.line, error.key) == (str(path.resolve()), line, key)
    assert reason in error.reason
    assert str(error) == f"{path.resolve()}:{line}: {key}: {error.reason}"


POLICY_FILE_CASES = [
    ("enabled: true\nmax_fragments: '8'\n", 2, "max_fragments", "must be an integer"),
    ("cooldown:\n  second: 3\n", 2, "cooldown.second", "did you mean 'seconds'?"),
    (
        "rules:\n  - type: pattern\n    patterns: ['(']\n",
        3,
        "rules[1] (pattern).patterns[1]",
        "invalid regular expression '('",
    ),
]


@pytest.mark.parametrize(("text", "line", "key", "reason"), POLICY_FILE_CASES)
def test_a_policy_file_reports_its_own_file_line_and_key(
    tmp_path: Path, text: str, line: int, key: str, reason: str
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(text, encoding="utf-8")
    _write(tmp_path, HEAD + "policy: policy.yaml\n")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "config.yaml")
    error = caught.value
    assert (error.file, error.line, error.key) == (str(policy), line, key)
    assert str(error).startswith(f"{policy}:{line}: {key}: ") and reason in error.reason


def test_a_missing_policy_file_is_reported_at_its_key(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + "policy: nowhere.yaml\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path.resolve()}:4: policy: policy file ")


def test_invalid_yaml_names_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, HEAD + "server:\n  port: [1\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.line is not None and "invalid YAML" in caught.value.reason


def test_the_shipped_config_is_valid_and_documents_every_scoring_key() -> None:
    config = load_config(ROOT / "config.yaml")
    assert config.retrieval.scoring == type(config.retrieval.scoring)()
    scoring = read_yaml((ROOT / "config.yaml").read_text()).at(("retrieval", "scoring"))
    assert isinstance(scoring, dict)
    assert set(scoring) == set(type(config.retrieval.scoring).model_fields)


def test_the_file_schema_is_a_json_schema() -> None:
    schema = Config.model_json_schema()
    assert {"server", "upstreams", "retrieval", "policy"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False


def test_registry_checks_names_and_suggests() -> None:
    shapes: Registry[int] = Registry("shape")
    shapes.register("circle", 1, "round")
    shapes.register("square", 2)
    assert shapes.names() == ("circle", "square") and shapes.get("square") == 2
    assert shapes.describe("circle") == "round" and "circle" in shapes
    with pytest.raises(UnknownNameError, match="did you mean 'circle'"):
        shapes.get("circel")
    with pytest.raises(ValueError, match=r"\(one of: circle, square\)"):
        shapes.check("hexagon")
    with pytest.raises(ValueError, match="already registered"):
        shapes.register("circle", 3)
    assert set(STRATEGIES.names()) == {"area", "bm25"}


def test_a_registry_on_declared_names_takes_only_those() -> None:
    declared = Names("shape", {"circle": "round", "square": "four corners"})
    shapes: Registry[int] = Registry(declared)
    shapes.register("circle", 1)
    assert shapes.describe("circle") == "round" and declared.check("square") == "square"
    assert shapes.undeclared_or_missing() == (set(), {"square"})
    with pytest.raises(ValueError, match="not declared"):
        shapes.register("hexagon", 6)
    with pytest.raises(ValueError, match="description is declared"):
        shapes.register("square", 4, "four sides")
    with pytest.raises(UnknownNameError, match="did you mean 'circle'"):
        declared.check("circel")


def _registries() -> list[tuple[str, Registry[object]]]:
    """Every registry the library builds on declared names, found by scanning the
    modules that implement them (so a new one is checked without listing it here)."""
    import importlib
    import pkgutil

    import memory_core

    found = []
    for info in pkgutil.walk_packages(memory_core.__path__, "memory_core."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, Registry) and value.declared is not None:
                found.append((f"{info.name}.{name}", value))
    return found


def test_every_declared_name_has_an_implementation_and_no_other_is_registered() -> None:
    """Configuration checks backend, judge and stage names against declarations in
    leaves (:data:`memory_core.formation.config.STAGE_CHOICES`,
    :data:`memory_core.dream.config.JUDGE_CHOICES`); the factories register against them.
    Both sides must agree: a declared name with no factory would validate and then fail
    to build."""
    registries = dict(_registries())
    assert {
        "memory_core.formation.backends.SEGMENTERS",
        "memory_core.formation.backends.RELATION_EXTRACTORS",
        "memory_core.dream.judges.JUDGES",
    } <= set(registries)
    disagreeing = {
        name: registry.undeclared_or_missing()
        for name, registry in registries.items()
        if registry.undeclared_or_missing() != (set(), set())
    }
    assert disagreeing == {}


def test_reader_errors_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError) as caught:
        read_yaml("a: 1\nb:\n  c: 1\n  c: 2\n", "x.yaml")
    assert str(caught.value) == "x.yaml:4: b.c: duplicate key 'c'"


DEEP = {
    "flow": "policy:\n  rules: " + "[" * 5000 + "]" * 5000 + "\n",
    "block": "".join("  " * depth + "a:\n" for depth in range(3000)),
}


@pytest.mark.parametrize("shape", sorted(DEEP))
def test_yaml_nested_past_the_readers_recursion_is_a_configuration_error(
    tmp_path: Path, shape: str
) -> None:
    """Thousands of nested brackets or indents are refused as YAML nested too deeply, a
    ConfigurationError naming the file (as the config, as a policy), not a RecursionError
    (which escaped ``areamem serve`` as a traceback and the policy's hot reload, killing it)."""
    with pytest.raises(ConfigurationError, match="nested too deeply") as caught:
        read_yaml(DEEP[shape], "x.yaml")
    assert caught.value.file == "x.yaml"
    path = _write(tmp_path, HEAD + DEEP[shape])
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config(path)


def _env() -> dict[str, str]:
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def test_importing_policies_loads_no_storage_or_numerics() -> None:
    code = (
        "import sys, policies\n"
        "policies.parse_policy('rules: [always]')\n"
        "print(sorted(m for m in ('apsw', 'numpy', 'torch') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == "[]"


def test_serve_refuses_a_bad_file_before_listening(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        HEAD
        + textwrap.dedent("""\
        retrieval:
          operator: bogus
        """),
    )
    result = subprocess.run(
        [sys.executable, "-m", "proxy", "serve", "--config", str(path), "--port", "0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=60,
    )
    assert result.returncode != 0
    assert f"{path.resolve()}:5: retrieval.operator: unknown operator 'bogus'" in result.stderr
    assert "areamem proxy on" not in result.stdout


def test_nested_aliases_are_shared_not_expanded(tmp_path: Path) -> None:
    """A "billion laughs" file (nine aliases of nine aliases, eight deep) is read in
    constant time, as ``yaml.safe_load`` would, and rejected by its first wrong value."""
    lines = ['laugh0: &l0 ["ha", "ha", "ha", "ha", "ha", "ha", "ha", "ha", "ha"]']
    for depth in range(1, 8):
        refs = ", ".join([f"*l{depth - 1}"] * 9)
        lines.append(f"laugh{depth}: &l{depth} [{refs}]")
    document = read_yaml("\n".join(lines) + "\n", "laughs.yaml")
    assert isinstance(document.value, dict) and len(document.value) == 8
    path = tmp_path / "config.yaml"
    path.write_text("\n".join(lines) + "\n" + HEAD + "    advertise: *l7\n")
    with pytest.raises(
        ConfigError, match=r"config\.yaml:12: upstreams\[0\]\.advertise\[0\]: must be a string"
    ):
        load_config(path)


def test_a_node_that_contains_itself_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match=r"x\.yaml:1: loop\[1\]: recursive alias"):
        read_yaml("loop: &a [1, *a]\n", "x.yaml")
