"""Speed and recall of the SimHash shortlist against the exact dense search, on a store.

Reads the vectors of an areamem store (a tenant's ``.db``, e.g. one built by
``scripts/bench_overhead.py --fragments 100000`` with ``--json`` and a kept data folder,
or any proxy's ``data/tenants/<tenant>.db``), encodes questions (a LoCoMo file's with
``--data``, else synthetic ones like the benchmarks'), and for each shortlist size
compares :func:`memory_core.index.nearest.nearest` with the exact search over every vector:
median milliseconds of each, recall@20 and recall@50 of the shortlist against the exact
top, and how much lower the 50th cosine found is than the exact 50th (mean, max).

Usage::

    python scripts/bench_nearest.py --db PATH [--data LOCOMO.json] [--questions 200]
        [--shortlists 1024,2048,4096]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from _common import render_table
from _synthetic import HOBBIES, NAMES, PLACES
from evaluation.locomo import LocomoError, load_locomo

from memory_core import MemoryStore
from memory_core.index import nearest as nearest_module


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="an areamem store (.db)")
    parser.add_argument("--data", type=Path, help="a LoCoMo-format JSON file for questions")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--shortlists", default="1024,2048,4096")
    args = parser.parse_args(argv)
    if not args.db.is_file():
        print(f"bench_nearest: no store at {args.db}", file=sys.stderr)
        return 2
    try:
        questions = _questions(args.data, args.questions)
    except LocomoError as exc:
        print(f"bench_nearest: {exc}", file=sys.stderr)
        return 2
    store = MemoryStore(args.db)
    try:
        memory = store.warm_graph()
        vectors, stored = memory.vectors, memory.vector_codes
        encoder = store._get_backends().encoder
        queries = [encoder.encode_question(q)[0] for q in questions]
    finally:
        store.close()
    print(
        f"{vectors.shape[0]:,} vectors, {len(queries)} questions; first pass: the "
        f"{nearest_module.FIRST_PASS:,} nearest by {nearest_module.PREFIX_WORDS * 64}-bit prefix"
    )
    rows = []
    for size in (int(s) for s in args.shortlists.split(",")):
        rows.append(_row(vectors, stored, queries, size))
    print(
        render_table(
            [
                "shortlist",
                "exact ms p50",
                "shortlist ms p50",
                "recall@20",
                "recall@50",
                "50th cos gap mean",
                "max",
            ],
            rows,
        )
    )
    return 0


def _questions(data: Path | None, count: int) -> list[str]:
    if data is not None:
        pool = [q.question for c in load_locomo(data) for q in c.questions]
        return random.Random(7).sample(pool, min(count, len(pool)))
    rng = random.Random(7)
    return [
        f"Do you remember what {rng.choice(NAMES)} told me about {rng.choice(HOBBIES)} in "
        f"{rng.choice(PLACES)}?"
        for _ in range(count)
    ]


def _row(
    vectors: np.ndarray, stored: np.ndarray, queries: list[np.ndarray], size: int
) -> list[str]:
    nearest_module.SHORTLIST = size
    nearest_module.EXACT_ROWS = 0  # always the shortlist, whatever the store's size
    first = nearest_module.prefixes(stored)
    exact_ms, fast_ms, at20, at50, gaps = [], [], [], [], []
    for query in queries:
        began = time.perf_counter()
        sims = vectors @ query
        top = np.argpartition(-sims, 49)[:50]
        top = top[np.argsort(-sims[top], kind="stable")]
        exact_ms.append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        rows, found = nearest_module.nearest(vectors, stored, first, query, 50)
        fast_ms.append((time.perf_counter() - began) * 1000)
        at20.append(len(set(rows[:20].tolist()) & set(top[:20].tolist())) / 20)
        at50.append(len(set(rows.tolist()) & set(top.tolist())) / 50)
        gaps.append(float(sims[top[-1]] - found[-1]))
    return [
        f"{size:,}",
        f"{statistics.median(exact_ms):.2f}",
        f"{statistics.median(fast_ms):.2f}",
        f"{statistics.mean(at20):.4f}",
        f"{statistics.mean(at50):.4f}",
        f"{statistics.mean(gaps):.5f}",
        f"{max(gaps):.5f}",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
