"""Consolidation cycles on a large store: cycle time, snapshot size and rollback time.

A store of at least ``--relations`` rows in ``relations`` (100,000) is built through the
real ingestion path (``MemoryStore.append`` of 20-turn conversations, then
``form_all``), and its first snapshot taken at once (``MemoryStore.dream``): that first
cycle holds everything built and is reported on its own line. The synthetic chat of
:mod:`_synthetic` forms about one relation every two messages, so the text built here
is denser: each message is a :mod:`_synthetic` template followed by a sentence naming
four of ``NAMES`` and two of ``PLACES``, and every pair of the entities a message names
is a co-occurrence relation (about 20 a message: 100,000 relations take about 5,000
messages, a few minutes of formation on two cores; the exact count is printed).

Then, for each N of ``--cycles`` (10, 100, 1000), on a fresh copy of that store: N
cycles, each after ``--messages-per-cycle`` (20) new messages of
:func:`_synthetic.synthetic_conversation` in four new conversations were appended and
formed, so ``dream()`` consolidates what they formed (its report's ``elapsed_ms``) and
the snapshot holds it (``rows_changed``, ``snapshot_bytes``). After the first cycle,
a rollback of that one cycle is timed, and its undo (a rollback to the snapshot just
before the rollback's own); after the N cycles, a rollback to the state before them and
its undo. The check: each rollback restores the relation count of its target, and each
undo the count before the rollback (the run exits 1 when one fails). The same workload
(same seed, same messages) then runs for ``--small-cycles`` cycles on a small store
(``--small-relations``): a snapshot's size follows the rows it changed, not the size of
the store, so both stores show about the same rows and bytes per cycle.

The memory graph is never read in the cycles (reading it again after a cycle is the
proxy's work, not the cycle's); one full read (``warm_graph``) of the built store is
timed on its own. Each run keeps every snapshot it makes (``keep_snapshots`` at least
N + 8): the default 1,000 would drop the first snapshot of a 1,000-cycle run, whose
chain also holds the one-cycle rollback and its undo.

``--store DIR`` keeps the built store (``DIR/store.db``, with ``DIR/bench_dreamer.json``
naming the settings it was built with) and reuses it on later runs: each run works on
copies, the kept file is never written again. A folder built with other settings is
refused. Progress goes to stderr, the table to stdout; ``--json OUT`` writes every
per-cycle figure (rewritten after each run, so an interrupted run keeps what it did).

Usage::

    python scripts/bench_dreamer.py [--relations 100000] [--cycles 10,100,1000]
        [--messages-per-cycle 20] [--small-relations 2000] [--small-cycles 20]
        [--seed 7] [--store DIR] [--json OUT] [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypedDict

from _common import format_ms, percentile, render_table
from _synthetic import (
    ASSISTANT_TEMPLATES,
    BASE_TS,
    NAMES,
    PLACES,
    USER_TEMPLATES,
    slot_values,
    synthetic_conversation,
)
from tqdm import tqdm

from memory_core import LogMessage, MemoryStore
from memory_core.dream import DreamConfig
from memory_core.formation import Backends, FormationConfig, build_backends
from memory_core.retrieval.kernels import compile_kernels
from memory_core.storage import connect, copy_database
from memory_core.storage.db import open_plain
from memory_core.storage.tables.stats import row_counts

GENERATOR = "dense@1"
"""Names the built text; a kept store made by another version of it is refused."""
BUILD_TURNS = 20
PEOPLE_PER_MESSAGE, PLACES_PER_MESSAGE = 4, 2
CYCLE_CONVERSATIONS = 4
SNAPSHOT_SLACK = 8
MANIFEST, STORE_FILE = "bench_dreamer.json", "store.db"


class Sizes(TypedDict):
    """The sizes a run takes when its option is not given."""

    relations: int
    cycles: str
    small_relations: int
    small_cycles: int
    messages_per_cycle: int


QUICK: Sizes = {"relations": 1000, "cycles": "2,3", "small_relations": 300, "small_cycles": 2,
                "messages_per_cycle": 6}
DEFAULTS: Sizes = {"relations": 100_000, "cycles": "10,100,1000", "small_relations": 2000,
                   "small_cycles": 20, "messages_per_cycle": 20}


class BenchError(Exception):
    """A setting or a kept store the benchmark cannot use (the message says why)."""


@dataclass(frozen=True)
class Settings:
    """What a run does (``--quick`` only changes the defaults)."""

    relations: int
    cycles: tuple[int, ...]
    messages_per_cycle: int
    small_relations: int
    small_cycles: int
    seed: int
    store: str | None
    json: str | None

    def build_key(self) -> dict[str, Any]:
        """What a kept store must have been built with to be reused."""
        return {"relations": self.relations, "seed": self.seed, "generator": GENERATOR,
                "turns_per_conversation": BUILD_TURNS}

    def command(self) -> str:
        words = ["python", "scripts/bench_dreamer.py", "--relations", str(self.relations),
                 "--cycles", ",".join(map(str, self.cycles)),
                 "--messages-per-cycle", str(self.messages_per_cycle),
                 "--small-relations", str(self.small_relations),
                 "--small-cycles", str(self.small_cycles), "--seed", str(self.seed)]
        if self.store:
            words += ["--store", self.store]
        if self.json:
            words += ["--json", self.json]
        return shlex.join(words)


@dataclass(frozen=True)
class Built:
    """How a store was built, and its first snapshot (everything built)."""

    conversations: int
    messages: int
    relations: int
    build_s: float
    first: dict[str, Any]


# --- text ------------------------------------------------------------------------------


def dense_conversation(rng: random.Random, index: int) -> list[LogMessage]:
    """``BUILD_TURNS`` messages, each a template and a sentence naming several people and
    places (every pair of them a co-occurrence relation)."""
    speakers = rng.sample(NAMES, 2)
    start = BASE_TS + index * 3600.0
    messages = []
    for turn in range(BUILD_TURNS):
        user = turn % 2 == 0
        template = rng.choice(USER_TEMPLATES if user else ASSISTANT_TEMPLATES)
        people = rng.sample(NAMES, PEOPLE_PER_MESSAGE)
        places = rng.sample(PLACES, PLACES_PER_MESSAGE)
        crowd = f"Later {', '.join(people[:-2])} and {people[-2]} met {people[-1]} in"
        content = (f"{template.format(**slot_values(rng, speakers))} {crowd}"
                   f" {places[0]}, then drove on to {' and '.join(places[1:])}.")
        body = {"role": "user" if user else "assistant",
                "name": speakers[0] if user else speakers[1], "content": content}
        messages.append(LogMessage(body, start + 60.0 * turn))
    return messages


def cycle_conversations(seed: int, cycle: int, count: int) -> list[list[LogMessage]]:
    """The ``count`` messages ingested before cycle ``cycle`` (the same for every store),
    as :data:`CYCLE_CONVERSATIONS` new conversations."""
    rng = random.Random(f"{seed}:cycle:{cycle}")
    parts = min(CYCLE_CONVERSATIONS, count)
    sizes = [count // parts + (1 if i < count % parts else 0) for i in range(parts)]
    return [[LogMessage(m, m["timestamp"]) for m in synthetic_conversation(rng, size)]
            for size in sizes]


# --- the store on disk ------------------------------------------------------------------


def relation_count(path: Path) -> int:
    """Rows in ``relations`` of the file at ``path`` (read-only, as it is)."""
    conn = open_plain(path)
    try:
        return row_counts(conn, ("relations",))["relations"]
    finally:
        conn.close()


def copy_store(source: Path, dest: Path) -> None:
    """A consistent copy of the store file ``source`` at ``dest`` (source read-only)."""
    conn = connect(source, readonly=True)
    try:
        copy_database(conn, dest)
    finally:
        conn.close()


def open_store(path: Path, backends: Backends, dream: DreamConfig) -> MemoryStore:
    return MemoryStore(path, backends=backends, dream=dream)


def build(path: Path, backends: Backends, dream: DreamConfig, target: int,
          seed: int) -> Built:
    """At least ``target`` relations at ``path``, then the first snapshot."""
    rng, began = random.Random(seed), time.perf_counter()
    store = open_store(path, backends, dream)
    conversations = messages = relations = 0
    per_message = 0.0
    bar = tqdm(total=target, desc=f"build {target:,} relations", unit="rel", file=sys.stderr)
    while relations < target:
        wanted = (target - relations) / per_message if per_message else BUILD_TURNS
        chunk = max(1, min(10, round(wanted / BUILD_TURNS)))
        for _ in range(chunk):
            store.append(dense_conversation(rng, conversations),
                         conversation=f"built-{conversations}", source="ingest")
            conversations += 1
        messages += chunk * BUILD_TURNS
        store.form_all()
        counted = relation_count(path)
        bar.update(min(target, counted) - min(target, relations))
        relations = counted
        per_message = relations / messages
    bar.close()
    build_s = time.perf_counter() - began
    first = timed_dream(store, path)
    store.close()
    return Built(conversations, messages, relations, round(build_s, 3), first)


def kept_manifest(folder: Path, settings: Settings) -> Built | None:
    """How the store kept in ``folder`` was built; None when the folder is new or empty
    (it is built there). Checked before anything is loaded or built."""
    manifest = folder / MANIFEST
    if folder.exists() and not folder.is_dir():
        raise BenchError(f"--store {folder} is not a folder")
    if not manifest.is_file():
        if folder.exists() and any(folder.iterdir()):
            raise BenchError(f"{folder} is not empty and holds no {MANIFEST} (an interrupted"
                             " build?): remove it or name another folder")
        return None
    try:
        saved = json.loads(manifest.read_text(encoding="utf-8"))
        key, built = saved["key"], Built(**saved["built"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BenchError(f"{manifest} is unreadable ({exc}); remove {folder}") from exc
    if key != settings.build_key():
        raise BenchError(f"{folder} holds a store built with {key}, not "
                         f"{settings.build_key()}: name another folder or remove it")
    if not (folder / STORE_FILE).is_file():
        raise BenchError(f"{folder} has {MANIFEST} but no {STORE_FILE}: remove {folder}")
    return built


def build_kept(folder: Path, settings: Settings, backends: Backends,
               dream: DreamConfig) -> Built:
    """Build the big store in ``folder`` and write its manifest last (a folder without
    one is an interrupted build)."""
    folder.mkdir(parents=True, exist_ok=True)
    print(f"building into {folder}, kept for later runs", file=sys.stderr)
    built = build(folder / STORE_FILE, backends, dream, settings.relations, settings.seed)
    (folder / MANIFEST).write_text(
        json.dumps({"key": settings.build_key(), "built": asdict(built)}, indent=2),
        encoding="utf-8")
    return built


def graph_read_ms(base: Path, work: Path, backends: Backends, dream: DreamConfig) -> float:
    """One full read of the memory graph (``warm_graph``) on a copy of ``base`` (the
    retrieval kernels compiled first, as the proxy does when it starts)."""
    compile_kernels()
    copy_store(base, work)
    store = open_store(work, backends, dream)
    try:
        began = time.perf_counter()
        store.warm_graph()
        return round((time.perf_counter() - began) * 1000, 3)
    finally:
        store.close()
        work.unlink()


# --- cycles and rollbacks ---------------------------------------------------------------


def timed_dream(store: MemoryStore, path: Path) -> dict[str, Any]:
    """One cycle (everything queued already formed): its report's figures and the time
    of each of its steps (``releasing`` ... ``writing``, told by ``on_step``)."""
    marks: list[tuple[str, float]] = []
    began = time.perf_counter()
    report = store.dream(on_step=lambda step: marks.append((step, time.perf_counter())))
    ended = time.perf_counter()
    ends = [at for _, at in marks[1:]] + [ended]
    return {"cycle": report.cycle, "snapshot": report.snapshot,
            "elapsed_ms": report.elapsed_ms, "wall_ms": round((ended - began) * 1000, 3),
            "steps_ms": {step: round((end - at) * 1000, 3)
                         for (step, at), end in zip(marks, ends, strict=True)},
            "rows_changed": report.rows_changed, "snapshot_bytes": report.snapshot_bytes,
            "material": report.material, "decisions": report.totals,
            "relations": relation_count(path)}


def ingest(store: MemoryStore, settings: Settings, cycle: int) -> dict[str, Any]:
    """Append and form the messages of ``cycle``."""
    conversations = cycle_conversations(settings.seed, cycle, settings.messages_per_cycle)
    for number, messages in enumerate(conversations):
        store.append(messages, conversation=f"cycle{cycle}-{number}", source="ingest")
    began = time.perf_counter()
    formed = store.form_all()
    return {"formed": formed, "form_ms": round((time.perf_counter() - began) * 1000, 3)}


def timed_rollback(store: MemoryStore, target: int) -> dict[str, Any]:
    began = time.perf_counter()
    restored = store.rollback(target)
    ms = (time.perf_counter() - began) * 1000
    return {"target": target, "snapshot": restored.snapshot, "ms": round(ms, 3),
            "rows_changed": restored.rows_changed, "held": restored.held}


def rollback_and_undo(store: MemoryStore, path: Path, target: int,
                      at_target: int) -> dict[str, Any]:
    """Roll back to ``target`` (whose relation count is ``at_target``), then undo it."""
    before = relation_count(path)
    rollback = timed_rollback(store, target)
    restored = relation_count(path)
    undo = timed_rollback(store, rollback["snapshot"] - 1)
    after = relation_count(path)
    return {"rollback": rollback, "undo": undo, "relations_before": before,
            "relations_restored": restored, "relations_after_undo": after,
            "check": restored == at_target and after == before}


def run_cycles(label: str, base: Path, work: Path, cycles: int, settings: Settings,
               backends: Backends, dream: DreamConfig) -> dict[str, Any]:
    """``cycles`` cycles on a copy of ``base``, with the rollbacks around them."""
    copy_store(base, work)
    store = open_store(work, backends, dream)
    try:
        start = store.snapshots(limit=1)[0].id
        relations = relation_count(work)
        figures: list[dict[str, Any]] = []
        one: dict[str, Any] = {}
        for cycle in tqdm(range(1, cycles + 1), desc=f"{label} store, {cycles} cycles",
                          unit="cycle", file=sys.stderr):
            ingested = ingest(store, settings, cycle)
            figures.append({**ingested, **timed_dream(store, work)})
            if cycle == 1:
                one = rollback_and_undo(store, work, start, relations)
        whole = rollback_and_undo(store, work, start, relations)
    finally:
        store.close()
        work.unlink(missing_ok=True)
    return {"store": label, "cycles": cycles, "relations_start": relations,
            "relations_end": figures[-1]["relations"], "per_cycle": figures,
            "rollback_one_cycle": one, "rollback_all_cycles": whole,
            "check": bool(one["check"] and whole["check"])}


# --- output -----------------------------------------------------------------------------

HEADERS = ["store", "cycles", "store relations", "after", "rows changed p50",
           "snapshot bytes p50", "snapshot bytes p95", "bytes / row changed", "cycle ms p50",
           "cycle ms p95", "dream() ms p50", "rollback 1 cycle ms", "rollback N ms", "rows",
           "undo N ms", "check"]


def summary(run: dict[str, Any]) -> dict[str, float]:
    cycles = run["per_cycle"]
    rows = [c["rows_changed"] for c in cycles]
    sizes = [c["snapshot_bytes"] for c in cycles]
    return {"rows_changed_p50": percentile(rows, 50), "rows_changed_p95": percentile(rows, 95),
            "snapshot_bytes_p50": percentile(sizes, 50),
            "snapshot_bytes_p95": percentile(sizes, 95),
            "bytes_per_row_changed": sum(sizes) / max(1, sum(rows)),
            "cycle_ms_p50": percentile([c["elapsed_ms"] for c in cycles], 50),
            "cycle_ms_p95": percentile([c["elapsed_ms"] for c in cycles], 95),
            "dream_wall_ms_p50": percentile([c["wall_ms"] for c in cycles], 50),
            "form_ms_p50": percentile([c["form_ms"] for c in cycles], 50)}


def table_row(run: dict[str, Any]) -> list[str]:
    s, whole = run["summary"], run["rollback_all_cycles"]
    return [run["store"], str(run["cycles"]), f"{run['relations_start']:,}",
            f"{run['relations_end']:,}", f"{s['rows_changed_p50']:,.0f}",
            f"{s['snapshot_bytes_p50']:,.0f}", f"{s['snapshot_bytes_p95']:,.0f}",
            f"{s['bytes_per_row_changed']:.0f}", format_ms(s["cycle_ms_p50"]),
            format_ms(s["cycle_ms_p95"]), format_ms(s["dream_wall_ms_p50"]),
            format_ms(run["rollback_one_cycle"]["rollback"]["ms"]),
            format_ms(whole["rollback"]["ms"]), f"{whole['rollback']['rows_changed']:,}",
            format_ms(whole["undo"]["ms"]), "ok" if run["check"] else "FAILED"]


def steps_line(run: dict[str, Any]) -> str:
    """Each step's p50 over the first and the last tenth of ``run``'s cycles."""
    cycles = run["per_cycle"]
    tenth = max(1, len(cycles) // 10)
    first, last = cycles[:tenth], cycles[-tenth:]
    steps = ", ".join(
        f"{step} {format_ms(percentile([c['steps_ms'][step] for c in first], 50))}"
        f" -> {format_ms(percentile([c['steps_ms'][step] for c in last], 50))}"
        for step in cycles[0]["steps_ms"])
    return (f"\ncycle steps of the {run['store']} store's {run['cycles']}-cycle run, ms p50 of"
            f" its first -> last {tenth} cycles: {steps}")


def print_report(report: dict[str, Any], settings: Settings) -> None:
    first, built = report["built"]["first"], report["built"]
    kept = f"; kept in {settings.store}" if settings.store else ""
    print(f"built store: {built['relations']:,} relations from {built['messages']:,} messages"
          f" in {built['conversations']:,} conversations ({built['build_s']:.1f} s to build{kept})")
    print(f"first snapshot (everything built): cycle {format_ms(first['elapsed_ms'])} ms,"
          f" dream() {format_ms(first['wall_ms'])} ms, {first['rows_changed']:,} rows changed,"
          f" {first['snapshot_bytes']:,} bytes")
    print(f"one full graph read (warm_graph) of the built store: "
          f"{format_ms(report['graph_read_ms'])} ms (the proxy's work after a cycle; not"
          " in the cycle times)")
    print(f"each cycle: {settings.messages_per_cycle} new messages in"
          f" {min(CYCLE_CONVERSATIONS, settings.messages_per_cycle)} conversations, formed"
          " before dream(); snapshots kept per run:"
          f" {report['keep_snapshots']}\n")
    print(render_table(HEADERS, [table_row(run) for run in report["runs"]]))
    print(steps_line(max(report["runs"], key=lambda run: (run["store"] == "big",
                                                          run["cycles"]))))
    print(f"\nreproduce: {settings.command()}")


def write_json(report: dict[str, Any], settings: Settings) -> None:
    if settings.json:
        Path(settings.json).write_text(json.dumps(report, indent=2), encoding="utf-8")


# --- main -------------------------------------------------------------------------------


def parse_settings(argv: Sequence[str] | None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--relations", type=int, help="relations of the big store (100000)")
    parser.add_argument("--cycles", help="cycle counts, comma-separated (10,100,1000)")
    parser.add_argument("--messages-per-cycle", type=int, help="messages before a cycle (20)")
    parser.add_argument("--small-relations", type=int, help="relations of the small store (2000)")
    parser.add_argument("--small-cycles", type=int, help="cycles on the small store (20)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--store", help="keep the built store in this folder and reuse it")
    parser.add_argument("--json", help="write every per-cycle figure to this JSON file")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    args = parser.parse_args(argv)
    defaults = QUICK if args.quick else DEFAULTS
    relations: int = defaults["relations"] if args.relations is None else args.relations
    cycles_text: str = defaults["cycles"] if args.cycles is None else args.cycles
    per_cycle: int = (defaults["messages_per_cycle"] if args.messages_per_cycle is None
                      else args.messages_per_cycle)
    small_relations: int = (defaults["small_relations"] if args.small_relations is None
                            else args.small_relations)
    small_cycles: int = (defaults["small_cycles"] if args.small_cycles is None
                         else args.small_cycles)
    try:
        cycles = tuple(int(n) for n in cycles_text.split(","))
    except ValueError:
        parser.error(f"--cycles {cycles_text!r}: expected numbers separated by commas")
    if min(relations, small_relations, small_cycles, per_cycle, *cycles) < 1:
        parser.error("sizes and cycle counts must be at least 1")
    return Settings(relations, cycles, per_cycle, small_relations, small_cycles, args.seed,
                    args.store, args.json)


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_settings(argv)
    keep = max(DreamConfig().keep_snapshots, max(settings.cycles, default=0) + SNAPSHOT_SLACK,
               settings.small_cycles + SNAPSHOT_SLACK)
    dream = DreamConfig(keep_snapshots=keep)
    try:
        kept = kept_manifest(Path(settings.store), settings) if settings.store else None
    except BenchError as exc:
        print(f"bench_dreamer: {exc}", file=sys.stderr)
        return 2
    backends = build_backends(FormationConfig())
    backends.encoder.encode(["warm up the encoder"] * 8)
    with tempfile.TemporaryDirectory(prefix="areamem-dreamer-") as name:
        report = measure(settings, kept, Path(name), backends, dream)
    print_report(report, settings)
    if settings.json:
        print(f"figures written to {settings.json}")
    return 0 if all(run["check"] for run in report["runs"]) else 1


def measure(settings: Settings, kept: Built | None, tmp: Path, backends: Backends,
            dream: DreamConfig) -> dict[str, Any]:
    """Build (or reuse: ``kept``) the big store, build the small one, run every series."""
    if settings.store:
        folder = Path(settings.store)
        if kept is None:
            built = build_kept(folder, settings, backends, dream)
        else:
            print(f"reusing the store kept in {folder} (a copy per run)", file=sys.stderr)
            built = kept
        base = folder / STORE_FILE
    else:
        base = tmp / "big.db"
        built = build(base, backends, dream, settings.relations, settings.seed)
    small_base = tmp / "small.db"
    small = build(small_base, backends, dream, settings.small_relations, settings.seed)
    report: dict[str, Any] = {
        "settings": asdict(settings), "keep_snapshots": dream.keep_snapshots,
        "built": asdict(built), "small_built": asdict(small),
        "graph_read_ms": graph_read_ms(base, tmp / "graph.db", backends, dream), "runs": [],
        "command": settings.command()}
    series = [("small", small_base, settings.small_cycles)]
    series += [("big", base, n) for n in settings.cycles]
    for label, source, cycles in series:
        run = run_cycles(label, source, tmp / "run.db", cycles, settings, backends, dream)
        run["summary"] = summary(run)
        report["runs"].append(run)
        print(f"{label} store, {cycles} cycles: " + ", ".join(
            f"{h} {v}" for h, v in zip(HEADERS[2:], table_row(run)[2:], strict=True)),
            file=sys.stderr)
        write_json(report, settings)
    return report


if __name__ == "__main__":
    raise SystemExit(main())
