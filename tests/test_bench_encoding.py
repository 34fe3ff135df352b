"""``scripts/bench_encoding.py``'s e5 rows, in-process, on the tiny e5 model of
``test_e5`` (written by ``write_e5``) and tiny Portuguese/Spanish LoCoMo files: no real
weights and no MiniLM (its rows need the shipped model and torch: too slow here).
"""

from __future__ import annotations

import json
from pathlib import Path

import bench_encoding
import pytest

from memory_core.text.e5_format import write_e5
from memory_core.text.embeddings import _cores

from .test_e5 import tiny_weights


def _files(tmp_path: Path) -> Path:
    """The tiny model, and in ``tmp_path`` the pt and es files (6 turns each, 2 too short)."""
    write_e5(tmp_path / "tiny-q4.bin", tiny_weights())
    for lang, words in (("pt", "olá ação"), ("es", "hola que tal")):
        texts = [" ".join([words] * n) for n in (1, 2, 6, 8, 10, 12)]
        turns = [{"speaker": "A", "dia_id": f"D1:{i}", "text": t} for i, t in enumerate(texts)]
        sample = {"conversation": {"speaker_a": "A", "session_1": turns}, "qa": []}
        (tmp_path / f"locomo_conv30_{lang}.json").write_text(json.dumps([sample]))
    return tmp_path / "tiny-q4.bin"


def test_e5_rows_measure_both_runtimes_against_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _files(tmp_path)
    out = tmp_path / "figures.json"
    argv = ["--encoders", "e5", "--e5-model", str(model), "--multilingual", str(tmp_path)]
    argv += ["--per-language", "3", "--questions", "6", "--batches", "1", "--repeats", "1"]
    assert bench_encoding.main([*argv, "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "6 questions, 70 passages (64 turns + 6 pt/es)" in printed
    header = next(line for line in printed.splitlines() if line.startswith("encoder"))
    for column in (
        "median ms/text",
        "p95 ms/text",
        "texts/s",
        "min cos",
        "p1 cos",
        "median cos",
        "load s",
    ):
        assert column in header
    rows = json.loads(out.read_text())
    assert [(r["encoder"], r["runtime"], r["workload"]) for r in rows] == [
        ("e5", runtime, workload)
        for runtime in ("onnx", "onnx-int8")
        for workload in ("question (encode_question)", "batch 64")
    ]
    for row in rows:
        assert len(row["per_text_ms"]) == (6 if row["workload"].startswith("question") else 2)
        assert row["min_cos"] <= row["p1_cos"] <= row["median_cos"] <= 1 + 1e-6
        assert row["load_s"] > 0 and row["texts_per_s"] > 0
        assert "exported" in row["fast_path"]  # an empty cache: the build is what load_s timed
        assert row["threads"] == (1 if row["workload"].startswith("question") else _cores())
        # the synthetic turns span several 14-piece windows: combined as the runtime does
        if row["runtime"] == "onnx":
            assert row["min_cos"] > 0.99999 and row["max_abs"] < 1e-5
        else:
            assert row["min_cos"] > 0.98


def test_unknown_names_and_missing_files_fail_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench_encoding.main(["--encoders", "e5,bert"]) == 2
    assert "unknown ['bert']" in capsys.readouterr().err
    assert bench_encoding.main(["--encoders", "e5", "--e5-runtimes", "torch"]) == 2
    assert "unknown ['torch']" in capsys.readouterr().err
    missing = ["--encoders", "e5", "--multilingual", str(tmp_path / "none")]
    assert bench_encoding.main(missing) == 2
    assert "locomo_conv30_pt.json" in capsys.readouterr().err
