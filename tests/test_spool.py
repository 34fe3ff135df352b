"""The spool of exchanges waiting for their tenant's claim (:mod:`proxy.cluster.spool`): entries
are whole files, private, read back as written, handled by one task at a time; leftovers
of a kill mid-write are deleted, and files that are not entries are set aside and
reported, never replayed. And ``scripts/claim_spool.py`` end to end at smoke size: a
node SIGKILLed after answering during a claim keeps every turn."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memory_core import LogMessage
from proxy.cluster.spool import Spool, SpoolError

pytestmark = pytest.mark.cluster

MESSAGES = (
    LogMessage({"role": "user", "content": "Ana garde des abeilles à Évora 🐝"}, 1_700_000_000.5),
    LogMessage({"role": "assistant", "content": "Noted."}, 1_700_000_001.0, "ext-1"),
    LogMessage({"role": "assistant", "content": "Ana: Évora."}, 1_700_000_002.0, None, (7, 3)),
)


def _spool(tmp_path: Path) -> tuple[Spool, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    return Spool(tmp_path / "spool", events.append), events


def test_an_entry_is_private_and_reads_back_as_written(tmp_path: Path) -> None:
    spool, events = _spool(tmp_path)
    entry = spool.put("ana-1", "conv", MESSAGES)
    assert len(spool) == 1
    assert stat.S_IMODE(entry.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(entry.path.parent.stat().st_mode) == 0o700
    assert spool.pending("ana-1") == []  # taken by the task that wrote it
    spool.put_back(entry)
    assert spool.waiting("ana-1") and spool.tenants() == ["ana-1"]
    (again,) = spool.pending("ana-1")
    assert (again.tenant, again.conversation, again.messages) == ("ana-1", "conv", MESSAGES)
    assert spool.take(again) and not spool.take(again)  # one task at a time
    spool.remove(again)
    assert not again.path.exists() and spool.tenants() == [] and len(spool) == 0
    assert spool.pending("ana-1") == [] and not spool.waiting("ana-1")
    assert events == []


def test_a_new_spool_sees_what_a_dead_process_left_and_deletes_half_writes(
    tmp_path: Path,
) -> None:
    spool, _ = _spool(tmp_path)
    first = spool.put("t", None, MESSAGES[:1])
    torn = first.path.parent / ".tmp-00000000000000000001-dead.json"
    torn.write_text('{"format": 1, "tenant": "t", "mess')  # killed mid-write
    reopened, events = _spool(tmp_path)
    assert not torn.exists() and len(reopened) == 1
    assert reopened.waiting("t") and reopened.tenants() == ["t"]
    (entry,) = reopened.pending("t")
    assert entry.path == first.path and entry.conversation is None
    assert events == []


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not json",
        b"\xff\xfe",
        b"[]",
        json.dumps({"format": 2, "tenant": "t", "conversation": None, "messages": []}).encode(),
        json.dumps({"format": 1, "tenant": "u", "conversation": None, "messages": []}).encode(),
        json.dumps({"format": 1, "tenant": "t", "conversation": 5, "messages": []}).encode(),
        json.dumps({"format": 1, "tenant": "t", "conversation": None, "messages": []}).encode(),
        json.dumps(
            {"format": 1, "tenant": "t", "conversation": None, "messages": [{"message": "x"}]}
        ).encode(),
        json.dumps(
            {
                "format": 1,
                "tenant": "t",
                "conversation": None,
                "messages": [{"message": {"role": "user"}, "ts": "soon"}],
            }
        ).encode(),
        # each of these escaped the reader (RecursionError, OverflowError) and ended the
        # replay with a traceback, the entry left in place to end every later one; or
        # (``true``) was stored as a turn of 1970
        b'{"format": 1, "tenant": "t", "messages": ' + b"[" * 100_000,
        b'{"format": 1, "tenant": "t", "conversation": null, "messages": [{"message": '
        b'{"role": "user", "content": "x"}, "ts": 1' + b"0" * 400 + b"}]}",
        b'{"format": 1, "tenant": "t", "conversation": null, "messages": [{"message": '
        b'{"role": "user", "content": "x"}, "ts": true}]}',
    ],
)
def test_a_file_that_is_not_an_entry_is_set_aside_and_reported(
    tmp_path: Path, content: bytes
) -> None:
    spool, events = _spool(tmp_path)
    good = spool.put("t", "c", MESSAGES)
    spool.put_back(good)
    bad = good.path.parent / "00000000000000000001-bad0.json"  # sorts first
    bad.write_bytes(content)
    (entry,) = spool.pending("t")
    assert entry.path == good.path and len(spool) == 1
    assert not bad.exists()
    moved = tmp_path / "spool" / ".unreadable" / "t" / bad.name
    assert moved.read_bytes() == content
    (event,) = events
    assert event["event"] == "spool_unreadable" and event["moved_to"] == str(moved)
    assert spool.tenants() == ["t"]  # the folder of set-aside files is no tenant


def test_an_entry_the_log_refuses_is_set_aside(tmp_path: Path) -> None:
    spool, events = _spool(tmp_path)
    entry = spool.put("t", "c", MESSAGES)
    spool.set_aside(entry, "messages[0].timestamp out of range")
    assert not entry.path.exists() and spool.pending("t") == []
    assert events[0]["error"] == "messages[0].timestamp out of range"


def test_what_cannot_be_written_is_a_spool_error(tmp_path: Path) -> None:
    spool, _ = _spool(tmp_path)
    with pytest.raises(SpoolError, match="not a tenant name"):
        spool.put("../escape", None, MESSAGES)
    with pytest.raises(SpoolError, match="could not spool"):
        spool.put("t", None, (LogMessage({"role": "user", "content": object()}, 1.0),))
    (tmp_path / "spool" / "u").write_text("a file where the tenant's folder goes")
    with pytest.raises(SpoolError, match="could not spool an exchange of u"):
        spool.put("u", None, MESSAGES)
    assert spool.tenants() == [] and not list((tmp_path / "spool").glob("**/.tmp-*"))


@pytest.mark.timeout(240)
def test_claim_spool_script_kills_a_node_mid_claim_and_loses_nothing() -> None:
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "scripts/claim_spool.py", "--exchanges", "3", "--check"],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        timeout=220,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    (losses,) = [line.split() for line in lines if line.startswith("6 ")]
    assert losses[:4] == ["6", "3", "exchanges", "6"]  # turns, spooled, -, stored
    assert losses[4:6] == ["0", "0"]  # lost, twice
    assert "PASS" in done.stdout and "while claiming" in done.stdout


def test_what_an_answer_restates_is_read_back_and_a_forged_list_is_refused(
    tmp_path: Path,
) -> None:
    """The fragments an answer restated travel with it through the spool (formation
    ranks it below them after the claim); an entry whose list is not one of ids is set
    aside, never replayed."""
    spool, events = _spool(tmp_path)
    entry = spool.put("ana-1", None, MESSAGES)
    assert json.loads(entry.path.read_text())["messages"][2]["sources"] == [7, 3]
    spool.put_back(entry)
    (again,) = spool.pending("ana-1")
    assert again.messages[2].sources == (7, 3) and again.messages[0].sources == ()
    body = json.loads(entry.path.read_text())
    body["messages"][2]["sources"] = [7, "DROP TABLE log", True]
    entry.path.write_text(json.dumps(body))
    fresh = Spool(tmp_path / "spool", events.append)
    assert fresh.pending("ana-1") == []
    assert events and events[-1]["event"] == "spool_unreadable"
    assert "sources must be a list of fragment ids" in events[-1]["error"]


_FULL_DISK_CHILD = """
import resource, sys
from pathlib import Path
from memory_core import LogMessage
from proxy.cluster.spool import Spool, SpoolError
spool = Spool(Path(sys.argv[1]), print)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # Python ignores SIGXFSZ: EFBIG
try:
    spool.put("t", "c", (LogMessage({"role": "user", "content": "x" * 10_000}, 1.7e9),))
except SpoolError as exc:
    print("refused:", exc)
"""


def _run_child(script: str, spool: Path) -> subprocess.CompletedProcess[str]:
    """``script`` in a Python of its own (its resource limits stay there), given the
    spool folder as its argument."""
    return subprocess.run(
        [sys.executable, "-c", script, str(spool)],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )  # fmt: skip


def test_an_entry_the_disk_cannot_hold_whole_is_refused_not_kept_cut(tmp_path: Path) -> None:
    """A file size limit (as a full disk) let the first write of the entry land short: the
    entry was renamed into place cut at 4,096 bytes and reported durable, so its answer
    went out, and its replay set it aside as unreadable (the exchange never stored)."""
    done = _run_child(_FULL_DISK_CHILD, tmp_path / "spool")
    assert done.returncode == 0, done.stderr
    assert "refused: could not spool an exchange of t" in done.stdout
    assert "File too large" in done.stdout
    assert list((tmp_path / "spool" / "t").iterdir()) == []  # no entry, no temp file


@pytest.mark.parametrize("taken", ["spool", "logs"])
def test_a_data_folder_the_node_cannot_use_is_one_line_at_start(
    tmp_path: Path, taken: str
) -> None:
    """A file where the spool folder (or the logs folder) goes: ``areamem serve`` died
    with a FileExistsError traceback while building the node. It is a configuration
    error naming ``server.data_dir`` and what in it cannot be used, status 2, as any
    data folder the proxy cannot use."""
    data = tmp_path / "data"
    data.mkdir()
    (data / taken).write_text("a file in the folder's place")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"server: {{host: 127.0.0.1, port: 0, data_dir: {data}}}\n"
        "upstreams: [{model: '*', provider: openai, api_base: 'http://127.0.0.1:9/v1'}]\n"
        "memory: {formation_workers: 0}\n"
        f"cluster: {{node: a, replica: '{(tmp_path / 'replica').as_uri()}'}}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "proxy", "serve", "--config", str(config)],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("areamem: configuration error: ") and "server.data_dir" in line
    assert str(data / taken) in line


def _flip(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with one word of its first message changed: still JSON, still an entry."""
    changed: dict[str, Any] = json.loads(json.dumps(body))
    changed["messages"][0]["message"]["content"] = "Ana garde des guêpes à Évora 🐝"
    return changed


@pytest.mark.parametrize("where", ["content", "conversation"])
def test_an_entry_changed_on_disk_after_its_rename_is_set_aside_not_replayed(
    tmp_path: Path, where: str
) -> None:
    """A file bit-flipped or torn on disk after its rename (a bad disk, an operator's
    partial copy) that still parsed as an entry was replayed with the wrong content: each
    entry now carries the sha256 of its content, and one that does not match is set
    aside and reported, as any unreadable file."""
    spool, events = _spool(tmp_path)
    entry = spool.put("t", "c", MESSAGES)
    spool.put_back(entry)
    body = json.loads(entry.path.read_text())
    assert body["format"] == 2 and len(body["sha256"]) == 64
    changed = _flip(body) if where == "content" else {**body, "conversation": "d"}
    entry.path.write_text(json.dumps(changed, ensure_ascii=False))
    assert Spool(tmp_path / "spool", events.append).pending("t") == []
    moved = tmp_path / "spool" / ".unreadable" / "t" / entry.path.name
    assert moved.exists() and not entry.path.exists()
    (event,) = events
    assert event["event"] == "spool_unreadable" and "checksum" in event["error"]


def test_an_entry_of_the_previous_format_without_a_checksum_still_replays(
    tmp_path: Path,
) -> None:
    """Entries written before the checksum (format 1) are read as before: a node
    upgraded with exchanges in its spool stores them."""
    spool, events = _spool(tmp_path)
    entry = spool.put("ana-1", "conv", MESSAGES)
    body = json.loads(entry.path.read_text())
    old = {k: v for k, v in body.items() if k != "sha256"} | {"format": 1}
    entry.path.write_text(json.dumps(old, ensure_ascii=False))
    (again,) = Spool(tmp_path / "spool", events.append).pending("ana-1")
    assert (again.tenant, again.conversation, again.messages) == ("ana-1", "conv", MESSAGES)
    assert events == []


def test_an_entry_that_cannot_be_removed_is_reported_and_waits_for_a_later_replay(
    tmp_path: Path,
) -> None:
    """The removal after the append failed (the spool folder gone read-only; here a
    folder in the file's place, as root may unlink anything): ``remove`` raised, out of
    the chat's store or the replay, and the entry stayed taken for good, replayed by no
    one until the next start. It is reported, given back
    (a later replay only repeats a no-op append) and removed once it can be."""
    spool, events = _spool(tmp_path)
    entry = spool.put("t", "c", MESSAGES)
    entry.path.unlink()
    entry.path.mkdir()
    spool.remove(entry)
    assert spool.waiting("t") and len(spool) == 1
    (event,) = events
    assert event["event"] == "spool_remove_failed" and event["tenant"] == "t"
    assert event["file"] == str(entry.path) and event["error"]
    entry.path.rmdir()
    spool.remove(entry)
    assert not spool.waiting("t") and len(spool) == 0


_HUGE_FILE_CHILD = """
import os, resource, sys
from pathlib import Path
from proxy.cluster.spool import Spool
folder = Path(sys.argv[1])
(folder / "t").mkdir(parents=True)
with open(folder / "t" / "00000000000000000001-huge.json", "wb") as f:
    f.truncate(2 * 1024**3)  # sparse: 2 GiB that take no disk
resource.setrlimit(resource.RLIMIT_AS, (1024**3, 1024**3))
events = []
spool = Spool(folder, events.append)
print("pending:", spool.pending("t"), [e["event"] for e in events], events[0]["error"])
"""


def test_a_spool_file_larger_than_any_entry_is_set_aside_unread(tmp_path: Path) -> None:
    """A huge file in the spool (an operator's wrong copy) was read whole before it was
    parsed: under a memory limit ``MemoryError`` escaped the replay, the file left in
    place to end every later one. A file larger than an entry may be is set aside without
    being read, and an entry that large is refused when it is written (it then waits
    for its claim in memory, as when the disk is full)."""
    done = _run_child(_HUGE_FILE_CHILD, tmp_path / "spool")
    assert done.returncode == 0, done.stderr
    assert "pending: [] ['spool_unreadable']" in done.stdout
    assert "larger than an entry may be" in done.stdout
    assert (tmp_path / "spool" / ".unreadable" / "t" / "00000000000000000001-huge.json").exists()
    spool = Spool(tmp_path / "small", lambda event: None, max_entry_bytes=1024)
    with pytest.raises(SpoolError, match="larger than an entry may be"):
        spool.put("t", None, (LogMessage({"role": "user", "content": "x" * 2000}, 1.7e9),))
    assert spool.tenants() == [] and not list((tmp_path / "small").glob("**/*.json"))


def test_a_checked_entry_whose_format_reads_1_is_not_read_unchecked(tmp_path: Path) -> None:
    """A format 2 file whose ``format`` changed to 1 (with its content) was read as a
    file of before the checksum, unchecked, and replayed wrong: a file of format 1 never
    carried a checksum, so one that does is no entry."""
    spool, events = _spool(tmp_path)
    entry = spool.put("t", "c", MESSAGES)
    spool.put_back(entry)
    body = _flip(json.loads(entry.path.read_text())) | {"format": 1}
    entry.path.write_text(json.dumps(body, ensure_ascii=False))
    assert Spool(tmp_path / "spool", events.append).pending("t") == []
    (event,) = events
    assert event["event"] == "spool_unreadable" and "checksum" in event["error"]


def test_an_answers_response_id_is_spooled_with_its_turns_and_checked(tmp_path: Path) -> None:
    """A Responses answer spooled during a claim lost its id: replayed, its turns were
    stored but a later request naming the id started a conversation of its own. The id
    is now kept with the turns, covered by the checksum, and typed."""
    spool, events = _spool(tmp_path)
    entry = spool.put("t", "c", MESSAGES, "resp_abc")
    spool.put_back(entry)
    (again,) = Spool(tmp_path / "spool", events.append).pending("t")
    assert (again.messages, again.response_id) == (MESSAGES, "resp_abc")
    plain = spool.put("u", "c", MESSAGES)
    assert "response_id" not in json.loads(plain.path.read_text()) and plain.response_id is None
    body = json.loads(entry.path.read_text())
    for forged in ("resp_other", 12):
        entry.path.write_text(json.dumps({**body, "response_id": forged}, ensure_ascii=False))
        assert Spool(tmp_path / "spool", events.append).pending("t") == []
        moved = tmp_path / "spool" / ".unreadable" / "t" / entry.path.name
        assert moved.exists()
        moved.rename(entry.path)
    reasons = [e["error"] for e in events if e["event"] == "spool_unreadable"]
    assert len(reasons) == 2 and "checksum" in reasons[0] and "response_id" in reasons[1]
