"""The question-encoding thread, and encodings started ahead of their lookup.

An area lookup encodes its question on this thread while its lexical foci are pulsed,
then waits for the vector. The encoding is the longer of the two (about 2 ms in the proxy
against 1.6-1.9 ms of foci and pulse), so the lookup waits for it, and it only began
once the request had crossed to a reader thread and the lookup had set itself up (about
0.5 ms after the proxy decided to retrieve, at 100k fragments). :meth:`ahead` starts it
as soon as the caller knows the question will be looked up; the lookup then :meth:`take`s
it, already under way.

Invariants: a lookup takes an encoding of exactly its question text, and each encoding
is taken at most once (two lookups of one text get one each, or encode their own); at
most :data:`AHEAD` encodings wait to be taken, the oldest forgotten beyond (a lookup
that never came: shed by the admission gate, or timed out before it started).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

__all__ = ["AHEAD", "Encoding", "QuestionEncodings"]

AHEAD = 32
"""The most encodings started ahead and not yet taken."""
START_WAIT_S = 0.005
"""At most this long a lookup waits for its question's encoding to start."""

Vector = npt.NDArray[np.float32]
Encode = Callable[[str], Vector]


class Encoding:
    """One question's encoding: its vector and how long it took (ms), once done."""

    def __init__(self, future: Future[tuple[Vector, float]], started: threading.Event) -> None:
        self._future, self._started = future, started

    def wait_started(self) -> None:
        """Let the encoding thread take the interpreter first: it holds it only until the
        model runs (which releases it), while the lookup's thread, once ahead, would keep
        it through the lexical foci (a third of the questions then waited 1-3 ms)."""
        self._started.wait(START_WAIT_S)

    def result(self) -> tuple[Vector, float]:
        return self._future.result()


class QuestionEncodings:
    """A single encoding thread (questions are short: one at a time, in order) and the
    encodings started :meth:`ahead`; thread-safe."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="question-encoding")
        self._ahead: OrderedDict[int, tuple[str, Encoding]] = OrderedDict()
        self._serial = 0
        self._lock = threading.Lock()

    def start(self, question: str, encode: Encode) -> Encoding:
        """Encode ``question`` now, on the encoding thread; raises RuntimeError once shut
        down."""
        started = threading.Event()

        def run() -> tuple[Vector, float]:
            started.set()
            began = time.perf_counter()
            return encode(question), (time.perf_counter() - began) * 1000

        return Encoding(self._executor.submit(run), started)

    def ahead(self, question: str, encode: Encode) -> None:
        """Start encoding ``question`` for a lookup about to come."""
        encoding = self.start(question, encode)
        with self._lock:
            self._serial += 1
            self._ahead[self._serial] = (question, encoding)
            while len(self._ahead) > AHEAD:
                self._ahead.popitem(last=False)

    def take(self, question: str, encode: Encode) -> Encoding:
        """The oldest encoding of ``question`` started ahead, else a new one."""
        with self._lock:
            for serial, (text, encoding) in self._ahead.items():
                if text == question:
                    del self._ahead[serial]
                    return encoding
        return self.start(question, encode)

    def shutdown(self) -> None:
        with self._lock:
            self._ahead.clear()
        self._executor.shutdown(wait=True)
