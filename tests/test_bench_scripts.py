"""``scripts/bench_overhead.py`` end to end at smoke size, and its LiteLLM set-up.

The script runs as a subprocess (it starts the fake upstream and the proxy as its own
children on loopback); the LiteLLM helpers are pure and are tested in-process, so these
tests need no ``litellm[proxy]`` and no network.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from proxy.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
LIMIT_S = 90
SMOKE = ["--quick", "--fragments", "100", "--requests", "8", "--warmup", "2"]
SCENARIO_KEYS = {
    "name", "stream", "memory", "direct", "proxy", "added_p50_ms", "added_p99_ms",
    "ttfb_added_p50_ms", "target_added_p50_ms", "target_met", "receipts",
    "injected_fragments", "injected_tokens", "samples_ms",
}


def _bench(*args: str) -> tuple[int, str]:
    """Run the script; on overrun, SIGTERM it so that it stops its own children first."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "scripts/bench_overhead.py", *args]
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as process:
        try:
            output, _ = process.communicate(timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=30)
            raise AssertionError(f"bench_overhead ran past {LIMIT_S} s:\n{output}") from None
    return process.returncode, output


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script as a module (it imports its siblings as top-level modules)."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    return importlib.import_module("bench_overhead")


def _locomo_file(path: Path) -> Path:
    """A two-session LoCoMo conversation with two questions."""
    sessions = {
        "session_1": ["I adopted a beagle named Pepper last week.", "Lovely! How is Pepper?",
                      "Pepper chews every shoe in the flat.", "Try giving Pepper a chew toy."],
        "session_2": ["I started pottery classes on Thursdays.", "What do you make there?",
                      "Mostly bowls, glazed in blue.", "Blue bowls sound beautiful."],
    }
    conversation: dict[str, Any] = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for number, (key, texts) in enumerate(sessions.items(), start=1):
        conversation[f"{key}_date_time"] = f"1:56 pm on {number} May, 2023"
        conversation[key] = [{"speaker": "Ana" if i % 2 == 0 else "Ben",
                              "dia_id": f"D{number}:{i + 1}", "text": text}
                             for i, text in enumerate(texts)]
    qa = [{"question": "What is the name of Ana's beagle?", "answer": "Pepper",
           "evidence": ["D1:1"], "category": 1},
          {"question": "What does Ana make in her pottery classes?", "answer": "bowls",
           "evidence": ["D2:3"], "category": 1}]
    path.write_text(json.dumps([{"sample_id": "tiny", "conversation": conversation, "qa": qa}]))
    return path


def test_quick_run_prints_the_table_and_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "overhead.json"
    code, output = _bench(*SMOKE, "--json", str(out))
    assert code == 0, output
    assert "scenario (ms)" in output and "added p50" in output
    for name in ("non-stream, memory off", "stream, memory off", "non-stream, memory on",
                 "stream, memory on"):
        assert f"\n{name} " in output, output
    report = json.loads(out.read_text())
    assert set(report) >= {"settings", "machine", "preload", "scenarios", "litellm_version"}
    assert report["litellm_version"] is None
    assert report["preload"]["source"] == "synthetic"
    assert report["preload"]["fragments_formed"] == 100
    for row in report["scenarios"]:
        assert set(row) >= SCENARIO_KEYS
        assert "litellm" not in row
        assert len(row["samples_ms"]["direct"]) == len(row["samples_ms"]["proxy"]) == 8
        assert row["direct"]["total_ms"]["p50"] > 0
    assert all(row["receipts"] == 8 for row in report["scenarios"] if row["memory"])
    for row in report["scenarios"]:  # where the added time went, from every receipt
        stages = row["receipt_stage_p50_ms"]
        if row["memory"]:
            assert stages["retrieval"] > 0 and stages["store"] >= 0, stages
        else:
            assert stages == {}
    assert "stage medians in its receipts (ms): parse" in output


def test_a_door_is_timed_against_chat_in_the_same_run(tmp_path: Path) -> None:
    """``--api messages``: the door's pairs beside chat's, each answer read back whole
    and checked to echo its question (a broken door cannot look fast)."""
    out = tmp_path / "overhead.json"
    code, output = _bench(*SMOKE, "--api", "messages", "--json", str(out))
    assert code == 0, output
    assert "door-chat p50" in output and "messages (bridged)" in output
    assert "added p50 within 1 ms of chat's" in output
    report = json.loads(out.read_text())
    for row in report["scenarios"]:
        assert len(row["samples_ms"]["door"]) == len(row["samples_ms"]["door_direct"]) == 8
        assert row["door_minus_chat_p50_ms"] == pytest.approx(
            row["door_added_p50_ms"] - row["added_p50_ms"]
        )
        assert row["door_memory"]["receipts"] == (8 if row["memory"] else 0)


def test_locomo_preload_replays_the_file_and_asks_its_questions(tmp_path: Path) -> None:
    data, out = _locomo_file(tmp_path / "tiny.json"), tmp_path / "overhead.json"
    code, output = _bench(*SMOKE, "--preload-locomo", str(data), "--json", str(out))
    assert code == 0, output
    report = json.loads(out.read_text())
    preload = report["preload"]
    assert preload["source"] == str(data)
    assert (preload["conversations"], preload["turns"]) == (1, 8)
    assert preload["fragments_formed"] > 0
    assert preload["probe"] == "What is the name of Ana's beagle?"
    assert preload["probe_hits"] > 0
    assert report["settings"]["preload_locomo"] == str(data)
    memory_on = [row for row in report["scenarios"] if row["memory"]]
    assert all(row["receipts"] == 8 and row["injected_fragments"] for row in memory_on)


def test_a_kept_store_is_made_once_then_served_as_a_copy(tmp_path: Path) -> None:
    """The first run preloads into the folder, the second serves a copy of it unchanged
    (no preload: same figures, the kept store not written); other settings are refused."""
    kept, out = tmp_path / "kept", tmp_path / "overhead.json"
    code, output = _bench(*SMOKE, "--store", str(kept), "--json", str(out))
    assert code == 0, output
    assert f"preloading into {kept}" in output
    first = json.loads(out.read_text())["preload"]
    manifest = json.loads((kept / "preload.json").read_text())
    assert manifest["key"] == {"source": "synthetic", "fragments": 100,
                               "turns_per_conversation": 20, "seed": 7}
    store = kept / "data" / "tenants" / "default.db"
    before = store.stat().st_mtime_ns, store.stat().st_size
    code, output = _bench(*SMOKE, "--store", str(kept), "--json", str(out))
    assert code == 0, output
    assert f"preload kept in {kept}" in output and "preloading into" not in output
    report = json.loads(out.read_text())
    assert report["preload"] == first and report["settings"]["store"] == str(kept)
    assert all(row["receipts"] == 8 and row["injected_fragments"]
               for row in report["scenarios"] if row["memory"])
    assert (store.stat().st_mtime_ns, store.stat().st_size) == before
    code, output = _bench(*SMOKE, "--fragments", "120", "--store", str(kept))
    assert code == 1
    assert "preloaded with" in output and "'fragments': 100" in output


def test_a_store_folder_without_its_manifest_is_refused(bench: ModuleType,
                                                        tmp_path: Path) -> None:
    settings = bench.settings_from(bench.parse_args(SMOKE))
    (tmp_path / "leftover").write_text("x")
    with pytest.raises(bench.BenchError, match=r"holds no preload\.json"):
        bench.kept_preload(tmp_path, settings, [])
    (tmp_path / "preload.json").write_text("{not json")
    with pytest.raises(bench.BenchError, match="unreadable"):
        bench.kept_preload(tmp_path, settings, [])
    with pytest.raises(bench.BenchError, match="is not a folder"):
        bench.kept_preload(tmp_path / "leftover", settings, [])
    with pytest.raises(bench.BenchError, match="cannot copy the store"):  # its data is gone
        bench.copy_store(tmp_path, tmp_path / "work")


def test_a_missing_locomo_file_fails_before_anything_starts(tmp_path: Path) -> None:
    code, output = _bench(*SMOKE, "--preload-locomo", str(tmp_path / "absent.json"))
    assert code == 1
    assert "absent.json" in output and "machine:" not in output


def test_compare_litellm_without_its_proxy_names_the_bench_extra(bench: ModuleType) -> None:
    with pytest.raises(bench.BenchError, match=r"pip install -e '\.\[bench\]'") as caught:
        bench.require_litellm_proxy(find_spec=lambda name: None if name == "fastapi" else name)
    assert "fastapi" in str(caught.value)


def test_litellm_config_routes_to_the_upstream_and_nowhere_else(
    bench: ModuleType, tmp_path: Path
) -> None:
    path = bench.write_litellm_config(tmp_path / "litellm.yaml", "http://127.0.0.1:9/v1", "sk-x")
    config = yaml.safe_load(path.read_text())
    assert config["model_list"] == [{
        "model_name": bench.MODEL,
        "litellm_params": {"model": f"openai/{bench.MODEL}", "api_base": "http://127.0.0.1:9/v1",
                           "api_key": "sk-bench"},
    }]
    settings, general = config["litellm_settings"], config["general_settings"]
    assert settings["turn_off_message_logging"] is True
    assert settings["callbacks"] == settings["success_callback"] == []
    assert general["master_key"] == "sk-x" and general["disable_spend_logs"] is True
    assert general["store_model_in_db"] is False
    assert "database_url" not in general and "cache" not in settings


def test_litellm_runs_with_a_reduced_offline_environment(
    bench: ModuleType, tmp_path: Path
) -> None:
    base = {"PATH": "/usr/bin", "LANG": "C.UTF-8", "DATABASE_URL": "postgresql://db",
            "REDIS_HOST": "cache", "HTTPS_PROXY": "http://proxy:3128", "OPENAI_API_KEY": "sk",
            "LITELLM_MASTER_KEY": "sk-master", "HOME": "/root"}
    env = bench.litellm_env(base, tmp_path)
    assert env["PATH"] == "/usr/bin" and env["LANG"] == "C.UTF-8"
    assert not {"DATABASE_URL", "REDIS_HOST", "HTTPS_PROXY", "OPENAI_API_KEY",
                "LITELLM_MASTER_KEY"} & set(env)
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path)
    assert env["LITELLM_OFFLINE_MODE"] == "true"
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert env["LITELLM_MODE"] == "PRODUCTION"


def test_bench_nearest_compares_the_shortlist_with_the_exact_search(tmp_path: Path) -> None:
    """On a small real store (the shortlist is forced whatever its size) and a missing one."""
    from memory_core import LogMessage, MemoryStore

    store = MemoryStore(tmp_path / "t.db")
    turns = [f"Turn {i}: we talked about hiking near lake {i} with Caroline." for i in range(60)]
    messages = [{"role": "user", "content": t} for t in turns]
    store.append(
        [LogMessage(m, 1_700_000_000.0 + i) for i, m in enumerate(messages)], conversation="c1"
    )
    store.form_all()
    store.close()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    command = [sys.executable, "scripts/bench_nearest.py", "--db", str(tmp_path / "t.db")]
    done = subprocess.run(
        [*command, "--questions", "5", "--shortlists", "8,60"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=LIMIT_S, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "60 vectors, 5 questions" in done.stdout
    lines = done.stdout.splitlines()
    rows = {line.split()[0]: line.split() for line in lines if len(line.split()) == 7}
    assert rows["60"][3:5] == ["1.0000", "1.0000"]  # a shortlist of every vector is exact
    assert set(rows) >= {"8", "60"}
    missing = subprocess.run(
        [sys.executable, "scripts/bench_nearest.py", "--db", str(tmp_path / "none.db")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=LIMIT_S, check=False,
    )
    assert missing.returncode == 2 and "no store at" in missing.stderr


async def test_each_proxy_is_timed_against_direct_requests_of_its_own_blocks(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks of BLOCK_ROUNDS rounds per proxy; within a block, direct and that proxy in
    alternating order with the same body; each proxy's added latency uses its own direct
    requests (LiteLLM's slow direct pairs must not lower areamem's figure)."""
    calls: list[tuple[str, bytes]] = []
    latency = {"direct": 1.0, "proxy": 3.0, "litellm": 20.0}

    async def timed_post(session: str, body: bytes, headers: dict[str, str], stream: bool) -> Any:
        in_litellm_block = len(calls) % 12 >= 6  # 3 rounds x 2 requests x 2 proxies
        calls.append((session, body))
        slowed = 3.0 if session == "direct" and in_litellm_block else 0.0
        return bench.Timing(latency[session] + slowed, latency[session], "rcpt_x")

    monkeypatch.setattr(bench, "timed_post", timed_post)
    monkeypatch.setattr(bench, "BLOCK_ROUNDS", 3)
    settings = bench.Settings(fragments=0, turns_per_conversation=1, requests=7, warmup=2,
                              seed=1, formation_workers=1, retrieval="area",
                              preload_locomo=None, compare_litellm=True)
    targets = {name: name for name in ("direct", "proxy", "litellm")}
    outcome = await bench.run_scenario(targets, bench.SCENARIOS[0], settings,
                                       bench.Questions(__import__("random").Random(1)))
    rounds = settings.warmup + settings.requests
    assert len(calls) == 4 * rounds
    blocks = [calls[i:i + 6] for i in range(0, 12, 6)]
    assert {name for name, _ in blocks[0]} == {"direct", "proxy"}
    assert {name for name, _ in blocks[1]} == {"direct", "litellm"}
    assert [name for name, _ in calls[:4]] == ["direct", "proxy", "proxy", "direct"]
    assert calls[0][1] == calls[1][1] and calls[0][1] != calls[2][1]  # one body per round
    assert blocks[0][0][1] == blocks[1][0][1]  # the same round bodies for both proxies
    assert len(outcome.proxy.total_ms) == len(outcome.direct.total_ms) == settings.requests
    assert len(outcome.litellm.total_ms) == len(outcome.litellm_direct.total_ms) == 7
    assert bench.added(outcome, 50) == pytest.approx(2.0)
    assert bench.added(outcome, 50, target="litellm") == pytest.approx(16.0)


def test_bench_dreamer_quick_run_times_cycles_snapshots_and_rollbacks(tmp_path: Path) -> None:
    """``bench_dreamer.py --quick``: a row per (store, cycles) with the snapshot sizes and
    rows changed of every cycle, and the rollbacks undone to the same relation count."""
    out = tmp_path / "dreamer.json"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "scripts/bench_dreamer.py", "--quick", "--json", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=LIMIT_S, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "store relations" in done.stdout and "rows changed" in done.stdout
    assert "reproduce: python scripts/bench_dreamer.py" in done.stdout
    report = json.loads(out.read_text())
    assert [(run["store"], run["cycles"]) for run in report["runs"]] == [
        ("small", 2), ("big", 2), ("big", 3)
    ]
    assert report["built"]["relations"] >= 1000 > report["small_built"]["relations"] >= 300
    assert report["built"]["first"]["snapshot_bytes"] > 0 and report["graph_read_ms"] > 0
    for run in report["runs"]:
        assert len(run["per_cycle"]) == run["cycles"]
        for cycle in run["per_cycle"]:
            assert cycle["snapshot_bytes"] > 0 and cycle["rows_changed"] > 0, cycle
        whole = run["rollback_all_cycles"]
        assert whole["relations_restored"] == run["relations_start"]
        assert whole["relations_after_undo"] == whole["relations_before"]
        assert whole["check"] and run["rollback_one_cycle"]["check"] and run["check"]


def test_no_ingest_leaves_memory_on_chats_unstored(bench: ModuleType, tmp_path: Path) -> None:
    """``--no-ingest`` times the lookup without the formation of each exchange after it:
    the proxy it starts is configured not to store chats (``/memory/ingest`` still
    preloads)."""
    settings = bench.settings_from(bench.parse_args(["--no-ingest", "--quick"]))
    assert settings.ingest is False
    assert bench.settings_from(bench.parse_args(["--quick"])).ingest is True
    stack = bench.LocalStack(tmp_path, ingest=settings.ingest)
    config = yaml.safe_load(stack.config().read_text())
    assert config["memory"]["ingest"] is False


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[" * 100_000 + "]" * 100_000, "invalid JSON: maximum recursion depth"),
        ('{"conversation_id": ' + "9" * 5000 + "}", "invalid JSON: Exceeds the limit"),
        ('{"a": 1}\n{"conversation_id": ' + "9" * 5000 + "}", "line 2: invalid JSON: Exceeds"),
    ],
    ids=["nested too deep", "huge integer", "huge integer on a JSONL line"],
)
def test_replay_names_json_that_python_cannot_decode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    """json.loads raises RecursionError (arrays nested too deep) and a plain ValueError
    (an integer of over 4300 digits), neither a JSONDecodeError, the only error replay
    caught: a traceback. Now one line naming the file, status 2, before any request."""
    replay = importlib.import_module("replay")
    path = tmp_path / "bad.json"
    path.write_text(text)
    assert replay.main([str(path), "--ingest", "--proxy", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"replay: {path}: ") and problem in err


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--timeout", "inf"),
        ("--timeout", "1e400"),
        ("--timeout", "nan"),
        ("--timeout", "0"),
        ("--timeout", "-1"),
        ("--api-key", "sk-a\nX-Forged: 1"),
        ("--api-key", "sk-\x1b[2J"),
        ("--proxy", "notaurl"),
        ("--proxy", "ftp://127.0.0.1:9"),
        ("--proxy", "http://[::1"),
    ],
)
def test_replay_refuses_bad_options_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    """A timeout that is not a positive finite number (``inf`` raised OverflowError in
    aiohttp mid-run, ``nan`` and ``0`` meant none), a key holding a control character
    (aiohttp's header check raised ValueError mid-run) and a proxy address that is no
    http(s) URL (every call failed) are argument errors: status 2, one line naming the
    option, before the file is read."""
    replay = importlib.import_module("replay")
    path = tmp_path / "chat.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    args = [str(path), "--ingest", "--proxy", "http://127.0.0.1:9", f"{option}={value}"]
    with pytest.raises(SystemExit) as done:
        replay.main(args)
    assert done.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert f": error: argument {option}: " in error, error


@pytest.mark.parametrize("script", ["eval_locomo", "eval_live", "eval_segmentation",
                                    "check_faithfulness"])  # fmt: skip
@pytest.mark.parametrize("where", ["missing/out.json", "."], ids=["no folder", "a folder"])
def test_an_output_file_that_cannot_be_written_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], script: str, where: str
) -> None:
    """--json naming a file in a folder that does not exist, or a folder, was found only
    when the figures were written: after the whole run, a traceback that lost them. Now
    argparse's usage error, status 2, before the data is even read (none exists here)."""
    module = importlib.import_module(script)
    out = tmp_path / where
    argv = ["--data", str(tmp_path / "none.json"), "--json", str(out)]
    if script == "eval_segmentation":
        argv += ["--format", "dialseg711"]
    with pytest.raises(SystemExit) as stopped:
        module.main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --json: {out}" in err and ("does not exist" in err or "is a folder" in err)


async def test_replay_prints_a_hostile_files_labels_inert(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    """A conversation id from FILE names each failed call on stderr: one holding
    ``ESC [2J`` or a line break reached the operator's terminal raw (clearing it, or
    printing a line of its own). Replay writes what it prints with escapes."""
    path = tmp_path / "chat.jsonl"
    record = {"conversation_id": "c\x1b[2J\nreplay: forged", "messages": [
        {"role": "user", "content": "hi"}]}  # fmt: skip
    path.write_text(json.dumps(record) + "\n")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "scripts/replay.py", str(path), "--ingest", "--proxy", upstream.url,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 1  # the fake upstream has no /memory/ingest: one error
    text = err.decode() + out.decode()
    assert "\x1b" not in text and "\\u001b[2J" in text
    assert not any(line.startswith("replay: forged") for line in text.splitlines())
