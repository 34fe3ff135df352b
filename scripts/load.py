"""Load test of the areamem proxy: N chat clients at once for S seconds, then proof that
every exchange they saw answered is in the durable log, exactly once.

What runs: the fake upstream (``proxy.fake_upstream``, pacing like a real model:
``--first-token-ms`` before the first byte, then ``--tokens-per-s``) and the proxy, as
child processes on free loopback ports, with a temporary data folder and a config whose
policy consults memory on every request (rule ``always``). ``--preload`` synthetic chat
turns are stored first through ``POST /memory/ingest``. Then ``--clients`` clients run
concurrently for ``--seconds``: each opens its own conversations (``X-Conversation-Id``),
several turns each, every turn re-sending the whole history as chat clients do, streamed
with probability ``--stream-share``. A conversation whose turn fails is abandoned.

What it reports (the exact configuration heads the tables):

- requests, requests/s and errors by status (``incomplete``: 200 without a complete
  answer; exception names: no HTTP answer at all);
- client-side time to first byte and to the last byte, and the latency added over the
  fake upstream's nominal pacing (answer words at ``--tokens-per-s`` after the first
  token); the proxy's own ``stages_ms`` from its log lines (``own`` is its total minus
  the upstream's share);
- retrieval timeouts (log lines whose ``memory_error`` says "retrieval exceeded") and
  ``areamem_memory_failures_total`` from ``/metrics``; the share of requests that got
  memory (``fragments_injected > 0``);
- the proxy's event-loop lag seen from outside: the time ``GET /healthz`` takes, sampled
  every 100 ms from a separate thread during the run; the proxy's RSS (``/proc``);
- after the run: answered vs stored (each answered exchange's user turn and answer looked
  up in the tenant's ``log`` table, read-only), lost, duplicated, and how long the
  formation backlog (``/memory/stats`` ``queued``) takes to drain.

Usage (from the project root, with the project's virtual environment)::

    python scripts/load.py --clients 50 --seconds 30
    python scripts/load.py --clients 8 --seconds 10 --preload 500 --retrieval bm25 --json out.json

Exit status 1 when an answered exchange is lost or duplicated, or any request failed.
Everything runs on 127.0.0.1 in a temporary folder removed at the end; the child
processes are stopped on exit, error and Ctrl-C. ``scripts/crash_loop.py`` reuses the
stack and the client turn defined here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from _common import (
    Turn,
    answer_text,
    api_error_message,
    compare_turns,
    format_ms,
    percentile,
    process_status,
    prometheus_samples,
    render_table,
    sigterm_as_interrupt,
    stored_turns,
)
from _synthetic import NAMES, USER_TEMPLATES, slot_values
from bench_overhead import (
    HOST,
    MODEL,
    BenchError,
    LocalStack,
    Service,
    Settings,
    preload,
    print_preload,
    wait_ready,
)

REQUEST_TIMEOUT_S = 60.0
LOG_SETTLE_S = 60.0
DRAIN_TIMEOUT_S = 300.0
PROBE_INTERVAL_S = 0.1
MAX_CONVERSATIONS_PER_CLIENT = 100_000
CONVERSATION_PREFIX = "load-"


# --- the servers --------------------------------------------------------------------------


class PacedStack(LocalStack):
    """The fake upstream with realistic pacing and a proxy that consults memory on every
    request (policy rule ``always``). The proxy can be killed (SIGKILL) and started
    again on the same data folder and port."""

    def __init__(
        self,
        workdir: Path,
        *,
        retrieval: str,
        first_token_ms: float,
        tokens_per_s: float,
        memory: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(workdir, retrieval)
        self.first_token_ms = first_token_ms
        self.tokens_per_s = tokens_per_s
        self.memory = {"retrieval": retrieval, **(memory or {})}
        self.proxy: Service | None = None
        self.starts = 0

    def __enter__(self) -> PacedStack:
        try:
            upstream = self.spawn(
                "fake upstream",
                "-m",
                "proxy.fake_upstream",
                "--host",
                HOST,
                "--port",
                str(self.upstream_port),
                "--first-token-ms",
                f"{self.first_token_ms:g}",
                "--tokens-per-s",
                f"{self.tokens_per_s:g}",
            )
            wait_ready(upstream, f"{self.upstream_url}/v1/models")
            self.start_proxy()
        except BaseException:
            self.stop()
            raise
        return self

    def document(self) -> dict[str, Any]:
        """The proxy's config, as written to ``config.yaml``."""
        return {
            "server": {"host": HOST, "port": 0, "data_dir": str(self.data_dir)},
            "auth": {"mode": "open"},
            "upstreams": [
                {
                    "model": "*",
                    "provider": "openai",
                    "api_base": f"{self.upstream_url}/v1",
                    "timeout_s": REQUEST_TIMEOUT_S,
                }
            ],
            "logging": {"stdout": False, "file": True},
            "memory": self.memory,
            "policy": {"budget_tokens": 600, "max_fragments": 8, "rules": [{"type": "always"}]},
        }

    def config(self) -> Path:
        path = self.workdir / "config.yaml"
        path.write_text(yaml.safe_dump(self.document(), sort_keys=False), encoding="utf-8")
        return path

    @property
    def log_file(self) -> Path:
        return self.data_dir / "logs" / "proxy.jsonl"

    def start_proxy(self) -> Service:
        """Start the proxy (again) and wait until ``/healthz`` answers."""
        self.starts += 1
        proxy = self.spawn(
            f"proxy {self.starts}",
            "-m",
            "proxy",
            "serve",
            "--config",
            str(self.config()),
            "--port",
            str(self.proxy_port),
            "--data-dir",
            str(self.data_dir),
        )
        wait_ready(proxy, f"{self.proxy_url}/healthz")
        self.proxy = proxy
        return proxy

    def kill_proxy(self) -> None:
        """SIGKILL the proxy: no shutdown code of any kind runs."""
        proxy, self.proxy = self.proxy, None
        if proxy is None:
            return
        proxy.process.kill()
        proxy.process.wait()
        proxy.handle.close()
        self.services.remove(proxy)


# --- one chat turn, as a chat client sends it ---------------------------------------------


@dataclass(frozen=True)
class Exchange:
    """One chat request as the client saw it. ``error`` is None exactly when the client
    received a complete answer (``answer``)."""

    conversation: str
    turn: int
    stream: bool
    user_text: str
    status: int | None
    error: str | None
    answer: str | None
    ttfb_ms: float
    total_ms: float
    done_at: float

    @property
    def answered(self) -> bool:
        return self.error is None and self.answer is not None

    def turns(self) -> list[Turn]:
        """The two log rows this exchange must leave: the user turn and the answer."""
        assert self.answer is not None
        return [
            (self.conversation, "user", self.user_text),
            (self.conversation, "assistant", self.answer),
        ]


def user_text(rng: random.Random, tag: str) -> str:
    """A varied, unique user message (synthetic chat vocabulary plus ``tag``)."""
    template = rng.choice(USER_TEMPLATES)
    return f"{template.format(**slot_values(rng, rng.sample(NAMES, 2)))} ({tag})"


async def chat_turn(
    session: aiohttp.ClientSession,
    conversation: str,
    turn: int,
    history: Sequence[dict[str, Any]],
    text: str,
    stream: bool,
) -> Exchange:
    """Send ``history`` plus the user message ``text``; read the whole response."""
    messages = [*history, {"role": "user", "content": text}]
    body = json.dumps({"model": MODEL, "stream": stream, "messages": messages}).encode()
    headers = {"Content-Type": "application/json", "X-Conversation-Id": conversation}
    began = time.perf_counter()
    first: float | None = None
    received = bytearray()
    status: int | None = None
    try:
        async with session.post("/v1/chat/completions", data=body, headers=headers) as resp:
            status = resp.status
            while chunk := await resp.content.readany():
                first = first or time.perf_counter()
                received += chunk
    except (aiohttp.ClientError, TimeoutError) as exc:
        error: str | None = type(exc).__name__
        answer = None
    else:
        answer = answer_text(bytes(received), stream) if status == 200 else None
        error = None if answer is not None else _failure(status, bytes(received))
    done = time.perf_counter()
    return Exchange(
        conversation,
        turn,
        stream,
        text,
        status,
        error,
        answer,
        ((first or done) - began) * 1000,
        (done - began) * 1000,
        time.monotonic(),
    )


def _failure(status: int | None, body: bytes) -> str:
    if status == 200:
        return "incomplete"
    return api_error_message(status or 0, body)


# --- the run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadOptions:
    """What to run."""

    clients: int
    seconds: float
    stream_share: float
    first_token_ms: float
    tokens_per_s: float
    retrieval: str
    preload: int
    turns: int
    seed: int
    formation_workers: int = 1


async def client(
    session: aiohttp.ClientSession,
    number: int,
    options: LoadOptions,
    deadline: float,
    out: list[Exchange],
) -> None:
    """Conversations of ``options.turns`` turns until ``deadline``."""
    rng = random.Random(options.seed * 100_003 + number)
    await asyncio.sleep(rng.uniform(0, 1))  # clients do not all start in the same instant
    for index in range(MAX_CONVERSATIONS_PER_CLIENT):
        conversation = f"{CONVERSATION_PREFIX}{number:03d}-{index:04d}"
        history: list[dict[str, Any]] = []
        for turn in range(options.turns):
            if time.monotonic() >= deadline:
                return
            stream = rng.random() < options.stream_share
            text = user_text(rng, f"{conversation} turn {turn}")
            exchange = await chat_turn(session, conversation, turn, history, text, stream)
            out.append(exchange)
            if not exchange.answered:
                break
            history += [
                {"role": "user", "content": text},
                {"role": "assistant", "content": exchange.answer},
            ]


class Probe:
    """Every ``interval_s``, from its own thread and event loop: how long the proxy takes
    to answer ``GET /healthz`` (its event-loop lag, seen from outside) and its RSS."""

    def __init__(self, url: str, pid: int, seconds: float, interval_s: float) -> None:
        self.url = url
        self.pid = pid
        self.interval_s = interval_s
        self.max_samples = int((seconds + REQUEST_TIMEOUT_S + 60) / interval_s)
        self.healthz_ms: list[float] = []
        self.failures = 0
        self.rss: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="probe", daemon=True)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        asyncio.run(self._sample())

    async def _sample(self) -> None:
        timeout = aiohttp.ClientTimeout(total=5)
        async with aiohttp.ClientSession(self.url, timeout=timeout) as session:
            next_at = time.monotonic()
            for _ in range(self.max_samples):
                if self._stop.is_set():
                    return
                await self._once(session)
                next_at += self.interval_s
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def _once(self, session: aiohttp.ClientSession) -> None:
        began = time.perf_counter()
        try:
            async with session.get("/healthz") as resp:
                await resp.read()
                ok = resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            ok = False
        if ok:
            self.healthz_ms.append((time.perf_counter() - began) * 1000)
        else:
            self.failures += 1
        rss = process_status(self.pid).get("VmRSS")
        if rss:
            self.rss.append(rss)


def chat_records(log_file: Path, prefix: str = CONVERSATION_PREFIX) -> list[dict[str, Any]]:
    """The proxy's ``"event": "chat"`` log lines for conversations named ``prefix...``."""
    if not log_file.exists():
        return []
    records = []
    for line in log_file.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == "chat" and str(record.get("conversation")).startswith(prefix):
            records.append(record)
    return records


async def settle_log(log_file: Path, expected: int, timeout_s: float) -> list[dict[str, Any]]:
    """Wait (at most ``timeout_s``) until ``expected`` chat log lines are written: each
    line is written after its exchange was stored or given up."""
    for _ in range(int(timeout_s / 0.2)):
        records = chat_records(log_file)
        if len(records) >= expected:
            return records
        await asyncio.sleep(0.2)
    return chat_records(log_file)


async def get_json(session: aiohttp.ClientSession, path: str) -> dict[str, Any]:
    async with session.get(path) as resp:
        body = await resp.read()
    if resp.status != 200:
        raise BenchError(f"GET {path}: {api_error_message(resp.status, body)}")
    data = json.loads(body)
    if not isinstance(data, dict):
        raise BenchError(f"GET {path}: not a JSON object")
    return data


async def drain_queue(session: aiohttp.ClientSession, timeout_s: float) -> tuple[float | None, int]:
    """Poll ``/memory/stats`` until nothing is queued for formation: ``(seconds it took,
    0)``, or ``(None, still queued)`` after ``timeout_s``."""
    began = time.monotonic()
    queued = -1
    for _ in range(int(timeout_s / 0.25) + 1):
        queued = int((await get_json(session, "/memory/stats"))["queued"])
        if queued == 0:
            return time.monotonic() - began, 0
        await asyncio.sleep(0.25)
    return None, queued


async def memory_failures(session: aiohttp.ClientSession) -> dict[str, float]:
    async with session.get("/metrics") as resp:
        text = (await resp.read()).decode("utf-8", "replace")
    return prometheus_samples(text, "areamem_memory_failures_total")


@dataclass
class LoadResult:
    """Everything measured in one run."""

    seconds: float = 0.0
    exchanges: list[Exchange] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    healthz_ms: list[float] = field(default_factory=list)
    healthz_failures: int = 0
    rss: list[int] = field(default_factory=list)
    memory_failures: dict[str, float] = field(default_factory=dict)
    drain_s: float | None = None
    still_queued: int = 0
    lost: list[Turn] = field(default_factory=list)
    duplicated: list[Turn] = field(default_factory=list)
    lost_exchanges: int = 0


async def run_load(stack: PacedStack, options: LoadOptions) -> LoadResult:
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    connector = aiohttp.TCPConnector(limit=options.clients + 10)
    async with aiohttp.ClientSession(
        stack.proxy_url, timeout=timeout, connector=connector
    ) as session:
        if options.preload > 0:
            settings = Settings(options.preload, 20, 1, 0, options.seed, options.retrieval)
            print_preload(await preload(session, settings))
        assert stack.proxy is not None
        result = LoadResult()
        pid = stack.proxy.process.pid
        with Probe(stack.proxy_url, pid, options.seconds, PROBE_INTERVAL_S) as probe:
            began = time.monotonic()
            deadline = began + options.seconds
            workers = [
                client(session, n, options, deadline, result.exchanges)
                for n in range(options.clients)
            ]
            await asyncio.gather(*workers)
            result.seconds = time.monotonic() - began
        result.healthz_ms, result.healthz_failures, result.rss = (
            probe.healthz_ms,
            probe.failures,
            probe.rss,
        )
        result.records = await settle_log(stack.log_file, len(result.exchanges), LOG_SETTLE_S)
        result.drain_s, result.still_queued = await drain_queue(session, DRAIN_TIMEOUT_S)
        result.memory_failures = await memory_failures(session)
    check_stored(stack.data_dir / "tenants" / "default.db", result)
    return result


def check_stored(database: Path, result: LoadResult) -> None:
    """Look every answered exchange up in the tenant's log (read-only)."""
    answered = [e for e in result.exchanges if e.answered]
    expected = Counter(turn for e in answered for turn in e.turns())
    stored = stored_turns(database, {e.conversation for e in answered})
    result.lost, result.duplicated = compare_turns(expected, stored)
    missing = set(result.lost)
    result.lost_exchanges = sum(1 for e in answered if missing & set(e.turns()))


# --- report -------------------------------------------------------------------------------


def nominal_ms(exchange: Exchange, options: LoadOptions) -> tuple[float, float]:
    """The fake upstream's own ``(first byte, last byte)`` pacing for this answer."""
    words = len((exchange.answer or "").split(" "))
    pace = (words - 1) * 1000 / options.tokens_per_s if options.tokens_per_s > 0 else 0.0
    return options.first_token_ms, options.first_token_ms + pace


def _p(values: Sequence[float], q: float) -> str:
    return format_ms(percentile(values, q))


def latency_table(result: LoadResult, options: LoadOptions) -> str:
    rows = []
    for stream in (False, True):
        chosen = [e for e in result.exchanges if e.answered and e.stream is stream]
        ttfb = [e.ttfb_ms for e in chosen]
        total = [e.total_ms for e in chosen]
        added = [e.total_ms - nominal_ms(e, options)[1] for e in chosen]
        added_ttfb = [e.ttfb_ms - nominal_ms(e, options)[0] for e in chosen]
        rows.append(
            (
                "stream" if stream else "non-stream",
                str(len(chosen)),
                _p(ttfb, 50),
                _p(ttfb, 99),
                _p(total, 50),
                _p(total, 99),
                _p(added_ttfb, 50) if stream else "-",
                _p(added, 50),
                _p(added, 99),
            )
        )
    headers = (
        "client side (ms)",
        "answered",
        "TTFB p50",
        "TTFB p99",
        "total p50",
        "total p99",
        "TTFB added p50",
        "added p50",
        "added p99",
    )
    return render_table(headers, rows)


def stage_table(records: Sequence[dict[str, Any]]) -> str:
    stages: dict[str, list[float]] = {}
    for record in records:
        timings = record.get("stages_ms") or {}
        for name, value in timings.items():
            stages.setdefault(name, []).append(float(value))
        if "total_ms" in timings and "upstream_ms" in timings:
            own = float(timings["total_ms"]) - float(timings["upstream_ms"])
            stages.setdefault("own (total - upstream)", []).append(own)
    rows = [
        (name, str(len(v)), _p(v, 50), _p(v, 99), format_ms(max(v)))
        for name, v in sorted(stages.items())
    ]
    return render_table(("proxy stages_ms", "n", "p50", "p99", "max"), rows)


def summary_rows(result: LoadResult, options: LoadOptions) -> list[tuple[str, str]]:
    exchanges, records = result.exchanges, result.records
    errors = Counter(_error_kind(e) for e in exchanges if not e.answered)
    timeouts = sum("retrieval exceeded" in str(r.get("memory_error") or "") for r in records)
    with_memory = sum(1 for r in records if (r.get("fragments_injected") or 0) > 0)
    answered = sum(1 for e in exchanges if e.answered)
    mib = [r / 2**20 for r in result.rss]
    failures = ", ".join(f"{k or 'total'}={v:g}" for k, v in result.memory_failures.items())
    drain = (
        f"{result.drain_s:.1f} s"
        if result.drain_s is not None
        else (f"NOT drained after {DRAIN_TIMEOUT_S:g} s ({result.still_queued} queued)")
    )
    return [
        ("requests", str(len(exchanges))),
        ("requests/s", f"{len(exchanges) / max(result.seconds, 1e-9):.1f}"),
        ("answered (complete answer)", str(answered)),
        ("errors by status", ", ".join(f"{k}: {v}" for k, v in errors.most_common()) or "none"),
        ("chat log lines", f"{len(records)} of {len(exchanges)} requests"),
        ("retrieval timeouts (log)", str(timeouts)),
        ("areamem_memory_failures_total", failures or "none"),
        ("requests that got memory", f"{with_memory} ({_share(with_memory, len(records))})"),
        (
            "GET /healthz ms p50 / p99 / max",
            f"{_p(result.healthz_ms, 50)} / {_p(result.healthz_ms, 99)} / "
            f"{format_ms(max(result.healthz_ms, default=float('nan')))}"
            f" ({len(result.healthz_ms)} samples, {result.healthz_failures} failed)",
        ),
        (
            "proxy RSS MiB end / max",
            f"{mib[-1]:.0f} / {max(mib):.0f}" if mib else "-",
        ),
        ("exchanges answered", str(answered)),
        ("exchanges stored", str(answered - result.lost_exchanges)),
        ("LOST (answered - stored)", str(result.lost_exchanges)),
        ("duplicated log rows", str(len(result.duplicated))),
        ("formation backlog drained in", drain),
    ]


def _error_kind(exchange: Exchange) -> str:
    if exchange.status is None or exchange.status == 200:
        return exchange.error or "?"
    return str(exchange.status)


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def header(options: LoadOptions, stack: PacedStack) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(options).items())
    return (
        f"load: {shown}\n"
        f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
        f"aiohttp {aiohttp.__version__}\n"
        f"proxy config: {json.dumps(stack.document(), sort_keys=False)}"
    )


def print_report(options: LoadOptions, stack: PacedStack, result: LoadResult) -> None:
    print()
    print(header(options, stack))
    print()
    print(render_table(("measure", "value"), summary_rows(result, options)))
    print()
    print(latency_table(result, options))
    print()
    print(stage_table(result.records))
    for conversation, role, text in result.lost[:20]:
        print(f"LOST: {conversation} {role}: {text[:80]!r}")
    for conversation, role, text in result.duplicated[:20]:
        print(f"DUPLICATED: {conversation} {role}: {text[:80]!r}")


def to_json(options: LoadOptions, stack: PacedStack, result: LoadResult) -> dict[str, Any]:
    return {
        "options": dataclasses.asdict(options),
        "config": stack.document(),
        "summary": dict(summary_rows(result, options)),
        "healthz_ms": [round(v, 3) for v in result.healthz_ms],
        "rss_bytes": result.rss,
        "memory_failures": result.memory_failures,
        "drain_s": result.drain_s,
        "lost": [list(t) for t in result.lost],
        "duplicated": [list(t) for t in result.duplicated],
        "exchanges": [dataclasses.asdict(e) for e in result.exchanges],
        "records": result.records,
    }


def failed(result: LoadResult) -> bool:
    """Exit status 1: a request failed or an answered exchange is not stored once."""
    errored = any(not e.answered for e in result.exchanges)
    return errored or bool(result.lost or result.duplicated)


# --- command line -------------------------------------------------------------------------


@contextlib.contextmanager
def work_folder(keep: Path | None, prefix: str) -> Iterator[Path]:
    """``keep`` (created, must be empty, left in place for a post-mortem), or a temporary
    folder removed at the end."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            yield Path(tmp)
        return
    keep.mkdir(parents=True, exist_ok=True)
    if any(keep.iterdir()):
        raise BenchError(f"--workdir {keep} is not empty")
    yield keep.resolve()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Load test of the areamem proxy.")
    parser.add_argument("--clients", type=int, default=10, help="concurrent clients (10)")
    parser.add_argument("--seconds", type=float, default=10.0, help="run time (10)")
    parser.add_argument(
        "--stream-share", type=float, default=0.5, help="share of streamed requests (0.5)"
    )
    parser.add_argument(
        "--first-token-ms", type=float, default=200.0, help="upstream first-token delay (200)"
    )
    parser.add_argument("--tokens-per-s", type=float, default=30.0, help="upstream pace (30)")
    parser.add_argument("--retrieval", choices=("area", "bm25"), default="area")
    parser.add_argument("--formation-workers", type=int, default=1,
                        help="memory.formation_workers of the proxy (default 1, as shipped)")
    parser.add_argument(
        "--preload", type=int, default=1000, help="turns ingested before the run (1000)"
    )
    parser.add_argument("--turns", type=int, default=6, help="turns per conversation (6)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write all figures here")
    parser.add_argument(
        "--workdir", type=Path, help="keep the data folder and logs here (an empty folder)"
    )
    return parser.parse_args(argv)


def options_from(args: argparse.Namespace) -> LoadOptions:
    if args.clients < 1 or args.seconds <= 0 or args.turns < 1 or args.preload < 0:
        raise BenchError("--clients, --seconds and --turns must be positive, --preload >= 0")
    if not 0 <= args.stream_share <= 1:
        raise BenchError("--stream-share must be in [0, 1]")
    return LoadOptions(
        clients=args.clients,
        seconds=args.seconds,
        stream_share=args.stream_share,
        first_token_ms=args.first_token_ms,
        tokens_per_s=args.tokens_per_s,
        retrieval=args.retrieval,
        preload=args.preload,
        turns=args.turns,
        seed=args.seed,
        formation_workers=args.formation_workers,
    )


def main(argv: Sequence[str] | None = None) -> int:
    sigterm_as_interrupt()
    args = parse_args(argv)
    try:
        options = options_from(args)
        with (
            work_folder(args.workdir, "areamem-load-") as folder,
            PacedStack(
                folder,
                retrieval=options.retrieval,
                first_token_ms=options.first_token_ms,
                tokens_per_s=options.tokens_per_s,
                memory={"formation_workers": options.formation_workers},
            ) as stack,
        ):
            print(header(options, stack), flush=True)
            result = asyncio.run(run_load(stack, options))
            print_report(options, stack, result)
            if args.json:
                report = to_json(options, stack, result)
                args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
                print(f"figures written to {args.json}")
    except (BenchError, aiohttp.ClientError) as exc:
        print(f"load: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("load: interrupted; servers stopped", file=sys.stderr)
        return 130
    return 1 if failed(result) else 0


if __name__ == "__main__":
    sys.exit(main())
