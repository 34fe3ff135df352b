"""A tenant-sharded areamem cluster on one machine: HAProxy in front of N nodes, each
replicating its tenants with Litestream to a shared ``file://`` replica; one node is
SIGKILLed mid-traffic and the script proves what the cluster kept (docs/scaling.md).

What runs (child processes on free loopback ports, in a temporary folder): the fake
upstream (``proxy.fake_upstream``), N nodes (``python -m proxy serve``, each with its own
data folder and a ``cluster:`` section naming it, the shared replica folder and the lease
timings; each node runs its own ``litestream replicate``), and HAProxy with a config made
from ``deploy/haproxy.cfg`` (same balance rules, checks and timeouts; only the ``bind``
addresses and the ``server`` lines are rewritten, see :func:`haproxy_config`).

The failover scenario (the default; ``--check`` makes a failed check exit 1):

1. ``--clients`` clients chat for ``--tenants`` tenants through HAProxy for ``--seconds``;
   every exchange is a unique fact ``Fact <tenant>-<n>: the parcel <marker> ...`` (the
   marker a single searchable word), sent with ``Authorization: Bearer`` or ``x-api-key``
   in turn (both must reach the same node). HAProxy names the node that answered in
   ``X-Served-By``.
2. The node that served the most tenants is SIGKILLed with its whole process group (its
   Litestream and formation workers die with it, as when a machine goes away).
3. Traffic goes on for ``--seconds`` more; for each of the killed node's tenants a probe
   asks about one of its facts answered before the kill (``X-Memory: force``) until the
   receipt (``GET /memory/receipts/{id}``) shows a fragment holding such a fact: the
   seconds from the kill to that answer are the tenant's "memory again" time.
4. Traffic stops; once the live nodes' formation queues drain and a sync interval has
   passed, every answered exchange is looked up in the log of the database of the node
   that holds its tenant now (``<data_dir>/tenants/<tenant>.db``, read-only), and the
   killed node's tenants are also searched through HAProxy (``GET /memory/search``).

Checks: no exchange lost that was answered more than one sync interval before the kill;
none lost that a live node answered; every tenant of the killed node has memory again
within 10 s; no tenant held by two nodes at once (the ``lease`` lines of every node's
``logs/proxy.jsonl``: per tenant and node the intervals from ``acquired`` to
``released``/``lost``, or to the kill, or to the end; epochs only increase). A tenant
answered by two nodes in interleaved spans (routing moved it back and forth) is reported
beside them. Replication lag is ``areamem_replication_lag_seconds`` scraped from the live
nodes every 0.5 s.

``--throughput``: requests/s at memory on with ``--clients`` (default 50) clients for
``--seconds``: one node alone, direct; then the N-node cluster through HAProxy and the same
cluster with every request sent straight to its tenant's node (in alternating halves). The
latency HAProxy itself adds is timed first, on the idle cluster: one client, PAIRS chats for
one tenant back to back, through HAProxy and direct in alternating order (p50/p95 of the
difference); the difference at load is reported beside it.

Usage (from the project root, with the project's virtual environment; needs ``haproxy``
on PATH and ``litestream`` in the virtual environment)::

    python scripts/cluster.py --nodes 3 --check
    python scripts/cluster.py --nodes 3 --throughput --seconds 20 --json tp.json

Everything listens on 127.0.0.1; the children are stopped on exit, error, Ctrl-C and
SIGTERM, and the temporary folder is removed (``--workdir`` keeps it).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from _common import (
    answer_text,
    api_error_message,
    output_file,
    percentile,
    prometheus_samples,
    render_table,
    sigterm_as_interrupt,
    stored_turns,
)
from bench_overhead import HOST, MODEL, ROOT, BenchError, Service, free_port, wait_ready
from load import work_folder
from pydantic import ValidationError

from proxy.config import ClusterConfig

TEMPLATE = ROOT / "deploy" / "haproxy.cfg"
BACKEND = "areamem_nodes"
MEMORY_DEADLINE_S = 10.0
"""Every tenant of the killed node must answer with its memory again within this long."""
PROBE_TIMEOUT_S = 30.0
READY_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 120.0
LAG_INTERVAL_S = 0.5
LAG_METRIC = "areamem_replication_lag_seconds"
PAIRS = 200
"""Back-to-back chats (HAProxy, direct) timed for the routing layer's own latency."""
MARKER = re.compile(r"\bt\d+q\d{5}\b")
PLACES = ("Lisbon", "Oslo", "Quito", "Kyoto", "Accra", "Perth", "Tartu", "Cusco")


class ClusterError(BenchError):
    """The cluster cannot be run: a tool is missing or a child did not start."""


# --- configuration (pure) -----------------------------------------------------------------


@dataclass(frozen=True)
class Timings:
    """The ``cluster:`` timings every node gets."""

    sync_interval_s: float = 1.0
    lease_ttl_s: float = 4.0
    lease_renew_s: float = 1.0
    idle_release_s: float = 30.0


def tenant_names(count: int) -> list[str]:
    """``t00``, ``t01``, ...: valid tenant names that sort in order."""
    return [f"t{i:02d}" for i in range(count)]


def proxy_key(tenant: str) -> str:
    return f"sk-cluster-{tenant}"


def node_document(
    name: str, port: int, data_dir: Path, upstream_v1: str, tenants: Sequence[str],
    replica: Path, timings: Timings, retrieval: str,
) -> dict[str, Any]:
    """One node's config: keys for every tenant, memory consulted on every request, and
    the ``cluster:`` section (its own Litestream child: ``litestream_socket`` null)."""
    return {
        "server": {"host": HOST, "port": port, "data_dir": str(data_dir)},
        "auth": {"mode": "keys", "keys": {proxy_key(t): t for t in tenants}},
        "upstreams": [{"model": "*", "provider": "openai", "api_base": upstream_v1,
                       "timeout_s": REQUEST_TIMEOUT_S}],
        "logging": {"stdout": False, "file": True},
        "memory": {"retrieval": retrieval, "formation_workers": 0},
        "policy": {"budget_tokens": 600, "max_fragments": 8, "rules": [{"type": "always"}],
                   "dream": {"enabled": False}},
        "cluster": {"node": name, "replica": replica.resolve().as_uri(),
                    **dataclasses.asdict(timings), "litestream_socket": None},
    }


def haproxy_config(
    template: str, *, bind: str, stats_bind: str, servers: Sequence[tuple[str, str]]
) -> str:
    """``template`` (deploy/haproxy.cfg) for a local cluster: the ``bind`` of ``frontend
    areamem`` and of ``frontend stats`` replaced, the backend's ``server`` lines replaced by
    one per ``(name, host:port)`` with the first one's options and ids 1..N (less its DNS
    options), the ``resolvers`` section dropped. Every other line is kept as written."""
    out: list[str] = []
    section: tuple[str, ...] = ()
    pattern: list[str] | None = None
    for line in template.splitlines():
        head = line.split()
        if line and not line[0].isspace() and head and not head[0].startswith("#"):
            section = tuple(head[:2])
        if section[:1] == ("resolvers",):
            continue
        if head[:1] == ["bind"] and section in (("frontend", "areamem"), ("frontend", "stats")):
            line = f"    bind {bind if section[1] == 'areamem' else stats_bind}"
        elif head[:1] == ["server"] and section == ("backend", BACKEND):
            if pattern is None:
                pattern = _server_options(head[3:])
                out.extend(f"    server {name} {address} id {i} {' '.join(pattern)}".rstrip()
                           for i, (name, address) in enumerate(servers, 1))
            continue
        out.append(line)
    if pattern is None:
        raise ValueError(f"the template has no server line in backend {BACKEND}")
    return "\n".join(out) + "\n"


def _server_options(tokens: Sequence[str]) -> list[str]:
    """A server line's options less those naming it or its DNS (id, resolvers, init-addr)."""
    kept: list[str] = []
    skip = False
    for token in tokens:
        if skip:
            skip = False
        elif token in ("id", "resolvers", "init-addr"):
            skip = True
        else:
            kept.append(token)
    return kept


@dataclass(frozen=True)
class Exchange:
    """One chat as a client saw it. ``answered_at`` is wall-clock seconds (the node logs'
    clock); ``node`` the ``X-Served-By`` HAProxy added."""

    tenant: str
    n: int
    marker: str
    node: str | None
    answered_at: float
    answered: bool
    latency_ms: float
    error: str | None = None


# --- lease intervals and the two-writers check (pure) --------------------------------------


@dataclass(frozen=True)
class LeaseEvent:
    """One ``{"event": "lease"}`` line of a node's log."""

    ts: float
    node: str
    tenant: str
    epoch: int
    action: str


@dataclass(frozen=True)
class Holding:
    """A node held a tenant's lease from ``start`` to ``end`` (wall-clock seconds)."""

    tenant: str
    node: str
    epoch: int
    start: float
    end: float
    until: str
    """What ended it: released, lost, reacquired, killed or end (still held)."""


@dataclass(frozen=True)
class Overlap:
    """Two nodes held (or answered for) one tenant at once for ``seconds``."""

    tenant: str
    first: str
    second: str
    start: float
    seconds: float


def lease_events(lines: Iterable[str], node: str) -> list[LeaseEvent]:
    """The lease lines of one node's ``proxy.jsonl`` (other lines, bad JSON, and an epoch
    that is no integer or a time that is not finite skipped)."""
    events = []
    for line in lines:
        try:
            record = json.loads(line)
            if record.get("event") != "lease":
                continue
            at, epoch = _event_time(record), record["epoch"]
            if isinstance(epoch, bool) or not isinstance(epoch, int) or not math.isfinite(at):
                continue
            events.append(LeaseEvent(at, str(record.get("node") or node),
                                     str(record["tenant"]), epoch, str(record["action"])))
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
            continue
    return events


def _event_time(record: Mapping[str, Any]) -> float:
    """Epoch seconds of a log line: its ``at`` (the event's own clock), else its ``ts``
    (epoch seconds, or the log's ISO stamp ``2026-12-02T08:30:00.123Z``)."""
    for key in ("at", "ts"):
        value = record.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    stamp = datetime.fromisoformat(str(record["ts"]).replace("Z", "+00:00"))
    return stamp.replace(tzinfo=stamp.tzinfo or UTC).timestamp()


def holdings(events: Iterable[LeaseEvent], ends: Mapping[str, float], end: float) -> list[Holding]:
    """Each node's holding intervals per tenant: ``acquired`` opens one (a ``renewed``
    with none open does too: the log began mid-holding), ``released``/``lost`` close it;
    one still open ends at ``ends[node]`` (the killed node: the kill) or at ``end``."""
    by_pair: dict[tuple[str, str], list[LeaseEvent]] = defaultdict(list)
    for event in events:
        by_pair[(event.tenant, event.node)].append(event)
    found: list[Holding] = []
    for (_, node), pair in sorted(by_pair.items()):
        stop = ends.get(node, end)
        opened: LeaseEvent | None = None
        for event in sorted(pair, key=lambda e: e.ts):
            if event.action == "acquired" or (event.action == "renewed" and opened is None):
                if opened is not None:
                    found.append(_held(opened, event.ts, "reacquired"))
                opened = event
            elif event.action in ("released", "lost") and opened is not None:
                found.append(_held(opened, event.ts, event.action))
                opened = None
        if opened is not None:
            found.append(_held(opened, max(stop, opened.ts), "killed" if node in ends else "end"))
    return found


def _held(opened: LeaseEvent, end: float, until: str) -> Holding:
    return Holding(opened.tenant, opened.node, opened.epoch, opened.ts, end, until)


def overlaps(spans: Iterable[Holding], *, closed: bool = False) -> list[Overlap]:
    """Every pair of intervals of one tenant held by two different nodes that overlap
    (touching ends are no overlap, unless ``closed``: a single answer is a point)."""
    by_tenant: dict[str, list[Holding]] = defaultdict(list)
    for span in spans:
        by_tenant[span.tenant].append(span)
    found = []
    for tenant, items in sorted(by_tenant.items()):
        items.sort(key=lambda h: h.start)
        for i, a in enumerate(items):
            for b in items[i + 1:]:
                seconds = min(a.end, b.end) - max(a.start, b.start)
                if a.node != b.node and (seconds > 0 or (closed and seconds == 0)):
                    found.append(Overlap(tenant, a.node, b.node, max(a.start, b.start), seconds))
    return found


def epoch_problems(events: Iterable[LeaseEvent]) -> list[str]:
    """Epochs must only increase: per tenant, each acquisition's epoch above every earlier
    one, and a renewal never names an epoch other than its node's current holding."""
    problems: list[str] = []
    current: dict[tuple[str, str], int] = {}
    highest: dict[str, tuple[int, str]] = {}
    for e in sorted(events, key=lambda e: e.ts):
        if e.action == "acquired":
            top = highest.get(e.tenant)
            if top is not None and e.epoch <= top[0]:
                problems.append(f"{e.tenant}: {e.node} acquired epoch {e.epoch} after "
                                f"{top[1]} had epoch {top[0]}")
            highest[e.tenant] = max(top or (e.epoch, e.node), (e.epoch, e.node))
            current[(e.tenant, e.node)] = e.epoch
        elif e.action == "renewed":
            held = current.setdefault((e.tenant, e.node), e.epoch)
            if held != e.epoch:
                problems.append(f"{e.tenant}: {e.node} renewed epoch {e.epoch} holding {held}")
    return problems


def answer_spans(exchanges: Iterable[Exchange]) -> list[Holding]:
    """Per tenant and node, the span from its first to its last answered exchange: two
    nodes' spans of one tenant must not interleave (each answer is a write)."""
    times: dict[tuple[str, str], list[float]] = defaultdict(list)
    for x in exchanges:
        if x.answered and x.node:
            times[(x.tenant, x.node)].append(x.answered_at)
    return [Holding(tenant, node, 0, min(ts), max(ts), "answers")
            for (tenant, node), ts in sorted(times.items())]


# --- loss accounting (pure) -----------------------------------------------------------------


@dataclass
class Losses:
    """Answered exchanges not stored, by when and by whom they were answered."""

    answered: int = 0
    stored: int = 0
    before_interval: list[Exchange] = field(default_factory=list)
    """Answered by the killed node more than one sync interval before the kill: must be 0."""
    within_interval: list[Exchange] = field(default_factory=list)
    """Answered by the killed node in the last sync interval before it died: may be lost."""
    live: list[Exchange] = field(default_factory=list)
    """Answered by a node that stayed up: must be 0."""

    @property
    def lost(self) -> int:
        return len(self.before_interval) + len(self.within_interval) + len(self.live)


def classify_losses(
    exchanges: Iterable[Exchange], stored: Mapping[str, set[str]], *,
    killed: str | None, kill_at: float, interval_s: float,
) -> Losses:
    """Which answered exchanges' markers are missing from ``stored`` (tenant -> markers),
    split by the window the replication interval allows."""
    losses = Losses()
    for x in exchanges:
        if not x.answered:
            continue
        losses.answered += 1
        if x.marker in stored.get(x.tenant, set()):
            losses.stored += 1
        elif x.node != killed:
            losses.live.append(x)
        elif x.answered_at < kill_at - interval_s:
            losses.before_interval.append(x)
        else:
            losses.within_interval.append(x)
    return losses


def markers_in(turns: Iterable[tuple[str, str, str]]) -> set[str]:
    """The markers of the facts among ``(conversation, role, text)`` rows: user turns that
    are a fact (a probe that quotes a marker, or the echo of a fact, is not one)."""
    return {m for _, role, text in turns if role == "user" and text.startswith("Fact ")
            for m in MARKER.findall(text)[:1]}


def fact(tenant: str, n: int) -> tuple[str, str]:
    """``(marker, text)`` of a tenant's n-th fact: the marker one searchable word."""
    marker = f"{tenant}q{n:05d}"
    return marker, (f"Fact {tenant}-{n}: the parcel {marker} is kept in "
                    f"{PLACES[n % len(PLACES)]}. Please remember it.")


# --- the cluster's processes -----------------------------------------------------------------


class Cluster:
    """The fake upstream, ``nodes`` areamem nodes and (``haproxy``) HAProxy as child
    processes, each in its own session; :meth:`kill` SIGKILLs a node's process group."""

    def __init__(self, workdir: Path, nodes: int, options: Options, *, haproxy: bool) -> None:
        self.workdir = workdir
        self.names = [f"node-{i}" for i in range(1, nodes + 1)]
        self.tenants = tenant_names(options.tenants)
        self.timings = options.timings
        self.retrieval = options.retrieval
        self.with_haproxy = haproxy
        self.first_token_ms = options.first_token_ms
        self.ports = {name: free_port() for name in self.names}
        self.upstream_port, self.haproxy_port, self.stats_port = (free_port() for _ in "abc")
        self.nodes: dict[str, Service] = {}
        self.services: list[Service] = []
        self.killed: dict[str, float] = {}

    def url(self, node: str) -> str:
        return f"http://{HOST}:{self.ports[node]}"

    @property
    def front_url(self) -> str:
        return f"http://{HOST}:{self.haproxy_port}" if self.with_haproxy else self.url("node-1")

    @property
    def replica(self) -> Path:
        return self.workdir / "replica"

    def data_dir(self, node: str) -> Path:
        return self.workdir / node

    def live(self) -> list[str]:
        return [n for n in self.names if n not in self.killed]

    def __enter__(self) -> Cluster:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start(self) -> None:
        upstream = self._spawn("upstream", [sys.executable, "-m", "proxy.fake_upstream",
                               "--host", HOST, "--port", str(self.upstream_port),
                               "--first-token-ms", f"{self.first_token_ms:g}"])
        wait_ready(upstream, f"http://{HOST}:{self.upstream_port}/v1/models")
        self.replica.mkdir(parents=True, exist_ok=True)
        for name in self.names:
            self.nodes[name] = self._spawn(name, [sys.executable, "-m", "proxy", "serve",
                                                  "--config", str(self._node_config(name))])
        for name in self.names:
            wait_ready(self.nodes[name], f"{self.url(name)}/readyz", READY_TIMEOUT_S)
        if self.with_haproxy:
            self._start_haproxy()

    def _node_config(self, name: str) -> Path:
        document = node_document(name, self.ports[name], self.data_dir(name),
                                 f"http://{HOST}:{self.upstream_port}/v1", self.tenants,
                                 self.replica, self.timings, self.retrieval)
        path = self.workdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        return path

    def _start_haproxy(self) -> None:
        binary = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin")
        if binary is None:
            raise ClusterError("haproxy is not on PATH (apt-get install haproxy)")
        servers = [(name, f"{HOST}:{self.ports[name]}") for name in self.names]
        text = haproxy_config(TEMPLATE.read_text(encoding="utf-8"),
                              bind=f"{HOST}:{self.haproxy_port}",
                              stats_bind=f"{HOST}:{self.stats_port}", servers=servers)
        path = self.workdir / "haproxy.cfg"
        path.write_text(text, encoding="utf-8")
        check = subprocess.run([binary, "-c", "-q", "-f", str(path)], capture_output=True,
                               text=True, check=False)
        if check.returncode != 0:
            raise ClusterError(f"haproxy -c rejected {path}:\n{check.stderr}{check.stdout}")
        service = self._spawn("haproxy", [binary, "-db", "-f", str(path)])
        wait_ready(service, f"http://{HOST}:{self.stats_port}/stats")
        wait_ready(service, f"{self.front_url}/readyz")

    def _spawn(self, name: str, command: list[str]) -> Service:
        log = self.workdir / f"{name}.log"
        handle = log.open("wb")
        venv_bin = str(Path(sys.executable).parent)
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1",
               "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                   stdout=handle, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        service = Service(name, process, log, handle)
        self.services.append(service)
        return service

    def kill(self, node: str) -> float:
        """SIGKILL the node's process group (the node, its Litestream, its workers) and
        return the wall-clock moment."""
        service = self.nodes[node]
        service.signal(signal.SIGKILL)
        at = time.time()
        service.process.wait()
        self.killed[node] = at
        return at

    def stop(self) -> None:
        for service in reversed(self.services):
            service.stop()
        self.services.clear()

    def lease_lines(self, node: str) -> list[str]:
        path = self.data_dir(node) / "logs" / "proxy.jsonl"
        if not path.exists():
            return []
        return path.read_text(encoding="utf-8", errors="replace").splitlines()

    def tenant_db(self, node: str, tenant: str) -> Path:
        return self.data_dir(node) / "tenants" / f"{tenant}.db"


# --- traffic ---------------------------------------------------------------------------------


@dataclass
class Ledger:
    """Every exchange sent, and each tenant's next fact number."""

    exchanges: list[Exchange] = field(default_factory=list)
    numbers: Counter[str] = field(default_factory=Counter)

    def take(self, tenant: str) -> int:
        self.numbers[tenant] += 1
        return self.numbers[tenant]

    def answered(self, tenant: str | None = None) -> list[Exchange]:
        return [x for x in self.exchanges if x.answered and tenant in (None, x.tenant)]


def key_headers(tenant: str, n: int) -> dict[str, str]:
    """The proxy key as ``Authorization: Bearer`` (even n) or ``x-api-key`` (odd n)."""
    key = proxy_key(tenant)
    return {"Authorization": f"Bearer {key}"} if n % 2 == 0 else {"x-api-key": key}


def assignments(tenants: Sequence[str], clients: int) -> list[list[str]]:
    """The tenants each client chats for: every tenant gets at least one client."""
    if clients <= len(tenants):
        return [list(tenants[c::clients]) for c in range(clients)]
    return [[tenants[c % len(tenants)]] for c in range(clients)]


async def chat_once(session: aiohttp.ClientSession, url: str, tenant: str, n: int,
                    stream: bool) -> Exchange:
    """Send the tenant's n-th fact; an exchange is answered when its answer is complete."""
    marker, text = fact(tenant, n)
    headers = {**key_headers(tenant, n), "Content-Type": "application/json",
               "X-Conversation-Id": f"{tenant}-c{n // 5:04d}"}
    body = json.dumps({"model": MODEL, "stream": stream,
                       "messages": [{"role": "user", "content": text}]}).encode()
    began = time.perf_counter()
    node: str | None = None
    try:
        async with session.post(f"{url}/v1/chat/completions", data=body, headers=headers) as resp:
            node = resp.headers.get("X-Served-By")
            raw = await resp.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Exchange(tenant, n, marker, node, time.time(), False,
                        (time.perf_counter() - began) * 1000, type(exc).__name__)
    answer = answer_text(raw, stream) if resp.status == 200 else None
    error = None if answer is not None else api_error_message(resp.status, raw)
    return Exchange(tenant, n, marker, node, time.time(), answer is not None,
                    (time.perf_counter() - began) * 1000, error)


async def client(session: aiohttp.ClientSession, where: Mapping[str, str], tenants: Sequence[str],
                 ledger: Ledger, stop: asyncio.Event, stream_share: float, think_s: float) -> None:
    """Facts for ``tenants`` in turn until ``stop``; ``where`` maps a tenant to a URL."""
    turn = 0
    while not stop.is_set():
        tenant = tenants[turn % len(tenants)]
        turn += 1
        n = ledger.take(tenant)
        stream = (n * 37 % 100) < stream_share * 100
        ledger.exchanges.append(await chat_once(session, where[tenant], tenant, n, stream))
        if think_s:
            await asyncio.sleep(think_s)


@dataclass
class Traffic:
    """Clients chatting in the background until :meth:`stop`."""

    session: aiohttp.ClientSession
    ledger: Ledger
    halt: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self, where: Mapping[str, str], tenants: Sequence[str], clients: int,
              stream_share: float, think_s: float) -> None:
        for share in assignments(tenants, clients):
            self.tasks.append(asyncio.create_task(client(
                self.session, where, share, self.ledger, self.halt, stream_share, think_s)))

    async def stop(self) -> None:
        self.halt.set()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def get_json(session: aiohttp.ClientSession, url: str,
                   headers: Mapping[str, str] | None = None) -> tuple[dict[str, Any], str | None]:
    """The JSON object at ``url`` and the node that answered; BenchError on an error."""
    async with session.get(url, headers=headers) as resp:
        raw = await resp.read()
        node = resp.headers.get("X-Served-By")
    if resp.status != 200:
        raise BenchError(f"GET {url}: {api_error_message(resp.status, raw)}")
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise BenchError(f"GET {url}: not a JSON object")
    return data, node


async def sample_lag(session: aiohttp.ClientSession, cluster: Cluster, halt: asyncio.Event,
                     out: list[tuple[str, float]]) -> None:
    """``areamem_replication_lag_seconds`` of every live node, every LAG_INTERVAL_S."""
    while not halt.is_set():
        for node in cluster.live():
            try:
                async with session.get(f"{cluster.url(node)}/metrics") as resp:
                    text = (await resp.read()).decode("utf-8", "replace")
            except (aiohttp.ClientError, TimeoutError):
                continue
            out.extend((node, value) for value in prometheus_samples(text, LAG_METRIC).values())
        await asyncio.sleep(LAG_INTERVAL_S)


# --- memory again after the kill ---------------------------------------------------------------


def recalled(receipt: Mapping[str, Any], tenant: str, markers: set[str]) -> bool:
    """Whether a receipt's fragments hold one of the tenant's facts ``markers`` (the fact
    itself, not a later question that quotes its marker)."""
    fragments = (receipt.get("area") or {}).get("fragments") or []
    return any(f"Fact {tenant}-" in str(f.get("text")) and markers & set(MARKER.findall(
        str(f.get("text")))) for f in fragments if isinstance(f, dict))


async def memory_again(session: aiohttp.ClientSession, url: str, tenant: str,
                       markers: set[str], kill_at: float) -> float | None:
    """Seconds from the kill until a chat for ``tenant`` through ``url`` is answered with a
    fragment holding one of ``markers`` (None: not within PROBE_TIMEOUT_S)."""
    question = f"What do you remember about the parcel {min(markers)}?"
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": question}]})
    headers = {**key_headers(tenant, 0), "Content-Type": "application/json",
               "X-Memory": "force", "X-Conversation-Id": f"{tenant}-probe"}
    while time.time() < kill_at + PROBE_TIMEOUT_S:
        try:
            async with session.post(f"{url}/v1/chat/completions", data=body,
                                    headers=headers) as resp:
                await resp.read()
                receipt = resp.headers.get("X-Memory-Receipt") if resp.status == 200 else None
            answered_at = time.time()
            if receipt:
                found, _ = await get_json(session, f"{url}/memory/receipts/{receipt}",
                                          key_headers(tenant, 0))
                if recalled(found, tenant, markers):
                    return answered_at - kill_at
        except (aiohttp.ClientError, TimeoutError, BenchError):
            pass
        await asyncio.sleep(0.25)
    return None


# --- the failover scenario -----------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """What to run."""

    nodes: int
    tenants: int
    clients: int
    seconds: float
    stream_share: float
    think_ms: float
    retrieval: str
    first_token_ms: float
    timings: Timings


@dataclass
class Failover:
    """Everything the failover scenario measured."""

    options: Options
    tenants: list[str]
    killed: str | None = None
    kill_at: float = 0.0
    started_at: float = 0.0
    ended_at: float = 0.0
    before: dict[str, str] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)
    memory_again: dict[str, float | None] = field(default_factory=dict)
    losses: Losses = field(default_factory=Losses)
    searched: int = 0
    searchable: int = 0
    lag: list[tuple[str, float]] = field(default_factory=list)
    leases: list[LeaseEvent] = field(default_factory=list)
    lease_overlaps: list[Overlap] = field(default_factory=list)
    epoch_problems: list[str] = field(default_factory=list)
    answer_overlaps: list[Overlap] = field(default_factory=list)
    states: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    drained: bool = False
    db_bytes: dict[str, int] = field(default_factory=dict)
    replica_bytes: int = 0
    replica_files: int = 0
    ledger: Ledger = field(default_factory=Ledger)

    @property
    def victims(self) -> list[str]:
        """The tenants the killed node served before the kill."""
        return [t for t in self.tenants if self.killed and self.before.get(t) == self.killed]


def placement(exchanges: Iterable[Exchange]) -> dict[str, str]:
    """Each tenant's node: the one that answered its last answered exchange."""
    last: dict[str, Exchange] = {}
    for x in exchanges:
        known = last.get(x.tenant)
        if x.answered and x.node and (known is None or x.answered_at >= known.answered_at):
            last[x.tenant] = x
    return {tenant: x.node for tenant, x in last.items() if x.node}


def busiest(where: Mapping[str, str]) -> str | None:
    """The node holding the most tenants (the first by name on a tie)."""
    counts = Counter(where.values())
    return min(counts, key=lambda n: (-counts[n], n)) if counts else None


def session(clients: int) -> aiohttp.ClientSession:
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    connector = aiohttp.TCPConnector(limit=clients + 16)
    return aiohttp.ClientSession(timeout=timeout, connector=connector)


async def failover(cluster: Cluster, options: Options) -> Failover:
    """Chat, SIGKILL the busiest node, chat on while probing its tenants, then settle."""
    report = Failover(options, cluster.tenants)
    front = {t: cluster.front_url for t in cluster.tenants}
    async with session(options.clients) as http:
        halt = asyncio.Event()
        sampler = asyncio.create_task(sample_lag(http, cluster, halt, report.lag))
        report.started_at = time.time()
        traffic = Traffic(http, report.ledger)
        traffic.start(front, cluster.tenants, options.clients, options.stream_share,
                      options.think_ms / 1000)
        await asyncio.sleep(options.seconds)
        report.before = placement(report.ledger.exchanges)
        report.killed = busiest(report.before)
        if report.killed is not None:
            report.kill_at = cluster.kill(report.killed)
            print(f"SIGKILL {report.killed} (served {len(report.victims)} tenants) at "
                  f"{report.kill_at - report.started_at:.1f} s", flush=True)
        await asyncio.gather(probe_victims(http, cluster, report), asyncio.sleep(options.seconds))
        await traffic.stop()
        report.ended_at = time.time()
        report.drained = await drain(http, cluster.front_url, cluster.tenants)
        await asyncio.sleep(2 * options.timings.sync_interval_s + 0.5)
        halt.set()
        await sampler
        report.after = placement(report.ledger.exchanges)
        report.states = await cluster_states(http, cluster)
        await search_victims(http, cluster.front_url, report)
    settle_accounts(cluster, report)
    return report


def pre_kill(report: Failover, tenant: str) -> set[str]:
    """Markers of the tenant's facts the killed node answered more than one sync interval
    (and half a second) before the kill: replicated, so memory must find them."""
    edge = report.kill_at - report.options.timings.sync_interval_s - 0.5
    return {x.marker for x in report.ledger.answered(tenant)
            if x.node == report.killed and x.answered_at < edge}


async def probe_victims(http: aiohttp.ClientSession, cluster: Cluster, report: Failover) -> None:
    victims = [t for t in report.victims if pre_kill(report, t)]
    report.memory_again.update({t: None for t in report.victims})
    found = await asyncio.gather(*(memory_again(http, cluster.front_url, t, pre_kill(report, t),
                                                report.kill_at) for t in victims))
    report.memory_again.update(zip(victims, found, strict=True))


async def drain(http: aiohttp.ClientSession, url: str, tenants: Sequence[str]) -> bool:
    """Wait until no tenant has exchanges queued for formation (``/memory/stats``)."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    pending = list(tenants)
    while pending and time.monotonic() < deadline:
        still = []
        for tenant in pending:
            try:
                stats, _ = await get_json(http, f"{url}/memory/stats", key_headers(tenant, 0))
                if int(stats.get("queued") or 0) > 0:
                    still.append(tenant)
            except (aiohttp.ClientError, TimeoutError, BenchError, ValueError):
                still.append(tenant)
        pending = still
        if pending:
            await asyncio.sleep(0.5)
    return not pending


async def cluster_states(http: aiohttp.ClientSession,
                         cluster: Cluster) -> dict[str, list[dict[str, Any]]]:
    """``GET /cluster/tenants`` of every live node (empty for a node that fails it)."""
    states: dict[str, list[dict[str, Any]]] = {}
    for node in cluster.live():
        try:
            body, _ = await get_json(http, f"{cluster.url(node)}/cluster/tenants")
            states[node] = [t for t in body.get("tenants") or [] if isinstance(t, dict)]
        except (aiohttp.ClientError, TimeoutError, BenchError, ValueError):
            states[node] = []
    return states


async def search_victims(http: aiohttp.ClientSession, url: str, report: Failover) -> None:
    """Search (``/memory/search`` through HAProxy) every replicated fact of the killed node's
    tenants: what the restored memory finds, beside what its log holds."""
    wanted = [(t, m) for t in report.victims for m in sorted(pre_kill(report, t))]
    gate = asyncio.Semaphore(8)

    async def one(tenant: str, marker: str) -> bool:
        async with gate:
            try:
                body, _ = await get_json(http, f"{url}/memory/search?q={marker}&k=5",
                                         key_headers(tenant, 0))
            except (aiohttp.ClientError, TimeoutError, BenchError, ValueError):
                return False
        return any(marker in str(hit.get("text")) for hit in body.get("hits") or [])

    found = await asyncio.gather(*(one(t, m) for t, m in wanted))
    report.searched, report.searchable = len(wanted), sum(found)


def settle_accounts(cluster: Cluster, report: Failover) -> None:
    """Losses from the holders' logs; lease intervals from every node's log."""
    stored: dict[str, set[str]] = {}
    for tenant in report.tenants:
        holder = report.after.get(tenant)
        db = cluster.tenant_db(holder, tenant) if holder else None
        stored[tenant] = markers_in(stored_turns(db)) if db else set()
        report.db_bytes[tenant] = db.stat().st_size if db and db.exists() else 0
    report.losses = classify_losses(report.ledger.exchanges, stored, killed=report.killed,
                                    kill_at=report.kill_at,
                                    interval_s=report.options.timings.sync_interval_s)
    for node in cluster.names:
        report.leases.extend(lease_events(cluster.lease_lines(node), node))
    spans = holdings(report.leases, cluster.killed, report.ended_at)
    report.lease_overlaps = overlaps(spans)
    report.epoch_problems = epoch_problems(report.leases)
    report.answer_overlaps = overlaps(answer_spans(report.ledger.exchanges), closed=True)
    files = [p for p in cluster.replica.rglob("*") if p.is_file() and p.suffix == ".ltx"]
    report.replica_files = len(files)
    report.replica_bytes = sum(p.stat().st_size for p in files)


def failover_checks(report: Failover) -> list[tuple[str, bool, str]]:
    """``(check, passed, detail)`` for the acceptance of issue 15."""
    losses, again = report.losses, report.memory_again
    slowest = max((v for v in again.values() if v is not None), default=None)
    return [
        ("a node was killed with tenants", bool(report.victims),
         f"{report.killed} served {len(report.victims)} tenants"),
        ("no loss answered > 1 sync interval before the kill", not losses.before_interval,
         f"{len(losses.before_interval)} lost"),
        ("no loss answered by a live node", not losses.live, f"{len(losses.live)} lost"),
        (f"memory again within {MEMORY_DEADLINE_S:g} s", bool(again) and all(
            v is not None and v <= MEMORY_DEADLINE_S for v in again.values()),
         f"slowest {_seconds(slowest)}, none: {sum(v is None for v in again.values())}"),
        ("lease lines in the node logs", bool(report.leases), f"{len(report.leases)} lines"),
        ("one lease holder per tenant at a time", not report.lease_overlaps,
         f"{len(report.lease_overlaps)} overlaps"),
        ("lease epochs only increase", not report.epoch_problems,
         f"{len(report.epoch_problems)} problems"),
    ]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


# --- throughput: one node direct vs the cluster through HAProxy ----------------------------------


@dataclass(frozen=True)
class LoadStats:
    """One load phase: answered requests per second and client-side latency."""

    label: str
    clients: int
    seconds: float
    requests: int
    answered: int
    errors: dict[str, int]
    rps: float
    p50_ms: float
    p95_ms: float


async def load_block(http: aiohttp.ClientSession, where: Mapping[str, str], ledger: Ledger,
                     options: Options, seconds: float) -> tuple[list[Exchange], float]:
    """``options.clients`` clients without think time for ``seconds``: what they sent and
    how long it took (until the last answer)."""
    first = len(ledger.exchanges)
    traffic = Traffic(http, ledger)
    began = time.perf_counter()
    traffic.start(where, sorted(where), options.clients, options.stream_share, 0.0)
    await asyncio.sleep(seconds)
    await traffic.stop()
    return ledger.exchanges[first:], time.perf_counter() - began


def load_stats(label: str, clients: int, blocks: Sequence[tuple[list[Exchange], float]]
               ) -> LoadStats:
    """One phase's figures over its blocks."""
    done = [x for exchanges, _ in blocks for x in exchanges]
    elapsed = sum(seconds for _, seconds in blocks)
    answered = [x for x in done if x.answered]
    latency = [x.latency_ms for x in answered]
    errors = Counter(str(x.error)[:80] for x in done if not x.answered)
    return LoadStats(label, clients, elapsed, len(done), len(answered), dict(errors),
                     len(answered) / elapsed, percentile(latency, 50), percentile(latency, 95))


async def paired_latency(http: aiohttp.ClientSession, front: str, owner: Mapping[str, str],
                         ledger: Ledger, pairs: int) -> list[tuple[float, float]]:
    """``(through HAProxy, direct)`` milliseconds of one client's back-to-back chats for the
    same tenant, the order alternating: the routing layer's own latency, on an idle cluster."""
    tenants = sorted(owner)
    found: list[tuple[float, float]] = []
    for i in range(pairs):
        tenant = tenants[i % len(tenants)]
        urls = (front, owner[tenant]) if i % 2 == 0 else (owner[tenant], front)
        timed = {}
        for url in urls:
            exchange = await chat_once(http, url, tenant, ledger.take(tenant), False)
            if exchange.answered:
                timed[url] = exchange.latency_ms
        if len(timed) == 2:
            found.append((timed[front], timed[owner[tenant]]))
    return found


async def warm(http: aiohttp.ClientSession, url: str, tenants: Sequence[str],
               ledger: Ledger) -> dict[str, str]:
    """One fact per tenant through ``url``: places every tenant; returns who holds it."""
    for tenant in tenants:
        exchange = await chat_once(http, url, tenant, ledger.take(tenant), False)
        ledger.exchanges.append(exchange)
        if not exchange.answered:
            raise BenchError(f"warm-up chat for {tenant} failed: {exchange.error}")
    return placement(ledger.exchanges)


@dataclass
class Throughput:
    """The three load phases, the paired latencies and the tenants' placement."""

    phases: list[LoadStats] = field(default_factory=list)
    pairs: list[tuple[float, float]] = field(default_factory=list)
    placement: dict[str, str] = field(default_factory=dict)


async def single_node_load(cluster: Cluster, options: Options, out: Throughput) -> None:
    async with session(options.clients) as http:
        ledger = Ledger()
        await warm(http, cluster.url("node-1"), cluster.tenants, ledger)
        where = {t: cluster.url("node-1") for t in cluster.tenants}
        block = await load_block(http, where, ledger, options, options.seconds)
        out.phases.append(load_stats("one node, direct", options.clients, [block]))


async def cluster_load(cluster: Cluster, options: Options, out: Throughput) -> None:
    async with session(options.clients) as http:
        ledger = Ledger()
        out.placement = await warm(http, cluster.front_url, cluster.tenants, ledger)
        front = {t: cluster.front_url for t in cluster.tenants}
        owner = {t: cluster.url(out.placement[t]) for t in cluster.tenants}
        out.pairs = await paired_latency(http, cluster.front_url, owner, ledger, PAIRS)
        routed: list[tuple[list[Exchange], float]] = []
        direct: list[tuple[list[Exchange], float]] = []
        for _ in range(2):  # alternating halves: drift (formation backlog, caches) hits both
            routed.append(await load_block(http, front, ledger, options, options.seconds / 2))
            direct.append(await load_block(http, owner, ledger, options, options.seconds / 2))
        out.phases.append(load_stats(f"{options.nodes} nodes, HAProxy", options.clients, routed))
        out.phases.append(load_stats(f"{options.nodes} nodes, direct to owner", options.clients,
                                     direct))


def throughput_summary(result: Throughput, options: Options) -> dict[str, Any]:
    single, routed, direct = result.phases
    added = [through - straight for through, straight in result.pairs]
    return {
        "clients": options.clients,
        "rps_one_node_direct": single.rps,
        "rps_cluster_haproxy": routed.rps,
        "rps_cluster_direct": direct.rps,
        "cluster_vs_one_node": routed.rps / single.rps if single.rps else None,
        "haproxy_added_idle_pairs": len(added),
        "haproxy_added_idle_p50_ms": percentile(added, 50),
        "haproxy_added_idle_p95_ms": percentile(added, 95),
        "haproxy_idle_p50_ms": percentile([p[0] for p in result.pairs], 50),
        "direct_idle_p50_ms": percentile([p[1] for p in result.pairs], 50),
        "haproxy_added_loaded_p50_ms": routed.p50_ms - direct.p50_ms,
        "haproxy_added_loaded_p95_ms": routed.p95_ms - direct.p95_ms,
        "tenants_per_node": dict(Counter(result.placement.values())),
    }


# --- report --------------------------------------------------------------------------------------


def lag_stats(samples: Sequence[tuple[str, float]]) -> dict[str, float]:
    values = [v for _, v in samples]
    return {"samples": len(values), "p50_s": percentile(values, 50),
            "p95_s": percentile(values, 95), "max_s": max(values, default=float("nan"))}


def restore_ms(report: Failover, tenant: str) -> float | None:
    """The holder's ``restore_ms`` for the tenant (``/cluster/tenants``), when it says."""
    for entry in report.states.get(report.after.get(tenant, ""), []):
        if entry.get("tenant") == tenant and isinstance(entry.get("restore_ms"), int | float):
            return float(entry["restore_ms"])
    return None


def tenant_table(report: Failover) -> str:
    losses = report.losses
    lost_window = Counter(x.tenant for x in losses.within_interval)
    lost_bad = Counter(x.tenant for x in [*losses.before_interval, *losses.live])
    rows = []
    for t in report.tenants:
        answered = len(report.ledger.answered(t))
        again = report.memory_again.get(t)
        restored = restore_ms(report, t)
        rows.append((t, report.before.get(t, "-"), report.after.get(t, "-"), str(answered),
                     str(answered - lost_window[t] - lost_bad[t]), str(lost_window[t]),
                     str(lost_bad[t]), _seconds(again) if t in report.memory_again else "",
                     "" if restored is None else f"{restored:.0f}"))
    headers = ("tenant", "node before", "node after", "answered", "stored",
               "lost (last interval)", "LOST", "memory again", "restore ms")
    return render_table(headers, rows)


def failover_json(report: Failover) -> dict[str, Any]:
    losses = report.losses
    again = [v for v in report.memory_again.values() if v is not None]
    return {
        "options": dataclasses.asdict(report.options),
        "tenants": len(report.tenants),
        "killed_node": report.killed,
        "killed_node_tenants": report.victims,
        "exchanges_answered": losses.answered,
        "exchanges_stored": losses.stored,
        "exchanges_lost": losses.lost,
        "lost_answered_before_interval": len(losses.before_interval),
        "lost_answered_within_interval": len(losses.within_interval),
        "lost_answered_by_live_nodes": len(losses.live),
        "exchanges_failed": sum(not x.answered for x in report.ledger.exchanges),
        "memory_again_s": report.memory_again,
        "memory_again_max_s": max(again, default=None),
        "restore_ms": {t: restore_ms(report, t) for t in report.victims},
        "killed_tenants_facts_searchable": [report.searchable, report.searched],
        "replication_lag": lag_stats(report.lag),
        "formation_drained": report.drained,
        "db_bytes_mean": sum(report.db_bytes.values()) / max(1, len(report.db_bytes)),
        "replica_ltx_files": report.replica_files,
        "replica_ltx_bytes": report.replica_bytes,
        "replica_files_per_exchange": report.replica_files / max(1, losses.answered),
        "replica_bytes_per_exchange": report.replica_bytes / max(1, losses.answered),
        "run_seconds": report.ended_at - report.started_at,
        "lease_lines": len(report.leases),
        "lease_overlaps": [dataclasses.asdict(o) for o in report.lease_overlaps],
        "epoch_problems": report.epoch_problems,
        "answer_overlaps": [dataclasses.asdict(o) for o in report.answer_overlaps],
        "lost": [dataclasses.asdict(x) for x in [*losses.before_interval, *losses.live]][:100],
        "checks": [{"check": c, "passed": ok, "detail": d} for c, ok, d in failover_checks(report)],
    }


def print_failover(report: Failover) -> None:
    o = report.options
    print(f"\ncluster: {o.nodes} nodes behind HAProxy, {o.tenants} tenants, {o.clients} clients "
          f"(think {o.think_ms:g} ms, stream share {o.stream_share:g}), retrieval {o.retrieval}, "
          f"sync interval {o.timings.sync_interval_s:g} s, lease ttl {o.timings.lease_ttl_s:g} s, "
          f"{o.seconds:g} s before and after the kill\n")
    print(tenant_table(report))
    data = failover_json(report)
    lag = data["replication_lag"]
    print(f"\nanswered {data['exchanges_answered']}, stored {data['exchanges_stored']}, lost "
          f"{data['exchanges_lost']} ({data['lost_answered_within_interval']} in the last sync "
          f"interval before the kill); failed requests {data['exchanges_failed']}; killed "
          f"tenants' facts found by search {report.searchable}/{report.searched}; replication "
          f"lag p50 {lag['p50_s']:.3f} s p95 {lag['p95_s']:.3f} s ({lag['samples']} samples)")
    for overlap in report.lease_overlaps[:20]:
        print(f"TWO WRITERS: {overlap.tenant}: {overlap.first} and {overlap.second} for "
              f"{overlap.seconds:.3f} s from {overlap.start:.3f}")
    for overlap in report.answer_overlaps[:20]:
        print(f"note: {overlap.tenant} answered by {overlap.first} and {overlap.second} in "
              f"interleaved spans from {overlap.start:.3f} (routing moved it back and forth; "
              f"its writes are checked by the leases)")
    for problem in report.epoch_problems[:20]:
        print(f"EPOCH: {problem}")
    for x in [*report.losses.before_interval, *report.losses.live][:20]:
        print(f"LOST: {x.tenant} fact {x.n} answered by {x.node} "
              f"{report.kill_at - x.answered_at:+.2f} s before the kill")
    print()
    for check, ok, detail in failover_checks(report):
        print(f"{'PASS' if ok else 'FAIL'}  {check}: {detail}")


def print_throughput(result: Throughput, options: Options) -> None:
    headers = ("phase", "clients", "requests", "answered", "req/s", "p50 ms", "p95 ms", "errors")
    rows = [(p.label, str(p.clients), str(p.requests), str(p.answered), f"{p.rps:.1f}",
             f"{p.p50_ms:.1f}", f"{p.p95_ms:.1f}", str(sum(p.errors.values())))
            for p in result.phases]
    print(f"\nthroughput at memory on (policy always, retrieval {options.retrieval}), "
          f"{options.tenants} tenants, {options.seconds:g} s per phase\n")
    print(render_table(headers, rows))
    s = throughput_summary(result, options)
    print(f"\ncluster through HAProxy / one node direct: {s['cluster_vs_one_node']:.2f}x; "
          f"tenants per node {s['tenants_per_node']}")
    print(f"latency HAProxy adds, one client, {s['haproxy_added_idle_pairs']} paired chats: "
          f"p50 {s['haproxy_added_idle_p50_ms']:+.2f} ms, p95 "
          f"{s['haproxy_added_idle_p95_ms']:+.2f} ms (chat p50 {s['direct_idle_p50_ms']:.1f} ms "
          f"direct); at {options.clients} clients: p50 {s['haproxy_added_loaded_p50_ms']:+.2f} "
          f"ms, p95 {s['haproxy_added_loaded_p95_ms']:+.2f} ms")


# --- command line --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="An areamem cluster behind HAProxy: failover "
                                     "and throughput on one machine.")
    parser.add_argument("--nodes", type=int, default=3, help="areamem nodes (3)")
    parser.add_argument("--tenants", type=int, default=12, help="tenants (12)")
    parser.add_argument("--clients", type=int, help="concurrent clients (6; --throughput: 50)")
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="traffic before and after the kill; --throughput: per phase (10)")
    parser.add_argument("--stream-share", type=float, default=0.5, help="streamed share (0.5)")
    parser.add_argument("--think-ms", type=float, default=50.0,
                        help="pause between a client's chats in the failover scenario (50)")
    parser.add_argument("--retrieval", choices=("area", "bm25"), default="area")
    parser.add_argument("--first-token-ms", type=float, default=0.0, help="upstream delay (0)")
    parser.add_argument("--sync-interval-s", type=float, default=1.0)
    parser.add_argument("--lease-ttl-s", type=float, default=4.0)
    parser.add_argument("--lease-renew-s", type=float, default=1.0)
    parser.add_argument("--idle-release-s", type=float, default=30.0)
    parser.add_argument("--check", action="store_true", help="exit 1 when a check fails")
    parser.add_argument("--throughput", action="store_true",
                        help="requests/s: one node direct vs the cluster through HAProxy")
    parser.add_argument("--json", type=output_file, metavar="OUT",
                        help="also write the report here")
    parser.add_argument("--workdir", type=Path, help="keep data, configs and logs here (empty)")
    return parser.parse_args(argv)


def options_from(args: argparse.Namespace) -> Options:
    """The run's options, every number checked before anything starts: a NaN or infinite
    ``--seconds`` ran for ever, ``--clients 0`` became 6, a share past 1 ran and reported
    a false failure, and bad lease timings were found by the first node to start."""
    clients = args.clients if args.clients is not None else (50 if args.throughput else 6)
    if args.nodes < 1 or args.tenants < 1 or clients < 1 or not 0 < args.seconds < math.inf:
        raise BenchError("--nodes, --tenants, --clients and --seconds must be positive "
                         "(--seconds finite)")
    if not args.throughput and args.nodes < 2:
        raise BenchError("the failover scenario needs --nodes 2 or more")
    if not 0 <= args.stream_share <= 1:
        raise BenchError(f"--stream-share must be between 0 and 1, not {args.stream_share}")
    for name in ("think_ms", "first_token_ms"):
        if not 0 <= getattr(args, name) < math.inf:
            raise BenchError(f"--{name.replace('_', '-')} must be a finite number >= 0")
    timings = Timings(args.sync_interval_s, args.lease_ttl_s, args.lease_renew_s,
                      args.idle_release_s)
    check_timings(timings)
    return Options(args.nodes, args.tenants, clients, args.seconds, args.stream_share,
                   args.think_ms, args.retrieval, args.first_token_ms, timings)


def check_timings(timings: Timings) -> None:
    """Refuse what the nodes' own validation (``cluster:`` of the config) would refuse,
    naming the option."""
    try:
        ClusterConfig.model_validate(
            {"node": "node-1", "replica": "file:///replica", **dataclasses.asdict(timings)}
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = first["loc"][0] if first["loc"] else ""
        option = f"--{str(where).replace('_', '-')}: " if where else ""
        raise BenchError(f"{option}{first['msg']}") from exc


def run_failover(folder: Path, options: Options) -> Failover:
    with Cluster(folder, options.nodes, options, haproxy=True) as cluster:
        return asyncio.run(failover(cluster, options))


def run_throughput(folder: Path, options: Options) -> Throughput:
    result = Throughput()
    with Cluster(folder / "single", 1, options, haproxy=False) as single:
        asyncio.run(single_node_load(single, options, result))
    with Cluster(folder / "cluster", options.nodes, options, haproxy=True) as cluster:
        asyncio.run(cluster_load(cluster, options, result))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    sigterm_as_interrupt()
    args = parse_args(argv)
    try:
        options = options_from(args)
        with work_folder(args.workdir, "areamem-cluster-") as folder:
            if args.throughput:
                for sub in ("single", "cluster"):
                    (folder / sub).mkdir()
                result = run_throughput(folder, options)
                print_throughput(result, options)
                data: dict[str, Any] = {"options": dataclasses.asdict(options),
                                        "phases": [dataclasses.asdict(p) for p in result.phases],
                                        **throughput_summary(result, options)}
                failed = any(p.answered == 0 for p in result.phases)
            else:
                report = run_failover(folder, options)
                print_failover(report)
                data = failover_json(report)
                failed = not all(ok for _, ok, _ in failover_checks(report))
    except (BenchError, aiohttp.ClientError, OSError) as exc:
        print(f"cluster: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("cluster: interrupted; children stopped", file=sys.stderr)
        return 130
    if args.json:
        args.json.write_text(json.dumps(data, indent=1), encoding="utf-8")
        print(f"report written to {args.json}")
    return 1 if failed and (args.check or args.throughput) else 0


if __name__ == "__main__":
    sys.exit(main())
