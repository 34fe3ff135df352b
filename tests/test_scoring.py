"""The fragment score: a pure, explainable weighted sum of terms (memory_core.retrieval.scoring)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from memory_core.retrieval.scoring import (
    TERMS,
    Candidates,
    ScoringConfig,
    rank,
    rank_computing,
    score,
)


def _candidates(**overrides: object) -> Candidates:
    columns: dict[str, object] = {
        "bm25": [1.0, 0.5, 0.0, 0.2],
        "activation": [0.0, 1.0, 0.4, 0.0],
        "convergence": [0.5, 1.0, 0.0, 0.0],
        "similarity": [0.3, 0.0, 0.9, 0.0],
        "area": [0.0, 1.0, 0.0, 0.0],
        "imputed": [False, False, False, True],
    }
    columns.update(overrides)
    return Candidates.of([10, 11, 12, 13], **columns)  # type: ignore[arg-type]


def test_the_score_is_the_weighted_sum_of_the_terms_it_reports() -> None:
    candidates = _candidates()
    config = ScoringConfig()
    scores = score(candidates, config)
    for i in range(len(candidates)):
        row = candidates.row(i)
        assert set(row) == set(TERMS)
        assert scores[i] == pytest.approx(sum(getattr(config, t) * row[t] for t in TERMS))


def test_a_fragment_newer_than_the_graph_takes_its_bm25_share_for_the_graph_terms() -> None:
    row = _candidates().row(3)
    assert row == {
        "bm25": 0.2,
        "activation": 0.2,
        "convergence": 0.2,
        "similarity": 0.2,
        "area": 0.0,
        "date": 0.0,
    }


def test_ranking_is_best_first_ties_by_id_and_drops_zero_scores() -> None:
    candidates = Candidates.of(
        [7, 3, 5, 9],
        bm25=[0.5, 0.5, 0.0, 1.0],
        activation=[0, 0, 0, 0],
        convergence=[0, 0, 0, 0],
        similarity=[0, 0, 0, 0],
        area=[0, 0, 0, 0],
        imputed=[False] * 4,
    )
    order, scores = rank(candidates, ScoringConfig(), limit=10)
    assert candidates.fragment_ids[order].tolist() == [9, 3, 7]
    assert scores[2] == 0.0
    assert rank(candidates, ScoringConfig(), limit=1)[0].tolist() == [3]


def test_weights_change_the_order_and_terms_are_clipped_to_the_unit_interval() -> None:
    candidates = _candidates(similarity=[3.0, 0.0, -2.0, 0.0])
    assert candidates.terms.min() >= 0.0 and candidates.terms.max() <= 1.0
    odd = _candidates(activation=[float("nan"), float("inf"), float("-inf"), 0.0])
    assert odd.terms[:, 1].tolist() == [0.0, 1.0, 0.0, 0.2]  # the last row is imputed
    by_similarity = ScoringConfig(bm25=0, activation=0, convergence=0, similarity=1, area=0)
    assert candidates.fragment_ids[rank(candidates, by_similarity, 1)[0]].tolist() == [10]
    by_area = ScoringConfig(bm25=0, activation=0, convergence=0, similarity=0, area=1)
    assert candidates.fragment_ids[rank(candidates, by_area, 5)[0]].tolist() == [11]


@pytest.mark.parametrize(
    "values",
    [
        {"bm25": -1.0},
        {"convergence_share": 0.0},
        {"seeds": 0},
        {"area": "high"},
        {"similarity": float("inf")},
        {"bm25": 0, "activation": 0, "convergence": 0, "similarity": 0, "area": 0, "date": 0},
    ],
)
def test_invalid_weights_are_refused(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ScoringConfig(**values)  # type: ignore[arg-type]


def test_an_empty_candidate_set_ranks_nothing() -> None:
    empty = Candidates.of(
        np.zeros(0),
        bm25=[],
        activation=[],
        convergence=[],
        similarity=[],
        area=[],
        imputed=[],
    )
    order, scores = rank(empty, ScoringConfig(), limit=5)
    assert order.shape == (0,) and scores.shape == (0,)


_SHARE = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9, 1.0])
_WEIGHT = st.sampled_from([0.0, 0.1, 0.5, 1.0, 2.0])


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(*[_SHARE] * len(TERMS)), min_size=1, max_size=40),
    ids=st.randoms(use_true_random=False),
    limit=st.integers(0, 12),
)
def test_ranking_takes_the_best_as_a_full_sort_would_with_many_ties(
    rows: list[tuple[float, ...]], ids: Any, limit: int
) -> None:
    """The partition before the sort keeps every row tied at the bar."""
    fragment_ids = list(range(1000, 1000 + len(rows)))
    ids.shuffle(fragment_ids)  # ties are broken by id, not by row
    columns = {t: [r[j] for r in rows] for j, t in enumerate(TERMS)}
    candidates = Candidates.of(fragment_ids, **columns, imputed=[False] * len(rows))
    order, scores = rank(candidates, ScoringConfig(), limit)
    reference = sorted(
        (i for i in range(len(rows)) if scores[i] > 0), key=lambda i: (-scores[i], fragment_ids[i])
    )
    assert order.tolist() == reference[:limit]


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(*[_SHARE] * len(TERMS), st.booleans()), min_size=1, max_size=30),
    weights=st.tuples(*[_WEIGHT] * len(TERMS)).filter(any),
    limit=st.integers(0, 12),
)
def test_computing_a_costly_term_only_where_it_can_matter_ranks_as_computing_it_all(
    rows: list[tuple[float | bool, ...]],
    weights: tuple[float, ...],
    limit: int,
) -> None:
    """Same top rows, same scores for them, and the term computed for fewer rows."""
    config = ScoringConfig.model_validate(dict(zip(TERMS, weights, strict=True)))
    ids = list(range(100, 100 + len(rows)))
    columns = {t: [r[j] for r in rows] for j, t in enumerate(TERMS)}
    imputed = [bool(r[len(TERMS)]) for r in rows]
    full = Candidates.of(ids, **columns, imputed=imputed)
    truth = full.terms[:, TERMS.index("similarity")]
    blank = Candidates.of(
        ids,
        **{**columns, "similarity": [0.0] * len(rows)},
        imputed=imputed,
    )
    asked: list[int] = []

    def compute(which: np.ndarray) -> np.ndarray:
        asked.extend(which.tolist())
        assert not np.asarray(imputed)[which].any()
        return np.asarray(truth[which])

    filled, order, scores = rank_computing(blank, config, limit, "similarity", compute)
    expected_order, expected_scores = rank(full, config, limit)
    assert order.tolist() == expected_order.tolist()
    np.testing.assert_allclose(scores[order], expected_scores[order])
    np.testing.assert_allclose(filled.terms[order], full.terms[order])
    assert len(asked) == len(set(asked))  # each row computed at most once


def test_a_costly_term_that_comes_back_nan_or_out_of_range_counts_as_clipped() -> None:
    blank = _candidates(similarity=[0.0, 0.0, 0.0, 0.0])
    config = ScoringConfig()
    weird = np.array([np.nan, np.inf, -3.0, 0.5])
    filled, order, scores = rank_computing(blank, config, 4, "similarity", lambda r: weird[r])
    column = filled.terms[:, TERMS.index("similarity")]
    assert column[:3].tolist() == [0.0, 1.0, 0.0]
    assert column[3] == 0.2  # the imputed row keeps its BM25 share
    assert np.isfinite(scores).all() and len(order) > 0


_FACTOR = st.sampled_from([1.0, 0.25, 0.2, 0.5, 0.0])


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(*[_SHARE] * len(TERMS), st.booleans(), _FACTOR), min_size=1, max_size=30
    ),
    limit=st.integers(0, 12),
)
def test_a_kind_factor_scales_the_score_and_computing_a_term_lazily_stays_exact(
    rows: list[tuple[float | bool, ...]], limit: int
) -> None:
    """What a fragment does multiplies its score (a question, a restatement): the
    lazy cosine still ranks exactly as computing it for every row."""
    config = ScoringConfig()
    ids = list(range(100, 100 + len(rows)))
    columns = {t: [r[j] for r in rows] for j, t in enumerate(TERMS)}
    n = len(TERMS)
    imputed, factor = [bool(r[n]) for r in rows], [r[n + 1] for r in rows]
    full = Candidates.of(ids, **columns, imputed=imputed).factored(factor)
    raw = full.terms @ config.weights()
    np.testing.assert_allclose(score(full, config), raw * np.asarray(factor))
    truth = full.terms[:, TERMS.index("similarity")]
    blank = Candidates.of(
        ids,
        **{**columns, "similarity": [0.0] * len(rows)},
        imputed=imputed,
    ).factored(factor)
    _, order, scores = rank_computing(blank, config, limit, "similarity", lambda w: truth[w])
    expected_order, expected_scores = rank(full, config, limit)
    assert order.tolist() == expected_order.tolist()
    np.testing.assert_allclose(scores[order], expected_scores[order])


def test_a_question_scores_a_tenth_and_a_restatement_a_fifth_by_default() -> None:
    config = ScoringConfig()
    assert (config.factor("stated"), config.factor("asked"), config.factor("restated")) == (
        1.0,
        0.1,
        0.2,
    )
    assert config.factor("anything else") == 1.0
    with pytest.raises(ValidationError):
        ScoringConfig(asked=1.5)
    with pytest.raises(ValidationError):
        ScoringConfig(restated=-0.1)


def test_lexical_weights_follow_the_share_of_the_question_memory_knows() -> None:
    """An English question about a Portuguese conversation: only its names are words
    memory knows, so BM25 and the graph terms speak for a fifth of it; the embedding
    term keeps its weight."""
    config = ScoringConfig()
    assert config.covering(1.0) is config and config.covering(1.5) is config
    half = config.covering(0.5)
    assert (half.bm25, half.activation, half.convergence, half.area) == (0.5, 0.25, 0.5, 0.05)
    assert half.similarity == config.similarity and half.asked == config.asked
    squared = ScoringConfig(lexical_coverage=2.0).covering(0.5)
    assert squared.bm25 == 0.25
    assert ScoringConfig(lexical_coverage=0).covering(0.0).bm25 == 1.0  # never scaled
    assert config.covering(0.0).bm25 == 0.0 and config.covering(-1.0).bm25 == 0.0
    with pytest.raises(ValidationError):
        ScoringConfig(lexical_coverage=-1)
