"""Hostile sequences against the newest derived memory (fragment dates, the date
backfill, aliases): two processes opening one old store, kills, rollbacks and
transfers, each checked against the full contents of the derived tables."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import apsw
import pytest

from memory_core import LogMessage, MemoryStore
from memory_core.errors import ExportFileError
from memory_core.formation import Backends
from memory_core.storage import integrity_check, journal
from memory_core.storage.db import connect, transaction
from memory_core.storage.journal import TRACKED
from memory_core.storage.migrations import MIGRATIONS, migrate
from memory_core.storage.tables.entities import VOCATIVE
from memory_core.storage.tables.reformation import encoders
from memory_core.transfer import export as export_memory

T0 = 1_683_504_000.0 + 3_600  # 8 May 2023, 01:00 UTC
DAY = 86_400.0

_TURNS = (
    ("I adopted a puppy named Biscuit yesterday.", T0),
    ("We went hiking last week.", T0 + 5),
    ("No dates here.", T0 + 15),
)


def _scalar(conn: apsw.Connection, sql: str) -> Any:
    """The one value of a query that returns one row."""
    row = conn.execute(sql).fetchone()
    assert row is not None, sql
    return row[0]


def _say(store: MemoryStore, *turns: tuple[str, float], conversation: str = "c1") -> None:
    messages = []
    for text, ts in turns:
        messages.append(LogMessage({"role": "user", "name": "Ana", "content": text}, ts))
        messages.append(LogMessage({"role": "assistant", "content": "I see."}, ts + 1))
    store.append(messages, conversation=conversation, source="ingest")
    store.form_all()


def _as_before_migration_013(path: Path) -> None:
    conn = connect(path)
    with transaction(conn, journal=False):
        conn.execute(
            "DROP TABLE fragment_dates; DROP INDEX fragments_ts; DROP TABLE date_backfill;"
            " DROP INDEX fragment_vectors_model; DROP TABLE response_links"
        )
        conn.execute(
            "DELETE FROM migrations WHERE name IN ('013_fragment_dates', '014_date_backfill',"
            " '015_vector_models', '016_response_links')"
        )
    conn.close()


def _rows(conn: apsw.Connection, table: str) -> list[tuple[object, ...]]:
    return sorted(conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)


def test_a_second_process_migrating_between_the_read_and_the_write_is_no_error(
    tmp_path: Path, backends: Backends
) -> None:
    """Two processes opening one store of before migration 013 at once: both read which
    migrations were applied, one applies 013 and 014, and the other then applied 013
    again ("table fragment_dates already exists", the open failed). Each migration now
    checks, under the write lock, that no one applied it since."""
    path = tmp_path / "old.db"
    store = MemoryStore(path, backends=backends)
    _say(store, *_TURNS)
    store.close()
    _as_before_migration_013(path)
    first, second = connect(path), connect(path)
    begun = 0

    def other_process_migrates_first(cursor: object, sql: str, bindings: object) -> bool:
        nonlocal begun
        begun += sql.strip().upper().startswith("BEGIN IMMEDIATE")
        if begun == 2 and sql.strip().upper().startswith("BEGIN IMMEDIATE"):
            assert migrate(second) == [
                "013_fragment_dates",
                "014_date_backfill",
                "015_vector_models",
                "016_response_links",
            ]
        return True

    first.exec_trace = other_process_migrates_first
    assert migrate(first) == []
    first.exec_trace = None
    names = [row[0] for row in first.execute("SELECT name FROM migrations ORDER BY name")]
    assert names == sorted(name for name, _ in MIGRATIONS)
    first.close()
    second.close()
    again = MemoryStore(path, backends=backends)
    with again.lookup() as conn:
        dates = _rows(conn, "fragment_dates")
    assert sorted(str(row[4]) for row in dates) == ["last week", "yesterday"]  # once each
    again.close()


KATE = [
    "I just finished a long shift at the hospital yesterday, I work as a nurse.",
    "Hey Kate! That sounds exhausting. How many hours was it?",
    "Twelve hours. Next week I volunteer at the animal shelter.",
    "Thanks, Kate. I admire that. I started the cello last month.",
]
BIA = [
    "Passei o dia todo no estúdio ontem a gravar o meu disco de fado.",
    "Oi Bia, tudo bem? Que bom saber do disco!",
    "Amanhã vou ao Porto tocar num bar.",
    "Obrigado, Bia, vou tentar ir ver-te.",
]


def _conversation(
    store: MemoryStore, speakers: tuple[str, str], lines: list[str], conversation: str,
    start: float,
) -> None:
    turns = [
        LogMessage({"role": "user", "name": speakers[i % 2], "content": t}, start + 60 * i)
        for i, t in enumerate(lines)
    ]
    store.append(turns, conversation=conversation, source="ingest")
    store.form_all()


def _derived(store: MemoryStore) -> dict[str, list[tuple[object, ...]]]:
    with store.lookup() as conn:
        return {t: _rows(conn, t) for t in sorted(TRACKED)}


def _answers(store: MemoryStore) -> dict[str, object]:
    """What /memory/search, /memory/area and /memory/entities are made of."""
    questions = ("What does Kate do?", "Who is Bia?", "What happened on 7 May 2023?")
    return {
        "search": [
            [h.text for h in store.recall(q, limit=5, budget_tokens=800).hits] for q in questions
        ],
        "area": [_area(store, q) for q in questions],
        "entities": sorted(
            (e.name, e.is_speaker, sorted((a.alias, a.source, tuple(a.used_in)) for a in e.aliases))
            for e in store.entities(limit=1000)
        ),
    }


def _area(store: MemoryStore, question: str) -> tuple[list[str], object]:
    recall = store.recall_area(question, limit=5, budget_tokens=800)
    return [h.text for h in recall.hits], None if recall.area is None else recall.area.get("named")


def test_a_rollback_restores_dates_aliases_and_answers_exactly_and_is_undone(
    tmp_path: Path, backends: Backends
) -> None:
    store = MemoryStore(tmp_path / "m.db", backends=backends)
    _conversation(store, ("Katarzyna", "Tom"), KATE, "c1", T0)
    s1 = store.dream().snapshot
    at_s1, answers_s1 = _derived(store), _answers(store)
    assert at_s1["fragment_dates"] and any(r[5] == VOCATIVE for r in at_s1["aliases"])
    _conversation(store, ("Beatriz", "Rui"), BIA, "c2", T0 + 3 * DAY)
    _conversation(store, ("Katarzyna", "Tom"), ["No, I work as a doctor now, since yesterday."],
                  "c1", T0 + 4 * DAY)
    store.dream()
    at_s2, answers_s2 = _derived(store), _answers(store)
    assert len(at_s2["fragment_dates"]) > len(at_s1["fragment_dates"])
    assert len(at_s2["aliases"]) > len(at_s1["aliases"])
    restored = store.rollback(s1)
    assert _derived(store) == at_s1
    assert _answers(store) == answers_s1
    store.rollback(restored.snapshot - 1)
    assert _derived(store) == at_s2
    assert _answers(store) == answers_s2
    store.close()


def test_formation_after_a_rollback_forgets_the_names_it_had_learned_since(
    tmp_path: Path, backends: Backends
) -> None:
    """Held: the entities formation keeps in memory are read again after a rollback that
    removed some (no mention or alias of an entity that no longer exists)."""
    store = MemoryStore(tmp_path / "m.db", backends=backends)
    _conversation(store, ("Katarzyna", "Tom"), KATE, "c1", T0)
    s1 = store.dream().snapshot
    _conversation(store, ("Beatriz", "Rui"), BIA, "c2", T0 + 3 * DAY)
    store.rollback(s1)
    _conversation(store, ("Tom", "Katarzyna"), ["I told Bia about the fado record."], "c3",
                  T0 + 5 * DAY)
    _conversation(store, ("Rui", "Beatriz"), ["Oi Bia! Tudo bem?", "Sim, Rui."], "c4",
                  T0 + 6 * DAY)
    with store.lookup() as conn:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        entity_ids = {int(r[0]) for r in conn.execute("SELECT id FROM entities")}
        for table in ("aliases", "mentions"):
            used = {int(r[0]) for r in conn.execute(f"SELECT entity_id FROM {table}")}
            assert used <= entity_ids, table
    store.dream()  # forms the held turns again, with the names formation knows now
    with store.lookup() as conn:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    (bia,) = [e for e in store.entities(limit=1000) if e.name == "Bia"]
    assert not bia.is_speaker  # a third person before anyone called Beatriz so
    store.close()


def test_formation_after_an_import_replacing_memory_reads_the_imported_entities(
    tmp_path: Path, backends: Backends
) -> None:
    """An import carried the exported store's ``memory_state`` verbatim (bumped by one):
    when the importing store's former had cached as many writes of derived memory, it
    kept the entities and contexts of the memory replaced, and the next pass linked new
    mentions to entity ids that now name others."""
    source = MemoryStore(tmp_path / "source.db", backends=backends)
    _conversation(source, ("Beatriz", "Rui"), BIA, "c1", T0)
    exported = tmp_path / "export.zip"
    source.export(exported, tenant="source")
    source_version = journal.derived_version(source._forming)
    source.close()
    target = MemoryStore(tmp_path / "target.db", backends=backends)
    _conversation(target, ("Katarzyna", "Tom"), KATE, "c1", T0)
    while journal.derived_version(target._forming) < source_version + 1:
        _conversation(target, ("Katarzyna", "Tom"), ["Fine."], "c9", T0 + DAY)
    assert journal.derived_version(target._forming) == source_version + 1  # as the import's
    target.import_export(exported, replace=True)
    _conversation(target, ("Tom", "Katarzyna"), ["Hello Kate! Katarzyna told me."], "c2",
                  T0 + 5 * DAY)
    with target.lookup() as conn:
        names = {int(i): str(n) for i, n in conn.execute("SELECT id, name FROM entities")}
        linked = {
            str(surface): names[int(entity)]
            for surface, entity in conn.execute(
                "SELECT m.surface, m.entity_id FROM mentions m JOIN fragments f"
                " ON f.id = m.fragment_id WHERE f.conversation_id = 'c2'"
            )
        }
    assert linked.get("Katarzyna") == "Katarzyna", linked
    target.close()


def _dates_by_text(store: MemoryStore) -> dict[str, list[str]]:
    with store.lookup() as conn:
        found = conn.execute(
            "SELECT f.text, d.words FROM fragments f JOIN fragment_dates d"
            " ON d.fragment_id = f.id ORDER BY f.id, d.position"
        ).fetchall()
    dated: dict[str, list[str]] = {}
    for text, words in found:
        dated.setdefault(str(text), []).append(str(words))
    return dated


def test_a_rollback_past_the_upgrade_that_dated_old_fragments_keeps_them_dated(
    tmp_path: Path, backends: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store formed (with a snapshot) before migration 013 has its fragments dated by
    the backfill at the first open after it. Rolling back to that older snapshot
    applied the inverse of the backfill too: the fragments it keeps lost their dates for
    good (the backfill was over), so a question by date missed them while later ones were
    found. The rollback now arms the backfill again for them, and they are dated again."""
    path = tmp_path / "m.db"
    monkeypatch.setattr("memory_core.formation.writer.date_rows_of", lambda text, ts: [])
    old = MemoryStore(path, backends=backends)  # formation as before migration 013
    _say(old, *_TURNS)
    s0 = old.dream().snapshot
    old.close()
    monkeypatch.undo()
    conn = connect(path)
    with transaction(conn, journal=False):  # as migrations 013 and 014 leave it
        conn.execute("INSERT INTO date_backfill VALUES (1, 0)")
    conn.close()
    store = MemoryStore(path, backends=backends)
    expected = _dates_by_text(store)
    assert set(expected) == {_TURNS[0][0], _TURNS[1][0]}  # the backfill dated them
    _say(store, ("My sister visits next month.", T0 + DAY), conversation="c2")
    store.dream()
    before = _derived(store)
    restored = store.rollback(s0)
    assert _dates_by_text(store) == expected
    store.rollback(restored.snapshot - 1)  # undone: exactly as before
    assert _derived(store) == before
    store.rollback(s0)
    store.close()
    again = MemoryStore(path, backends=backends)
    assert _dates_by_text(again) == expected
    again.close()


def _used_in(store: MemoryStore, alias: str) -> list[int]:
    return [
        fragment
        for entity in store.entities(limit=1000)
        for a in entity.aliases
        if a.alias == alias and a.source == VOCATIVE
        for fragment in a.used_in
    ]


def test_the_fragments_a_vocative_alias_was_used_in_leave_out_forgotten_ones(
    tmp_path: Path, backends: Backends
) -> None:
    """/memory/entities listed, as where "Kate" was used, the fragments of messages the
    user had forgotten (every other listing of memory leaves them out); undoing the
    forget lists them again."""
    store = MemoryStore(tmp_path / "m.db", backends=backends)
    _conversation(store, ("Katarzyna", "Tom"), KATE, "c1", T0)
    used = _used_in(store, "Kate")
    assert len(used) == 2
    store.forget_fragments(used[:1], request="forget", conversation=None)
    assert _used_in(store, "Kate") == used[1:]
    store.unforget()
    assert _used_in(store, "Kate") == used
    store.close()


def test_an_import_of_a_store_whose_backfill_was_cut_short_dates_its_fragments(
    tmp_path: Path, backends: Backends
) -> None:
    """An export carries ``date_backfill`` (a store killed partway through its backfill
    still has it pending). The store that imported it dated nothing until it was next
    opened: questions by date missed those fragments meanwhile. It dates them now."""
    source = MemoryStore(tmp_path / "source.db", backends=backends)
    _say(source, *_TURNS)
    expected = _dates_by_text(source)
    source.close()
    conn = connect(tmp_path / "source.db")
    with transaction(conn, journal=False):  # killed before its first batch committed
        conn.execute("DELETE FROM fragment_dates")
        conn.execute("INSERT INTO date_backfill VALUES (1, 0)")
    export_memory(conn, tmp_path / "export.zip", tenant="source", now=T0)
    conn.close()
    target = MemoryStore(tmp_path / "target.db", backends=backends)
    target.import_export(tmp_path / "export.zip")
    assert _dates_by_text(target) == expected and expected
    with target.lookup() as reader:
        assert _scalar(reader, "SELECT count(*) FROM date_backfill") == 0
    target.close()


def test_opening_a_new_store_another_process_is_creating_waits_for_it(tmp_path: Path) -> None:
    """Two processes creating one new store at once: while one held a write transaction
    on the file (not yet in WAL mode), the other's switch to WAL failed at once ("cannot
    open memory database: database is locked"; SQLite's busy handler does not wait for
    that lock). It now waits as for any other lock."""
    path = tmp_path / "new.db"
    creating = apsw.Connection(str(path))
    creating.execute("CREATE TABLE t (x)")
    creating.execute("BEGIN IMMEDIATE")
    creating.execute("INSERT INTO t VALUES (1)")
    done = threading.Timer(0.2, lambda: creating.execute("COMMIT"))
    done.start()
    try:
        opened = connect(path)
    finally:
        done.join()
    assert opened.execute("PRAGMA journal_mode").fetchall() == [("wal",)]
    opened.close()
    creating.close()


_KILLED_IN_THE_SECOND_BATCH = """
import os, signal, sys
from pathlib import Path
import memory_core.formation.dates as dating
from memory_core.storage.tables import dates as date_rows
from memory_core import MemoryStore
dating._BATCH = 1
moved = date_rows.move_backfill
def move(conn, after):
    moved(conn, after)
    if after > int(sys.argv[2]):  # inside the second batch's transaction, rows written
        os.kill(os.getpid(), signal.SIGKILL)
date_rows.move_backfill = move
MemoryStore(Path(sys.argv[1]))
"""


def test_sigkill_in_the_middle_of_the_backfill_at_open_loses_and_repeats_nothing(
    tmp_path: Path, backends: Backends
) -> None:
    """Held: a store of before migration 013 opened by a process killed (SIGKILL) while
    its backfill wrote its second batch keeps the first batch and its place; the next
    open dates the rest, each fragment once, and lookups answer."""
    path = tmp_path / "old.db"
    store = MemoryStore(path, backends=backends)
    _say(store, *_TURNS, ("We met the day before yesterday.", T0 + 20))
    expected = _dates_by_text(store)
    first = int(_scalar(store._reader, "SELECT min(id) FROM fragments"))
    store.close()
    _as_before_migration_013(path)
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_IN_THE_SECOND_BATCH, str(path), str(first)],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        capture_output=True, timeout=120, check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
    conn = connect(path)
    assert conn.execute("SELECT after FROM date_backfill").fetchall() == [(first,)]
    assert conn.execute("SELECT DISTINCT fragment_id FROM fragment_dates").fetchall() == [
        (first,)
    ]
    conn.close()
    again = MemoryStore(path, backends=backends)
    assert _dates_by_text(again) == expected and len(expected) == 3
    with again.lookup() as reader:
        assert _scalar(reader, "SELECT count(*) FROM date_backfill") == 0
    assert again.recall("puppy Biscuit", limit=1, budget_tokens=300).hits
    assert integrity_check(path) == "ok"
    again.close()


def test_an_import_of_memory_made_by_another_encoder_is_formed_again(
    tmp_path: Path, backends: Backends
) -> None:
    """A store checks once, when first used, that its vectors are its encoder's. An import
    into a store already in use brought vectors of another encoder and nothing checked
    them again: lookups compared questions with vectors of another space and formation
    added its own beside them (a mixed store, which the design forbids) until the next
    restart. The next use after an import checks again (here: forms it again)."""
    source = MemoryStore(tmp_path / "source.db", backends=backends)
    _say(source, *_TURNS)
    source.close()
    conn = connect(tmp_path / "source.db")
    with transaction(conn, journal=False):
        conn.execute("UPDATE fragment_vectors SET model = 'another-encoder'")
    export_memory(conn, tmp_path / "export.zip", tenant="source", now=T0)
    conn.close()
    target = MemoryStore(tmp_path / "target.db", backends=backends)
    _say(target, ("I bought a red bike.", T0))
    assert target.recall("red bike", limit=1, budget_tokens=300).hits  # checked now
    target.import_export(tmp_path / "export.zip", replace=True)
    assert target.recall("puppy", limit=1, budget_tokens=300) is not None
    assert target.reencoded is not None and target.reencoded[0] == ("another-encoder",)
    target.form_all()
    with target.lookup() as reader:
        assert encoders(reader) == [backends.encoder.interpretation.label]
    target.close()


def test_a_rollback_to_vectors_of_another_encoder_is_formed_again(
    tmp_path: Path, backends: Backends
) -> None:
    """A rollback to a snapshot taken before memory was formed again for a new encoder
    brings back the old encoder's vectors; the store, which checks its vectors once per
    open, went on comparing questions with them until the next restart. The next use
    after a rollback checks again."""
    store = MemoryStore(tmp_path / "m.db", backends=backends)
    _say(store, *_TURNS)
    label = backends.encoder.interpretation.label
    with transaction(store._forming):  # as a store encoded by another encoder was
        store._forming.execute("UPDATE fragment_vectors SET model = 'another-encoder'")
    s1 = store.dream().snapshot
    with transaction(store._forming):  # as formed again for this one
        store._forming.execute("UPDATE fragment_vectors SET model = ?", (label,))
    store.dream()
    assert store.recall("puppy", limit=1, budget_tokens=300).hits and store.reencoded is None
    store.rollback(s1)
    store.recall("puppy", limit=1, budget_tokens=300)
    assert store.reencoded is not None and store.reencoded[0] == ("another-encoder",)
    store.form_all()
    with store.lookup() as reader:
        assert encoders(reader) == [label]
    store.close()


def test_an_import_into_a_fresh_store_holds_the_same_derived_rows(
    tmp_path: Path, backends: Backends
) -> None:
    """Held: dates, vocative aliases, the date backfill's table and every other derived
    row travel verbatim; searches, areas and the entities listing answer the same."""
    source = MemoryStore(tmp_path / "source.db", backends=backends)
    _conversation(source, ("Katarzyna", "Tom"), KATE, "c1", T0)
    _conversation(source, ("Beatriz", "Rui"), BIA, "c2", T0 + DAY)
    source.dream()
    source.export(tmp_path / "export.zip", tenant="source")
    rows, answers = _derived(source), _answers(source)
    with source.lookup() as conn:
        backfill = _rows(conn, "date_backfill")
    source.close()
    target = MemoryStore(tmp_path / "target.db", backends=backends)
    target.import_export(tmp_path / "export.zip")
    assert _derived(target) == rows and rows["fragment_dates"]
    assert any(r[5] == VOCATIVE for r in rows["aliases"])
    with target.lookup() as conn:
        assert _rows(conn, "date_backfill") == backfill
    assert _answers(target) == answers
    target.close()


def test_an_export_of_a_store_from_before_the_dates_is_refused_clearly(
    tmp_path: Path, backends: Backends
) -> None:
    """Held: an export made by a store of before migrations 013 and 014 (no dates, no
    backfill) is refused, naming both schemas, and changes nothing."""
    old = tmp_path / "old.db"
    store = MemoryStore(old, backends=backends)
    _say(store, *_TURNS)
    store.close()
    _as_before_migration_013(old)
    conn = connect(old)
    export_memory(conn, tmp_path / "old.zip", tenant="old", now=T0)
    conn.close()
    target = MemoryStore(tmp_path / "target.db", backends=backends)
    _conversation(target, ("Katarzyna", "Tom"), KATE, "c1", T0)
    before = _derived(target)
    lacks = (
        "the export lacks 013_fragment_dates, 014_date_backfill, 015_vector_models,"
        " 016_response_links"
    )
    with pytest.raises(ExportFileError, match=rf"schema \(012_word_vectors\) is not this.*{lacks}"):
        target.import_export(tmp_path / "old.zip", replace=True)
    assert _derived(target) == before
    target.close()


_KILLED_IN_THE_WRITE = """
import os, signal, sys
from pathlib import Path
import memory_core.formation.pipeline as pipeline
from memory_core import MemoryStore
from memory_core.formation import FormationConfig, build_backends
from memory_core.formation.config import EncoderConfig
def killed(conn, entities, now):  # dates, mentions and aliases written, not committed
    os.kill(os.getpid(), signal.SIGKILL)
pipeline.save_entities = killed
backends = build_backends(FormationConfig(encoder=EncoderConfig(model="minilm")))
MemoryStore(Path(sys.argv[1]), backends=backends).form_all()
"""


def test_sigkill_of_formation_inside_its_write_leaves_nothing_half_written(
    tmp_path: Path, backends: Backends
) -> None:
    """Held: a process killed (SIGKILL) inside a formation pass's write transaction (its
    dates, mentions and vocative aliases written, not committed) leaves the rows queued
    and no derived row; the next passes form the same dates, entities and aliases as an
    uninterrupted one, once each."""
    clean = MemoryStore(tmp_path / "clean.db", backends=backends)
    _conversation(clean, ("Katarzyna", "Tom"), KATE, "c1", T0)
    expected = _dates_by_text(clean), _answers(clean)["entities"]
    clean.close()
    path = tmp_path / "killed.db"
    store = MemoryStore(path, backends=backends)
    turns = [
        LogMessage({"role": "user", "name": ("Katarzyna", "Tom")[i % 2], "content": t}, T0 + 60 * i)
        for i, t in enumerate(KATE)
    ]
    store.append(turns, conversation="c1", source="ingest")
    store.close()
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_IN_THE_WRITE, str(path)],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        capture_output=True, timeout=120, check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
    again = MemoryStore(path, backends=backends)
    assert all(not rows for rows in _derived(again).values())
    assert again.form_all() == len(KATE)  # each retried alone (it had an attempt behind it)
    assert (_dates_by_text(again), _answers(again)["entities"]) == expected
    with again.lookup() as conn:
        assert _scalar(conn, "SELECT count(*) FROM queue") == 0
    assert integrity_check(path) == "ok"
    again.close()
