"""Formation is bounded in its input: hostile messages are formed in linear time, within
named caps, and a row that is too slow, raises, or kills the process uses up a bounded
number of attempts and is given up, while the rest of the queue is formed.

The ``timeout`` marks are hang guards (before these bounds the same inputs took hours),
not timed assertions.
"""

from __future__ import annotations

import os
import random
import string
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memory_core import LogMessage, MemoryStore
from memory_core.formation import (
    Backends,
    FormationConfig,
    FormationConfigError,
    Former,
    parse_formation,
)
from memory_core.formation.interfaces import FragmentView, Mention
from memory_core.formation.stages.ner import LexicalNER
from memory_core.formation.stages.relations import PatternRelations
from memory_core.formation.writer import cooccurrences
from memory_core.storage import connect

ROOT = Path(__file__).resolve().parent.parent
REPRO = "Ana went to Lisbon. "


def _store(tmp_path: Path, backends: Backends) -> MemoryStore:
    return MemoryStore(tmp_path / "m.db", backends=backends)


def _append(store: MemoryStore, texts: Sequence[str], conversation: str = "c") -> None:
    store.append(
        [
            LogMessage({"role": "user" if i % 2 == 0 else "assistant", "content": t}, 1.7e9 + i)
            for i, t in enumerate(texts)
        ],
        conversation=conversation,
    )


def _query(store: MemoryStore, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    return list(store._reader.execute(sql, args))


def _distinct_names(count: int) -> str:
    """``count`` distinct capitalised words, each its own name ("We met Qhzkw, Bxeofa, ...")."""
    rng = random.Random(0)
    words: dict[str, None] = {}
    while len(words) < count:
        letters = rng.choices(string.ascii_lowercase, k=rng.randint(5, 9))
        words["".join(letters).capitalize()] = None
    return "We met " + ", ".join(words) + "."


# -- the stages alone ---------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_lexical_ner_on_the_reported_repro_is_linear() -> None:
    text = REPRO * 100_000  # 2 MB: about three hours before, one pass now
    known = ["lisbon", *(f"Known Name {i}" for i in range(5_000))]
    mentions = LexicalNER().mentions(text, known)
    assert len(mentions) == 200_000  # "Ana" opens each sentence, and is a name
    assert {m.surface for m in mentions} == {"Ana", "Lisbon"}
    assert mentions[1] == Mention(12, 18, "Lisbon", "LOC")
    assert mentions[3] == Mention(len(REPRO) + 12, len(REPRO) + 18, "Lisbon", "LOC")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("unit", ["A", "A-", "A'", "Ab"])
def test_pattern_relations_are_linear_on_runs_of_capitals(unit: str) -> None:
    text = unit * (400_000 // len(unit)) + " lives in Lisbon"  # minutes for 20 KB before
    claims = PatternRelations().extract(FragmentView(text, "u", "user"))
    assert [c.obj for c in claims] == ["Lisbon"]


def test_cooccurrences_are_all_pairs_in_order_or_the_nearest_ones() -> None:
    assert cooccurrences([7, 8, 9], 10) == [(7, 8), (7, 9), (8, 9)]
    assert cooccurrences([1, 2, 3, 4], 4) == [(1, 2), (1, 3), (2, 3), (3, 4)]
    assert len(cooccurrences(list(range(10_000)), 500)) == 500
    assert cooccurrences([1], 5) == []


def test_the_caps_and_the_row_budget_are_configured_and_validated() -> None:
    config = parse_formation(
        {"max_text_chars": 5000, "max_cooccurrence_pairs": 10, "row_time_budget_s": 2}
    )
    assert (config.max_text_chars, config.max_cooccurrence_pairs) == (5000, 10)
    assert config.row_time_budget_s == 2.0
    for key, value in [
        ("max_text_chars", 0),
        ("max_mentions_per_fragment", 1.5),
        ("max_mention_chars", True),
        ("max_claims_per_fragment", "many"),
        ("row_time_budget_s", 0),
        ("row_time_budget_s", "fast"),
    ]:
        with pytest.raises(FormationConfigError) as caught:
            parse_formation({key: value})
        assert caught.value.key == f"formation.{key}"
        assert "must be" in caught.value.reason


# -- whole passes -----------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_2mb_message_is_formed_and_kept_whole(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends)
    word = "A" * 30_000 + "-B" * 10_000  # one 50 KB name, longer than max_mention_chars
    tail = " Finally Zanzibar Quayside."  # past max_text_chars: stored and searchable only
    hostile = f"See {word}. " + REPRO * 100_000 + tail
    _append(store, ["I live in Porto with my sister Ana.", hostile])
    assert store.form_all() == 2
    assert store.stats().queued == 0 and store.stats().failed == 0
    ((length,),) = _query(store, "SELECT length(text) FROM fragments WHERE length(text) > 1000")
    assert length == len(hostile)
    cap = FormationConfig().max_mentions_per_fragment
    surfaces = _query(
        store,
        "SELECT m.surface FROM mentions m JOIN fragments f ON f.id = m.fragment_id"
        " WHERE length(f.text) > 1000",
    )
    assert len(surfaces) == cap and {s for (s,) in surfaces} == {"Ana", "Lisbon"}
    assert not store.entities(name="Zanzibar Quayside")
    assert [h.text for h in store.recall("Zanzibar", limit=3, budget_tokens=50).hits] == [hostile]


@pytest.mark.timeout(60)
def test_a_message_naming_10000_entities_is_formed_within_the_caps(
    tmp_path: Path, backends: Backends
) -> None:
    store = _store(tmp_path, backends)
    _append(store, [_distinct_names(10_000)])
    assert store.form_all() == 1
    ((mentions, entities),) = _query(
        store, "SELECT count(*), count(DISTINCT entity_id) FROM mentions"
    )
    caps = FormationConfig()
    assert mentions == caps.max_mentions_per_fragment and entities > 40
    pairs = _query(store, "SELECT count(*) FROM relations WHERE predicate = 'co_occurs_with'")
    assert pairs == [(caps.max_cooccurrence_pairs,)]


# -- attempts: too slow, raising, killed ----------------------------------------------------


class _Timer:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _SlowNER:
    """Lexical NER that takes ``seconds`` (of ``timer``) on texts containing "SLOW"."""

    def __init__(self, timer: _Timer, seconds: float) -> None:
        self._ner, self._timer, self._seconds = LexicalNER(), timer, seconds
        self.interpretation = self._ner.interpretation
        self.calls = 0

    def mentions(self, text: str, known: Sequence[str] = ()) -> list[Mention]:
        if "SLOW" in text:
            self.calls += 1
            self._timer.now += self._seconds
        return self._ner.mentions(text, known)


class _OutOfMemoryNER:
    """Lexical NER that runs out of memory on texts containing "POISON"."""

    def __init__(self) -> None:
        self._ner = LexicalNER()
        self.interpretation = self._ner.interpretation
        self.calls = 0

    def mentions(self, text: str, known: Sequence[str] = ()) -> list[Mention]:
        if "POISON" in text:
            self.calls += 1
            raise MemoryError("simulated: out of memory")
        return self._ner.mentions(text, known)


def _queue(store: MemoryStore) -> list[tuple[Any, ...]]:
    return _query(
        store,
        "SELECT log.text, queue.attempts, queue.last_error FROM queue JOIN log"
        " ON log.id = queue.log_id ORDER BY log.id",
    )


@pytest.mark.timeout(60)
def test_a_row_over_its_time_budget_is_skipped_and_given_up(
    tmp_path: Path, backends: Backends
) -> None:
    store = _store(tmp_path, backends)
    _append(store, ["Ana lives in Lisbon.", "SLOW: Bruno lives in Porto.", "Carla lives in Faro."])
    timer = _Timer()
    slow = _SlowNER(timer, seconds=11.0)
    conn = connect(tmp_path / "m.db")
    former = Former(conn, replace(backends, ner=slow), FormationConfig(), timer=timer)
    results = []
    while (result := former.run()).processed or result.failed:  # as MemoryStore.form_all
        results.append((result.processed, result.failed))
    conn.close()
    assert results == [(2, 1), (0, 1), (0, 1), (0, 1), (0, 1)]  # the batch, then alone
    formed = _query(store, "SELECT text FROM fragments ORDER BY id")
    assert formed == [("Ana lives in Lisbon.",), ("Carla lives in Faro.",)]
    assert (store.stats().queued, store.stats().failed) == (0, 1)
    ((text, attempts, error),) = _queue(store)
    assert text.startswith("SLOW") and attempts == slow.calls == 5
    assert error.startswith("given up after 5 attempts") and "row_time_budget_s (10 s)" in error
    failures = _query(store, "SELECT DISTINCT stage, interpretation FROM formation_failures")
    assert failures == [("ner", "ner:lexical:capitalised-quoted-known@2")]


@pytest.mark.timeout(60)
def test_a_row_that_crashes_every_attempt_is_given_up(tmp_path: Path, backends: Backends) -> None:
    oom = _OutOfMemoryNER()
    store = MemoryStore(tmp_path / "m.db", backends=replace(backends, ner=oom))
    _append(store, ["Ana lives in Lisbon.", "POISON: Bruno lives in Porto.", "Carla is here."])
    crashes = 0
    for _ in range(10):  # each crash is a restart of formation, as after a kill
        try:
            store.form_all()
            break
        except MemoryError:
            crashes += 1
    else:
        pytest.fail("formation crashed on the same row forever")
    ((text, attempts, error),) = _queue(store)
    assert text.startswith("POISON") and crashes == oom.calls == attempts == 5
    assert error.startswith("given up after 5 attempts") and "interrupted" in error
    assert len(_query(store, "SELECT id FROM fragments")) == 2
    assert store.stats().failed == 1


_KILLED_SCRIPT = """
import os, signal, sys, zlib
from dataclasses import replace
from pathlib import Path
import numpy as np
from memory_core import MemoryStore
from memory_core.formation import FormationConfig, build_backends
from memory_core.formation.stages.ner import LexicalNER

class Encoder:
    name, dimension = "fake-hash", 8
    def encode(self, texts):
        rows = np.array([[zlib.crc32(f"{t}{i}".encode()) % 97 + 1 for i in range(8)]
                         for t in texts], dtype=np.float32).reshape(len(texts), 8)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

class KillingNER(LexicalNER):
    def mentions(self, text, known=()):
        if "POISON" in text:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().mentions(text, known)

backends = replace(build_backends(FormationConfig(), encoder=Encoder()), ner=KillingNER())
MemoryStore(Path(sys.argv[1]), backends=backends).form_all()
"""


@pytest.mark.timeout(90)
def test_a_row_that_kills_the_process_is_given_up(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends)
    _append(store, ["Ana lives in Lisbon.", "POISON: Bruno lives in Porto.", "Carla is here."])
    store.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    kills = 0
    for _ in range(10):  # each run is a restart after kill -9
        child = subprocess.run(
            [sys.executable, "-c", _KILLED_SCRIPT, str(tmp_path / "m.db")], env=env, timeout=60
        )
        if child.returncode == 0:
            break
        assert child.returncode == -9
        kills += 1
    else:
        pytest.fail("the same row killed formation on every restart")
    reopened = _store(tmp_path, backends)
    ((text, attempts, error),) = _queue(reopened)
    assert text.startswith("POISON") and kills == attempts == 5
    assert "interrupted" in error
    formed = _query(reopened, "SELECT text FROM fragments ORDER BY id")
    assert formed == [("Ana lives in Lisbon.",), ("Carla is here.",)]  # none lost, none twice


class _Measured:
    """An encoder that records the longest text it is asked to encode."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.longest = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def encode(self, texts: Sequence[str], *args: Any, **kwargs: Any) -> Any:
        self.longest = max([self.longest, *map(len, texts)])
        return self._inner.encode(texts, *args, **kwargs)


@pytest.mark.timeout(120)
def test_a_huge_speaker_name_is_read_only_as_far_as_a_name_is(
    tmp_path: Path, backends: Backends
) -> None:
    """Before: the name field was encoded whole, as the speaker's mention context and
    before every turn's text ("<name>: <text>"), whatever its length: a 200,000-character
    name made each of that speaker's turns a 200,000-character encoding (e5 encodes
    every window of a long text: about 40 ms a thousand characters). Formation now reads
    a name as far as ``max_mention_chars``; the log keeps it whole."""
    encoder, mentions = _Measured(backends.encoder), _Measured(backends.mentions)
    store = _store(tmp_path, replace(backends, encoder=encoder, mentions=mentions))
    name = "Q" + "x" * 200_000
    store.append(
        [
            LogMessage({"role": "user", "name": name, "content": "I moved to Porto."}, 1.7e9),
            LogMessage({"role": "user", "name": "Tom", "content": "Hey, nice!"}, 1.7e9 + 1),
        ],
        conversation="c",
    )
    assert store.form_all() == 2
    cap = FormationConfig().max_mention_chars
    assert encoder.longest < cap + 100 and mentions.longest < cap + 100
    speakers = {e.name for e in store.entities(limit=10) if e.is_speaker}
    assert speakers == {name[:cap], "Tom"}
    ((stored,),) = _query(store, "SELECT name FROM log WHERE name LIKE 'Q%'")
    assert stored == name
