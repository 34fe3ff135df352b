"""Pk and WindowDiff of dialogue topic segmentation: the project's segmenter vs baselines.

Every method segments the same dialogues in the same run and is scored against the
reference boundaries with Pk (Beeferman et al., 1999) and WindowDiff (Pevzner & Hearst,
2002), each dialogue with its own window k = half its mean reference segment length
(rounded half to even, at least 1, or ``--min-k``: segeval's default is at least 2);
the figures are means over dialogues (the pooled variant is in the JSON). Lower is
better. Conventions and the metric code live in
``scripts/evaluation/segmentation.py``.

Methods:

- ``segmenter``: the project's segmenter, the offline default of formation
  (:class:`memory_core.formation.stages.segmenter.EmbeddingSegmenter` over MiniLM), plugged in
  by :func:`project_segmenter`: a boundary at each dip of the similarity between the two
  utterances before a gap and the two after it that falls below an absolute cosine of
  0.30. Its interpretation label (method and parameters) is printed and kept in the JSON.
- ``texttiling``: TextTiling (Hearst, 1997) over TF-IDF vectors of the utterances (IDF
  fitted on all utterances of the file; no labels are used), blocks of 4 utterances,
  one smoothing step, boundaries at valleys deeper than mean - std/2.
- ``texttiling_embedding``: the same over MiniLM vectors (``memory_core.text.embeddings``).
  The whole file is encoded once (about 200 utterances/s on 2 CPU cores) and the
  vectors are shared with ``segmenter``.
- ``none``: no boundaries at all.

The JSON holds ``{"data", "format", "min_k", "methods": {key: scores}, "note"}``, the
note naming the segmenter's interpretation.

Data (see shared/data/README.md): ``--format dialseg711`` reads the DialSeg711 JSON list,
``--format defdts`` the TIAGE / SuperDialseg JSON lines.

Usage (from the project root, with the project's virtual environment)::

    python scripts/eval_segmentation.py --data ../shared/data/segmentation/dialseg_711.json \\
        --format dialseg711 --json seg.json
    python scripts/eval_segmentation.py --data ../shared/data/segmentation/tiage_validation.jsonl \\
        --format defdts --texttiling tfidf

Exit status: 0 on success, 1 when the embedding model cannot be loaded, 2 for a malformed
data file or bad arguments.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from _common import render_table
from evaluation.segmentation import (
    Dialogue,
    Idf,
    Scores,
    SegmentationDataError,
    Segmenter,
    evaluate,
    load_defdts,
    load_dialseg711,
    no_boundaries,
    texttiling,
    texttiling_from_vectors,
    tfidf_vectors,
)
from tqdm import tqdm

from memory_core.formation.stages.segmenter import EmbeddingSegmenter
from memory_core.text.embeddings import Encoder, EncoderUnavailableError, MiniLMEncoder

LOADERS: dict[str, Callable[[Path], list[Dialogue]]] = {
    "dialseg711": load_dialseg711,
    "defdts": load_defdts,
}
ENCODE_CHUNK = 256
SCORE_NOTE = (
    "Lower is better. Pk and WindowDiff are means over dialogues, each dialogue with its own\n"
    "window k: half its mean reference segment length (rounded half to even, at least {min_k}).\n"
    "TextTiling: blocks of 4 utterances, one smoothing step, valleys deeper than mean - std/2."
)

Vectors = npt.NDArray[np.float32]
Hypotheses = Callable[[Sequence[Dialogue]], list[list[int]]]
Encoded = Callable[[], list[Vectors]]


@dataclass(frozen=True)
class Method:
    """One row of the table: its JSON key, its label and how it segments a corpus."""

    key: str
    label: str
    run: Hypotheses


def project_segmenter(encoder: Encoder) -> EmbeddingSegmenter:
    """The project's segmenter as formation builds it by default, over ``encoder``.

    The script scores it first, as ``segmenter``, against the baselines, handing it the
    vectors the MiniLM TextTiling row uses (so each utterance is encoded once).
    """
    return EmbeddingSegmenter(encoder)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        dialogues = LOADERS[args.format](args.data)
    except SegmentationDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.max_dialogues is not None:
        dialogues = dialogues[: args.max_dialogues]
    if not dialogues:
        print(f"error: {args.data}: no dialogues", file=sys.stderr)
        return 2
    encoder = MiniLMEncoder()
    segmenter = project_segmenter(encoder)
    try:
        methods = _methods(segmenter, encoder, dialogues, args.texttiling)
        results = _score_all(methods, dialogues, args.min_k)
    except EncoderUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    note = f"segmenter: {segmenter.interpretation.label}"
    print(_report(args.data, dialogues, results, note, args.min_k))
    if args.json is not None:
        _write_json(args.json, args, results, note)
    return 0


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Pk and WindowDiff of the project's segmenter against baselines."
    )
    parser.add_argument("--data", type=Path, required=True, help="data file")
    parser.add_argument("--format", choices=sorted(LOADERS), required=True)
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the scores here")
    parser.add_argument(
        "--texttiling",
        choices=["tfidf", "embedding", "both"],
        default="both",
        help="vectors for the TextTiling baseline (default: both rows)",
    )
    parser.add_argument(
        "--max-dialogues", type=_positive, metavar="N", help="only the first N dialogues"
    )
    parser.add_argument(
        "--min-k",
        type=_positive,
        default=1,
        help="smallest default window (1; segeval uses 2, which matters for short segments)",
    )
    return parser.parse_args(argv)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _methods(
    segmenter: EmbeddingSegmenter, encoder: Encoder, dialogues: Sequence[Dialogue], kind: str
) -> list[Method]:
    encoded = _encoded_once(dialogues, encoder)
    methods = [Method("segmenter", "segmenter", _with_vectors(segmenter.boundaries, encoded))]
    if kind in ("tfidf", "both"):
        idf = Idf.from_texts(u for d in dialogues for u in d.utterances)
        tiling = functools.partial(texttiling, vectorize=functools.partial(tfidf_vectors, idf=idf))
        methods.append(Method("texttiling", "texttiling (tf-idf)", _segmenting("tf-idf", tiling)))
    if kind in ("embedding", "both"):
        embedded = _with_vectors(lambda _, vectors: texttiling_from_vectors(vectors), encoded)
        methods.append(Method("texttiling_embedding", "texttiling (minilm)", embedded))
    methods.append(Method("none", "none (no boundaries)", _segmenting("none", no_boundaries)))
    return methods


def _segmenting(label: str, segment: Segmenter) -> Hypotheses:
    def run(dialogues: Sequence[Dialogue]) -> list[list[int]]:
        progress = tqdm(dialogues, desc=label, unit="dlg", leave=False)
        return [list(segment(list(d.utterances))) for d in progress]

    return run


def _encoded_once(dialogues: Sequence[Dialogue], encoder: Encoder) -> Encoded:
    """The corpus's vectors, encoded on the first call and shared by every later one."""

    @functools.cache
    def encoded() -> list[Vectors]:
        return _encode(dialogues, encoder)

    return encoded


def _with_vectors(
    segment: Callable[[list[str], Vectors], Sequence[int]], encoded: Encoded
) -> Hypotheses:
    """Runs ``segment(utterances, vectors)`` over the corpus ``encoded`` was built for."""

    def run(dialogues: Sequence[Dialogue]) -> list[list[int]]:
        pairs = zip(dialogues, encoded(), strict=True)
        return [list(segment(list(d.utterances), v)) for d, v in pairs]

    return run


def _encode(dialogues: Sequence[Dialogue], encoder: Encoder) -> list[Vectors]:
    """Each dialogue's utterance vectors, the whole corpus encoded in large chunks."""
    texts = [u for d in dialogues for u in d.utterances]
    chunks = []
    with tqdm(total=len(texts), desc="minilm", unit="utt", leave=False) as progress:
        for start in range(0, len(texts), ENCODE_CHUNK):
            chunks.append(encoder.encode(texts[start : start + ENCODE_CHUNK]))
            progress.update(len(chunks[-1]))
    ends = np.cumsum([len(d.utterances) for d in dialogues])
    return np.split(np.concatenate(chunks), ends[:-1])


Results = list[tuple[Method, Scores]]


def _score_all(methods: Sequence[Method], dialogues: Sequence[Dialogue], min_k: int) -> Results:
    return [(m, evaluate(dialogues, m.run(dialogues), min_k=min_k)) for m in methods]


def _report(
    data: Path, dialogues: Sequence[Dialogue], results: Results, note: str, min_k: int
) -> str:
    rows = [
        [
            m.label,
            f"{s.pk:.3f}",
            f"{s.windowdiff:.3f}",
            str(s.dialogues),
            str(s.utterances),
            f"{s.mean_k:.2f}",
        ]
        for m, s in results
    ]
    table = render_table(["method", "Pk", "WindowDiff", "dialogues", "utterances", "mean k"], rows)
    boundaries = sum(len(d.boundaries) for d in dialogues)
    lines = [f"{data}: {len(dialogues)} dialogues, {boundaries} reference boundaries", ""]
    lines += [table, "", SCORE_NOTE.format(min_k=min_k)]
    return "\n".join([*lines, note])


def _write_json(out: Path, args: argparse.Namespace, results: Results, note: str) -> None:
    document = {
        "data": str(args.data),
        "format": args.format,
        "min_k": args.min_k,
        "methods": {m.key: asdict(s) for m, s in results},
        "note": note,
    }
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
