"""Train the boundary model of formation's ``trained`` segmenter, and write its weights.

Reproduces ``memory_core/formation/weights/segmenter-<encoder>.{json,npz}`` exactly
(seeded; the model is fitted in float64 by L-BFGS on one BLAS thread, so the same data
and encoder give the same bytes and sha256) from the public training splits only:

- ``tiage_train.jsonl`` (TIAGE train),
- ``dialseg_711.json`` (DialSeg711),
- the first half of ``superseg_validation.jsonl`` by dialogue id (ids sorted as strings,
  the first ``n // 2``; :mod:`evaluation.segmentation_splits`).

TIAGE validation and the second half of SuperDialseg validation, where the segmenter is
measured (``scripts/eval_segmentation.py``), are never read here. Hyper-parameters (the
model: a logistic regression or one small tanh layer, and its L2 penalty), the decision
rule and the probability threshold are chosen by cross-validation over the training
dialogues (``--folds`` folds by dialogue, seeded): each candidate is fitted on the other
folds, every training dialogue is segmented out of fold, and the candidate, rule and
threshold with the lowest mean Pk over TIAGE train and the SuperDialseg first half win
(DialSeg711's out-of-fold Pk is printed too). The winner is then fitted on all of it.

Beside the model the weights keep a cosine cut (``dip``, see
:mod:`memory_core.formation.stages.boundary_model`). By default (``--dip heuristic``) it
is the cut of the ``embedding`` heuristic (0.30 on MiniLM's scale, through the encoder's
cosine scale): the models learn the cues of these corpora (a new question, a greeting)
and, alone, miss a plain change of subject between statements (four turns about bread,
then four about football), which formation must not merge into one context. The rule and
threshold are then chosen by cross-validation *with* that cut. ``--dip cv`` lets the
cross-validation choose the cut too (none, or a low quantile of the training cosines).
``--dip-gaps statements`` (the default) lets the cut fire only between two turns without
a question mark, where the corpora's cue for a new topic is absent; ``all`` everywhere.

Features: :mod:`memory_core.formation.stages.gap_features` over the encoder's vectors of
each turn as formation sees it (the text without its ``user:``/``agent:`` prefix).

Usage (from the project root, with the project's virtual environment)::

    python scripts/train_segmenter.py --encoder e5
    python scripts/train_segmenter.py --encoder minilm

Vectors are cached under ``--cache-dir`` (default ``~/.cache/areamem/segmentation``);
the first run encodes ~32,000 turns (minutes on two cores). Exit status: 0 on success, 1
when the encoder cannot be loaded, 2 for a malformed data file or bad arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _common import output_file
from evaluation.segmentation import (
    Dialogue,
    SegmentationDataError,
    evaluate,
    load_defdts,
    load_dialseg711,
)
from evaluation.segmentation_splits import encode_dialogues, half, texts_of
from scipy.optimize import minimize
from scipy.special import expit
from threadpoolctl import threadpool_limits

from memory_core.formation.backends import sentence_encoder
from memory_core.formation.config import EncoderConfig
from memory_core.formation.stages.boundary_model import (
    DIP_GAPS,
    RULES,
    decide,
    probabilities,
    write_boundary_model,
)
from memory_core.formation.stages.gap_features import (
    FEATURE_VERSION,
    between_statements,
    cosine_column,
    gap_features,
)
from memory_core.formation.stages.segmenter import DEFAULT_THRESHOLD
from memory_core.text.embeddings import Encoder, EncoderUnavailableError
from memory_core.text.similarity import IDENTITY

FILES = {
    "tiage_train": "tiage_train.jsonl",
    "dialseg711": "dialseg_711.json",
    "superseg_first_half": "superseg_validation.jsonl",
}
SELECTED_ON = ("tiage_train", "superseg_first_half")
"""The corpora whose mean out-of-fold Pk chooses the model, rule and threshold."""
THRESHOLDS = tuple(round(t, 3) for t in np.arange(0.05, 0.951, 0.025))
DIP_QUANTILES = (0.005, 0.01, 0.02, 0.05)
"""``--dip cv``: candidate ``dip`` cosines, these quantiles of ``cos_w2`` over the training
gaps, or none."""
MAX_ITER = 300
DEFAULT_WEIGHTS = Path(__file__).resolve().parent.parent / "memory_core/formation/weights"

Matrix = npt.NDArray[np.float64]
Statements = list[npt.NDArray[np.bool_]] | None
"""Per training dialogue, the gaps between two statements where the cut may fire (None:
anywhere)."""


@dataclass(frozen=True)
class Candidate:
    """One model to cross-validate: ``hidden`` tanh units (0: logistic), its L2, and
    whether each corpus weighs the same in the loss (``balanced``) or each gap does."""

    hidden: int
    l2: float
    balanced: bool = False

    @property
    def label(self) -> str:
        kind = "logistic" if self.hidden == 0 else f"mlp{self.hidden}"
        return f"{kind}-l2={self.l2:g}" + ("-balanced" if self.balanced else "")


GRIDS = {
    "full": (Candidate(0, 0.1, True), Candidate(0, 1.0, True), Candidate(16, 0.01, True)),
    "logistic": (Candidate(0, 0.1, True), Candidate(0, 1.0, True)),
    "quick": (Candidate(0, 1e-2),),
}
"""Candidates to cross-validate (``--grid``)."""


@dataclass(frozen=True)
class Corpus:
    """The training dialogues, their gap features and labels, and where each came from."""

    dialogues: list[Dialogue]
    sources: list[str]
    features: list[Matrix]
    cosines: list[Matrix]
    statements: list[npt.NDArray[np.bool_]]

    def dips(self, how: str, encoder: Encoder) -> list[float | None]:
        """``heuristic``: the cut of formation's ``embedding`` heuristic (its threshold on
        the encoder's cosine scale), so that the trained segmenter never misses a change
        the heuristic sees; ``cv``: none or a :data:`DIP_QUANTILES` of ``cos_w2``."""
        if how == "heuristic":
            scale = getattr(encoder, "cosine_scale", IDENTITY)
            return [round(scale.threshold(DEFAULT_THRESHOLD), 4)]
        quantiles = np.quantile(np.concatenate(self.cosines), DIP_QUANTILES)
        return [None, *(round(float(q), 4) for q in quantiles)]

    def stacked(self, chosen: Sequence[int]) -> tuple[Matrix, Matrix, Matrix]:
        """Features, labels and source index of every gap of the ``chosen`` dialogues."""
        x = np.concatenate([self.features[i] for i in chosen])
        y = np.concatenate([_labels(self.dialogues[i]) for i in chosen])
        names = list(dict.fromkeys(self.sources))
        source = np.concatenate(
            [np.full(len(self.features[i]), names.index(self.sources[i])) for i in chosen]
        )
        return x, y, source.astype(np.float64)


@dataclass(frozen=True)
class Choice:
    """A candidate's best rule and threshold, with its out-of-fold Pk per corpus."""

    candidate: Candidate
    rule: str
    threshold: float
    dip: float | None
    pk: dict[str, float]

    @property
    def objective(self) -> float:
        return float(np.mean([self.pk[name] for name in SELECTED_ON]))


def main(argv: Sequence[str] | None = None, encoder: Encoder | None = None) -> int:
    """Train and write the weights; ``encoder`` replaces ``--encoder`` (tests)."""
    args = _parse_args(argv)
    try:
        sources = _load(args.data_dir)
    except SegmentationDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    encoder = encoder or sentence_encoder(EncoderConfig(model=args.encoder))
    try:
        corpus = _corpus(sources, encoder, args.cache_dir)
    except EncoderUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    with threadpool_limits(1):
        dips = corpus.dips(args.dip, encoder)
        where = corpus.statements if args.dip_gaps == "statements" else None
        choice, choices = _cross_validate(
            corpus, GRIDS[args.grid], dips, where, args.folds, args.seed
        )
        arrays = _fit(*corpus.stacked(range(len(corpus.dialogues))), choice.candidate, args.seed)
    training = _in_sample(corpus, arrays, choice, where)
    print(_report(choices, choice, training))
    out = args.out or DEFAULT_WEIGHTS / f"segmenter-{args.encoder}.json"
    fields = _manifest_fields(args, encoder, sources, choice, choices, training)
    write_boundary_model(out, arrays, fields)
    weights = out.with_suffix(".npz")
    print(f"wrote {out} and {weights} ({weights.stat().st_size} bytes)")
    return 0


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train the trained segmenter's weights.")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data/segmentation"))
    parser.add_argument("--encoder", choices=["e5", "minilm"], default="e5")
    parser.add_argument(
        "--out", type=output_file, help="manifest path (default: the shipped one)"
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=Path.home() / ".cache/areamem/segmentation"
    )
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--grid", choices=sorted(GRIDS), default="full")
    parser.add_argument(
        "--dip",
        choices=["heuristic", "cv"],
        default="heuristic",
        help="the cosine cut kept beside the model (default: the heuristic's)",
    )
    parser.add_argument(
        "--dip-gaps",
        choices=DIP_GAPS,
        default="statements",
        help="where the cut may fire: only between two statements (default), or anywhere",
    )
    return parser.parse_args(argv)


def _load(data_dir: Path) -> dict[str, list[Dialogue]]:
    """The three training corpora (the SuperDialseg file's first half only). Each must
    hold a dialogue: an empty one (a file of blank lines, ``[]``, a SuperDialseg file of
    one dialogue, whose first half is empty) has nothing to train or select on, and
    failed as a ValueError deep inside the encoding (a zip of unequal lengths)."""
    sources = {
        "tiage_train": load_defdts(data_dir / FILES["tiage_train"]),
        "dialseg711": load_dialseg711(data_dir / FILES["dialseg711"]),
        "superseg_first_half": half(
            load_defdts(data_dir / FILES["superseg_first_half"]), "first"
        ),
    }
    for name, dialogues in sources.items():
        if not dialogues:
            which = "its first half holds" if name == "superseg_first_half" else "holds"
            raise SegmentationDataError(f"{data_dir / FILES[name]}: {which} no dialogue")
    return sources


def _corpus(sources: dict[str, list[Dialogue]], encoder: Encoder, cache: Path) -> Corpus:
    dialogues, names, features = [], [], []
    for name, corpus in sources.items():
        vectors = encode_dialogues(corpus, encoder, cache)
        for dialogue, rows in zip(corpus, vectors, strict=True):
            if len(dialogue.utterances) >= 2:
                dialogues.append(dialogue)
                names.append(name)
                features.append(gap_features(texts_of(dialogue), rows))
    column, dimension = cosine_column(encoder.dimension), encoder.dimension
    cosines = [f[:, column] for f in features]
    statements = [between_statements(f, dimension) for f in features]
    return Corpus(dialogues, names, features, cosines, statements)


def _labels(dialogue: Dialogue) -> Matrix:
    labels = np.zeros(len(dialogue.utterances) - 1)
    labels[list(dialogue.boundaries)] = 1.0
    return labels


def _cross_validate(
    corpus: Corpus,
    grid: Sequence[Candidate],
    dips: Sequence[float | None],
    where: Statements,
    folds: int,
    seed: int,
) -> tuple[Choice, list[Choice]]:
    fold_of = np.random.default_rng(seed).permutation(len(corpus.dialogues)) % folds
    choices = []
    for candidate in grid:
        out_of_fold: list[Matrix] = [np.zeros(0)] * len(corpus.dialogues)
        for fold in range(folds):
            train = np.flatnonzero(fold_of != fold)
            arrays = _fit(*corpus.stacked(train.tolist()), candidate, seed)
            for i in np.flatnonzero(fold_of == fold):
                out_of_fold[i] = probabilities(arrays, corpus.features[i])
        choices.append(_best_decision(corpus, candidate, out_of_fold, dips, where))
        print(f"  {candidate.label}: {_figures(choices[-1])}", file=sys.stderr)
    return min(choices, key=lambda c: c.objective), choices


def _best_decision(
    corpus: Corpus,
    candidate: Candidate,
    out_of_fold: list[Matrix],
    dips: Sequence[float | None],
    where: Statements,
) -> Choice:
    best: Choice | None = None
    for rule, threshold, dip in itertools.product(RULES, THRESHOLDS, dips):
        hypotheses = [
            decide(p, rule, threshold, c, dip, None if where is None else where[i])
            for i, (p, c) in enumerate(zip(out_of_fold, corpus.cosines, strict=True))
        ]
        choice = Choice(candidate, rule, threshold, dip, _pk_by_source(corpus, hypotheses))
        if best is None or choice.objective < best.objective:
            best = choice
    assert best is not None
    return best


def _pk_by_source(corpus: Corpus, hypotheses: list[list[int]]) -> dict[str, float]:
    pk = {}
    for name in dict.fromkeys(corpus.sources):
        index = [i for i, s in enumerate(corpus.sources) if s == name]
        dialogues = [corpus.dialogues[i] for i in index]
        pk[name] = evaluate(dialogues, [hypotheses[i] for i in index]).pk
    return pk


def _fit(
    x: Matrix, y: Matrix, source: Matrix, candidate: Candidate, seed: int
) -> dict[str, Matrix]:
    """Weights minimising the (weighted) mean log loss plus ``l2 / 2`` of the squared
    weights; ``balanced`` weighs each gap by one over its corpus's gap count."""
    weight = np.ones(len(y))
    if candidate.balanced:
        counts = np.bincount(source.astype(np.int64))
        weight = len(y) / (len(counts) * counts[source.astype(np.int64)])
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-6] = 1.0
    z = (x - mean) / scale
    shapes = _shapes(x.shape[1], candidate.hidden)
    theta0 = _initial(shapes, seed)
    result = minimize(
        _loss_and_gradient,
        theta0,
        args=(z, y, weight, shapes, candidate.l2),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": MAX_ITER},
    )
    return {"mean": mean, "scale": scale, **_unpack(result.x, shapes)}


def _shapes(features: int, hidden: int) -> dict[str, tuple[int, ...]]:
    if hidden == 0:
        return {"w0": (features, 1), "b0": (1,)}
    return {"w0": (features, hidden), "b0": (hidden,), "w1": (hidden, 1), "b1": (1,)}


def _initial(shapes: dict[str, tuple[int, ...]], seed: int) -> Matrix:
    rng = np.random.default_rng(seed)
    parts = [
        rng.normal(0.0, 1.0 / np.sqrt(shape[0]), shape).ravel()
        if name.startswith("w") and "w1" in shapes
        else np.zeros(int(np.prod(shape)))
        for name, shape in shapes.items()
    ]
    return np.concatenate(parts)


def _unpack(theta: Matrix, shapes: dict[str, tuple[int, ...]]) -> dict[str, Matrix]:
    arrays, start = {}, 0
    for name, shape in shapes.items():
        size = int(np.prod(shape))
        arrays[name] = theta[start : start + size].reshape(shape)
        start += size
    return arrays


def _loss_and_gradient(
    theta: Matrix,
    z: Matrix,
    y: Matrix,
    weight: Matrix,
    shapes: dict[str, tuple[int, ...]],
    l2: float,
) -> tuple[float, Matrix]:
    p = _unpack(theta, shapes)
    n = float(np.sum(weight))
    hidden = np.tanh(z @ p["w0"] + p["b0"]) if "w1" in p else None
    logits = (hidden @ p["w1"] + p["b1"] if hidden is not None else z @ p["w0"] + p["b0"])[:, 0]
    loss = float(np.sum(weight * (np.logaddexp(0.0, logits) - y * logits)) / n)
    weights = [p["w0"]] + ([p["w1"]] if "w1" in p else [])
    loss += 0.5 * l2 * sum(float(np.sum(w * w)) for w in weights)
    error = (weight * (expit(logits) - y))[:, None] / n
    grads: dict[str, Matrix] = {}
    if hidden is not None:
        grads["w1"] = hidden.T @ error + l2 * p["w1"]
        grads["b1"] = error.sum(axis=0)
        error = (error @ p["w1"].T) * (1.0 - hidden * hidden)
    grads["w0"] = z.T @ error + l2 * p["w0"]
    grads["b0"] = error.sum(axis=0)
    return loss, np.concatenate([grads[name].ravel() for name in shapes])


def _in_sample(
    corpus: Corpus, arrays: dict[str, Matrix], choice: Choice, where: Statements
) -> dict[str, float]:
    """Pk of the final weights on their own training dialogues (optimistic, for reference)."""
    float32 = {k: v.astype(np.float32).astype(np.float64) for k, v in arrays.items()}
    hypotheses = [
        decide(
            probabilities(float32, f),
            choice.rule,
            choice.threshold,
            c,
            choice.dip,
            None if where is None else where[i],
        )
        for i, (f, c) in enumerate(zip(corpus.features, corpus.cosines, strict=True))
    ]
    return _pk_by_source(corpus, hypotheses)


def _figures(choice: Choice) -> str:
    pk = ", ".join(f"{name} {value:.3f}" for name, value in choice.pk.items())
    rule = f"{choice.rule} >= {choice.threshold:.3f}, dip {choice.dip}"
    return f"{rule}: Pk {pk} (objective {choice.objective:.4f})"


def _report(choices: list[Choice], choice: Choice, training: dict[str, float]) -> str:
    lines = ["cross-validated (out-of-fold) Pk, best rule and threshold per model:"]
    lines += [f"  {c.candidate.label}: {_figures(c)}" for c in choices]
    lines.append(f"chosen: {choice.candidate.label}, {_figures(choice)}")
    lines.append("in-sample Pk of the final weights (training data, optimistic):")
    lines += [f"  {name}: {value:.3f}" for name, value in training.items()]
    return "\n".join(lines)


def _manifest_fields(
    args: argparse.Namespace,
    encoder: Encoder,
    sources: dict[str, list[Dialogue]],
    choice: Choice,
    choices: list[Choice],
    training: dict[str, float],
) -> dict[str, Any]:
    data = {
        name: {
            "file": FILES[name],
            "sha256": hashlib.sha256((args.data_dir / FILES[name]).read_bytes()).hexdigest(),
            "dialogues": len(dialogues),
        }
        for name, dialogues in sources.items()
    }
    return {
        "encoder": encoder.name,
        "dimension": encoder.dimension,
        "threshold": choice.threshold,
        "rule": choice.rule,
        "dip": choice.dip,
        "dip_gaps": args.dip_gaps,
        "training": {
            "script": "scripts/train_segmenter.py",
            "features": FEATURE_VERSION,
            "data": data,
            "split": "superseg_first_half: ids sorted as strings, the first n // 2",
            "grid": args.grid,
            "model": asdict(choice.candidate),
            "seed": args.seed,
            "folds": args.folds,
            "dip": args.dip,
            "cv_pk": {c.candidate.label: c.pk for c in choices},
            "chosen_cv_pk": choice.pk,
            "in_sample_pk": training,
        },
    }


if __name__ == "__main__":
    sys.exit(main())
