"""Memory's history in memory_core: the journal, snapshots, rollback, held rows, diffs,
copies as of a snapshot, and what other writers see (real SQLite files in a temp folder,
the real formation pipeline with the offline backends)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_core import LogMessage, MemoryStore, describe_snapshot, undo_of
from memory_core.dream import DreamConfig
from memory_core.errors import MemoryChangedError, SnapshotNotFoundError, StorageError
from memory_core.formation import Backends
from memory_core.storage import integrity_check, journal, transaction
from memory_core.storage.journal import TRACKED
from memory_core.storage.tables import history as history_rows

T0 = 1_700_000_000.0


def say(store: MemoryStore, conversation: str, texts: Sequence[str], start: int = 0) -> None:
    """Log ``texts`` as Maya's turns of ``conversation`` and form them."""
    messages = [
        LogMessage({"role": "user", "name": "Maya", "content": t}, T0 + (start + i) * 60)
        for i, t in enumerate(texts)
    ]
    store.append(messages, conversation=conversation)
    store.form_all()


def rows(store: MemoryStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of derived memory, table by table."""
    conn = store._reader
    return {t: list(conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2")) for t in sorted(TRACKED)}


def search(store: MemoryStore, question: str) -> list[str]:
    found = store.recall(question, limit=5, budget_tokens=500)
    return [h.text for h in found.hits]


@pytest.fixture
def store(tmp_path: Path, backends: Backends) -> Iterator[MemoryStore]:
    opened = MemoryStore(tmp_path / "t.db", backends=backends)
    yield opened
    opened.close()


def test_the_journal_records_derived_memory_only(store: MemoryStore) -> None:
    conn = store._forming
    say(store, "c1", ["I live in Paris and my sister Anna loves jazz."])
    entries = journal.pending(conn)
    assert len(entries) == 1  # the formation pass, as one changeset
    with transaction(conn):  # no derived change (a receipt-like write): nothing journaled
        conn.execute("INSERT INTO receipts (id, created_at, body) VALUES ('r', 0, '{}')")
    with transaction(conn):  # a change undone by a savepoint inside: nothing either
        with pytest.raises(RuntimeError), transaction(conn):
            conn.execute("UPDATE entities SET mentions = mentions + 5")
            raise RuntimeError("undone")
    assert len(journal.pending(conn)) == 1


def test_a_snapshot_holds_the_rows_changed_since_the_previous_one(store: MemoryStore) -> None:
    say(store, "c1", [f"I met Anna in Paris on day {i}." for i in range(30)])
    first = store.dream()
    say(store, "c2", ["Bob moved to Oslo."], start=100)
    second = store.dream()
    counted = store.snapshot(second.snapshot)
    assert counted is not None and counted.rows_changed == second.rows_changed
    assert second.rows_changed < first.rows_changed / 5  # one turn, not the 30 before
    assert counted.counts["changed"]["fragments"] == {"insert": 1}
    assert counted.counts["totals"]["fragments"] == 31
    assert store.history_state().journal_entries == 0


def test_rollback_restores_exactly_and_holds_what_it_removed(store: MemoryStore) -> None:
    say(store, "c1", ["I live in Paris and I work at Google."])
    s1 = store.dream().snapshot
    before = rows(store)
    say(store, "c2", ["I adopted a cat named Tom.", "Tom likes fish."], start=10)
    store.dream()
    say(store, "c3", ["Anna moved to Rome."], start=20)  # formed, not in a snapshot
    assert search(store, "cat Tom")
    restored = store.rollback(s1)
    assert rows(store) == before
    assert restored.checkpoint == s1 + 2 and restored.newly_held == 3
    assert search(store, "cat Tom") == [] and search(store, "Rome") == []
    assert search(store, "Paris") == ["I live in Paris and I work at Google."]
    stats = store.stats()
    assert (stats.log_messages, stats.held, stats.queued) == (4, 3, 0)
    assert {r.text for r in store.held_rows()} == {
        "I adopted a cat named Tom.", "Tom likes fish.", "Anna moved to Rome."
    }  # fmt: skip
    assert store.form_all() == 0  # held rows are not formed
    assert integrity_check(store.path) == "ok"


def test_held_rows_are_formed_by_the_next_cycle_and_new_ones_at_once(store: MemoryStore) -> None:
    say(store, "c1", ["I live in Paris."])
    s1 = store.dream().snapshot
    say(store, "c2", ["I adopted a cat named Tom."], start=10)
    store.dream()
    store.rollback(s1)
    say(store, "c4", ["I bought a red bike."], start=30)  # after the rollback: formed as usual
    assert search(store, "red bike") == ["I bought a red bike."]
    assert store.stats().held == 1
    report = store.dream()
    assert (report.released, report.formed, store.stats().held) == (1, 1, 0)
    assert search(store, "cat Tom") == ["I adopted a cat named Tom."]


def test_a_rollback_is_undone_by_rolling_back_to_the_snapshot_before_it(
    store: MemoryStore,
) -> None:
    say(store, "c1", ["I live in Paris."])
    s1 = store.dream().snapshot
    say(store, "c2", ["I adopted a cat named Tom.", "Anna loves jazz."], start=10)
    s2 = store.dream().snapshot
    at_s2 = rows(store)
    restored = store.rollback(s1)
    assert restored.snapshot == s2 + 1 and store.stats().held == 2
    undone = store.rollback(restored.snapshot - 1)
    assert rows(store) == at_s2
    assert (undone.formed_again, store.stats().held) == (2, 0)  # formed in S2: not held
    assert search(store, "cat Tom") == ["I adopted a cat named Tom."]
    assert store.form_all() == 0  # and not formed twice


def test_a_message_formed_between_a_rollback_and_its_undo_is_held_not_lost(
    store: MemoryStore,
) -> None:
    """The rollback frees the removed fragment's id; the message said next is formed under
    it, so the undo changes that row from one message's fragment to the other's (an
    update, not a delete and an insert): the new message must be held and the restored
    one neither held nor formed twice."""
    say(store, "c1", ["I live in Paris."])
    s1 = store.dream().snapshot
    say(store, "c2", ["I adopted a cat named Tom."], start=10)
    store.dream()
    restored = store.rollback(s1)
    say(store, "c3", ["I bought a red bike."], start=30)
    assert restored.undo is not None
    undone = store.rollback(restored.undo)
    assert (undone.newly_held, undone.formed_again) == (1, 1)
    assert [r.text for r in store.held_rows()] == ["I bought a red bike."]
    store.dream()
    texts = [t for (t,) in store._reader.execute("SELECT text FROM fragments ORDER BY id")]
    assert texts == ["I live in Paris.", "I adopted a cat named Tom.", "I bought a red bike."]
    assert search(store, "red bike") == ["I bought a red bike."]
    assert store.stats().held == 0


def test_cycles_and_rollbacks_are_told_with_counts_and_a_rollback_is_one_entry(
    tmp_path: Path, backends: Backends
) -> None:
    told: list[dict[str, Any]] = []
    store = MemoryStore(tmp_path / "t.db", backends=backends, events=told.append)
    try:
        say(store, "c1", ["I live in Paris."])
        s1 = store.dream().snapshot
        say(store, "c2", ["Actually, I moved to Rome."], start=10)  # formed, not in a snapshot
        restored = store.rollback(s1)
        assert restored.undo == restored.checkpoint == restored.snapshot - 1
        cycle, rollback = told
        assert cycle["event"] == "dream_done" and cycle["rows_changed"] > 0
        assert cycle["snapshot"] == s1 and "decisions" in cycle and cycle["formed"] == 0
        assert rollback["event"] == "rollback" and rollback["undo"] == restored.undo
        assert rollback["tables"]["fragments"] == 1 and rollback["newly_held"] == 1
        newest, checkpoint, first = store.snapshots()
        assert describe_snapshot(newest) == f"rollback to {s1} (undo: rollback to {checkpoint.id})"
        assert describe_snapshot(checkpoint) == f"formation, saved before rollback to {s1}"
        assert describe_snapshot(first) == "cycle 1 (demand)"
        assert undo_of(newest) == checkpoint.id and undo_of(first) is None
    finally:
        store.close()


def test_reform_forms_the_held_rows_at_once(store: MemoryStore) -> None:
    say(store, "c1", ["I live in Paris."])
    s1 = store.dream().snapshot
    say(store, "c2", ["I adopted a cat named Tom."], start=10)
    store.dream()
    store.rollback(s1)
    assert store.release_held() == 1
    assert store.form_all() == 1
    assert search(store, "cat Tom") == ["I adopted a cat named Tom."]


def test_unknown_snapshots_and_a_tampered_store_change_nothing(store: MemoryStore) -> None:
    say(store, "c1", ["I live in Paris."])
    s1 = store.dream().snapshot
    say(store, "c2", ["I adopted a cat named Tom."], start=10)
    store.dream()
    with pytest.raises(SnapshotNotFoundError):
        store.rollback(99)
    conn = store._forming
    with transaction(conn, journal=False):  # a change no changeset knows of
        conn.execute("UPDATE fragments SET lang = 'xx' WHERE text LIKE '%Tom%'")
    before = rows(store)
    head = store.history_state().head
    with pytest.raises(StorageError, match="not in the state this change expects"):
        store.rollback(s1)
    assert rows(store) == before and store.history_state().head == head
    assert store.stats().held == 0


@pytest.mark.parametrize(
    "wanted",
    [2**63, 2**70, -(2**70), 10**308, 1e308, 1.0, True, "1", None],
    ids=["2**63", "2**70", "-2**70", "10**308", "1e308", "1.0", "True", "'1'", "None"],
)
def test_an_id_that_is_no_snapshot_id_is_an_unknown_snapshot(
    store: MemoryStore, tmp_path: Path, wanted: Any
) -> None:
    """Past 64 bits SQLite cannot bind it (an ``OverflowError``); a float, a bool or a
    string it would compare as the integer 1 and roll back to snapshot 1."""
    say(store, "c1", ["I live in Paris."])
    s1 = store.dream().snapshot
    say(store, "c2", ["I adopted a cat named Tom."], start=10)
    store.dream()
    before, head = rows(store), store.history_state().head
    assert store.snapshot(wanted) is None
    with pytest.raises(SnapshotNotFoundError):
        store.rollback(wanted)
    with pytest.raises(SnapshotNotFoundError):
        store.diff(s1, wanted)
    with pytest.raises(SnapshotNotFoundError):
        store.materialize(wanted, tmp_path / "copy.db")
    assert rows(store) == before and store.history_state().head == head


def test_a_listing_bound_past_64_bits_lists_as_far_as_there_are_snapshots(
    store: MemoryStore,
) -> None:
    say(store, "c1", ["I live in Paris."])
    ids = [store.dream().snapshot, store.dream().snapshot]
    newest_first = ids[::-1]
    assert [s.id for s in store.snapshots(before=2**70)] == newest_first
    assert [s.id for s in store.snapshots(limit=2**70)] == newest_first
    assert store.snapshots(before=-(2**70)) == []


def test_the_diff_lists_entities_relations_contexts_with_sources(store: MemoryStore) -> None:
    say(store, "c1", ["I live in Paris."])
    s1 = store.dream().snapshot
    say(store, "c2", ["Actually, I moved to Lisbon last month."], start=10)
    s2 = store.dream().snapshot
    forward = store.diff(s1, s2)
    added = {r.label for r in forward.entities.added}
    assert "Lisbon" in added
    changed = {r.label: r for r in forward.relations.changed}
    paris = changed["Maya lives_in Paris"]
    assert paris.values["status"] == ["active", "superseded"]
    assert paris.sources[0].text == "I live in Paris."
    new = {r.label: r for r in forward.relations.added}
    assert new["Maya lives_in Lisbon"].sources[0].conversation_id == "c2"
    backward = store.diff(s2, s1)
    assert {r.label for r in backward.entities.removed} == added
    assert backward.relations.totals["removed"] == forward.relations.totals["added"]
    with pytest.raises(SnapshotNotFoundError):
        store.diff(s1, 42)


def test_a_diff_across_an_id_a_rollback_freed_lists_a_removal_and_an_addition(
    store: MemoryStore,
) -> None:
    """After a rollback the next rows formed take the ids it freed: between a snapshot
    of the rows removed and one of the rows formed, one id holds two unrelated rows, which
    the changeset holds as an update. The diff must not list them as one entity renamed
    (Tom "changed" into Zed) or one relation whose predicate and object changed."""
    say(store, "c1", ["I live in Paris."])
    s1 = store.dream().snapshot
    say(store, "c2", ["I adopted a cat named Tom. Tom likes Oslo."], start=10)
    s2 = store.dream().snapshot
    store.rollback(s1)
    say(store, "c3", ["I met Zed in Cairo. Zed likes Lima."], start=30)
    s3 = store.checkpoint(force=True)
    assert s3 is not None
    for first, second, gone, new in ((s3, s2, "Zed", "Tom"), (s2, s3, "Tom", "Zed")):
        found = store.diff(first, second)
        assert new in {r.label for r in found.entities.added}
        assert gone in {r.label for r in found.entities.removed}
        assert f"{new} likes" in " ".join(r.label for r in found.relations.added)
        for section in (found.entities, found.relations, found.contexts):
            assert [r.label for r in section.changed if "created_at" in r.values] == []


def test_a_copy_as_of_a_snapshot_leaves_the_store_alone(
    store: MemoryStore, tmp_path: Path, backends: Backends
) -> None:
    say(store, "c1", ["I live in Paris."])
    s1 = store.dream().snapshot
    at_s1 = rows(store)
    say(store, "c2", ["I adopted a cat named Tom."], start=10)
    store.dream()
    now = rows(store)
    store.materialize(s1, tmp_path / "copy.db")
    copy = MemoryStore(tmp_path / "copy.db", backends=backends)
    try:
        assert rows(copy) == at_s1 and search(copy, "cat Tom") == []
    finally:
        copy.close()
    assert rows(store) == now and search(store, "cat Tom")


def test_another_process_rolling_back_is_never_read_half(
    tmp_path: Path, backends: Backends
) -> None:
    """One store serves lookups with its graph; another (the command line) rolls back:
    lookups are refused until the graph is read again, then answer from the new state."""
    serving = MemoryStore(tmp_path / "t.db", backends=backends)
    other = MemoryStore(tmp_path / "t.db", backends=backends)
    try:
        say(serving, "c1", ["I live in Paris."])
        s1 = serving.dream().snapshot
        say(serving, "c2", ["I adopted a cat named Tom."], start=10)
        serving.dream()
        serving.warm_graph()
        assert serving.recall_area("cat Tom", limit=3, budget_tokens=300).hits
        other.rollback(s1)
        assert serving.generation_moved()
        with pytest.raises(MemoryChangedError):
            serving.recall_area("cat Tom", limit=3, budget_tokens=300)
        assert serving.check_generation()
        hits = serving.recall_area("cat Tom", limit=3, budget_tokens=300).hits
        assert [h.text for h in hits] == ["I live in Paris."]
    finally:
        other.close()
        serving.close()


def test_a_former_that_kept_caches_reloads_them_after_a_merge(
    tmp_path: Path, backends: Backends
) -> None:
    """A formation worker's caches still hold the entity a cycle merged away: its next
    pass reads them again instead of linking to a deleted entity."""
    worker = MemoryStore(tmp_path / "t.db", backends=backends)
    proxy = MemoryStore(tmp_path / "t.db", backends=backends)
    try:
        say(worker, "c1", ["I met Bob at the climbing gym.", "Bob is a great climber."])
        say(worker, "c2", ["Robert, also known as Bob, fixed my bike."], start=10)
        report = proxy.dream()
        assert report.totals["merge_entities"] == 1
        say(worker, "c3", ["Bob called me today."], start=20)  # stale caches: reloaded
        bobs = proxy.entities(name="bob")
        assert len(bobs) == 1 and bobs[0].mentions >= 4
    finally:
        proxy.close()
        worker.close()


def test_old_snapshots_are_pruned(tmp_path: Path, backends: Backends) -> None:
    store = MemoryStore(
        tmp_path / "t.db", backends=backends, dream=DreamConfig(keep_snapshots=2)
    )
    try:
        for i in range(4):
            say(store, f"c{i}", [f"I visited city number {i}."], start=10 * i)
            store.dream()
        assert [s.id for s in store.snapshots()] == [4, 3]
        with pytest.raises(SnapshotNotFoundError):
            store.rollback(2)
        store.rollback(3)
        assert "I visited city number 3." not in search(store, "city number 3")
    finally:
        store.close()


def test_history_bookkeeping_is_never_rolled_back(store: MemoryStore) -> None:
    say(store, "c1", ["I live in Paris."])
    s1 = store.dream().snapshot
    say(store, "c2", ["I adopted a cat named Tom."], start=10)
    store.dream()
    generation = store.history_state().generation
    store.rollback(s1)
    state = history_rows.state(store._reader)
    assert state.generation == generation + 1 and state.last_rollback_at is not None
    assert len(store.snapshots()) == 3  # the rollback is a snapshot; none was removed


def test_a_long_journal_is_folded_into_a_checkpoint(tmp_path: Path, backends: Backends) -> None:
    store = MemoryStore(
        tmp_path / "t.db", backends=backends, dream=DreamConfig(journal_entries=2)
    )
    try:
        for i in range(3):
            say(store, f"c{i}", [f"I visited city number {i}."], start=10 * i)
        assert store.history_state().journal_entries == 3
        snapshot = store.checkpoint()
        assert snapshot == 1 and store.history_state().journal_entries == 0
        assert store.checkpoint() is None  # nothing to fold
        say(store, "c9", ["I visited city number 9."], start=90)
        assert store.checkpoint() is None  # within the bounds
        assert store.checkpoint(force=True) == 2
        listed = store.snapshots()
        assert [s.kind for s in listed] == ["checkpoint", "checkpoint"]
        assert store.history_state().generation == 0  # memory itself did not change
        store.rollback(1)
        assert "I visited city number 9." not in search(store, "city number 9")
    finally:
        store.close()
