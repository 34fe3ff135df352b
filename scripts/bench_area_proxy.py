"""End-to-end retrieval latency in the proxy over a replayed LoCoMo conversation.

What it measures: a LoCoMo conversation is replayed into a fresh proxy through
``scripts/replay.py --ingest`` (the user's tool, session by session, formation
included); then each of its questions is sent as a chat request (``X-Memory: force``,
a new conversation each, ingestion on, so every answer is stored, formed and appended to
the graph while the next questions arrive, as in live use) to the proxy in front of the
fake upstream, and also straight to the upstream, alternately. Figures per retrieval
method, both measured in the same run (``--retrieval area,bm25``):

- ``retrieval`` p50/p95: the proxy's own ``retrieval_ms`` stage from its request log:
  executor hop, query encoding (area), foci, pulse, area selection, fragment fetch and
  reconstruction: everything between the decision and the forward;
- ``added`` p50/p95: client wall time through the proxy minus straight to the upstream;
- fragments and tokens injected per request, and the graph versions the queries read
  (they grow while the run ingests).

Target (issue 5): retrieval p50 <= 25 ms including query encoding. For reference, mem0
reports 148 ms p50 search, Zep 87-513 ms.

Usage (from the project root, with the project's virtual environment)::

    python scripts/bench_area_proxy.py --data ../shared/data/locomo/locomo_dev5.json
    python scripts/bench_area_proxy.py --data FILE --conversation 2 --questions 100 --json out.json

Everything runs on 127.0.0.1 in a temporary folder removed at the end; the child
processes are stopped on exit, error and Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from _common import format_ms, percentile, render_table, sigterm_as_interrupt
from bench_overhead import ROOT, BenchError, LocalStack
from evaluation.locomo import LocomoError, load_locomo
from tqdm import tqdm

MODEL = "bench-echo"
TARGET_MS = 25.0
TIMEOUT_S = 60.0


@dataclass
class Run:
    """One retrieval method's figures."""

    method: str
    replay_s: float = 0.0
    retrieval_ms: list[float] = field(default_factory=list)
    added_ms: list[float] = field(default_factory=list)
    fragments: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    errors: int = 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    sigterm_as_interrupt()
    try:
        conversation = load_locomo(args.data)[args.conversation]
    except (LocomoError, IndexError) as exc:
        print(f"bench_area_proxy: {exc}", file=sys.stderr)
        return 2
    questions = [q.question for q in conversation.questions if q.evidence][: args.questions]
    runs = []
    try:
        for method in args.retrieval:
            runs.append(_measure(method, args, questions))
    except BenchError as exc:
        print(f"bench_area_proxy: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench_area_proxy: interrupted", file=sys.stderr)
        return 130
    print(f"{args.data} conversation {conversation.sample_id}: "
          f"{len(conversation.turns)} turns replayed, {len(questions)} questions per method")
    print(_table(runs))
    area = next((r for r in runs if r.method == "area"), None)
    if area and area.retrieval_ms:
        p50 = statistics.median(area.retrieval_ms)
        verdict = "holds" if p50 <= TARGET_MS else "MISSED"
        print(f"target: area retrieval p50 <= {TARGET_MS:g} ms including query encoding: "
              f"{p50:.2f} ms ({verdict})")
    if args.json:
        args.json.write_text(json.dumps(_report(args, conversation.sample_id, runs), indent=2))
        print(f"figures written to {args.json}")
    return 0


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file")
    parser.add_argument("--conversation", type=int, default=0, help="which conversation (0)")
    parser.add_argument("--questions", type=int, default=10_000, help="at most this many")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured requests first (5)")
    parser.add_argument("--retrieval", default="area,bm25", help="methods, comma-separated")
    parser.add_argument("--formation-workers", type=int, default=1,
                        help="memory.formation_workers of the proxy (default 1, as shipped)")
    parser.add_argument("--pause-ms", type=float, default=0.0,
                        help="pause between questions, as a user reading the answer (0)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the figures here")
    args = parser.parse_args(argv)
    args.retrieval = [m.strip() for m in args.retrieval.split(",") if m.strip()]
    if not args.retrieval or set(args.retrieval) - {"area", "bm25"}:
        parser.error("--retrieval takes area and/or bm25")
    return args


def _measure(method: str, args: argparse.Namespace, questions: list[str]) -> Run:
    run = Run(method)
    with tempfile.TemporaryDirectory(prefix="areamem-bench-") as tmp, LocalStack(
        Path(tmp), retrieval=method, formation_workers=args.formation_workers
    ) as stack:
        began = time.perf_counter()
        _replay(stack, args)
        run.replay_s = time.perf_counter() - began
        asyncio.run(_ask(stack, questions, args.warmup, args.pause_ms / 1000, run))
        time.sleep(1.0)  # the last log lines are written after the answer, with ingestion
        _read_log(stack.data_dir / "logs" / "proxy.jsonl", run)
        if not run.retrieval_ms:
            raise BenchError(f"no chat lines in the proxy log:\n{stack.services[-1].tail()}")
    return run


def _replay(stack: LocalStack, args: argparse.Namespace) -> None:
    """Store the conversation through the user's replay script (formation included)."""
    command = [sys.executable, str(ROOT / "scripts" / "replay.py"), str(args.data),
               "--proxy", stack.proxy_url, "--ingest", "--conversations", str(args.conversation)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise BenchError(f"replay failed ({done.returncode}): {done.stderr[-2000:]}")


async def _ask(
    stack: LocalStack, questions: list[str], warmup: int, pause_s: float, run: Run
) -> None:
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as proxy, aiohttp.ClientSession(
        timeout=timeout
    ) as direct:
        for i, text in enumerate(tqdm(warmup * questions[:1] + questions, desc=run.method,
                                      unit="q", leave=False)):
            body = {"model": MODEL, "messages": [{"role": "user", "content": text}]}
            headers = {"X-Memory": "force", "X-Conversation-Id": f"bench-{uuid.uuid4().hex}"}
            through = await _post(proxy, f"{stack.proxy_url}/v1/chat/completions", body, headers)
            straight = await _post(direct, f"{stack.upstream_url}/v1/chat/completions", body, {})
            if through is None or straight is None:
                run.errors += 1
            elif i >= warmup:
                run.added_ms.append(through - straight)
            await asyncio.sleep(pause_s)


async def _post(session: aiohttp.ClientSession, url: str, body: dict[str, Any],
                headers: dict[str, str]) -> float | None:
    began = time.perf_counter()
    async with session.post(url, json=body, headers=headers) as response:
        await response.read()
        return (time.perf_counter() - began) * 1000 if response.status == 200 else None


def _read_log(path: Path, run: Run) -> None:
    """The proxy's own stage timings, for the measured (non-warm-up) chat requests."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    chats = [r for r in lines if r.get("event") == "chat" and r.get("decision")]
    for record in chats[len(chats) - len(run.added_ms):]:
        if record.get("memory_error"):
            run.errors += 1
        run.retrieval_ms.append(float(record["stages_ms"].get("retrieval_ms", 0.0)))
        run.fragments.append(int(record.get("fragments_injected", 0)))
        run.tokens.append(int(record.get("memory_tokens", 0)))
        if record.get("graph_version") is not None:
            run.versions.append(int(record["graph_version"]))


def _table(runs: Sequence[Run]) -> str:
    headers = ["retrieval", "requests", "retrieval p50", "retrieval p95", "added p50",
               "added p95", "fragments", "tokens", "graph versions", "errors", "replay s"]
    rows = []
    for r in runs:
        versions = f"{min(r.versions)}-{max(r.versions)}" if r.versions else "-"
        rows.append([
            r.method, str(len(r.retrieval_ms)),
            format_ms(statistics.median(r.retrieval_ms)), format_ms(percentile(r.retrieval_ms, 95)),
            format_ms(statistics.median(r.added_ms)), format_ms(percentile(r.added_ms, 95)),
            f"{statistics.fmean(r.fragments):.1f}", f"{statistics.fmean(r.tokens):.0f}",
            versions, str(r.errors), f"{r.replay_s:.1f}",
        ])
    return render_table(headers, rows)


def _report(args: argparse.Namespace, sample_id: str, runs: Sequence[Run]) -> dict[str, Any]:
    return {
        "data": str(args.data),
        "conversation": sample_id,
        "target_ms": TARGET_MS,
        "methods": {
            r.method: {
                "requests": len(r.retrieval_ms),
                "retrieval_ms": {"p50": statistics.median(r.retrieval_ms),
                                 "p95": percentile(r.retrieval_ms, 95)},
                "added_ms": {"p50": statistics.median(r.added_ms),
                             "p95": percentile(r.added_ms, 95)},
                "fragments_mean": statistics.fmean(r.fragments),
                "tokens_mean": statistics.fmean(r.tokens),
                "graph_versions": [min(r.versions), max(r.versions)] if r.versions else None,
                "errors": r.errors,
                "replay_s": r.replay_s,
            }
            for r in runs
        },
    }


if __name__ == "__main__":
    sys.exit(main())
