"""Memory in real use on LoCoMo: every question asked through the proxy, twice.

The other evaluations ingest a transcript and search it. A user also *asks*: every
question is stored, and so is the answer of a model that read the memory block, and
both compete with what the user told. This evaluation measures what that does.

For each conversation of a LoCoMo-format file, in a tenant of its own (one API key
each), on a real proxy on loopback in front of the fake upstream's ``recall`` model (it
answers from the memory block it is shown, restating the line that shares most words
with the question, as people's models do):

1. the transcript is ingested through ``POST /memory/ingest`` (session by session, each
   turn with its ``dia_id``) and formed;
2. **before**: every question is searched (the tenant's retrieval with the strategy the
   chats use, ``area`` by default, what ``GET /memory/search?strategy=`` answers):
   evidence recall@k of the search-only baseline;
3. **live**: every question is asked as a chat (``POST /v1/chat/completions``), each in
   a conversation of its own, in two rounds; what each chat was shown is read from its
   receipt (the fragments the block shows, in rank order) and scored as recall@k of the
   question's evidence. Each exchange is stored and formed before the next question, as
   in real use;
4. **after**: every question is searched again.

Reported per conversation and over all (categories 1-4, as ``eval_locomo.py``'s "all";
category 5 is asked too, it is part of real use): search R@k before and after, what the
first and second round of chats was shown (R@k), the share of the top k that earlier
questions and answers take (search after, and what the second round was shown), and
what the live turns were formed as (``stated``, ``asked``, ``restated``).

The policy is the default one but with ``max_fragments = k`` and a budget of
``--budget`` tokens (default 4000), so what a chat is shown is what retrieval ranked, not
what a small budget kept: the comparison with search at k is like for like.

Usage::

    python scripts/eval_live.py --data ../shared/data/locomo/locomo_dev5.json \\
        [--conversations all] [--k 10] [--questions N] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from _common import (
    MAX_CUTOFF,
    locomo_conversations,
    no_scorable_question,
    output_file,
    render_table,
)
from evaluation.locomo import Conversation, LocomoError, Question, as_message
from evaluation.retrieval_metrics import recall_at_k
from tqdm import tqdm

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from memory_core.storage.tables import fragments as fragment_rows
from memory_core.storage.tables.fragments import fetch_hits
from proxy import build_services, load_config
from proxy.fake_upstream import FakeUpstream
from proxy.server import ProxyServer
from proxy.services import Services

LIVE = "live-"
"""The conversation ids of the live phase start so: every fragment of such a
conversation is an earlier question or answer."""
HEADLINE = ("1", "2", "3", "4")
"""The categories of the headline figure (category 5, adversarial, left out)."""


@dataclass
class Scores:
    """Per-question figures of one conversation (or of all), by name."""

    recall: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    shares: dict[str, list[float]] = field(default_factory=dict)
    kinds: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def add(self, name: str, category: str, value: float) -> None:
        self.recall.setdefault(name, []).append((category, value))

    def share(self, name: str, value: float) -> None:
        self.shares.setdefault(name, []).append(value)

    def extend(self, other: Scores) -> None:
        for name, values in other.recall.items():
            self.recall.setdefault(name, []).extend(values)
        for name, shares in other.shares.items():
            self.shares.setdefault(name, []).extend(shares)
        self.kinds.update(other.kinds)
        self.seconds += other.seconds

    def mean(self, name: str) -> float:
        values = [v for c, v in self.recall.get(name, ()) if c in HEADLINE]
        return sum(values) / len(values) if values else float("nan")

    def mean_share(self, name: str) -> float:
        values = self.shares.get(name, [])
        return sum(values) / len(values) if values else float("nan")


class Live:
    """The proxy under test and its client: one tenant (API key) per conversation."""

    def __init__(self, services: Services, url: str, http: aiohttp.ClientSession) -> None:
        self.services, self.url, self.http = services, url, http

    async def ingest(self, conv: Conversation, key: str) -> None:
        """The transcript, session by session (each call the whole history so far)."""
        history: list[dict[str, Any]] = []
        for session in conv.sessions():
            history.extend(
                {**as_message(conv, t), "timestamp": t.ts.timestamp(), "id": t.dia_id}
                for t in session
            )
            body = {"conversation_id": conv.sample_id, "messages": history}
            await self._json("POST", "/memory/ingest", key, body)
            await self.services.drain()

    async def search(
        self, question: str, tenant: str, k: int, strategy: str
    ) -> list[dict[str, Any]]:
        """What the tenant's retrieval ranks first for ``question`` (what
        ``GET /memory/search?strategy=`` answers), read in-process so that the same
        script measures a proxy of any version."""
        memory = self.services.tenants.get(tenant)
        found = await memory.recall(
            question, limit=k, budget_tokens=100_000, exclude_hashes=(), strategy=strategy
        )
        return [
            {
                "id": h.fragment_id,
                "ext_id": h.ext_id,
                "conversation_id": h.conversation_id,
                "kind": getattr(h, "kind", "stated"),
            }
            for h in found.hits
        ]

    async def ask(self, question: str, key: str, conversation: str) -> list[dict[str, Any]]:
        """One chat turn; the fragments its block showed, in rank order (empty when
        memory was not consulted)."""
        body = {"model": "recall", "messages": [{"role": "user", "content": question}]}
        headers = {"Authorization": f"Bearer {key}", "X-Conversation-Id": conversation}
        async with self.http.post(
            f"{self.url}/v1/chat/completions", json=body, headers=headers
        ) as response:
            if response.status != 200:
                raise RuntimeError(f"chat: HTTP {response.status}: {await response.text()}")
            receipt_id = response.headers.get("X-Memory-Receipt")
            await response.read()
        await self.services.drain()  # formed before the next question, as in real use
        if receipt_id is None:
            return []
        receipt = await self._json("GET", f"/memory/receipts/{receipt_id}", key)
        # a proxy from before the shown/cited split marked shown fragments "cited", and
        # its receipts did not say a fragment's ext_id
        shown = [f for f in receipt["area"]["fragments"] if f.get("shown", f.get("cited"))]
        if any("ext_id" not in f for f in shown):
            ext = self.ext_ids(_tenant(key[3:]), [int(f["id"]) for f in shown])
            shown = [{**f, "ext_id": ext.get(int(f["id"]))} for f in shown]
        return shown

    def ext_ids(self, tenant: str, fragment_ids: list[int]) -> dict[int, str | None]:
        """The ``dia_id`` each fragment was ingested with, read through the store."""
        store = self.services.tenants.get(tenant).store
        with store.lookup() as conn:
            return {h.fragment_id: h.ext_id for h in fetch_hits(conn, fragment_ids)}

    def kinds(self, tenant: str) -> Counter[str]:
        """What the live turns were formed as (a proxy from before kinds: nothing)."""
        count = getattr(fragment_rows, "kind_counts", None)
        if count is None:
            return Counter()
        with self.services.tenants.get(tenant).store.lookup() as conn:
            return Counter(count(conn, LIVE))

    async def _json(
        self,
        method: str,
        path: str,
        key: str,
        body: Any = None,
        params: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {key}"}
        async with self.http.request(
            method, self.url + path, json=body, params=params, headers=headers
        ) as response:
            if response.status != 200:
                raise RuntimeError(f"{method} {path}: HTTP {response.status}: "
                                   f"{await response.text()}")
            return dict(await response.json())


def ranked(fragments: Sequence[dict[str, Any]]) -> list[str]:
    """Fragments as the ids recall is scored on: a transcript turn's ``dia_id``, anything
    else a placeholder that takes its place in the ranking."""
    return [str(f.get("ext_id") or f"#{f.get('id', f.get('fragment_id'))}") for f in fragments]


def live_share(fragments: Sequence[dict[str, Any]], k: int) -> float:
    """The share of the first ``k`` places that earlier questions and answers take."""
    return sum(_live(f) for f in list(fragments)[:k]) / k


def _live(fragment: dict[str, Any]) -> bool:
    return str(fragment["conversation_id"]).startswith(LIVE)


async def evaluate(
    live: Live, conv: Conversation, key: str, args: argparse.Namespace, bar: tqdm
) -> Scores:
    scores = Scores()
    tenant = _tenant(conv.sample_id)
    began = time.perf_counter()
    questions: list[Question] = [q for q in conv.questions if q.evidence]
    if args.questions:
        questions = questions[: args.questions]
    await live.ingest(conv, key)
    for q in questions:
        hits = await live.search(q.question, tenant, args.k, args.strategy)
        scores.add("search before", str(q.category), recall_at_k(ranked(hits), q.evidence, args.k))
        bar.update()
    for round_ in range(1, args.rounds + 1):
        for i, q in enumerate(questions):
            shown = await live.ask(q.question, key, f"{LIVE}{round_}-{i}")
            value = recall_at_k(ranked(shown), q.evidence, args.k)
            scores.add(f"shown round {round_}", str(q.category), value)
            scores.share(f"Q/A share shown round {round_}", live_share(shown, args.k))
            bar.update()
    for q in questions:
        hits = await live.search(q.question, tenant, args.k, args.strategy)
        scores.add("search after", str(q.category), recall_at_k(ranked(hits), q.evidence, args.k))
        scores.share("Q/A share search after", live_share(hits, args.k))
        for kind in ("asked", "restated"):
            taken = sum(1 for h in hits if h["kind"] == kind and _live(h))
            scores.share(f"{kind} share search after", taken / args.k)
        bar.update()
    scores.seconds = time.perf_counter() - began
    return scores


def config(folder: Path, upstream_url: str, keys: dict[str, str], args: argparse.Namespace) -> Path:
    document = {
        "server": {"host": "127.0.0.1", "port": 0, "data_dir": str(folder / "data")},
        "auth": {"mode": "keys", "keys": keys},
        "upstreams": [{"model": "*", "provider": "openai", "api_base": upstream_url,
                       "timeout_s": 60}],
        "logging": {"stdout": False, "file": False},
        "memory": {"retrieval": args.strategy, "retrieval_timeout_ms": 60_000,
                   "formation_workers": 0, "formation_grace_ms": 0,
                   "max_concurrent_retrievals": 64},
        "policy": {"max_fragments": args.k, "budget_tokens": args.budget},
    }  # fmt: skip
    if args.scoring:
        document["retrieval"] = {"scoring": dict(args.scoring)}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


async def run(conversations: Sequence[Conversation], args: argparse.Namespace) -> dict[str, Any]:
    keys = {f"sk-{c.sample_id}": _tenant(c.sample_id) for c in conversations}
    upstream = await FakeUpstream().start()
    with tempfile.TemporaryDirectory(prefix="areamem-live-") as tmp:
        folder = Path(tmp)
        loaded = load_config(config(folder, upstream.url, keys, args))
        services = build_services(loaded)
        server = ProxyServer(services)
        await server.start("127.0.0.1", 0)
        try:
            while services.state != "ready":
                await asyncio.sleep(0.05)
            per: dict[str, Scores] = {}
            work = sum(
                len([q for q in c.questions if q.evidence][: args.questions or None])
                for c in conversations
            ) * (args.rounds + 2)
            async with aiohttp.ClientSession() as http:
                live = Live(services, f"http://127.0.0.1:{server.port}", http)
                with tqdm(total=work, unit="q", desc="live", file=sys.stderr) as bar:
                    for conv in conversations:
                        per[conv.sample_id] = await evaluate(
                            live, conv, f"sk-{conv.sample_id}", args, bar
                        )
                await services.drain()
                for conv in conversations:
                    per[conv.sample_id].kinds = live.kinds(_tenant(conv.sample_id))
        finally:
            await server.close()
            await upstream.stop()
    return report(per, args)


def _tenant(sample_id: str) -> str:
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in sample_id)[:64] or "t"


COLUMNS = (
    "search before", "search after", "shown round 1", "shown round 2",
)  # fmt: skip
SHARES = ("Q/A share search after", "Q/A share shown round 2")


def report(per: dict[str, Scores], args: argparse.Namespace) -> dict[str, Any]:
    total = Scores()
    for scores in per.values():
        total.extend(scores)
    rows: dict[str, dict[str, Any]] = {}
    for name, scores in [*per.items(), ("all", total)]:
        rows[name] = {
            **{column: round(scores.mean(column), 4) for column in scores.recall},
            **{share: round(scores.mean_share(share), 4) for share in scores.shares},
            "questions": len(scores.recall.get("search before", [])),
            "formed": dict(scores.kinds),
            "seconds": round(scores.seconds, 1),
        }
    return {"data": str(args.data), "k": args.k, "strategy": args.strategy,
            "rounds": args.rounds, "budget_tokens": args.budget,
            "scoring": dict(args.scoring), "conversations": rows}  # fmt: skip


def print_report(figures: dict[str, Any]) -> None:
    k = figures["k"]
    headers = ["conversation", "questions", *(f"{c} R@{k}" for c in COLUMNS),
               "after - before", "round 2 - before", *(f"{s}@{k}" for s in SHARES),
               "live formed (stated/asked/restated)"]  # fmt: skip
    lines = []
    for name, row in figures["conversations"].items():
        formed = row["formed"]
        lines.append([
            name, str(row["questions"]),
            *(f"{row.get(c, float('nan')):.3f}" for c in COLUMNS),
            f"{row['search after'] - row['search before']:+.3f}",
            f"{row.get('shown round 2', float('nan')) - row['search before']:+.3f}",
            *(f"{row.get(s, float('nan')):.3f}" for s in SHARES),
            f"{formed.get('stated', 0)}/{formed.get('asked', 0)}/{formed.get('restated', 0)}",
        ])  # fmt: skip
    print(render_table(headers, lines))
    print(
        f"recall: fraction of a question's evidence turns in the top {k} (categories 1-4); "
        "search: the tenant's retrieval with the chats' strategy; shown: the fragments each "
        f"chat's block showed (its receipt); Q/A share: places of the top {k} taken by "
        "earlier questions and answers of the live phase"
    )


def _setting(text: str) -> tuple[str, float]:
    key, _, value = text.partition("=")
    try:
        return key.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected KEY=NUMBER, got {text!r}") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/locomo/locomo_dev5.json"),
                        help="a LoCoMo-format JSON file")  # fmt: skip
    parser.add_argument("--conversations", default="all", help="indices, e.g. 0-4 or 0,2")
    parser.add_argument("--k", type=int, default=10, help="cut-off (and max_fragments)")
    parser.add_argument("--rounds", type=int, default=2, help="times every question is asked")
    parser.add_argument("--questions", type=int, default=0,
                        help="ask only the first N questions of each conversation (0: all)")
    parser.add_argument("--strategy", default="area", help="memory.retrieval of the chats")
    parser.add_argument("--budget", type=int, default=4000, help="policy budget_tokens")
    parser.add_argument("--json", type=output_file, help="write the figures to this JSON file")
    parser.add_argument("--scoring", action="append", type=_setting, default=[],
                        metavar="KEY=VALUE",
                        help="a retrieval.scoring setting, e.g. asked=0.25 (repeatable)")
    args = parser.parse_args(argv)
    if args.k < 1 or args.rounds < 2 or args.questions < 0 or args.budget < 1:
        parser.error("--k and --budget must be >= 1, --rounds >= 2, --questions >= 0")
    if args.k > MAX_CUTOFF:
        parser.error(f"--k must be at most {MAX_CUTOFF}, got {args.k}")
    try:
        conversations = locomo_conversations(args.data, args.conversations)
    except (LocomoError, ValueError, OSError) as exc:
        print(f"eval_live: {exc}", file=sys.stderr)
        return 2
    unscorable = no_scorable_question("eval_live", args.data, conversations)
    if unscorable is not None:
        print(unscorable, file=sys.stderr)
        return 2
    figures = asyncio.run(run(conversations, args))
    print_report(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
