"""A question is encoded once: its vector is kept with its logged turn for formation.

Real MiniLM (onnx-int8, the default), real SQLite files in a temp folder.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memory_core import LogMessage, MemoryStore
from memory_core.formation import Backends
from memory_core.log.asked import AskedQuestions
from memory_core.storage.tables import question_vectors

T0 = 1_700_000_000.0


def _db(store: MemoryStore, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(f"file:{store.path}?mode=ro", uri=True) as db:
        return list(db.execute(sql))


def _spy(backends: Backends, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the formation encoder is asked to encode from now on."""
    seen: list[str] = []
    encode = backends.encoder.encode

    def spy(texts: Sequence[str]) -> np.ndarray:
        seen.extend(texts)
        return encode(texts)

    monkeypatch.setattr(backends.encoder, "encode", spy)
    return seen


def _remembered(tmp_path: Path, backends: Backends) -> MemoryStore:
    store = MemoryStore(tmp_path / "t.db", backends=backends)
    store.append([LogMessage({"role": "user", "content": "Ana keeps bees in Porto."}, T0)])
    store.form_all()
    store.warm_graph()
    return store


def test_a_question_is_encoded_once_and_its_turn_stores_the_same_vector(
    tmp_path: Path, backends: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _remembered(tmp_path, backends)
    question = "Where does my sister Ana keep her bees?"
    store.recall_area(question, limit=4, budget_tokens=300)
    encoded = _spy(backends, monkeypatch)
    store.append(
        [
            LogMessage({"role": "user", "content": question}, T0 + 60),
            LogMessage({"role": "assistant", "content": "In Porto, on the roof."}, T0 + 61),
        ]
    )
    assert len(_db(store, "SELECT key FROM question_vectors")) == 1  # logged with the turn
    store.form_all()
    assert "In Porto, on the roof." in encoded  # (mentions are encoded too)
    assert question not in encoded  # the question was not encoded again
    ((blob,),) = _db(
        store,
        "SELECT v.vector FROM fragment_vectors v JOIN fragments f ON f.id = v.fragment_id"
        f" WHERE f.text = '{question}'",
    )
    monkeypatch.undo()
    assert isinstance(blob, bytes)
    stored = np.frombuffer(blob, np.float32)
    assert np.array_equal(stored, backends.encoder.encode([question])[0])  # bit for bit
    assert _db(store, "SELECT COUNT(*) FROM question_vectors") == [(0,)]  # taken, dropped
    store.close()


def test_a_turn_not_logged_as_asked_is_encoded_and_a_foreign_row_is_ignored(
    tmp_path: Path, backends: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _remembered(tmp_path, backends)
    store.recall_area("Who keeps bees?", limit=4, budget_tokens=300)
    other = "Who keeps bees? Asked again, differently."
    key = backends.encoder.reuse_key(other)
    assert key is not None
    store._writer.execute(  # a row of the wrong size under the text's own key
        "INSERT INTO question_vectors VALUES (?, ?, ?)", (key, b"\x00" * 12, T0)
    )
    encoded = _spy(backends, monkeypatch)
    store.append([LogMessage({"role": "user", "content": other}, T0 + 60)])
    store.form_all()
    assert other in encoded
    assert _db(store, "SELECT COUNT(*) FROM question_vectors") == [(0,)]
    store.close()


def test_kept_vectors_are_dropped_when_used_or_old(tmp_path: Path, backends: Backends) -> None:
    store = MemoryStore(tmp_path / "t.db", backends=backends)
    with store._storage.write_lock:
        store._writer.execute("BEGIN IMMEDIATE")
        question_vectors.keep(store._writer, [("a", b"1"), ("b", b"2"), ("c", b"3")], T0)
        question_vectors.keep(store._writer, [("d", b"4")], T0 + question_vectors.KEEP_S)
        question_vectors.drop(store._writer, ["a"], older_than=T0 + 1)
        store._writer.execute("COMMIT")
    assert question_vectors.find(store._writer, ["a", "b", "d"]) == {"d": b"4"}
    store.close()


def test_asked_questions_are_bounded_and_taken_once() -> None:
    asked = AskedQuestions(limit=2)
    vector = np.ones(3, np.float32)
    for text in ("one", "two", "three"):
        asked.remember(text, f"k-{text}", vector)
    asked.remember("no key", None, vector)  # an encoder without reuse keeps nothing
    messages = [LogMessage({"role": "user", "content": t}, T0) for t in ("one", "three", "no key")]
    assert asked.taken(messages) == [("k-three", vector.tobytes())]  # "one" was forgotten
    assert asked.taken(messages) == []
    parts = [{"type": "text", "text": "two"}]
    assert asked.taken([LogMessage({"role": "user", "content": parts}, T0)]) == []


def _question_spy(backends: Backends, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every question the encoder is asked to encode from now on."""
    seen: list[str] = []
    encode = backends.encoder.encode_question

    def spy(text: str) -> np.ndarray:
        seen.append(text)
        return encode(text)

    monkeypatch.setattr(backends.encoder, "encode_question", spy)
    return seen


def test_an_encoding_started_ahead_is_the_one_the_lookup_takes(
    tmp_path: Path, backends: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _remembered(tmp_path, backends)
    try:
        fresh = MemoryStore(tmp_path / "fresh.db", backends=backends)
        # An encoder not yet loaded and checked, or a strategy that reads no vector:
        # nothing starts (the loop that asks must never wait for a model to load).
        assert fresh.encode_ahead("area", "Where are the bees?") is False
        fresh.close()
        store.recall_area("warm the encoder", limit=4, budget_tokens=300)
        asked = _question_spy(backends, monkeypatch)
        question = "Where does my sister Ana keep her bees?"
        assert store.encode_ahead("bm25", question) is False
        assert store.encode_ahead("area", question) is True
        assert store.encode_ahead("area", question) is True  # started once
        found = store.recall_area(question, limit=4, budget_tokens=300)
        assert asked == [question]  # the lookup took the encoding started ahead
        assert found.area is not None and "encode_lead_ms" in found.area["timings_ms"]
        assert "Porto" in found.context.text
        store.recall_area(question, limit=4, budget_tokens=300)
        assert asked == [question, question]  # taken once: the next lookup encodes again
    finally:
        store.close()
    assert store.encode_ahead("area", "asked after close") is False  # nothing, no error


def test_encodings_started_ahead_and_never_taken_are_bounded(
    tmp_path: Path, backends: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_core.store import memory_store

    monkeypatch.setattr(memory_store, "_AHEAD", 3)
    store = _remembered(tmp_path, backends)
    try:
        store.recall_area("warm the encoder", limit=4, budget_tokens=300)
        for i in range(10):  # lookups that were then skipped: never taken
            assert store.encode_ahead("area", f"question number {i} about bees")
        assert len(store._ahead) == 3
        store._encoding.submit(lambda: None).result()  # all ten encoded by now
        asked = _question_spy(backends, monkeypatch)
        store.recall_area("question number 9 about bees", limit=4, budget_tokens=300)
        assert asked == []  # still kept, and taken
        store.recall_area("question number 0 about bees", limit=4, budget_tokens=300)
        assert asked == ["question number 0 about bees"]  # dropped: encoded again
    finally:
        store.close()
