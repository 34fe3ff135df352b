"""Check that the memory block is faithful to the stored memory, question by question.

Replays each LoCoMo conversation into its own store (as ``eval_locomo.py`` does), asks
every question with area retrieval at k fragments, and checks the injected block
against the database it came from:

* **citations**: every ``[n]`` of a statement names a fragment line of the block, and the
  receipt's citation table maps that number to a stored, live fragment;
* **statements**: every statement renders stored relations (re-read from SQLite and
  rendered again by the predicate table, they give the same text), cites exactly their
  source fragments, and its kind agrees with their records: a change's current side
  replaced its other side (a mutation of kind ``change``), a conflict's sides are all
  disputed, of one subject and predicate;
* **fragments**: every fragment line is a stored fragment's speaker and text, or pieces
  of the text (sentence selection keeps sentences and marks each gap with ``…``).

Prints the share of questions whose block passes each check (each must be 100%), the
share with a coverage note and with the note as the whole block, mean tokens at k, the
statements per block by kind, and the first failures. Exit status 1 if any check fails.

    python scripts/check_faithfulness.py --data ../shared/data/locomo/locomo_dev5.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _common import (
    locomo_conversations,
    output_file,
    render_table,
    replay_locomo,
    store_file,
)
from evaluation.locomo import Conversation, LocomoError
from tqdm import tqdm

from memory_core import MemoryStore
from memory_core.reconstruction.inert import inert, label
from memory_core.reconstruction.predicates import phrase
from memory_core.reconstruction.render import Reconstruction
from memory_core.retrieval.bm25 import fetch_hits
from memory_core.storage.tables.evidence import RelationRow, relations_by_id

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

_CITATION = re.compile(r"\[(\d+(?:, \d+)*)\]")
_LINE = re.compile(r"\[(\d+)\] (.*?)(?: \(corrected by \[\d+\](?:, \[\d+\])*\))?")
_STATEMENTS = "Statements extracted from the fragments below:"
_NOTE = "Memory holds nothing about: "
CHECKS = ("citations", "statements", "fragments")


@dataclass
class Tally:
    """What the checks found over all questions."""

    questions: int = 0
    passed: Counter[str] = field(default_factory=Counter)
    noted: int = 0
    note_only: int = 0
    tokens: list[int] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)
    with_statements: int = 0
    failures: list[str] = field(default_factory=list)
    render_ms: list[float] = field(default_factory=list)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    try:
        conversations = locomo_conversations(args.data, args.conversations)
    except (LocomoError, ValueError) as exc:
        print(f"check_faithfulness: {exc}", file=sys.stderr)
        return 2
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="areamem-faithful-") as tmp:
        for conv in conversations:
            store = replay_locomo(conv, store_file(Path(tmp), conv.sample_id))
            try:
                _ask(store, conv, args.k, args.budget, tally)
            finally:
                store.close()
    _report(tally, args)
    if args.json:
        Path(args.json).write_text(json.dumps(_figures(tally, args), indent=2))
    return 0 if all(tally.passed[c] == tally.questions for c in CHECKS) else 1


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file")
    parser.add_argument("--conversations", default="all", help="indices, e.g. 0-4 or 0,2 (all)")
    parser.add_argument("--k", type=int, default=10, help="fragments retrieved per question")
    parser.add_argument("--budget", type=int, default=1_000_000, help="token budget of a block")
    parser.add_argument("--json", type=output_file, help="write the figures to this JSON file")
    parser.add_argument("--show", type=int, default=5, help="failures printed (default 5)")
    args = parser.parse_args(argv)
    if args.k < 1 or args.budget < 1:
        parser.error("--k and --budget must be positive")
    return args


def _ask(store: MemoryStore, conv: Conversation, k: int, budget: int, tally: Tally) -> None:
    questions = [q for q in conv.questions if q.evidence]
    for question in tqdm(questions, desc=f"check {conv.sample_id}", leave=False):
        began = time.perf_counter()
        recall = store.recall_area(question.question, limit=k, budget_tokens=budget)
        tally.render_ms.append((time.perf_counter() - began) * 1000)
        block = recall.context
        tally.questions += 1
        tally.tokens.append(block.tokens)
        tally.noted += _NOTE in block.text
        tally.note_only += bool(block.text) and not block.shown
        tally.kinds.update(s.kind for s in block.statements)
        tally.with_statements += bool(block.statements)
        for check, problem in _checks(store, block).items():
            if problem is None:
                tally.passed[check] += 1
            else:
                tally.failures.append(f"{conv.sample_id} {question.question!r}: {check}: {problem}")


def _checks(store: MemoryStore, block: Reconstruction) -> dict[str, str | None]:
    lines = _fragment_lines(block.text)
    citations = dict(block.citations)
    rows = _fragments(store, list(citations.values()) or list(block.shown))
    return {
        "citations": _check_citations(block, lines, citations, rows),
        "statements": _check_statements(store, block, citations),
        "fragments": _check_fragments(block, lines, citations, rows),
    }


def _fragment_lines(text: str) -> dict[int, str]:
    out = {}
    for line in text.splitlines():
        match = _LINE.fullmatch(line)
        if match:
            out[int(match.group(1))] = match.group(2)
    return out


def _fragments(store: MemoryStore, ids: Sequence[int]) -> dict[int, tuple[str | None, str, str]]:
    """``{id: (speaker, role, text)}`` of the live stored fragments among ``ids``."""
    with store._read_lock:  # a script: the store's own reader, as inspection uses it
        hits = fetch_hits(store._reader, list(ids))
    return {h.fragment_id: (h.speaker, h.role, h.text) for h in hits}


def _check_citations(
    block: Reconstruction,
    lines: dict[int, str],
    citations: dict[int, int],
    rows: dict[int, tuple[str | None, str, str]],
) -> str | None:
    for statement in block.statements:
        for group in _CITATION.findall(statement.text):
            for number in map(int, group.split(", ")):
                if number not in lines:
                    return f"[{number}] of {statement.text!r} names no fragment line"
                if citations.get(number) not in rows:
                    return f"[{number}] maps to no stored live fragment"
    if set(lines) != set(citations):
        return f"fragment lines {sorted(lines)} but citation table {sorted(citations)}"
    return None


def _check_statements(
    store: MemoryStore, block: Reconstruction, citations: dict[int, int]
) -> str | None:
    numbers = {f: n for n, f in citations.items()}
    for statement in block.statements:
        relations = _relations(store, statement.relation_ids)
        if set(relations) != set(statement.relation_ids):
            return f"{statement.text!r}: relations {statement.relation_ids} not all stored"
        rendered = {_render(r) for r in relations.values()}
        claims = _claims(statement.kind, statement.text)
        texts = {re.sub(r" \[[\d, ]+\]$", "", c) for c in claims}
        if not texts <= rendered:
            return f"{statement.text!r} does not render {sorted(rendered)}"
        sources = {r.fragment_id for r in relations.values()}
        if not set(statement.fragment_ids) <= sources:
            return f"{statement.text!r} cites {statement.fragment_ids}, sources {sorted(sources)}"
        cited = {
            citations[int(n)] for g in _CITATION.findall(statement.text) for n in g.split(", ")
        }
        if cited != set(statement.fragment_ids) or not all(f in numbers for f in cited):
            return f"{statement.text!r}: citations {sorted(cited)} != {statement.fragment_ids}"
        ordered = [relations[i] for i in statement.relation_ids]
        problem = _kind_problem(statement.kind, _sides(statement.kind, ordered, statement.text))
        if problem:
            return f"{statement.text!r}: {problem}"
    return None


def _sides(kind: str, relations: list[RelationRow], text: str) -> list[RelationRow]:
    """One relation per side (a side may render several that say the same), in order."""
    if kind != "change":
        return relations
    current = re.sub(r" \[[\d, ]+\]$", "", _claims(kind, text)[0])
    first = next(r for r in relations if _render(r) == current)
    rest = [r for r in relations if _render(r) != current]
    return [first, *rest[:1]]


def _claims(kind: str, text: str) -> list[str]:
    if kind == "change":
        current, _, rest = text.removeprefix("Changed: ").partition("; superseded: ")
        return [current, *rest.split("; ")]
    if kind == "conflict":
        return text.partition(": ")[2].split("; ")
    return [text]


def _relations(store: MemoryStore, ids: Sequence[int]) -> dict[int, RelationRow]:
    with store._read_lock:
        return {r.id: r for r in relations_by_id(store._reader, list(ids))}


def _render(relation: RelationRow) -> str:
    shape = phrase(relation.predicate)
    if shape is None:
        return f"<unreadable predicate {relation.predicate!r}>"
    subject = label(relation.subject, 64) or "someone"
    return shape.render(subject, label(relation.object, 80) or "(empty)")


def _kind_problem(kind: str, relations: list[RelationRow]) -> str | None:
    if kind == "conflict":
        if any(r.status != "disputed" for r in relations):
            return "a side of the conflict is not disputed"
        if len({(r.subject_id, r.predicate) for r in relations}) != 1:
            return "conflict sides of different subjects or predicates"
    if kind == "change":
        current, replaced = relations[0], relations[1]
        if current.status == "superseded" or replaced.status != "superseded":
            return "the current side is superseded, or the replaced one is not"
        if current.kind != "change":
            return "the current side's mutation is not a change"
    return None


def _check_fragments(
    block: Reconstruction,
    lines: dict[int, str],
    citations: dict[int, int],
    rows: dict[int, tuple[str | None, str, str]],
) -> str | None:
    if not lines:  # the fragments alone, unnumbered: as many lines as fragments cited
        return None if len(rows) == len(block.shown) else "a shown fragment is not stored"
    for number, line in lines.items():
        row = rows.get(citations[number])
        if row is None:
            return f"[{number}] is no stored fragment"
        speaker, role, text = row
        name, _, body = line.partition(": ")
        if name not in {label(speaker, 64), label(role, 64), "unknown"}:
            return f"[{number}] speaker {name!r} is not {speaker!r}"
        stored = inert(text)
        for piece in body.replace(" …", "…").split("…"):
            if piece.strip() and piece.strip() not in stored:
                return f"[{number}] {piece.strip()[:60]!r} is not in the stored text"
    return None


def _figures(tally: Tally, args: argparse.Namespace) -> dict[str, object]:
    n = max(tally.questions, 1)
    return {
        "data": str(args.data),
        "k": args.k,
        "budget": args.budget,
        "questions": tally.questions,
        "passed": {c: tally.passed[c] / n for c in CHECKS},
        "coverage_note": tally.noted / n,
        "note_only": tally.note_only / n,
        "with_statements": tally.with_statements / n,
        "statements": dict(tally.kinds),
        "mean_tokens": statistics.fmean(tally.tokens) if tally.tokens else 0.0,
        "lookup_ms_p50": statistics.median(tally.render_ms) if tally.render_ms else 0.0,
    }


def _report(tally: Tally, args: argparse.Namespace) -> None:
    figures = _figures(tally, args)
    passed = figures["passed"]
    assert isinstance(passed, dict)
    rows = [[f"{c} faithful", f"{100 * passed[c]:.1f}%"] for c in CHECKS]
    rows += [
        ["with a coverage note", f"{100 * float(figures['coverage_note']):.1f}%"],  # type: ignore[arg-type]
        ["note is the whole block", f"{100 * float(figures['note_only']):.1f}%"],  # type: ignore[arg-type]
        ["with statements", f"{100 * float(figures['with_statements']):.1f}%"],  # type: ignore[arg-type]
        [
            "statements (fact/change/conflict)",
            "/".join(str(tally.kinds[k]) for k in ("fact", "change", "conflict")),
        ],
        [f"mean tokens at k={args.k}", f"{float(figures['mean_tokens']):.1f}"],  # type: ignore[arg-type]
        ["lookup + render p50 ms", f"{float(figures['lookup_ms_p50']):.2f}"],  # type: ignore[arg-type]
    ]
    print(f"{tally.questions} questions, k={args.k}, budget {args.budget} tokens")
    print(render_table(["check", "share"], rows))
    for failure in tally.failures[: args.show]:
        print("FAIL", failure)


if __name__ == "__main__":
    raise SystemExit(main())
