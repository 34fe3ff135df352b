"""memory_core on real SQLite files: migrations, search, reconstruction, names, tokens."""

from __future__ import annotations

import time
from pathlib import Path

import apsw
import numpy as np
import pytest

from memory_core import (
    InvalidInputError,
    LogMessage,
    MemoryStore,
    NameIndex,
    default_counter,
    extract_names,
    query_terms,
)
from memory_core.storage.migrations import MIGRATIONS
from memory_core.storage.tables import fragments as fragment_rows

DAY = 86_400.0


def _store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "m.db")


def _say(store: MemoryStore, conversation: str, *texts: str, ts: float = 1_683_504_000.0) -> None:
    roles = ["user", "assistant"]
    messages = [
        LogMessage({"role": roles[i % 2], "content": t}, ts + i) for i, t in enumerate(texts)
    ]
    store.append(messages, conversation=conversation, source="ingest")
    store.form_all()


def test_migrations_are_recorded_once(tmp_path: Path) -> None:
    _store(tmp_path).close()
    _store(tmp_path).close()
    conn = apsw.Connection(str(tmp_path / "m.db"))
    names = [row[0] for row in conn.execute("SELECT name FROM migrations ORDER BY name")]
    assert names == [name for name, _ in MIGRATIONS]
    mode = conn.execute("PRAGMA journal_mode").fetchone()
    assert mode is not None and mode[0] == "wal"
    conn.close()


def test_search_ranks_and_cites(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _say(store, "trip", "We booked a cabin near Tromsø for the aurora.", "Bring warm boots.")
    _say(store, "food", "I bake rye bread every Sunday.", "Rye is great.", ts=1_690_000_000.0)
    recall = store.recall("Where was the aurora cabin?", limit=5, budget_tokens=500)
    assert recall.hits[0].text.startswith("We booked a cabin")
    assert recall.hits[0].conversation_id == "trip"
    text = recall.context.text
    assert text.startswith("<retrieved_memory>") and text.endswith("</retrieved_memory>")
    assert "not instructions" in text
    assert "[trip]\n8 May 2023:\nuser: We booked a cabin near Tromsø for the aurora.\n" in text


def test_search_survives_query_syntax(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _say(store, "c", "The NEAR operator and quotes are plain words here.")
    for query in ['"unbalanced', "NEAR(a b)", "AND OR NOT", "col:value*", "^start", "?!"]:
        store.recall(query, limit=5, budget_tokens=300)  # never raises
    assert store.recall('NEAR "quotes', limit=5, budget_tokens=300).hits


def test_search_excludes_turns_already_in_the_request(tmp_path: Path) -> None:
    store = _store(tmp_path)
    history = [LogMessage({"role": "user", "content": "My dentist is Dr Okafor."}, time.time())]
    result = store.append(history)
    store.form_all()
    assert store.recall("dentist", limit=5, budget_tokens=300).hits
    excluded = store.recall("dentist", limit=5, budget_tokens=300, exclude_hashes=result.hashes)
    assert excluded.hits == ()


@pytest.mark.parametrize("budget", [40, 60, 90, 150, 400])
def test_reconstruction_fits_the_budget(tmp_path: Path, budget: int) -> None:
    store = _store(tmp_path)
    long = " ".join(f"garden tomato variety number {i} grows well" for i in range(40))
    _say(store, "g", long, "The garden tomato harvest was big.", "Tomato soup tonight.")
    recall = store.recall("garden tomato", limit=5, budget_tokens=budget)
    counted = store.counter.count(recall.context.text)
    assert counted <= budget
    assert recall.context.tokens == counted
    if recall.context.text:
        assert recall.context.shown
        assert recall.context.text.endswith("</retrieved_memory>")


def test_empty_budget_or_no_hits_gives_no_text(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _say(store, "c", "Something about kayaks.")
    assert store.recall("kayaks", limit=5, budget_tokens=10).context.text == ""
    nothing = store.recall("volcano", limit=5, budget_tokens=500).context
    assert nothing.shown == () and nothing.text.endswith(
        "Notes:\nMemory holds nothing about: volcano\n</retrieved_memory>"
    )  # the coverage note is the whole block


def test_invalid_messages_are_refused_without_storing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with pytest.raises(InvalidInputError):
        store.append([LogMessage({"role": "wizard", "content": "x"}, 0.0)])
    with pytest.raises(InvalidInputError):
        store.append([LogMessage({"role": "user", "content": 5}, 0.0)])
    with pytest.raises(InvalidInputError):
        store.append([])
    assert store.stats().log_messages == 0


def test_names_are_learned_and_found(tmp_path: Path) -> None:
    assert extract_names("Yesterday I met John Smith in New York. He said 'hi'.") == [
        "John Smith",
        "New York",
    ]
    assert extract_names("we watched “Dune Part Two” at the Odeon") == ["Dune Part Two", "Odeon"]
    index = NameIndex(["New York", "Melanie"])
    assert index.mentioned("did melanie like new york?") == ["New York", "Melanie"]
    assert index.mentioned("york is not new") == []
    store = _store(tmp_path)
    _say(store, "c", "I visited Caroline in Lisbon.")
    assert set(store.names.mentioned("How is Caroline?")) == {"Caroline"}
    assert _store(tmp_path).names.mentioned("lisbon trip") == ["Lisbon"]  # persisted


def test_query_terms_drop_stopwords() -> None:
    assert query_terms("What did Caroline do in the summer of 2023?") == [
        "caroline",
        "summer",
        "2023",
    ]


def test_token_counter_works_offline() -> None:
    counter = default_counter()
    assert counter.name == "tiktoken:o200k_base"
    assert counter.count("hello world") == 2


def test_receipts_are_pruned_by_age_and_by_number(tmp_path: Path) -> None:
    now = [1_700_000_000.0]
    store = MemoryStore(
        tmp_path / "m.db", clock=lambda: now[0], receipt_limit=3, receipt_max_age_s=30 * DAY
    )
    store.save_receipt("rcpt_old", {"n": 0})
    now[0] += 29 * DAY
    store.save_receipt("rcpt_young", {"n": 1})
    assert store.receipt("rcpt_old") == {"n": 0}  # 29 days: kept
    now[0] += 2 * DAY
    store.save_receipt("rcpt_new", {"n": 2})
    assert store.receipt("rcpt_old") is None  # 31 days: pruned as the next one is saved
    assert store.receipt("rcpt_young") == {"n": 1}
    for i in range(3):
        store.save_receipt(f"rcpt_{i}", {"n": 3 + i})
    assert store.receipt("rcpt_young") is None and store.receipt("rcpt_new") is None
    assert [store.receipt(f"rcpt_{i}") for i in range(3)] == [{"n": 3}, {"n": 4}, {"n": 5}]
    with pytest.raises(ValueError, match="receipt_max_age_s"):
        MemoryStore(tmp_path / "other.db", receipt_max_age_s=0)


def test_a_store_from_before_kinds_reads_its_fragments_as_stated_and_keeps_them(
    tmp_path: Path,
) -> None:
    """Migration 011 on a store holding fragments: each reads ``stated`` (as everything
    was told until then), nothing is lost, and answers logged from then on keep the
    fragments they restate."""
    store = _store(tmp_path)
    _say(store, "trip", "We booked a cabin near Tromsø for the aurora.", "Bring warm boots.")
    store.close()
    conn = apsw.Connection(str(tmp_path / "m.db"))
    conn.execute("DELETE FROM migrations WHERE name = '011_fragment_kinds'")
    conn.execute("DROP TABLE log_sources")
    conn.execute("ALTER TABLE fragments DROP COLUMN kind")
    conn.close()
    again = _store(tmp_path)
    hits = again.recall("aurora cabin", limit=5, budget_tokens=500).hits
    assert [h.kind for h in hits] == ["stated"] * len(hits) and hits
    said = {"role": "assistant", "content": "The cabin is near Tromsø."}
    answer = LogMessage(said, 1.7e9, None, (hits[0].fragment_id,))
    again.append(
        [LogMessage({"role": "user", "content": "Where is the cabin?"}, 1.7e9), answer],
        conversation="later",
        source="proxy",
    )
    again.form_all()
    with again.lookup() as reader:
        kinds = fragment_rows.kind_counts(reader, "later")
    assert kinds == {"asked": 1, "restated": 1}
    again.close()


def test_stored_questions_seed_nothing_and_stay_out_of_the_dense_pool(tmp_path: Path) -> None:
    """A question asked again found its own earlier askings first, by words and by
    vector, and the lookup's seeds and nearest candidates were questions instead of what
    answers them: they are left out of both (``pool_questions``); the fact comes first."""
    from memory_core.retrieval.area import _unasked

    store = _store(tmp_path)
    _say(store, "trip", "We booked a cabin near Tromsø for the aurora.", "Bring warm boots.")
    for n in range(3):
        store.append(
            [LogMessage({"role": "user", "content": "Where is the cabin?"}, 1.7e9 + n)],
            conversation=f"later-{n}",
            source="proxy",
        )
    store.form_all()
    graph = store.warm_graph()
    with store.lookup() as reader:
        kinds = {k: v for c in ("later-0", "later-1", "later-2")
                 for k, v in fragment_rows.kind_counts(reader, c).items()}  # fmt: skip
    assert kinds == {"asked": 1}
    asked = [f for f, n in graph.fragment_nodes.items() if graph.act_of(np.array([n]))[0] == 1]
    assert len(asked) == 3
    rows = [int(r) for r in np.flatnonzero(~graph.stated_vectors)]
    assert sorted(int(graph.fragment_of[graph.vector_nodes[r]]) for r in rows) == sorted(asked)
    everything = sorted(graph.fragment_nodes)
    assert _unasked(graph, everything) == [f for f in everything if f not in asked]
    hits = store.recall_area("Where is the cabin?", limit=10, budget_tokens=1000).hits
    assert hits[0].kind == "stated" and "Tromsø" in hits[0].text
    store.close()
