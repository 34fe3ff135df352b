"""``scripts/bench_lookup.py`` end to end on a two-session LoCoMo sample: both children
(this checkout as its own baseline) time every question, and two dumps of one store
compare equal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent

SAMPLE: dict[str, Any] = {
    "sample_id": "conv-l",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Rui",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a puppy yesterday."},
            {"speaker": "Rui", "dia_id": "D1:2", "text": "What a lovely puppy! What's its name?"},
            {"speaker": "Ana", "dia_id": "D1:3", "text": "Biscuit. We walk by the river."},
        ],
        "session_2_date_time": "9:05 am on 3 June, 2023",
        "session_2": [
            {"speaker": "Rui", "dia_id": "D2:1", "text": "I ran the Porto marathon last week."},
            {"speaker": "Ana", "dia_id": "D2:2", "text": "Wow, Rui, how did it go?"},
        ],
    },
    "qa": [
        {"question": "When did Ana adopt a puppy?", "answer": "7 May 2023",
         "evidence": ["D1:1"], "category": 2},
        {"question": "What is the puppy called?", "answer": "Biscuit",
         "evidence": ["D1:3"], "category": 4},
        {"question": "Which marathon did Rui run in May 2023?", "answer": "Porto",
         "evidence": ["D2:1"], "category": 4},
    ],
}  # fmt: skip


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "scripts/bench_lookup.py", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )


def test_both_codes_time_every_question_and_their_dumps_compare(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([SAMPLE]))
    out, first, second = tmp_path / "out.json", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    result = _bench(
        "--data", str(data), "--encoder", "minilm", "--store-dir", str(tmp_path / "stores"),
        "--baseline-path", str(ROOT), "--baseline-store", "current", "--rounds", "2",
        "--chunk", "2", "--asked", "end", "--dump", str(first), "--dump-baseline", str(second),
        "--json", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(out.read_text())
    assert set(figures) == {"current", "baseline"}
    for code in figures.values():
        assert code["questions"] == 3 and code["rounds"] == 2
        assert 0 < code["total"]["p50"] <= code["total"]["p90"]
        assert code["area"]["p50"] > 0 and "rank_ms" in code["stages_p50"]
    assert "p50 ratio" in result.stdout
    rows = [json.loads(line) for line in first.read_text().splitlines()]
    assert [r["question"] for r in rows] == [q["question"] for q in SAMPLE["qa"]]
    assert any("yesterday (7 May)" in r["text"] for r in rows)
    same = _bench("--compare", str(first), str(second))
    assert same.returncode == 0 and "0 differ in their hits, 0 in their block" in same.stdout
    rows[0]["text"] += "x"
    first.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _bench("--compare", str(first), str(second)).returncode == 1
