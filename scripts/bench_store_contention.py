"""Append latency under lock contention, and the cost of very long histories.

Contention: ``--clients`` threads each chat on one store (every append resends the
conversation so far plus one exchange, as the proxy does after an answer; a client
waits ``--pause-ms`` between appends and starts a new conversation every ``--turns``
turns), while one thread runs formation
passes in a loop (``MemoryStore.form``, on its own connection) and one saves a receipt
every ``--receipt-ms`` milliseconds (on the appenders' connection). Printed: per
operation the count, rate, median, p99 and maximum latency and the errors, then the
formation passes and the seconds they held the write lock; finally a check that every
appended turn is stored exactly once. ``--encoder bow`` swaps MiniLM for a bag-of-words
encoder so formation commits far more often (the harshest contention).

Long histories (``--long N``): one append of an N-message history to a fresh store, the
same history appended again (nothing new), a branch edit at its second message, and a
recall (BM25 and area) that excludes all N chain hashes, each timed once.

Usage::

    python scripts/bench_store_contention.py [--clients 8] [--seconds 5] [--turns 40]
        [--pause-ms 0] [--receipt-ms 5] [--encoder minilm|bow] [--long 100000]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memory_core import LogMessage, MemoryStore, Recall
from memory_core.formation import Backends, FormationConfig, build_backends
from memory_core.storage.tables.log import conversation_sizes

TS = 1_683_504_000.0


class BagOfWords:
    """A fast stand-in encoder (formation then commits as often as it can)."""

    name = "bag-of-words"
    dimension = 384

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                vectors[row, sum(map(ord, word)) % self.dimension] += 1
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        normalised: npt.NDArray[np.float32] = vectors / np.maximum(norms, 1e-9)
        return normalised


class Recorder:
    """Latencies and errors of one kind of operation, from many threads."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors: Counter[str] = Counter()
        self._lock = threading.Lock()

    def timed(self, operation: Callable[[], object]) -> bool:
        began = time.perf_counter()
        try:
            operation()
        except Exception as exc:  # counted and printed: the point of the benchmark
            with self._lock:
                self.errors[f"{type(exc).__name__}: {exc}"[:80]] += 1
            return False
        with self._lock:
            self.latencies.append(time.perf_counter() - began)
        return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8, help="appending threads (8)")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration (5)")
    parser.add_argument("--turns", type=int, default=40, help="turns per conversation (40)")
    parser.add_argument("--receipt-ms", type=float, default=5.0, help="receipt pause (5)")
    parser.add_argument("--pause-ms", type=float, default=0.0, help="client think time (0)")
    parser.add_argument("--encoder", choices=("minilm", "bow"), default="minilm")
    parser.add_argument("--long", type=int, default=0, help="messages of the long history")
    args = parser.parse_args(argv)
    encoder = BagOfWords() if args.encoder == "bow" else None
    backends = build_backends(FormationConfig(), encoder)
    backends.encoder.encode(["warm up the encoder"] * 8)
    with tempfile.TemporaryDirectory(prefix="areamem-contention-") as tmp:
        _contention(Path(tmp) / "contention.db", backends, args)
        if args.long:
            _long_history(Path(tmp) / "long.db", backends, args.long)
    return 0


def _contention(path: Path, backends: Backends, args: argparse.Namespace) -> None:
    store = MemoryStore(path, backends=backends)
    appends, receipts = Recorder(), Recorder()
    sent: dict[str, int] = {}
    stop = threading.Event()
    formation = {"passes": 0, "rows": 0}
    writes: list[float] = []  # seconds each formation pass held the write lock

    def chat(client: int) -> None:
        conversation, history = 0, list[LogMessage]()
        while not stop.is_set():
            if len(history) >= args.turns:
                conversation, history = conversation + 1, []
            name = f"client{client}-conv{conversation}"
            turn = len(history)
            history += [
                LogMessage({"role": "user", "content": f"{name} asks about topic {turn}"}, TS),
                LogMessage({"role": "assistant", "content": f"an answer about {turn}"}, TS),
            ]
            if appends.timed(functools.partial(store.append, history, conversation=name)):
                sent[name] = len(history)
            time.sleep(args.pause_ms / 1000)

    def form() -> None:
        while not stop.is_set():
            before = store.formation_timings().get("write", 0.0)
            result = store.form()
            if result.processed:
                writes.append(store.formation_timings()["write"] - before)
                formation["rows"] += result.processed
                formation["passes"] += 1
            else:
                time.sleep(0.005)

    def receipt() -> None:
        n = 0
        while not stop.is_set():
            receipts.timed(
                functools.partial(store.save_receipt, f"r{n}", {"n": n, "pad": "x" * 500})
            )
            n += 1
            time.sleep(args.receipt_ms / 1000)

    threads = [threading.Thread(target=chat, args=(i,)) for i in range(args.clients)]
    threads += [threading.Thread(target=form), threading.Thread(target=receipt)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(args.seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    write_s = sum(writes)
    longest = 1000 * max(writes, default=0.0)
    stored = _stored_once(store, sent)
    store.close()
    print(
        f"\ncontention: {args.clients} appending clients, formation ({args.encoder}) and"
        f" receipts on one store, {elapsed:.1f} s"
    )
    print(f"{'operation':<10}{'count':>8}{'per_s':>9}{'p50_ms':>9}{'p99_ms':>9}{'max_ms':>9}")
    for label, recorder in (("append", appends), ("receipt", receipts)):
        print(_row(label, recorder, elapsed))
    print(
        f"formation: {formation['rows']} rows in {formation['passes']} passes, write"
        f" transactions {write_s:.2f} s ({100 * write_s / elapsed:.0f}% of the run),"
        f" longest {longest:.0f} ms"
    )
    for label, recorder in (("append", appends), ("receipt", receipts)):
        errors = sum(recorder.errors.values())
        print(
            f"{label} errors: {errors}"
            + "".join(f"\n  {n} x {e}" for e, n in recorder.errors.items())
        )
    print(f"every appended turn stored exactly once: {stored}")


def _row(label: str, recorder: Recorder, elapsed: float) -> str:
    ms = sorted(1000 * s for s in recorder.latencies) or [0.0]
    p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
    return (
        f"{label:<10}{len(recorder.latencies):>8}{len(recorder.latencies) / elapsed:>9.1f}"
        f"{statistics.median(ms):>9.2f}{p99:>9.2f}{ms[-1]:>9.2f}"
    )


def _stored_once(store: MemoryStore, sent: dict[str, int]) -> bool:
    with store._read_lock:  # a benchmark may look inside
        rows = conversation_sizes(store._reader)
    return all(rows.get(c) == (n, n) for c, n in sent.items())


def _long_history(path: Path, backends: Backends, n: int) -> None:
    store = MemoryStore(path, backends=backends)
    store.append([LogMessage({"role": "user", "content": "The lighthouse door is red."}, TS)])
    store.form_all()
    roles = ["user", "assistant"]
    history = [
        LogMessage({"role": roles[i % 2], "content": f"turn {i} about the lighthouse"}, TS + i)
        for i in range(n)
    ]
    edited = [history[0], LogMessage({"role": "assistant", "content": "edited"}, TS)]
    timings: list[tuple[str, float, str]] = []

    def timed(label: str, operation: Callable[[], str]) -> None:
        began = time.perf_counter()
        outcome = operation()
        timings.append((label, time.perf_counter() - began, outcome))

    first = store.append(history, conversation="long")
    hashes = first.hashes
    store.close()
    store = MemoryStore(path, backends=backends)  # the timed runs on a fresh store
    timed("append again", lambda: f"{store.append(history, conversation='long').appended} new")
    timed(
        "branch edit", lambda: f"{store.append(edited, conversation='long').superseded} superseded"
    )
    timed("recall bm25", lambda: _hits(store.recall, hashes))
    timed("recall area", lambda: _hits(store.recall_area, hashes))
    store.close()
    fresh = MemoryStore(path.with_name("long2.db"), backends=backends)
    began = time.perf_counter()
    appended = fresh.append(history, conversation="long").appended
    timings.insert(0, ("append", time.perf_counter() - began, f"{appended} new"))
    fresh.close()
    print(f"\nlong history: {n} messages")
    print(f"{'operation':<14}{'seconds':>9}  outcome")
    for label, seconds, outcome in timings:
        print(f"{label:<14}{seconds:>9.2f}  {outcome}")


def _hits(recall: Callable[..., Recall], hashes: Sequence[str]) -> str:
    found = recall("lighthouse door", limit=5, budget_tokens=300, exclude_hashes=hashes)
    return f"{len(found.hits)} hits, {len(hashes)} hashes excluded"


if __name__ == "__main__":
    raise SystemExit(main())
