"""Retrieval latency and memory use of the memory library as one store grows.

What it measures: one tenant store (``memory_core.MemoryStore``, no proxy) is grown in
steps to each of ``--sizes`` fragments (1,000, 10,000 and 100,000 by default) with
synthetic chat turns (``scripts/_synthetic.py``, seeded), appended one conversation per
call and then formed into fragments (FTS5). The build time of each step covers only the
turns that step adds. After each step, ``--queries`` questions (the same seeded set at
every size, after ``--warmup`` others) are timed through ``store.recall`` (search plus
reconstruction within the token budget, the path the proxy takes) and then, in a second
pass, through the search alone; then the process's resident set size (VmRSS, and its
peak VmHWM, from ``/proc/self/status``) and the size of the database file plus its WAL
are read. About one question in ten uses no stored word, so it must come back empty.

The table printed at the end shows, per size, the build, the latency percentiles in
milliseconds, the hits and injected tokens on average and the memory; a last line gives
how much the median recall latency grew from the smallest size to the largest.

Usage (from the project root, with the project's virtual environment)::

    python scripts/bench_retrieval.py                     # 1k, 10k, 100k fragments
    python scripts/bench_retrieval.py --quick             # smoke run: 500 and 2,000
    python scripts/bench_retrieval.py --sizes 1000,50000 --queries 500 --json out.json

Everything happens in a temporary folder that is removed at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import format_ms, percentile, proc_status, render_table, sigterm_as_interrupt
from _synthetic import slot_values, synthetic_conversation
from tqdm import tqdm

from memory_core import LogMessage, MemoryStore
from memory_core.retrieval.bm25 import search
from memory_core.storage import sqlite_versions

DEFAULT_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (500, 2_000)
MISS_SHARE = 0.1
MB = 1024 * 1024

MEMORY_QUESTIONS = (
    "Do you remember what {friend} told me about {hobby} in {place}?",
    "When did I last go {hobby} with {friend}?",
    "What is the name of my {pet}?",
    "How fast did {friend} run the half marathon in {place}?",
    "Which job did {friend} get in {place}?",
    "What did we cook for the street party in {place}?",
    "When am I going to {place}, and what for?",
    "What happened on {day} {month}?",
    "Is the {food} place in {place} still open?",
    "How many shifts did I cover as a {job} in {month}?",
    "Where did my sister move in {month}?",
    "Did {petname} knock over the {food} again?",
    "How long did my {hobby} project take?",
    "Which book about {hobby} did {friend} lend me?",
)
MISS_QUESTIONS = (
    "How do I reset the password on my router?",
    "Can you explain photosynthesis in succulents?",
    "What's the tax deadline for freelancers in Ohio?",
    "Summarize the plot of Moby Dick in three sentences.",
    "Which vaccines does a toddler need before kindergarten?",
    "Write a haiku about autumn leaves.",
    "What is the difference between TCP and UDP?",
    "Recommend a podcast about medieval history.",
    "Is it safe to mix bleach and vinegar?",
    "How do solar panels perform in cloudy weather?",
)


class BenchError(Exception):
    """The benchmark cannot go on: bad arguments or a store that does not behave."""


@dataclass(frozen=True)
class Settings:
    """What to run: sizes, counts, the recall parameters and the seed."""

    sizes: tuple[int, ...]
    queries: int
    warmup: int
    turns_per_conversation: int
    limit: int
    budget_tokens: int
    seed: int


@dataclass(frozen=True)
class Question:
    """One timed question and whether its words occur in the stored text."""

    text: str
    expect_hits: bool


@dataclass(frozen=True)
class Build:
    """What one growth step added and how long appending and forming took."""

    turns: int
    conversations: int
    append_s: float
    form_s: float

    @property
    def seconds(self) -> float:
        return self.append_s + self.form_s

    @property
    def turns_per_s(self) -> float:
        return self.turns / max(self.seconds, 1e-9)


@dataclass(frozen=True)
class Memory:
    """Resident memory of this process and the size of the store on disk, in bytes."""

    rss: int
    peak_rss: int
    db: int
    wal: int


@dataclass(frozen=True)
class Step:
    """Everything measured at one store size."""

    size: int
    fragments: int
    build: Build
    recall_ms: list[float]
    search_ms: list[float]
    hits: list[int]
    tokens: list[int]
    misses_with_hits: int
    memory: Memory


# --- synthetic store and questions --------------------------------------------------------


class Corpus:
    """An endless seeded stream of conversations, cut to the turns each step asks for."""

    def __init__(self, seed: int, turns_per_conversation: int) -> None:
        self._rng = random.Random(seed)
        self._turns = turns_per_conversation
        self._next = 0

    def take(self, turns: int) -> Iterator[tuple[str, list[LogMessage]]]:
        """Conversations (id, messages) totalling exactly ``turns`` turns."""
        while turns > 0:
            count = min(self._turns, turns)
            messages = synthetic_conversation(self._rng, count)
            yield f"bench-{self._next:06d}", [_log_message(m) for m in messages]
            self._next += 1
            turns -= count


def _log_message(message: dict[str, Any]) -> LogMessage:
    body = {"role": message["role"], "content": message["content"], "name": message["name"]}
    return LogMessage(body, float(message["timestamp"]))


def questions(rng: random.Random, count: int) -> list[Question]:
    """``count`` questions; about ``MISS_SHARE`` of them use no word of the stored text."""
    chosen = []
    for _ in range(count):
        if rng.random() < MISS_SHARE:
            chosen.append(Question(rng.choice(MISS_QUESTIONS), expect_hits=False))
        else:
            slots = slot_values(rng, ())
            chosen.append(Question(rng.choice(MEMORY_QUESTIONS).format(**slots), expect_hits=True))
    return chosen


def grow(store: MemoryStore, corpus: Corpus, turns: int) -> Build:
    """Append ``turns`` new turns, one conversation per call, then form them all."""
    conversations = 0
    began = time.perf_counter()
    with tqdm(total=turns, desc="append", unit="turn", leave=False) as bar:
        for conversation, messages in corpus.take(turns):
            store.append(messages, conversation=conversation, source="ingest")
            conversations += 1
            bar.update(len(messages))
    appended = time.perf_counter()
    with tqdm(total=turns, desc="form", unit="turn", leave=False) as bar:
        while processed := store.form().processed:
            bar.update(processed)
    return Build(turns, conversations, appended - began, time.perf_counter() - appended)


# --- measurement --------------------------------------------------------------------------


def measure(store: MemoryStore, size: int, build: Build, timed: Sequence[Question],
            warmup: Sequence[Question], settings: Settings) -> Step:
    """Time recall over ``timed`` (after ``warmup``), then search alone, then memory."""
    label = f"query {size:,}"
    with tqdm(total=len(warmup) + 2 * len(timed), desc=label, unit="q", leave=False) as bar:
        for q in warmup:
            store.recall(q.text, limit=settings.limit, budget_tokens=settings.budget_tokens)
            bar.update()
        recall_ms, hits, tokens, misses_with_hits = [], [], [], 0
        for q in timed:
            began = time.perf_counter()
            found = store.recall(q.text, limit=settings.limit,
                                 budget_tokens=settings.budget_tokens)
            recall_ms.append((time.perf_counter() - began) * 1000)
            hits.append(len(found.hits))
            tokens.append(found.context.tokens)
            misses_with_hits += bool(found.hits) and not q.expect_hits
            bar.update()
        search_ms = [search_once(store, q.text, settings.limit, bar) for q in timed]
    stats = store.stats()
    if stats.queued or stats.failed:
        raise BenchError(f"formation left {stats.queued} queued and {stats.failed} failed rows")
    return Step(size, stats.fragments, build, recall_ms, search_ms, hits, tokens,
                misses_with_hits, memory_now(store.path))


def search_once(store: MemoryStore, text: str, limit: int, bar: tqdm) -> float:
    """Milliseconds of the search alone (the store's reader, as ``recall`` uses it): the
    question read from ``text`` (its terms, as ``recall`` reads them) and the BM25 lookup."""
    began = time.perf_counter()
    search(store._reader, store.question(text), limit=limit)
    elapsed = (time.perf_counter() - began) * 1000
    bar.update()
    return elapsed


def memory_now(db: Path) -> Memory:
    status = proc_status()
    wal = db.with_name(db.name + "-wal")
    return Memory(rss=status.get("VmRSS", 0), peak_rss=status.get("VmHWM", 0),
                  db=db.stat().st_size, wal=wal.stat().st_size if wal.exists() else 0)




@dataclass(frozen=True)
class Report:
    """Everything measured, ready for the table and the JSON file."""

    settings: Settings
    machine: dict[str, Any]
    baseline: Memory
    no_match: int
    steps: list[Step]
    seconds: float


def benchmark(workdir: Path, settings: Settings) -> Report:
    """Grow one store through every size and measure it at each."""
    began = time.perf_counter()
    rng = random.Random(settings.seed + 1)
    warmup, timed = questions(rng, settings.warmup), questions(rng, settings.queries)
    corpus = Corpus(settings.seed, settings.turns_per_conversation)
    store = MemoryStore(workdir / "bench.sqlite")
    try:
        baseline = memory_now(store.path)
        info = machine(store)
        print(machine_line(info), flush=True)
        steps: list[Step] = []
        for size in settings.sizes:
            build = grow(store, corpus, size - (steps[-1].size if steps else 0))
            steps.append(measure(store, size, build, timed, warmup, settings))
            print(step_line(steps[-1]), flush=True)
    finally:
        store.close()
    no_match = sum(1 for q in timed if not q.expect_hits)
    return Report(settings, info, baseline, no_match, steps, time.perf_counter() - began)


# --- report -------------------------------------------------------------------------------


def machine(store: MemoryStore) -> dict[str, Any]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"cores": os.cpu_count(), "usable_cores": usable, "platform": platform.platform(),
            "python": platform.python_version(), **sqlite_versions(),
            "token_counter": store.counter.name}


def machine_line(info: dict[str, Any]) -> str:
    return (f"machine: {info['cores']} cores ({info['usable_cores']} usable), "
            f"{info['platform']}, Python {info['python']}, SQLite {info['sqlite']}, "
            f"tokens {info['token_counter']}")


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else math.nan


def megabytes(value: int) -> str:
    return f"{value / MB:.1f}"


def step_line(step: Step) -> str:
    b = step.build
    return (f"{step.size:,} fragments: +{b.turns:,} turns in {b.seconds:.1f} s "
            f"(append {b.append_s:.1f} s, form {b.form_s:.1f} s); recall p50 "
            f"{format_ms(percentile(step.recall_ms, 50))} ms; RSS {megabytes(step.memory.rss)} MB")


def table(steps: Sequence[Step]) -> str:
    headers = ("fragments", "db MB", "build s", "turns/s", "recall p50", "p95", "p99",
               "search p50", "hits avg", "tokens avg", "RSS MB", "peak MB")
    rows = [(
        f"{s.fragments:,}", megabytes(s.memory.db + s.memory.wal), f"{s.build.seconds:.1f}",
        f"{s.build.turns_per_s:,.0f}", format_ms(percentile(s.recall_ms, 50)),
        format_ms(percentile(s.recall_ms, 95)), format_ms(percentile(s.recall_ms, 99)),
        format_ms(percentile(s.search_ms, 50)), f"{mean(s.hits):.1f}", f"{mean(s.tokens):.0f}",
        megabytes(s.memory.rss), megabytes(s.memory.peak_rss),
    ) for s in steps]
    return render_table(headers, rows)


def growth_line(steps: Sequence[Step]) -> str:
    first, last = steps[0], steps[-1]

    def ratio(pick: str) -> str:
        low = percentile(getattr(first, pick), 50)
        return f"x{percentile(getattr(last, pick), 50) / low:.1f}" if low > 0 else "-"

    return (f"growth from {first.fragments:,} to {last.fragments:,} fragments "
            f"(x{last.fragments / max(first.fragments, 1):,.0f} data): recall p50 "
            f"{ratio('recall_ms')}, search p50 {ratio('search_ms')}, RSS "
            f"+{megabytes(last.memory.rss - first.memory.rss)} MB")


def print_report(report: Report) -> None:
    s = report.settings
    print(f"\n{s.queries} questions per size after {s.warmup} warm-up ones (the same at every "
          f"size); recall = search + reconstruction (limit {s.limit}, budget {s.budget_tokens} "
          f"tokens); build = the step's new turns only; times in ms\n")
    print(table(report.steps))
    print()
    print(growth_line(report.steps))
    empty = ", ".join(str(sum(1 for h in step.hits if not h)) for step in report.steps)
    misses = sum(step.misses_with_hits for step in report.steps)
    print(f"questions without hits per size: {empty} (of {s.queries}; {report.no_match} are "
          f"no-match questions, which found something {misses} times in all)")
    print(f"RSS before the first step (store open, tokenizer loaded): "
          f"{megabytes(report.baseline.rss)} MB")
    print(f"total time {report.seconds:.0f} s")


def summary_stats(values: Sequence[float]) -> dict[str, float]:
    return {"n": len(values), "p50": percentile(values, 50), "p95": percentile(values, 95),
            "p99": percentile(values, 99), "mean": mean(values),
            "min": min(values, default=math.nan), "max": max(values, default=math.nan)}


def to_json(report: Report) -> dict[str, Any]:
    steps = [{
        "size": s.size, "fragments": s.fragments, "build": {
            **dataclasses.asdict(s.build), "seconds": s.build.seconds,
            "turns_per_s": s.build.turns_per_s},
        "recall_ms": summary_stats(s.recall_ms), "search_ms": summary_stats(s.search_ms),
        "hits_mean": mean(s.hits), "tokens_mean": mean(s.tokens),
        "questions_without_hits": sum(1 for h in s.hits if not h),
        "misses_with_hits": s.misses_with_hits, "memory_bytes": dataclasses.asdict(s.memory),
        "samples_ms": {"recall": [round(v, 4) for v in s.recall_ms],
                       "search": [round(v, 4) for v in s.search_ms]},
    } for s in report.steps]
    return {"settings": dataclasses.asdict(report.settings), "machine": report.machine,
            "baseline_memory_bytes": dataclasses.asdict(report.baseline),
            "no_match_questions": report.no_match,
            "seconds": report.seconds, "steps": steps}


# --- command line -------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Retrieval latency and memory as a store grows.")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: sizes 500,2000, 50 questions, 10 warm-up")
    parser.add_argument("--sizes", help="fragment counts, ascending, comma-separated "
                        "(default: 1000,10000,100000)")
    parser.add_argument("--queries", type=int, help="timed questions per size (default: 200)")
    parser.add_argument("--warmup", type=int, help="warm-up questions per size (default: 20)")
    parser.add_argument("--turns-per-conversation", type=int, default=20,
                        help="turns per synthetic conversation (default: 20)")
    parser.add_argument("--limit", type=int, default=8, help="fragments per recall (default: 8)")
    parser.add_argument("--budget-tokens", type=int, default=600,
                        help="token budget of the reconstruction (default: 600)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default: 7)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write all figures here")
    return parser.parse_args(argv)


def parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part.replace("_", "")) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise BenchError(f"--sizes must be comma-separated integers, not {text!r}") from exc
    if not sizes or sizes[0] < 1 or any(b <= a for a, b in itertools.pairwise(sizes)):
        raise BenchError("--sizes must be positive and strictly ascending")
    return sizes


def settings_from(args: argparse.Namespace) -> Settings:
    quick = args.quick
    default_sizes = QUICK_SIZES if quick else DEFAULT_SIZES
    settings = Settings(
        sizes=parse_sizes(args.sizes) if args.sizes else default_sizes,
        queries=args.queries if args.queries is not None else (50 if quick else 200),
        warmup=args.warmup if args.warmup is not None else (10 if quick else 20),
        turns_per_conversation=args.turns_per_conversation,
        limit=args.limit, budget_tokens=args.budget_tokens, seed=args.seed,
    )
    if min(settings.queries, settings.turns_per_conversation, settings.limit) < 1:
        raise BenchError("--queries, --turns-per-conversation and --limit must be >= 1")
    if settings.warmup < 0:
        raise BenchError("--warmup must be >= 0")
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    sigterm_as_interrupt()
    args = parse_args(argv)
    try:
        settings = settings_from(args)
        with tempfile.TemporaryDirectory(prefix="areamem-bench-") as tmp:
            report = benchmark(Path(tmp), settings)
    except BenchError as exc:
        print(f"bench_retrieval: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench_retrieval: interrupted; temporary store removed", file=sys.stderr)
        return 130
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(to_json(report), indent=2), encoding="utf-8")
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
