"""Consolidation cycles in memory_core: what each step does to memory, and the judges.

Real stores in a temp folder, formed by the real pipeline with the offline backends; the
``llm`` judge talks to the fake upstream (a real HTTP server on loopback).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest

from memory_core import LogMessage, MemoryStore
from memory_core.dream import (
    DreamConfig,
    DreamReport,
    EntityPair,
    Judge,
    RuleJudge,
    Verdict,
    relation_weight,
)
from memory_core.dream.judges import ContextPair
from memory_core.errors import DreamBusyError
from memory_core.formation import Backends
from memory_core.formation.config import LLMConfig
from memory_core.storage.tables.dream import ContextProfile, EntityProfile
from proxy.fake_upstream import FakeUpstream

from .test_history import T0, say

pytestmark = pytest.mark.e2e


def _scalar(conn: apsw.Connection, sql: str, *bindings: object) -> Any:
    """The one value of a query that returns one row."""
    row = conn.execute(sql, bindings).fetchone()
    assert row is not None, sql
    return row[0]


def decisions(report: Any, kind: str) -> list[Any]:
    return [d for d in report.decisions if d.kind == kind]


def opened(path: Path, backends: Backends, **dream: Any) -> MemoryStore:
    return MemoryStore(path, backends=backends, dream=DreamConfig(**dream))


# --- rules -------------------------------------------------------------------------------


def _entity(
    eid: int, name: str, label: str = "PER", vector: Sequence[float] = (1, 0), *,
    speaker: bool = False, aliases: tuple[tuple[str, str, int | None, str], ...] = (),
) -> EntityProfile:  # fmt: skip
    blob = np.asarray(vector, "<f4").tobytes()
    return EntityProfile(eid, name, label, speaker, 3, 3, blob, aliases, ())


def test_the_rule_judge_on_entities() -> None:
    judge = RuleJudge(DreamConfig(entity_similarity=0.5))
    a = _entity(1, "Jordan", vector=(1, 0))
    pairs = [
        EntityPair(a, _entity(2, "Jordan", vector=(0.9, 0.1)), "jordan", 0.99, None),
        EntityPair(a, _entity(3, "Jordan", vector=(0, 1)), "jordan", 0.0, None),
        EntityPair(a, _entity(4, "Jordan", "LOC"), "jordan", 0.99, None),
        EntityPair(a, _entity(5, "Jordan"), "jordan", None, None),
        EntityPair(a, _entity(6, "Jo"), "jo", 0.1, "an alias statement names Jordan 'Jo'"),
        EntityPair(_entity(7, "Jo", speaker=True), _entity(8, "Jo", speaker=True), "jo", 1.0, None),
    ]
    verdicts = judge.entities(pairs)
    assert [v.action for v in verdicts] == ["merge", "keep", "keep", "keep", "merge", "keep"]
    assert "homonyms" in verdicts[1].reason and "LOC" in verdicts[2].reason
    assert "memory says so" in verdicts[4].reason


def test_the_rule_judge_on_contexts() -> None:
    judge = RuleJudge(DreamConfig(context_merge=0.9, context_link=0.7))
    topic = ContextProfile(1, "pottery", 5, ("c1",), ())
    other = ContextProfile(2, "pottery class", 4, ("c2",), ())
    verdicts = judge.contexts([ContextPair(topic, other, s) for s in (0.95, 0.8, 0.5)])
    assert [v.action for v in verdicts] == ["merge", "link", "keep"]


def test_relation_weights() -> None:
    config = DreamConfig(cooccurrence_decay=0.5, cooccurrence_floor=0.2)

    def weight(predicate: str, strength: float | None, last: int | None, fresh: bool) -> float:
        return relation_weight(
            predicate, 0.5, strength, last, fresh=fresh, cycle=4, config=config
        )

    assert weight("co_occurs_with", None, None, False) == 0.5  # never seen by a cycle
    assert weight("co_occurs_with", 0.0, 4, False) == 0.5  # seen this cycle
    assert weight("co_occurs_with", 0.0, 3, False) == 0.25  # one cycle unseen
    assert weight("co_occurs_with", 0.0, 0, False) == pytest.approx(0.1)  # the floor
    assert weight("co_occurs_with", 0.0, 0, True) == 0.5  # formed since the last cycle
    assert weight("likes", 0.875, 2, False) == 0.875
    assert weight("likes", None, None, False) == 0.5


# --- cycles -------------------------------------------------------------------------------


def test_a_merge_brings_a_conflict_to_light(tmp_path: Path, backends: Backends) -> None:
    store = opened(tmp_path / "t.db", backends)
    try:
        say(store, "c1", ["Bob lives in Oslo.", "I met Bob at the gym."])
        later = ["Robert, also known as Bob, fixed my bike.", "Robert lives in Rome."]
        say(store, "c2", later, start=10)
        report = store.dream()
        assert len(decisions(report, "merge_entities")) == 1
        [conflict] = [d for d in decisions(report, "conflict") if "merged" in d.reason]
        [survivor] = [e.name for e in store.entities(name="robert")]  # one entity, both names
        assert survivor in {"Bob", "Robert"}  # the more mentioned one (both open sentences)
        assert set(conflict.subjects) == {f"{survivor} lives_in Rome", f"{survivor} lives_in Oslo"}
        assert {c.text for c in conflict.claims} == {
            f"{survivor} lives in Rome", f"{survivor} lives in Oslo"
        }  # fmt: skip
        assert f'contradicts "{survivor} lives in Oslo" vs "{survivor} lives in Rome"' in (
            conflict.reason
        )
        assert {s.text for s in conflict.sources} == {
            "Bob lives in Oslo.", "Robert lives in Rome."
        }  # fmt: skip
        statuses = {r.object: r.status for r in store.relations(entity="bob")
                    if r.predicate == "lives_in"}  # fmt: skip
        assert statuses == {"Oslo": "disputed", "Rome": "disputed"}
        assert [e.name for e in store.entities(name="bob")] == [survivor]  # every alias kept
    finally:
        store.close()


def test_restated_claims_are_strengthened(tmp_path: Path, backends: Backends) -> None:
    store = opened(tmp_path / "t.db", backends)
    try:
        say(store, "c1", ["I like jazz."])
        say(store, "c2", ["I like jazz a lot."], start=10)
        report = store.dream()
        [strong] = decisions(report, "strengthen")
        assert strong.subjects == ["Maya likes 'jazz'"] and len(strong.sources) == 2
        groups = list(store._reader.execute(
            "SELECT support, strength FROM relation_groups WHERE predicate = 'likes'"
        ))  # fmt: skip
        [(support, strength)] = groups
        confidences = [c for (c,) in store._reader.execute(
            "SELECT confidence FROM relations WHERE predicate = 'likes'"
        )]  # fmt: skip
        expected = 1 - (1 - confidences[0]) * (1 - confidences[1])
        assert support == 2 and strength == pytest.approx(min(0.99, expected), abs=1e-6)
    finally:
        store.close()


def test_cooccurrences_unseen_for_cycles_decay_in_the_graph(
    tmp_path: Path, backends: Backends
) -> None:
    store = opened(tmp_path / "t.db", backends, cooccurrence_decay=0.5)
    try:
        say(store, "c1", ["Anna and Bob went to Oslo."])
        store.dream()
        for i in range(2):
            say(store, f"later-{i}", [f"Carla visited Lima on trip {i}."], start=10 * (i + 1))
            report = store.dream()
        assert decisions(report, "decay")
        graph = store.warm_graph()
        weights = _relation_weights(store, graph)
        old = {w for (s, o), w in weights.items() if "Anna" in (s, o) or "Bob" in (s, o)}
        fresh = {w for (s, o), w in weights.items() if "Carla" in (s, o)}
        assert old == {0.5 * 0.25} and fresh == {0.5}  # two cycles unseen; seen this one
    finally:
        store.close()


def _relation_weights(store: MemoryStore, graph: Any) -> dict[tuple[str, str], float]:
    """Co-occurrence edge weights of the graph by the names of their ends."""
    from memory_core.graph import EdgeType

    version = graph.graph
    edges = version.edges()
    names = {
        int(i): str(n) for i, n in store._reader.execute("SELECT id, name FROM entities")
    }
    found = {}
    for src, dst, weight, etype, edge_id in zip(
        edges.src, edges.dst, edges.weight, edges.edge_type, edges.edge_id, strict=True
    ):
        if etype != EdgeType.RELATION:
            continue
        predicate = _scalar(
            store._reader, "SELECT predicate FROM relations WHERE id = ?", int(edge_id)
        )
        if predicate == "co_occurs_with":
            ends = (graph.node_keys[int(src)][1], graph.node_keys[int(dst)][1])
            found[(names[int(ends[0])], names[int(ends[1])])] = round(float(weight), 6)
    return found


def test_contexts_of_different_conversations_are_linked_or_merged(
    tmp_path: Path, backends: Backends
) -> None:
    linking = opened(tmp_path / "link.db", backends, context_link=0.1, context_merge=0.99)
    merging = opened(tmp_path / "merge.db", backends, context_link=0.1, context_merge=0.1)
    try:
        for store in (linking, merging):
            say(store, "kitchen", ["I baked sourdough bread with rye flour.", "The dough rose."])
            say(store, "garden", ["I planted tomatoes and basil in the garden."], start=10)
        linked = linking.dream()
        [link] = decisions(linked, "link_contexts")
        assert len(link.ids) == 2 and link.sources
        assert _scalar(linking._reader, "SELECT count(*) FROM context_links") == 1
        from memory_core.graph import EdgeType

        edges = linking.warm_graph().graph.edges()
        assert int(np.sum(edges.edge_type == EdgeType.RELATED_CONTEXT)) == 1
        merged = merging.dream()
        [merge] = decisions(merged, "merge_contexts")
        count = _scalar(merging._reader, "SELECT count(*) FROM contexts")
        assert count == 1
        rows = list(merging._reader.execute("SELECT kind, merged FROM merges"))
        assert rows == [("context", merge.ids[1])]
    finally:
        linking.close()
        merging.close()


def test_a_cycle_with_nothing_new_still_ends_in_a_snapshot(
    tmp_path: Path, backends: Backends
) -> None:
    store = opened(tmp_path / "t.db", backends)
    try:
        say(store, "c1", ["Anna and Bob went to Oslo."])
        first = store.dream()
        again = store.dream()
        assert again.snapshot == first.snapshot + 1 and again.material["messages"] == 0
        assert set(again.totals) <= {"decay"}
    finally:
        store.close()


class _Interfering:
    """A judge during whose decisions another writer consolidates the same memory (as a
    process that ignores the tenant's lock would)."""

    label = "rules@1"

    def __init__(self, other: MemoryStore, config: DreamConfig) -> None:
        self._other, self._rules = other, RuleJudge(config)

    def entities(self, pairs: Sequence[EntityPair]) -> list[Verdict]:
        self._other.consolidate(trigger="interfering")
        return self._rules.entities(pairs)

    def contexts(self, pairs: Sequence[ContextPair]) -> list[Verdict]:
        return self._rules.contexts(pairs)


def test_a_cycle_applies_nothing_when_another_committed_meanwhile(
    tmp_path: Path, backends: Backends
) -> None:
    path = tmp_path / "t.db"
    other = opened(path, backends)
    config = DreamConfig()
    judge: Judge = _Interfering(other, config)
    store = MemoryStore(path, backends=backends, dream=config, judge=judge)
    try:
        say(store, "c1", ["I met Bob at the gym."])
        say(store, "c2", ["Robert, also known as Bob, fixed my bike."], start=10)
        with pytest.raises(DreamBusyError, match="nothing was applied"):
            store.dream()
        assert [s.id for s in store.snapshots()] == [1]  # only the other writer's
    finally:
        store.close()
        other.close()


class _SpeakerJoins:
    """A judge during whose decisions a speaker named Bob joins (formation goes on while
    a cycle judges): the entity Bob the cycle read as a third person becomes him."""

    label = "rules@1"

    def __init__(self, config: DreamConfig) -> None:
        self._rules = RuleJudge(config)
        self.store: MemoryStore | None = None

    def entities(self, pairs: Sequence[EntityPair]) -> list[Verdict]:
        assert self.store is not None
        said = {"role": "user", "name": "Bob", "content": "Hi, I am back from the climbing gym."}
        self.store.append([LogMessage(said, T0 + 3000)], conversation="c3")
        self.store.form_all()
        return self._rules.entities(pairs)

    def contexts(self, pairs: Sequence[ContextPair]) -> list[Verdict]:
        return self._rules.contexts(pairs)


@contextlib.contextmanager
def _dreamt_while_speakers_join(
    tmp_path: Path, backends: Backends, joining: type[_SpeakerJoins]
) -> Iterator[tuple[MemoryStore, DreamReport]]:
    """A store holding Bob and "Robert, also known as Bob" (third persons, two
    conversations), and the report of one cycle judged by ``joining``'s judge, during
    whose decisions speakers join."""
    config = DreamConfig()
    judge = joining(config)
    store = MemoryStore(tmp_path / "t.db", backends=backends, dream=config, judge=judge)
    judge.store = store
    try:
        say(store, "c1", ["Bob lives in Oslo.", "I met Bob at the gym."])
        say(store, "c2", ["Robert, also known as Bob, fixed my bike.", "Robert lives in Rome."],
            start=10)  # fmt: skip
        yield store, store.dream()
    finally:
        store.close()


def test_a_speaker_who_joined_while_the_cycle_judged_survives_the_merge(
    tmp_path: Path, backends: Backends
) -> None:
    """The survivor of a merge is a speaker if one is, judged on the entities as they are
    when the cycle writes. The cycle ranked them as it had read them: Bob, a third person
    then, was merged into the more mentioned Robert after Bob had joined as a speaker,
    leaving the speaker Bob named Robert, his own name gone."""
    with _dreamt_while_speakers_join(tmp_path, backends, _SpeakerJoins) as (store, report):
        (merge,) = decisions(report, "merge_entities")
        assert merge.subjects == ["Bob", "Robert"]  # survivor first
        speakers = {e.name: e for e in store.entities(limit=100) if e.is_speaker}
        assert set(speakers) == {"Maya", "Bob"}
        assert {a.alias for a in speakers["Bob"].aliases} == {"Bob", "Robert"}
        assert store.entities(name="robert")[0].name == "Bob"


class _BothJoin(_SpeakerJoins):
    """A judge during whose decisions both Bob and Robert join as speakers."""

    def entities(self, pairs: Sequence[EntityPair]) -> list[Verdict]:
        assert self.store is not None
        verdicts = self._rules.entities(pairs)  # on the entities as the cycle read them
        said = [
            LogMessage({"role": "user", "name": name, "content": text}, T0 + 3000 + i)
            for i, (name, text) in enumerate(
                [("Bob", "Hi, I am back from the gym."), ("Robert", "Hi Bob, good to see you.")]
            )
        ]
        self.store.append(said, conversation="c3")
        self.store.form_all()
        return verdicts


def test_two_entities_that_both_became_speakers_while_the_cycle_judged_are_not_merged(
    tmp_path: Path, backends: Backends
) -> None:
    """The rule judge keeps two speakers apart ("each speaks as themself"). A verdict to
    merge made while Bob and Robert were third persons (memory said Robert is also known
    as Bob) no longer holds when both have joined as speakers by the time the cycle
    writes: they stay two people, each with their own name."""
    with _dreamt_while_speakers_join(tmp_path, backends, _BothJoin) as (store, report):
        assert decisions(report, "merge_entities") == []
        (kept,) = [d for d in decisions(report, "keep_entities") if "both speak now" in d.reason]
        assert "memory says so" in kept.reason  # the verdict, and why it no longer holds
        speakers = {e.name for e in store.entities(limit=100) if e.is_speaker}
        assert {"Bob", "Robert"} <= speakers


# --- the llm judge --------------------------------------------------------------------


@pytest.fixture
def closing(upstream: FakeUpstream) -> FakeUpstream:
    upstream.keep_alive = False  # litellm caches its synchronous clients beyond the test
    return upstream


def _llm_store(path: Path, backends: Backends, upstream: FakeUpstream, model: str) -> MemoryStore:
    """A store judged by ``model`` at the fake upstream, holding a duplicate (Bob, and
    Robert "also known as Bob")."""
    llm = LLMConfig(provider="openai", model=model, api_base=upstream.url, timeout_s=5)
    store = opened(path, backends, backend="llm", llm=llm)
    say(store, "c1", ["I met Bob at the climbing gym."])
    say(store, "c2", ["Robert, also known as Bob, fixed my bike."], start=10)
    return store


async def test_the_llm_judge_decides_after_a_corrective_retry(
    tmp_path: Path, backends: Backends, closing: FakeUpstream
) -> None:
    store = _llm_store(tmp_path / "t.db", backends, closing, "consolidator")
    try:
        closing.script = [
            "I think they are the same.",  # not JSON: asked again with the error
            json.dumps({"verdicts": [{"pair": 1, "decision": "merge", "reason": "same man"}]}),
        ]
        report = await asyncio.to_thread(store.dream)
        [merge] = decisions(report, "merge_entities")
        assert merge.by == "llm:consolidator" and "same man" in merge.reason
        asked = closing.requests[0].body["messages"][-1]["content"]
        assert "Pair 1" in asked and "Robert" in asked and "climbing gym" in asked
        assert "rejected" in closing.requests[1].body["messages"][-1]["content"]
        assert report.failures == []
    finally:
        store.close()


async def test_a_failing_model_leaves_its_pairs_as_they_are(
    tmp_path: Path, backends: Backends, closing: FakeUpstream
) -> None:
    store = _llm_store(tmp_path / "t.db", backends, closing, "fail-500")
    try:
        report = await asyncio.to_thread(store.dream)
        assert decisions(report, "merge_entities") == []
        [kept] = decisions(report, "keep_entities")
        assert kept.reason.startswith("not decided")
        assert report.failures and "1 pairs left as they are" in report.failures[0]
        assert len(store.entities(name="bob")) == 2
    finally:
        store.close()


async def test_answers_for_missing_or_repeated_pairs_are_rejected(
    tmp_path: Path, backends: Backends, closing: FakeUpstream
) -> None:
    store = _llm_store(tmp_path / "t.db", backends, closing, "consolidator")
    try:
        closing.script = [
            json.dumps({"verdicts": [{"pair": 2, "decision": "merge", "reason": "x"}]}),
            json.dumps({"verdicts": [{"pair": 1, "decision": "keep", "reason": "a"},
                                     {"pair": 1, "decision": "merge", "reason": "b"}]}),
        ]  # fmt: skip
        report = await asyncio.to_thread(store.dream)
        assert "answered twice" in report.failures[0]
        assert decisions(report, "merge_entities") == []
    finally:
        store.close()
