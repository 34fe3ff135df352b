"""The latency the areamem proxy adds in front of an OpenAI-compatible upstream.

What it measures: client-side wall time to the complete response (for streams also to
the first body bytes, TTFB) of chat requests sent alternately straight to a fake
upstream (``proxy.fake_upstream``, an echo server) and through the proxy to that same
upstream, one at a time over keep-alive connections (one aiohttp session per target).
The upstream and the proxy run as child processes on loopback ports, so the client, the
proxy and the upstream never share an event loop. Added latency is the proxy's median
(or p99) minus the direct one; medians are the figures to quote.

Four scenarios: non-stream and stream, each with memory off (``X-Memory: off``: no
retrieval and no ingestion) and memory on (``X-Memory: force``: retrieval over a store
preloaded through ``/memory/ingest`` with ``--fragments`` synthetic chat turns,
injection, and ingestion of the exchange after the answer; ``--no-ingest``: without it,
the lookup alone). Every round opens a new
conversation (its own ``X-Conversation-Id`` and a unique first user message). The
memory-on questions use words of the stored text, so retrieval returns fragments; the
receipts confirm it.

``--preload-locomo FILE`` preloads a LoCoMo replay instead (every conversation of the
file, session by session with its timestamps, each ingest call carrying the history so
far, as ``scripts/replay.py --ingest`` does, formation waited for) and the memory-on
questions are the file's own questions (each once, in a seeded order, before any
repeats), so with ``--retrieval area`` memory on is real area retrieval.

``--compare-litellm`` also starts LiteLLM's proxy (``litellm[proxy]``, the ``bench``
extra: ``pip install -e '.[bench]'``) in front of the same upstream, as an
``openai/<model>`` route, and times it in the same run, paired with direct requests of
its own: the rounds come in blocks of ``BLOCK_ROUNDS``, each block timing areamem and
direct (then LiteLLM and direct) with the same bodies, the order within a pair
alternating, and the order of the proxies flipping from block to block. Each proxy's
added latency is taken against the direct requests of its own blocks, so the blocks'
interleaving cancels drift, while one proxy's leftover work (after
answering, LiteLLM keeps a core busy for a while: direct p50 doubles when its requests
are interleaved one by one) is never charged to the other; each proxy's own leftover
work (areamem's formation in the worker) stays in its back-to-back requests. LiteLLM has no
memory: in the memory-on rows it does exactly what it does in the memory-off rows, so
those rows compare areamem with memory against a plain LiteLLM forward. LiteLLM runs
offline: ``LITELLM_OFFLINE_MODE`` and the local cost map, ``LITELLM_MODE=PRODUCTION`` (no
``.env`` read), no database, Redis or callbacks, message logging off, a random master
key, and an environment reduced to ``PATH`` and the locale, with ``HOME`` and ``TMPDIR``
in the temporary folder.

``--api responses`` or ``--api messages`` also times that front door (OpenAI's
Responses API, Anthropic's Messages API) in the same run, in blocks as above: chat
through areamem paired with direct chat, then the door paired with a direct request of
what the proxy itself sends upstream for it, so each added latency is taken against its
own baseline and the door's is compared with chat's (door - chat, p50 and p99). The door
is *bridged* by default (the upstream serves chat completions only: the door's request
becomes a chat completion, so its direct partner is a direct chat request) and *native*
with ``--native`` (the upstream's config lists the API in ``serves``: the request goes to
the fake upstream's own ``/v1/responses`` or ``/v1/messages``, and so does its direct
partner). Chat and door rounds ask different questions of the same kind, each in a
conversation of its own, so no question is stored twice. Every answer, direct or not, is
read back whole (a stream's events in order, its text deltas joined) and must carry the
echo of its question, so a broken door cannot look fast.

Targets (from the issues): added p50 <= 2 ms with memory off, <= 15 ms with memory on;
a door's added p50 within 1 ms of chat's.

Usage (from the project root, with the project's virtual environment)::

    python scripts/bench_overhead.py                  # 10,000 fragments, 300 requests
    python scripts/bench_overhead.py --quick          # smoke run: 1,000 fragments, 40
    python scripts/bench_overhead.py --compare-litellm --json bench.json
    python scripts/bench_overhead.py --compare-litellm --retrieval area \\
        --preload-locomo ../shared/data/locomo/locomo_dev5.json
    python scripts/bench_overhead.py --api messages --native   # a door against chat

``--store DIR`` keeps the preloaded store in ``DIR`` and reuses it in later runs with
the same preload settings (source, fragments, turns per conversation, seed; written in
``DIR/preload.json``): the first run preloads there through a proxy of its own, every
run serves a copy of it, so each run starts from the same memory and a 100k-fragment run
skips its ~8-minute preload. The store is reused as it is: remove the folder when
formation has changed.

Nothing leaves the machine: everything runs on 127.0.0.1 in a temporary folder that is
removed at the end (a ``--store`` folder is kept); the child processes are stopped on
exit, error and Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import random
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import aiohttp
import yaml
from _common import (
    answer_text,
    api_error_message,
    format_ms,
    percentile,
    render_table,
    sigterm_as_interrupt,
)
from _synthetic import HOBBIES, NAMES, PLACES, synthetic_conversation
from evaluation.locomo import LocomoError, load_locomo
from replay import Conversation as ReplayConversation
from replay import InputError, ProxyClient, ProxyUnreachable, Totals, ingest_conversation, load_file
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
MODEL = "bench-echo"
TARGET_OFF_MS = 2.0
TARGET_ON_MS = 15.0
TARGET_DOOR_MS = 1.0
"""A door's added p50 may exceed chat's by this much (issue 14)."""
INGEST_CONCURRENCY = 4
READY_TIMEOUT_S = 60.0
LITELLM_READY_TIMEOUT_S = 180.0
REQUEST_TIMEOUT_S = 30.0
GRAPH_READ_TIMEOUT_S = 600.0
"""The most the first read of a kept store's memory graph may take (``graph_read``)."""
BLOCK_ROUNDS = 25
"""Rounds per proxy before the next proxy's block (with ``--compare-litellm``)."""
BENCH_EXTRA = "pip install -e '.[bench]'"
LITELLM_PROXY_MODULES = ("litellm", "fastapi", "uvicorn", "backoff", "orjson", "apscheduler")
LITELLM_ENV_KEPT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
LITELLM_ENV_SET = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_OFFLINE_MODE": "true",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_DISABLE_LATEST_RELEASE_CHECK": "true",
    "LITELLM_MODE": "PRODUCTION",
    "DISABLE_ADMIN_UI": "True",
    "DISABLE_AIOHTTP_TRUST_ENV": "True",
    "NO_DOCS": "True",
    "NO_REDOC": "True",
    "NO_PROXY": "*",
    "PYTHONUNBUFFERED": "1",
}


class BenchError(Exception):
    """The benchmark cannot go on: a server did not start or answered an error."""


@dataclass(frozen=True)
class Settings:
    """What to run: sizes, counts and the seed."""

    fragments: int
    turns_per_conversation: int
    requests: int
    warmup: int
    seed: int
    retrieval: str = "bm25"
    compare_litellm: bool = False
    preload_locomo: str | None = None
    formation_workers: int = 1
    ingest: bool = True
    """Memory-on chats store their exchange (``memory.ingest``); off: the lookup alone."""
    store: str | None = None
    api: str = "chat"
    """``chat``, or the front door timed against chat (``responses``, ``messages``)."""
    native: bool = False
    """The upstream serves the door's API itself (``serves``); bridged otherwise."""
    encoder: str | None = None
    """The proxy's ``formation.encoder.model`` (None: the configured default)."""

    @property
    def door(self) -> bool:
        return self.api != "chat"


# --- synthetic chat text ------------------------------------------------------------------


def question(rng: random.Random, memory: bool, tag: str) -> str:
    """A unique first user message; with memory, its words occur in the stored text."""
    if memory:
        return (f"[{tag}] Do you remember what {rng.choice(NAMES)} told me about "
                f"{rng.choice(HOBBIES)} in {rng.choice(PLACES)}?")
    return f"[{tag}] Any quick tips for getting started with {rng.choice(HOBBIES)}?"


class Questions:
    """The first user message of each round: synthetic, or with memory on a LoCoMo
    file's questions, shuffled by the seed, each asked once before any is repeated."""

    def __init__(self, rng: random.Random, pool: Sequence[str] = ()) -> None:
        self._rng = rng
        self._pool = list(pool)
        rng.shuffle(self._pool)
        self._next = 0

    def __call__(self, memory: bool, tag: str) -> str:
        if not memory or not self._pool:
            return question(self._rng, memory, tag)
        text = self._pool[self._next % len(self._pool)]
        self._next += 1
        return text


def locomo_questions(path: Path) -> list[str]:
    """Every question of the file, conversation by conversation, in file order."""
    try:
        conversations = load_locomo(path)
    except LocomoError as exc:
        raise BenchError(str(exc)) from exc
    return [q.question for conversation in conversations for q in conversation.questions]


# --- the servers under test ---------------------------------------------------------------


def free_port() -> int:
    """A loopback port that was free a moment ago (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@dataclass
class Service:
    """A child process serving HTTP, with its combined output in ``log``."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    handle: IO[bytes]

    def tail(self, lines: int = 20) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(text[-lines:]) or "(no output)"

    def stop(self) -> None:
        """SIGTERM to the child's process group (its own session), SIGKILL after 10 s."""
        if self.process.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.process.wait()
        self.handle.close()

    def signal(self, number: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, number)


class LocalStack:
    """The fake upstream, the proxy and optionally LiteLLM's proxy as child processes on
    free loopback ports; ``serves`` the APIs the upstream's config says it serves itself
    (besides chat completions); ``record`` a file the upstream appends each request it
    receives to (``proxy.fake_upstream --record``)."""

    def __init__(self, workdir: Path, retrieval: str = "bm25", litellm: bool = False,
                 formation_workers: int = 1, *, serves: Sequence[str] = (),
                 encoder: str | None = None, record: Path | None = None,
                 ingest: bool = True) -> None:
        self.workdir = workdir
        self.ingest = ingest
        self.record = record
        self.encoder = encoder
        self.serves = tuple(serves)
        self.retrieval = retrieval
        self.formation_workers = formation_workers
        self.litellm = litellm
        self.upstream_port = free_port()
        self.proxy_port = free_port()
        self.litellm_port = free_port() if litellm else 0
        self.litellm_key = f"sk-bench-{secrets.token_hex(16)}"
        self.services: list[Service] = []

    @property
    def upstream_url(self) -> str:
        return f"http://{HOST}:{self.upstream_port}"

    @property
    def proxy_url(self) -> str:
        return f"http://{HOST}:{self.proxy_port}"

    @property
    def litellm_url(self) -> str:
        return f"http://{HOST}:{self.litellm_port}"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    def __enter__(self) -> LocalStack:
        try:
            recording = ("--record", str(self.record)) if self.record else ()
            upstream = self.spawn("fake upstream", "-m", "proxy.fake_upstream", "--host", HOST,
                                  "--port", str(self.upstream_port), *recording)
            wait_ready(upstream, f"{self.upstream_url}/v1/models")
            proxy = self.spawn("proxy", "-m", "proxy", "serve", "--config", str(self.config()),
                               "--port", str(self.proxy_port), "--data-dir", str(self.data_dir))
            if self.litellm:
                self.start_litellm()
            wait_ready(proxy, f"{self.proxy_url}/healthz")
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        for service in reversed(self.services):
            service.stop()
        self.services.clear()

    def config(self) -> Path:
        path = self.workdir / "config.yaml"
        upstream: dict[str, Any] = {"model": "*", "provider": "openai",
                                    "api_base": f"{self.upstream_url}/v1"}
        if self.serves:
            upstream["serves"] = list(self.serves)
        config = {
            "server": {"host": HOST, "port": 0, "data_dir": str(self.data_dir)},
            "auth": {"mode": "open"},
            "upstreams": [upstream],
            "logging": {"stdout": False, "file": True},
            "memory": {"retrieval": self.retrieval,
                       "formation_workers": self.formation_workers, "ingest": self.ingest},
            **({"formation": {"encoder": {"model": self.encoder}}} if self.encoder else {}),
            # no automatic consolidation cycle: the preload's thousands of messages would
            # start one mid-measurement (cycles are measured by bench_dreamer.py)
            "policy": {"budget_tokens": 600, "max_fragments": 8, "rules": [{"type": "first_turn"}],
                       "dream": {"enabled": False}},
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return path

    def start_litellm(self) -> None:
        """LiteLLM's proxy (uvicorn, one worker) with its own folder as home and cwd."""
        home = self.workdir / "litellm"
        home.mkdir()
        config = write_litellm_config(home / "config.yaml", f"{self.upstream_url}/v1",
                                      self.litellm_key)
        service = self.spawn("litellm", "-m", "litellm.proxy.proxy_cli", "--config", str(config),
                             "--host", HOST, "--port", str(self.litellm_port),
                             env=litellm_env(os.environ, home), cwd=home)
        wait_ready(service, f"{self.litellm_url}/health/liveliness", LITELLM_READY_TIMEOUT_S)

    def spawn(self, name: str, *args: str, env: Mapping[str, str] | None = None,
              cwd: Path = ROOT) -> Service:
        log = self.workdir / f"{name.replace(' ', '_')}.log"
        handle = log.open("wb")
        if env is None:
            env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(
            [sys.executable, *args], cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
            stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
        )
        service = Service(name, process, log, handle)
        self.services.append(service)
        return service


def wait_ready(service: Service, url: str, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Poll ``url`` until it answers 200; fail with the service's output if it dies."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            raise BenchError(f"the {service.name} exited with status "
                             f"{service.process.returncode}:\n{service.tail()}")
        try:
            with opener.open(url, timeout=1) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise BenchError(f"the {service.name} did not answer {url} within {timeout_s:g} s:\n"
                     f"{service.tail()}")


# --- LiteLLM's proxy, for comparison -------------------------------------------------------


def require_litellm_proxy(
    find_spec: Callable[[str], object | None] = importlib.util.find_spec,
) -> str:
    """LiteLLM's version when its proxy can run here; BenchError naming the install
    command otherwise (``find_spec`` is injectable for tests)."""
    missing = [name for name in LITELLM_PROXY_MODULES if find_spec(name) is None]
    if missing:
        raise BenchError(f"--compare-litellm needs litellm[proxy] (missing: "
                         f"{', '.join(missing)}); install it with {BENCH_EXTRA}")
    try:
        return importlib.metadata.version("litellm")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def litellm_config(upstream_v1: str, master_key: str) -> dict[str, Any]:
    """LiteLLM proxy settings: one ``openai/<model>`` route to ``upstream_v1`` and every
    feature that would store, log or reach beyond it left off."""
    return {
        "model_list": [{
            "model_name": MODEL,
            "litellm_params": {"model": f"openai/{MODEL}", "api_base": upstream_v1,
                               "api_key": "sk-bench"},
        }],
        "litellm_settings": {
            "turn_off_message_logging": True,
            "callbacks": [], "success_callback": [], "failure_callback": [],
            "telemetry": False,
        },
        "general_settings": {
            "master_key": master_key,
            "disable_spend_logs": True,
            "disable_reset_budget": True,
            "store_model_in_db": False,
            "background_health_checks": False,
            "trusted_proxy_ranges": [],
        },
    }


def write_litellm_config(path: Path, upstream_v1: str, master_key: str) -> Path:
    path.write_text(yaml.safe_dump(litellm_config(upstream_v1, master_key), sort_keys=False),
                    encoding="utf-8")
    return path


def litellm_env(base: Mapping[str, str], home: Path) -> dict[str, str]:
    """The LiteLLM child's environment: ``PATH`` and the locale from ``base``, nothing
    else (no database, Redis, keys or HTTP proxies), offline switches on, and ``HOME``
    and ``TMPDIR`` in ``home`` so whatever it writes goes with the temporary folder."""
    kept = {k: base[k] for k in LITELLM_ENV_KEPT if k in base}
    return {**kept, **LITELLM_ENV_SET, "HOME": str(home), "TMPDIR": str(home)}


# --- preload ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Preload:
    """What the preload stored and how long it took."""

    conversations: int
    turns: int
    fragments_formed: int
    seconds: float
    probe: str
    probe_hits: int
    probe_search_ms: float
    source: str = "synthetic"


async def preload(session: aiohttp.ClientSession, settings: Settings,
                  questions: Sequence[str] = ()) -> Preload:
    """The synthetic preload, or the LoCoMo replay with ``--preload-locomo``."""
    if settings.preload_locomo is not None:
        return await preload_locomo(session, Path(settings.preload_locomo), questions[0])
    return await preload_synthetic(session, settings)


async def preload_synthetic(session: aiohttp.ClientSession, settings: Settings) -> Preload:
    """Ingest ``settings.fragments`` synthetic turns, ``INGEST_CONCURRENCY`` calls at a time."""
    rng = random.Random(settings.seed)
    sizes = [min(settings.turns_per_conversation, settings.fragments - start)
             for start in range(0, settings.fragments, settings.turns_per_conversation)]
    batches = ((f"bench-{i:05d}", synthetic_conversation(rng, n)) for i, n in enumerate(sizes))
    formed: list[int] = []
    began = time.perf_counter()
    with tqdm(total=settings.fragments, desc="preload", unit="turn", leave=False) as bar:
        workers = [ingest_worker(session, batches, formed, bar) for _ in range(INGEST_CONCURRENCY)]
        await asyncio.gather(*workers)
    seconds = time.perf_counter() - began
    probe = question(rng, True, "probe")
    hits, search_ms = await search(session, probe)
    return Preload(len(sizes), sum(sizes), await fragments_stored(session), seconds, probe,
                   hits, search_ms)


STORE_MANIFEST = "preload.json"
"""What a ``--store`` folder holds besides the store: the preload's key and figures."""


def preload_key(settings: Settings) -> dict[str, Any]:
    """What a kept store must have been preloaded with to be reused."""
    encoder = {"encoder": settings.encoder} if settings.encoder else {}
    if settings.preload_locomo is not None:
        return {"source": str(Path(settings.preload_locomo).resolve()), **encoder}
    return {"source": "synthetic", "fragments": settings.fragments,
            "turns_per_conversation": settings.turns_per_conversation, "seed": settings.seed,
            **encoder}


def kept_preload(folder: Path, settings: Settings, pool: Sequence[str]) -> Preload:
    """The preload kept in ``folder``; made there first (through a proxy of its own,
    stopped before the manifest is written) when the folder is new or empty."""
    manifest = folder / STORE_MANIFEST
    if folder.exists() and not folder.is_dir():
        raise BenchError(f"--store {folder} is not a folder")
    if manifest.is_file():
        try:
            saved = json.loads(manifest.read_text(encoding="utf-8"))
            key, loaded = saved["key"], Preload(**saved["preload"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BenchError(f"{manifest} is unreadable ({exc}); remove {folder}") from exc
        if key != preload_key(settings):
            raise BenchError(f"{folder} holds a store preloaded with {key}, not "
                             f"{preload_key(settings)}: use another folder or remove it")
        return loaded
    if folder.exists() and any(folder.iterdir()):
        raise BenchError(f"{folder} is not empty and holds no {STORE_MANIFEST} (an "
                         "interrupted preload?): remove it or name another folder")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"preloading into {folder}, kept for later runs", flush=True)
    with LocalStack(folder, settings.retrieval, False, settings.formation_workers,
                    encoder=settings.encoder) as stack:
        loaded = asyncio.run(preload_only(stack, settings, pool))
    manifest.write_text(json.dumps({"key": preload_key(settings),
                                    "preload": dataclasses.asdict(loaded)}), encoding="utf-8")
    return loaded


async def preload_only(stack: LocalStack, settings: Settings, pool: Sequence[str]) -> Preload:
    async with client_session(stack.proxy_url) as admin:
        return await preload(admin, settings, pool)


def copy_store(folder: Path, workdir: Path) -> None:
    """The kept store (not its proxy's logs) into ``workdir``'s data folder."""
    try:
        shutil.copytree(folder / "data", workdir / "data", ignore=shutil.ignore_patterns("logs"))
    except OSError as exc:
        raise BenchError(f"cannot copy the store kept in {folder}: {exc}") from exc


async def fragments_stored(session: aiohttp.ClientSession) -> int:
    """Fragments in memory (``/memory/stats``): what the preload formed. The ingest
    answers' ``fragments_formed`` are not summed: concurrent calls that wait for one
    shared formation pass (a worker forms the tenant's whole queue) each report it."""
    async with session.get("/memory/stats") as resp:
        body = await resp.read()
    if resp.status != 200:
        raise BenchError(f"/memory/stats failed: {api_error_message(resp.status, body)}")
    return int(json.loads(body)["fragments"])


async def ingest_worker(session: aiohttp.ClientSession,
                        batches: Iterator[tuple[str, list[dict[str, Any]]]],
                        formed: list[int], bar: tqdm) -> None:
    """Take conversations from the shared iterator until it is exhausted."""
    for conversation_id, messages in batches:
        payload = {"conversation_id": conversation_id, "messages": messages}
        async with session.post("/memory/ingest", json=payload) as resp:
            body = await resp.read()
        if resp.status != 200:
            raise BenchError(f"/memory/ingest failed: {api_error_message(resp.status, body)}")
        formed.append(int(json.loads(body)["fragments_formed"]))
        bar.update(len(messages))


async def preload_locomo(session: aiohttp.ClientSession, path: Path, probe: str) -> Preload:
    """Replay every conversation of a LoCoMo file as ``scripts/replay.py --ingest`` does
    (its own code: one call per session carrying the history so far, formation waited
    for), ``INGEST_CONCURRENCY`` conversations at a time."""
    try:
        conversations = load_file(path)
    except InputError as exc:
        raise BenchError(str(exc)) from exc
    client, totals = ProxyClient(session, ""), Totals()
    pending = iter(conversations)
    turns = sum(len(s) for c in conversations for s in c.sessions)
    began = time.perf_counter()
    with tqdm(total=turns, desc="preload (LoCoMo)", unit="turn", leave=False) as bar:
        workers = [replay_worker(client, pending, totals, bar) for _ in range(INGEST_CONCURRENCY)]
        await asyncio.gather(*workers)
    seconds = time.perf_counter() - began
    if totals.errors:
        raise BenchError(f"{totals.errors} of {totals.requests} ingest calls of {path} failed")
    hits, search_ms = await search(session, probe)
    return Preload(len(conversations), turns, await fragments_stored(session), seconds, probe,
                   hits, search_ms, source=str(path))


async def replay_worker(client: ProxyClient, pending: Iterator[ReplayConversation],
                        totals: Totals, bar: tqdm) -> None:
    """Take conversations from the shared iterator until it is exhausted."""
    for conversation in pending:
        try:
            await ingest_conversation(client, conversation, totals, bar)
        except ProxyUnreachable as exc:
            raise BenchError(str(exc)) from exc


async def search(session: aiohttp.ClientSession, query: str) -> tuple[int, float]:
    """Hits and server-side milliseconds of ``GET /memory/search`` for ``query``."""
    async with session.get("/memory/search", params={"q": query, "k": "8"}) as resp:
        body = await resp.read()
    if resp.status != 200:
        raise BenchError(f"/memory/search failed: {api_error_message(resp.status, body)}")
    data = json.loads(body)
    return len(data["hits"]), float(data["elapsed_ms"])


async def graph_read(session: aiohttp.ClientSession, query: str) -> None:
    """Have the proxy read a kept store's memory graph before anything is timed: one
    ``GET /memory/area`` (a preload through the proxy leaves it read already; a kept
    store is read at the first area query, seconds at 100k fragments, which would land
    in the first scenario's tail; tens of seconds on a busy machine, past a request's
    :data:`REQUEST_TIMEOUT_S`, hence :data:`GRAPH_READ_TIMEOUT_S`)."""
    timeout = aiohttp.ClientTimeout(total=GRAPH_READ_TIMEOUT_S)
    async with session.get("/memory/area", params={"q": query}, timeout=timeout) as resp:
        body = await resp.read()
    if resp.status != 200:
        raise BenchError(f"/memory/area failed: {api_error_message(resp.status, body)}")


# --- the APIs spoken ----------------------------------------------------------------------


@dataclass(frozen=True)
class Api:
    """An API the bench speaks: its route, a request of it asking one question (text,
    stream or not), the headers its clients add, and the text of a complete answer
    (``answer`` raises BenchError saying what is wrong with one that is not)."""

    name: str
    path: str
    body: Callable[[str, bool], bytes]
    answer: Callable[[bytes, bool], str]
    headers: Mapping[str, str] = field(default_factory=dict)


def request_body(text: str, stream: bool) -> bytes:
    """A chat completion request."""
    return json.dumps({"model": MODEL, "stream": stream,
                       "messages": [{"role": "user", "content": text}]}).encode()


def responses_body(text: str, stream: bool) -> bytes:
    return json.dumps({"model": MODEL, "input": [{"role": "user", "content": text}],
                       "stream": stream}).encode()


def messages_body(text: str, stream: bool) -> bytes:
    return json.dumps({"model": MODEL, "max_tokens": 256, "stream": stream,
                       "messages": [{"role": "user", "content": text}]}).encode()


def asked(body: bytes) -> str:
    """The question a request of any of the bench's APIs asks (its last turn's text)."""
    data = json.loads(body)
    return str((data.get("messages") or data["input"])[-1]["content"])


def chat_answer(raw: bytes, stream: bool) -> str:
    text = answer_text(raw, stream)
    if text is None:
        raise BenchError(f"incomplete chat answer: {raw[:300]!r}")
    return text


def json_answer(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise BenchError(f"an answer that is not a JSON object: {raw[:300]!r}")
    return data


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    """A stream's events in order, checked: each a JSON object whose ``type`` is the name
    on its ``event:`` line, numbered 0, 1, 2... (``sequence_number``) if any is."""
    events = []
    for block in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        lines = block.split(b"\n")
        names = [line[6:].strip().decode() for line in lines if line.startswith(b"event:")]
        data = b"\n".join(line[5:].strip() for line in lines if line.startswith(b"data:"))
        if not data:
            continue
        event = json_answer(data)
        if names and event.get("type") != names[0]:
            raise BenchError(f"event {names[0]!r} carries type {event.get('type')!r}")
        events.append(event)
    numbers = [e.get("sequence_number") for e in events]
    if any(n is not None for n in numbers) and numbers != list(range(len(events))):
        raise BenchError(f"events numbered {numbers}, not 0 to {len(events) - 1}")
    return events


def event_kinds(events: Sequence[Mapping[str, Any]], first: str, last: str) -> list[str]:
    """The events' types, which must run from ``first`` to ``last``."""
    kinds = [str(e.get("type")) for e in events]
    if not kinds or kinds[0] != first or kinds[-1] != last:
        raise BenchError(f"a stream must run from {first} to {last}, not {kinds}")
    return kinds


def response_text(response: object) -> str:
    """The output text of a complete Responses object."""
    if not isinstance(response, dict) or response.get("status") != "completed":
        raise BenchError(f"not a completed response: {str(response)[:300]}")
    found = [part.get("text") for item in response.get("output") or []
             if isinstance(item, dict) and item.get("type") == "message"
             for part in item.get("content") or []
             if isinstance(part, dict) and part.get("type") == "output_text"]
    texts = [t for t in found if isinstance(t, str)]
    if not texts or len(texts) != len(found):
        raise BenchError(f"a response without output text: {str(response)[:300]}")
    return "".join(texts)


def responses_answer(raw: bytes, stream: bool) -> str:
    """A response's text; for a stream, its text deltas joined, which must be the text
    of its closing ``response.completed``."""
    if not stream:
        return response_text(json_answer(raw))
    events = sse_events(raw)
    event_kinds(events, "response.created", "response.completed")
    deltas = "".join(str(e.get("delta")) for e in events
                     if e.get("type") == "response.output_text.delta")
    final = response_text(events[-1].get("response"))
    if deltas != final:
        raise BenchError(f"the stream's deltas say {deltas!r}, its response {final!r}")
    return final


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a complete Messages answer."""
    if message.get("type") != "message" or not message.get("stop_reason"):
        raise BenchError(f"not a complete message: {str(message)[:300]}")
    found = [block.get("text") for block in message.get("content") or []
             if isinstance(block, dict) and block.get("type") == "text"]
    texts = [t for t in found if isinstance(t, str)]
    if not texts or len(texts) != len(found):
        raise BenchError(f"a message without text: {str(message)[:300]}")
    return "".join(texts)


def messages_answer(raw: bytes, stream: bool) -> str:
    """A message's text; for a stream (``message_start`` to ``message_stop``, with a
    ``message_delta``), its text deltas joined."""
    if not stream:
        return message_text(json_answer(raw))
    events = sse_events(raw)
    if "message_delta" not in event_kinds(events, "message_start", "message_stop"):
        raise BenchError("a Messages stream without message_delta")
    deltas = [e.get("delta") for e in events if e.get("type") == "content_block_delta"]
    return "".join(str(d.get("text")) for d in deltas
                   if isinstance(d, dict) and d.get("type") == "text_delta")


APIS = {
    "chat": Api("chat", "/v1/chat/completions", request_body, chat_answer),
    "responses": Api("responses", "/v1/responses", responses_body, responses_answer),
    "messages": Api("messages", "/v1/messages", messages_body, messages_answer,
                    {"anthropic-version": "2023-06-01"}),
}
"""Every API by the name ``--api`` takes (and ``serves`` lists)."""


# --- measurement --------------------------------------------------------------------------


BENCH_AUTH = {"Authorization": "Bearer sk-bench"}
"""What the bench sends areamem and the direct upstream (auth is open on both)."""


def client_session(url: str, headers: Mapping[str, str] = BENCH_AUTH) -> aiohttp.ClientSession:
    """A session to ``url`` with the bench's headers and per-request timeout."""
    return aiohttp.ClientSession(url, headers=dict(headers),
                                 timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S))


@dataclass(frozen=True)
class Endpoint:
    """Where a target's requests go: a session of its own (its keep-alive connections
    carry its requests only) and the API spoken there."""

    session: aiohttp.ClientSession
    api: Api


PARTNERS = {"proxy": "direct", "litellm": "direct", "door": "door_direct"}
"""Each proxy target (timed in this order) and the target of its direct requests."""
DIRECT_SAMPLES = {"proxy": "direct", "litellm": "litellm_direct", "door": "door_direct"}
"""Where the direct requests paired with each proxy target are counted."""


@dataclass(frozen=True)
class Scenario:
    """One row of the table."""

    name: str
    stream: bool
    memory: bool


SCENARIOS = (
    Scenario("non-stream, memory off", stream=False, memory=False),
    Scenario("stream, memory off", stream=True, memory=False),
    Scenario("non-stream, memory on", stream=False, memory=True),
    Scenario("stream, memory on", stream=True, memory=True),
)


@dataclass(frozen=True)
class Timing:
    """One request: to the end of the response, to its first body bytes, its receipt."""

    total_ms: float
    ttfb_ms: float
    receipt: str | None


@dataclass
class Samples:
    """Measured milliseconds for one target in one scenario."""

    total_ms: list[float] = field(default_factory=list)
    ttfb_ms: list[float] = field(default_factory=list)

    def add(self, timing: Timing) -> None:
        self.total_ms.append(timing.total_ms)
        self.ttfb_ms.append(timing.ttfb_ms)


@dataclass
class Receipts:
    """What memory did through one areamem target: its receipts and, read from them
    after the scenario, what the last one injected and every stage's median ms
    (request stages, and ``area.*`` for area retrieval's own)."""

    ids: list[str] = field(default_factory=list)
    injected_fragments: int | None = None
    injected_tokens: int | None = None
    stages_ms: dict[str, float] = field(default_factory=dict)


def _receipts_per_target() -> dict[str, Receipts]:
    return {"proxy": Receipts(), "door": Receipts()}


@dataclass
class Outcome:
    """One scenario's samples per target (direct, proxy, litellm, door) and what memory
    did through areamem (chat and the door)."""

    scenario: Scenario
    direct: Samples = field(default_factory=Samples)
    proxy: Samples = field(default_factory=Samples)
    litellm: Samples = field(default_factory=Samples)
    litellm_direct: Samples = field(default_factory=Samples)
    """The direct requests paired with LiteLLM's (``direct``: with areamem's)."""
    door: Samples = field(default_factory=Samples)
    door_direct: Samples = field(default_factory=Samples)
    """The direct requests paired with the door's: what areamem sends upstream for it."""
    memory: dict[str, Receipts] = field(default_factory=_receipts_per_target)

    @property
    def compared(self) -> bool:
        return bool(self.litellm.total_ms)

    @property
    def doored(self) -> bool:
        return bool(self.door.total_ms)


async def timed_post(endpoint: Endpoint, body: bytes, headers: dict[str, str],
                     stream: bool) -> Timing:
    """Send one request and time it on the client until its last byte; then check that
    the answer is complete and echoes the question (outside the timed span)."""
    api = endpoint.api
    began = time.perf_counter()
    async with endpoint.session.post(api.path, data=body, headers=headers) as resp:
        received = bytearray(await resp.content.readany())
        first = time.perf_counter()
        while chunk := await resp.content.readany():
            received += chunk
        done = time.perf_counter()
        status, receipt = resp.status, resp.headers.get("X-Memory-Receipt")
    if status != 200:
        raise BenchError(f"{api.name} request failed: "
                         f"{api_error_message(status, bytes(received))}")
    text, question = api.answer(bytes(received), stream), asked(body)
    if f"echo: {question}" not in text:
        raise BenchError(f"{api.name} answered {text[:300]!r}, not the echo of {question!r}")
    return Timing((done - began) * 1000, (first - began) * 1000, receipt)


@dataclass(frozen=True)
class Pair:
    """One round's requests for one proxy target: ``body`` to it and ``direct`` to its
    direct partner (the same question), both with ``headers``."""

    body: bytes
    direct: bytes
    headers: dict[str, str]


async def run_scenario(targets: Mapping[str, Endpoint], scenario: Scenario,
                       settings: Settings, ask: Questions) -> Outcome:
    """Warm up, then time every round's pair for each proxy target, in blocks of
    ``BLOCK_ROUNDS`` rounds per target (see the module docstring), the order within
    each pair alternating (direct first, then the proxy first)."""
    outcome = Outcome(scenario)
    proxies = [t for t in PARTNERS if t in targets]
    rounds = settings.warmup + settings.requests
    plan = [round_pairs(scenario, ask, i, settings) for i in range(rounds)]
    bar = tqdm(total=rounds * len(proxies), desc=scenario.name, unit="round", leave=False)
    for start in range(0, rounds, BLOCK_ROUNDS):
        # the targets' order flips from block to block: a block runs while memory forms
        # what the block before it stored, and that work must not always fall on one
        for target in proxies if start // BLOCK_ROUNDS % 2 == 0 else proxies[::-1]:
            for i in range(start, min(start + BLOCK_ROUNDS, rounds)):
                pair = plan[i]["door" if target == "door" else "chat"]
                sends = [(PARTNERS[target], pair.direct), (target, pair.body)]
                for name, body in sends if i % 2 == 0 else sends[::-1]:
                    timing = await timed_post(targets[name], body, pair.headers,
                                              scenario.stream)
                    if i >= settings.warmup:
                        counted = target if name == target else DIRECT_SAMPLES[target]
                        record(outcome, counted, timing)
                bar.update()
    bar.close()
    return outcome


def round_pairs(scenario: Scenario, ask: Questions, i: int,
                settings: Settings) -> dict[str, Pair]:
    """Round ``i``'s pairs: ``chat`` for areamem's and LiteLLM's chat (one question),
    and with ``--api`` ``door`` for the door (a question of its own, in its own
    conversation; its direct partner gets what areamem sends upstream for it: the door's
    request when native, the same question as a chat completion when bridged)."""
    stream, chat = scenario.stream, APIS["chat"]
    # the same tag for both but its last letter: the question's words (which retrieval
    # looks up) and the echo's length (chunks streamed back) must not depend on the door
    text = ask(scenario.memory, f"{scenario.name} #{i}a")
    pairs = {"chat": Pair(chat.body(text, stream), chat.body(text, stream),
                          round_headers(scenario))}
    if settings.door:
        door = APIS[settings.api]
        upstream = door if settings.native else chat
        text = ask(scenario.memory, f"{scenario.name} #{i}b")
        pairs["door"] = Pair(door.body(text, stream), upstream.body(text, stream),
                             {**round_headers(scenario), **door.headers})
    return pairs


def round_headers(scenario: Scenario) -> dict[str, str]:
    """A round's headers: memory as the scenario says, a new conversation."""
    return {"Content-Type": "application/json",
            "X-Memory": "force" if scenario.memory else "off",
            "X-Conversation-Id": f"bench-{secrets.token_hex(8)}"}


def record(outcome: Outcome, samples: str, timing: Timing) -> None:
    """``timing`` into the outcome's ``samples`` (a target's, or a direct partner's),
    and its receipt when that target is areamem's."""
    target: Samples = getattr(outcome, samples)
    target.add(timing)
    receipts = outcome.memory.get(samples)
    if receipts is not None and timing.receipt is not None:
        receipts.ids.append(timing.receipt)


async def read_receipts(session: aiohttp.ClientSession, receipts: Receipts) -> None:
    """Fetch a target's receipts (after the scenario, outside the timed rounds): how
    many fragments and tokens the last one injected, and the median of every stage
    timing of all of them (where areamem's added time went)."""
    stages: dict[str, list[float]] = {}
    data: dict[str, Any] = {}
    for receipt_id in receipts.ids:
        async with session.get(f"/memory/receipts/{receipt_id}") as resp:
            body = await resp.read()
        if resp.status != 200:
            raise BenchError(f"receipt {receipt_id}: {api_error_message(resp.status, body)}")
        data = json.loads(body)
        area = data.get("graph_area") or {}
        timed = [(k, v) for k, v in (data.get("timings_ms") or {}).items()]
        timed += [(f"area.{k}", v) for k, v in (area.get("timings_ms") or {}).items()]
        for name, value in timed:
            stages.setdefault(name.removesuffix("_ms"), []).append(float(value))
    receipts.injected_fragments = sum(1 for f in data["area"]["fragments"] if f.get("shown"))
    receipts.injected_tokens = int(data["tokens"])
    receipts.stages_ms = {name: statistics.median(v) for name, v in stages.items()}


@dataclass(frozen=True)
class Report:
    """Everything measured, ready for the table and the JSON file."""

    settings: Settings
    machine: dict[str, Any]
    preload: Preload
    outcomes: list[Outcome]
    litellm_version: str | None = None


async def benchmark(stack: LocalStack, settings: Settings, pool: Sequence[str] = (),
                    litellm_version: str | None = None, kept: Preload | None = None) -> Report:
    """Preload through the proxy (unless ``kept``: the stack serves a kept store), then
    measure every scenario; ``pool`` holds the memory-on questions of
    ``--preload-locomo`` (empty: synthetic)."""
    async with contextlib.AsyncExitStack() as sessions:
        targets = await open_targets(sessions, stack, settings)
        # the preload and the receipts on connections of their own: chat clients' pooled
        # connections carry chat requests only (as an SDK's do), which the front serves
        admin = await sessions.enter_async_context(client_session(stack.proxy_url))
        if kept is None:
            loaded = await preload(admin, settings, pool)
        else:
            loaded = kept
            await graph_read(admin, loaded.probe)
        print_preload(loaded, None if kept is None else settings.store)
        ask = Questions(random.Random(settings.seed + 1), pool)
        outcomes = await measure(targets, admin, settings, ask)
    return Report(settings, machine(), loaded, outcomes, litellm_version)


async def open_targets(sessions: contextlib.AsyncExitStack, stack: LocalStack,
                       settings: Settings) -> dict[str, Endpoint]:
    """A session per target: chat direct and through areamem, LiteLLM's with
    ``--compare-litellm``, and with ``--api`` the door and its direct partner."""
    async def endpoint(url: str, api: Api, headers: Mapping[str, str] = BENCH_AUTH) -> Endpoint:
        return Endpoint(await sessions.enter_async_context(client_session(url, headers)), api)

    chat = APIS["chat"]
    targets = {"direct": await endpoint(stack.upstream_url, chat),
               "proxy": await endpoint(stack.proxy_url, chat)}
    if stack.litellm:
        key = {"Authorization": f"Bearer {stack.litellm_key}"}
        targets["litellm"] = await endpoint(stack.litellm_url, chat, key)
    if settings.door:
        door = APIS[settings.api]
        targets["door"] = await endpoint(stack.proxy_url, door)
        targets["door_direct"] = await endpoint(stack.upstream_url,
                                                door if settings.native else chat)
    return targets


async def measure(targets: Mapping[str, Endpoint], admin: aiohttp.ClientSession,
                  settings: Settings, ask: Questions) -> list[Outcome]:
    outcomes = []
    for scenario in SCENARIOS:
        outcome = await run_scenario(targets, scenario, settings, ask)
        for receipts in outcome.memory.values():
            if receipts.ids:
                await read_receipts(admin, receipts)
        outcomes.append(outcome)
    return outcomes


# --- report -------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"cores": os.cpu_count(), "usable_cores": usable, "platform": platform.platform(),
            "python": platform.python_version(), "aiohttp": aiohttp.__version__}


def summary_stats(values: Sequence[float]) -> dict[str, float]:
    return {"n": len(values), "p50": percentile(values, 50), "p90": percentile(values, 90),
            "p99": percentile(values, 99), "mean": statistics.fmean(values) if values else math.nan,
            "min": min(values, default=math.nan), "max": max(values, default=math.nan)}


def added(outcome: Outcome, q: float, ttfb: bool = False, target: str = "proxy") -> float:
    """A target's percentile minus the percentile of the direct requests paired with it
    (ms); ``target`` is ``proxy`` (areamem's chat), ``litellm`` or ``door``."""
    through: Samples = getattr(outcome, target)
    direct: Samples = getattr(outcome, DIRECT_SAMPLES[target])
    if ttfb:
        return percentile(through.ttfb_ms, q) - percentile(direct.ttfb_ms, q)
    return percentile(through.total_ms, q) - percentile(direct.total_ms, q)


def door_gap(outcome: Outcome, q: float, ttfb: bool = False) -> float:
    """The door's added latency minus chat's at percentile ``q`` (ms)."""
    return added(outcome, q, ttfb, target="door") - added(outcome, q, ttfb)


def ratio(outcome: Outcome, q: float) -> float | None:
    """areamem's added latency over LiteLLM's at percentile ``q``; None when LiteLLM was
    not measured or added nothing measurable."""
    theirs = added(outcome, q, target="litellm")
    if not outcome.compared or not theirs > 0:
        return None
    return added(outcome, q) / theirs


def format_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def target_ms(scenario: Scenario) -> float:
    return TARGET_ON_MS if scenario.memory else TARGET_OFF_MS


def door_label(settings: Settings) -> str:
    return f"{settings.api} ({'native' if settings.native else 'bridged'})"


def table(outcomes: Sequence[Outcome]) -> str:
    if any(o.compared for o in outcomes):
        return comparison_table(outcomes)
    if any(o.doored for o in outcomes):
        return door_table(outcomes)
    headers = ("scenario (ms)", "direct p50", "direct p99", "proxy p50", "proxy p99",
               "added p50", "added p99", "TTFB added p50")
    rows = []
    for o in outcomes:
        d, p = o.direct.total_ms, o.proxy.total_ms
        rows.append((
            o.scenario.name, format_ms(percentile(d, 50)), format_ms(percentile(d, 99)),
            format_ms(percentile(p, 50)), format_ms(percentile(p, 99)),
            format_ms(added(o, 50), signed=True), format_ms(added(o, 99), signed=True),
            format_ms(added(o, 50, ttfb=True), signed=True) if o.scenario.stream else "-",
        ))
    return render_table(headers, rows)


def comparison_table(outcomes: Sequence[Outcome]) -> str:
    """Direct p50 in each proxy's pairs, areamem added and LiteLLM added (p50, p99), and
    areamem/LiteLLM."""
    headers = ("scenario (ms)", "direct p50 (areamem/LiteLLM pairs)", "areamem added p50",
               "p99", "LiteLLM added p50", "p99", "areamem/LiteLLM p50", "p99")
    rows = []
    for o in outcomes:
        direct = (f"{format_ms(percentile(o.direct.total_ms, 50))} / "
                  f"{format_ms(percentile(o.litellm_direct.total_ms, 50))}")
        rows.append((
            o.scenario.name, direct,
            format_ms(added(o, 50), signed=True), format_ms(added(o, 99), signed=True),
            format_ms(added(o, 50, target="litellm"), signed=True),
            format_ms(added(o, 99, target="litellm"), signed=True),
            format_ratio(ratio(o, 50)), format_ratio(ratio(o, 99)),
        ))
    return render_table(headers, rows)


def door_table(outcomes: Sequence[Outcome]) -> str:
    """Direct p50 in chat's and the door's pairs, each one's added latency (p50, p99),
    and the door's minus chat's (p50, p99, and TTFB p50 for streams)."""
    headers = ("scenario (ms)", "direct p50 (chat/door pairs)", "chat added p50", "p99",
               "door added p50", "p99", "door-chat p50", "p99", "TTFB door-chat p50")
    rows = []
    for o in outcomes:
        direct = (f"{format_ms(percentile(o.direct.total_ms, 50))} / "
                  f"{format_ms(percentile(o.door_direct.total_ms, 50))}")
        rows.append((
            o.scenario.name, direct,
            format_ms(added(o, 50), signed=True), format_ms(added(o, 99), signed=True),
            format_ms(added(o, 50, target="door"), signed=True),
            format_ms(added(o, 99, target="door"), signed=True),
            format_ms(door_gap(o, 50), signed=True), format_ms(door_gap(o, 99), signed=True),
            format_ms(door_gap(o, 50, ttfb=True), signed=True) if o.scenario.stream else "-",
        ))
    return render_table(headers, rows)


def target_lines(outcomes: Sequence[Outcome], door: str = "") -> list[str]:
    """Chat's targets per memory setting; with ``door`` (its label), the door's."""
    lines = []
    for memory in (False, True):
        chosen = [o for o in outcomes if o.scenario.memory is memory]
        limit = TARGET_ON_MS if memory else TARGET_OFF_MS
        parts = [f"{o.scenario.name.split(',')[0]} {format_ms(added(o, 50), signed=True)} ms "
                 f"{'met' if added(o, 50) <= target_ms(o.scenario) else 'MISSED'}"
                 for o in chosen]
        lines.append(f"target: added p50 <= {limit:g} ms with memory {'on' if memory else 'off'}"
                     f": {', '.join(parts)}")
    if door:
        parts = [f"{o.scenario.name} {format_ms(door_gap(o, 50), signed=True)} ms "
                 f"{'met' if door_gap(o, 50) <= TARGET_DOOR_MS else 'MISSED'}"
                 for o in outcomes]
        lines.append(f"target: {door} added p50 within {TARGET_DOOR_MS:g} ms of chat's "
                     f"(door - chat): {'; '.join(parts)}")
    return lines


def memory_lines(outcomes: Sequence[Outcome], door: str = "") -> list[str]:
    lines = []
    for o in outcomes:
        if not o.scenario.memory:
            continue
        for target, label in (("proxy", ""), ("door", f" through {door}")):
            receipts, samples = o.memory[target], getattr(o, target)
            if not samples.total_ms:
                continue
            lines.append(
                f"{o.scenario.name}{label}: receipt on {len(receipts.ids)}/"
                f"{len(samples.total_ms)} proxied requests; the last one injected "
                f"{receipts.injected_fragments} fragments ({receipts.injected_tokens} tokens)"
            )
            if receipts.stages_ms:
                stages = ", ".join(f"{k} {v:.2f}" for k, v in receipts.stages_ms.items()
                                   if k != "total")
                lines.append(f"  stage medians in its receipts (ms): {stages}")
    return lines


def print_preload(loaded: Preload, kept_in: str | None = None) -> None:
    if kept_in is not None:
        print(f"preload kept in {kept_in} (a copy served), made as follows:")
    print(f"preload ({loaded.source}): {loaded.turns:,} turns in {loaded.conversations} "
          f"conversations via /memory/ingest in {loaded.seconds:.1f} s "
          f"({loaded.turns / max(loaded.seconds, 1e-9):,.0f} turns/s); "
          f"fragments formed: {loaded.fragments_formed:,}")
    print(f"probe search {loaded.probe!r}: {loaded.probe_hits} hits in "
          f"{loaded.probe_search_ms:.2f} ms (server side)", flush=True)


def pairing(report: Report) -> str:
    """How the targets were interleaved, in words."""
    if report.litellm_version:
        return ("direct/areamem and direct/LiteLLM pairs in alternating blocks of "
                f"{BLOCK_ROUNDS} rounds")
    if report.settings.door:
        return (f"direct/chat and direct/{door_label(report.settings)} pairs in "
                f"alternating blocks of {BLOCK_ROUNDS} rounds")
    return "alternating direct/proxy"


def print_report(report: Report) -> None:
    s = report.settings
    door = door_label(s) if s.door else ""
    print(f"\n{s.requests} requests per target and scenario after {s.warmup} warm-up rounds, "
          f"sequential, {pairing(report)}; retrieval {s.retrieval}; "
          f"encoder {s.encoder or 'the default'}; "
          f"{'' if s.ingest else 'memory-on exchanges not stored (--no-ingest); '}"
          f"medians are the figures to quote\n")
    if report.litellm_version:
        print(f"LiteLLM {report.litellm_version}: its proxy, one uvicorn worker, master key, "
              "offline, no database; it has no memory (X-Memory means nothing to it)\n")
    if door:
        partner = f"the upstream's own {APIS[s.api].path}" if s.native else "direct chat"
        print(f"door: {APIS[s.api].path}, {door}; its direct partner: {partner}\n")
    print(table(report.outcomes))
    print()
    for line in [*memory_lines(report.outcomes, door), *target_lines(report.outcomes, door)]:
        print(line)


def to_json(report: Report) -> dict[str, Any]:
    return {"settings": dataclasses.asdict(report.settings), "machine": report.machine,
            "litellm_version": report.litellm_version,
            "preload": dataclasses.asdict(report.preload),
            "scenarios": [scenario_json(o) for o in report.outcomes]}


def scenario_json(o: Outcome) -> dict[str, Any]:
    """One row: every figure of the table and the raw samples."""
    targets = ["direct", "proxy"]
    targets += ["litellm", "litellm_direct"] if o.compared else []
    targets += ["door", "door_direct"] if o.doored else []
    row: dict[str, Any] = {**dataclasses.asdict(o.scenario)}
    for target in targets:
        samples: Samples = getattr(o, target)
        row[target] = {"total_ms": summary_stats(samples.total_ms),
                       "ttfb_ms": summary_stats(samples.ttfb_ms)}
    row.update({
        "added_p50_ms": added(o, 50), "added_p99_ms": added(o, 99),
        "ttfb_added_p50_ms": added(o, 50, ttfb=True),
        "target_added_p50_ms": target_ms(o.scenario),
        "target_met": added(o, 50) <= target_ms(o.scenario),
        **receipts_json(o.memory["proxy"]),
    })
    if o.compared:
        row.update({
            "litellm_added_p50_ms": added(o, 50, target="litellm"),
            "litellm_added_p99_ms": added(o, 99, target="litellm"),
            "litellm_ttfb_added_p50_ms": added(o, 50, ttfb=True, target="litellm"),
            "ratio_added_p50": ratio(o, 50), "ratio_added_p99": ratio(o, 99),
        })
    if o.doored:
        row.update({
            "door_added_p50_ms": added(o, 50, target="door"),
            "door_added_p99_ms": added(o, 99, target="door"),
            "door_ttfb_added_p50_ms": added(o, 50, ttfb=True, target="door"),
            "door_minus_chat_p50_ms": door_gap(o, 50),
            "door_minus_chat_p99_ms": door_gap(o, 99),
            "door_minus_chat_ttfb_p50_ms": door_gap(o, 50, ttfb=True),
            "door_target_minus_chat_p50_ms": TARGET_DOOR_MS,
            "door_target_met": door_gap(o, 50) <= TARGET_DOOR_MS,
            "door_memory": receipts_json(o.memory["door"]),
        })
    row["samples_ms"] = {t: [round(v, 4) for v in getattr(o, t).total_ms] for t in targets}
    return row


def receipts_json(receipts: Receipts) -> dict[str, Any]:
    return {"receipts": len(receipts.ids), "injected_fragments": receipts.injected_fragments,
            "injected_tokens": receipts.injected_tokens,
            "receipt_stage_p50_ms": receipts.stages_ms}


# --- command line -------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Latency added by the areamem proxy.")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 1,000 fragments, 40 requests, 10 warm-up rounds")
    parser.add_argument("--fragments", type=int, help="turns preloaded (default: 10,000)")
    parser.add_argument("--turns-per-conversation", type=int, default=20,
                        help="turns per preloaded conversation (default: 20)")
    parser.add_argument("--requests", type=int, help="requests per target and scenario "
                        "(default: 300)")
    parser.add_argument("--warmup", type=int, help="warm-up rounds per scenario (default: 30)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default: 7)")
    parser.add_argument("--formation-workers", type=int, default=1,
                        help="memory.formation_workers of the proxy (default 1, as shipped)")
    parser.add_argument("--no-ingest", action="store_true",
                        help="memory-on chats do not store their exchange (memory.ingest: "
                        "false): the lookup's cost without the formation that follows it")
    parser.add_argument("--retrieval", choices=("bm25", "area"), default="bm25",
                        help="the proxy's memory.retrieval (default: bm25)")
    parser.add_argument("--preload-locomo", type=Path, metavar="FILE",
                        help="preload a LoCoMo file's conversations and ask its questions "
                        "with memory on (instead of synthetic turns)")
    parser.add_argument("--compare-litellm", action="store_true",
                        help=f"also time LiteLLM's proxy in front of the same upstream "
                        f"(needs litellm[proxy]: {BENCH_EXTRA})")
    parser.add_argument("--store", type=Path, metavar="DIR",
                        help="keep the preloaded store in DIR and reuse it in later runs "
                        "with the same preload settings (see the module docstring)")
    parser.add_argument("--api", choices=tuple(APIS), default="chat",
                        help="also time this front door against chat completions "
                        "(default: chat only)")
    parser.add_argument("--native", action="store_true",
                        help="with --api responses|messages: the upstream serves that API "
                        "itself (config serves: [API]); default: bridged through chat")
    parser.add_argument("--encoder", choices=("e5", "minilm"),
                        help="the proxy's formation.encoder.model (default: the configured "
                        "default, e5); a kept --store is per encoder")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write all figures here")
    args = parser.parse_args(argv)
    if args.native and args.api == "chat":
        parser.error("--native needs --api responses or --api messages")
    if args.compare_litellm and args.api != "chat":
        parser.error("--compare-litellm times chat completions only: leave out --api")
    return args


def settings_from(args: argparse.Namespace) -> Settings:
    quick = args.quick
    settings = Settings(
        fragments=args.fragments if args.fragments is not None else (1_000 if quick else 10_000),
        turns_per_conversation=args.turns_per_conversation,
        requests=args.requests if args.requests is not None else (40 if quick else 300),
        warmup=args.warmup if args.warmup is not None else (10 if quick else 30),
        seed=args.seed,
        retrieval=args.retrieval,
        compare_litellm=args.compare_litellm,
        preload_locomo=str(args.preload_locomo) if args.preload_locomo else None,
        formation_workers=args.formation_workers,
        ingest=not args.no_ingest,
        store=str(args.store) if args.store else None,
        api=args.api,
        native=args.native,
        encoder=args.encoder,
    )
    if min(settings.fragments, settings.turns_per_conversation, settings.requests) < 1:
        raise BenchError("--fragments, --turns-per-conversation and --requests must be >= 1")
    if settings.warmup < 0:
        raise BenchError("--warmup must be >= 0")
    return settings


def memory_questions(settings: Settings) -> list[str]:
    """The LoCoMo file's questions with ``--preload-locomo``, read before anything starts."""
    if settings.preload_locomo is None:
        return []
    pool = locomo_questions(Path(settings.preload_locomo))
    if not pool:
        raise BenchError(f"{settings.preload_locomo} holds no questions")
    return pool


def main(argv: Sequence[str] | None = None) -> int:
    sigterm_as_interrupt()
    args = parse_args(argv)
    try:
        settings = settings_from(args)
        version = require_litellm_proxy() if settings.compare_litellm else None
        pool = memory_questions(settings)
        info = machine()
        print(f"machine: {info['cores']} cores ({info['usable_cores']} usable), "
              f"{info['platform']}, Python {info['python']}, aiohttp {info['aiohttp']}")
        with tempfile.TemporaryDirectory(prefix="areamem-bench-") as tmp:
            kept = None
            if settings.store is not None:
                kept = kept_preload(Path(settings.store), settings, pool)
                copy_store(Path(settings.store), Path(tmp))
            serves = (settings.api,) if settings.native else ()
            with LocalStack(Path(tmp), settings.retrieval, settings.compare_litellm,
                            settings.formation_workers, serves=serves,
                            encoder=settings.encoder, ingest=settings.ingest) as stack:
                report = asyncio.run(benchmark(stack, settings, pool, version, kept))
    except BenchError as exc:
        print(f"bench_overhead: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench_overhead: interrupted; servers stopped", file=sys.stderr)
        return 130
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(to_json(report), indent=2), encoding="utf-8")
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
