"""Pk and WindowDiff of dialogue topic segmentation: the project's segmenter vs baselines.

Every method segments the same dialogues in the same run and is scored against the
reference boundaries with Pk (Beeferman et al., 1999) and WindowDiff (Pevzner & Hearst,
2002), each dialogue with its own window k = half its mean reference segment length
(rounded half to even, at least 1, or ``--min-k``: segeval's default is at least 2);
the figures are means over dialogues (the pooled variant is in the JSON). Lower is
better. Conventions and the metric code live in
``scripts/evaluation/segmentation.py``.

Methods:

- ``trained``: formation's default segmenter
  (:class:`memory_core.formation.stages.trained_segmenter.TrainedSegmenter`) with the
  weights shipped for ``--encoder`` (trained by ``scripts/train_segmenter.py`` on TIAGE
  train, DialSeg711 and the first half of SuperDialseg validation: scores on those are
  training figures). Left out, with a note, when no weights are shipped for the encoder.
- ``segmenter``: the cosine-dip heuristic, formation's ``embedding`` backend
  (:class:`memory_core.formation.stages.segmenter.EmbeddingSegmenter`), plugged in by
  :func:`project_segmenter`: a boundary at each dip of the similarity between the two
  utterances before a gap and the two after it that falls below an absolute cosine of
  0.30 on MiniLM's scale (read through the encoder's cosine scale).
- ``texttiling``: TextTiling (Hearst, 1997) over TF-IDF vectors of the utterances (IDF
  fitted on all utterances of the file; no labels are used), blocks of 4 utterances,
  one smoothing step, boundaries at valleys deeper than mean - std/2.
- ``texttiling_embedding``: the same over the encoder's vectors.
- ``none``: no boundaries at all.

The vector methods share one encoding of the file with ``--encoder`` (``e5``, formation's
default, or ``minilm``), of each turn as formation reads it: without the ``user:`` /
``agent:`` prefix of TIAGE and SuperDialseg (:mod:`evaluation.segmentation_splits`);
``--cache-dir`` keeps the vectors between runs. Each interpretation label (method and
parameters) is printed and kept in the JSON.

``--half first|second`` keeps half of the file's dialogues by id (sorted as strings, the
first ``n // 2`` or the rest): the trained segmenter is trained on the first half of
SuperDialseg validation and measured on the second.

The JSON holds ``{"data", "format", "min_k", "methods": {key: scores}, "note"}``, the
note naming the segmenter's interpretation.

Data (see shared/data/README.md): ``--format dialseg711`` reads the DialSeg711 JSON list,
``--format defdts`` the TIAGE / SuperDialseg JSON lines.

Usage (from the project root, with the project's virtual environment)::

    python scripts/eval_segmentation.py --data ../shared/data/segmentation/dialseg_711.json \\
        --format dialseg711 --json seg.json
    python scripts/eval_segmentation.py --data ../shared/data/segmentation/tiage_validation.jsonl \\
        --format defdts --texttiling tfidf
    python scripts/eval_segmentation.py \\
        --data ../shared/data/segmentation/superseg_validation.jsonl --format defdts --half second

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
from _common import output_file, render_table
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
from evaluation.segmentation_splits import HALVES, encode_dialogues, half, texts_of
from tqdm import tqdm

from memory_core.formation.backends import sentence_encoder
from memory_core.formation.config import EncoderConfig
from memory_core.formation.stages.boundary_model import load_boundary_model, shipped_manifest
from memory_core.formation.stages.segmenter import DEFAULT_THRESHOLD, EmbeddingSegmenter
from memory_core.formation.stages.trained_segmenter import TrainedSegmenter
from memory_core.text.embeddings import Encoder, EncoderUnavailableError
from memory_core.text.similarity import IDENTITY

LOADERS: dict[str, Callable[[Path], list[Dialogue]]] = {
    "dialseg711": load_dialseg711,
    "defdts": load_defdts,
}
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
    """The heuristic segmenter as formation's ``embedding`` backend builds it over
    ``encoder`` (its threshold read through the encoder's cosine scale)."""
    scale = getattr(encoder, "cosine_scale", IDENTITY)
    return EmbeddingSegmenter(encoder, threshold=scale.threshold(DEFAULT_THRESHOLD))


def trained_segmenter(encoder: Encoder) -> TrainedSegmenter | None:
    """Formation's default segmenter with the weights shipped for ``encoder``, or None."""
    manifest = shipped_manifest(encoder.name)
    if manifest is None:
        return None
    return TrainedSegmenter(encoder, load_boundary_model(manifest, encoder.name, encoder.dimension))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        dialogues = LOADERS[args.format](args.data)
    except SegmentationDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    dialogues = half(dialogues, args.half)
    if args.max_dialogues is not None:
        dialogues = dialogues[: args.max_dialogues]
    if not dialogues:
        print(f"error: {args.data}: no dialogues", file=sys.stderr)
        return 2
    encoder = sentence_encoder(EncoderConfig(model=args.encoder))
    segmenter, trained = project_segmenter(encoder), trained_segmenter(encoder)
    try:
        encoded = _encoded_once(dialogues, encoder, args.cache_dir)
        methods = _methods(segmenter, trained, encoded, dialogues, args.texttiling)
        results = _score_all(methods, dialogues, args.min_k)
    except EncoderUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    note = _note(args, segmenter, trained)
    print(_report(args.data, dialogues, results, note, args.min_k))
    if args.json is not None:
        _write_json(args.json, args, results, note)
    return 0


def _note(
    args: argparse.Namespace, segmenter: EmbeddingSegmenter, trained: TrainedSegmenter | None
) -> str:
    lines = [f"half: {args.half} (dialogue ids sorted as strings)"] if args.half != "all" else []
    if trained is None:
        lines.append(f"trained: no weights shipped for the encoder {args.encoder}")
    else:
        lines.append(f"trained: {trained.interpretation.label}")
    return "\n".join([*lines, f"segmenter: {segmenter.interpretation.label}"])


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Pk and WindowDiff of the project's segmenter against baselines."
    )
    parser.add_argument("--data", type=Path, required=True, help="data file")
    parser.add_argument("--format", choices=sorted(LOADERS), required=True)
    parser.add_argument(
        "--json", type=output_file, metavar="OUT", help="also write the scores here"
    )
    parser.add_argument(
        "--texttiling",
        choices=["tfidf", "embedding", "both"],
        default="both",
        help="vectors for the TextTiling baseline (default: both rows)",
    )
    parser.add_argument("--encoder", choices=["e5", "minilm"], default="e5")
    parser.add_argument(
        "--half", choices=HALVES, default="all", help="half of the dialogues by sorted id"
    )
    parser.add_argument("--cache-dir", type=Path, help="keep the file's vectors here")
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
    segmenter: EmbeddingSegmenter,
    trained: TrainedSegmenter | None,
    encoded: Encoded,
    dialogues: Sequence[Dialogue],
    kind: str,
) -> list[Method]:
    methods = []
    if trained is not None:
        methods.append(Method("trained", "trained", _with_vectors(trained.boundaries, encoded)))
    heuristic = _with_vectors(segmenter.boundaries, encoded)
    methods.append(Method("segmenter", "segmenter (heuristic)", heuristic))
    if kind in ("tfidf", "both"):
        idf = Idf.from_texts(u for d in dialogues for u in d.utterances)
        tiling = functools.partial(texttiling, vectorize=functools.partial(tfidf_vectors, idf=idf))
        methods.append(Method("texttiling", "texttiling (tf-idf)", _segmenting("tf-idf", tiling)))
    if kind in ("embedding", "both"):
        embedded = _with_vectors(lambda _, vectors: texttiling_from_vectors(vectors), encoded)
        methods.append(Method("texttiling_embedding", "texttiling (encoder)", embedded))
    methods.append(Method("none", "none (no boundaries)", _segmenting("none", no_boundaries)))
    return methods


def _segmenting(label: str, segment: Segmenter) -> Hypotheses:
    def run(dialogues: Sequence[Dialogue]) -> list[list[int]]:
        progress = tqdm(dialogues, desc=label, unit="dlg", leave=False)
        return [list(segment(list(d.utterances))) for d in progress]

    return run


def _encoded_once(dialogues: Sequence[Dialogue], encoder: Encoder, cache: Path | None) -> Encoded:
    """The corpus's vectors, encoded on the first call and shared by every later one."""

    @functools.cache
    def encoded() -> list[Vectors]:
        return encode_dialogues(dialogues, encoder, cache)

    return encoded


def _with_vectors(
    segment: Callable[[list[str], Vectors], Sequence[int]], encoded: Encoded
) -> Hypotheses:
    """Runs ``segment(utterances, vectors)`` over the corpus ``encoded`` was built for."""

    def run(dialogues: Sequence[Dialogue]) -> list[list[int]]:
        pairs = zip(dialogues, encoded(), strict=True)
        return [list(segment(texts_of(d), v)) for d, v in pairs]

    return run


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
        "encoder": args.encoder,
        "half": args.half,
        "methods": {m.key: asdict(s) for m, s in results},
        "note": note,
    }
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
