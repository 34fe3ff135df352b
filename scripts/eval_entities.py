"""Entity quality on LoCoMo: how many entities formation makes, how many are common words,
and what type they get.

Lexical NER sees capitals, and a capital also opens every sentence: "Here", "Perfect",
"Becoming" become entities, and each fires the trigger policy's ``mentions_entity``
rule. This script replays each conversation of a LoCoMo-format file into a store of its
own (as ``eval_locomo.py`` does, offline defaults) and counts, per conversation and over
all:

* ``entities``: the entities stored (speakers included);
* ``common words``: single-word entities whose name the same conversation also writes in
  lower case at least twice ("here", "perfect": a word of the language, not a name);
  their mentions beside;
* the entities by type (``PER``, ``LOC``, ``ORG``, ``MISC``).

It reads the stores through their public views, so it measures whatever code it runs with: run it on
another checkout (``PYTHONPATH=<checkout>``) for a before/after.

Usage::

    python scripts/eval_entities.py --data ../shared/data/locomo/locomo_dev5.json \\
        [--conversations all] [--examples 20]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

from _common import locomo_conversations, render_table, replay_locomo, store_file
from evaluation.locomo import Conversation, LocomoError

WORD = re.compile(r"[^\W\d_]+")
LABELS = ("PER", "LOC", "ORG", "MISC")
ALL = 1_000_000
"""More entities than any conversation makes: every one is listed."""


def _lower_counts(conv: Conversation) -> Counter[str]:
    """How often each word is written in lower case in ``conv``."""
    return Counter(w for t in conv.turns for w in WORD.findall(t.text) if w.islower())


def measure(conv: Conversation, folder: Path) -> tuple[Counter[str], list[str]]:
    """The counts of one conversation and its common-word entities (``name (mentions)``)."""
    store = replay_locomo(conv, store_file(folder, conv.sample_id))
    try:
        rows = [(e.name, e.label, e.mentions) for e in store.entities(limit=ALL)]
    finally:
        store.close()
    lower = _lower_counts(conv)
    counts: Counter[str] = Counter(entities=len(rows))
    common: list[str] = []
    for name, label, mentions in rows:
        counts[label] += 1
        if len(name.split()) == 1 and lower[name.lower()] >= 2:
            counts["common words"] += 1
            counts["their mentions"] += mentions
            common.append(f"{name} ({mentions})")
    return counts, common


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    parser.add_argument("--conversations", default="all", help="indices, e.g. 0-4 or 0,2")
    parser.add_argument("--examples", type=int, default=20, help="common-word entities listed")
    args = parser.parse_args(argv)
    try:
        conversations = locomo_conversations(args.data, args.conversations)
    except (OSError, LocomoError, ValueError) as exc:
        print(f"eval_entities: {exc}", file=sys.stderr)
        return 2
    headers = ["conversation", "entities", "common words", "their mentions", *LABELS]
    rows: list[list[str]] = []
    total: Counter[str] = Counter()
    examples: list[str] = []
    with tempfile.TemporaryDirectory(prefix="areamem-entities-") as folder:
        for conv in conversations:
            counts, common = measure(conv, Path(folder))
            total.update(counts)
            examples.extend(common)
            rows.append([conv.sample_id, *(str(counts[h]) for h in headers[1:])])
    rows.append(["all", *(str(total[h]) for h in headers[1:])])
    print(render_table(headers, rows))
    shown = ", ".join(examples[: args.examples]) or "none"
    print(f"common-word entities: {shown}")
    print(
        "common words: single-word entities the same conversation also writes in lower "
        "case at least twice"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
