"""A formation worker's CPU priority: below every other process while it keeps up.

On a small machine the worker and the proxy share the cores, and a chat request must not
wait for the formation of an earlier answer. ``nice 19`` alone was not enough: Linux's
scheduler lets a running task finish its slice before a woken one takes the core, so
every wake-up of the proxy (a request arriving, the upstream answering, a lookup's
threads) could wait behind a slice of the worker. Under ``SCHED_IDLE`` a woken task of
the normal policy takes the core at once, but the worker then gets almost nothing of a
busy core (a fifth of nice 19's share), so under load it would hardly form.

So the worker runs under ``SCHED_IDLE`` while it keeps up, and a guard thread (left at
``nice 19`` under the normal policy, so it always gets its turn) lifts every thread of
the process back to the normal policy, still at ``nice 19``, once work has waited
:data:`STARVED_S` unfinished, until the worker has nothing left to do. Work counts as
known from when the worker's thread takes it (:meth:`Priority.busy`) or, should that
thread itself be starved before it can, from when the guard first sees it waiting
(``pending``: a message in the worker's pipe). What this bounds: formation never waits
more than about :data:`STARVED_S` for the CPU beyond what ``nice 19`` alone gives it.

Measured in the proxy over 100k fragments, 300 memory-on questions back to back with
formation in the worker: client p50 17.1-17.6 ms under ``SCHED_IDLE`` against 18.4-19.2
at ``nice 19`` (``docs/evaluation.md``).

Where the process may not leave ``SCHED_IDLE`` once in it (an unprivileged process with
the default ``RLIMIT_NICE`` of 0 may not: see sched_setscheduler(2)), it stays at
``nice 19`` under the normal policy, as before: :meth:`Priority.start` tries the round
trip on a throwaway thread first. Linux only; elsewhere the mode is ``nice``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable

__all__ = ["CHECK_S", "STARVED_S", "Priority"]

STARVED_S = 0.3
"""How long known work may wait unfinished under ``SCHED_IDLE`` before the worker is lifted to the
normal policy (``nice 19``). The worker gathers for 0.1 s before a pass
(:data:`~memory_core.worker.loop.GATHER_S`) and a pass takes tens of ms, so only a starved one waits
this long; freshness stays well within a second."""
CHECK_S = 0.05
"""How often the guard looks."""

_TASKS = "/proc/self/task"


class Priority:
    """The worker process's scheduling: :meth:`start` once, then :meth:`busy` when work
    is known and :meth:`done` when none is left (both from the worker's thread).

    Invariant: while :attr:`mode` is ``idle``, every thread of the process but the guard
    is under ``SCHED_IDLE`` except between a lift and the next :meth:`done`; threads
    started meanwhile inherit the policy of the thread that starts them, and a lift or a
    :meth:`done` sets every thread again.
    """

    def __init__(
        self,
        *,
        starved_s: float = STARVED_S,
        check_s: float = CHECK_S,
        clock: Callable[[], float] = time.monotonic,
        pending: Callable[[], bool] = lambda: False,
    ) -> None:
        self._starved_s = starved_s
        self._pending = pending
        self._check_s = check_s
        self._clock = clock
        self._lock = threading.Lock()
        self._busy_since: float | None = None
        self._lifted = False
        self._stopped = threading.Event()
        self._guard: threading.Thread | None = None
        self._guard_tid = -1
        self.mode = "nice"
        self.lifts = 0
        """How many times the guard lifted a starved worker (tests read it). Counted once
        every thread is lifted, so a thread that sees it grow also sees itself lifted."""

    def start(self) -> str:
        """Go under ``SCHED_IDLE`` when the process may come back from it; returns the
        mode (``idle`` or ``nice``). The caller has already lowered ``nice``."""
        if not _may_leave_idle():
            return self.mode
        ready = threading.Event()
        self._guard = threading.Thread(
            target=self._watch, args=(ready,), name="priority-guard", daemon=True
        )
        self._guard.start()
        ready.wait()
        self.mode = "idle"
        self._set_all(os.SCHED_IDLE)
        return self.mode

    def busy(self) -> None:
        """Work is known: the guard's clock starts (unless it already runs)."""
        with self._lock:
            if self._busy_since is None:
                self._busy_since = self._clock()

    def done(self) -> None:
        """No work is left: the clock stops, and a lifted worker goes back under
        ``SCHED_IDLE``."""
        with self._lock:
            self._busy_since = None
            if self._lifted:
                self._lifted = False
                self._set_all(os.SCHED_IDLE)

    def stop(self) -> None:
        self._stopped.set()
        if self._guard is not None:
            self._guard.join()

    def _watch(self, ready: threading.Event) -> None:
        self._guard_tid = threading.get_native_id()
        ready.set()
        while not self._stopped.wait(self._check_s):
            try:  # outside the lock: it may take a system call
                waiting = self._pending()
            except (OSError, EOFError, ValueError):  # the pipe is gone: the worker ends
                waiting = False
            with self._lock:
                if waiting and self._busy_since is None:
                    self._busy_since = self._clock()  # work the worker has not taken yet
                since = self._busy_since
                if self._lifted or since is None or self._clock() - since < self._starved_s:
                    continue
                self._lifted = True
                self._set_all(os.SCHED_OTHER)
                self.lifts += 1  # after the threads are set: a reader of it sees them lifted

    def _set_all(self, policy: int) -> None:
        """Every thread of the process but the guard to ``policy`` (the nice value is
        the thread's own and stays). A thread that ended meanwhile is skipped."""
        for name in os.listdir(_TASKS):
            tid = int(name)
            if tid == self._guard_tid:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.sched_setscheduler(tid, policy, os.sched_param(0))


def _may_leave_idle() -> bool:
    """Whether a thread of this process can go under ``SCHED_IDLE`` and come back (tried
    on a throwaway thread, which ends either way)."""
    if not (hasattr(os, "SCHED_IDLE") and os.path.isdir(_TASKS)):
        return False
    outcome: list[bool] = []

    def attempt() -> None:
        tid = threading.get_native_id()
        try:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            outcome.append(False)
        else:
            outcome.append(True)

    probe = threading.Thread(target=attempt, name="priority-probe")
    probe.start()
    probe.join()
    return outcome == [True]
