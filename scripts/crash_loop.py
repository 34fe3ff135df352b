"""Crash loop: kill -9 the areamem proxy at random moments, restart it on the same data
folder, and prove after every restart that nothing answered was lost or doubled.

What runs: the fake upstream (paced: ``--first-token-ms``, ``--tokens-per-s``) and the
proxy as child processes on loopback ports (the stack of ``scripts/load.py``, policy
``always``). Each round drives traffic (``--workers`` chat clients, streamed and not, a
few turns per conversation re-sending the history; one client storing synthetic
transcripts through ``POST /memory/ingest``, alternately with ``?form=background``
(answered once the transcript is logged, formed afterwards) and ``?form=wait`` (formed
before the answer)), then SIGKILLs the proxy at a moment chosen in turn among:

- ``random``: a random delay after the traffic starts;
- ``formation``: a random delay (0-500 ms) after an ingest is sent, mostly while that
  transcript (or the backlog before it) is being formed;
- ``after-answer``: 0-3 ms after a client received a complete chat answer, the window
  in which a proxy that logs the exchange only after answering would lose it.

After each restart: ``PRAGMA integrity_check`` is ``ok`` on every tenant database, and
every exchange the clients saw answered so far (a complete chat answer: its user turn and
the answer; an ingest answered 200: each of its messages) is in the tenant's ``log``
exactly once (read-only, with apsw). A LOST line names each exchange answered but not
stored, with how long before the SIGKILL its answer was complete (a negative figure: it
was read from the socket after the kill; the proxy had sent all of it). After the last
restart, the formation queue must drain (``/memory/stats`` ``queued`` reaches 0).

Usage (from the project root, with the project's virtual environment)::

    python scripts/crash_loop.py --restarts 50
    python scripts/crash_loop.py --restarts 5 --seed 3 --json crash.json

Exit status 1 when an answered exchange is lost or stored twice, a database fails its
integrity check, a request got an HTTP error before a kill, the queue does not drain, or
the proxy does not come back. Everything runs on 127.0.0.1 in a temporary folder that is
removed at the end; the child processes are stopped on exit, error and Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from _common import (
    Turn,
    api_error_message,
    compare_turns,
    integrity_check,
    output_file,
    render_table,
    sigterm_as_interrupt,
    stored_turns,
    tenant_databases,
)
from _synthetic import synthetic_conversation
from bench_overhead import BenchError
from load import Exchange, PacedStack, chat_turn, drain_queue, get_json, user_text, work_folder

MODES = ("random", "formation", "after-answer")
TURNS_PER_CONVERSATION = 3
MAX_CONVERSATIONS = 10_000
MAX_BATCHES = 10_000
REQUEST_TIMEOUT_S = 30.0
MOMENT_TIMEOUT_S = 20.0
WIND_DOWN_S = 5.0
DRAIN_TIMEOUT_S = 180.0
PREFIX = "crash-"


@dataclass(frozen=True)
class Options:
    """What to run."""

    restarts: int
    workers: int
    stream_share: float
    first_token_ms: float
    tokens_per_s: float
    retrieval: str
    seed: int


@dataclass(frozen=True)
class Ingest:
    """One ``POST /memory/ingest`` as the client saw it."""

    conversation: str
    messages: list[dict[str, Any]]
    form: str
    status: int | None
    error: str | None
    done_at: float

    @property
    def answered(self) -> bool:
        return self.status == 200

    def turns(self) -> list[Turn]:
        return [(self.conversation, m["role"], m["content"]) for m in self.messages]


@dataclass
class Traffic:
    """One round's requests, until and just after the kill."""

    round: int
    mode: str
    chats: list[Exchange] = field(default_factory=list)
    ingests: list[Ingest] = field(default_factory=list)
    started: float = 0.0
    killed_at: float = 0.0
    moment_missed: bool = False
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    ingest_sent: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)


# --- traffic ------------------------------------------------------------------------------


async def chat_worker(
    session: aiohttp.ClientSession, traffic: Traffic, number: int, rng: random.Random, share: float
) -> None:
    """Conversations of a few turns until the round stops or a request fails."""
    for index in range(MAX_CONVERSATIONS):
        conversation = f"{PREFIX}r{traffic.round:03d}-w{number}-c{index:03d}"
        history: list[dict[str, Any]] = []
        for turn in range(TURNS_PER_CONVERSATION):
            if traffic.stop.is_set():
                return
            text = user_text(rng, f"{conversation} turn {turn}")
            stream = rng.random() < share
            exchange = await chat_turn(session, conversation, turn, history, text, stream)
            traffic.chats.append(exchange)
            if not exchange.answered:
                return
            traffic.answered.set()
            history += [
                {"role": "user", "content": text},
                {"role": "assistant", "content": exchange.answer},
            ]


async def ingest_worker(
    session: aiohttp.ClientSession, traffic: Traffic, rng: random.Random
) -> None:
    """Synthetic transcripts through ``/memory/ingest`` until the round stops."""
    for index in range(MAX_BATCHES):
        if traffic.stop.is_set():
            return
        conversation = f"{PREFIX}r{traffic.round:03d}-ingest-{index:03d}"
        messages = synthetic_conversation(rng, rng.randint(6, 30))
        form = "background" if index % 2 == 0 else "wait"
        call = await post_ingest(session, traffic, conversation, messages, form)
        traffic.ingests.append(call)
        if not call.answered:
            return
        await asyncio.sleep(rng.uniform(0, 0.3))


async def post_ingest(
    session: aiohttp.ClientSession,
    traffic: Traffic,
    conversation: str,
    messages: list[dict[str, Any]],
    form: str,
) -> Ingest:
    body = json.dumps({"conversation_id": conversation, "messages": messages}).encode()
    path = f"/memory/ingest?form={form}"
    headers = {"Content-Type": "application/json"}
    status: int | None = None
    error: str | None = None
    traffic.ingest_sent.set()
    try:
        async with session.post(path, data=body, headers=headers) as resp:
            status = resp.status
            payload = await resp.read()
        if status != 200:
            error = api_error_message(status, payload)
    except (aiohttp.ClientError, TimeoutError) as exc:
        error = type(exc).__name__
    return Ingest(conversation, messages, form, status, error, time.monotonic())


async def kill_moment(traffic: Traffic, rng: random.Random) -> None:
    """Wait for the round's kill moment (at most ``MOMENT_TIMEOUT_S``)."""
    if traffic.mode == "random":
        await asyncio.sleep(rng.uniform(0.05, 4.0))
        return
    event = traffic.ingest_sent if traffic.mode == "formation" else traffic.answered
    try:
        await asyncio.wait_for(event.wait(), MOMENT_TIMEOUT_S)
    except TimeoutError:
        traffic.moment_missed = True
        return
    if traffic.mode == "formation":
        await asyncio.sleep(rng.uniform(0.0, 0.5))
    else:
        await asyncio.sleep(rng.uniform(0.0, 0.003))


async def drive_and_kill(stack: PacedStack, traffic: Traffic, options: Options) -> None:
    """Run the round's clients, SIGKILL the proxy at the chosen moment, let the clients
    read what was already sent, then stop them."""
    rng = random.Random(options.seed * 7919 + traffic.round)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(stack.proxy_url, timeout=timeout) as session:
        tasks = [
            asyncio.create_task(
                chat_worker(session, traffic, n, random.Random(rng.random()), options.stream_share)
            )
            for n in range(options.workers)
        ]
        tasks.append(
            asyncio.create_task(ingest_worker(session, traffic, random.Random(rng.random())))
        )
        traffic.started = time.monotonic()
        try:
            await kill_moment(traffic, rng)
        finally:
            stack.kill_proxy()
            traffic.killed_at = time.monotonic()
            traffic.stop.set()
            _, pending = await asyncio.wait(tasks, timeout=WIND_DOWN_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


# --- checks -------------------------------------------------------------------------------


@dataclass
class Ledger:
    """Every log row the clients' answered exchanges require, and where each came from."""

    expected: Counter[Turn] = field(default_factory=Counter)
    origin: dict[Turn, str] = field(default_factory=dict)
    round_of: dict[Turn, int] = field(default_factory=dict)

    def add(self, traffic: Traffic) -> None:
        for chat in traffic.chats:
            if chat.answered:
                kind = "stream" if chat.stream else "non-stream"
                what = f"{chat.conversation} chat {kind} turn {chat.turn}"
                self._add(traffic, chat.turns(), what, chat.done_at)
        for call in traffic.ingests:
            if call.answered:
                what = (
                    f"{call.conversation} /memory/ingest?form={call.form} of "
                    f"{len(call.messages)} messages"
                )
                self._add(traffic, call.turns(), what, call.done_at)

    def _add(self, traffic: Traffic, turns: list[Turn], what: str, done_at: float) -> None:
        before = (traffic.killed_at - done_at) * 1000
        where = f"round {traffic.round} ({traffic.mode}): {what}, answered {before:.1f} ms"
        for turn in turns:
            self.expected[turn] += 1
            self.origin[turn] = where + " before SIGKILL"
            self.round_of[turn] = traffic.round


@dataclass
class Check:
    """What one restart found."""

    integrity: dict[str, str]
    lost: list[Turn]
    duplicated: list[Turn]
    queued: int | None

    @property
    def integrity_ok(self) -> bool:
        return all(result == "ok" for result in self.integrity.values())


def check_store(data_dir: Path, ledger: Ledger) -> Check:
    databases = tenant_databases(data_dir)
    integrity = {db.name: integrity_check(db) for db in databases}
    conversations = {turn[0] for turn in ledger.expected}
    stored: Counter[Turn] = Counter()
    for db in databases:
        stored.update(stored_turns(db, conversations))
    lost, duplicated = compare_turns(ledger.expected, stored)
    return Check(integrity, lost, duplicated, None)


async def queued_now(stack: PacedStack) -> int:
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(stack.proxy_url, timeout=timeout) as session:
        return int((await get_json(session, "/memory/stats"))["queued"])


async def final_drain(stack: PacedStack) -> tuple[float | None, int]:
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(stack.proxy_url, timeout=timeout) as session:
        return await drain_queue(session, DRAIN_TIMEOUT_S)


# --- the loop -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    """One kill and restart, as reported."""

    round: int
    mode: str
    killed_after_ms: float
    moment_missed: bool
    chats_answered: int
    ingests_answered: int
    ingested_messages: int
    cut_by_kill: int
    errors: list[str]
    restart_s: float
    queued_after_restart: int | None
    integrity: dict[str, str]
    lost: int
    duplicated: int


def errors_before_kill(traffic: Traffic) -> list[str]:
    """HTTP errors the proxy answered before it was killed (a refused connection or a
    cut stream after the kill is expected)."""
    calls: list[Exchange | Ingest] = [*traffic.chats, *traffic.ingests]
    return [
        f"{c.conversation}: {c.error}"
        for c in calls
        if c.status not in (None, 200) and c.done_at < traffic.killed_at
    ]


async def one_round(stack: PacedStack, options: Options, ledger: Ledger, number: int) -> Round:
    traffic = Traffic(number, MODES[(number - 1) % len(MODES)])
    await drive_and_kill(stack, traffic, options)
    ledger.add(traffic)
    began = time.monotonic()
    stack.start_proxy()
    restart_s = time.monotonic() - began
    queued = await queued_now(stack)
    check = check_store(stack.data_dir, ledger)
    chats = [c for c in traffic.chats if c.answered]
    ingests = [c for c in traffic.ingests if c.answered]
    unanswered: list[Exchange | Ingest] = [
        *[c for c in traffic.chats if not c.answered],
        *[c for c in traffic.ingests if not c.answered],
    ]
    return Round(
        round=number,
        mode=traffic.mode,
        killed_after_ms=(traffic.killed_at - traffic.started) * 1000,
        moment_missed=traffic.moment_missed,
        chats_answered=len(chats),
        ingests_answered=len(ingests),
        ingested_messages=sum(len(c.messages) for c in ingests),
        cut_by_kill=sum(1 for c in unanswered if c.status is None or c.status == 200),
        errors=errors_before_kill(traffic),
        restart_s=restart_s,
        queued_after_restart=queued,
        integrity=check.integrity,
        lost=sum(1 for t in check.lost if ledger.round_of[t] == number),
        duplicated=sum(1 for t in check.duplicated if ledger.round_of[t] == number),
    )


@dataclass
class Report:
    options: Options
    rounds: list[Round] = field(default_factory=list)
    final: Check | None = None
    drain_s: float | None = None
    still_queued: int = 0
    ledger: Ledger = field(default_factory=Ledger)


async def crash_loop(stack: PacedStack, options: Options) -> Report:
    report = Report(options)
    for number in range(1, options.restarts + 1):
        row = await one_round(stack, options, report.ledger, number)
        report.rounds.append(row)
        print(round_line(row), flush=True)
    report.drain_s, report.still_queued = await final_drain(stack)
    report.final = check_store(stack.data_dir, report.ledger)
    return report


# --- report -------------------------------------------------------------------------------


def round_line(row: Round) -> str:
    integrity = "ok" if all(v == "ok" for v in row.integrity.values()) else "FAILED"
    return (
        f"round {row.round:3d} {row.mode:<12} killed at {row.killed_after_ms:7.0f} ms: "
        f"{row.chats_answered} chats + {row.ingests_answered} ingests answered, "
        f"{row.cut_by_kill} cut; restart {row.restart_s:.1f} s, integrity {integrity}, "
        f"lost {row.lost}, duplicated {row.duplicated}"
    )


def table(rounds: Sequence[Round]) -> str:
    headers = (
        "round",
        "kill moment",
        "killed at ms",
        "chats ok",
        "ingests ok (msgs)",
        "cut by kill",
        "HTTP errors",
        "restart s",
        "queued",
        "integrity",
        "LOST",
        "dup",
    )
    rows = [
        (
            str(r.round),
            r.mode + (" (missed)" if r.moment_missed else ""),
            f"{r.killed_after_ms:.0f}",
            str(r.chats_answered),
            f"{r.ingests_answered} ({r.ingested_messages})",
            str(r.cut_by_kill),
            str(len(r.errors)),
            f"{r.restart_s:.2f}",
            str(r.queued_after_restart),
            "ok" if all(v == "ok" for v in r.integrity.values()) else "FAILED",
            str(r.lost),
            str(r.duplicated),
        )
        for r in rounds
    ]
    rows.append(
        (
            "total",
            "",
            "",
            str(sum(r.chats_answered for r in rounds)),
            f"{sum(r.ingests_answered for r in rounds)} "
            f"({sum(r.ingested_messages for r in rounds)})",
            str(sum(r.cut_by_kill for r in rounds)),
            str(sum(len(r.errors) for r in rounds)),
            "",
            "",
            str(sum(1 for r in rounds if any(v != "ok" for v in r.integrity.values()))),
            str(sum(r.lost for r in rounds)),
            str(sum(r.duplicated for r in rounds)),
        )
    )
    return render_table(headers, rows)


def totals(report: Report) -> dict[str, Any]:
    final = report.final
    lost = final.lost if final else []
    duplicated = final.duplicated if final else []
    rounds = report.rounds
    return {
        "restarts": len(rounds),
        "chats_answered": sum(r.chats_answered for r in rounds),
        "ingests_answered": sum(r.ingests_answered for r in rounds),
        "ingested_messages": sum(r.ingested_messages for r in rounds),
        "cut_by_kill": sum(r.cut_by_kill for r in rounds),
        "http_errors": sum(len(r.errors) for r in rounds),
        "integrity_failures": sum(1 for r in rounds if any(v != "ok" for v in r.integrity.values()))
        + (0 if final is None or final.integrity_ok else 1),
        "lost_rows": len(lost),
        "lost_exchanges": len({report.ledger.origin[t] for t in lost}),
        "duplicated_rows": len(duplicated),
        "drained": report.drain_s is not None,
        "drain_s": report.drain_s,
        "still_queued": report.still_queued,
        "kill_moments": dict(Counter(r.mode for r in rounds)),
    }


def print_report(report: Report) -> None:
    o = report.options
    print(
        f"\ncrash loop: {o.restarts} SIGKILLs + restarts, {o.workers} chat clients "
        f"(stream share {o.stream_share:g}) + 1 ingest client, upstream first token "
        f"{o.first_token_ms:g} ms at {o.tokens_per_s:g} tokens/s, retrieval {o.retrieval}, "
        f"policy always, seed {o.seed}\n"
    )
    print(table(report.rounds))
    t = totals(report)
    drained = (
        f"drained in {report.drain_s:.1f} s"
        if report.drain_s is not None
        else f"NOT drained after {DRAIN_TIMEOUT_S:g} s ({report.still_queued} queued)"
    )
    print(
        f"\nafter the last restart: formation queue {drained}; lost log rows {t['lost_rows']} "
        f"({t['lost_exchanges']} answered exchanges), duplicated rows {t['duplicated_rows']}"
    )
    final = report.final
    if final is not None:
        for name, result in final.integrity.items():
            if result != "ok":
                print(f"INTEGRITY {name}: {result}")
        for where in sorted({report.ledger.origin[t] for t in final.lost}):
            turns = [t for t in final.lost if report.ledger.origin[t] == where]
            shown = "; ".join(f"{t[1]} {t[2][:60]!r}" for t in turns[:2])
            print(f"LOST: {where}: {len(turns)} row(s) missing: {shown}")
        for turn in final.duplicated[:20]:
            print(
                f"DUPLICATED: {turn[0]} {turn[1]} {turn[2][:60]!r} ({report.ledger.origin[turn]})"
            )
    for row in report.rounds:
        for error in row.errors[:5]:
            print(f"HTTP ERROR round {row.round}: {error}")


def to_json(report: Report) -> dict[str, Any]:
    final = report.final
    return {
        "options": dataclasses.asdict(report.options),
        "rounds": [dataclasses.asdict(r) for r in report.rounds],
        "totals": totals(report),
        "final_integrity": final.integrity if final else None,
        "lost": [
            {"turn": list(t), "origin": report.ledger.origin[t]}
            for t in (final.lost if final else [])
        ],
        "duplicated": [
            {"turn": list(t), "origin": report.ledger.origin[t]}
            for t in (final.duplicated if final else [])
        ],
    }


def failed(report: Report) -> bool:
    t = totals(report)
    bad = t["lost_rows"] or t["duplicated_rows"] or t["integrity_failures"] or t["http_errors"]
    return bool(bad) or not t["drained"]


# --- command line -------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="kill -9 the areamem proxy, restart, check.")
    parser.add_argument("--restarts", type=int, default=50, help="kills and restarts (50)")
    parser.add_argument("--workers", type=int, default=3, help="concurrent chat clients (3)")
    parser.add_argument("--stream-share", type=float, default=0.5, help="streamed share (0.5)")
    parser.add_argument("--first-token-ms", type=float, default=50.0, help="upstream (50)")
    parser.add_argument("--tokens-per-s", type=float, default=100.0, help="upstream pace (100)")
    parser.add_argument("--retrieval", choices=("area", "bm25"), default="area")
    parser.add_argument("--formation-workers", type=int, default=1,
                        help="memory.formation_workers of the proxy (default 1, as shipped)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=output_file, metavar="OUT",
                        help="also write the report here")
    parser.add_argument(
        "--workdir", type=Path, help="keep the data folder and logs here (an empty folder)"
    )
    return parser.parse_args(argv)


def options_from(args: argparse.Namespace) -> Options:
    """The run's options, checked before anything starts: an upstream pace of 0 or NaN ran
    a loop that answered nothing and reported nothing lost (status 0), and a negative
    ``--formation-workers`` was found by the first proxy started."""
    if args.restarts < 1 or args.workers < 1:
        raise BenchError("--restarts and --workers must be >= 1")
    if not 0 <= args.stream_share <= 1:
        raise BenchError("--stream-share must be in [0, 1]")
    if not 0 <= args.first_token_ms < math.inf:
        raise BenchError(
            f"--first-token-ms must be a finite number >= 0, not {args.first_token_ms}"
        )
    if not 0 < args.tokens_per_s < math.inf:
        raise BenchError(f"--tokens-per-s must be a finite number > 0, not {args.tokens_per_s}")
    if args.formation_workers < 0:
        raise BenchError(f"--formation-workers must be >= 0, not {args.formation_workers}")
    return Options(
        restarts=args.restarts,
        workers=args.workers,
        stream_share=args.stream_share,
        first_token_ms=args.first_token_ms,
        tokens_per_s=args.tokens_per_s,
        retrieval=args.retrieval,
        seed=args.seed,
    )


def main(argv: Sequence[str] | None = None) -> int:
    sigterm_as_interrupt()
    args = parse_args(argv)
    try:
        options = options_from(args)
        with (
            work_folder(args.workdir, "areamem-crash-") as folder,
            PacedStack(
                folder,
                retrieval=options.retrieval,
                first_token_ms=options.first_token_ms,
                tokens_per_s=options.tokens_per_s,
                memory={"formation_workers": args.formation_workers},
            ) as stack,
        ):
            report = asyncio.run(crash_loop(stack, options))
    except (BenchError, aiohttp.ClientError) as exc:
        print(f"crash_loop: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("crash_loop: interrupted; servers stopped", file=sys.stderr)
        return 130
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(to_json(report), indent=1), encoding="utf-8")
        print(f"report written to {args.json}")
    return 1 if failed(report) else 0


if __name__ == "__main__":
    sys.exit(main())
