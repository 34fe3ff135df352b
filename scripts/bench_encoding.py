"""Speed and faithfulness of each way to run the shipped MiniLM on the CPU.

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

Usage::

    python scripts/bench_encoding.py [--data ../shared/data/locomo/locomo_dev5.json]
        [--runtimes torch,torch-int8,onnx,onnx-int8] [--questions 200] [--batches 5]
        [--repeats 2] [--json OUT]
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
from evaluation.locomo import LocomoError, load_locomo

from memory_core.text.embeddings import RUNTIMES, MiniLMEncoder, RuntimeSettings

BATCH = 64
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
    runtime: str
    workload: str
    threads: int
    per_text_ms: list[float]
    texts_per_s: float
    max_abs: float
    min_cos: float
    load_s: float
    fast_path: str


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="a LoCoMo-format JSON file (else synthetic)")
    parser.add_argument("--runtimes", default="torch,torch-int8,onnx,onnx-int8")
    parser.add_argument("--questions", type=int, default=200, help="single questions timed")
    parser.add_argument("--batches", type=int, default=5, help=f"batches of {BATCH} turns")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes over the batches")
    parser.add_argument("--cache-dir", type=Path, help="ONNX export cache (default: temporary)")
    parser.add_argument("--json", help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    try:
        questions, turns = _texts(args.data, args.questions, args.batches * BATCH)
    except (LocomoError, ValueError) as exc:
        print(f"bench_encoding: {exc}", file=sys.stderr)
        return 2
    RUNTIMES.register("torch-int8", _torch_int8, "benchmark only")
    print(f"{len(questions)} questions, {len(turns)} turns; computing the reference ...")
    reference = _reference(questions + turns)
    ref_q, ref_t = reference[: len(questions)], reference[len(questions) :]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="areamem-onnx-") as tmp:
        cache = args.cache_dir or Path(tmp)
        for runtime in args.runtimes.split(","):
            rows += _candidate(runtime, cache, questions, turns, ref_q, ref_t, args.repeats)
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
    model = encoder._load()._model  # the sentence-transformers pipeline itself
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


def _singles(
    encoder: MiniLMEncoder,
    questions: list[str],
    ref: Any,
    load_s: float,
    *,
    question_path: bool = False,
) -> Row:
    """One text at a time: ``encode([text])`` (what formation stores), or with
    ``question_path`` ``encode_question`` (what retrieval asks with)."""
    times, vectors = [], []
    for text in questions:
        began = time.perf_counter()
        if question_path:
            vectors.append(encoder.encode_question(text)[0])
        else:
            vectors.append(encoder.encode([text])[0])
        times.append((time.perf_counter() - began) * 1000)
    return _row(
        encoder,
        "question (int8 question weights)" if question_path else "question",
        1,
        times,
        len(questions) / (sum(times) / 1000),
        np.stack(vectors),
        ref,
        load_s,
    )


def _batches(
    encoder: MiniLMEncoder, turns: list[str], ref: Any, repeats: int, threads: int, load_s: float
) -> Row:
    per_text, total, vectors = [], 0.0, []
    for _ in range(repeats):
        vectors = []
        for start in range(0, len(turns), BATCH):
            began = time.perf_counter()
            vectors.append(encoder.encode(turns[start : start + BATCH]))
            elapsed = time.perf_counter() - began
            total += elapsed
            per_text.append(elapsed * 1000 / BATCH)
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
    encoder: MiniLMEncoder,
    workload: str,
    threads: int,
    per_text: list[float],
    rate: float,
    vectors: Any,
    ref: Any,
    load_s: float,
) -> Row:
    cosine = np.sum(vectors * ref, axis=1) / (
        np.linalg.norm(vectors, axis=1) * np.linalg.norm(ref, axis=1)
    )
    return Row(
        encoder.runtime,
        workload,
        threads,
        per_text,
        rate,
        float(np.abs(vectors - ref).max()),
        float(cosine.min()),
        load_s,
        encoder.fast_path,
    )


def _torch_int8(settings: RuntimeSettings) -> Any:
    """The torch runtime with every Linear layer dynamically quantised to int8."""
    import torch

    runtime = RUNTIMES.get("torch")(settings)
    model = runtime._model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization is deprecated (still works)
        torch.ao.quantization.quantize_dynamic(
            model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
        )
    from memory_core.text.embeddings import _trace

    runtime._traced, runtime.fast_path = _trace(model)
    return runtime


def _print(rows: list[Row]) -> None:
    headers = [
        "runtime",
        "workload",
        "threads",
        "median ms/text",
        "p90 ms/text",
        "texts/s",
        "max |diff|",
        "min cos",
        "load s",
    ]
    body = [
        [
            r.runtime,
            r.workload,
            str(r.threads),
            f"{statistics.median(r.per_text_ms):.2f}",
            f"{percentile(r.per_text_ms, 90):.2f}",
            f"{r.texts_per_s:.0f}",
            f"{r.max_abs:.2e}",
            f"{r.min_cos:.6f}",
            f"{r.load_s:.1f}",
        ]
        for r in rows
    ]
    print(render_table(headers, body))


if __name__ == "__main__":
    raise SystemExit(main())
