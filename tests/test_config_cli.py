"""Configuration errors name the file, key and reason; the CLI refuses to start on them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from proxy import ConfigError, load_config

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent


def _write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return path


UPSTREAM = [{"model": "*", "provider": "openai", "api_base": "http://127.0.0.1:1/v1"}]


@pytest.mark.parametrize(
    ("doc", "key", "reason"),
    [
        ({}, "upstreams", "missing required key 'upstreams'"),
        ({"upstreams": []}, "upstreams", "non-empty list"),
        ({"upstreams": [{"provider": "openai"}]}, "upstreams[0].model", "missing required key"),
        (
            {"upstreams": [{"model": " ", "provider": "openai"}]},
            "upstreams[0].model",
            "non-empty string",
        ),
        (
            {"upstreams": [{"model": "*", "provider": "openai", "timeout_s": -1}]},
            "upstreams[0].timeout_s",
            ">= 0.001",
        ),
        (
            {"upstreams": [{"model": "*", "provider": "openai", "colour": "red"}]},
            "upstreams[0].colour",
            "unknown key",
        ),
        ({"upstreams": UPSTREAM, "server": {"port": "eighty"}}, "server.port", "integer"),
        ({"upstreams": UPSTREAM, "auth": {"mode": "closed"}}, "auth.mode", "'open' or 'keys'"),
        ({"upstreams": UPSTREAM, "auth": {"mode": "keys"}}, "auth.keys", "at least one"),
        (
            {"upstreams": UPSTREAM, "memory": {"role": "assistant"}},
            "memory.role",
            "'system' or 'user'",
        ),
        ({"upstreams": UPSTREAM, "policy": "missing.yaml"}, "policy", "does not exist"),
        (
            {"upstreams": UPSTREAM, "memory": {"context_turns": -1}},
            "memory.context_turns",
            "must be >= 0, got -1",
        ),
        (
            {"upstreams": UPSTREAM, "memory": {"formation_grace_ms": "soon"}},
            "memory.formation_grace_ms",
            "must be a number, got string 'soon'",
        ),
        (
            {"upstreams": UPSTREAM, "retrieval": {"operator": "tide"}},
            "retrieval.operator",
            "(one of: pulse, wave)",
        ),
        (
            {"upstreams": UPSTREAM, "retrieval": {"pulse": {"gamma": 1.5}}},
            "retrieval.pulse.gamma",
            "must be < 1, got 1.5",
        ),
        (
            {"upstreams": UPSTREAM, "retrieval": {"traversal": {"telepathy": [1, 1]}}},
            "retrieval.traversal.telepathy",
            "unknown edge type",
        ),
        ({"upstreams": UPSTREAM, "extra": 1}, "extra", "unknown key"),
        ("upstreams: [unclosed", "", "invalid YAML"),
    ],
)
def test_config_errors(tmp_path: Path, doc: object, key: str, reason: str) -> None:
    path = _write(tmp_path, doc)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.file == str(path.resolve())
    assert caught.value.key == key
    assert reason in caught.value.reason


def test_config_defaults_and_overrides(tmp_path: Path) -> None:
    config = load_config(
        _write(tmp_path, {"upstreams": UPSTREAM}), port=9999, data_dir=tmp_path / "d"
    )
    assert config.server.port == 9999
    assert config.server.data_dir == (tmp_path / "d").resolve()
    assert config.server.max_body_bytes == 8 * 1024 * 1024
    assert config.auth.mode == "open"
    assert config.upstreams[0].uses_fast_path
    assert config.policy_path.name == "default.yaml"
    assert config.retrieval.area.operator == "pulse"


def test_retrieval_settings_are_read(tmp_path: Path) -> None:
    doc = {
        "upstreams": UPSTREAM,
        "retrieval": {
            "operator": "wave",
            "traversal": {"mentions": [1.0, 0.5]},
            "pulse": {"gamma": 0.7, "epsilon": 0.001},
            "area": {"max_region_nodes": 32},
            "max_delta_edges": 1000,
        },
    }
    settings = load_config(_write(tmp_path, doc)).retrieval
    assert settings.area.operator == "wave" and settings.area.max_region_nodes == 32
    assert settings.pulse.gamma == 0.7 and settings.pulse.epsilon == 0.001
    assert settings.traversal.multipliers(0) == (1.0, 0.5)
    assert settings.max_delta_edges == 1000


def test_shipped_config_loads() -> None:
    config = load_config(ROOT / "config.yaml")
    assert config.upstreams[0].api_key_env == "OPENAI_API_KEY"
    assert config.policy_path == ROOT / "policies" / "default.yaml"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [sys.executable, "-m", "proxy", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
    )


def test_cli_refuses_a_bad_config(tmp_path: Path) -> None:
    path = _write(tmp_path, {"upstreams": [{"model": "*", "provider": 3}]})
    result = _cli("serve", "--config", str(path))
    assert result.returncode == 2
    message = f"{path.resolve()}:3: upstreams[0].provider: must be a string, got integer 3"
    assert message in result.stderr


def test_cli_refuses_a_bad_policy(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text("rules:\n  - type: sometimes\n")
    path = _write(tmp_path, {"upstreams": UPSTREAM, "policy": "policy.yaml"})
    result = _cli("serve", "--config", str(path))
    assert result.returncode == 2
    assert f"{tmp_path / 'policy.yaml'}:2:" in result.stderr
    assert "sometimes" in result.stderr


def test_cli_serves_and_prints_its_setup(tmp_path: Path) -> None:
    path = _write(tmp_path, {"upstreams": UPSTREAM, "logging": {"stdout": False}})
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "proxy",
            "serve",
            "--config",
            str(path),
            "--port",
            "0",
            "--data-dir",
            str(tmp_path / "data"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    ) as process:
        try:
            assert process.stdout is not None
            lines = [process.stdout.readline() for _ in range(7)]
        finally:
            process.terminate()
            process.wait(timeout=30)
    banner = "".join(lines)
    assert "areamem proxy on http://127.0.0.1:" in banner
    assert "policy:" in banner and "default.yaml" in banner
    assert "upstream '*' -> openai http://127.0.0.1:1/v1 [fast path]" in banner
    assert "the interpreter switches every 0.5 ms" in banner  # server.switch_interval_ms


@pytest.mark.parametrize("data_dir", ["", "a file", "a file/under it"])
def test_serve_refuses_a_data_folder_it_cannot_use_in_one_line(
    tmp_path: Path, data_dir: str
) -> None:
    """``--data-dir ''`` served from the current folder (the config refuses an empty
    path; the override skipped the check); a data folder that cannot be made (a file is
    there, or above it) was a traceback. Both are one configuration error, status 2."""
    (tmp_path / "a file").write_text("not a folder")
    path = _write(tmp_path, {"upstreams": UPSTREAM, "logging": {"stdout": False}})
    chosen = str(tmp_path / data_dir) if data_dir else ""
    result = _cli("serve", "--config", str(path), "--port", "0", "--data-dir", chosen)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("areamem: configuration error: "), result.stderr
    assert "server.data_dir: " in result.stderr and result.stderr.count("\n") == 1
    assert not (ROOT / "logs").exists()
