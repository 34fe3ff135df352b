"""The trained segmenter: shipped weights, their checks, the training script, the wiring."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import train_segmenter

from memory_core.errors import MemoryCoreError, SegmenterWeightsError
from memory_core.formation import FormationConfig, build_backends, parse_formation
from memory_core.formation.stages.boundary_model import (
    decide,
    load_boundary_model,
    shipped_manifest,
    write_boundary_model,
)
from memory_core.formation.stages.gap_features import (
    between_statements,
    feature_count,
    gap_features,
)
from memory_core.formation.stages.segmenter import EmbeddingSegmenter
from memory_core.formation.stages.trained_segmenter import TrainedSegmenter
from memory_core.text.e5 import E5Encoder
from memory_core.text.embeddings import MiniLMEncoder

from .topics import COOKING, FOOTBALL, tell_both

DIMENSION = 16


class TopicEncoder:
    """Deterministic fake: ``"<topic> <words>"`` maps near the topic's axis."""

    name = "fake-topics"
    dimension = DIMENSION

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = [_vector(text) for text in texts]
        return np.stack(rows) if rows else np.zeros((0, DIMENSION), np.float32)


def _vector(text: str) -> npt.NDArray[np.float32]:
    rng = np.random.default_rng(sum(map(ord, text)))
    vector = rng.normal(scale=0.3, size=DIMENSION)
    vector[int(text.split()[0]) % DIMENSION] += 1.0
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def _e5_manifest() -> Path:
    manifest = shipped_manifest(E5Encoder.name)
    assert manifest is not None, "no weights shipped for e5"
    return manifest


def _copy_weights(tmp_path: Path) -> tuple[Path, Path]:
    manifest = _e5_manifest()
    weights = manifest.with_suffix(".npz")
    shutil.copy(manifest, tmp_path / manifest.name)
    shutil.copy(weights, tmp_path / weights.name)
    return tmp_path / manifest.name, tmp_path / weights.name


# -- features -------------------------------------------------------------------------------


def test_features_are_local_to_their_gap() -> None:
    """A gap scores the same whether the run starts two or six turns before it."""
    texts = [f"{i // 4} turn number {i}?" for i in range(12)]
    vectors = TopicEncoder().encode(texts)
    whole = gap_features(texts, vectors)
    assert whole.shape == (11, feature_count(DIMENSION)) and np.all(np.isfinite(whole))
    tail = gap_features(texts[4:], vectors[4:])
    np.testing.assert_allclose(tail[4:6], whole[8:10])
    assert gap_features(texts[:1], vectors[:1]).shape == (0, feature_count(DIMENSION))


def test_a_vector_that_is_not_finite_gives_finite_features() -> None:
    """Before: a vector holding an infinity (an encoder's overflow) made NaN features,
    and a NaN probability is never at the threshold: the gaps around it silently lost
    their boundaries. Such a vector is read as a zero vector (its cosines are 0), as
    the module's invariant says ("all finite")."""
    texts = [f"{i // 3} turn {i}" for i in range(6)]
    vectors = TopicEncoder().encode(texts).astype(np.float64)
    vectors[1, 0], vectors[4, 2] = np.inf, np.nan
    features = gap_features(texts, vectors)
    assert features.shape == (5, feature_count(DIMENSION)) and np.all(np.isfinite(features))
    zero = vectors.copy()
    zero[1], zero[4] = 0.0, 0.0
    np.testing.assert_array_equal(features, gap_features(texts, zero))


def test_between_statements_reads_the_question_marks_of_both_turns() -> None:
    texts = ["1 plain", "2 a question?", "3 plain", "4 plain", "5 asks?"]
    features = gap_features(texts, TopicEncoder().encode(texts))
    assert between_statements(features, DIMENSION).tolist() == [False, False, True, False]


# -- the decision ----------------------------------------------------------------------------


def test_the_dip_fires_only_between_statements_when_told_so() -> None:
    """Valleys of the cosine below the cut at gaps 1 and 3; the model itself says gap 5."""
    probabilities = np.array([0.1, 0.2, 0.1, 0.2, 0.3, 0.9, 0.1])
    cosines = np.array([0.9, 0.5, 0.9, 0.6, 0.95, 0.9, 0.95])
    statements = np.array([True, True, True, False, True, True, True])
    assert decide(probabilities, "threshold", 0.5) == [5]
    assert decide(probabilities, "threshold", 0.5, cosines, 0.8) == [1, 3, 5]
    assert decide(probabilities, "threshold", 0.5, cosines, 0.8, statements) == [1, 5]
    assert decide(probabilities, "peaks", 0.5, cosines, None, statements) == [5]


# -- the shipped weights ---------------------------------------------------------------------


def test_shipped_weights_load_offline_and_segment_two_topics() -> None:
    encoder = E5Encoder()
    model = load_boundary_model(_e5_manifest(), encoder.name, encoder.dimension)
    segmenter = TrainedSegmenter(encoder, model)
    texts = COOKING + FOOTBALL
    cuts = segmenter.boundaries(texts)
    assert 3 in cuts and len(cuts) <= 2, cuts
    assert segmenter.boundaries(texts, encoder.encode(texts)) == cuts
    assert segmenter.boundaries(texts[:1]) == []
    assert segmenter.interpretation.label.startswith("segmentation:trained:intfloat")


def test_truncated_weights_are_refused_naming_the_file(tmp_path: Path) -> None:
    manifest, weights = _copy_weights(tmp_path)
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(SegmenterWeightsError, match="truncated") as caught:
        load_boundary_model(manifest, E5Encoder.name, 384)
    assert caught.value.path == str(weights) and str(weights) in str(caught.value)


def test_edited_weights_are_refused(tmp_path: Path) -> None:
    manifest, weights = _copy_weights(tmp_path)
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(SegmenterWeightsError, match="sha256"):
        load_boundary_model(manifest, E5Encoder.name, 384)


def test_a_corrupt_manifest_is_refused(tmp_path: Path) -> None:
    manifest, _ = _copy_weights(tmp_path)
    manifest.write_text(manifest.read_text()[:40])
    with pytest.raises(SegmenterWeightsError, match="manifest") as caught:
        load_boundary_model(manifest, E5Encoder.name, 384)
    assert caught.value.path == str(manifest)
    assert isinstance(caught.value, MemoryCoreError)


def test_a_manifest_without_dip_gaps_cuts_anywhere_and_a_bad_one_is_refused(
    tmp_path: Path,
) -> None:
    manifest, _ = _copy_weights(tmp_path)
    fields = json.loads(manifest.read_text())
    assert fields["dip_gaps"] == "statements"
    assert load_boundary_model(manifest, E5Encoder.name, 384).dip_gaps == "statements"
    del fields["dip_gaps"]
    manifest.write_text(json.dumps(fields))
    assert load_boundary_model(manifest, E5Encoder.name, 384).dip_gaps == "all"
    manifest.write_text(json.dumps({**fields, "dip_gaps": "questions"}))
    with pytest.raises(SegmenterWeightsError, match="dip_gaps"):
        load_boundary_model(manifest, E5Encoder.name, 384)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("bytes", None),
        ("bytes", "many"),
        ("bytes", 1e400),
        ("bytes", True),
        ("sha256", None),
        ("sha256", 5),
        ("threshold", float("nan")),
        ("threshold", float("inf")),
        ("threshold", -3),
        ("threshold", 1.5),
        ("threshold", True),
        ("dip", float("nan")),
        ("dip", float("-inf")),
        ("dip", 2.0),
    ],
)
def test_a_manifest_field_of_the_wrong_type_or_range_is_refused(
    tmp_path: Path, field: str, value: object
) -> None:
    """Before: a missing or non-integer ``bytes`` raised KeyError, ValueError, TypeError
    or OverflowError out of the loader, and a NaN, infinite or out-of-range threshold or
    dip loaded and silently placed no boundary, or one at every gap."""
    manifest, _ = _copy_weights(tmp_path)
    fields = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**fields, field: value}))
    with pytest.raises(SegmenterWeightsError, match=field) as caught:
        load_boundary_model(manifest, E5Encoder.name, 384)
    assert caught.value.path == str(manifest)


@pytest.mark.parametrize("field", ["bytes", "sha256", "threshold", "rule"])
def test_a_manifest_missing_a_field_is_refused_naming_it(tmp_path: Path, field: str) -> None:
    manifest, _ = _copy_weights(tmp_path)
    fields = json.loads(manifest.read_text())
    del fields[field]
    manifest.write_text(json.dumps(fields))
    with pytest.raises(SegmenterWeightsError, match=field):
        load_boundary_model(manifest, E5Encoder.name, 384)


def test_a_path_with_a_nul_character_is_refused_naming_it(tmp_path: Path) -> None:
    """Before: a manifest path or a ``weights`` name holding a NUL (YAML writes it as
    "\\0") raised ValueError: embedded null byte, out of the loader."""
    with pytest.raises(SegmenterWeightsError, match="manifest"):
        load_boundary_model(tmp_path / "a\x00b.json", E5Encoder.name, 384)
    manifest, _ = _copy_weights(tmp_path)
    fields = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**fields, "weights": "segmenter\x00.npz"}))
    with pytest.raises(SegmenterWeightsError, match="cannot read the weights"):
        load_boundary_model(manifest, E5Encoder.name, 384)


def _rewritten(tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """The shipped weights with ``change`` made to their arrays, written with a manifest
    that matches them (size and sha256): only the arrays' own checks can refuse them."""
    manifest, weights = _copy_weights(tmp_path)
    fields = json.loads(manifest.read_text())
    with np.load(weights) as npz:
        arrays: dict[str, Any] = {name: np.array(npz[name]) for name in npz.files}
    change(arrays)
    kept = ("encoder", "dimension", "threshold", "rule", "dip", "dip_gaps")
    write_boundary_model(manifest, arrays, {k: fields[k] for k in kept})
    return manifest


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda a: a["w0"].__setitem__((0, 0), np.nan), "not finite"),
        (lambda a: a["scale"].__setitem__(3, 0.0), "scale"),
        (lambda a: a.__setitem__("w0", a["w0"][:10]), "shapes"),
        (lambda a: a.pop("b1"), "shapes"),
        (lambda a: a.__setitem__("extra", np.zeros(3)), "shapes"),
    ],
)
def test_weights_that_cannot_be_used_are_refused_saying_why(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], reason: str
) -> None:
    """Before: NaN weights or a zero scale were refused as "arrays of unexpected
    shapes", listing shapes that were all as expected."""
    manifest = _rewritten(tmp_path, change)
    with pytest.raises(SegmenterWeightsError, match=reason) as caught:
        load_boundary_model(manifest, E5Encoder.name, 384)
    assert caught.value.path == str(manifest.with_suffix(".npz"))


def test_weights_for_another_encoder_are_refused(tmp_path: Path) -> None:
    manifest, _ = _copy_weights(tmp_path)
    with pytest.raises(SegmenterWeightsError, match="not for the configured") as caught:
        load_boundary_model(manifest, MiniLMEncoder.name, 384)
    assert str(manifest) in str(caught.value)
    config = parse_formation(
        {"encoder": {"model": "minilm"}, "segmentation": {"model_path": str(manifest)}}
    )
    with pytest.raises(SegmenterWeightsError, match="multilingual-e5-small"):
        build_backends(config)


# -- the wiring ------------------------------------------------------------------------------


def test_formation_uses_the_trained_segmenter_by_default() -> None:
    config = FormationConfig()
    assert config.stage("segmentation").backend == "trained"
    segmenter = build_backends(config).segmenter
    assert isinstance(segmenter, TrainedSegmenter)
    assert segmenter.interpretation.label.startswith("segmentation:trained:")


def test_the_heuristic_when_asked() -> None:
    config = parse_formation({"segmentation": {"backend": "embedding"}})
    segmenter = build_backends(config).segmenter
    assert isinstance(segmenter, EmbeddingSegmenter)
    assert segmenter.interpretation.label.startswith("segmentation:embedding:")
    assert "fallback" not in segmenter.interpretation.label


def test_the_heuristic_when_no_weights_match_the_encoder(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        segmenter = build_backends(FormationConfig(), encoder=TopicEncoder()).segmenter
    assert isinstance(segmenter, EmbeddingSegmenter)
    assert "fallback" in segmenter.interpretation.label
    assert "no trained segmenter weights for the encoder 'fake-topics'" in caplog.text


# -- the training script ---------------------------------------------------------------------


def _dialogue(rng: np.random.Generator, dialogue: int) -> tuple[list[str], list[int]]:
    turns, lengths = [], [int(n) for n in rng.integers(2, 6, size=3)]
    for segment, length in enumerate(lengths):
        topic = (dialogue + 5 * segment) % DIMENSION
        turns += [f"{topic} says thing {dialogue} {segment} {i}" for i in range(length)]
    return turns, lengths


def _write_sample(folder: Path) -> None:
    rng = np.random.default_rng(7)
    lines: list[tuple[str, list[str], list[int]]] = []  # (jsonl line, turns, segment lengths)
    dialseg: list[tuple[str, list[str], list[int]]] = []
    superseg: list[tuple[str, list[str], list[int]]] = []
    for d in range(40):
        turns, lengths = _dialogue(rng, d)
        parts, start = [], 0
        for length in lengths:
            parts.append("[NEWLINE]".join(f"user: {t}" for t in turns[start : start + length]))
            start += length
        line = json.dumps({"id": f"d{d}", "dialogue": "[NEWLINE][BOUNDARY][NEWLINE]".join(parts)})
        (lines if d < 14 else superseg if d < 30 else dialseg).append((line, turns, lengths))
    (folder / "tiage_train.jsonl").write_text("\n".join(x[0] for x in lines) + "\n")
    (folder / "superseg_validation.jsonl").write_text("\n".join(x[0] for x in superseg) + "\n")
    items = [
        {"dial_id": f"s{i}", "utterances": t, "segments": s, "set": "test"}
        for i, (_, t, s) in enumerate(dialseg)
    ]
    (folder / "dialseg_711.json").write_text(json.dumps(items))


def test_the_training_script_reproduces_its_weights(tmp_path: Path) -> None:
    _write_sample(tmp_path)
    args = ["--data-dir", str(tmp_path), "--cache-dir", str(tmp_path / "cache")]
    args += ["--grid", "quick", "--folds", "2"]
    digests = []
    for run in ("a", "b"):
        out = tmp_path / run / "segmenter-fake.json"
        out.parent.mkdir()
        assert train_segmenter.main([*args, "--out", str(out)], encoder=TopicEncoder()) == 0
        digests.append(hashlib.sha256(out.with_suffix(".npz").read_bytes()).hexdigest())
        assert out.read_text() == (tmp_path / "a" / "segmenter-fake.json").read_text()
    assert digests[0] == digests[1]
    manifest = json.loads(out.read_text())
    assert manifest["encoder"] == "fake-topics" and manifest["sha256"] == digests[0]
    assert manifest["training"]["data"]["superseg_first_half"]["dialogues"] == 8
    model = load_boundary_model(out, "fake-topics", DIMENSION)
    turns, lengths = _dialogue(np.random.default_rng(1), 99)
    cuts = TrainedSegmenter(TopicEncoder(), model).boundaries(turns)
    truth = [lengths[0] - 1, lengths[0] + lengths[1] - 1]
    assert all(any(abs(c - t) <= 1 for c in cuts) for t in truth), (cuts, truth)
    with pytest.raises(SegmenterWeightsError, match="fake-topics"):
        load_boundary_model(out, E5Encoder.name, 384)


@pytest.mark.parametrize("backend", ["trained", "embedding"])
def test_formation_records_the_segmenter_it_used(tmp_path: Path, backend: str) -> None:
    """The store's formation segments with the trained backend by default, the heuristic
    when asked; two topics told one after the other become two segments either way."""
    from memory_core import MemoryStore

    config = parse_formation({"encoder": {"words": "off"}, "segmentation": {"backend": backend}})
    store = MemoryStore(tmp_path / "m.db", formation=config)
    try:
        tell_both(store)
        rows = list(store._reader.execute("SELECT interpretation FROM segments"))
        assert {r[0].split(":")[1] for r in rows} == {backend} and len(rows) >= 2, rows
    finally:
        store.close()


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("tiage_train.jsonl", "\n\n", "tiage_train.jsonl: holds no dialogue"),
        ("dialseg_711.json", "[]", "dialseg_711.json: holds no dialogue"),
        # one dialogue: its first half (what trains) is empty
        ("superseg_validation.jsonl", None, "superseg_validation.jsonl: its first half holds"),
    ],
)
def test_the_training_script_names_a_corpus_without_dialogues(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str | None,
    problem: str,
) -> None:  # fmt: skip
    """An empty corpus failed deep inside the encoding (ValueError: a zip of unequal
    lengths): now one line naming the file, and exit status 2."""
    _write_sample(tmp_path)
    path = tmp_path / name
    path.write_text(content if content is not None else path.read_text().splitlines()[0])
    args = ["--data-dir", str(tmp_path), "--cache-dir", str(tmp_path / "cache")]
    out = tmp_path / "segmenter-fake.json"
    assert train_segmenter.main([*args, "--out", str(out)], encoder=TopicEncoder()) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and problem in err
    assert not out.exists()


def test_the_training_script_refuses_an_out_file_it_cannot_write_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--out in a folder that does not exist was found when the weights were written,
    after the whole training: a FileNotFoundError traceback. Now a usage error first."""
    _write_sample(tmp_path)
    out = tmp_path / "missing" / "segmenter-fake.json"
    with pytest.raises(SystemExit) as stopped:
        train_segmenter.main(["--data-dir", str(tmp_path), "--out", str(out)],
                             encoder=TopicEncoder())  # fmt: skip
    assert stopped.value.code == 2
    assert f"argument --out: {out}: the folder" in capsys.readouterr().err
