"""The in-memory BM25 beside the graph gives FTS5's bm25() scores (memory_core.index.lexical)
when its documents are the FTS5 rows (``retrieval.lexical_context: false``); with the default,
each document also holds the words of the turn said just before it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from memory_core import LogMessage, MemoryStore
from memory_core.formation import Backends
from memory_core.graph import GraphSettings
from memory_core.index import lexical, memory_graph
from memory_core.index.lexical import LexicalView
from memory_core.retrieval import bm25 as retrieval
from memory_core.storage import Connection
from memory_core.storage.tables import fragments
from memory_core.text.question import Question
from memory_core.text.words import query_terms

AS_FTS5 = GraphSettings(lexical_context=False)
"""Documents exactly the FTS5 rows: what the scores are compared against."""

WORDS = [
    "bicycle", "bicycles", "Bicycle", "café", "cafe", "CAFÉS", "running", "runs", "ran",
    "Porto", "porto", "Zürich", "zurich", "naïve", "東京", "寿司", "Москва", "москве",
    "42", "2023", "x", "dreamer", "dreams", "dreaming", "bees", "bee", "keeps", "keeping",
    "red", "reddish", "train", "trains", "trained", "Ana", "ana", "Lisbon", "LISBON",
]  # fmt: skip
SPEAKERS = ["Ana", "Bruno", "Zoë", None]


def _turns(rng: random.Random, n: int) -> list[LogMessage]:
    turns = []
    for i in range(n):
        words = rng.choices(WORDS, k=rng.randint(1, 14))
        message: dict[str, object] = {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": " ".join(words) + rng.choice([".", "!", "?", ", ok."]),
        }
        speaker = rng.choice(SPEAKERS)
        if speaker is not None:
            message["name"] = speaker
        turns.append(LogMessage(message, 1_700_000_000 + i))
    return turns


def indexed_search_scores(
    conn: Connection, index: LexicalView, question: str, *, limit: int
) -> list[tuple[int, float]]:
    return retrieval.indexed_search_scores(conn, index, Question.of(question), limit=limit)


def search_scores(conn: Connection, question: str, *, limit: int) -> list[tuple[int, float]]:
    return retrieval.search_scores(conn, Question.of(question), limit=limit)


def _fts5(store: MemoryStore, question: str, limit: int) -> dict[int, float]:
    return dict(fragments.search_scores(store._reader, query_terms(question), limit=limit))


def _questions(rng: random.Random) -> list[str]:
    extra = ["unknownword", "Bruno", "Zoë", "the", "of", "ok"]
    return [" ".join(rng.choices(WORDS + extra, k=rng.randint(1, 6))) for _ in range(40)]


@pytest.mark.parametrize("seed", range(4))
def test_the_scores_are_fts5s_while_memory_grows(
    tmp_path: Path, backends: Backends, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten formation passes, the graph published after each; tiny rebuild thresholds so
    that queries read the term-major base, the middle copy and the tail, alone and
    together."""
    monkeypatch.setattr(lexical, "_MIN_DELTA_POSTINGS", 16)
    monkeypatch.setattr(lexical, "_TAIL_POSTINGS", 24 + 24 * (seed % 2))
    rng = random.Random(seed)
    store = MemoryStore(tmp_path / "m.db", backends=backends, graph=AS_FTS5)
    history: list[LogMessage] = []
    layouts = []
    for batch in range(10):
        history += _turns(rng, rng.randint(1, 12) if batch else 20)
        store.append(history, conversation="c")
        store.form_all()
        memory = store.warm_graph()
        view = memory.lexical
        assert view.documents == memory.fragments
        assert view.base.docs <= view.middle.docs <= view.documents
        layouts.append(
            (view.base.docs, view.middle.docs - view.base.docs, view.documents - view.middle.docs)
        )
        for question in _questions(rng):
            expected = _fts5(store, question, limit=1000)
            tokenize = fragments.fts_tokenizer(store._reader)
            phrases = [tokenize(t, True) for t in query_terms(question)]
            found = memory.lexical.search(phrases, 1000)
            assert found is not None
            assert dict(found).keys() == expected.keys(), (batch, question)
            for fid, score in found:
                assert score == pytest.approx(expected[fid], rel=1e-9, abs=1e-12)
            scores = [s for _, s in found]
            assert scores == sorted(scores, reverse=True)
            top = indexed_search_scores(store._reader, memory.lexical, question, limit=5)
            fts_top = search_scores(store._reader, question, limit=5)
            assert [s for _, s in top] == pytest.approx([s for _, s in fts_top], rel=1e-9)
    store.close()
    assert all(any(layout[part] for layout in layouts) for part in range(3)), layouts


def test_superseded_fragments_are_dropped_as_fts5_search_drops_them(
    tmp_path: Path, backends: Backends
) -> None:
    store = MemoryStore(tmp_path / "m.db", backends=backends, graph=AS_FTS5)
    others = [f"nothing to see in message number {i}" for i in range(30)]
    reds = [f"the red bicycle number {i}" for i in range(12)]
    first = [
        LogMessage({"role": "user", "content": text}, 1_700_000_000 + i)
        for i, text in enumerate(others + reds)
    ]
    store.append(first, conversation="c")
    store.form_all()
    boat = LogMessage({"role": "user", "content": "a blue boat"}, 1_700_000_100)
    store.append([*first[:32], boat], conversation="c")  # an edit: ten red turns go
    store.form_all()
    memory = store.warm_graph()
    live = indexed_search_scores(store._reader, memory.lexical, "red bicycle", limit=3)
    expected = search_scores(store._reader, "red bicycle", limit=3)
    assert [fid for fid, _ in live] == [fid for fid, _ in expected]
    assert [s for _, s in live] == pytest.approx([s for _, s in expected], rel=1e-9)
    assert len(live) == 2  # only the two red turns before the edit are live
    everything = memory.lexical.search([["red"], ["bicycl"]], 100)
    assert everything is not None and len(everything) == 12  # the index keeps every row
    store.close()


def test_a_word_fts5_reads_as_several_tokens_is_left_to_fts5(
    tmp_path: Path, backends: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore(tmp_path / "m.db", backends=backends, graph=AS_FTS5)
    store.append(_turns(random.Random(7), 20), conversation="c")
    store.form_all()
    memory = store.warm_graph()
    assert memory.lexical.search([["red"], ["bicycl", "train"]], 10) is None
    assert memory.lexical.search([[], ["zzz"]], 10) == []
    real = fragments.fts_tokenizer

    def split_red(conn: object, *args: object) -> fragments.Tokenizer:
        tokens = real(store._reader)
        return lambda text, query: ["r", "ed"] if text == "red" else tokens(text, query)

    monkeypatch.setattr(fragments, "fts_tokenizer", split_red)
    question = "red bicycle train"
    assert indexed_search_scores(store._reader, memory.lexical, question, limit=5) == search_scores(
        store._reader, question, limit=5
    )
    store.close()


def test_an_empty_memory_and_an_empty_question_find_nothing(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m.db", graph=AS_FTS5)
    memory = store.warm_graph()
    assert memory.lexical.documents == 0
    assert memory.lexical.search([["anything"]], 5) == []
    assert indexed_search_scores(store._reader, memory.lexical, "", limit=5) == []
    assert indexed_search_scores(store._reader, memory.lexical, "anything at all", limit=5) == []
    store.close()


@pytest.mark.parametrize("seed", range(3))
def test_fragments_formed_after_the_version_score_as_fts5_scores_them(
    tmp_path: Path, backends: Backends, seed: int
) -> None:
    """Formed but not yet in the graph: found through FTS5, scored with the counts of the
    version and of the newer rows together, which is what FTS5 holds."""
    rng = random.Random(seed)
    store = MemoryStore(tmp_path / "m.db", backends=backends, graph=AS_FTS5)
    history = _turns(rng, 30)
    store.append(history, conversation="c")
    store.form_all()
    memory = store.warm_graph()
    store.append(history + _turns(rng, 8), conversation="c")
    store._form_pass()  # formed, not yet published to the graph
    assert store._graph.current() is memory
    for question in _questions(rng)[:20]:
        found = indexed_search_scores(store._reader, memory.lexical, question, limit=200)
        expected = search_scores(store._reader, question, limit=200)
        assert dict(found).keys() == dict(expected).keys(), question
        for fid, score in found:
            assert score == pytest.approx(dict(expected)[fid], rel=1e-9, abs=1e-12)
    last = memory.lexical.last_fragment_id
    newer = {fid for fid, _, _ in fragments.formed_after(store._reader, last, 99)}
    assert set(memory.lexical.newer_tokens) == newer  # tokenized once, by the first lookup
    store.close()


@pytest.mark.parametrize("limit", ["NEWER_ROWS", "NEWER_CHARS"])
def test_a_graph_lagging_by_many_rows_is_searched_by_fts5(
    tmp_path: Path, backends: Backends, monkeypatch: pytest.MonkeyPatch, limit: str
) -> None:
    """Past NEWER_ROWS rows or NEWER_CHARS characters formed since the version (a pasted
    megabyte), the lookup does not tokenize them: FTS5 answers."""
    monkeypatch.setattr(retrieval, limit, 3 if limit == "NEWER_ROWS" else 40)
    store = MemoryStore(tmp_path / "m.db", backends=backends, graph=AS_FTS5)
    store.append(_turns(random.Random(11), 10), conversation="c")
    store.form_all()
    memory = store.warm_graph()
    store.append(_turns(random.Random(12), 6), conversation="d")
    store._form_pass()  # six rows the graph has not taken in: more than either limit
    asked: list[str] = []
    real = retrieval.search_scores

    def spy(conn: object, question: Question, *, limit: int) -> list[tuple[int, float]]:
        asked.append(question.text)
        return real(store._reader, question, limit=limit)

    monkeypatch.setattr(retrieval, "search_scores", spy)
    found = indexed_search_scores(store._reader, memory.lexical, "red train", limit=5)
    assert asked == ["red train"]
    assert found == real(store._reader, Question.of("red train"), limit=5)
    store.close()


def _chat(texts: list[str], start: float = 1_700_000_000) -> list[LogMessage]:
    return [
        LogMessage({"role": "user" if i % 2 == 0 else "assistant", "content": t}, start + i)
        for i, t in enumerate(texts)
    ]


def test_a_turn_is_found_by_the_words_of_the_turn_it_answers(
    tmp_path: Path, backends: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_graph, "_CONVERSATIONS_KEPT", 2)
    store = MemoryStore(tmp_path / "m.db", backends=backends)
    asked = "Is this your own painting of the lake?"
    answer = "Yes, I made it last summer at the cabin."
    store.append(_chat([asked, answer]), conversation="c1")
    store.form_all()
    for name in ("c2", "c3", "c4"):  # the cap: c1's last turn is forgotten
        store.append(_chat([f"a note about {name}"], 1_700_000_100), conversation=name)
    store.form_all()
    store.append(
        _chat([asked, answer, "Painted boats are harder than lakes."]), conversation="c1"
    )
    store.form_all()
    memory = store.warm_graph()
    tokenize = fragments.fts_tokenizer(store._reader)
    hits = store.recall_area(asked, limit=10, budget_tokens=900).hits
    ids = {h.text: h.fragment_id for h in hits}
    found = memory.lexical.search([tokenize("painting", True)], 10)
    assert found is not None
    assert ids[answer] in {fid for fid, _ in found}  # lent "painting" by the turn before it
    boats = memory.lexical.search([tokenize("cabin", True)], 10)
    assert boats is not None
    assert {fid for fid, _ in boats} == {ids[answer]}  # c1 was forgotten: nothing lent
    fts = search_scores(store._reader, "painting", limit=10)
    assert ids[answer] not in {fid for fid, _ in fts}  # FTS5's rows stay the text itself
    store.close()


def test_a_long_turn_lends_the_next_one_only_its_first_words(
    tmp_path: Path, backends: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_graph, "_LENT_WORDS", 5)
    store = MemoryStore(tmp_path / "m.db", backends=backends)
    pasted = " ".join(f"word{i}" for i in range(2000)) + " zebra"
    store.append(_chat([pasted, "Thanks, that is plenty."]), conversation="c1")
    store.form_all()
    memory = store.warm_graph()
    tokenize = fragments.fts_tokenizer(store._reader)
    thanks = next(
        h.fragment_id
        for h in store.recall_area("plenty", limit=5, budget_tokens=900).hits
        if h.text.startswith("Thanks")
    )
    first = memory.lexical.search([tokenize("word0", True)], 10)
    last = memory.lexical.search([tokenize("zebra", True)], 10)
    assert first is not None and thanks in {fid for fid, _ in first}  # lent
    assert last is not None and thanks not in {fid for fid, _ in last}  # past the cap
    store.close()


def _words_of(store: MemoryStore, word: str) -> set[int]:
    memory = store.warm_graph()
    tokenize = fragments.fts_tokenizer(store._reader)
    found = memory.lexical.search([tokenize(word, True)], 10)
    assert found is not None
    return {fid for fid, _ in found}


def _ids(store: MemoryStore) -> dict[str, int]:
    return {
        str(text): int(fid)
        for fid, text in store._reader.execute("SELECT id, canonical FROM fragments")
    }


def test_a_turn_is_found_by_the_words_its_own_voice_said_before_it(
    tmp_path: Path, backends: Backends
) -> None:
    store = MemoryStore(tmp_path / "m.db", backends=backends)
    told = "Yesterday I took the kids to the dinosaur museum."
    asked = "What did they like best?"
    went_on = "They were stoked about the bones."
    store.append(_chat([told, asked, went_on]), conversation="c1")
    store.form_all()
    ids = _ids(store)
    museum = _words_of(store, "museum")
    # the reply lends its turn before; the user's next turn gets its own voice's words
    assert {ids[asked], ids[went_on]} <= museum
    fts = search_scores(store._reader, "museum", limit=10)
    assert {fid for fid, _ in fts} == {ids[told]}  # FTS5's rows stay the text itself
    store.close()


def test_named_speakers_are_voices_of_their_own_and_a_voice_lends_only_in_its_conversation(
    tmp_path: Path, backends: Backends
) -> None:
    store = MemoryStore(tmp_path / "m.db", backends=backends)

    def said(name: str, text: str, at: float) -> LogMessage:
        return LogMessage({"role": "user", "name": name, "content": text}, at)

    store.append(
        [
            said("Ana", "I adopted a grey kitten on Sunday.", 1_700_000_000),
            said("Bea", "My brother moved to Lisbon.", 1_700_000_001),
            said("Caio", "Nice weather today.", 1_700_000_002),
            said("Ana", "She sleeps on my keyboard all day.", 1_700_000_003),
        ],
        conversation="group",
    )
    store.append([said("Ana", "Work was long.", 1_700_000_010)], conversation="other")
    store.form_all()
    ids = _ids(store)
    kitten = _words_of(store, "kitten")
    # Ana's later turn goes on about the kitten; Caio's only answers Bea (the turn before)
    assert ids["She sleeps on my keyboard all day."] in kitten
    assert ids["Nice weather today."] not in kitten
    assert ids["Nice weather today."] in _words_of(store, "lisbon")
    assert ids["Work was long."] not in kitten | _words_of(store, "keyboard")
    store.close()


def test_voices_are_remembered_for_the_latest_conversations_only(
    tmp_path: Path, backends: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_graph, "_CONVERSATIONS_KEPT", 2)
    store = MemoryStore(tmp_path / "m.db", backends=backends)
    store.append(_chat(["My violin teacher retired."]), conversation="c1")
    store.form_all()
    for name in ("c2", "c3"):  # each holds two voices: c1's is forgotten
        store.append(_chat([f"a note about {name}", "noted"], 1_700_000_100), conversation=name)
        store.form_all()
    store.append(_chat(["Anyway.", "ok"], 1_700_000_200), conversation="c1")
    store.form_all()
    ids = _ids(store)
    assert _words_of(store, "violin") == {ids["My violin teacher retired."]}
    store.close()
