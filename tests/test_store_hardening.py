"""memory_core under hostile input and load (issue 9): odd stored timestamps, histories
longer than SQLite's variable limit, concurrent writers, private files, bounded receipts.

Everything runs on real SQLite files in a temp folder; odd rows are written with plain
SQL, as an older version or a hand edit could have left them.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import numpy.typing as npt
import pytest

from memory_core import (
    MAX_TIMESTAMP,
    MIN_TIMESTAMP,
    InvalidInputError,
    LogMessage,
    MemoryStore,
    StorageBusyError,
    check_timestamp,
)
from memory_core.formation import Backends, FormationConfig, build_backends
from memory_core.log.messages import stored_timestamp
from memory_core.retrieval.bm25 import fetch_hits
from memory_core.storage import connect, retry_busy, transaction
from memory_core.store.inspection import SOURCE_CHARS
from memory_core.text.question import QUESTION_CHARS, question_excerpt

MAY_2023 = 1_683_504_000.0
SQLITE_MAX_VARIABLES = 32_766


@pytest.fixture
def store(tmp_path: Path, backends: Backends) -> Iterator[MemoryStore]:
    opened = MemoryStore(tmp_path / "m.db", backends=backends)
    yield opened
    opened.close()


def _say(store: MemoryStore, conversation: str, *texts: str, ts: float = MAY_2023) -> None:
    roles = ["user", "assistant"]
    messages = [
        LogMessage({"role": roles[i % 2], "content": t}, ts + i) for i, t in enumerate(texts)
    ]
    store.append(messages, conversation=conversation, source="ingest")


def _raw(store: MemoryStore) -> apsw.Connection:
    """A plain connection to the store's file, as another program would open it."""
    conn = apsw.Connection(str(store.path))
    conn.set_busy_timeout(10_000)
    return conn


def _odd_log_row(conn: apsw.Connection, ts: object, text: str, *, queued: bool) -> int:
    """A log row with timestamp ``ts`` (INSERT is allowed on the append-only log)."""
    conn.execute(
        "INSERT INTO log (hash, parent_hash, conversation_id, position, role, name, ext_id,"
        " message, text, ts, logged_at, source) VALUES (?, NULL, 'odd', 0, 'user', 'Zed',"
        " NULL, '{}', ?, ?, 0, 'hand')",
        (f"odd-{text}", text, ts),
    )
    log_id = conn.last_insert_rowid()
    if queued:
        conn.execute("INSERT INTO queue (log_id, queued_at) VALUES (?, 0)", (log_id,))
    return log_id


def _strict_json(value: Any) -> str:
    return json.dumps(value, allow_nan=False, default=str)


# -- timestamps -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [math.nan, math.inf, -math.inf, 1e308, -1e12, 10**400, MAX_TIMESTAMP, True, "2023", None],
)
def test_check_timestamp_rejects_what_no_reader_could_use(bad: object) -> None:
    with pytest.raises(InvalidInputError, match=r"messages\[3\]\.timestamp"):
        check_timestamp(bad, "messages[3].timestamp")


def test_check_timestamp_accepts_the_documented_range() -> None:
    assert check_timestamp(MIN_TIMESTAMP, "t") == MIN_TIMESTAMP
    assert check_timestamp(MAY_2023, "t") == MAY_2023
    assert check_timestamp(0, "t") == 0.0
    assert check_timestamp(MAX_TIMESTAMP - 1, "t") == MAX_TIMESTAMP - 1


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 1e308, -1e12, None, "x", b"1"])
def test_stored_timestamp_reads_odd_values_as_unknown(bad: object) -> None:
    assert stored_timestamp(bad) is None
    assert stored_timestamp(MAY_2023) == MAY_2023


@pytest.mark.parametrize("bad", [math.nan, math.inf, 1e308, -1e12])
def test_append_refuses_an_odd_timestamp_naming_the_message(store: MemoryStore, bad: float) -> None:
    messages = [
        LogMessage({"role": "user", "content": "fine"}, MAY_2023),
        LogMessage({"role": "assistant", "content": "odd"}, bad),
    ]
    with pytest.raises(InvalidInputError, match=r"messages\[1\]\.timestamp"):
        store.append(messages, conversation="c")
    assert store.stats().log_messages == 0


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "Where did Ana go \ud800 last May?"},
        {"role": "user", "content": [{"type": "text", "text": "half a pair \udfff"}]},
        {"role": "user", "content": "fine", "name": "\ud83d"},
        {"role": "user", "content": "fine", "metadata": {"note": "\udc00"}},  # not hashed
    ],
)
def test_append_refuses_a_lone_surrogate_naming_the_message(
    store: MemoryStore, message: dict[str, object]
) -> None:
    """Found trying it hostile: the library's append raised UnicodeEncodeError from the
    conversation digest (the proxy refuses such a body with a 400 before it gets here)."""
    messages = [
        LogMessage({"role": "user", "content": "fine"}, MAY_2023),
        LogMessage(message, MAY_2023 + 1),
    ]
    with pytest.raises(InvalidInputError, match=r"messages\[1\] contains a lone UTF-16"):
        store.append(messages, conversation="c")
    assert store.stats().log_messages == 0


@pytest.mark.parametrize("odd", [math.inf, -math.inf, 1e308, -1e12, "yesterday"])
def test_odd_stored_timestamps_break_no_reader_and_no_later_ingest(
    store: MemoryStore, backends: Backends, odd: float
) -> None:
    """An odd log row is formed, then every reader, a later append and its formation
    work; before the fix a stored inf made every later formation (hence every ingest)
    fail in the graph refresh, and any odd date made recall fail in reconstruction."""
    _say(store, "a", "Alice flew to Paris with Bob in May.", "Paris in spring is lovely.")
    store.form_all()
    store.warm_graph()  # formation now appends to the graph after every pass
    conn = _raw(store)
    _odd_log_row(conn, odd, "Alice and Bob visited Paris again.", queued=True)
    conn.close()
    assert store.form_all() == 1
    _exercise_every_reader(store)
    _say(store, "b", "Bob booked a train to Lyon.", ts=MAY_2023 + 86_400)
    assert store.form_all() == 1
    assert "Lyon" in store.recall("Lyon train", limit=5, budget_tokens=300).context.text
    fresh = MemoryStore(store.path, backends=backends)
    try:
        _exercise_every_reader(fresh)  # the graph read from scratch
    finally:
        fresh.close()


def test_text_and_out_of_range_times_in_formed_rows_break_no_reader(store: MemoryStore) -> None:
    """Rows formation never writes (text in REAL columns) but an older file may hold."""
    _say(store, "a", "Alice flew to Paris with Bob in May.", "Paris in spring is lovely.")
    store.form_all()
    store.warm_graph()
    conn = _raw(store)
    log_id = _odd_log_row(conn, "soon", "Alice took Bob to Paris by night.", queued=False)
    conn.execute(
        "INSERT INTO fragments (log_id, conversation_id, role, speaker, text, canonical, ts,"
        " created_at) VALUES (?, 'odd', 'user', 'Zed', ?, ?, 'soon', 'later')",
        (log_id, "Alice took Bob to Paris by night.", "Alice took Bob to Paris by night."),
    )
    fragment_id = conn.last_insert_rowid()
    conn.execute(
        "INSERT INTO fragments_fts (rowid, speaker, canonical) VALUES (?, 'Zed', ?)",
        (fragment_id, "Alice took Bob to Paris by night."),
    )
    conn.execute(
        "INSERT INTO contexts (label, centroid, size, first_ts, last_ts, created_at,"
        " interpretation) SELECT 'odd', centroid, 0, 'then', 1e999, 'now', 'hand' FROM contexts"
    )
    conn.execute(
        "INSERT INTO entities (name, label, first_seen, last_seen, created_at, interpretation)"
        " VALUES ('Odd', 'PER', 'then', -1e999, 1e308, 'hand')"
    )
    conn.close()
    store.form_all()
    _exercise_every_reader(store)
    recall = store.recall("Paris night", limit=5, budget_tokens=400)
    assert re.search(  # numbered: the block also states what a fragment said
        r"date unknown:\n(\[\d+\] )?Zed: Alice took Bob to Paris by night\.", recall.context.text
    )


def _exercise_every_reader(store: MemoryStore) -> None:
    """Recall (BM25 and area), area explanation, inspection, stats and receipts."""
    bm25 = store.recall("Paris Bob", limit=5, budget_tokens=400)
    area = store.recall_area("Paris Bob", limit=5, budget_tokens=400)
    assert bm25.hits and area.hits
    assert "date unknown:" in bm25.context.text
    _strict_json(store.explain_area("Paris Bob", limit=5))
    _strict_json([store.entities(), store.contexts(), store.relations()])
    assert store.stats().log_messages >= 3
    hits = [{"fragment_id": h.fragment_id, "ts": h.ts} for h in area.hits]
    store.save_receipt("r-odd", {"hits": hits, "text": area.context.text})
    _strict_json(store.receipt("r-odd"))


# -- long histories -----------------------------------------------------------------------


def _history(n: int, prefix: str = "turn") -> list[LogMessage]:
    roles = ["user", "assistant"]
    return [
        LogMessage({"role": roles[i % 2], "content": f"{prefix} {i}"}, MAY_2023 + i)
        for i in range(n)
    ]


def test_a_history_longer_than_the_sql_variable_limit_is_stored_and_branched(
    tmp_path: Path,
) -> None:
    store = MemoryStore(tmp_path / "m.db")
    try:
        n = SQLITE_MAX_VARIABLES + 1_000
        history = _history(n)
        first = store.append(history, conversation="long")
        assert first.appended == n
        again = store.append([*history, *_history(1, "next")], conversation="long")
        assert (again.appended, again.already_stored) == (1, n)
        edited = [history[0], LogMessage({"role": "assistant", "content": "edited"}, MAY_2023)]
        branch = store.append(edited, conversation="long")
        assert branch.superseded == n  # history[1:] and the turn appended after it
        back = store.append([*history, *_history(1, "next")], conversation="long")
        assert back.restored == n
        assert store.stats().log_messages == n + 2
    finally:
        store.close()


def test_recall_excludes_more_hashes_than_sql_variables(store: MemoryStore) -> None:
    _say(store, "a", "The lighthouse keeper painted the door red.")
    store.form_all()
    excluded = [f"{i:064x}" for i in range(SQLITE_MAX_VARIABLES + 1_000)]
    for recall in (store.recall, store.recall_area):
        found = recall("lighthouse door", limit=5, budget_tokens=300, exclude_hashes=excluded)
        assert found.hits
    ids = list(range(1, SQLITE_MAX_VARIABLES + 1_000))
    with store._read_lock:
        assert [h.fragment_id for h in fetch_hits(store._reader, ids)] == [1]


# -- transactions and contention ------------------------------------------------------------


def _second_connection(path: Path) -> apsw.Connection:
    conn = connect(path)
    conn.set_busy_timeout(0)
    return conn


def test_a_write_transaction_takes_the_write_lock_before_it_reads(tmp_path: Path) -> None:
    """Deferred, a transaction that read first failed at once (SQLITE_BUSY_SNAPSHOT) when
    the other writing connection committed in between."""
    one, two = connect(tmp_path / "t.db"), _second_connection(tmp_path / "t.db")
    one.execute("CREATE TABLE t (x INTEGER)")
    with transaction(one):
        one.execute("SELECT count(*) FROM t").fetchall()  # a read only, so far
        with pytest.raises(StorageBusyError), transaction(two):
            two.execute("INSERT INTO t VALUES (1)")
        one.execute("INSERT INTO t VALUES (2)")
    assert one.execute("SELECT x FROM t").fetchall() == [(2,)]


def test_nested_transactions_are_savepoints_inside_an_immediate_one(tmp_path: Path) -> None:
    conn, other = connect(tmp_path / "t.db"), _second_connection(tmp_path / "t.db")
    conn.execute("CREATE TABLE t (x INTEGER)")
    with transaction(conn):
        with pytest.raises(ValueError), transaction(conn):
            conn.execute("INSERT INTO t VALUES (2)")
            raise ValueError("inner only")
        with transaction(conn):
            with pytest.raises(StorageBusyError), transaction(other):
                pass  # the outermost transaction holds the write lock from its start
            conn.execute("INSERT INTO t VALUES (3)")
    assert conn.execute("SELECT x FROM t ORDER BY x").fetchall() == [(3,)]
    assert not conn.in_transaction
    with pytest.raises(RuntimeError), transaction(conn):
        conn.execute("INSERT INTO t VALUES (4)")
        raise RuntimeError("outer")
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)


def test_retry_busy_waits_out_a_lock_held_past_the_busy_timeout(tmp_path: Path) -> None:
    holder, writer = connect(tmp_path / "t.db"), _second_connection(tmp_path / "t.db")
    holder.execute("CREATE TABLE t (x INTEGER)")
    holder.execute("BEGIN IMMEDIATE")
    threading.Timer(0.3, lambda: holder.execute("COMMIT")).start()

    def write() -> None:
        with transaction(writer):
            writer.execute("INSERT INTO t VALUES (1)")

    retry_busy(write, attempts=10, first_delay_s=0.05)
    assert writer.execute("SELECT count(*) FROM t").fetchone() == (1,)


def test_retry_busy_gives_up_after_its_attempts() -> None:
    calls: list[float] = []

    def busy() -> None:
        raise StorageBusyError("locked")

    with pytest.raises(StorageBusyError):
        retry_busy(busy, attempts=4, first_delay_s=0.01, sleep=calls.append)
    assert calls == [0.01, 0.02, 0.04]


class _BagOfWords:
    """A fast encoder: formation then commits often, which is what contention needs."""

    name = "bag-of-words"
    dimension = 384

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                vectors[row, sum(map(ord, word)) % self.dimension] += 1
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        normalised: npt.NDArray[np.float32] = vectors / np.maximum(norms, 1e-9)
        return normalised


def test_every_append_is_stored_once_under_concurrent_formation_and_receipts(
    tmp_path: Path,
) -> None:
    """Six appending threads (one conversation each), formation and receipts on one
    store for a few seconds: no exception, every turn logged exactly once. Before the
    fix, an append whose first read preceded a formation commit failed at once with
    "database is locked" (every client failed within its first few appends)."""
    store = MemoryStore(
        tmp_path / "m.db", backends=build_backends(FormationConfig(), _BagOfWords())
    )
    stop, chatting = threading.Event(), threading.Semaphore(0)
    errors: list[BaseException] = []
    sent: dict[str, int] = {}

    def guarded(work: Callable[[], None]) -> threading.Thread:
        def run() -> None:
            try:
                work()
            except BaseException as exc:
                errors.append(exc)

        return threading.Thread(target=run)

    def chat(conversation: str) -> None:
        history: list[LogMessage] = []
        deadline = time.monotonic() + 3.0
        try:
            while len(history) < 300 and time.monotonic() < deadline:
                turn = len(history)
                history += [
                    LogMessage({"role": "user", "content": f"{conversation} asks {turn}"}, 1e9),
                    LogMessage({"role": "assistant", "content": f"answer {turn}"}, 1e9),
                ]
                assert store.append(history, conversation=conversation).appended == 2
                sent[conversation] = len(history)
        finally:
            chatting.release()

    def form() -> None:
        while not stop.is_set():
            store.form_all()

    def receipts() -> None:
        n = 0
        while not stop.is_set():
            store.save_receipt(f"r{n}", {"n": n})
            n += 1

    chats = [guarded(functools.partial(chat, f"conv{i}")) for i in range(6)]
    others = [guarded(form), guarded(receipts)]
    for thread in chats + others:
        thread.start()
    for _ in chats:
        chatting.acquire()
    stop.set()
    for thread in chats + others:
        thread.join(60)
    try:
        assert errors == []
        assert len(sent) == 6
        with store._read_lock:
            for conversation, count in sent.items():
                row = store._reader.execute(
                    "SELECT count(*), count(DISTINCT hash), max(position) FROM log"
                    " WHERE conversation_id = ?",
                    (conversation,),
                ).fetchone()
                assert row == (count, count, count - 1)
        assert store.form_all() >= 0 and store.stats().queued == 0
    finally:
        store.close()


# -- files and receipts -----------------------------------------------------------------------


def test_database_files_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        store = MemoryStore(tmp_path / "tenants" / "t1.db")
        store.append(_history(2))
        store.save_receipt("r", {"x": 1})
        modes = {
            name: stat.S_IMODE((tmp_path / "tenants" / name).stat().st_mode)
            for name in ("t1.db", "t1.db-wal", "t1.db-shm")
        }
        store.close()
    finally:
        os.umask(old)
    assert modes == {"t1.db": 0o600, "t1.db-wal": 0o600, "t1.db-shm": 0o600}
    assert stat.S_IMODE((tmp_path / "tenants").stat().st_mode) == 0o700


def test_receipts_keep_only_the_newest(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m.db", receipt_limit=5)
    try:
        for n in range(12):
            store.save_receipt(f"r{n}", {"n": n})
        assert [store.receipt(f"r{n}") is not None for n in range(12)] == [False] * 7 + [True] * 5
        assert store.receipt("r11") == {"n": 11}
    finally:
        store.close()
    with pytest.raises(ValueError, match="receipt_limit"):
        MemoryStore(tmp_path / "n.db", receipt_limit=0)


def test_a_pasted_megabyte_question_is_read_as_its_head_and_tail(store: MemoryStore) -> None:
    _say(store, "trip", "Zanzibar was where Alice spent her holiday.")
    store.form_all()
    question = "Here are my notes: " + "lorem ipsum dolor " * 300_000 + "Where did Alice go?"
    excerpt = question_excerpt(question)
    assert len(excerpt) <= QUESTION_CHARS + 3
    assert excerpt.startswith("Here are my notes:") and excerpt.endswith("Where did Alice go?")
    for recall in (store.recall, store.recall_area):
        found = recall(question, limit=3, budget_tokens=300)
        assert any("Zanzibar" in h.text for h in found.hits)


def test_inspection_views_show_a_long_source_as_its_opening(store: MemoryStore) -> None:
    """A relation's source and a context's samples carried their fragment's whole text:
    relations of one pasted 6 MB message made ``GET /memory/relations?limit=10000`` a
    132 MB answer (the inspector asks for 500, each text also set as a title). A source
    is now its first SOURCE_CHARS characters, marked as cut."""
    long_text = "Ana went to Lisbon with Bruno. " * 4_000
    _say(store, "paste", long_text)
    store.form_all()
    relations = store.relations(limit=50)
    samples = [s for c in store.contexts(limit=50) for s in c.sample]
    texts = [r.source.fragment_text for r in relations] + [s.text for s in samples]
    assert relations and samples
    assert all(len(t) <= SOURCE_CHARS + 1 for t in texts)
    cut = [t for t in texts if len(t) == SOURCE_CHARS + 1]
    assert cut and all(t.endswith("…") and long_text.startswith(t[:-1]) for t in cut)
