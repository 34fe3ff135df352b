"""Area retrieval over the formed graph, and the graph kept current incrementally."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from memory_core import LogMessage, MemoryStore, Recall
from memory_core.formation import Backends
from memory_core.graph import (
    DEFAULT_TRAVERSAL,
    AreaConfig,
    EdgeType,
    GraphSettings,
    NodeKind,
    pulse,
)
from memory_core.index.memory_graph import MemoryGraph, MemoryGraphIndex, NodeKey
from memory_core.index.nearest import codes
from memory_core.retrieval.area import retrieve_area
from memory_core.text.question import Question
from memory_core.text.words import stem

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

LATER = [
    "Ana says the red bicycle needs new brakes before the Porto trip.",
    "The Dreamer got a new logo, a sleeping owl.",
    "Book the Porto train for the second week of June.",
    "Lisbon to Porto by train takes three hours.",
]


def _messages(texts: list[str], start: float) -> list[LogMessage]:
    return [
        LogMessage({"role": "user" if i % 2 == 0 else "assistant", "content": t}, start + i)
        for i, t in enumerate(texts)
    ]


def _store(tmp_path: Path, backends: Backends, **kwargs: object) -> MemoryStore:
    store = MemoryStore(tmp_path / "m.db", backends=backends, **kwargs)  # type: ignore[arg-type]
    store.append(_messages(TURNS, 1_700_000_000), conversation="c1")
    store.form_all()
    return store


def _edge_rows(memory: MemoryGraph) -> list[tuple[object, ...]]:
    """Every edge as (src key, dst key, type, row id, weight, source key), sorted."""
    edges = memory.graph.edges()
    keys = memory.node_keys

    def key(n: int) -> object:
        return None if n < 0 else keys[n]

    return sorted(
        (
            (key(int(s)), key(int(d)), int(t), int(i), round(float(w), 6), key(int(src)))
            for s, d, t, i, w, src in zip(
                edges.src,
                edges.dst,
                edges.edge_type,
                edges.edge_id,
                edges.weight,
                edges.source,
                strict=True,
            )
        ),
        key=repr,
    )


def test_graph_holds_every_formed_node_kind(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends)
    memory = store.warm_graph()
    kinds = set(memory.graph.kinds.tolist())
    assert {NodeKind.FRAGMENT, NodeKind.CONTEXT, NodeKind.ENTITY, NodeKind.SESSION} <= kinds
    assert memory.fragments == len(TURNS)
    assert memory.vectors.shape == (len(TURNS), 384)
    assert "dreamer" in memory.aliases  # the entity, by its alias
    assert stem("bicycles") in memory.term_nodes  # a word two fragments share
    assert memory.node_keys[memory.fragment_nodes[1]] == ("fragment", 1)


def test_vectors_keep_their_codes_and_their_nodes_find_them(
    tmp_path: Path, backends: Backends
) -> None:
    """Across refreshes (one formation pass each), not only in one read of the store."""
    store = _store(tmp_path, backends)
    store.warm_graph()
    store.append(_messages(LATER, 1_700_100_000), conversation="c2")
    store.form_all()
    memory = store.published_graph()
    assert memory is not None
    rows = np.arange(memory.vectors.shape[0])
    assert memory.vectors.shape[0] == len(TURNS) + len(LATER)
    np.testing.assert_array_equal(memory.vector_of[memory.vector_nodes], rows)
    np.testing.assert_array_equal(memory.vector_codes, codes(memory.vectors))
    others = np.setdiff1d(np.arange(memory.graph.n_nodes), memory.vector_nodes)
    assert (memory.vector_of[others] == -1).all()


def test_a_question_reaches_the_fragment_and_its_correction(
    tmp_path: Path, backends: Backends
) -> None:
    store = _store(tmp_path, backends)
    recall = store.recall_area("When does the Dreamer run?", limit=4, budget_tokens=2000)
    texts = [h.text for h in recall.hits]
    assert TURNS[0] in texts and TURNS[4] in texts
    assert "Dreamer now runs every hour" in recall.context.text
    assert recall.area is not None and recall.area["graph_version"] == 0
    assert "entity:Dreamer" in recall.area["foci"]
    assert recall.area["region"]["nodes"]  # the receipt keeps the whole region


def test_formation_appends_to_the_delta_instead_of_rebuilding(
    tmp_path: Path, backends: Backends
) -> None:
    store = _store(tmp_path, backends)
    first = store.warm_graph()
    store.append(_messages(LATER[1:2], time.time()), conversation="c2")
    store.form_all()
    now = store._graph.current()
    assert now is not None and now.version == first.version + 1
    assert now.graph.base_version == first.graph.base_version  # same CSR base, a delta on top
    assert now.graph.n_delta > 0 and now.graph.out is first.graph.out
    recall = store.recall_area("Dreamer logo", limit=3, budget_tokens=500)
    assert recall.hits[0].text == LATER[1]
    # the version pinned before the append is untouched
    assert first.graph.n_delta == 0 and first.fragments == len(TURNS)
    assert first.graph.n_nodes < now.graph.n_nodes


def test_stored_questions_and_restatements_add_no_word_or_entity_edges(
    tmp_path: Path, backends: Backends
) -> None:
    """A question asked in a chat (``asked``) and an answer that restated memory
    (``restated``) tell memory nothing: they join their sessions (and stay retrievable
    by their words, at their kind's factor) but add no edge to a word or an entity and no
    use of a word, so asking about the bicycle again and again never dilutes the pulse
    from "Ana" or "bicycle" nor closes the word; incremental or read at once alike."""
    store = _store(tmp_path, backends)
    store.warm_graph()
    before = store._graph.current()
    assert before is not None
    df = dict(before.term_df)
    (source,) = next(
        store._reader.execute("SELECT id FROM fragments WHERE text = ?", (TURNS[2],))
    )
    for i in range(6):
        store.append(
            [
                LogMessage({"role": "user", "content": "What bicycle did Ana buy?"}, 1.8e9 + i),
                LogMessage(
                    {"role": "assistant", "content": "Ana bought a red bicycle yesterday."},
                    1.8e9 + i + 0.5,
                    sources=(source,),
                ),
            ],
            conversation=f"asked-{i}",
        )
        store.form_all()
    incremental = store._graph.current()
    assert incremental is not None
    fresh = MemoryGraphIndex().refresh(store._reader)
    for memory in (incremental, fresh):
        derived = {
            n
            for n in range(memory.graph.n_nodes)
            if memory.node_keys[n][0] == "fragment" and memory.act_of(np.array([n]))[0] != 0
        }
        assert len(derived) == 12
        edges = memory.graph.edges()
        reached = {
            (memory.node_keys[int(d)][0], int(t))
            for s, d, t in zip(edges.src, edges.dst, edges.edge_type, strict=True)
            if int(s) in derived
        }
        assert ("session", int(EdgeType.IN_SESSION)) in reached  # in their sessions
        assert not {kind for kind, _ in reached} & {"word", "entity"}
        into = {
            int(t) for d, t in zip(edges.dst, edges.edge_type, strict=True) if int(d) in derived
        }
        assert not into & {int(EdgeType.USES_TERM), int(EdgeType.MENTIONS)}
        assert dict(memory.term_df) == df
        assert memory.is_focus_word(stem("bicycle"))
    assert _edge_rows(fresh) == _edge_rows(incremental)


def test_a_graph_kept_current_pass_by_pass_equals_one_read_at_the_end(
    tmp_path: Path, backends: Backends
) -> None:
    store = _store(tmp_path, backends)
    store.warm_graph()
    for i, text in enumerate(LATER):  # one formation pass (and one graph append) each
        store.append(_messages([text], 1_700_100_000 + i), conversation=f"later-{i}")
        store.form_all()
    incremental = store._graph.current()
    assert incremental is not None and incremental.version == len(LATER)
    fresh = MemoryGraphIndex().refresh(store._reader)
    # the same graph, numbered in another order: compare by what each node stands for
    assert _nodes(fresh) == _nodes(incremental)
    assert _edge_rows(fresh) == _edge_rows(incremental)
    assert fresh.fragments == incremental.fragments == len(TURNS) + len(LATER)
    porto, first = ("word", stem("porto")), ("fragment", 1)
    a = _activation(fresh, [porto, first])
    b = _activation(incremental, [porto, first])
    assert a.keys() == b.keys()
    assert all(np.allclose(a[k], b[k]) for k in a)


def _nodes(memory: MemoryGraph) -> dict[NodeKey, int]:
    return {key: int(kind) for key, kind in zip(memory.node_keys, memory.graph.kinds, strict=True)}


def _activation(memory: MemoryGraph, seeds: list[NodeKey]) -> dict[NodeKey, np.ndarray]:
    index = {key: n for n, key in enumerate(memory.node_keys)}
    result = pulse(memory.graph, [{index[k]: 1.0} for k in seeds], DEFAULT_TRAVERSAL)
    return {
        memory.node_keys[int(n)]: row for n, row in zip(result.nodes, result.per_focus, strict=True)
    }


def test_the_delta_is_merged_once_it_passes_its_limit(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends, graph=GraphSettings(max_delta_edges=5))
    first = store.warm_graph()
    store.append(_messages(LATER, 1_700_100_000), conversation="c2")
    store.form_all()
    merged = store._graph.current()
    assert merged is not None and merged.graph.n_delta == 0
    assert merged.graph.base_version > first.graph.base_version
    assert _edge_rows(merged) == _edge_rows(MemoryGraphIndex().refresh(store._reader))


def test_fragments_newer_than_the_graph_are_still_found(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends)
    version = store.warm_graph().version
    store.append(_messages(["Zanzibar trip booked for May."], time.time()), conversation="c3")
    store._form_pass()  # formed, but not yet appended to the graph
    graph = store._graph.current()
    assert graph is not None and graph.version == version
    recall = store.recall_area("Zanzibar trip", limit=3, budget_tokens=500)
    assert "Zanzibar trip booked for May." in [h.text for h in recall.hits]


def test_a_query_pinned_to_an_old_version_ignores_what_was_added_since(
    tmp_path: Path, backends: Backends
) -> None:
    store = _store(tmp_path, backends)
    old = store.warm_graph()
    store.append(_messages(LATER, 1_700_100_000), conversation="c2")
    store.form_all()
    vector = backends.encoder.encode(["Porto train brakes"])[0]
    question = Question.of("Porto train brakes").encoding(lambda: vector)
    result = retrieve_area(store._reader, old, question, limit=20)
    assert result.graph_version == old.version
    assert result.activation is not None
    assert int(result.activation.nodes.max()) < old.graph.n_nodes
    current = store._graph.current()
    assert current is not None
    later_ids = {f for f, n in current.fragment_nodes.items() if n >= old.graph.n_nodes}
    assert later_ids  # ranked by BM25 only: the old version has no nodes for them
    assert all(s.imputed for s in result.scores if s.fragment_id in later_ids)


def test_each_ranked_fragment_reports_its_own_cosine_and_kind_factor(
    tmp_path: Path, backends: Backends
) -> None:
    """The cosine a fragment reports is its vector's with the question's (None for a
    fragment newer than the graph: imputed), and its factor is its kind's."""
    store = _store(tmp_path, backends)
    old = store.warm_graph()
    store.append(_messages(LATER, 1_700_100_000), conversation="c2")
    store.form_all()
    vector = backends.encoder.encode(["Porto train brakes"])[0]
    question = Question.of("Porto train brakes").encoding(lambda: vector)
    result = retrieve_area(store._reader, old, question, limit=20)
    scoring = store.graph_settings.scoring
    assert any(s.imputed for s in result.scores) and any(not s.imputed for s in result.scores)
    for score in result.scores:
        assert score.factor == scoring.factor(score.kind)
        if score.imputed:
            assert score.cosine is None
            continue
        row = old.vector_of[old.fragment_nodes[score.fragment_id]]
        assert score.cosine == pytest.approx(float(old.vectors[row] @ vector), abs=1e-6)


def test_a_failed_refresh_is_followed_by_a_full_read(
    tmp_path: Path, backends: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path, backends)
    index = store._graph
    first = store.warm_graph()
    store.append(_messages(LATER, 1_700_100_000), conversation="c2")

    def broken(*args: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(index, "_read_edges", broken)
    with pytest.raises(RuntimeError):
        store.form_all()
    monkeypatch.undo()
    again = store.warm_graph()  # reads everything again, as a new version
    assert again.version > first.version and again.graph.n_delta == 0
    assert again.fragments == len(TURNS) + len(LATER)
    assert _edge_rows(again) == _edge_rows(MemoryGraphIndex().refresh(store._reader))


def test_the_wave_operator_ranks_the_area_it_injects_from(
    tmp_path: Path, backends: Backends
) -> None:
    settings = GraphSettings(area=AreaConfig(operator="wave"))
    store = _store(tmp_path, backends, graph=settings)
    recall = store.recall_area("When does the Dreamer run?", limit=4, budget_tokens=2000)
    assert recall.area is not None and recall.area["operator"] == "wave"
    assert TURNS[0] in [h.text for h in recall.hits]
    report = store.explain_area("When does the Dreamer run?", limit=4)
    assert report.area is not None and len(report.area.nodes) > 1


# --- the conversation around a fragment ------------------------------------------------


def _said(turns: list[tuple[str, str]], start: float) -> list[LogMessage]:
    """``(speaker, text)`` turns as messages, the first speaker the user."""
    first = turns[0][0]
    return [
        LogMessage(
            {"role": "user" if who == first else "assistant", "name": who, "content": text},
            start + i,
        )
        for i, (who, text) in enumerate(turns)
    ]


PAINTING = [
    ("Caroline", "We swam in the lake near the campsite every morning."),
    ("Melanie", "The lake was freezing when we went in June."),
    ("Caroline", "Is this your own painting of the lake at dawn?"),
    ("Melanie", "Yes, I made it last summer at my cousin's cabin in the hills."),
    ("Caroline", "The painting class at the library starts on Monday."),
    ("Melanie", "I might join the painting class if it is not too late."),
    ("Caroline", "My brother is moving to Berlin for a new job in March."),
    ("Melanie", "Berlin in March is cold, tell him to pack a warm coat."),
    ("Caroline", "Someone left a painting of a boat on the lake shore."),
    ("Melanie", "A boat on a lake is an odd thing to paint and abandon."),
]


def _formed(path: Path, backends: Backends, turns: list[tuple[str, str]]) -> None:
    store = MemoryStore(path, backends=backends)
    store.append(_said(turns, 1_700_000_000), conversation="c1")
    store.form_all()
    store.close()


def _recall(path: Path, backends: Backends, question: str, **scoring: float) -> Recall:
    """``question`` asked of the memory at ``path`` under ``retrieval.scoring`` as given."""
    settings = GraphSettings.model_validate({"scoring": scoring})
    store = MemoryStore(path, backends=backends, graph=settings)
    try:
        return store.recall_area(question, limit=8, budget_tokens=2000)
    finally:
        store.close()


def _ranked(path: Path, backends: Backends, question: str, **scoring: float) -> list[str]:
    return [h.text for h in _recall(path, backends, question, **scoring).hits]


def test_the_turn_beside_the_one_with_the_question_words_is_brought_up(
    tmp_path: Path, backends: Backends
) -> None:
    path = tmp_path / "m.db"
    _formed(path, backends, PAINTING)
    answer = PAINTING[3][1]  # shares no content word with the question
    question = "Where was the lake painting done?"
    alone = _ranked(path, backends, question, context=0.0, untold=1.0)
    beside = _ranked(path, backends, question, context=0.4)
    assert beside.index(answer) < (alone.index(answer) if answer in alone else 99)
    assert answer in alone  # found either way (its document holds the question's words
    # it answers, lent by the turn before), but only the context puts it right after it
    asking = _ranked(path, backends, question, context=0.4, untold=1.0)
    assert asking.index(answer) == 1 < alone.index(answer)
    # ... or above it: the question turn tells nothing, so it is set back (``untold``),
    # yet lends its whole score to the turn that answers it
    assert beside.index(answer) == 0 < alone.index(answer)
    recall = _recall(path, backends, question)
    assert recall.area is not None
    assert all("context" in f["terms"] for f in recall.area["fragments"])  # reported


HOBBIES = [
    ("Caroline", "I love painting landscapes and long hikes in the mountains."),
    ("Melanie", "I love painting too, and pottery on the weekends."),
    ("Caroline", "Painting helps me relax after work."),
    ("Melanie", "Painting with the kids is my favourite part of Sunday."),
]


def test_a_question_naming_one_speaker_prefers_what_that_speaker_said(
    tmp_path: Path, backends: Backends
) -> None:
    path = tmp_path / "m.db"
    _formed(path, backends, HOBBIES)
    carolines = {t for who, t in HOBBIES if who == "Caroline"}
    melanies = {t for who, t in HOBBIES if who == "Melanie"}
    assert set(_ranked(path, backends, "What does Caroline love painting?")[:2]) == carolines
    assert set(_ranked(path, backends, "Why does melanie like painting?")[:2]) == melanies
    # both named: no speaker is preferred (every factor stays the kind's, 1 here)
    both = _recall(path, backends, "What do Caroline and Melanie paint?")
    assert both.area is not None
    assert {f["factor"] for f in both.area["fragments"]} == {1.0}
    named = _recall(path, backends, "What does Caroline love painting?")
    assert named.area is not None
    assert {f["factor"] for f in named.area["fragments"]} == {1.0, 0.6}
    off = _ranked(path, backends, "What does Caroline love painting?", other_speaker=1.0)
    assert set(off) == {t for _, t in HOBBIES}  # off: every turn found, none set back


def test_a_speaker_called_by_a_function_word_is_not_named_by_it(
    tmp_path: Path, backends: Backends
) -> None:
    path = tmp_path / "m.db"
    turns = [("What", "I love painting boats."), ("Caroline", "I love painting horses.")]
    _formed(path, backends, turns)
    named = _recall(path, backends, "What does Caroline love painting?")
    assert named.area is not None
    assert named.hits[0].text == "I love painting horses."
    assert {f["factor"] for f in named.area["fragments"]} == {1.0, 0.6}  # Caroline's alone


def test_a_speaker_named_in_the_possessive_is_named(tmp_path: Path, backends: Backends) -> None:
    path = tmp_path / "m.db"
    _formed(path, backends, HOBBIES)
    for question in ("What do Melanie's kids love painting?", "What do Melanie\u2019s kids paint?"):
        recall = _recall(path, backends, question)
        assert recall.area is not None
        by_id = {f["id"]: f["factor"] for f in recall.area["fragments"]}
        factors = {h.text: by_id[h.fragment_id] for h in recall.hits}
        assert {factors[t] for who, t in HOBBIES if who == "Melanie"} == {1.0}
        assert {factors[t] for who, t in HOBBIES if who == "Caroline"} == {0.6}


UNTOLD = [
    ("Caroline", "Cool! What did the painting of the lake look like?"),
    ("Melanie", "It shows the lake at dawn, with a small red boat near the shore."),
    ("Caroline", "Wow! How long did the painting of the lake take?"),
]


def test_a_turn_that_tells_nothing_is_set_back(tmp_path: Path, backends: Backends) -> None:
    path = tmp_path / "m.db"
    _formed(path, backends, UNTOLD)
    question = "What does the painting of the lake show?"
    recall = _recall(path, backends, question)
    assert recall.area is not None
    by_id = {f["id"]: f["factor"] for f in recall.area["fragments"]}
    factors = {h.text: by_id[h.fragment_id] for h in recall.hits}
    assert factors == {UNTOLD[0][1]: 0.6, UNTOLD[1][1]: 1.0, UNTOLD[2][1]: 0.6}
    assert recall.hits[0].text == UNTOLD[1][1]  # the turn that tells
    off = _recall(path, backends, question, untold=1.0)
    assert off.area is not None
    assert {f["factor"] for f in off.area["fragments"]} == {1.0}  # off: none set back


def test_a_speaker_called_by_a_nickname_is_the_speaker_named(
    tmp_path: Path, backends: Backends
) -> None:
    path = tmp_path / "m.db"
    turns = [
        ("Katarzyna", "I love painting horses in the countryside."),
        ("Bruno", "Hey Kate! I love painting boats in the harbour."),
        ("Katarzyna", "Horses are my favourite thing to paint."),
        ("Bruno", "Boats are mine, I paint them every weekend."),
    ]
    _formed(path, backends, turns)
    recall = _recall(path, backends, "What does Kate love painting?")
    assert recall.area is not None
    assert recall.area.get("named") == {"Kate": ["Katarzyna"]}
    by_id = {f["id"]: f["factor"] for f in recall.area["fragments"]}
    factors = {h.text: by_id[h.fragment_id] for h in recall.hits}
    assert {t: factors[t] for _, t in turns[::2]} == {t: 1.0 for _, t in turns[::2]}
    assert {t: factors[t] for _, t in turns[1::2]} == {t: 0.6 for _, t in turns[1::2]}


# --- how the explanation names nodes ------------------------------------------------------


def test_the_explained_area_names_sessions_and_types_entities(
    tmp_path: Path, backends: Backends
) -> None:
    """A session of a conversation whose id is only a hash is called by what it is
    about and its day; an entity node carries the type formation gave it."""
    opaque = "c3a7f19c40c62e9d"
    store = MemoryStore(tmp_path / "m.db", backends=backends)
    store.append(_said(_TRIP, 1_712_000_000), conversation=opaque)
    store.form_all()
    report = store.explain_area("Where does Ana live?", limit=8)
    assert report.area is not None
    nodes = [n.model_dump() for n in report.area.nodes]
    sessions = [n["label"] for n in nodes if n["kind"] == "session"]
    assert sessions and all(opaque not in label for label in sessions), sessions
    assert all(label.endswith(" · 2024-04-01") for label in sessions), sessions
    assert all(label.startswith("chat about ") for label in sessions), sessions
    types = {n["label"]: n["type"] for n in nodes if n["kind"] == "entity"}
    assert types.get("Lisbon") == "LOC", types
    assert all(n.get("type") is None for n in nodes if n["kind"] != "entity")
    fragment = next(n for n in nodes if n["kind"] == "fragment")
    assert fragment["conversation_id"] == opaque
    assert fragment["conversation_label"] == sessions[0].split(" · ")[0]


_TRIP = [
    ("Ana", "I live in Lisbon with my brother Rui, near the river."),
    ("Bot", "Lisbon is lovely, Ana. Do you like living there?"),
    ("Ana", "Yes, and Rui works as a nurse at the hospital in Lisbon."),
]
