"""Formation stage timings on hostile messages (is every stage linear in its input?).

For each kind of hostile message and each size, a child process forms one such message
with the offline backends (MiniLM, lexical NER, pattern relations) into a fresh store
that already holds two ordinary turns of the same conversation, and reports the seconds
each stage took as it finishes. A child that runs past ``--timeout`` is killed; the stage
it was in is shown as ``>T``. Printed: one row per message with the seconds per stage
(``ner+rel`` is NER plus relation extraction, ``mvec`` the mention vectors), the total,
and the outcome: whether the message was formed (a message of blanks forms nothing) or
given up, and the mentions and relations in the store (the two ordinary turns account for
3 of each).

``--code DIR`` imports ``memory_core`` from another checkout, so the same table can be
made for an earlier version (e.g. ``git archive HEAD | tar -x -C /tmp/old``).

Usage::

    python scripts/bench_formation_bounds.py [--sizes 20000,160000,2000000]
        [--kinds repeat,names,...] [--timeout 60] [--code DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = ("normalise", "embed", "segment", "ner+rel", "mvec", "write")
_COLUMN = {
    "normalisation": "normalise",
    "embedding": "embed",
    "segmentation": "segment",
    "ner_relations": "ner+rel",
    "ner": "ner+rel",
    "relations": "ner+rel",
    "mention_vectors": "mvec",
    "write": "write",
}


def _cycle(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _distinct_names(size: int) -> str:
    """Thousands of distinct capitalised words, each its own name."""
    rng = random.Random(7)
    words: list[str] = []
    total = 0
    while total < size:
        word = rng.choice(string.ascii_uppercase) + "".join(
            rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 9))
        )
        words.append(word)
        total += len(word) + 2
    return "We met " + ", ".join(words)[:size]


KINDS: dict[str, Callable[[int], str]] = {
    "repeat": lambda n: _cycle("Ana went to Lisbon. ", n),
    "chat": lambda n: _cycle(
        "Yesterday Melanie and I visited the Museum of Modern Art in New York. ", n
    ),
    "names": _distinct_names,
    "word": lambda n: "see " + _cycle("Ab", n),
    "caps": lambda n: "A" * n,
    "hyphens": lambda n: _cycle("A-", n),
    "newlines": lambda n: "\n" * n,
    "unicode": lambda n: _cycle("Zoë 🎉 visited Łódź with «Ünïcødé» and 東京 🚀 ", n),
    "quotes": lambda n: _cycle('«»"“”', n),
    "quote_open": lambda n: _cycle("«“", n),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20000,160000,2000000", help="characters")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per message")
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout to import from")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child[0], int(args.child[1]), args.timeout)
    kinds = args.kinds.split(",")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        print(f"bench_formation_bounds: unknown kinds {unknown}", file=sys.stderr)
        return 2
    rows = [
        _measure(kind, int(size), args.timeout, args.code)
        for size in args.sizes.split(",")
        for kind in kinds
    ]
    _print(rows, args.code, args.timeout)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


def _measure(kind: str, size: int, timeout: float, code: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(code), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    command = [sys.executable, __file__, "--child", kind, str(size), "--timeout", str(timeout)]
    row: dict[str, Any] = {"kind": kind, "size": size, "stages": {}, "outcome": "timeout"}
    child = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    out = child.stdout
    if child.returncode not in (0, -signal.SIGALRM):
        row["outcome"] = f"exit {child.returncode}: {child.stderr.strip()[-200:]}"
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        if "stage" in event:
            column = _COLUMN.get(event["stage"], event["stage"])
            row["stages"][column] = row["stages"].get(column, 0.0) + event["seconds"]
        elif "outcome" in event:
            row["outcome"] = event["outcome"]
    print(f"{kind} {size}: {row['outcome']}", file=sys.stderr, flush=True)
    return row


def _child(kind: str, size: int, timeout: float) -> int:
    """Form one hostile message; prints one JSON line per finished stage, then the outcome.

    The formation is stopped by SIGALRM after ``timeout`` seconds: with no handler the
    kernel ends the process even inside a long regular-expression match.
    """
    from memory_core import MemoryStore
    from memory_core.formation import FormationConfig, Former, build_backends
    from memory_core.storage import connect
    from memory_core.storage.tables.stats import row_counts

    backends = build_backends(FormationConfig())
    backends.encoder.encode(["warm up the encoder"] * 4)
    with tempfile.TemporaryDirectory(prefix="areamem-bounds-") as tmp:
        path = Path(tmp) / "m.db"
        store = MemoryStore(path, backends=backends)
        ordinary = ["I live in Porto with my sister Ana.", "Nice, how is Porto in spring?"]
        store.append(_turns(ordinary), conversation="c")
        store.form_all()
        store.append(_turns([*ordinary, KINDS[kind](size)]), conversation="c")
        store.close()
        conn = connect(path)
        former = Former(conn, backends, FormationConfig())
        former.timings = _Reporting()
        began = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, timeout)
        while (result := former.run()).processed or result.failed:
            pass
        counts = row_counts(conn, ("fragments", "mentions", "relations", "queue"))
        conn.close()
    outcome = (
        f"{counts['fragments'] - 2} formed, {counts['queue']} given up;"
        f" {counts['mentions']} mentions, {counts['relations']} relations"
        f" in {time.perf_counter() - began:.1f} s"
    )
    print(json.dumps({"outcome": outcome}), flush=True)
    return 0


def _turns(texts: Sequence[str]) -> list[Any]:
    from memory_core import LogMessage

    return [
        LogMessage({"role": "user", "content": t}, 1_700_000_000 + i) for i, t in enumerate(texts)
    ]


class _Reporting(dict[str, float]):
    """Stage timings that print each stage's seconds as the stage ends."""

    def __setitem__(self, stage: str, total: float) -> None:
        seconds = total - self.get(stage, 0.0)
        super().__setitem__(stage, total)
        print(json.dumps({"stage": stage, "seconds": seconds}), flush=True)


def _print(rows: list[dict[str, Any]], code: Path, timeout: float) -> None:
    print(f"code: {code}   timeout per message: {timeout:g} s   seconds per stage")
    header = ("kind", "chars", *COLUMNS, "total", "outcome")
    table = [header]
    for row in rows:
        stages = row["stages"]
        cells = [_cell(stages, c) for c in COLUMNS]
        if row["outcome"] == "timeout":
            running = next((i for i, c in enumerate(COLUMNS) if c not in stages), None)
            if running is not None:
                cells[running] = f">{timeout:g}"
        total = f"{sum(stages.values()):.2f}" if row["outcome"] != "timeout" else f">{timeout:g}"
        table.append((row["kind"], str(row["size"]), *cells, total, row["outcome"]))
    widths = [max(len(r[i]) for r in table) for i in range(len(header) - 1)]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])


def _cell(stages: dict[str, float], column: str) -> str:
    return f"{stages[column]:.2f}" if column in stages else "-"


if __name__ == "__main__":
    sys.exit(main())
