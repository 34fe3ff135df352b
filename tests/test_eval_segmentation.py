"""Segmentation metrics, converters, loaders and TextTiling (scripts/evaluation)."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from evaluation.segmentation import (
    Dialogue,
    Idf,
    SegmentationDataError,
    block_similarities,
    boundaries_to_labels,
    boundaries_to_segments,
    default_window,
    depth_scores,
    evaluate,
    load_defdts,
    load_dialseg711,
    no_boundaries,
    pk,
    segments_to_boundaries,
    texttiling,
    tfidf_vectors,
    tokenize,
    windowdiff,
)

from memory_core import MemoryCoreError

ROOT = Path(__file__).resolve().parent.parent
COOKING = [
    "I am baking bread with flour and yeast tonight.",
    "Do you knead the bread dough by hand or with a mixer?",
    "By hand, the dough needs ten minutes of kneading before the yeast works.",
    "Fresh bread with butter is the best part of baking.",
    "My flour always sticks to the counter when I knead dough.",
    "Dust the counter with more flour and the dough will not stick.",
]
FOOTBALL = [
    "Did you watch the football match last night?",
    "Yes, the striker scored two goals in the second half.",
    "The goalkeeper saved a penalty before the striker scored.",
    "Our football team needs a better goalkeeper next season.",
    "The match ended three goals to one for the home team.",
    "The home team coach praised the striker after the match.",
]


# --- converters ----------------------------------------------------------------------------


def test_segments_to_boundaries_cuts_after_each_segment_but_the_last() -> None:
    assert segments_to_boundaries([4, 6, 2]) == [3, 9]
    assert segments_to_boundaries([4, 6, 6, 4, 4]) == [3, 9, 15, 19]
    assert segments_to_boundaries([5]) == []


def test_boundaries_to_segments_and_labels() -> None:
    assert boundaries_to_segments([3, 9], 12) == [4, 6, 2]
    assert boundaries_to_segments([9, 3], 12) == [4, 6, 2]
    assert boundaries_to_segments([], 3) == [3]
    assert boundaries_to_labels([1, 3], 5) == [0, 0, 1, 1, 2]
    assert boundaries_to_labels([], 2) == [0, 0]


def test_converters_round_trip() -> None:
    for lengths in ([1], [1, 1, 1], [3, 1, 4, 1, 5]):
        assert boundaries_to_segments(segments_to_boundaries(lengths), sum(lengths)) == lengths


@pytest.mark.parametrize(
    ("boundaries", "n"),
    [([4], 5), ([-1], 5), ([1, 1], 5), ([0], 1), ([], 0)],
)
def test_invalid_boundaries_are_rejected(boundaries: list[int], n: int) -> None:
    with pytest.raises(ValueError):
        boundaries_to_labels(boundaries, n)


def test_boundaries_must_be_integers() -> None:
    assert boundaries_to_labels(list(np.array([1])), 3) == [0, 0, 1]  # numpy integers are fine
    with pytest.raises(TypeError):
        boundaries_to_labels([1.0], 3)  # type: ignore[list-item]


def test_segment_lengths_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        segments_to_boundaries([3, 0, 2])


# --- metrics -------------------------------------------------------------------------------


def test_default_window_is_half_the_mean_segment_length_rounded_half_to_even() -> None:
    assert default_window([], 10) == 5  # one segment of 10: 10 / 2 = 5
    assert default_window([4], 10) == 2  # mean 5, 2.5 rounds to 2
    assert default_window([6], 14) == 4  # mean 7, 3.5 rounds to 4
    assert default_window([1, 3], 12) == 2  # mean 4, 4 / 2 = 2
    assert default_window([0, 1], 3) == 1  # mean 1, 0.5 rounds to 0, raised to 1


def test_min_k_raises_the_default_window_as_segeval_does() -> None:
    # n = 6, reference [1, 3]: mean length 2, so k = 1 by default and 2 with min_k = 2.
    # k = 1: probes over single gaps 0..4; reference 0 1 0 1 0, none 0 0 0 0 0 -> 2/5.
    # k = 2: probes over gaps (0,1) (1,2) (2,3) (3,4); reference 1 1 1 1       -> 4/4.
    assert default_window([1, 3], 6) == 1
    assert default_window([1, 3], 6, min_k=2) == 2
    assert pk([1, 3], [], 6) == pytest.approx(2 / 5)
    assert pk([1, 3], [], 6, min_k=2) == 1.0
    assert windowdiff([1, 3], [], 6, min_k=2) == 1.0
    assert pk([1, 3], [], 6, k=1, min_k=2) == pytest.approx(2 / 5)  # an explicit k wins
    dialogue = Dialogue("d", tuple("uuuuuu"), (1, 3))
    assert evaluate([dialogue], [[]], min_k=2).mean_k == 2.0
    with pytest.raises(ValueError, match="min_k"):
        default_window([], 4, min_k=0)


def test_perfect_segmentation_scores_zero() -> None:
    for reference, n in (([3, 9], 12), ([], 7), ([0, 1, 2], 4)):
        assert pk(reference, reference, n) == 0.0
        assert windowdiff(reference, reference, n) == 0.0


def test_pk_and_windowdiff_by_hand() -> None:
    # n = 10, reference [4] (segments 0-4, 5-9), default k = round(2.5) = 2.
    # Probes i = 0..7 span gaps i and i+1; boundaries per probe:
    #   reference [4]:  0 0 0 1 1 0 0 0
    #   hypothesis [5]: 0 0 0 0 1 1 0 0   -> disagree at i = 3 and i = 5
    assert pk([4], [5], 10) == pytest.approx(2 / 8)
    assert windowdiff([4], [5], 10) == pytest.approx(2 / 8)
    #   hypothesis [4, 5]: 0 0 0 1 2 1 0 0
    #   Pk (any boundary?): differs at i = 5 only           -> 1/8
    #   WindowDiff (how many?): differs at i = 4 and i = 5  -> 2/8
    assert pk([4], [4, 5], 10) == pytest.approx(1 / 8)
    assert windowdiff([4], [4, 5], 10) == pytest.approx(2 / 8)


def test_near_miss_costs_less_than_a_miss_with_a_wider_window() -> None:
    # n = 10, reference [4], k = 4: probes i = 0..5 span gaps i..i+3.
    #   reference [4]:  0 1 1 1 1 0
    #   hypothesis [5]: 0 0 1 1 1 1  -> 2 of 6 probes wrong
    #   hypothesis []:  0 0 0 0 0 0  -> 4 of 6 probes wrong
    assert pk([4], [5], 10, k=4) == pytest.approx(2 / 6)
    assert pk([4], [], 10, k=4) == pytest.approx(4 / 6)
    assert windowdiff([4], [5], 10, k=4) == pytest.approx(2 / 6)
    assert windowdiff([4], [], 10, k=4) == pytest.approx(4 / 6)


def test_a_boundary_at_every_gap_against_one_segment_is_always_wrong() -> None:
    # n = 5, no reference boundary, k = round(2.5) = 2: 3 probes, each with 2 hypothesis
    # boundaries and none in the reference.
    assert pk([], [0, 1, 2, 3], 5) == 1.0
    assert windowdiff([], [0, 1, 2, 3], 5) == 1.0


def test_no_boundaries_against_a_reference_with_boundaries() -> None:
    # n = 6, reference [2], k = round(1.5) = 2: probes (0,2) (1,3) (2,4) (3,5);
    # the reference puts (1,3) and (2,4) in different segments -> 2 of 4 probes wrong.
    assert pk([2], [], 6) == pytest.approx(0.5)
    assert windowdiff([2], [], 6) == pytest.approx(0.5)


def test_k_override_and_edge_cases() -> None:
    # A k of n or more is cut to n - 1: one probe, utterance 0 against utterance 3.
    assert pk([1], [], 4, k=10) == 1.0
    assert windowdiff([1], [0, 2], 4, k=10) == 1.0  # 1 boundary against 2
    assert pk([1], [0, 2], 4, k=10) == 0.0  # both say "different segments"
    # k = 1 compares neighbours: each misplaced boundary costs two of the n - 1 probes.
    assert pk([1], [2], 4, k=1) == pytest.approx(2 / 3)
    # One utterance: no gaps, nothing to get wrong.
    assert pk([], [], 1) == 0.0
    assert windowdiff([], [], 1) == 0.0
    with pytest.raises(ValueError, match="at least 1"):
        pk([1], [1], 4, k=0)
    with pytest.raises(ValueError):
        pk([1], [3], 4)


def _reference_pk_windowdiff(
    reference: list[int], hypothesis: list[int], n: int, k: int
) -> tuple[float, float]:
    """Slow, obviously correct: compare utterance pairs (i, i + k) through segment labels."""
    ref = boundaries_to_labels(reference, n)
    hyp = boundaries_to_labels(hypothesis, n)
    probes = range(n - k)
    pk_errors = sum((ref[i] == ref[i + k]) != (hyp[i] == hyp[i + k]) for i in probes)
    wd_errors = sum((ref[i + k] - ref[i]) != (hyp[i + k] - hyp[i]) for i in probes)
    return pk_errors / len(probes), wd_errors / len(probes)


def test_metrics_match_the_pairwise_definition_on_random_cases() -> None:
    rng = random.Random(711)
    for _ in range(500):
        n = rng.randint(2, 40)
        reference = sorted(rng.sample(range(n - 1), rng.randint(0, min(n - 1, 6))))
        hypothesis = sorted(rng.sample(range(n - 1), rng.randint(0, n - 1)))
        k = default_window(reference, n) if rng.random() < 0.5 else rng.randint(1, n - 1)
        expected_pk, expected_wd = _reference_pk_windowdiff(reference, hypothesis, n, k)
        assert pk(reference, hypothesis, n, k) == pytest.approx(expected_pk)
        assert windowdiff(reference, hypothesis, n, k) == pytest.approx(expected_wd)
        assert pk(reference, hypothesis, n, k) <= windowdiff(reference, hypothesis, n, k)


def test_evaluate_means_over_dialogues_and_pools() -> None:
    dialogues = [
        Dialogue("a", tuple("u" * 10), (4,)),  # k = 2, 8 probes
        Dialogue("b", tuple("u" * 4), (1,)),  # mean 2, k = 1, 3 probes
    ]
    scores = evaluate(dialogues, [[5], [1]])
    assert scores.pk == pytest.approx((2 / 8 + 0) / 2)
    assert scores.windowdiff == pytest.approx((2 / 8 + 0) / 2)
    assert scores.pooled_pk == pytest.approx(2 / 11)
    assert scores.pooled_windowdiff == pytest.approx(2 / 11)
    assert (scores.dialogues, scores.utterances, scores.mean_k) == (2, 14, 1.5)
    assert evaluate(dialogues, [[5], [1]], k=4).mean_k == 3.5  # 4, and 4 cut to n - 1 = 3
    with pytest.raises(ValueError, match="hypotheses"):
        evaluate(dialogues, [[]])


# --- loaders -------------------------------------------------------------------------------


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_load_dialseg711(tmp_path: Path) -> None:
    items = [
        {"dial_id": 0, "utterances": list("abcdefg"), "segments": [3, 4], "set": "test"},
        {"dial_id": "x", "utterances": ["one", "two"], "segments": [2], "set": "dev"},
    ]
    dialogues = load_dialseg711(_write(tmp_path, "d.json", json.dumps(items)))
    assert dialogues == [
        Dialogue("0", tuple("abcdefg"), (2,)),
        Dialogue("x", ("one", "two"), ()),
    ]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"dial_id": 0}', "JSON list"),
        ("[{", "cannot read JSON"),
        ('[{"dial_id": 0, "utterances": ["a"]}]', "item 0: expected keys"),
        ('[{"dial_id": 7, "utterances": ["a", "b"], "segments": [1]}]', r"item 0 \(dial_id 7\)"),
        ('[{"dial_id": 7, "utterances": ["a", "b"], "segments": [1]}]', "sum to 1 but there are 2"),
        ('[{"dial_id": 7, "utterances": ["a", 2], "segments": [2]}]', "list of strings"),
        ('[{"dial_id": 7, "utterances": ["a", "b"], "segments": [2, 0]}]', "positive integers"),
        # json.loads raises neither as JSONDecodeError: a ValueError for an integer of
        # over 4300 digits, RecursionError for arrays nested too deep (both tracebacks)
        ('[{"dial_id": ' + "9" * 5000 + "}]", "cannot read JSON: Exceeds the limit"),
        ("[" * 100_000 + "]" * 100_000, "cannot read JSON: maximum recursion depth"),
    ],
)
def test_load_dialseg711_rejects_malformed_files(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = _write(tmp_path, "bad.json", content)
    with pytest.raises(SegmentationDataError, match=problem) as caught:
        load_dialseg711(path)
    assert str(path) in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, MemoryCoreError)


def test_load_defdts_reads_turns_and_boundaries(tmp_path: Path) -> None:
    lines = [
        {
            "id": "t0",
            "dialogue": "user: hi[NEWLINE]agent: hello[NEWLINE][BOUNDARY]"
            "[NEWLINE]user: cars?[NEWLINE]agent: yes",
        },
        {"id": "t1", "dialogue": "user: a[NEWLINE]agent: b"},
        # Boundaries at the ends are dropped; a repeated one counts once.
        {
            "id": "t2",
            "dialogue": "[BOUNDARY][NEWLINE]user: a[NEWLINE][BOUNDARY][NEWLINE]"
            "[BOUNDARY][NEWLINE]agent: b[NEWLINE]user: c[NEWLINE][BOUNDARY]",
        },
    ]
    text = "\n".join(json.dumps(line) for line in lines) + "\n\n"
    dialogues = load_defdts(_write(tmp_path, "d.jsonl", text))
    assert dialogues == [
        Dialogue("t0", ("user: hi", "agent: hello", "user: cars?", "agent: yes"), (1,)),
        Dialogue("t1", ("user: a", "agent: b"), ()),
        Dialogue("t2", ("user: a", "agent: b", "user: c"), (0,)),
    ]


@pytest.mark.parametrize(
    ("second_line", "problem"),
    [
        ("{not json", "line 2: not valid JSON"),
        ('{"id": "b"}', "line 2: expected an object with 'id' and 'dialogue'"),
        ('{"id": "b", "dialogue": "x[BOUNDARY]y"}', r"line 2 \(id 'b'\): turn 1 has"),
        ('{"id": "b", "dialogue": "x[NEWLINE][NEWLINE]y"}', "turn 2 is empty"),
        ('{"id": "a", "dialogue": "x[NEWLINE]y"}', "repeated dialogue ids"),
        ('{"id": ' + "9" * 5000 + "}", "line 2: not valid JSON: Exceeds the limit"),
        ("[" * 100_000 + "]" * 100_000, "line 2: not valid JSON: maximum recursion depth"),
    ],
)
def test_load_defdts_rejects_malformed_lines(
    tmp_path: Path, second_line: str, problem: str
) -> None:
    first = json.dumps({"id": "a", "dialogue": "x[NEWLINE]y"})
    path = _write(tmp_path, "bad.jsonl", f"{first}\n{second_line}\n")
    with pytest.raises(SegmentationDataError, match=problem) as caught:
        load_defdts(path)
    assert str(path) in str(caught.value)


def test_loaders_report_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SegmentationDataError, match=r"missing\.jsonl"):
        load_defdts(tmp_path / "missing.jsonl")


# --- baselines -----------------------------------------------------------------------------


def test_no_boundaries() -> None:
    assert no_boundaries(["a", "b", "c"]) == []


def test_tokenize_drops_stop_words_and_keeps_contractions_whole() -> None:
    assert tokenize("I don't LIKE the Bread, 2 loaves!") == ["like", "bread", "2", "loaves"]


def test_tfidf_weights_rare_terms_higher() -> None:
    idf = Idf.from_texts(["bread flour", "bread yeast", "bread"])
    # ln((1 + 3) / (1 + 3)) + 1 = 1 for "bread"; ln(4 / 2) + 1 for "flour".
    assert idf.weight("bread") == pytest.approx(1.0)
    assert idf.weight("flour") == pytest.approx(math.log(2) + 1)
    vectors = tfidf_vectors(["bread bread flour", "yeast"], idf=idf)
    # Columns are the dialogue's terms in sorted order: bread, flour, yeast.
    expected = [[2.0, math.log(2) + 1, 0.0], [0.0, 0.0, math.log(2) + 1]]
    np.testing.assert_allclose(vectors, expected)


def test_block_similarities_by_hand() -> None:
    rows = [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]
    assert block_similarities(rows, 1).tolist() == pytest.approx([1.0, 0.0, 1.0])
    # window 2: gap 0 compares (1,0) with (1,1); gap 1 (2,0) with (0,2); gap 2 (1,1) with (0,1).
    half = 1 / math.sqrt(2)
    assert block_similarities(rows, 2).tolist() == pytest.approx([half, 0.0, half])
    assert block_similarities([[0.0, 0.0], [1.0, 0.0]], 1).tolist() == [0.0]


def test_depth_scores_climb_to_the_peaks_on_both_sides() -> None:
    scores = [0.9, 0.5, 0.2, 0.6, 0.4, 0.8]
    # gap 1: peaks 0.9 and 0.5 (itself)     -> 0.9 + 0.5 - 2 * 0.5 = 0.4
    # gap 2: peaks 0.9 (two steps) and 0.6  -> 0.9 + 0.6 - 2 * 0.2 = 1.1
    # gap 4: peaks 0.6 and 0.8              -> 0.6 + 0.8 - 2 * 0.4 = 0.6
    assert depth_scores(scores).tolist() == pytest.approx([0.0, 0.4, 1.1, 0.0, 0.6, 0.0])


def test_texttiling_finds_the_change_of_topic() -> None:
    assert texttiling(COOKING + FOOTBALL) == [5]
    assert texttiling(FOOTBALL + COOKING) == [5]
    assert texttiling(COOKING + FOOTBALL + COOKING) == [5, 11]


def test_texttiling_without_anything_to_find() -> None:
    assert texttiling(["only one"]) == []
    assert texttiling(["bread"] * 8) == []  # flat similarity curve
    vectors = np.ones((6, 3))
    assert texttiling(["x"] * 6, vectorize=lambda _: vectors) == []


def test_texttiling_uses_the_given_vectors() -> None:
    topic_a, topic_b = [1.0, 0.0], [0.0, 1.0]
    vectors = np.array([topic_a] * 5 + [topic_b] * 5)
    assert texttiling(["x"] * 10, vectorize=lambda _: vectors) == [4]
    assert texttiling(["x"] * 10, vectorize=lambda _: vectors, window=2, smoothing=0) == [4]


# --- the script ----------------------------------------------------------------------------


def _run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "scripts/eval_segmentation.py", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_eval_script_writes_the_documented_json(tmp_path: Path) -> None:
    items = [
        {"dial_id": i, "utterances": COOKING + FOOTBALL, "segments": [6, 6], "set": "test"}
        for i in range(3)
    ]
    data = _write(tmp_path, "d.json", json.dumps(items))
    out = tmp_path / "out.json"
    result = _run_script(
        "--data", str(data), "--format", "dialseg711", "--texttiling", "tfidf",
        "--max-dialogues", "2", "--json", str(out), "--encoder", "minilm",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["data"] == str(data)
    assert report["min_k"] == 1
    assert list(report["methods"]) == ["segmenter", "texttiling", "none"]
    assert report["methods"]["segmenter"]["pk"] == 0.0
    assert report["methods"]["texttiling"]["pk"] == 0.0
    assert report["methods"]["texttiling"]["windowdiff"] == 0.0
    # 12 utterances, k = 3, 9 probes, 3 of them span the boundary at gap 5.
    assert report["methods"]["none"]["pk"] == pytest.approx(3 / 9)
    assert report["methods"]["none"]["dialogues"] == 2
    assert "segmenter: segmentation:embedding:" in result.stdout
    assert "trained: no weights shipped for the encoder minilm" in result.stdout
    assert "Lower is better" in result.stdout


def test_eval_script_scores_the_trained_segmenter_and_a_half(tmp_path: Path) -> None:
    """With e5, formation's default, the trained segmenter is the first row; ``--half``
    keeps half the dialogues by sorted id."""
    lines = [
        json.dumps({"id": f"d{i}", "dialogue": "[NEWLINE]".join(COOKING)
                    + "[NEWLINE][BOUNDARY][NEWLINE]" + "[NEWLINE]".join(FOOTBALL)})
        for i in range(4)
    ]
    data = _write(tmp_path, "d.jsonl", "\n".join(lines) + "\n")
    out = tmp_path / "out.json"
    result = _run_script(
        "--data", str(data), "--format", "defdts", "--texttiling", "tfidf",
        "--half", "second", "--json", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert list(report["methods"]) == ["trained", "segmenter", "texttiling", "none"]
    assert report["methods"]["trained"]["dialogues"] == 2 and report["half"] == "second"
    assert report["methods"]["trained"]["pk"] < report["methods"]["none"]["pk"]
    assert "trained: segmentation:trained:intfloat" in result.stdout


def test_eval_script_rejects_a_malformed_file(tmp_path: Path) -> None:
    data = _write(tmp_path, "bad.jsonl", '{"id": "a"}\n')
    result = _run_script("--data", str(data), "--format", "defdts", "--texttiling", "tfidf")
    assert result.returncode == 2
    assert "line 1" in result.stderr
