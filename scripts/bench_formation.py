"""Formation throughput with the offline defaults, on replayed LoCoMo conversations.

Each conversation is replayed into a fresh store through the real ingestion path, one
session at a time (``MemoryStore.append`` of the history so far, then formation of the
queued turns), exactly as ``/memory/ingest`` or the proxy after an answer would. Printed:
turns, seconds spent appending and forming, formation turns/s, the time per formation
stage, and what was formed (segments, contexts, entities, relations, mutations). The
MiniLM model is loaded and warmed before timing starts. Replay "keeps up" when formation
runs at least as fast as turns arrive; a LoCoMo session arrives as a block, so the figure
that matters is turns formed per second.

Usage::

    python scripts/bench_formation.py --data ../shared/data/locomo/locomo_dev5.json \\
        [--conversations 0-4] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import select_indices, store_file
from evaluation.locomo import Conversation, LocomoError, as_message, load_locomo
from tqdm import tqdm

from memory_core import LogMessage, MemoryStore
from memory_core.formation import FormationConfig, build_backends
from memory_core.storage.tables.stats import row_counts

TARGET_TURNS_PER_S = 100.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    parser.add_argument("--conversations", default="all", help="indices, e.g. 0-4 or 0,2 (all)")
    parser.add_argument("--json", help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    try:
        samples = load_locomo(args.data)
        conversations = [samples[i] for i in select_indices(args.conversations, len(samples))]
    except (LocomoError, ValueError) as exc:
        print(f"bench_formation: {exc}", file=sys.stderr)
        return 2
    backends = build_backends(FormationConfig())
    backends.encoder.encode(["warm up the encoder"] * 8)
    rows = []
    with tempfile.TemporaryDirectory(prefix="areamem-formation-") as tmp:
        for conv in conversations:
            store = MemoryStore(store_file(Path(tmp), conv.sample_id), backends=backends)
            rows.append(_replay(conv, store))
            store.close()
    _print(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"data": str(args.data), "conversations": rows},
                                              indent=2))
        print(f"figures written to {args.json}")
    return 0


def _replay(conv: Conversation, store: MemoryStore) -> dict[str, Any]:
    history: list[LogMessage] = []
    append_s = form_s = 0.0
    for session in tqdm(conv.sessions(), desc=conv.sample_id, unit="session", leave=False):
        history.extend(
            LogMessage(as_message(conv, turn), turn.ts.timestamp(), turn.dia_id)
            for turn in session
        )
        began = time.perf_counter()
        store.append(history, conversation=conv.sample_id, source="ingest")
        appended = time.perf_counter()
        store.form_all()
        append_s += appended - began
        form_s += time.perf_counter() - appended
    counts = row_counts(store._reader, ("fragments", "segments", "contexts", "entities",
                                        "relations", "mutations", "formation_failures"))
    return {"conversation": conv.sample_id, "turns": len(conv.turns),
            "append_s": round(append_s, 3), "form_s": round(form_s, 3),
            "turns_per_s": round(len(conv.turns) / form_s, 1),
            "stages_s": {k: round(v, 3) for k, v in store.formation_timings().items()},
            "formed": counts}


def _print(rows: list[dict[str, Any]]) -> None:
    header = ["conversation", "turns", "append s", "form s", "turns/s", "segments", "contexts",
              "entities", "relations", "failures"]
    table = [[r["conversation"], str(r["turns"]), f"{r['append_s']:.2f}", f"{r['form_s']:.2f}",
              f"{r['turns_per_s']:.0f}", str(r["formed"]["segments"]),
              str(r["formed"]["contexts"]), str(r["formed"]["entities"]),
              str(r["formed"]["relations"]), str(r["formed"]["formation_failures"])] for r in rows]
    turns = sum(r["turns"] for r in rows)
    seconds = sum(r["form_s"] for r in rows)
    table.append(["all", str(turns), f"{sum(r['append_s'] for r in rows):.2f}", f"{seconds:.2f}",
                  f"{turns / seconds:.0f}", "", "", "", "", ""])
    widths = [max(len(line[i]) for line in [header, *table]) for i in range(len(header))]
    for line in [header, ["-" * w for w in widths], *table]:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(line, widths, strict=True))))
    stages: dict[str, float] = {}
    for r in rows:
        for stage, value in r["stages_s"].items():
            stages[stage] = stages.get(stage, 0.0) + value
    total = sum(stages.values()) or 1.0
    print("time per stage: " + ", ".join(f"{k} {v:.2f} s ({100 * v / total:.0f}%)"
                                         for k, v in stages.items()))
    rate = turns / seconds
    median = statistics.median(r["turns_per_s"] for r in rows)
    verdict = "met" if rate >= TARGET_TURNS_PER_S else "NOT met"
    print(f"formation throughput {rate:.0f} turns/s overall (median per conversation "
          f"{median:.0f}); target >= {TARGET_TURNS_PER_S:.0f} turns/s: {verdict}")


if __name__ == "__main__":
    raise SystemExit(main())
