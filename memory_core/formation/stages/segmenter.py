"""Embedding topic segmentation, the offline default segmenter.

Method. Each gap between two utterances is scored by how alike the *exchanges* on
either side of it are: the cosine between the (weighted) sum of the ``window``
utterance embeddings before the gap and the sum of the ``window`` after it (cut short
at the ends of the sequence). A boundary goes at each gap that is

1. a *valley* of that score curve: no higher than the gap after it and lower than the
   gap before it (the first and last gaps compare with their one neighbour), so one dip
   yields one boundary and two boundaries are never adjacent; and
2. below an *absolute* similarity ``threshold``.

Why this shape, rather than TextTiling's depth scores with a cutoff relative to the
dialogue's own score distribution:

- A relative cutoff always finds boundaries, even in a dialogue that keeps to one
  topic, and the formation pipeline segments short runs (the open segment's tail plus
  the new turns, 2 to 30 utterances) where a distribution of scores means little. An
  absolute similarity says the same thing in every dialogue and on every run length.
- Blocks of two utterances: in dialogue a topic is carried by an exchange (a question
  and its answer), so one utterance against the next is too noisy, while TextTiling's
  blocks of four blur the short segments of chit-chat (mean segment length about 3 to 5
  turns in TIAGE and SuperDialseg).
- Short acknowledgements ("ok", "thanks!", "Yes.") carry no topic, and MiniLM places
  them far from everything, so at full weight they dip the score beside them. Each
  utterance's vector is weighted by ``min(1, words / min_words)`` (at least one word
  counted), so a two-word reply counts half when ``min_words`` is 4.

Invariants: boundary indices are sorted, distinct and within ``0 .. n - 2`` (gap ``b``
lies after utterance ``b``); fewer than two utterances give none; given vectors are used
as they are (the encoder is called only without them); a block whose weighted sum is
the zero vector is taken as similar to anything (no evidence of a change).

Tuning, on TIAGE train (300 dialogues) and the seven DialSeg711 ``dev`` dialogues only,
never on the reported validation and test files: ``window`` 1 to 3 (and asymmetric or
decaying windows), ``threshold`` from 0.10 to 0.50 in steps of 0.01, the valley rule, a
minimum distance between boundaries, a cutoff relative to the dialogue's own scores,
centring the vectors, and segment-centroid and dynamic-programming variants. Windows of
2 with an absolute threshold were best. The relative cutoff, the minimum distance (the
valley rule already keeps boundaries apart) and the other variants gained nothing;
centring on the run's mean vector gained under 0.01 on TIAGE train but makes a gap's
score depend on what else is in the run, so it was left out. On TIAGE train Pk is
within 0.01 of its best (0.355 at 0.31) for thresholds 0.29 to 0.35, and 0.358 at the
chosen ``threshold = 0.30``, against 0.387 for no boundaries and 0.414 for TextTiling
over the same vectors. The DialSeg711 dev dialogues prefer 0.24 (Pk 0.20) and give 0.28
at 0.30; every threshold from 0.18 to 0.46 beats TextTiling (0.373) there.
``min_words`` cannot be tuned on these sets (utterances of under four words are rare in
both; it changes nothing there) and is set at 4 on the argument above.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ...text.embeddings import Encoder
from ...text.words import words as words_of
from ..interfaces import BackendError, Interpretation, Vectors

__all__ = [
    "DEFAULT_MIN_WORDS",
    "DEFAULT_THRESHOLD",
    "DEFAULT_WINDOW",
    "EmbeddingSegmenter",
    "exchange_similarities",
    "utterance_vectors",
    "utterance_weights",
]

DEFAULT_WINDOW = 2
"""Utterances per side of a gap: one exchange."""
DEFAULT_THRESHOLD = 0.30
"""Cosine of the two exchanges below which a valley is a boundary (tuned, see above)."""
DEFAULT_MIN_WORDS = 4
"""Utterances shorter than this many words weigh ``words / DEFAULT_MIN_WORDS``."""

Scores = npt.NDArray[np.float64]


class EmbeddingSegmenter:
    """Boundaries where the exchanges either side of a gap are unalike (see the module).

    ``threshold`` (a cosine in [-1, 1], ``formation.segmentation.threshold`` in the
    config) defaults to :data:`DEFAULT_THRESHOLD`.
    """

    def __init__(
        self,
        encoder: Encoder,
        *,
        window: int = DEFAULT_WINDOW,
        threshold: float | None = None,
        min_words: int = DEFAULT_MIN_WORDS,
    ) -> None:
        if window < 1 or min_words < 1:
            raise ValueError(f"window and min_words must be at least 1: {window}, {min_words}")
        if threshold is None:
            threshold = DEFAULT_THRESHOLD
        self._encoder = encoder
        self._window, self._threshold, self._min_words = window, threshold, min_words
        self.interpretation = Interpretation(
            "segmentation",
            "embedding",
            encoder.name,
            f"2-exchange-valley-w{window}-t{threshold:g}-words{min_words}",
        )

    def boundaries(self, utterances: Sequence[str], vectors: Vectors | None = None) -> list[int]:
        """Sorted gaps ``b`` after which a new topic starts (``0 <= b <= n - 2``)."""
        if len(utterances) < 2:
            return []
        rows = utterance_vectors(self._encoder, utterances, vectors)
        weights = utterance_weights(utterances, self._min_words)
        scores = exchange_similarities(rows * weights[:, None], self._window)
        return [gap for gap in _valleys(scores) if scores[gap] < self._threshold]


def utterance_vectors(
    encoder: Encoder,
    utterances: Sequence[str],
    vectors: Vectors | None,
    dimension: int | None = None,
) -> npt.NDArray[np.float64]:
    """One row per utterance: ``vectors`` as given (formation's own), else ``encoder``'s;
    :class:`BackendError` when they are not one row each (of ``dimension`` numbers, when
    given)."""
    if vectors is None:
        vectors = encoder.encode(list(utterances))
    rows = np.asarray(vectors, dtype=np.float64)
    if rows.ndim != 2 or len(rows) != len(utterances):
        raise BackendError(f"{rows.shape} vectors for {len(utterances)} utterances")
    if dimension is not None and rows.shape[1] != dimension:
        raise BackendError(
            f"{rows.shape} vectors for {len(utterances)} utterances"
            f" (the weights read {dimension} dimensions)"
        )
    return rows


def utterance_weights(utterances: Sequence[str], min_words: int) -> npt.NDArray[np.float64]:
    """``min(1, words / min_words)`` per utterance, counting at least one word."""
    words = np.array([max(1, len(words_of(text))) for text in utterances], dtype=np.float64)
    weights: npt.NDArray[np.float64] = np.minimum(1.0, words / min_words)
    return weights


def exchange_similarities(vectors: npt.ArrayLike, window: int) -> Scores:
    """Cosine, at each of the ``n - 1`` gaps, of the sums of ``window`` rows either side.

    Gap ``b`` compares rows ``b-window+1 .. b`` with rows ``b+1 .. b+window``, cut at the
    ends. A side whose sum is the zero vector scores 1 (nothing suggests a change).
    """
    rows = np.asarray(vectors, dtype=np.float64)
    n = len(rows)
    if n < 2:
        return np.zeros(0)
    before = np.concatenate((np.zeros((1, rows.shape[1])), np.cumsum(rows, axis=0)))
    gaps = np.arange(1, n)
    left = before[gaps] - before[np.maximum(gaps - window, 0)]
    right = before[np.minimum(gaps + window, n)] - before[gaps]
    norms = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
    dots = np.einsum("ij,ij->i", left, right)
    scores: Scores = np.divide(dots, norms, out=np.ones(n - 1), where=norms > 0)
    return scores


def _valleys(scores: Scores) -> list[int]:
    """Gaps lower than the one before and no higher than the one after (ends: one side)."""
    lower_than_left = np.ones(len(scores), dtype=bool)
    lower_than_left[1:] = scores[1:] < scores[:-1]
    not_above_right = np.ones(len(scores), dtype=bool)
    not_above_right[:-1] = scores[:-1] <= scores[1:]
    return [int(gap) for gap in np.flatnonzero(lower_than_left & not_above_right)]
