"""What the trained segmenter sees of each gap between two utterances: pure numerics.

Gap ``b`` lies between utterance ``b`` and ``b + 1``. Its feature row is, in this order
(``d`` the encoder's dimension, vectors L2-normalised first):

1. ``|l - r|`` and ``l * r`` (``2d``): ``l`` the normalised mean of the ``WINDOW``
   utterances before the gap, ``r`` of the ``WINDOW`` after it (cut at the run's ends):
   *how* the two exchanges differ, not only how much;
2. the vector of utterance ``b + 1`` (``d``): what a turn that opens a topic looks like
   ("what about ...", a greeting, a new request);
3. scalars (:data:`SCALARS`): the cosine of the two sides with windows of 1, 2 and 3
   utterances, each also less the larger cosine of the neighbouring gaps (a valley is
   deeper than its sides: the one thing a heuristic cut can use), whether utterance ``b``
   and ``b + 1`` contain a question mark, and ``log(1 + words)`` of both.

Every feature is local: it reads at most ``max(WINDOWS) + 1`` utterances either side of
its gap and nothing of the run's length or of where the run starts, because formation
segments runs of any length (the open segment's tail plus the new turns) and a gap must
score the same whether the run began two turns or twenty turns before it.

Invariants: ``n`` utterances give ``n - 1`` rows (none for fewer than two) of
:func:`feature_count` columns, all finite; a zero vector stays zero (its cosines are 0).
:data:`FEATURE_VERSION` names this layout; weights trained on another layout are refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ...text.words import words as words_of

__all__ = [
    "FEATURE_VERSION",
    "SCALARS",
    "WINDOW",
    "WINDOWS",
    "between_statements",
    "cosine_column",
    "feature_count",
    "gap_features",
]

FEATURE_VERSION = "gaps-1"
"""The feature layout this module computes (stored in every weights manifest)."""
WINDOW = 2
"""Utterances per side of the gap in the vector features: one exchange."""
WINDOWS = (1, 2, 3)
"""Window sizes of the cosine features."""
SCALARS = (
    *(f"cos_w{w}" for w in WINDOWS),
    *(f"depth_w{w}" for w in WINDOWS),
    "question_before",
    "question_after",
    "log_words_before",
    "log_words_after",
)
"""The names of the scalar features, in column order after the ``3d`` vector features."""

Matrix = npt.NDArray[np.float64]


def feature_count(dimension: int) -> int:
    """Columns of a feature row over vectors of ``dimension``."""
    return 3 * dimension + len(SCALARS)


def cosine_column(dimension: int) -> int:
    """The column of ``cos_w2`` (the two exchanges' cosine) over vectors of ``dimension``."""
    return 3 * dimension + SCALARS.index(f"cos_w{WINDOW}")


def between_statements(features: Matrix, dimension: int) -> npt.NDArray[np.bool_]:
    """Whether neither turn of each gap has a question mark, read from its feature row
    (rows of :func:`gap_features` over vectors of ``dimension``)."""
    before = 3 * dimension + SCALARS.index("question_before")
    after = 3 * dimension + SCALARS.index("question_after")
    statements: npt.NDArray[np.bool_] = (features[:, before] == 0) & (features[:, after] == 0)
    return statements


def gap_features(utterances: Sequence[str], vectors: npt.ArrayLike) -> Matrix:
    """The ``(n - 1, feature_count(d))`` features of a run's gaps (see the module)."""
    rows = _unit(np.asarray(vectors, dtype=np.float64))
    n = len(rows)
    if n < 2:
        return np.zeros((0, feature_count(rows.shape[1] if rows.ndim == 2 else 0)))
    left, right = _sides(rows, WINDOW)
    cosines = np.stack([_side_cosines(rows, w) for w in WINDOWS], axis=1)
    scalars = np.concatenate((cosines, _depths(cosines), _text_features(utterances)), axis=1)
    return np.concatenate((np.abs(left - right), left * right, rows[1:], scalars), axis=1)


def _unit(rows: Matrix) -> Matrix:
    """Each row at unit length; a zero row, or one holding an infinity or a NaN (whose
    features would be NaN, never at a threshold), as a zero row."""
    with np.errstate(invalid="ignore", over="ignore"):
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
    usable = np.isfinite(norms) & (norms > 0)
    unit: Matrix = np.divide(rows, norms, out=np.zeros_like(rows), where=usable)
    return unit


def _sides(rows: Matrix, window: int) -> tuple[Matrix, Matrix]:
    """The normalised means of the ``window`` rows before and after each gap."""
    n = len(rows)
    before = np.concatenate((np.zeros((1, rows.shape[1])), np.cumsum(rows, axis=0)))
    gaps = np.arange(1, n)
    left = before[gaps] - before[np.maximum(gaps - window, 0)]
    right = before[np.minimum(gaps + window, n)] - before[gaps]
    return _unit(left), _unit(right)


def _side_cosines(rows: Matrix, window: int) -> Matrix:
    left, right = _sides(rows, window)
    cosines: Matrix = np.einsum("ij,ij->i", left, right)
    return cosines


def _depths(cosines: Matrix) -> Matrix:
    """Each gap's cosine less the larger of its neighbours' (the run's ends: one side)."""
    padded = np.pad(cosines, ((1, 1), (0, 0)), constant_values=-np.inf)
    sides = np.maximum(padded[:-2], padded[2:])
    depths: Matrix = np.where(np.isfinite(sides), cosines - sides, 0.0)
    return depths


def _text_features(utterances: Sequence[str]) -> Matrix:
    question = np.array([1.0 if "?" in text else 0.0 for text in utterances])
    length = np.array([math.log1p(len(words_of(text))) for text in utterances])
    return np.stack((question[:-1], question[1:], length[:-1], length[1:]), axis=1)
