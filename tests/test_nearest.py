"""Nearest vectors: exact on small stores, SimHash shortlist + exact cosines on large ones."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.index import nearest as nearest_module
from memory_core.index.nearest import (
    BITS,
    PREFIX_WORDS,
    WORDS,
    Codes,
    Nearest,
    Vectors,
    codes,
    nearest,
    prefixes,
)


def _unit(rows: npt.NDArray[np.floating]) -> Vectors:
    return np.asarray(rows / np.linalg.norm(rows, axis=1, keepdims=True), np.float32)


def _clustered(n: int, dim: int = 48, seed: int = 0) -> Vectors:
    """Unit vectors in a few tight clusters, as sentence embeddings are (a narrow cone)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((8, dim)) + 3.0
    return _unit(centres[rng.integers(0, 8, n)] + 0.6 * rng.standard_normal((n, dim)))


def _search(vectors: Vectors, stored: Codes, query: Vectors, k: int) -> Nearest:
    return nearest(vectors, stored, prefixes(stored), query, k)


def _exact(vectors: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    sims = vectors @ query
    return sorted(range(len(sims)), key=lambda i: (-sims[i], i))[:k]


def test_codes_are_fixed_bits_of_the_direction() -> None:
    vectors = _clustered(20)
    first, again = codes(vectors), codes(vectors * 3.0)
    assert first.shape == (20, WORDS) and first.dtype == np.uint64
    np.testing.assert_array_equal(first, again)  # a function of the direction only
    opposite = codes(-vectors[:1])
    flipped = int(np.bitwise_count(first[0] ^ opposite[0]).sum())
    assert flipped == BITS  # every hyperplane separates v from -v
    assert codes(np.empty((0, 48), np.float32)).shape == (0, WORDS)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 300), k=st.integers(0, 40), seed=st.integers(0, 10**6))
def test_small_stores_are_searched_exactly(n: int, k: int, seed: int) -> None:
    vectors = _clustered(n, seed=seed)
    query = _clustered(1, seed=seed + 1)[0]
    rows, sims = _search(vectors, codes(vectors), query, k)
    assert rows.tolist() == _exact(vectors, query, k)
    np.testing.assert_allclose(sims, vectors[rows] @ query, rtol=1e-6)


def test_a_large_store_returns_exact_cosines_of_a_shortlist_that_finds_the_nearest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(nearest_module, "EXACT_ROWS", 1_000)
    monkeypatch.setattr(nearest_module, "SHORTLIST", 600)
    monkeypatch.setattr(nearest_module, "FIRST_PASS", 2_400)
    vectors = _clustered(6_000, dim=64, seed=3)
    stored = codes(vectors)
    found = []
    for q in range(20):
        query = _clustered(1, dim=64, seed=100 + q)[0]
        rows, sims = _search(vectors, stored, query, 20)
        assert len(set(rows.tolist())) == 20
        np.testing.assert_allclose(sims, vectors[rows] @ query, rtol=1e-6)
        assert (np.diff(sims) <= 0).all()
        found.append(len(set(rows.tolist()) & set(_exact(vectors, query, 20))) / 20)
    assert np.mean(found) >= 0.9


def test_a_shortlist_as_large_as_the_store_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nearest_module, "EXACT_ROWS", 10)
    monkeypatch.setattr(nearest_module, "SHORTLIST", 500)
    vectors = _clustered(500, seed=5)
    query = _clustered(1, seed=6)[0]
    rows, _ = _search(vectors, codes(vectors), query, 30)
    assert rows.tolist() == _exact(vectors, query, 30)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 400), keep=st.integers(1, 450), seed=st.integers(0, 10**6))
def test_the_shortlist_keeps_the_closest_codes(n: int, keep: int, seed: int) -> None:
    """With no first pass (it keeps every row): ``keep`` rows (all when fewer), none
    farther than any row left out, in row order; ties at the cut-off: the lower rows."""
    vectors = _clustered(n, seed=seed)
    stored = codes(vectors)
    query = codes(_clustered(1, seed=seed + 7))[0]
    kept = nearest_module.shortlist(stored, prefixes(stored), query, keep, n)
    distance = np.bitwise_count(stored ^ query).sum(axis=1)
    assert kept.tolist() == sorted(set(kept.tolist()))
    assert kept.shape[0] == min(keep, n)
    left = np.setdiff1d(np.arange(n), kept)
    if left.shape[0] and kept.shape[0]:
        assert distance[kept].max() <= distance[left].min()
        at_cut = distance[kept].max()
        tied_left = left[distance[left] == at_cut]
        if tied_left.shape[0]:
            assert kept[distance[kept] == at_cut].max() < tied_left.min()


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 400),
    first=st.integers(1, 399),
    keep=st.integers(1, 450),
    seed=st.integers(0, 10**6),
)
def test_the_first_pass_keeps_the_closest_prefixes_and_the_second_ranks_them_whole(
    n: int, first: int, keep: int, seed: int
) -> None:
    """The shortlist is the ``keep`` closest by whole code among the ``first`` closest
    by prefix (what the brute force over both distances gives, ties by row)."""
    vectors = _clustered(n, seed=seed)
    stored = codes(vectors)
    query = codes(_clustered(1, seed=seed + 7))[0]
    kept = nearest_module.shortlist(stored, prefixes(stored), query, keep, first)
    by_prefix = np.bitwise_count(stored[:, :PREFIX_WORDS] ^ query[:PREFIX_WORDS]).sum(axis=1)
    whole = np.bitwise_count(stored ^ query).sum(axis=1)
    passed = sorted(range(n), key=lambda i: (by_prefix[i], i))[:first]  # all when n <= first
    expected = sorted(sorted(passed, key=lambda i: (whole[i], i))[:keep])
    assert kept.tolist() == expected


def test_prefixes_are_the_first_words_of_each_code() -> None:
    stored = codes(_clustered(30))
    first = prefixes(stored)
    assert first.shape == (30, PREFIX_WORDS) and first.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(first, stored[:, :PREFIX_WORDS])


def test_codes_missing_for_some_rows_fall_back_to_the_exact_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(nearest_module, "EXACT_ROWS", 10)
    vectors = _clustered(200, seed=9)
    query = _clustered(1, seed=10)[0]
    stored = codes(vectors)
    for partial, first in ((stored[:50], prefixes(stored)), (stored, prefixes(stored[:50]))):
        rows, _ = nearest(vectors, partial, first, query, 15)
        assert rows.tolist() == _exact(vectors, query, 15)


@pytest.mark.parametrize("exact_rows", [16_384, 10])
def test_only_allowed_rows_are_returned(monkeypatch: pytest.MonkeyPatch, exact_rows: int) -> None:
    """The dense pool leaves stored questions out (``retrieval.scoring.pool_questions``):
    the nearest allowed rows, exact or through the shortlist, and fewer than k when
    fewer are allowed."""
    monkeypatch.setattr(nearest_module, "EXACT_ROWS", exact_rows)
    monkeypatch.setattr(nearest_module, "SHORTLIST", 500)
    vectors = _clustered(500, seed=7)
    query = _clustered(1, seed=8)[0]
    allowed = np.arange(500) % 3 != 0
    stored = codes(vectors)
    rows, sims = nearest(vectors, stored, prefixes(stored), query, 30, allowed)
    best = [r for r in _exact(vectors, query, 500) if allowed[r]][:30]
    assert rows.tolist() == best
    np.testing.assert_allclose(sims, vectors[rows] @ query, rtol=1e-6)
    few = np.zeros(500, bool)
    few[[4, 250]] = True
    rows, _ = nearest(vectors, stored, prefixes(stored), query, 30, few)
    assert sorted(rows.tolist()) == [4, 250]
    rows, sims = nearest(vectors, stored, prefixes(stored), query, 30, np.zeros(500, bool))
    assert rows.shape == sims.shape == (0,)


@pytest.mark.parametrize("exact_rows", [16_384, 10])
def test_an_allowed_mask_that_is_no_flag_per_row_is_refused(
    monkeypatch: pytest.MonkeyPatch, exact_rows: int
) -> None:
    """Before: a mask shorter than the vectors raised IndexError from deep in the
    indexing, or nothing at all when the shortlist missed its end (the same call, a
    different store); a mask of integers was read as row numbers and returned one row
    several times. Now both are refused, whatever the store's size; a longer mask (the
    graph's arrays are views of longer buffers) reads its first rows."""
    monkeypatch.setattr(nearest_module, "EXACT_ROWS", exact_rows)
    monkeypatch.setattr(nearest_module, "SHORTLIST", 50)
    vectors = _clustered(200, seed=3)
    query = _clustered(1, seed=4)[0]
    stored = codes(vectors)
    bad_masks: tuple[npt.NDArray[Any], ...] = (
        np.ones(199, bool), np.zeros(0, bool), np.ones(200, np.int64)
    )
    for bad in bad_masks:
        with pytest.raises(ValueError, match="allowed"):
            nearest(vectors, stored, prefixes(stored), query, 5, bad)
    longer = np.r_[np.arange(200) % 2 == 0, np.zeros(7, bool)]
    rows, _ = nearest(vectors, stored, prefixes(stored), query, 500, longer)
    assert rows.shape == (100,) and all(r % 2 == 0 for r in rows.tolist())
