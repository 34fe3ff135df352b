"""Export and import of a tenant's memory (memory_core.transfer): the same areas and
blocks after the round trip, and every bad file or target refused with nothing changed
(real SQLite files in a temp folder, the real formation pipeline, offline backends)."""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_core import ExportFileError, MemoryNotEmptyError, MemoryStore, transfer
from memory_core.formation import Backends
from memory_core.storage import integrity_check

from .test_history import rows, say

QUESTIONS = (
    "Where does Maya live now?",
    "What does Anna play?",
    "Tell me about the cat",
    "Who loves jazz?",
)


@pytest.fixture
def source(tmp_path: Path, backends: Backends) -> Iterator[MemoryStore]:
    """A memory with a cycle behind it (a snapshot) and formation since (the journal)."""
    store = MemoryStore(tmp_path / "source.db", backends=backends)
    say(store, "c1", ["I live in Paris and my sister Anna loves jazz.", "Anna plays the piano."])
    store.dream()
    say(store, "c2", ["Actually, I moved to Rome last month.", "I adopted a cat named Tom."], 10)
    yield store
    store.close()


def opened(path: Path, backends: Backends) -> MemoryStore:
    return MemoryStore(path, backends=backends)


def answers(store: MemoryStore) -> list[tuple[list[int], str]]:
    found = []
    for question in QUESTIONS:
        recall = store.recall_area(question, limit=6, budget_tokens=400, asked_at=1.8e9)
        found.append(([h.fragment_id for h in recall.hits], recall.context.text))
    return found


def test_export_then_import_gives_the_same_areas_and_blocks(
    source: MemoryStore, tmp_path: Path, backends: Backends
) -> None:
    manifest = source.export(tmp_path / "maya.areamem", tenant="maya")
    assert (manifest.format, manifest.version, manifest.tenant) == ("areamem-export", 1, "maya")
    assert manifest.counts["log"] == 4 and manifest.counts["snapshots"] == 1
    assert "receipts" not in manifest.counts
    target = opened(tmp_path / "target.db", backends)
    try:
        target.import_export(tmp_path / "maya.areamem")
        expected = answers(source)
        assert any(hits for hits, _ in expected) and any("Rome" in t for _, t in expected)
        assert answers(target) == expected
        assert rows(target) == rows(source)
        assert integrity_check(target.path) == "ok"
        # its history came along: a rollback to the imported snapshot works
        target.rollback(1)
        assert target.stats().held == 2
    finally:
        target.close()
    again = opened(tmp_path / "target.db", backends)  # and it reads the same once reopened
    try:
        assert [s.kind for s in again.snapshots()] == ["rollback", "checkpoint", "cycle"]
    finally:
        again.close()


def _export(source: MemoryStore, tmp_path: Path) -> Path:
    path = tmp_path / "export.areamem"
    source.export(path, tenant="maya")
    return path


def _rewritten(path: Path, dest: Path, change: dict[str, bytes | None]) -> Path:
    """A copy of the export at ``path`` with some members replaced (None: left out)."""
    with zipfile.ZipFile(path) as original, zipfile.ZipFile(dest, "w") as copy:
        for name in original.namelist():
            body = change.get(name, original.read(name))
            if body is not None:
                copy.writestr(name, body)
    return dest


def _manifest(path: Path) -> dict[str, object]:
    with zipfile.ZipFile(path) as archive:
        return dict(json.loads(archive.read("manifest.json")))


def _bad_files(path: Path, folder: Path) -> dict[str, tuple[Path, str]]:
    truncated = folder / "truncated.areamem"
    truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    newer = json.dumps({**_manifest(path), "version": 2}).encode()
    with zipfile.ZipFile(path) as archive:
        log = archive.read("tables/log.jsonl")
    edited = log.replace(b"Paris", b"Perth")
    return {
        "truncated": (truncated, "not an areamem export, or truncated"),
        "newer": (
            _rewritten(path, folder / "newer.areamem", {"manifest.json": newer}),
            "export format version 2",
        ),
        "corrupt": (
            _rewritten(path, folder / "corrupt.areamem", {"tables/log.jsonl": edited}),
            "part for log is corrupt or truncated",
        ),
        "part missing": (
            _rewritten(path, folder / "missing.areamem", {"tables/relations.jsonl": None}),
            "no part for relations",
        ),
        "not an export": (_not_export(folder), "not an areamem export"),
    }


def _not_export(folder: Path) -> Path:
    path = folder / "notes.txt"
    path.write_text("hello")
    return path


@pytest.mark.parametrize("case", ["truncated", "newer", "corrupt", "part missing", "not an export"])
def test_a_bad_export_is_refused_and_changes_nothing(
    source: MemoryStore, tmp_path: Path, backends: Backends, case: str
) -> None:
    path, message = _bad_files(_export(source, tmp_path), tmp_path)[case]
    for target_has_memory in (False, True):
        target = opened(tmp_path / f"target-{target_has_memory}.db", backends)
        try:
            if target_has_memory:
                say(target, "mine", ["I keep bees in Lyon."])
            before = rows(target), target.stats()
            with pytest.raises(ExportFileError, match=message):
                target.import_export(path, replace=True)
            assert (rows(target), target.stats()) == before
        finally:
            target.close()


def test_a_target_with_memory_is_refused_unless_replaced(
    source: MemoryStore, tmp_path: Path, backends: Backends
) -> None:
    path = _export(source, tmp_path)
    target = opened(tmp_path / "target.db", backends)
    try:
        say(target, "mine", ["I keep bees in Lyon."])
        before = rows(target), target.stats()
        with pytest.raises(MemoryNotEmptyError, match="already holds memory"):
            target.import_export(path)
        assert (rows(target), target.stats()) == before
        target.import_export(path, replace=True)  # the log's guards are back afterwards
        assert answers(target) == answers(source)
        assert target.stats().log_messages == 4
        assert target.recall("bees Lyon", limit=3, budget_tokens=100).hits == ()
    finally:
        target.close()


DEFLATED = zipfile.ZIP_DEFLATED


def _deflated(path: Path, dest: Path, change: dict[str, bytes]) -> Path:
    """:func:`_rewritten`, compressed: a member of zeros takes a thousandth of its size."""
    with zipfile.ZipFile(path) as original, zipfile.ZipFile(dest, "w", DEFLATED) as copy:
        for name in original.namelist():
            copy.writestr(name, change.get(name, original.read(name)))
    return dest


def test_an_export_that_inflates_past_its_bounds_is_refused_before_it_is_read(
    source: MemoryStore, tmp_path: Path, backends: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small file that inflates to gigabytes (a zip bomb) is refused from the sizes its
    members declare: a manifest past 16 MiB, an export past ``max_bytes``, a row past the
    row bound; nothing is stored."""
    path = _export(source, tmp_path)
    bomb = _deflated(path, tmp_path / "bomb.areamem", {"manifest.json": b" " * (17 << 20)})
    assert bomb.stat().st_size < 1 << 20
    with zipfile.ZipFile(path) as archive:
        log = archive.read("tables/log.jsonl")
    padded = _deflated(path, tmp_path / "padded.zip", {"tables/log.jsonl": log + b" " * (8 << 20)})
    one_long_row = _deflated(path, tmp_path / "long.zip", {"tables/log.jsonl": b"[" * (1 << 20)})
    monkeypatch.setattr(transfer, "_MAX_ROW", 1 << 19)
    target = opened(tmp_path / "target.db", backends)
    try:
        before = rows(target), target.stats()
        with pytest.raises(ExportFileError, match=r"manifest\.json says"):
            target.import_export(bomb)
        with pytest.raises(ExportFileError, match="inflates to"):
            target.import_export(padded, max_bytes=4 << 20)
        with pytest.raises(ExportFileError, match="longer than"):
            target.import_export(one_long_row)
        assert (rows(target), target.stats()) == before
        target.import_export(path, max_bytes=4 << 20)  # a sound export within the bound
        assert rows(target) == rows(source)
    finally:
        target.close()


Edit = Callable[[list[Any]], list[Any]]


def _edited_by_hand(path: Path, dest: Path, table: str, edit: Edit) -> Path:
    """A copy of the export at ``path`` whose part ``table`` is ``edit``'s rows, its
    manifest's rows and sha256 written to match: what a person editing the file by hand
    (or a tool) makes, which passes every check of the file's own soundness."""
    with zipfile.ZipFile(path) as archive:
        rows_of = [json.loads(line) for line in archive.read(f"tables/{table}.jsonl").splitlines()]
    body = "".join(json.dumps(row) + "\n" for row in edit(rows_of)).encode()
    manifest: Any = _manifest(path)
    manifest["parts"][table].update(rows=body.count(b"\n"), sha256=hashlib.sha256(body).hexdigest())
    return _rewritten(
        path, dest, {f"tables/{table}.jsonl": body, "manifest.json": json.dumps(manifest).encode()}
    )


HAND_EDITS: dict[str, tuple[str, Edit, str]] = {
    "a mention of a fragment it lacks": (
        "mentions",
        lambda rs: [[r[0], 999_999, *r[2:]] for r in rs],
        "refer to rows of .* lacks",
    ),
    "an entity twice": ("entities", lambda rs: [*rs, rs[0]], "UNIQUE constraint failed"),
    "a relation without its subject": (
        "relations",
        lambda rs: [[r[0], None, *r[2:]] for r in rs],
        "NOT NULL constraint failed",
    ),
    "a second bookkeeping row": (
        "memory_state",
        lambda rs: [*rs, [2, *rs[0][1:]]],
        "CHECK constraint failed",
    ),
    "a number SQLite cannot hold": (
        "entities",
        lambda rs: [[2**70, *r[1:]] for r in rs],
        "too large",
    ),
    "an id that is text": ("memory_state", lambda rs: [["one", *r[1:]] for r in rs], "mismatch"),
    "a generation past any count": (
        "memory_state",
        lambda rs: [[r[0], 1e308, *r[2:]] for r in rs],
        "memory_state",
    ),
    "no bookkeeping row": ("memory_state", lambda rs: [], "memory_state"),
}


@pytest.mark.parametrize("case", sorted(HAND_EDITS))
def test_an_export_edited_by_hand_is_refused_naming_what_is_wrong(
    source: MemoryStore, tmp_path: Path, backends: Backends, case: str
) -> None:
    """A file whose parts match its manifest but whose rows break the store's rules (a
    foreign key pointing nowhere, a duplicate id, a missing value, a number past 64 bits,
    bookkeeping counters that are no counters) is an invalid export, refused with the
    rule it breaks: never a database or interpreter error, and nothing stored changes."""
    table, edit, message = HAND_EDITS[case]
    path = _edited_by_hand(_export(source, tmp_path), tmp_path / "edited.areamem", table, edit)
    target = opened(tmp_path / "target.db", backends)
    try:
        say(target, "mine", ["I keep bees in Lyon."])
        before = rows(target), target.stats()
        with pytest.raises(ExportFileError, match=message):
            target.import_export(path, replace=True)
        assert (rows(target), target.stats()) == before
        target.import_export(_export(source, tmp_path), replace=True)  # a sound one still loads
        assert answers(target) == answers(source)
    finally:
        target.close()


@pytest.mark.parametrize("member", ["manifest.json", "tables/log.jsonl"])
def test_json_nested_too_deeply_is_refused(
    source: MemoryStore, tmp_path: Path, backends: Backends, member: str
) -> None:
    """A manifest or a row of a hundred thousand opening brackets (its sha256 in the
    manifest, as a hand edit would put it) is an invalid export, not a RecursionError."""
    deep = b"[" * 100_000 + b"]" * 100_000 + b"\n"
    path = _export(source, tmp_path)
    manifest: Any = _manifest(path)
    manifest["parts"]["log"].update(sha256=hashlib.sha256(deep).hexdigest(), rows=1)
    change: dict[str, bytes | None] = {"manifest.json": deep} if member == "manifest.json" else {
        "tables/log.jsonl": deep, "manifest.json": json.dumps(manifest).encode()
    }  # fmt: skip
    path = _rewritten(path, tmp_path / "deep.areamem", change)
    target = opened(tmp_path / "target.db", backends)
    try:
        with pytest.raises(ExportFileError, match="nested too deeply"):
            target.import_export(path)
        assert target.stats().log_messages == 0
    finally:
        target.close()
