"""LoCoMo loader, ranking metrics, baselines and the eval script's JSON contract."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import eval_live
import eval_locomo
import numpy as np
import pytest
from _common import locomo_conversations, select_indices, store_file
from evaluation.baselines import BM25Retriever, DenseRetriever, rrf_fuse
from evaluation.locomo import LocomoError, load_locomo, parse_session_date
from evaluation.retrieval_metrics import mean_by_category, ndcg_at_k, recall_at_k

from memory_core.text.embeddings import MiniLMEncoder, Vectors

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent

SAMPLE: dict[str, Any] = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Rui",
        "session_2_date_time": "9:05 am on 3 June, 2023",
        "session_2": [
            {"speaker": "Ana", "dia_id": "D2:1", "text": "The marathon went well."},
            {
                "speaker": "Rui",
                "dia_id": "D2:2",
                "text": "Look at my medal!",
                "blip_caption": "a photo of a gold medal",
            },
        ],
        "session_10_date_time": "11:30 pm on 1 July, 2023",
        "session_10": [{"speaker": "Ana", "dia_id": "D10:1", "text": "I adopted a parrot."}],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I started training for a marathon."},
            {"speaker": "Rui", "dia_id": "D1:2", "text": "Which one?"},
        ],
    },
    "qa": [
        {
            "question": "Who started training for a marathon?",
            "answer": "marathon",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {
            "question": "What pet?",
            "answer": "parrot",
            "evidence": ["D10:1; D2:1", "D:1:2"],
            "category": 1,
        },
        {
            "question": "Bad ids?",
            "evidence": ["D9:9", "D"],
            "category": 5,
            "adversarial_answer": "none",
        },
    ],
}


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data))
    return path


def test_loader_orders_sessions_and_keeps_dates_and_captions(tmp_path: Path) -> None:
    (conv,) = load_locomo(_write(tmp_path, [SAMPLE]))
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1", "D2:2", "D10:1"]
    assert [len(s) for s in conv.sessions()] == [2, 2, 1]
    assert conv.turns[0].ts == dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC)
    assert conv.turns[1].ts == dt.datetime(2023, 5, 8, 13, 56, 1, tzinfo=dt.UTC)
    assert conv.turns[4].ts == dt.datetime(2023, 7, 1, 23, 30, tzinfo=dt.UTC)
    medal = conv.turns[3]
    assert medal.caption == "a photo of a gold medal"
    assert medal.document() == "Rui: Look at my medal! a photo of a gold medal"
    assert conv.turns[0].document() == "Ana: I started training for a marathon."


def test_loader_normalises_evidence_ids(tmp_path: Path) -> None:
    (conv,) = load_locomo(_write(tmp_path, [SAMPLE]))
    first, second, third = conv.questions
    assert first.evidence == ("D1:1",) and first.category == 4
    assert second.evidence == ("D10:1", "D2:1", "D1:2")
    assert third.evidence == () and third.dropped_evidence == ("D9:9", "D")
    assert third.answer == "none"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"not": "a list"}, "expected a JSON list"),
        ([{"conversation": 3}], "sample 0: expected an object"),
        (
            [
                {
                    "sample_id": "s",
                    "conversation": {"session_1_date_time": "yesterday", "session_1": []},
                }
            ],
            "unrecognised session date",
        ),
        (
            [
                {
                    "sample_id": "s",
                    "conversation": {
                        "session_1_date_time": "1:56 pm on 8 May, 2023",
                        "session_1": [{"speaker": "A", "dia_id": "D1:1"}],
                    },
                }
            ],
            "session_1[0]: 'text' must be a string",
        ),
    ],
)
def test_loader_rejects_malformed_files(tmp_path: Path, data: Any, message: str) -> None:
    with pytest.raises(LocomoError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_locomo(_write(tmp_path, data))


def _with(path: str, value: Any) -> list[dict[str, Any]]:
    """:data:`SAMPLE` with the field at ``path`` (dotted; a number indexes a list) set to
    ``value``."""
    sample = json.loads(json.dumps(SAMPLE))
    *parents, last = path.split(".")
    node: Any = sample
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[int(last) if isinstance(node, list) else last] = value
    return [sample]


_NO_TURNS = {k: v for k, v in SAMPLE.items() if k != "conversation"} | {
    "conversation": {"speaker_a": "Ana", "speaker_b": "Rui"}
}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        # 1e400 decodes as inf: int() raised OverflowError, a traceback
        (_with("qa.0.category", float("inf")), "qa[0]: 'category' must be an integer"),
        # a 'qa' that is no list: TypeError ('int' object is not iterable)
        (_with("qa", 5), "'qa' must be a list of questions"),
        # a dict was iterated over its keys, each an "expected an object" error at qa[0]
        (_with("qa", {"q": 1}), "'qa' must be a list of questions"),
        # a number: TypeError; a bare string was read character by character and every
        # id silently dropped (the question scored against no evidence)
        (_with("qa.0.evidence", 7), "qa[0]: 'evidence' must be a list of turn ids"),
        (_with("qa.0.evidence", "D1:1"), "qa[0]: 'evidence' must be a list of turn ids"),
        # a list was scored as its repr
        (_with("qa.0.answer", ["Lisbon"]), "qa[0]: 'answer' must be a string or a number"),
        # one store and row of figures per id: a repeated one mixed two conversations
        ([SAMPLE, SAMPLE], "sample 1: sample_id 'conv-x' repeats sample 0's"),
        # an empty list: eval_entities and check_faithfulness reported zeros, status 0
        ([], "locomo.json: the list holds no sample"),
        # no turn at all: the BM25 baseline failed deep inside bm25s (max() of nothing)
        ([_NO_TURNS], "sample 0 (conv-x): no session holds a turn"),
    ],
)
def test_loader_names_what_is_wrong_with_hostile_values(
    tmp_path: Path, data: Any, message: str
) -> None:
    with pytest.raises(LocomoError, match=re.escape(message)):
        load_locomo(_write(tmp_path, data))


def test_a_null_answer_is_no_answer(tmp_path: Path) -> None:
    """null was scored as the text "None"; a file may well leave an answer unwritten
    that way, so it reads as none (an adversarial question's own answer if it has one),
    not as an error."""
    (conv,) = load_locomo(_write(tmp_path, _with("qa.0.answer", None)))
    assert conv.questions[0].answer == ""


def test_the_loader_names_json_that_python_cannot_decode(tmp_path: Path) -> None:
    """Arrays nested too deep make json.loads raise RecursionError (no ValueError): it
    escaped the loader as a traceback."""
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(LocomoError, match=r"deep\.json: cannot read JSON: maximum recursion"):
        load_locomo(path)


@pytest.mark.parametrize(
    "qa",
    [[], [{"question": "Which?", "answer": "x", "evidence": ["D9:9"], "category": 1}]],
    ids=["no questions", "evidence naming no turn"],
)
def test_eval_script_stops_with_one_line_when_no_question_can_be_scored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], qa: list[dict[str, Any]]
) -> None:
    """Only questions with evidence are scored: without one, the conversation was
    replayed and the summary then failed with a KeyError."""
    data = _write(tmp_path, [{**SAMPLE, "qa": qa}])
    assert eval_locomo.main(["--data", str(data), "--methods", "bm25"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(data) in err
    assert f"no question whose evidence names a turn ({len(qa)} questions)" in err
    # the live evaluation asks the same questions: it started the proxy, replayed the
    # conversation, then its report failed with KeyError 'search after'
    data = _write(tmp_path, [{**LIVE_SAMPLE, "qa": qa}])
    assert eval_live.main(["--data", str(data)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"eval_live: {data}: ")
    assert f"no question whose evidence names a turn ({len(qa)} questions)" in err


@pytest.mark.parametrize("k", ["5,99999999999999999999", "0"])
def test_eval_scripts_refuse_a_cut_off_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], k: str
) -> None:
    """A cut-off past SQLite's 64-bit LIMIT replayed the whole conversation, then failed
    inside the store's search with OverflowError: now the usage error, status 2."""
    data = _write(tmp_path, [SAMPLE])
    with pytest.raises(SystemExit) as stopped:
        eval_locomo.main(["--data", str(data), "--methods", "memory-bm25", "--k", k])
    assert stopped.value.code == 2
    assert "--k needs cut-offs from 1 to 10000" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        eval_live.main(["--data", str(data), "--k", k.split(",")[-1]])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "--k must be at most 10000" in err or "--k and --budget must be >= 1" in err


def test_questions_from_another_file_keep_only_evidence_of_the_asked_conversation(
    tmp_path: Path,
) -> None:
    """--questions-from asks another file's questions about this conversation: their
    evidence was checked against the other file's turns only, so an id naming a turn
    this conversation lacks was kept (a turn no ranking can return)."""
    data = _write(tmp_path, [SAMPLE])
    other = json.loads(json.dumps(SAMPLE))
    other["sample_id"] = "conv-x-pt"
    other["conversation"]["session_10"].append(
        {"speaker": "Ana", "dia_id": "D10:2", "text": "Tenho um papagaio."}
    )
    other["qa"] = [{"question": "Que animal?", "answer": "papagaio", "category": 1,
                    "evidence": ["D10:1", "D10:2"]}]  # fmt: skip
    (tmp_path / "pt.json").write_text(json.dumps([other]))
    (conv,) = locomo_conversations(data, "all", questions_from=tmp_path / "pt.json")
    (question,) = conv.questions
    assert question.question == "Que animal?"
    assert question.evidence == ("D10:1",) and question.dropped_evidence == ("D10:2",)


def test_a_sample_id_is_no_path(tmp_path: Path) -> None:
    """The stores were named by the sample id itself, joined to the temporary folder: an
    absolute id (``/home/me/x``) put the store there instead, and ``../x`` beside the
    temporary folder, both left behind (or a file of that name written over)."""
    outside = tmp_path / "outside"
    data = _write(tmp_path, [{**SAMPLE, "sample_id": str(outside)}])
    out = tmp_path / "out.json"
    argv = ["--data", str(data), "--methods", "memory-bm25", "--encoder", "minilm", "--k", "1"]
    assert eval_locomo.main([*argv, "--json", str(out)]) == 0
    assert json.loads(out.read_text())["conversations"] == [str(outside)]
    assert not list(tmp_path.glob("outside*"))
    folder = tmp_path / "stores"
    names = {store_file(folder, i) for i in ("../x", "/x", "a/b", "a_b", ".", "")}
    assert len(names) == 6 and all(p.parent == folder for p in names)
    assert not any(p.name.startswith(".") for p in names)


def test_a_reversed_range_of_conversations_is_named_as_such() -> None:
    """"3-1" was reported as outside the file's range, which it is not."""
    with pytest.raises(ValueError, match=r"'0,3-1': 3-1 ends before it starts"):
        select_indices("0,3-1", 10)
    assert select_indices("1-3,2", 10) == [1, 2, 3]


def test_eval_script_stops_with_one_line_on_a_conversation_without_turns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _write(tmp_path, [_NO_TURNS])
    assert eval_locomo.main(["--data", str(data), "--methods", "bm25"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(data) in err and "no session holds a turn" in err


def test_session_dates() -> None:
    assert parse_session_date("10:37 am on 27 June, 2023") == dt.datetime(
        2023, 6, 27, 10, 37, tzinfo=dt.UTC
    )
    assert parse_session_date("12:09 am on 13 September, 2023").hour == 0
    with pytest.raises(ValueError):
        parse_session_date("sometime in May")


def test_recall_hand_computed() -> None:
    ranked = ["a", "b", "a", "c", "d"]
    assert recall_at_k(ranked, {"a", "c"}, 1) == 0.5
    assert recall_at_k(ranked, {"a", "c"}, 3) == 1.0  # repeats count once: a, b, c
    assert recall_at_k(ranked, {"x"}, 5) == 0.0
    with pytest.raises(ValueError):
        recall_at_k(ranked, set(), 5)


def test_ndcg_hand_computed() -> None:
    # relevant at ranks 2 and 3: DCG = 1/log2(3) + 1/log2(4); IDCG (2 relevant) = 1 + 1/log2(3)
    expected = (1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(["x", "a", "b"], {"a", "b"}, 3) == pytest.approx(expected)
    assert ndcg_at_k(["a", "b"], {"a", "b"}, 2) == 1.0
    # k smaller than the evidence: the ideal is cut at k too
    assert ndcg_at_k(["a"], {"a", "b", "c"}, 1) == 1.0


def test_mean_by_category() -> None:
    means = mean_by_category([(1, 1.0), (1, 0.0), (4, 1.0), (5, 0.0)])
    assert means == {"1": 0.5, "4": 1.0, "5": 0.0, "all": pytest.approx(2 / 3)}


def test_rrf_hand_computed() -> None:
    # a: 1/61 + 1/62; b: 1/62 + 1/61 (tie, first seen wins); c: 1/63
    assert rrf_fuse([["a", "b", "c"], ["b", "a"]]) == ["a", "b", "c"]
    assert rrf_fuse([[3, 1], [1, 2]]) == [1, 3, 2]


def test_bm25_ranks_the_matching_turn_first() -> None:
    docs = ["Ana: my cat is orange", "Rui: the marathon was long", "Ana: I like tea"]
    assert BM25Retriever(docs).rank("who ran the marathon?", 2)[0] == 1
    assert BM25Retriever(docs).rank("zebra", 3) == []


class _BagOfWords:
    name = "bag-of-words"
    dimension = 64

    def encode(self, texts: Sequence[str]) -> Vectors:
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                vectors[row, sum(map(ord, word)) % self.dimension] += 1
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit: Vectors = vectors / np.maximum(norms, 1e-9)  # float32 throughout
        return unit


def test_dense_ranks_by_cosine() -> None:
    docs = ["alpha beta", "gamma delta", "alpha alpha beta"]
    ranked = DenseRetriever(docs, _BagOfWords()).rank("gamma delta", 3)
    assert ranked[0] == 1 and sorted(ranked) == [0, 1, 2]


def test_minilm_loads_offline_and_embeds_meaning() -> None:
    encoder = MiniLMEncoder()
    vectors = encoder.encode(["I adopted a puppy", "We got a new dog", "Stock prices fell"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2


def test_eval_script_writes_the_documented_json(tmp_path: Path) -> None:
    data = _write(tmp_path, [SAMPLE])
    out = tmp_path / "out.json"
    result = subprocess.run(
        [
            sys.executable,
            "scripts/eval_locomo.py",
            "--data",
            str(data),
            "--k",
            "1,3",
            "--methods",
            "bm25,memory,memory-bm25",
            "--json",
            str(out),
            "--plot",
            str(tmp_path / "p.png"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["data"] == str(data) and report["k"] == [1, 3]
    for method in ("bm25", "memory", "memory-bm25"):
        figures = report["methods"][method]
        assert set(figures["recall"]) == {"1", "3"}
        assert figures["recall"]["3"]["all"] == pytest.approx(
            figures["recall"]["3"]["4"] * 0.5 + figures["recall"]["3"]["1"] * 0.5
        )
        assert set(figures["ndcg"]["3"]) >= {"1", "4", "all"}
        assert figures["tokens"]["3"] > 0
        assert set(figures["answer_in_context"]) == {"1", "3"}
        assert set(figures["latency_ms"]) == {"p50", "p95"}
    # the marathon question's evidence D1:1 is found by both at k=1
    assert report["methods"]["memory"]["recall"]["1"]["4"] == 1.0
    assert report["methods"]["bm25"]["recall"]["1"]["4"] == 1.0
    assert (tmp_path / "p.png").stat().st_size > 10_000
    assert "R@1 all" in result.stdout


def test_check_faithfulness_checks_every_block_and_reports_the_shares(tmp_path: Path) -> None:
    sample = json.loads(json.dumps(SAMPLE))
    sample["conversation"]["session_10"].append(
        {"speaker": "Ana", "dia_id": "D10:2", "text": "Actually I moved to Porto, I live in Porto."}
    )
    sample["conversation"]["session_1"].append(
        {"speaker": "Ana", "dia_id": "D1:3", "text": "I live in Braga, near the park."}
    )
    sample["qa"].append(
        {"question": "Where does Ana live?", "answer": "Porto", "evidence": ["D10:2"],
         "category": 4}
    )  # fmt: skip
    data = _write(tmp_path, [sample])
    out = tmp_path / "faithful.json"
    result = subprocess.run(
        [sys.executable, "scripts/check_faithfulness.py", "--data", str(data), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    assert report["questions"] == 3
    assert report["passed"] == {"citations": 1.0, "statements": 1.0, "fragments": 1.0}
    assert report["statements"].get("change") == 1  # Braga -> Porto, for the last question
    assert report["mean_tokens"] > 0 and 0 <= report["coverage_note"] <= 1
    assert "citations faithful" in result.stdout and "100.0%" in result.stdout
    bad = subprocess.run(
        [sys.executable, "scripts/check_faithfulness.py", "--data", str(tmp_path / "none.json")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "check_faithfulness:" in bad.stderr


LIVE_SAMPLE: dict[str, Any] = {
    "sample_id": "conv-live",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Rui",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I started training for a marathon."},
            {"speaker": "Rui", "dia_id": "D1:2", "text": "I adopted a parrot named Kiwi."},
            {"speaker": "Ana", "dia_id": "D1:3", "text": "My sister Marta lives in Braga."},
        ],
    },
    "qa": [
        {"question": "What is Ana training for?", "answer": "a marathon",
         "evidence": ["D1:1"], "category": 4},
        {"question": "What pet did Rui adopt?", "answer": "a parrot",
         "evidence": ["D1:2"], "category": 4},
        {"question": "Where does Marta live?", "answer": "Braga",
         "evidence": ["D1:3"], "category": 4},
    ],
}  # fmt: skip


def test_the_live_use_evaluation_asks_through_the_proxy_and_reports_what_it_was_shown(
    tmp_path: Path,
) -> None:
    """``scripts/eval_live.py`` end to end on a tiny conversation: every question asked
    twice through a real proxy, the figures of the search-only baseline, of what each
    round was shown and the share of earlier questions and answers, as documented."""
    data = _write(tmp_path, [LIVE_SAMPLE])
    out = tmp_path / "live.json"
    result = subprocess.run(
        [sys.executable, "scripts/eval_live.py", "--data", str(data), "--k", "3",
         "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "search before R@3" in result.stdout and "Q/A share search after@3" in result.stdout
    figures = json.loads(out.read_text())["conversations"]
    row = figures["conv-live"]
    assert row["questions"] == 3 and figures["all"]["questions"] == 3
    assert row["search before"] == 1.0  # three facts, three questions: each found
    assert row["shown round 1"] == row["shown round 2"] == 1.0
    assert row["search after"] == 1.0
    assert row["formed"] == {"asked": 6, "restated": 6}  # two rounds of three
    assert 0.0 <= row["Q/A share search after"] <= 1.0
    bad = subprocess.run(
        [sys.executable, "scripts/eval_live.py", "--data", str(tmp_path / "none.json")],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert bad.returncode == 2 and "eval_live:" in bad.stderr


ENTITY_SAMPLE: dict[str, Any] = {
    "sample_id": "conv-names",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Rui",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "Here is my plan: I move to Lisbon."},
            {"speaker": "Rui", "dia_id": "D1:2",
             "text": "Perfect. Even so, I was here last year, even twice."},
            {"speaker": "Ana", "dia_id": "D1:3",
             "text": "Wow, See you there! My sister Marta lives here too, see."},
            {"speaker": "Rui", "dia_id": "D1:4",
             "text": "Great, Even better. Let me know, let it be perfect."},
        ],
    },
    "qa": [],
}  # fmt: skip


def test_the_entity_evaluation_counts_entities_common_words_and_types(tmp_path: Path) -> None:
    """``scripts/eval_entities.py`` replays a conversation and reads its store: the
    speakers, Marta (a person) and Lisbon (a place) are its four entities; "Here",
    "Perfect", "Even", "See", "Let" are none (the code before issue 27 made four MISC
    entities of such words); a bad file is a clear exit 2."""
    data = _write(tmp_path, [ENTITY_SAMPLE])
    result = subprocess.run(
        [sys.executable, "scripts/eval_entities.py", "--data", str(data)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    header, _, *rows = result.stdout.splitlines()
    assert header.split()[:4] == ["conversation", "entities", "common", "words"]
    (row,) = [r.split() for r in rows if r.startswith("conv-names")]
    entities, common, per, loc, misc = (int(row[i]) for i in (1, 2, 4, 5, 7))
    assert (entities, common, per, loc, misc) == (4, 0, 3, 1, 0)
    assert "common-word entities: none" in result.stdout
    bad = subprocess.run(
        [sys.executable, "scripts/eval_entities.py", "--data", str(tmp_path / "none.json")],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert bad.returncode == 2 and "eval_entities:" in bad.stderr


def test_the_translated_files_english_question_can_be_asked(tmp_path: Path) -> None:
    """``question_field="question_en"``: the English question about a translated
    conversation (the multilingual files keep both); a file without it says so."""
    sample = json.loads(json.dumps(LIVE_SAMPLE))
    for qa in sample["qa"]:
        qa["question_en"], qa["question"] = qa["question"], "Pergunta: " + qa["question"]
    data = _write(tmp_path, [sample])
    (asked,) = load_locomo(data)
    (english,) = load_locomo(data, question_field="question_en")
    assert [q.question for q in english.questions] == [q["question_en"] for q in sample["qa"]]
    assert all(q.question.startswith("Pergunta: ") for q in asked.questions)
    assert [q.evidence for q in english.questions] == [q.evidence for q in asked.questions]
    with pytest.raises(LocomoError, match="'question_es' string"):
        load_locomo(data, question_field="question_es")
