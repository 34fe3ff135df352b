"""kill -9 at random moments loses no answered exchange (``scripts/crash_loop.py``, CI-sized).

The script runs the proxy as a child process, drives chat (streamed and not) and
``/memory/ingest`` traffic, SIGKILLs the proxy at random moments (a random delay, during
formation, right after an answer), restarts it on the same data folder and checks, after
every restart, that every tenant database passes ``PRAGMA integrity_check`` and that
every exchange a client saw answered is in the log exactly once; after the last restart
the formation queue must drain. Here: five restarts, so every kill moment comes up.
"""

from __future__ import annotations

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
