"""The ``areamem`` command line for people: help with a description and an example per
subcommand, ``--version``, snapshot times, cycles and rollbacks logged, reports that name
claims, a rollback undone in one step, and search, stats, receipts, export and import
(run in-process on real SQLite files in a temp folder, the config's offline backends)."""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from proxy import load_config
from proxy.cli.history import open_store
from proxy.cli.main import build_parser, main
from proxy.cli.parsing import package_version

from .test_history import say

pytestmark = pytest.mark.e2e


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_subcommand_has_a_description_and_an_example(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main([name, "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    description, example = shown.split("\n\n")[1], shown.split("example")[-1]
    assert description.strip().endswith(".") and len(description.split()) >= 4
    assert f"areamem {name}" in example


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"areamem {package_version()}"
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", package_version())


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A config and a tenant 'maya' with a cycle behind it and a correction formed since
    (formed with the config's backends, as the commands open it)."""
    config = {
        "upstreams": [{"model": "*", "provider": "openai", "api_base": "http://127.0.0.1:1/v1"}],
        "server": {"data_dir": str(tmp_path / "data")},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "data" / "tenants").mkdir(parents=True)
    path = tmp_path / "data" / "tenants" / "maya.db"
    store = open_store(load_config(tmp_path / "config.yaml"), path, "maya")
    try:
        told = ["I live in Paris and my sister Anna loves jazz.", "Anna plays the piano."]
        say(store, "c1", told)
        store.dream()
        say(store, "c2", ["Actually, I moved to Rome last month."], start=10)
    finally:
        store.close()
    return tmp_path


class Cli:
    def __init__(self, folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.folder = folder
        self._capsys = capsys

    def __call__(self, *args: str, tenant: str = "maya", status: int = 0) -> str:
        self._capsys.readouterr()
        config = ["--config", str(self.folder / "config.yaml"), "--tenant", tenant]
        assert main([*args, *config]) == status
        captured = self._capsys.readouterr()
        return captured.out if status == 0 else captured.err

    def json(self, *args: str, tenant: str = "maya") -> Any:
        return json.loads(self(*args, "--json", tenant=tenant))

    def log(self) -> list[dict[str, Any]]:
        text = (self.folder / "data" / "logs" / "proxy.jsonl").read_text()
        return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def cli(folder: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(folder, capsys)


def test_a_cycle_names_its_claims_and_is_logged_with_counts(cli: Cli) -> None:
    shown = cli("dream")
    assert 'corrects "Maya lives in Paris" -> "Maya lives in Rome" (relation' in shown
    [_, line] = [r for r in cli.log() if r["event"] == "dream_done"]  # the fixture's, ours
    assert (line["tenant"], line["via"], line["snapshot"]) == ("maya", "cli", 2)
    assert line["decisions"]["change"] == 1 and line["rows_changed"] > 0
    report = cli.json("snapshots")["snapshots"][0]["report"]
    [change] = [d for d in report["decisions"] if d["kind"] == "change"]
    assert [(c["subject"], c["predicate"], c["object"]) for c in change["claims"]] == [
        ("Maya", "lives_in", "Rome"), ("Maya", "lives_in", "Paris")
    ]  # fmt: skip
    assert all(isinstance(c["relation"], int) and c["fragment"] for c in change["claims"])


def test_a_rollback_is_one_entry_logged_with_counts_and_undone_in_one_step(cli: Cli) -> None:
    before = cli("search", "where does Maya live?")
    assert "Rome" in before
    rolled = cli("rollback", "1")
    assert "undo: areamem rollback --undo, which restores snapshot 2" in rolled
    [line] = [r for r in cli.log() if r["event"] == "rollback"]
    assert (line["restored"], line["snapshot"], line["undo"], line["held"]) == (1, 3, 2, 1)
    assert line["tables"]["relations"] >= 1 and line["rows_changed"] > 0
    listed = cli("snapshots").splitlines()
    assert len(listed) == 1 + 1 + 2  # state, header, the rollback (its checkpoint folded in), 1
    assert "rollback to 1 (undo: areamem rollback --undo, back to the state just" in listed[2]
    assert "Rome" not in cli("search", "where does Maya live?")
    cli("rollback", "--undo")
    assert cli("search", "where does Maya live?").split("\n", 1)[1] == before.split("\n", 1)[1]
    refused = cli("dream"), cli("rollback", "--undo", status=1)
    assert "nothing to undo: the newest entry is not a rollback" in refused[1]


def test_snapshots_show_local_times_and_iso_times_in_json(cli: Cli) -> None:
    cli("dream")
    [newest, oldest] = cli.json("snapshots")["snapshots"]
    assert newest["description"] == "cycle 2 (demand (areamem dream))"
    assert oldest["description"] == "cycle 1 (demand)"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(newest["created_at"]))
    assert f"{newest['id']:>6}  {stamp}" in cli("snapshots")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", newest["time"])


def test_stats_receipts_export_and_import(cli: Cli, folder: Path) -> None:
    stats = cli.json("stats")
    assert {k: stats[k] for k in ("log_messages", "fragments", "snapshots")} == {
        "log_messages": 3, "fragments": 3, "snapshots": 1
    }  # fmt: skip
    assert stats["entities"] > 0 and stats["relations"] > 0 and stats["bytes"] > 0
    assert "entities" in cli("stats") and cli.json("receipts")["receipts"] == []
    exported = folder / "maya.areamem"
    assert "3 log" in cli("export", str(exported))
    assert "3 log, 3 fragments" in cli("import", str(exported), tenant="copy")
    refused = cli("import", str(exported), tenant="copy", status=1)
    assert "already holds memory" in refused
    truncated = folder / "truncated.areamem"
    truncated.write_bytes(exported.read_bytes()[:1000])
    assert "truncated" in cli("import", str(truncated), tenant="new", status=1)
    assert not list((folder / "data" / "tenants").glob("new.*"))  # no tenant, no lock file
    for question in ("where does Maya live?", "what does Anna play?"):
        found = [cli.json("search", question, tenant=t) for t in ("maya", "copy")]
        for body in found:
            body.pop("elapsed_ms")
        assert found[0] == found[1]
        assert found[0]["hits"] or "what does Anna play" in question
    assert [r["event"] for r in cli.log()] == ["dream_done", "import"]


@pytest.mark.parametrize(
    "tenant", ["../maya", "a/b", "/etc/passwd", ".hidden", "-x", "", "x" * 65, "maya\n"]
)
def test_a_tenant_no_proxy_could_serve_is_refused_before_any_file_is_touched(
    folder: Path, capsys: pytest.CaptureFixture[str], tenant: str
) -> None:
    """``--tenant`` names the database file, as a config's tenant does: a name outside the
    config's rule (a path, a hidden file, 65 characters) is refused with one line and
    status 2, and no file is made (``import --tenant ../x`` made ``data/x.db``, outside
    the tenants folder, where no proxy reads it)."""
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    with pytest.raises(SystemExit) as done:
        main(["import", str(folder / "x.areamem"), "--config", str(folder / "config.yaml"),
              f"--tenant={tenant}"])  # fmt: skip
    assert done.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "argument --tenant: tenant" in error and "must be 1-64 ASCII letters" in error
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before


@pytest.mark.parametrize(
    "args",
    [
        ["receipts", "--limit", str(2**64)],
        ["snapshots", "--limit", "0"],
        ["memory", "entities", "--limit", "-1"],
        ["diff", "1", str(2**64)],
        ["diff", "1", "2", "--limit", "99999999999999999999"],
        ["rollback", str(2**64)],
        ["rollback", "0"],
        ["search", "Paris", "-k", str(2**64)],
        ["search", "Paris", "--budget", "0"],
    ],
)
def test_counts_and_snapshot_ids_out_of_range_are_refused_in_one_line(
    folder: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    """A count or a snapshot id past SQLite's integers raised OverflowError from deep in
    the store (a traceback); zero or a negative count was quietly read as 1. Each is an
    argument error naming the option and its range, status 2, before the store is opened."""
    with pytest.raises(SystemExit) as done:
        main([*args, "--config", str(folder / "config.yaml"), "--tenant", "maya"])
    assert done.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(r"argument \S+: must be a whole number from \d+ to \d+", error), error


def test_a_blank_question_is_refused(cli: Cli) -> None:
    """``areamem search ''`` searched for nothing (an empty block or every fragment); the
    ``/memory/search`` endpoint refuses a blank ``q``, and so does the command."""
    with pytest.raises(SystemExit) as done:
        cli("search", "  ")
    assert done.value.code == 2


HOSTILE = "Olga went to Riga \x1b[2J\x1b]0;pwned\x07\u2028\n    9.999  #1 [forged] a row of its own"


def test_stored_text_reaches_the_terminal_inert(folder: Path, cli: Cli) -> None:
    """Memory holds what clients sent: terminal escape sequences (ESC [2J clears the
    screen, OSC sets the title) and line breaks that printed as a row of their own
    (a forged hit). Every line a command prints writes them as escapes."""
    config = load_config(folder / "config.yaml")
    store = open_store(config, folder / "data" / "tenants" / "maya.db", "maya")
    try:
        say(store, "c\x1b[31m3", [HOSTILE])
    finally:
        store.close()
    printed = [
        cli("search", "Olga Riga"),
        cli("memory", "relations", "--entity", "Olga"),
        cli("memory", "contexts"),
        cli("rollback", "1"),  # the held message is listed
    ]
    for out in printed:
        assert not any(c in out for c in "\x1b\x07\u2028"), out
        assert not any(line.lstrip().startswith("9.999  #1 [forged]") for line in out.splitlines())
    assert "Olga went to Riga \\u001b[2J\\u001b]0;pwned\\u0007\\u2028\\u000a" in printed[0]
    assert "Olga went to Riga \\u001b[2J" in printed[1]
    assert "c\\u001b[31m3" in printed[2]
    assert "held #" in printed[3] and "[c\\u001b[31m3] Olga went to Riga \\u001b" in printed[3]
