"""The trained segmenter, formation's default: a boundary model over the encoder's vectors.

Each gap of the run is described by :func:`~.gap_features.gap_features` (the exchanges
either side, the turn after it, cosines and their depths, question marks, lengths) and
scored by a small model trained offline by ``scripts/train_segmenter.py`` on public
training splits (TIAGE train, DialSeg711, the first half of SuperDialseg validation by
dialogue id); its weights ship per encoder (:mod:`.boundary_model`). The cross-validated
Pk is in the weights' manifest, the held-out Pk (TIAGE validation, the second half of
SuperDialseg validation) in ``docs/evaluation.md``.

Why a trained model: the cosine-dip heuristic (:mod:`.segmenter`) is barely better than
placing no boundary, and with e5, whose cosines of dialogue turns all lie near 0.85, it
placed almost none. A model reads the whole difference of the two sides, not one cosine;
the heuristic's own cut is kept beside it (the weights' ``dip``), because the model alone
learns the cues of its training dialogues and misses a plain change of subject; the
shipped weights let it fire only between two statements (``dip_gaps``), where those cues
are absent.

Invariants: as every :class:`~memory_core.formation.interfaces.Segmenter`, boundaries are
sorted, distinct and within ``0 .. n - 2``; given vectors are used as they are (the
encoder is called only without them, so formation encodes nothing twice); vectors of
another dimension than the weights' raise :class:`BackendError`. Every feature is local to
its gap, so the pipeline's runs (the open segment's tail plus the new turns) score a gap as
the whole conversation would.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy.typing as npt

from ...text.embeddings import Encoder
from ..interfaces import Interpretation, Vectors
from .boundary_model import BoundaryModel, Matrix
from .gap_features import FEATURE_VERSION, between_statements, cosine_column, gap_features
from .segmenter import utterance_vectors

__all__ = ["TrainedSegmenter"]


class TrainedSegmenter:
    """Boundaries where the trained model says a new topic starts (see the module)."""

    def __init__(self, encoder: Encoder, model: BoundaryModel) -> None:
        self._encoder = encoder
        self._model = model
        self.interpretation = Interpretation(
            "segmentation",
            "trained",
            encoder.name,
            f"{FEATURE_VERSION}-{model.rule}-t{model.threshold:.3g}-dip{model.dip}"
            f"{'-statements' if model.dip_gaps == 'statements' else ''}-{model.sha256[:12]}",
        )

    def boundaries(self, utterances: Sequence[str], vectors: Vectors | None = None) -> list[int]:
        """Sorted gaps ``b`` after which a new topic starts (``0 <= b <= n - 2``)."""
        if len(utterances) < 2:
            return []
        rows = utterance_vectors(self._encoder, utterances, vectors, self._model.dimension)
        features = gap_features(utterances, rows)
        dimension = self._model.dimension
        cosines = features[:, cosine_column(dimension)]
        statements = between_statements(features, dimension)
        return self._model.decide(self._model.probabilities(features), cosines, statements)

    def probabilities(self, utterances: Sequence[str], vectors: npt.ArrayLike) -> Matrix:
        """P(boundary) at each of the ``n - 1`` gaps."""
        return self._model.probabilities(gap_features(utterances, vectors))
