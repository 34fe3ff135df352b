"""Area retrieval over the formed graph (first wiring of the graph engine)."""

from __future__ import annotations

import time
from pathlib import Path

from memory_core import LogMessage, MemoryStore
from memory_core.area_retrieval import build_graph, stem
from memory_core.formation import Backends
from memory_core.graph import NodeKind

TURNS = [
    "The Dreamer is the consolidation cycle; it runs every night at 3 am.",
    "Got it, the Dreamer consolidates memory nightly.",
    "My sister Ana bought a red bicycle yesterday.",
    "Nice, red bicycles are fun in Lisbon.",
    "Correction: the Dreamer now runs every hour, not at night.",
    "Thanks for the update about the Dreamer schedule.",
    "We should plan the trip to Porto in June.",
    "June in Porto is lovely, book the train early.",
]


def _store(tmp_path: Path, backends: Backends) -> MemoryStore:
    store = MemoryStore(tmp_path / "m.db", backends=backends)
    messages = [
        LogMessage({"role": "user" if i % 2 == 0 else "assistant", "content": t}, 1_700_000_000 + i)
        for i, t in enumerate(TURNS)
    ]
    store.append(messages, conversation="c1")
    store.form_all()
    return store


def test_graph_holds_every_formed_node_kind(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends)
    memory = build_graph(store._reader)
    kinds = set(memory.graph.kinds.tolist())
    assert {NodeKind.FRAGMENT, NodeKind.CONTEXT, NodeKind.ENTITY, NodeKind.SESSION} <= kinds
    assert memory.fragments == len(TURNS)
    assert "dreamer" in memory.aliases  # the entity, by its alias
    assert stem("bicycles") in memory.term_nodes  # a word two fragments share


def test_a_question_reaches_the_fragment_and_its_correction(
    tmp_path: Path, backends: Backends
) -> None:
    store = _store(tmp_path, backends)
    recall = store.recall_area("When does the Dreamer run?", limit=4, budget_tokens=2000)
    texts = [h.text for h in recall.hits]
    assert TURNS[0] in texts and TURNS[4] in texts
    assert "Dreamer now runs every hour" in recall.context.text


def test_the_graph_is_rebuilt_when_memory_grows(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends)
    store.recall_area("Dreamer", limit=3, budget_tokens=500)
    first = store._graph
    store.append(
        [LogMessage({"role": "user", "content": "The Dreamer got a new logo."}, time.time())],
        conversation="c2",
    )
    store.form_all()
    recall = store.recall_area("Dreamer logo", limit=3, budget_tokens=500)
    assert store._graph is not first and store._graph is not None
    assert store._graph.graph.version == 1
    assert recall.hits[0].text == "The Dreamer got a new logo."


def test_fragments_newer_than_the_graph_are_still_found(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends)
    store.recall_area("Dreamer", limit=3, budget_tokens=500)  # the graph is now in use
    version = store._graph.graph.version if store._graph else -1
    store.append(
        [LogMessage({"role": "user", "content": "Zanzibar trip booked for May."}, time.time())],
        conversation="c3",
    )
    store._form_pass()  # formed, but no new graph version published yet
    assert store._graph is not None and store._graph.graph.version == version
    recall = store.recall_area("Zanzibar trip", limit=3, budget_tokens=500)
    assert "Zanzibar trip booked for May." in [h.text for h in recall.hits]
