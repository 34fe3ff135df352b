"""Fit how an encoder's cosines map onto MiniLM's, so formation's thresholds mean the same.

Formation's thresholds (a topic boundary below 0.30, a segment joining a context at 0.5, a
mention's context agreeing with an entity's at 0.55, the Dreamer's merges) were tuned on
all-MiniLM-L6-v2's cosines, which spread over about 0.05-0.65 for dialogue turns. Other
encoders put the same pairs elsewhere: multilingual-e5-small puts nearly every pair of
turns between 0.80 and 0.93, so at MiniLM's thresholds a whole conversation was one
segment and one context. This script encodes the same pairs of utterances with both
encoders (adjacent turns, two-turn blocks as the segmenter compares them, and random turns
of the same and of other dialogues), sorts each encoder's cosines and fits the line that
maps one's quantiles onto the other's (least squares over the 2nd to the 98th
percentile): ``minilm ~ a + b * cosine``. It prints ``a``, ``b``, how well the line fits,
and every default threshold in both scales. The numbers go into the encoder's
``cosine_scale`` (``memory_core/text/e5.py``).

Fitted on TIAGE's training split (MIT), never on evaluation data.

Usage::

    python scripts/calibrate_encoder.py [--data ../shared/data/segmentation/tiage_train.jsonl]
        [--encoder e5] [--dialogues 300]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memory_core.formation import FormationConfig
from memory_core.formation.backends import sentence_encoder
from memory_core.formation.config import EncoderConfig
from memory_core.text.embeddings import Encoder

F32 = npt.NDArray[np.float32]

THRESHOLDS = {
    "formation.segmentation.threshold": 0.30,
    "formation.contexts.join": 0.5,
    "formation.contexts.secondary": 0.4,
    "formation.linking.context": 0.55,
    "formation.linking.homonym": 0.15,
    "dream.entity_similarity": 0.45,
    "dream.context_link": 0.75,
    "dream.context_merge": 0.9,
}


def dialogues(path: Path, limit: int) -> list[list[str]]:
    """The utterances of the first ``limit`` dialogues of a TIAGE-format file."""
    found = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            turns = json.loads(line)["dialogue"].split("[NEWLINE]")
            found.append([t.split(":", 1)[-1].strip() for t in turns if t and t != "[BOUNDARY]"])
            if len(found) >= limit:
                break
    return found


def pairs(vectors: Sequence[F32], seed: int = 0) -> F32:
    """Cosines of the same pairs for any encoder's ``vectors`` (one array a dialogue):
    adjacent turns, adjacent two-turn blocks, random turns of the dialogue, random turns
    of two dialogues."""
    rng = np.random.default_rng(seed)
    out: list[float] = []
    for i, v in enumerate(vectors):
        n = v.shape[0]
        if n < 4:
            continue
        out.extend(np.sum(v[:-1] * v[1:], axis=1))
        blocks = v[:-1] + v[1:]
        blocks /= np.maximum(np.linalg.norm(blocks, axis=1, keepdims=True), 1e-9)
        out.extend(np.sum(blocks[:-2] * blocks[2:], axis=1))
        a, b = rng.integers(0, n, 8), rng.integers(0, n, 8)
        out.extend(np.sum(v[a] * v[b], axis=1)[a != b])
        other = vectors[(i + 1 + int(rng.integers(0, len(vectors) - 1))) % len(vectors)]
        c = rng.integers(0, other.shape[0], 8)
        out.extend(np.sum(v[a] * other[c], axis=1))
    return np.asarray(out, np.float32)


def fit(reference: F32, other: F32) -> tuple[float, float, float]:
    """``(a, b, r2)``: ``reference`` quantiles ~ a + b * ``other`` quantiles."""
    q = np.linspace(0.02, 0.98, 97)
    x, y = np.quantile(other, q), np.quantile(reference, q)
    b, a = np.polyfit(x, y, 1)
    residual = y - (a + b * x)
    r2 = 1.0 - float(np.sum(residual**2)) / float(np.sum((y - y.mean()) ** 2))
    return float(a), float(b), r2


def encode(encoder: Encoder, texts: list[list[str]]) -> list[F32]:
    flat = [t for d in texts for t in d]
    vectors = np.asarray(encoder.encode(flat), np.float32)
    out, at = [], 0
    for d in texts:
        out.append(vectors[at : at + len(d)])
        at += len(d)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=Path("../shared/data/segmentation/tiage_train.jsonl")
    )
    parser.add_argument("--encoder", choices=("e5",), default="e5")
    parser.add_argument("--dialogues", type=int, default=300)
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"calibrate_encoder: no file {args.data} (--data names it)", file=sys.stderr)
        return 2
    texts = dialogues(args.data, args.dialogues)
    reference = sentence_encoder(FormationConfig().encoder.model_copy(update={"model": "minilm"}))
    other = sentence_encoder(EncoderConfig(model=args.encoder))
    base = pairs(encode(reference, texts))
    theirs = pairs(encode(other, texts))
    a, b, r2 = fit(base, theirs)
    correlation = float(np.corrcoef(base, theirs)[0, 1])
    print(f"{len(texts)} dialogues, {base.shape[0]} pairs of {args.encoder} and minilm")
    print(f"minilm ~ a + b * {args.encoder}: a = {a:.4f}, b = {b:.4f} (quantile fit R2 {r2:.4f})")
    print(f"pairwise correlation of the two encoders' cosines: {correlation:.3f}")
    print(f"{'percentile':>10} {'minilm':>8} {args.encoder:>8} {'mapped':>8}")
    for p in (5, 25, 50, 75, 95):
        x = float(np.percentile(theirs, p))
        print(f"{p:>10} {np.percentile(base, p):>8.3f} {x:>8.3f} {a + b * x:>8.3f}")
    print(f"{'threshold':<34} {'minilm':>8} {args.encoder:>8}")
    for key, value in THRESHOLDS.items():
        print(f"{key:<34} {value:>8.3f} {(value - a) / b:>8.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
