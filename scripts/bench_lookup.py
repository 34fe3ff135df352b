"""The memory lookup per question, in process: what the proxy's reader thread runs.

What it measures: every question of a LoCoMo file asked of one store holding all of its
conversations (each replayed session by session through ``MemoryStore.append`` and
formation, as ``/memory/ingest`` does), through ``MemoryStore.retrieve`` with the area
strategy, the policy's default budget (8 fragments, 600 tokens) and no excluded turns:
what :class:`proxy.chat.turn.MemoryTurn` runs on a reader thread for a request with
memory on (foci, pulse, area, scoring, the fragment fetch, the evidence and the block).
The question's vector comes from a cache filled by a first untimed pass (the encoder
wrapped, nothing else changed): encoding is the model's time, the same before and after
any change to retrieval, and on a shared machine its noise would drown the lookup's.

``--baseline-path DIR`` also measures another checkout (a ``git worktree`` of an earlier
commit) in the same run: each code runs in a child process of its own (``PYTHONPATH`` set
to its checkout, its own store built by its own formation), and within each round (every
question once, in an order of its own) the two take turns every ``--chunk`` questions, the
first of a turn alternating, so drift on a shared machine falls on both. A question's
figure is its median over the rounds; the table shows the median and p90 over questions of
the wall time, of the process's CPU time (steadier than wall time on a busy machine), and
of its split into the area lookup (``timings_ms.total_ms`` of the receipt: encoding wait,
foci, pulse, area, ranking) and the rest (the question read, fragment fetch, evidence, the
block), each code's ratio to the baseline, and the p50 of each stage the receipt times.

``--asked end`` asks each question when its conversation's last session ends (its time
words resolve against that day, as ``scripts/eval_locomo.py`` does); ``now`` (the
default) asks it now, as the proxy does. A baseline without time words ignores it.

``--dump FILE`` writes, per question, the hits (fragment ids in order) and the block the
current code returned (JSON lines), ``--dump-baseline FILE`` the baseline's: two dumps of
the same store compare a change's output question by question (``--compare A B``; a
baseline of the same formation can be given the current code's store with
``--baseline-store``).

Usage (from the project root, with the project's virtual environment)::

    python scripts/bench_lookup.py --data ../shared/data/locomo/locomo_dev5.json \\
        --store-dir /tmp/lookup-stores --baseline-path /tmp/wt-before --rounds 5
    python scripts/bench_lookup.py --data FILE --store-dir DIR --dump out.jsonl
    python scripts/bench_lookup.py --compare before.jsonl after.jsonl
    python scripts/bench_lookup.py --data FILE --store-dir DIR --cprofile 30

``--store-dir`` keeps each code's store (``current.db``, ``baseline.db``) for later runs;
it is reused as it is: remove it when formation has changed. Without it the stores are
built in a temporary folder removed at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import json
import math
import os
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from evaluation.locomo import Conversation, as_message, load_locomo

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 8
BUDGET_TOKENS = 600
"""The policy's defaults (``policies.policy``): what a request with memory on asks for."""


@dataclasses.dataclass(frozen=True)
class Asked:
    """One question and when it is asked (None: now)."""

    text: str
    asked_at: float | None


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    if args.compare:
        return _compare(*args.compare)
    if args.child:
        return _child(args)
    with tempfile.TemporaryDirectory(prefix="areamem-lookup-") as tmp:
        folder = Path(args.store_dir) if args.store_dir else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        codes = {"current": ROOT}
        if args.baseline_path:
            codes["baseline"] = Path(args.baseline_path).resolve()
        children: dict[str, _Child] = {}
        try:
            for name, path in codes.items():  # one at a time: a store may be built first
                store = "current" if args.baseline_store == "current" else name
                children[name] = _Child(name, path, folder / f"{store}.db", args)
                children[name].ready()
            figures = _rounds(children, args.rounds, args.chunk)
        finally:
            for child in children.values():
                child.close()
    _print(figures, args)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="a LoCoMo-format JSON file")
    parser.add_argument("--encoder", choices=("minilm", "e5"), default="e5")
    parser.add_argument("--store-dir", help="keep (and reuse) each code's store here")
    parser.add_argument("--baseline-path", help="another checkout, measured in the same run")
    parser.add_argument(
        "--baseline-store",
        choices=("own", "current"),
        default="own",
        help="the baseline's store: its own (built by its formation) or the current code's",
    )
    parser.add_argument("--rounds", type=int, default=5, help="timed passes over the questions")
    parser.add_argument("--chunk", type=int, default=10, help="questions per turn of a code")
    parser.add_argument("--asked", choices=("now", "end"), default="now")
    parser.add_argument("--dump", help="write the current code's hits and blocks here")
    parser.add_argument("--dump-baseline", help="write the baseline's hits and blocks here")
    parser.add_argument("--cprofile", type=int, default=0, help="print the N costliest calls")
    parser.add_argument("--json", help="write the figures to this JSON file")
    parser.add_argument("--compare", nargs=2, help="compare two --dump files and exit")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.compare and args.data is None:
        parser.error("--data is required")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


class _Child:
    """A child process measuring one checkout's code, driven over its stdin/stdout."""

    def __init__(self, name: str, code: Path, store: Path, args: argparse.Namespace) -> None:
        command = [
            sys.executable, __file__, "--child", "--data", str(args.data), "--store", str(store),
            "--encoder", args.encoder, "--asked", args.asked, "--cprofile", str(args.cprofile),
        ]  # fmt: skip
        dump = args.dump if name == "current" else args.dump_baseline
        if dump:
            command += ["--dump", dump]
        env = dict(os.environ, PYTHONPATH=str(code))
        self.name = name
        self.laps: dict[str, list[float]] = {}
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
        )

    def ready(self) -> None:
        self.questions = int(self._read()["questions"])

    def time(self, questions: list[int]) -> list[list[float]]:
        """The figures (:data:`_PARTS`) of these questions' lookups, one after the other;
        their stage timings are added to :attr:`laps`."""
        self._send({"time": questions})
        reply = self._read()
        for laps in reply["laps"]:
            for stage, ms in laps.items():
                self.laps.setdefault(stage, []).append(float(ms))
        figures: list[list[float]] = reply["figures"]
        return figures

    def close(self) -> None:
        if self._process.poll() is None:
            self._send({"quit": True})
            self._process.wait(timeout=60)

    def _send(self, message: dict[str, Any]) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        stdin.write(json.dumps(message) + "\n")
        stdin.flush()

    def _read(self) -> dict[str, Any]:
        stdout = self._process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            raise SystemExit(f"bench_lookup: the {self.name} child ended (see its stderr)")
        reply: dict[str, Any] = json.loads(line)
        return reply


def _rounds(children: dict[str, _Child], rounds: int, chunk: int) -> dict[str, Any]:
    """Each child's per-question figures over ``rounds`` passes, the questions in a new
    order each pass and the children taking turns every ``chunk`` questions (the first of
    a turn alternating), so a slower moment of a shared machine falls on both."""
    n = next(iter(children.values())).questions
    times: dict[str, list[list[list[float]]]] = {name: [] for name in children}
    names = list(children)
    for r in range(rounds):
        order = list(range(n))
        random.Random(r).shuffle(order)
        got: dict[str, list[list[float]]] = {name: [[]] * n for name in names}
        for c, start in enumerate(range(0, n, chunk)):
            part = order[start : start + chunk]
            for name in names if (c + r) % 2 == 0 else names[::-1]:
                for i, figures in zip(part, children[name].time(part), strict=True):
                    got[name][i] = figures
        for name in names:
            times[name].append(got[name])
            wall = statistics.median(f[0] for f in got[name])
            print(f"round {r + 1}/{rounds} {name}: median {wall:.2f} ms", file=sys.stderr,
                  flush=True)  # fmt: skip
    out = {name: _summary(per_round) for name, per_round in times.items()}
    for name, child in children.items():
        out[name]["stages_p50"] = {
            stage: round(statistics.median(ms), 3) for stage, ms in sorted(child.laps.items())
        }
    return out


_PARTS = ("total", "cpu", "area", "rest")
"""Per lookup: wall ms, the process's CPU ms, the area lookup's ms, the rest's ms."""


def _summary(per_round: list[list[list[float]]]) -> dict[str, Any]:
    """Per question the median over rounds of each of :data:`_PARTS`; then median and p90
    over questions."""
    n = len(per_round[0])
    medians = [
        [statistics.median(r[q][part] for r in per_round) for part in range(len(_PARTS))]
        for q in range(n)
    ]
    out: dict[str, Any] = {"questions": n, "rounds": len(per_round)}
    for part, label in enumerate(_PARTS):
        values = sorted(m[part] for m in medians)
        out[label] = {"p50": _pct(values, 50), "p90": _pct(values, 90)}
    return out


def _pct(ordered: Sequence[float], q: float) -> float:
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return round(ordered[low] + (ordered[high] - ordered[low]) * (rank - low), 3)


def _print(figures: dict[str, Any], args: argparse.Namespace) -> None:
    base = figures.get("baseline")
    header = ["code", "questions", "p50 ms", "p90 ms", "cpu p50", "cpu p90", "area p50",
              "rest p50", "rest p90"]  # fmt: skip
    if base:
        header += ["p50 ratio", "p90 ratio", "cpu p50 ratio"]
    rows = []
    for name, f in figures.items():
        row = [name, str(f["questions"])]
        row += [f"{f[part][q]:.2f}" for part, q in _SHOWN]
        if base:
            row += [
                f"{f['total']['p50'] / base['total']['p50']:.3f}",
                f"{f['total']['p90'] / base['total']['p90']:.3f}",
                f"{f['cpu']['p50'] / base['cpu']['p50']:.3f}",
            ]
        rows.append(row)
    print(f"\n{args.data}: area lookups, encoder {args.encoder}, asked {args.asked}, "
          f"{args.rounds} rounds (per question: median over rounds)")  # fmt: skip
    print(_table(header, rows))
    stages = sorted({s for f in figures.values() for s in f["stages_p50"]} - _NOT_STAGES)
    print("\nstages of the area lookup, p50 ms over every lookup (the receipt's timings_ms):")
    print(_table(["code", *(s.removesuffix("_ms") for s in stages)],
                 [[name, *(f"{f['stages_p50'].get(s, math.nan):.3f}" for s in stages)]
                  for name, f in figures.items()]))  # fmt: skip
    print("ms: wall time; cpu: the process's CPU time (all its threads) over the lookup;"
          " area: the receipt's timings_ms.total_ms (encoding wait, foci, pulse, area, ranking);"
          " rest: the fragment fetch, the evidence and the block")  # fmt: skip


_NOT_STAGES = {"encode_ms", "encode_lead_ms"}
"""Receipt timings that are no stage of the lookup (the encoding runs beside it)."""
_SHOWN = (("total", "p50"), ("total", "p90"), ("cpu", "p50"), ("cpu", "p90"), ("area", "p50"),
          ("rest", "p50"), ("rest", "p90"))  # fmt: skip


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for line in [header, ["-" * w for w in widths], *rows]:
        cells = enumerate(zip(line, widths, strict=True))
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in cells))
    return "\n".join(lines)


def _compare(first: str, second: str) -> int:
    """Compare two dumps question by question; 0 when every hit list and block match."""
    a = [json.loads(line) for line in Path(first).read_text().splitlines()]
    b = [json.loads(line) for line in Path(second).read_text().splitlines()]
    if len(a) != len(b):
        print(f"{first}: {len(a)} questions, {second}: {len(b)}")
        return 1
    hits = sum(x["hits"] != y["hits"] for x, y in zip(a, b, strict=True))
    texts = sum(x["text"] != y["text"] for x, y in zip(a, b, strict=True))
    for x, y in zip(a, b, strict=True):
        if x["hits"] != y["hits"] or x["text"] != y["text"]:
            print(f"first difference: {x['question']!r}")
            print(f"--- {first}\n{x['text']}\n--- {second}\n{y['text']}")
            break
    print(f"{len(a)} questions: {hits} differ in their hits, {texts} in their block")
    return 1 if hits or texts else 0


# --- the child: one checkout's code --------------------------------------------------------


def _child(args: argparse.Namespace) -> int:
    from memory_core.blas import limit_blas_threads

    limit_blas_threads()
    conversations = load_locomo(args.data)
    store = _open(Path(args.store), conversations, args.encoder)
    asked = _questions(conversations, args.asked, _takes_asked_at(store))
    for question in asked:  # fills the vector cache; the first lookups read the graph
        _lookup(store, question)
    if args.dump:
        _dump(store, asked, Path(args.dump))
    if args.cprofile:
        _profile(store, asked, args.cprofile)
    _reply(sys.stdout, {"questions": len(asked)})
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("quit"):
            break
        timed = [_timed(store, asked[i]) for i in message["time"]]
        _reply(sys.stdout, {"figures": [f for f, _ in timed], "laps": [laps for _, laps in timed]})
    store.close()
    return 0


def _reply(out: IO[str], message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


class _CachedEncoder:
    """The store's encoder with each question's vector kept (the lookups then time
    retrieval, not the model); everything else is the encoder's own."""

    def __init__(self, encoder: Any) -> None:
        self._encoder = encoder
        self._vectors: dict[str, Any] = {}

    def encode_question(self, text: str) -> Any:
        if text not in self._vectors:
            self._vectors[text] = self._encoder.encode_question(text)
        return self._vectors[text]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)


def _open(path: Path, conversations: Sequence[Conversation], encoder: str) -> Any:
    """The store at ``path`` with its encoder's question vectors cached; built first (every
    conversation replayed, formed) when missing."""
    from memory_core import FormationConfig, LogMessage, MemoryStore
    from memory_core.formation import build_backends
    from memory_core.formation.config import EncoderConfig

    formation = FormationConfig(encoder=EncoderConfig.model_validate({"model": encoder}))
    built = path.with_suffix(".built")
    if not built.exists():
        path.unlink(missing_ok=True)
        began = time.perf_counter()
        store = MemoryStore(path, formation=formation)
        for conv in conversations:
            history: list[Any] = []
            for session in conv.sessions():
                history.extend(
                    LogMessage(as_message(conv, t), t.ts.timestamp(), t.dia_id) for t in session
                )
                store.append(history, conversation=conv.sample_id, source="ingest")
                store.form_all()
        store.close()
        built.write_text(f"{time.perf_counter() - began:.1f} s\n")
        print(f"built {path} in {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    backends = build_backends(formation)
    cached = dataclasses.replace(backends, encoder=_CachedEncoder(backends.encoder))
    return MemoryStore(path, formation=formation, backends=cached)


def _takes_asked_at(store: Any) -> bool:
    import inspect

    return "asked_at" in inspect.signature(store.retrieve).parameters


def _questions(conversations: Sequence[Conversation], asked: str, dated: bool) -> list[Asked]:
    out = []
    for conv in conversations:
        end = max(t.ts for t in conv.turns).timestamp() if conv.turns else None
        at = end if asked == "end" and dated else None
        out += [Asked(q.question, at) for q in conv.questions]
    return out


def _lookup(store: Any, question: Asked) -> Any:
    extra = {"asked_at": question.asked_at} if question.asked_at is not None else {}
    return store.retrieve(
        "area", question.text, limit=LIMIT, budget_tokens=BUDGET_TOKENS, **extra
    )


def _timed(store: Any, question: Asked) -> tuple[list[float], dict[str, float]]:
    """:data:`_PARTS` of one lookup, and the receipt's stage timings."""
    cpu = time.process_time()
    began = time.perf_counter()
    recall = _lookup(store, question)
    total = (time.perf_counter() - began) * 1000
    cpu = (time.process_time() - cpu) * 1000
    laps = dict((recall.area or {}).get("timings_ms") or {})
    area = float(laps.get("total_ms", 0.0))
    return [total, cpu, area, total - area], laps


def _dump(store: Any, asked: Sequence[Asked], path: Path) -> None:
    with path.open("w", encoding="utf-8") as out:
        for question in asked:
            recall = _lookup(store, question)
            hits = [h.fragment_id for h in recall.hits]
            row = {"question": question.text, "hits": hits, "text": recall.context.text}
            out.write(json.dumps(row) + "\n")


def _profile(store: Any, asked: Sequence[Asked], top: int) -> None:
    profile = cProfile.Profile()
    profile.enable()
    for question in asked:
        _lookup(store, question)
    profile.disable()
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text).sort_stats("cumulative")
    stats.print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    print(text.getvalue(), file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
