"""The formation worker's scheduling (:mod:`memory_core.worker.priority`).

Run in a child process: going under ``SCHED_IDLE`` changes every thread of the process
that does it, and the test process must keep its own priority.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memory_core.worker.priority import Priority

ROOT = Path(__file__).resolve().parents[1]

_CHILD = textwrap.dedent(
    """
    import json, os, threading, time
    from memory_core.worker.priority import Priority, _may_leave_idle

    def policy(tid=None):
        tid = threading.get_native_id() if tid is None else tid
        return {os.SCHED_IDLE: "idle", os.SCHED_OTHER: "other"}.get(
            os.sched_getscheduler(tid), "other?")

    os.nice(19)
    allowed = _may_leave_idle()
    seen = {"allowed": allowed, "before": policy()}
    waiting = [False]
    priority = Priority(starved_s=0.15, check_s=0.01, pending=lambda: waiting[0])
    seen["mode"] = priority.start()
    seen["started"] = policy()
    seen["guard"] = policy(priority._guard_tid) if priority._guard else None
    later = []
    thread = threading.Thread(target=lambda: later.append(policy()))
    thread.start(); thread.join()
    seen["new_thread"] = later[0]
    priority.busy(); priority.done()  # work done at once: never lifted
    seen["quick_lifts"] = priority.lifts
    priority.busy()
    deadline = time.monotonic() + (10 if priority.mode == "idle" else 0.3)
    while priority.lifts == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    seen["starved"], seen["lifts"] = policy(), priority.lifts
    seen["nice_kept"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    priority.done()
    seen["after_done"] = policy()
    waiting[0] = True  # work waits that the worker's thread has not taken (starved itself)
    deadline = time.monotonic() + (10 if priority.mode == "idle" else 0.3)
    while priority.lifts < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    seen["pending_lifted"], seen["pending_lifts"] = policy(), priority.lifts
    waiting[0] = False
    priority.done()
    seen["pending_done"] = policy()
    priority.stop()
    print(json.dumps(seen))
    """
)


def _child() -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_the_worker_yields_while_it_keeps_up_and_is_lifted_when_starved() -> None:
    seen = _child()
    assert seen["before"] == "other"
    if not seen["allowed"]:  # may not leave SCHED_IDLE: nice 19 only, nothing changed
        assert (seen["mode"], seen["started"], seen["guard"]) == ("nice", "other", None)
        assert seen["lifts"] == seen["pending_lifts"] == 0
        return
    assert seen["mode"] == "idle"
    assert seen["started"] == "idle" and seen["new_thread"] == "idle"  # inherited
    assert seen["guard"] == "other"  # the guard always gets its turn
    assert seen["quick_lifts"] == 0
    assert (seen["starved"], seen["lifts"]) == ("other", 1)
    assert seen["nice_kept"] == 19  # lifted to the normal policy, still at nice 19
    assert seen["after_done"] == "idle"
    assert (seen["pending_lifted"], seen["pending_lifts"]) == ("other", 2)
    assert seen["pending_done"] == "idle"


def test_a_process_that_may_not_leave_idle_stays_at_nice(monkeypatch: pytest.MonkeyPatch) -> None:
    """As an unprivileged process with RLIMIT_NICE 0 is refused (EPERM) on the way back."""

    def refuse(tid: int, policy: int, param: os.sched_param) -> None:
        if policy != getattr(os, "SCHED_IDLE", -1):
            raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse, raising=False)  # priority's os
    priority = Priority()
    assert priority.start() == "nice"
    assert priority.mode == "nice" and priority._guard is None
    priority.busy()
    priority.done()
    priority.stop()
    assert priority.lifts == 0
