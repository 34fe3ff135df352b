"""Query latency, build and merge cost and memory of the graph engine at 10^6 nodes.

What it measures, at each size (10^4 and 10^6 nodes by default, ``--edges-per-node`` 20,
so about 2*10^7 stored edges at full size):

- **build**: ``EdgeList.from_arrays`` (validation and copy) and ``GraphVersion.build`` (CSR
  by source plus the reverse index) on the whole synthetic edge list;
- **queries**: ``--queries`` 3-focus queries (after ``--warmup`` others), each ``pulse``
  (``PulseConfig()``, ``DEFAULT_TRAVERSAL``) then ``select_area`` (``AreaConfig()``);
  latency of the pulse alone and of pulse plus area, p50/p95 in ms, and what a query
  touched (nodes, pushes, edge entries read, activated nodes, size of the chosen area);
- **delta and merge**: ``with_delta`` of ``--delta-share`` (1%) new edges drawn from the
  same model, the same queries on that version (which read base and delta), then
  ``rebuild`` (the merge into a new base);
- **memory**: resident set (VmRSS) with only the base graph alive, the bytes of its
  arrays, and the peak (VmHWM) of the engine stage and of the baseline stage (the peak is
  reset between stages through ``/proc/self/clear_refs`` where the kernel allows it);
- **baselines on the same adjacency**, after the engine's measurements and with the
  engine's graph dropped: one scipy CSR mat-vec ``A @ x`` (float64, parallel edges kept
  as duplicate entries), p50 over ``--matvecs``; and igraph's ``personalized_pagerank``
  (PRPACK, directed, weighted, damping = the pulse's gamma, reset on the union of the
  query's seeds: what HippoRAG runs per query) for the first ``--ppr-queries`` queries,
  after building the igraph ``Graph`` once (timed).

**The synthetic graph** (seeded; the same seed gives the same graph): a Chung-Lu
power-law graph. Node ``i`` gets weight ``(i + 1) ** (-1 / (beta - 1))`` (``beta`` 2.5,
so degrees follow ``P(d > k) ~ k^-(beta-1)``); both endpoints of every edge are drawn
independently from the weight distribution (``searchsorted`` on its CDF), and a random
permutation of node ids scatters the hubs. Self-loops are redrawn. Node kinds are random:
60% fragments, 15% contexts, 15% entities, 10% concepts. Edge types are uniform over the
``EdgeType`` values, weights uniform in [0.5, 1.5), edge ids 0..m-1 in drawing order; a
``RELATION`` edge has a random fragment as its source, the others none (-1). Parallel
edges are kept. Each focus of a query is ``--seeds-per-focus`` (1) uniformly random
distinct nodes sharing activation 1.

**Targets** (issue 5): query (pulse + area) p50 <= 10 ms at 10^6 nodes, and at most twice
its value at 10^4 nodes (the cost follows the touched region, not the graph's size).

Usage (from the project root, with the project's virtual environment)::

    python scripts/bench_graph.py                    # 10^4 and 10^6 nodes (~2*10^7 edges)
    python scripts/bench_graph.py --quick            # smoke run: 10^4 and 10^5 nodes
    python scripts/bench_graph.py --json out.json    # also write every figure

A full run took about 2 minutes on 2 cores and peaked at about 4 GB (igraph's stage);
the engine's own stage peaked at about 2.6 GB.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import igraph as ig
import numpy as np
import numpy.typing as npt
import scipy
import scipy.sparse as sp
from _common import format_ms, percentile, proc_status, render_table, sigterm_as_interrupt

from memory_core.graph import (
    CSR,
    DEFAULT_TRAVERSAL,
    AreaConfig,
    EdgeList,
    EdgeType,
    GraphVersion,
    NodeKind,
    PulseConfig,
    pulse,
    select_area,
)

SMALL_NODES = 10_000
FULL_NODES = 1_000_000
QUICK_FULL_NODES = 100_000
TARGET_P50_MS = 10.0
TARGET_RATIO = 2.0
MB = 1024 * 1024
KIND_SHARES = {
    NodeKind.FRAGMENT: 0.60,
    NodeKind.CONTEXT: 0.15,
    NodeKind.ENTITY: 0.15,
    NodeKind.CONCEPT: 0.10,
}
FOCI = 3
MIN_NODES = 100

Int64s = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Focus = dict[int, float]
Query = list[Focus]
T = TypeVar("T")


class BenchError(Exception):
    """The benchmark cannot go on: bad arguments or a graph that does not behave."""


@dataclass(frozen=True)
class Settings:
    """What to run: the sizes, the graph model, the query counts and the seed."""

    sizes: tuple[int, ...]
    edges_per_node: int
    beta: float
    queries: int
    warmup: int
    seeds_per_focus: int
    delta_share: float
    ppr_queries: int
    matvecs: int
    seed: int


# --- synthetic graph ----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PowerLaw:
    """Chung-Lu endpoint sampler: CDF of the node weights, and the id permutation."""

    cdf: Floats
    perm: Int64s

    @classmethod
    def of(cls, rng: np.random.Generator, n: int, beta: float) -> PowerLaw:
        weights = np.arange(1, n + 1, dtype=np.float64) ** (-1.0 / (beta - 1.0))
        cdf = np.cumsum(weights)
        cdf /= cdf[-1]
        return cls(cdf, rng.permutation(n).astype(np.int64))

    def nodes(self, rng: np.random.Generator, count: int) -> Int64s:
        """``count`` node ids, each drawn with probability proportional to its weight."""
        rank = np.searchsorted(self.cdf, rng.random(count), side="right")
        drawn: Int64s = self.perm[np.minimum(rank, self.cdf.shape[0] - 1)]
        return drawn

    def endpoints(self, rng: np.random.Generator, count: int) -> tuple[Int64s, Int64s, int]:
        """Sources, targets and how many self-loops were redrawn."""
        src, dst = self.nodes(rng, count), self.nodes(rng, count)
        loops = np.flatnonzero(src == dst)
        redrawn = int(loops.shape[0])
        while loops.shape[0]:
            dst[loops] = self.nodes(rng, loops.shape[0])
            loops = loops[src[loops] == dst[loops]]
        return src, dst, redrawn


def node_kinds(rng: np.random.Generator, n: int) -> npt.NDArray[np.int8]:
    """Random kinds with the shares of ``KIND_SHARES``."""
    values = np.array([int(k) for k in KIND_SHARES], dtype=np.int8)
    return rng.choice(values, size=n, p=list(KIND_SHARES.values()))


@dataclass(frozen=True, eq=False)
class Columns:
    """Freshly drawn edge columns, before ``EdgeList.from_arrays`` validates and copies them."""

    src: Int64s
    dst: Int64s
    weight: npt.NDArray[np.float32]
    edge_id: Int64s
    edge_type: npt.NDArray[np.int16]
    source: Int64s
    self_loops_redrawn: int

    def edge_list(self) -> EdgeList:
        return EdgeList.from_arrays(
            self.src,
            self.dst,
            weight=self.weight,
            edge_id=self.edge_id,
            edge_type=self.edge_type,
            source=self.source,
        )


def random_columns(
    rng: np.random.Generator,
    model: PowerLaw,
    kinds: npt.NDArray[np.int8],
    count: int,
    first_id: int,
) -> Columns:
    """``count`` edges of the model with random types, weights and relation sources."""
    src, dst, redrawn = model.endpoints(rng, count)
    types = rng.integers(0, len(EdgeType), count, dtype=np.int16)
    source = np.full(count, -1, dtype=np.int64)
    relation = np.flatnonzero(types == EdgeType.RELATION)
    fragments = np.flatnonzero(kinds == NodeKind.FRAGMENT)
    source[relation] = rng.choice(fragments, relation.shape[0])
    weight = 0.5 + rng.random(count, dtype=np.float32)
    edge_id = np.arange(first_id, first_id + count, dtype=np.int64)
    return Columns(src, dst, weight, edge_id, types, source, redrawn)


def draw_queries(rng: np.random.Generator, n: int, count: int, per_focus: int) -> list[Query]:
    """``count`` queries of ``FOCI`` foci, each ``per_focus`` distinct seeds of total mass 1."""
    queries = []
    for _ in range(count):
        seeds = rng.choice(n, FOCI * per_focus, replace=False).reshape(FOCI, per_focus)
        queries.append([{int(s): 1.0 / per_focus for s in row} for row in seeds])
    return queries


# --- measurement helpers ------------------------------------------------------------------


def timed(call: Callable[[], T]) -> tuple[T, float]:
    """The result of ``call()`` and the seconds it took."""
    began = time.perf_counter()
    result = call()
    return result, time.perf_counter() - began




def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not allowed."""
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5", encoding="ascii")
    except OSError:
        return False
    return True


def rss_mb() -> float:
    return proc_status().get("VmRSS", 0) / MB


def peak_mb() -> float:
    return proc_status().get("VmHWM", 0) / MB


def graph_mb(graph: GraphVersion) -> float:
    """Bytes held by the version's arrays (kinds, CSR, reverse index, delta), in MB."""
    arrays = [graph.kinds, *vars(graph.out).values(), *vars(graph.inc).values()]
    arrays += list(vars(graph.delta).values())
    return sum(int(a.nbytes) for a in arrays) / MB


def say(text: str) -> None:
    print(text, flush=True)


# --- engine -------------------------------------------------------------------------------


@dataclass
class QueryStats:
    """Per timed query: latencies (ms) and what the pulse and the area touched."""

    pulse_ms: list[float]
    total_ms: list[float]
    nodes: list[int]
    pushes: list[int]
    edges_read: list[int]
    rounds: list[int]
    activated: list[int]
    area_nodes: list[int]
    converged: int


def run_queries(graph: GraphVersion, queries: Sequence[Query], warmup: int) -> QueryStats:
    """Run the first ``warmup`` queries untimed, then time pulse and area on the rest."""
    stats = QueryStats([], [], [], [], [], [], [], [], 0)
    pulse_config, area_config = PulseConfig(), AreaConfig()
    for i, foci in enumerate(queries):
        began = time.perf_counter()
        activation = pulse(graph, foci, DEFAULT_TRAVERSAL, pulse_config)
        pulsed = time.perf_counter()
        area = select_area(graph, activation, DEFAULT_TRAVERSAL, area_config)
        done = time.perf_counter()
        if i < warmup:
            continue
        stats.pulse_ms.append((pulsed - began) * 1000)
        stats.total_ms.append((done - began) * 1000)
        stats.nodes.append(activation.nodes_visited)
        stats.pushes.append(activation.pushes)
        stats.edges_read.append(activation.edges_visited)
        stats.rounds.append(activation.rounds)
        stats.activated.append(area.activated)
        stats.area_nodes.append(0 if area.chosen is None else area.chosen.region.nodes.shape[0])
        stats.converged += activation.converged
    return stats


@dataclass(frozen=True)
class Built:
    """How the base graph was made: seconds per step and self-loops redrawn."""

    generate_s: float
    edgelist_s: float
    build_s: float
    self_loops_redrawn: int


def build_graph(
    rng: np.random.Generator, n: int, settings: Settings
) -> tuple[GraphVersion, PowerLaw, Built]:
    """The synthetic base graph, the model that drew it (for the delta), and its timings."""
    began = time.perf_counter()
    model = PowerLaw.of(rng, n, settings.beta)
    kinds = node_kinds(rng, n)
    columns = random_columns(rng, model, kinds, n * settings.edges_per_node, 0)
    generate_s = time.perf_counter() - began
    edges, edgelist_s = timed(columns.edge_list)
    redrawn = columns.self_loops_redrawn
    del columns
    graph, build_s = timed(lambda: GraphVersion.build(kinds, edges))
    return graph, model, Built(generate_s, edgelist_s, build_s, redrawn)


@dataclass(frozen=True)
class Delta:
    """The append of new edges and the merge: sizes, seconds and queries in between."""

    edges: int
    append_s: float
    queries: QueryStats
    rebuild_s: float


def delta_and_merge(
    rng: np.random.Generator,
    graph: GraphVersion,
    model: PowerLaw,
    queries: Sequence[Query],
    settings: Settings,
) -> Delta:
    """Append ``delta_share`` new edges, query that version, merge it; checks the count."""
    count = max(1, round(graph.n_edges * settings.delta_share))
    added = random_columns(rng, model, graph.kinds, count, graph.n_edges).edge_list()
    appended, append_s = timed(lambda: graph.with_delta(added))
    stats = run_queries(appended, queries, settings.warmup)
    merged, rebuild_s = timed(appended.rebuild)
    if merged.n_edges != graph.n_edges + count or merged.n_delta:
        raise BenchError(f"rebuild kept {merged.n_edges} edges ({merged.n_delta} in the delta)")
    return Delta(count, append_s, stats, rebuild_s)


@dataclass(frozen=True)
class Engine:
    """The engine's figures at one size."""

    nodes: int
    edges: int
    max_degree: int
    median_degree: float
    built: Built
    graph_mb: float
    base: QueryStats
    delta: Delta
    rss_mb: float
    peak_mb: float
    peak_reset: bool


def measure_engine(n: int, settings: Settings, queries: Sequence[Query]) -> tuple[Engine, CSR]:
    """Build, query, append, query, merge; returns the figures and the base's CSR."""
    peak_reset = reset_peak()
    rng = np.random.default_rng([settings.seed, n])
    graph, model, built = build_graph(rng, n, settings)
    degree = graph.degree(np.arange(n, dtype=np.int64))
    say(f"  {n:,} nodes, {graph.n_edges:,} edges: generated in {built.generate_s:.1f} s, "
        f"EdgeList {built.edgelist_s:.1f} s, build {built.build_s:.1f} s "
        f"({graph_mb(graph):,.0f} MB of arrays)")
    base = run_queries(graph, queries, settings.warmup)
    say(f"  queries on the base: pulse+area p50 {format_ms(percentile(base.total_ms, 50))} ms")
    delta = delta_and_merge(rng, graph, model, queries, settings)
    say(f"  delta of {delta.edges:,} edges: append {delta.append_s * 1000:.0f} ms, queries "
        f"p50 {format_ms(percentile(delta.queries.total_ms, 50))} ms; rebuild "
        f"{delta.rebuild_s:.1f} s")
    gc.collect()
    engine = Engine(
        n, graph.n_edges, int(degree.max()), float(np.median(degree)), built,
        graph_mb(graph), base, delta, rss_mb(), peak_mb(), peak_reset,
    )
    return engine, graph.out


# --- baselines on the same adjacency ------------------------------------------------------


@dataclass(frozen=True)
class Baselines:
    """scipy mat-vec and igraph personalized PageRank on the base graph's edges."""

    scipy_build_s: float
    matvec_ms: list[float]
    igraph_build_s: float
    ppr_ms: list[float]
    peak_mb: float
    peak_reset: bool


def scipy_matvec(out: CSR, n: int, repeats: int) -> tuple[float, list[float]]:
    """Seconds to wrap the CSR arrays as a float64 scipy matrix, and ms per ``A @ x``."""
    matrix, build_s = timed(
        lambda: sp.csr_matrix(
            (out.weight.astype(np.float64), out.indices, out.indptr), shape=(n, n)
        )
    )
    x = np.random.default_rng(n).random(n)
    matrix @ x
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        matrix @ x
        times.append((time.perf_counter() - began) * 1000)
    return build_s, times


def igraph_graph(out: CSR, n: int) -> ig.Graph:
    """A directed igraph ``Graph`` with one edge per stored edge and a ``weight`` attribute."""
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(out.indptr))
    pairs = np.column_stack([src, out.indices.astype(np.int64)])
    del src
    graph = ig.Graph(n=n, edges=pairs, directed=True)
    del pairs
    graph.es["weight"] = out.weight.astype(np.float64).tolist()
    return graph


def igraph_ppr(graph: ig.Graph, queries: Sequence[Query], damping: float) -> list[float]:
    """Milliseconds of one personalized PageRank per query, reset on all its seeds."""
    times = []
    for foci in queries:
        seeds = sorted({node for focus in foci for node in focus})
        began = time.perf_counter()
        graph.personalized_pagerank(
            reset_vertices=seeds, weights="weight", directed=True, damping=damping
        )
        times.append((time.perf_counter() - began) * 1000)
    return times


def measure_baselines(
    out: CSR, n: int, queries: Sequence[Query], settings: Settings
) -> Baselines:
    """The scipy mat-vec, then igraph (built once, timed) on the first ``ppr_queries``."""
    peak_reset = reset_peak()
    scipy_build_s, matvec_ms = scipy_matvec(out, n, settings.matvecs)
    say(f"  scipy mat-vec p50 {format_ms(percentile(matvec_ms, 50))} ms")
    igraph_build_s, ppr_ms = math.nan, []
    if settings.ppr_queries:
        graph, igraph_build_s = timed(lambda: igraph_graph(out, n))
        ppr_ms = igraph_ppr(graph, queries[: settings.ppr_queries], PulseConfig().gamma)
        del graph
        say(f"  igraph: Graph built in {igraph_build_s:.1f} s, personalized_pagerank p50 "
            f"{format_ms(percentile(ppr_ms, 50))} ms")
    gc.collect()
    return Baselines(scipy_build_s, matvec_ms, igraph_build_s, ppr_ms, peak_mb(), peak_reset)


# --- the run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    """Everything measured at one size."""

    engine: Engine
    baselines: Baselines

    @property
    def peak_mb(self) -> float:
        return max(self.engine.peak_mb, self.baselines.peak_mb)


@dataclass(frozen=True)
class Report:
    """All sizes, the machine and the run's length."""

    settings: Settings
    machine: dict[str, Any]
    sizes: list[Size]
    seconds: float

    @property
    def small(self) -> Size:
        return self.sizes[0]

    @property
    def full(self) -> Size:
        return self.sizes[-1]


def benchmark(settings: Settings) -> Report:
    """Measure the engine, then the baselines, at each size in turn (smallest first)."""
    began = time.perf_counter()
    info = machine()
    say(machine_line(info))
    sizes = []
    for n in settings.sizes:
        say(f"size {n:,} nodes x {settings.edges_per_node} edges per node")
        rng = np.random.default_rng([settings.seed, n, 1])
        count = settings.warmup + settings.queries
        queries = draw_queries(rng, n, count, settings.seeds_per_focus)
        engine, out = measure_engine(n, settings, queries)
        baselines = measure_baselines(out, n, queries[settings.warmup :], settings)
        del out
        sizes.append(Size(engine, baselines))
    return Report(settings, info, sizes, time.perf_counter() - began)


def machine() -> dict[str, Any]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_mb": proc_meminfo_mb(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "igraph": ig.__version__,
    }


def proc_meminfo_mb() -> float | None:
    try:
        first = Path("/proc/meminfo").read_text(encoding="ascii").splitlines()[0]
    except (OSError, IndexError):
        return None
    return int(first.split()[1]) / 1024


def machine_line(info: dict[str, Any]) -> str:
    memory = info["memory_mb"]
    ram = f"{memory / 1024:.0f} GiB RAM, " if memory else ""
    return (
        f"machine: {info['cores']} cores ({info['usable_cores']} usable), {ram}"
        f"{info['platform']}, Python {info['python']}, numpy {info['numpy']}, "
        f"scipy {info['scipy']}, igraph {info['igraph']}"
    )


# --- report -------------------------------------------------------------------------------


def p50(values: Sequence[float]) -> float:
    return percentile(values, 50)


def p95(values: Sequence[float]) -> float:
    return percentile(values, 95)


def engine_table(sizes: Sequence[Size]) -> str:
    headers = ("nodes", "edges", "build s", "graph MB", "pulse p50", "p95", "query p50",
               "p95", "+delta p50", "append ms", "rebuild s", "RSS MB", "peak MB")
    rows = []
    for size in sizes:
        e = size.engine
        rows.append((
            f"{e.nodes:,}", f"{e.edges:,}", f"{e.built.build_s:.2f}", f"{e.graph_mb:,.0f}",
            format_ms(p50(e.base.pulse_ms)), format_ms(p95(e.base.pulse_ms)),
            format_ms(p50(e.base.total_ms)), format_ms(p95(e.base.total_ms)),
            format_ms(p50(e.delta.queries.total_ms)), f"{e.delta.append_s * 1000:.1f}",
            f"{e.delta.rebuild_s:.2f}", f"{e.rss_mb:,.0f}", f"{e.peak_mb:,.0f}",
        ))
    return render_table(headers, rows)


def touched_table(sizes: Sequence[Size]) -> str:
    headers = ("nodes", "max degree", "median degree", "touched p50", "p95", "pushes p50",
               "edges read p50", "rounds p50", "activated p50", "area nodes p50", "converged")
    rows = []
    for size in sizes:
        e, q = size.engine, size.engine.base
        rows.append((
            f"{e.nodes:,}", f"{e.max_degree:,}", f"{e.median_degree:.0f}", f"{p50(q.nodes):,.0f}",
            f"{p95(q.nodes):,.0f}", f"{p50(q.pushes):,.0f}", f"{p50(q.edges_read):,.0f}",
            f"{p50(q.rounds):.0f}", f"{p50(q.activated):,.0f}", f"{p50(q.area_nodes):.0f}",
            f"{q.converged}/{len(q.total_ms)}",
        ))
    return render_table(headers, rows)


def baseline_table(sizes: Sequence[Size]) -> str:
    headers = ("nodes", "query p50", "scipy mat-vec p50", "igraph build s", "igraph PPR p50",
               "PPR / query", "peak MB")
    rows = []
    for size in sizes:
        e, b = size.engine, size.baselines
        query, ppr = p50(e.base.total_ms), p50(b.ppr_ms)
        rows.append((
            f"{e.nodes:,}", format_ms(query), format_ms(p50(b.matvec_ms)),
            "-" if math.isnan(b.igraph_build_s) else f"{b.igraph_build_s:.1f}",
            format_ms(ppr), "-" if math.isnan(ppr) else f"x{ppr / query:,.0f}",
            f"{b.peak_mb:,.0f}",
        ))
    return render_table(headers, rows)


def verdicts(report: Report) -> dict[str, Any]:
    full, small = report.full.engine, report.small.engine
    full_p50, small_p50 = p50(full.base.total_ms), p50(small.base.total_ms)
    ratio = full_p50 / small_p50 if len(report.sizes) > 1 else math.nan
    return {
        "p50_ms": full_p50,
        "p50_target_ms": TARGET_P50_MS,
        "p50_met": full_p50 <= TARGET_P50_MS,
        "p50_at_nodes": full.nodes,
        "ratio_full_small": ratio,
        "ratio_target": TARGET_RATIO,
        "ratio_met": None if math.isnan(ratio) else ratio <= TARGET_RATIO,
        "at_target_size": full.nodes >= FULL_NODES,
    }


def verdict_lines(report: Report) -> list[str]:
    v = verdicts(report)
    lines = [
        f"target query p50 <= {TARGET_P50_MS:.0f} ms at {v['p50_at_nodes']:,} nodes: "
        f"{format_ms(v['p50_ms'])} ms -> {'met' if v['p50_met'] else 'NOT met'}"
    ]
    if v["ratio_met"] is not None:
        lines.append(
            f"target query p50 at {v['p50_at_nodes']:,} / at {report.small.engine.nodes:,} "
            f"nodes <= {TARGET_RATIO:.0f}: x{v['ratio_full_small']:.2f} -> "
            f"{'met' if v['ratio_met'] else 'NOT met'}"
        )
    if not v["at_target_size"]:
        lines.append(f"(the targets are defined at {FULL_NODES:,} nodes; this run stopped at "
                     f"{v['p50_at_nodes']:,})")
    return lines


def graph_line(settings: Settings) -> str:
    shares = ", ".join(f"{share:.0%} {kind.name.lower()}" for kind, share in KIND_SHARES.items())
    return (
        f"graph: Chung-Lu power law, beta {settings.beta}, {settings.edges_per_node} edges per "
        f"node, node weight (i+1)^(-1/(beta-1)), endpoints by CDF search, ids permuted, "
        f"self-loops redrawn; kinds {shares}; {len(EdgeType)} edge types uniform, weights "
        f"U[0.5, 1.5), relation edges sourced by a random fragment; seed {settings.seed}"
    )


def print_report(report: Report) -> None:
    s = report.settings
    say("")
    say(graph_line(s))
    say(f"queries: {FOCI} foci x {s.seeds_per_focus} random seed(s), {s.queries} timed after "
        f"{s.warmup} warm-up; query = pulse (PulseConfig()) + select_area (AreaConfig()), "
        f"DEFAULT_TRAVERSAL; +delta = the same queries after appending {s.delta_share:.0%} new "
        f"edges; times in ms unless marked\n")
    say(engine_table(report.sizes))
    say("")
    say(touched_table(report.sizes))
    say("")
    say(baseline_table(report.sizes))
    say("")
    for line in verdict_lines(report):
        say(line)
    if not all(size.engine.peak_reset for size in report.sizes):
        say("(the peak could not be reset between stages: peak MB is the process's peak so far)")
    say(f"peak RSS of the run {max(size.peak_mb for size in report.sizes):,.0f} MB; "
        f"total time {report.seconds:.0f} s")


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"n": len(values), "p50": p50(values), "p95": p95(values),
            "mean": sum(values) / len(values) if values else math.nan,
            "max": max(values, default=math.nan)}


def size_json(size: Size) -> dict[str, Any]:
    e, b = size.engine, size.baselines
    base, delta = e.base, e.delta.queries
    return {
        "nodes": e.nodes, "edges": e.edges, "max_degree": e.max_degree,
        "median_degree": e.median_degree, **asdict(e.built), "graph_mb": e.graph_mb,
        "pulse_ms": summary(base.pulse_ms), "query_ms": summary(base.total_ms),
        "touched": {name: summary(getattr(base, name)) for name in (
            "nodes", "pushes", "edges_read", "rounds", "activated", "area_nodes")},
        "converged": base.converged,
        "delta": {"edges": e.delta.edges, "append_ms": e.delta.append_s * 1000,
                  "rebuild_s": e.delta.rebuild_s, "pulse_ms": summary(delta.pulse_ms),
                  "query_ms": summary(delta.total_ms)},
        "rss_mb": e.rss_mb, "engine_peak_mb": e.peak_mb,
        "scipy_build_s": b.scipy_build_s, "scipy_matvec_ms": summary(b.matvec_ms),
        "igraph_build_s": b.igraph_build_s, "igraph_ppr_ms": summary(b.ppr_ms),
        "baselines_peak_mb": b.peak_mb, "peak_reset": e.peak_reset and b.peak_reset,
        "samples_ms": {"query": base.total_ms, "pulse": base.pulse_ms, "ppr": b.ppr_ms,
                       "matvec": b.matvec_ms},
    }


def to_json(report: Report) -> dict[str, Any]:
    full, small = report.full, report.small
    e = full.engine
    return {
        "nodes": e.nodes, "edges": e.edges,
        "query_ms": {"p50": p50(e.base.total_ms), "p95": p95(e.base.total_ms)},
        "query_ms_small": {"nodes": small.engine.nodes, "p50": p50(small.engine.base.total_ms),
                           "p95": p95(small.engine.base.total_ms)},
        "pulse_ms": {"p50": p50(e.base.pulse_ms), "p95": p95(e.base.pulse_ms)},
        "igraph_ppr_ms": p50(full.baselines.ppr_ms),
        "scipy_matvec_ms": p50(full.baselines.matvec_ms),
        "rss_mb": e.rss_mb, "peak_rss_mb": max(size.peak_mb for size in report.sizes),
        "build_s": e.built.build_s, "delta_append_ms": e.delta.append_s * 1000,
        "rebuild_s": e.delta.rebuild_s, "targets": verdicts(report),
        "graph": graph_line(report.settings), "settings": asdict(report.settings),
        "machine": report.machine, "seconds": report.seconds,
        "sizes": [size_json(size) for size in report.sizes],
    }


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None (strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


# --- command line -------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--quick", action="store_true",
        help=f"smoke run: {SMALL_NODES:,} and {QUICK_FULL_NODES:,} nodes")
    add("--nodes", type=int, help=f"full size (default: {FULL_NODES:,})")
    add("--small-nodes", type=int, default=SMALL_NODES,
        help=f"small size, the ratio's reference (default: {SMALL_NODES:,})")
    add("--edges-per-node", type=int, default=20, help="edges per node (default: 20)")
    add("--beta", type=float, default=2.5, help="power-law exponent (default: 2.5)")
    add("--queries", type=int, default=50, help="timed queries per size (default: 50)")
    add("--warmup", type=int, default=5, help="warm-up queries per size (default: 5)")
    add("--seeds-per-focus", type=int, default=1, help="seed nodes per focus (default: 1)")
    add("--delta-share", type=float, default=0.01,
        help="new edges appended, as a share of the base (default: 0.01)")
    add("--ppr-queries", type=int, default=5,
        help="queries also run as igraph personalized PageRank; 0 skips igraph (default: 5)")
    add("--matvecs", type=int, default=20, help="timed scipy mat-vecs (default: 20)")
    add("--seed", type=int, default=7, help="random seed (default: 7)")
    add("--json", type=Path, metavar="OUT", help="also write every figure here")
    return parser.parse_args(argv)


def settings_from(args: argparse.Namespace) -> Settings:
    full = args.nodes or (QUICK_FULL_NODES if args.quick else FULL_NODES)
    small = min(args.small_nodes, full)
    settings = Settings(
        sizes=(small, full) if small < full else (full,),
        edges_per_node=args.edges_per_node, beta=args.beta, queries=args.queries,
        warmup=args.warmup, seeds_per_focus=args.seeds_per_focus,
        delta_share=args.delta_share, ppr_queries=args.ppr_queries, matvecs=args.matvecs,
        seed=args.seed,
    )
    check_settings(settings)
    return settings


def check_settings(s: Settings) -> None:
    if min(s.queries, s.edges_per_node, s.seeds_per_focus, s.matvecs) < 1:
        raise BenchError("--queries, --edges-per-node, --seeds-per-focus, --matvecs must be >= 1")
    if min(s.warmup, s.ppr_queries) < 0:
        raise BenchError("--warmup and --ppr-queries must be >= 0")
    if s.sizes[0] < max(MIN_NODES, FOCI * s.seeds_per_focus):
        raise BenchError(f"every size needs at least {MIN_NODES} nodes and a query's seeds")
    if not s.beta > 1.0:
        raise BenchError("--beta must be > 1")
    if not 0.0 < s.delta_share <= 1.0:
        raise BenchError("--delta-share must lie in (0, 1]")


def main(argv: Sequence[str] | None = None) -> int:
    sigterm_as_interrupt()
    args = parse_args(argv)
    try:
        report = benchmark(settings_from(args))
    except BenchError as exc:
        print(f"bench_graph: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench_graph: interrupted", file=sys.stderr)
        return 130
    print_report(report)
    if args.json:
        text = json.dumps(finite(to_json(report)), indent=2, allow_nan=False)
        args.json.write_text(text, encoding="utf-8")
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
