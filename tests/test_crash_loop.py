"""kill -9 at random moments loses no answered exchange (``scripts/crash_loop.py``, CI-sized).

The script runs the proxy as a child process, drives chat (streamed and not) and
``/memory/ingest`` traffic, SIGKILLs the proxy at random moments (a random delay, during
formation, right after an answer), restarts it on the same data folder and checks, after
every restart, that every tenant database passes ``PRAGMA integrity_check`` and that
every exchange a client saw answered is in the log exactly once; after the last restart
the formation queue must drain. Here: five restarts, so every kill moment comes up.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
RESTARTS = 5
LIMIT_S = 100


def _run_crash_loop(report: Path) -> tuple[int, str]:
    """Run the script; on overrun, SIGTERM it so it stops its own children first."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable,
        "scripts/crash_loop.py",
        "--restarts",
        str(RESTARTS),
        "--seed",
        "11",
        "--json",
        str(report),
    ]
    with subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as process:
        try:
            output, _ = process.communicate(timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)
            try:
                output, _ = process.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                output, _ = process.communicate()
            raise AssertionError(f"crash loop ran past {LIMIT_S} s:\n{output}") from None
    return process.returncode, output


def test_kill_9_loses_no_answered_exchange(tmp_path: Path) -> None:
    report_path = tmp_path / "crash.json"
    status, output = _run_crash_loop(report_path)
    assert report_path.exists(), output
    report = json.loads(report_path.read_text())
    totals = report["totals"]

    assert totals["restarts"] == RESTARTS, output
    assert set(totals["kill_moments"]) == {"random", "formation", "after-answer"}, output
    assert totals["chats_answered"] > 0, output
    assert totals["integrity_failures"] == 0, output
    assert totals["http_errors"] == 0, output
    assert report["lost"] == [], output
    assert report["duplicated"] == [], output
    assert totals["drained"], output
    assert status == 0, output


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--tokens-per-s", "0"], "--tokens-per-s"),  # ran, answered nothing, "0 lost": status 0
        (["--tokens-per-s", "nan"], "--tokens-per-s"),
        (["--first-token-ms", "nan"], "--first-token-ms"),  # the same
        (["--first-token-ms", "-5"], "--first-token-ms"),
        (["--formation-workers", "-1"], "--formation-workers"),  # found by the proxy started
    ],
)
def test_bad_numbers_are_refused_in_one_line_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    argv: list[str],
    says: str,
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    crash_loop = importlib.import_module("crash_loop")
    workdir = tmp_path / "work"
    assert crash_loop.main([*argv, "--restarts", "1", "--workdir", str(workdir)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("crash_loop: ") and says in line
    assert not workdir.exists()


def test_a_report_file_that_cannot_be_written_is_refused_before_the_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    crash_loop = importlib.import_module("crash_loop")
    with pytest.raises(SystemExit) as exit_:
        crash_loop.main(["--json", str(tmp_path / "missing" / "out.json")])
    assert exit_.value.code == 2 and "does not exist" in capsys.readouterr().err
