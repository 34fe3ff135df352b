"""The offline embedding segmenter (memory_core.formation.stages.segmenter), over fake vectors."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from memory_core.formation.interfaces import BackendError, Segmenter
from memory_core.formation.stages.segmenter import (
    EmbeddingSegmenter,
    exchange_similarities,
    utterance_weights,
)

DIMENSION = 16
Vectors = npt.NDArray[np.float32]


class TopicEncoder:
    """Deterministic fake: an utterance ``"<topic> <words>"`` maps near the topic's axis.

    Each text's vector is its topic's basis vector plus a little noise seeded by the
    text, L2-normalised; ``calls`` records every batch encoded.
    """

    name = "fake-topics"
    dimension = DIMENSION

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(list(texts))
        return np.stack([_vector(text) for text in texts]) if texts else _empty()


class RefusingEncoder:
    """A fake that fails if called: the segmenter must use the vectors it is given."""

    name = "refusing"
    dimension = DIMENSION

    def encode(self, texts: Sequence[str]) -> Vectors:
        raise AssertionError(f"encoder called with {list(texts)}")


def _vector(text: str) -> npt.NDArray[np.float32]:
    topic = int(text.split()[0])
    rng = np.random.default_rng(sum(map(ord, text)))
    vector = np.zeros(DIMENSION)
    vector[topic] = 1.0
    vector += rng.normal(scale=0.15, size=DIMENSION)
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def _empty() -> Vectors:
    return np.zeros((0, DIMENSION), dtype=np.float32)


def _run(topics: Sequence[int], words: str = "words in a sentence of some length") -> list[str]:
    return [f"{topic} {words} {i}" for i, topic in enumerate(topics)]


def _segment(utterances: Sequence[str]) -> list[int]:
    return EmbeddingSegmenter(TopicEncoder()).boundaries(utterances)


def test_a_clear_topic_change_is_found() -> None:
    assert _segment(_run([1] * 6 + [2] * 6)) == [5]
    assert _segment(_run([1] * 5 + [2] * 4 + [3] * 6)) == [4, 8]


def test_no_boundary_inside_a_coherent_run() -> None:
    assert _segment(_run([3] * 20)) == []


@pytest.mark.parametrize(
    ("topics", "expected"),
    [([], []), ([1], []), ([1, 1], []), ([1, 2], [0]), ([1, 1, 1], []), ([1, 2, 2], [0])],
)
def test_short_sequences(topics: list[int], expected: list[int]) -> None:
    assert _segment(_run(topics)) == expected


def test_a_change_among_the_last_turns_is_found() -> None:
    """The pipeline keeps only boundaries among the newest turns, at the run's end."""
    assert _segment(_run([1] * 8 + [2])) == [7]
    assert _segment(_run([1] * 8 + [2, 2])) == [7]


def test_given_vectors_are_used_and_the_encoder_is_not_called() -> None:
    utterances = _run([1] * 4 + [2] * 4)
    vectors = TopicEncoder().encode(utterances)
    segmenter = EmbeddingSegmenter(RefusingEncoder())
    assert segmenter.boundaries(utterances, vectors) == [3]
    # The vectors decide, not the texts: the same texts with one topic's vectors.
    same = np.repeat(vectors[:1], len(utterances), axis=0)
    assert segmenter.boundaries(utterances, same) == []


def test_without_vectors_the_encoder_is_called_once() -> None:
    encoder = TopicEncoder()
    utterances = _run([1] * 3 + [2] * 3)
    assert EmbeddingSegmenter(encoder).boundaries(utterances) == [2]
    assert encoder.calls == [utterances]
    EmbeddingSegmenter(encoder).boundaries(utterances[:1])
    assert len(encoder.calls) == 1  # nothing to segment, nothing encoded


def test_a_vector_count_that_does_not_match_is_a_backend_error() -> None:
    utterances = _run([1, 1, 2])
    vectors = TopicEncoder().encode(utterances)
    with pytest.raises(BackendError, match="3 utterances"):
        EmbeddingSegmenter(RefusingEncoder()).boundaries(utterances, vectors[:2])


def test_zero_vectors_give_no_boundaries() -> None:
    segmenter = EmbeddingSegmenter(RefusingEncoder())
    zeros = np.zeros((4, DIMENSION), dtype=np.float32)
    assert segmenter.boundaries(["a", "b", "c", "d"], zeros) == []


def test_short_acknowledgements_weigh_less() -> None:
    assert utterance_weights(["ok", "thanks a lot", "", "one two three four five"], 4).tolist() == [
        0.25,
        0.75,
        0.25,
        1.0,
    ]
    # "ok" points off the topic: at full weight it dips the four gaps whose blocks hold it
    # to 0.71, below a strict threshold of 0.8; at its weight of 0.5 they stay at 0.89.
    utterances = [*_run([1] * 4), "user: ok", *_run([1] * 4)]
    vectors = np.zeros((9, DIMENSION), dtype=np.float32)
    vectors[:, 1] = 1.0
    vectors[4] = np.eye(DIMENSION)[5]
    weighted = EmbeddingSegmenter(RefusingEncoder(), threshold=0.8)
    assert weighted.boundaries(utterances, vectors) == []
    unweighted = EmbeddingSegmenter(RefusingEncoder(), threshold=0.8, min_words=1)
    (cut,) = unweighted.boundaries(utterances, vectors)
    assert 2 <= cut <= 5


def test_boundaries_are_sorted_distinct_gaps_on_random_input() -> None:
    rng = np.random.default_rng(7)
    segmenter = EmbeddingSegmenter(RefusingEncoder(), threshold=0.5)
    found = 0
    for _ in range(300):
        n = int(rng.integers(0, 31))
        vectors = rng.normal(size=(n, DIMENSION)).astype(np.float32)
        utterances = [" ".join(["w"] * int(rng.integers(1, 8))) for _ in range(n)]
        cuts = segmenter.boundaries(utterances, vectors)
        assert cuts == sorted(set(cuts))
        assert all(0 <= b <= n - 2 for b in cuts)
        assert all(right - left >= 2 for left, right in itertools.pairwise(cuts))
        found += len(cuts)
    assert found > 0


def test_exchange_similarities_match_a_slow_reference() -> None:
    rng = np.random.default_rng(11)
    for n in range(0, 12):
        for window in (1, 2, 3):
            vectors = rng.normal(size=(n, 5))
            expected = [_slow_similarity(vectors, gap, window) for gap in range(n - 1)]
            assert exchange_similarities(vectors, window) == pytest.approx(expected)


def _slow_similarity(vectors: npt.NDArray[np.float64], gap: int, window: int) -> float:
    left = sum(vectors[i] for i in range(gap - window + 1, gap + 1) if i >= 0)
    right = sum(vectors[i] for i in range(gap + 1, gap + 1 + window) if i < len(vectors))
    return float(np.dot(left, right) / (np.linalg.norm(left) * np.linalg.norm(right)))


def test_interpretation_names_the_method_and_its_parameters() -> None:
    segmenter: Segmenter = EmbeddingSegmenter(TopicEncoder())
    assert segmenter.interpretation.label == (
        "segmentation:embedding:fake-topics@2-exchange-valley-w2-t0.3-words4"
    )
    tuned = EmbeddingSegmenter(TopicEncoder(), window=3, threshold=0.25, min_words=2)
    assert tuned.interpretation.version == "2-exchange-valley-w3-t0.25-words2"


def test_the_configured_threshold_is_used() -> None:
    segmenter = EmbeddingSegmenter(TopicEncoder(), threshold=0.1)
    assert segmenter.interpretation.version.endswith("-t0.1-words4")


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        EmbeddingSegmenter(TopicEncoder(), window=0)
