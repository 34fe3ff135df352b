"""A store opened with another sentence encoder than the one its vectors were made with
is never mixed: its memory is formed again from the log (``on_change: reencode``,
resumable, nothing said lost) or refused with a clear message (``refuse``)."""

from __future__ import annotations

import subprocess
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

import apsw
import numpy as np
import numpy.typing as npt
import pytest

from memory_core import LogMessage, MemoryStore
from memory_core.errors import EncoderChangedError
from memory_core.formation import Backends, FormationConfig, build_backends
from memory_core.formation.config import EncoderConfig
from memory_core.storage.tables import reformation

SAID = [
    "My sister Ana lives in Lisbon and keeps bees.",
    "Tom lives in Madrid and teaches history.",
    "A minha prima Beatriz mora em Coimbra.",
    "I sold my old bike last week.",
]


class HashEncoder:
    """Another encoder (deterministic vectors from the text's hash): what matters is that
    its name differs from the store's."""

    name = "test/hash-encoder"
    dimension = 384

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = np.array(
            [
                [zlib.crc32(f"{t}{i}".encode()) % 97 + 1 for i in range(self.dimension)]
                for t in texts
            ],
            dtype=np.float32,
        ).reshape(len(texts), self.dimension)
        norms = np.linalg.norm(rows, axis=1, keepdims=True).astype(np.float32)
        return np.asarray(rows / norms, dtype=np.float32)


def _filled(path: Path, backends: Backends) -> MemoryStore:
    store = MemoryStore(path, backends=backends)
    history = [
        LogMessage({"role": "user", "content": t}, 1_700_000_000.0 + i) for i, t in enumerate(SAID)
    ]
    store.append(history, conversation="c1", source="ingest")
    store.form_all()
    return store


def _encoders(store: MemoryStore) -> list[str]:
    with store._read_lock:  # the test reads the table directly: what the check reads
        return reformation.encoders(store._reader)


def test_a_store_opened_with_another_encoder_is_formed_again_with_nothing_lost(
    tmp_path: Path, backends: Backends
) -> None:
    path = tmp_path / "m.db"
    first = _filled(path, backends)
    before = first.stats()
    old = backends.encoder.interpretation.label
    assert _encoders(first) == [old]
    forgotten = first.forget_matching("bike", conversation=None)
    assert forgotten.fragments
    first.close()

    other = build_backends(FormationConfig(), encoder=HashEncoder())
    store = MemoryStore(path, backends=other)
    try:
        store.recall("Ana", limit=5, budget_tokens=500)  # the first use checks the vectors
        assert store.reencoded is not None and store.reencoded[0] == (old,)
        assert store.reencoded[1] == before.fragments  # every formed row queued again
        assert _encoders(store) == []  # no vector of the old encoder is left
        store.form_all()
        after = store.stats()
        assert _encoders(store) == [other.encoder.interpretation.label]
        assert (after.log_messages, after.fragments, after.queued) == (
            before.log_messages,
            before.fragments,
            0,
        )
        texts = [h.text for h in store.recall("Lisbon bees", limit=5, budget_tokens=500).hits]
        assert SAID[0] in texts
        assert not any(
            "bike" in h.text for h in store.recall("bike", limit=5, budget_tokens=500).hits
        )
        assert forgotten.forget is not None
        assert [f.id for f in store.forgets()] == [forgotten.forget.id]  # still forgotten
    finally:
        store.close()


def test_the_work_resumes_after_a_stop_and_is_not_done_twice(
    tmp_path: Path, backends: Backends
) -> None:
    path = tmp_path / "m.db"
    _filled(path, backends).close()
    other = build_backends(FormationConfig(), encoder=HashEncoder())
    store = MemoryStore(path, backends=other)
    store.form(limit=1)  # queues the work, forms one row, then the process "stops"
    assert store.reencoded is not None
    store.close()
    again = MemoryStore(path, backends=other)
    try:
        again.form_all()
        assert again.reencoded is None  # only its own vectors were left: nothing to redo
        assert _encoders(again) == [other.encoder.interpretation.label]
        assert again.stats().fragments == len(SAID) and again.stats().queued == 0
    finally:
        again.close()


def test_refuse_leaves_the_store_untouched_and_says_what_to_do(
    tmp_path: Path, backends: Backends
) -> None:
    path = tmp_path / "m.db"
    _filled(path, backends).close()
    refusing = FormationConfig(encoder=EncoderConfig(on_change="refuse"))
    other = build_backends(refusing, encoder=HashEncoder())
    store = MemoryStore(path, backends=other, formation=refusing)
    try:
        with pytest.raises(EncoderChangedError) as raised:
            store.recall("Ana", limit=5, budget_tokens=500)
        message = str(raised.value)
        assert backends.encoder.interpretation.label in message and "hash-encoder" in message
        assert "on_change: reencode" in message
        assert _encoders(store) == [backends.encoder.interpretation.label]
        assert store.stats().queued == 0
        with pytest.raises(EncoderChangedError):
            store.form_all()
    finally:
        store.close()


def test_the_same_encoder_changes_nothing(tmp_path: Path, backends: Backends) -> None:
    path = tmp_path / "m.db"
    _filled(path, backends).close()
    store = MemoryStore(path, backends=backends)
    try:
        store.recall("Ana", limit=5, budget_tokens=500)
        assert store.reencoded is None and store.stats().queued == 0
    finally:
        store.close()


def test_which_encoders_made_the_vectors_is_read_from_an_index(
    tmp_path: Path, backends: Backends
) -> None:
    """The first question after an open, a rollback or an import asks which encoders made
    the store's vectors, under the write lock: one seek per encoder in an index of the
    models (migration 015), never a read of every vector row (0.7 s cold at 100k)."""
    path = tmp_path / "m.db"
    _filled(path, backends).close()
    conn = apsw.Connection(str(path))
    try:
        own = backends.encoder.interpretation.label
        assert reformation.encoders(conn) == [own]
        least = conn.execute("SELECT min(fragment_id) FROM fragment_vectors").fetchone()
        assert least is not None
        fid = least[0]
        conn.execute(
            "UPDATE fragment_vectors SET model = 'aaa/other' WHERE fragment_id = ?", (fid,)
        )
        assert reformation.encoders(conn) == sorted(["aaa/other", own])
        plan = " ".join(
            str(row[3])
            for row in conn.execute(
                "EXPLAIN QUERY PLAN SELECT min(model) FROM fragment_vectors WHERE model > ''"
            )
        )
        assert "COVERING INDEX fragment_vectors_model" in plan, plan
        conn.execute("DELETE FROM fragment_vectors")
        assert reformation.encoders(conn) == []
    finally:
        conn.close()


_REFORM_AND_DIE = """
import os, signal, sys, zlib
from pathlib import Path
import numpy as np
from memory_core import MemoryStore
from memory_core.formation import FormationConfig, build_backends

class Hash:
    name, dimension = "test/hash-encoder", 384
    def encode(self, texts):
        rows = np.array([[zlib.crc32(f"{t}{i}".encode()) % 97 + 1 for i in range(384)]
                         for t in texts], dtype=np.float32).reshape(len(texts), 384)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

store = MemoryStore(Path(sys.argv[1]), backends=build_backends(FormationConfig(), encoder=Hash()))
store.form(limit=1)  # the old memory unformed and queued again, one row formed
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_reencode_killed_midway_resumes_with_one_encoder_and_nothing_lost(
    tmp_path: Path, backends: Backends
) -> None:
    """kill -9 during the re-formation: the store it leaves holds vectors of the new
    encoder only, the rest queued; reopened, it finishes with every turn formed."""
    path = tmp_path / "m.db"
    first = _filled(path, backends)
    before = first.stats()
    first.close()
    died = subprocess.run(
        [sys.executable, "-c", _REFORM_AND_DIE, str(path)], capture_output=True, timeout=120
    )
    assert died.returncode == -9, died.stderr.decode()
    other = build_backends(FormationConfig(), encoder=HashEncoder())
    store = MemoryStore(path, backends=other)
    try:
        assert _encoders(store) == [other.encoder.interpretation.label]  # never mixed
        assert store.stats().queued == before.fragments - 1
        store.form_all()
        assert store.reencoded is None
        after = store.stats()
        assert (after.log_messages, after.fragments, after.queued) == (
            before.log_messages,
            before.fragments,
            0,
        )
    finally:
        store.close()
