"""Formation acceptance: contexts across sessions, linking, homonyms, change vs conflict,
LLM backends at the network edge, and durability under a kill."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core import LogMessage, MemoryStore
from memory_core.formation import Backends, FormationConfig
from memory_core.formation.models.llm import LiteLLMGenerator
from memory_core.formation.models.llm_stages import LLMNormaliser, LLMRelationExtractor
from proxy.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent

GARDEN_1 = [
    "My tomato plants in the garden finally have flowers.",
    "Tomatoes love sun, water them at the base every morning.",
    "I added compost to the vegetable beds last weekend.",
    "Compost and mulch will help your tomato garden a lot.",
]
CAR = [
    "My car makes a grinding noise when I brake.",
    "That sounds like worn brake pads, get the car to a mechanic.",
    "The mechanic said the brake discs need replacing too.",
    "Replacing discs and pads together is normal for a car.",
]
MOVIE = [
    "We watched Dune Part Two at the cinema last night.",
    "Did you like the film? The desert scenes are stunning.",
    "The soundtrack in the movie was incredible.",
    "Hans Zimmer scored that film, his music is always epic.",
]
GARDEN_2 = [
    "Back to my garden: the tomatoes are turning red now.",
    "Great, pick the tomatoes when they are fully red and firm.",
    "Should I prune the tomato plants before autumn?",
    "Yes, prune the lower leaves of the tomato plants to keep them healthy.",
]


def _store(tmp_path: Path, backends: Backends, name: str = "m.db") -> MemoryStore:
    return MemoryStore(tmp_path / name, backends=backends)


def _say(store: MemoryStore, conversation: str, turns: list[str], t0: float) -> None:
    messages = [
        LogMessage({"role": "user" if i % 2 == 0 else "assistant", "content": t}, t0 + i)
        for i, t in enumerate(turns)
    ]
    store.append(messages, conversation=conversation, source="ingest")
    store.form_all()


def _query(store: MemoryStore, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    return list(store._reader.execute(sql, args))


def _count(conn: apsw.Connection, table: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


def _primary(store: MemoryStore, text: str) -> int:
    rows = _query(
        store,
        "SELECT fc.context_id FROM fragments f JOIN fragment_contexts fc ON fc.fragment_id = f.id"
        " WHERE fc.is_primary = 1 AND f.text = ?",
        text,
    )
    assert len(rows) == 1, text
    return int(rows[0][0])


def test_a_topic_resumed_in_a_later_conversation_joins_its_context(
    tmp_path: Path, backends: Backends
) -> None:
    store = _store(tmp_path, backends)
    _say(store, "monday", GARDEN_1 + CAR, 1_700_000_000)
    _say(store, "friday", MOVIE + GARDEN_2, 1_700_400_000)
    garden = {_primary(store, t) for t in GARDEN_1 + GARDEN_2}
    car = {_primary(store, t) for t in CAR}
    movie = {_primary(store, t) for t in MOVIE}
    assert len(garden) == 1 and len(car) == 1 and len(movie) == 1
    assert garden.isdisjoint(car | movie) and car != movie
    (context,) = [c for c in store.contexts() if c.id in garden]
    assert context.conversations == ["monday", "friday"]
    assert context.segments == 2


def test_a_fragment_about_two_topics_belongs_to_both(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends)
    _say(store, "monday", GARDEN_1 + CAR, 1_700_000_000)
    _say(store, "tuesday", ["My car brakes squeal and my tomato plants wilt."], 1_700_100_000)
    rows = _query(
        store,
        "SELECT fc.context_id, fc.is_primary FROM fragments f"
        " JOIN fragment_contexts fc ON fc.fragment_id = f.id WHERE f.conversation_id = 'tuesday'",
    )
    contexts = {cid for cid, _ in rows}
    assert {_primary(store, GARDEN_1[0]), _primary(store, CAR[0])} <= contexts
    assert sum(p for _, p in rows) == 1  # one primary, the others secondary


def test_structural_links_between_fragments(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends)
    _say(
        store,
        "c",
        [
            "Which day is the match?",
            "Saturday at noon.",
            "No, it moved to Sunday.",
            "That works for me.",
        ],
        1_700_000_000,
    )
    links = _query(
        store,
        "SELECT a.text, l.kind, b.text FROM fragment_links l JOIN fragments a ON a.id = l.src"
        " JOIN fragments b ON b.id = l.dst WHERE l.kind != 'next'",
    )
    assert ("Saturday at noon.", "answers", "Which day is the match?") in links
    assert ("No, it moved to Sunday.", "corrects", "Saturday at noon.") in links
    assert ("That works for me.", "depends_on", "No, it moved to Sunday.") in links


def test_an_alias_links_to_its_entity(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends)
    _say(
        store,
        "c1",
        ["My colleague Robert Smith, but everyone calls him Bob, joined the team."],
        1_700_000_000,
    )
    _say(store, "c2", ["Yesterday Bob sent me the quarterly report."], 1_700_100_000)
    (robert,) = store.entities(name="Robert Smith")
    assert {a.alias for a in robert.aliases} >= {"Robert Smith", "Bob"}
    mentions = _query(store, "SELECT surface, entity_id FROM mentions WHERE surface = 'Bob'")
    assert mentions and all(entity == robert.id for _, entity in mentions)


def test_homonyms_stay_apart(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends)
    _say(
        store,
        "cars",
        [
            "I test-drove the new Jaguar at the dealership, its V8 engine purrs.",
            "The Jaguar has leather seats and a top speed of 250 km/h.",
            "I might lease the Jaguar, the car's monthly payment is fair.",
        ],
        1_700_000_000,
    )
    _say(
        store,
        "zoo",
        [
            "At the zoo we watched the Jaguar sleeping on a branch, a big spotted "
            "cat hunting at night."
        ],
        1_700_100_000,
    )
    jaguars = store.entities(name="Jaguar")
    assert len(jaguars) == 2
    by_mentions = sorted(jaguars, key=lambda e: e.mentions)
    assert [e.mentions for e in by_mentions] == [1, 3]
    reasons = _query(
        store,
        "SELECT link_reason FROM mentions m JOIN fragments f"
        " ON f.id = m.fragment_id WHERE f.conversation_id = 'zoo'",
    )
    assert reasons[0][0].startswith("homonym of entity")


def test_a_correction_is_a_change_with_both_sides_kept(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends)
    _say(store, "c1", ["I live in Lisbon with my dog Rex."], 1_700_000_000)
    _say(store, "c2", ["Actually, I moved to Porto last month."], 1_700_100_000)
    lives = [r for r in store.relations(entity="user") if r.predicate == "lives_in"]
    assert [(r.object, r.status) for r in lives] == [
        ("Lisbon", "superseded"),
        ("Porto", "active"),
    ]
    assert lives[1].mutation.kind == "change"
    assert lives[1].mutation.other == lives[0].id
    assert lives[0].source.fragment_text == "I live in Lisbon with my dog Rex."


def test_a_contradiction_is_a_conflict_left_unresolved(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends)
    _say(store, "c1", ["Ana works at Banco Azul."], 1_700_000_000)
    _say(store, "c2", ["Ana works at Banco Azul, she loves it."], 1_700_050_000)
    _say(store, "c3", ["Ana works at Padaria Sol."], 1_700_100_000)
    works = [r for r in store.relations(entity="Ana") if r.predicate == "works_at"]
    assert [r.mutation.kind for r in works] == ["new", "reaffirmation", "conflict"]
    assert [r.status for r in works] == ["disputed", "disputed", "disputed"]
    assert works[2].mutation.other == works[1].id
    assert len(works) == 3  # parallel relations with other sources stay separate rows


def _llm_backends(backends: Backends, upstream: FakeUpstream, **stages: Any) -> Backends:
    generator = LiteLLMGenerator(
        provider="openai", model="fake-llm", api_base=upstream.url, api_key="test", timeout_s=10
    )
    built: dict[str, Any] = {
        "normaliser": LLMNormaliser(generator),
        "relations": LLMRelationExtractor(generator),
    }
    return replace(backends, **{k: built[k] for k in stages})


def _translator(body: dict[str, Any]) -> str:
    prompt = json.dumps(body["messages"], ensure_ascii=False)
    if "Alemanha" in prompt:
        return json.dumps(
            {
                "language": "pt",
                "english": "Germany won the match last night.",
                "names": [{"original": "Alemanha", "english": "Germany"}],
            }
        )
    if "Alemania" in prompt:
        return json.dumps(
            {
                "language": "es",
                "english": "I travelled to Germany in May.",
                "names": [{"original": "Alemania", "english": "Germany"}],
            }
        )
    text = body["messages"][-1]["content"]
    english = next(line for line in reversed(text.splitlines()) if line.strip())
    return json.dumps({"language": "en", "english": english, "names": []})


async def test_other_language_mentions_link_to_the_entity(
    tmp_path: Path, backends: Backends, upstream: FakeUpstream
) -> None:
    upstream.keep_alive = False  # litellm's cached sync clients must hold no socket
    upstream.script.extend([_translator] * 20)
    store = MemoryStore(
        tmp_path / "m.db", backends=_llm_backends(backends, upstream, normaliser=True)
    )
    store.append(
        [LogMessage({"role": "user", "content": "We watched Germany play Spain."}, 1_700_000_000)],
        conversation="c1",
    )
    store.append(
        [LogMessage({"role": "user", "content": "A Alemanha ganhou o jogo ontem."}, 1_700_100_000)],
        conversation="c2",
    )
    store.append(
        [LogMessage({"role": "user", "content": "Viajé a Alemania en mayo."}, 1_700_200_000)],
        conversation="c3",
    )
    await asyncio.to_thread(store.form_all)
    (germany,) = store.entities(name="Germany")
    aliases = {(a.alias, a.lang) for a in germany.aliases}
    assert {("Alemanha", "pt"), ("Alemania", "es")} <= aliases
    assert store.entities(name="Alemanha")[0].id == germany.id
    fragments = _query(store, "SELECT lang, canonical, translated FROM fragments ORDER BY id")
    assert fragments[1] == ("pt", "Germany won the match last night.", 1)


async def test_malformed_llm_output_is_rejected_and_recorded(
    tmp_path: Path, backends: Backends, upstream: FakeUpstream
) -> None:
    upstream.keep_alive = False
    upstream.script.extend(["this is not JSON", '{"relations": [{"subject": "Ana"}]}'])
    store = MemoryStore(
        tmp_path / "m.db", backends=_llm_backends(backends, upstream, relations=True)
    )
    store.append(
        [LogMessage({"role": "user", "content": "Ana works at Banco Azul."}, 1_700_000_000)],
        conversation="c1",
    )
    await asyncio.to_thread(store.form_all)
    failures = _query(store, "SELECT stage, interpretation, error, raw FROM formation_failures")
    assert len(failures) == 1
    stage, interpretation, error, raw = failures[0]
    assert stage == "relations" and interpretation == "relations:llm:fake-llm@1"
    assert raw == '{"relations": [{"subject": "Ana"}]}' and error
    assert _query(
        store, "SELECT count(*) FROM relations WHERE interpretation LIKE 'relations:llm%'"
    ) == [(0,)]
    assert _query(store, "SELECT count(*) FROM fragments") == [(1,)]  # the rest was formed
    retry = upstream.requests[1].body["messages"][-1]["content"]
    assert "not JSON" in retry or "JSON" in retry


_KILL_SCRIPT = """
import sys
from pathlib import Path
from memory_core import LogMessage, MemoryStore
from memory_core.formation import FormationConfig

store = MemoryStore(Path(sys.argv[1]), formation=FormationConfig(batch_size=4))
print("ready", flush=True)
store.form_all()
print("done", flush=True)
"""


def test_a_kill_during_formation_loses_nothing(tmp_path: Path, backends: Backends) -> None:
    path = tmp_path / "m.db"
    store = _store(tmp_path, backends)
    turns = [
        f"Turn {i}: we talked about Lisbon trip number {i} and Maria's plans." for i in range(120)
    ]
    store.append(
        [
            LogMessage(
                {"role": "user" if i % 2 == 0 else "assistant", "content": t}, 1_700_000_000 + i
            )
            for i, t in enumerate(turns)
        ],
        conversation="c",
    )
    store.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        [sys.executable, "-c", _KILL_SCRIPT, str(path)], stdout=subprocess.PIPE, text=True, env=env
    ) as child:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        conn = apsw.Connection(str(path))
        deadline = time.monotonic() + 60
        while _count(conn, "fragments") < 8:
            assert time.monotonic() < deadline, "formation did not start"
            time.sleep(0.02)
        conn.close()
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    reopened = _store(tmp_path, backends)
    formed_before = reopened.stats().fragments
    assert 0 < formed_before < 120
    reopened.form_all()
    log_ids = _query(reopened, "SELECT log_id FROM fragments")
    assert len(log_ids) == 120 and len(set(log_ids)) == 120  # all formed, none twice
    assert reopened.stats().queued == 0


def test_interpretations_are_recorded(tmp_path: Path, backends: Backends) -> None:
    store = _store(tmp_path, backends)
    _say(store, "c", ["I live in Lisbon with my sister Ana."], 1_700_000_000)
    assert _query(store, "SELECT DISTINCT ner, linker FROM mentions") == [
        ("ner:lexical:capitalised-quoted-known@2", "linking:alias-fuzzy-context@1")
    ]
    assert _query(store, "SELECT DISTINCT interpretation FROM relations ORDER BY 1") == [
        ("relations:patterns:areamem-patterns@3",),
        ("relations:structural:co-occurrence@1",),
    ]
    (segmentation,) = _query(store, "SELECT DISTINCT interpretation FROM segments")
    assert segmentation[0].startswith("segmentation:embedding:")
    (normaliser,) = _query(store, "SELECT DISTINCT normaliser FROM fragments")
    assert normaliser[0] == "normalisation:none:stopword-language-vote@1"


def test_formation_config_is_validated() -> None:
    from memory_core.formation import FormationConfigError, parse_formation

    config = parse_formation(
        {
            "ner": {"backend": "transformers", "model_path": "/models/ner"},
            "linking": {"homonym": 0.2},
        }
    )
    assert config.stage("ner").model == "dslim/bert-large-NER"
    assert config.linking.homonym == 0.2
    assert isinstance(config, FormationConfig)
    with pytest.raises(FormationConfigError) as caught:
        parse_formation({"ner": {"backend": "spacy"}})
    assert caught.value.key == "formation.ner.backend"
    with pytest.raises(FormationConfigError) as caught:
        parse_formation({"contexts": {"join": "high"}})
    assert caught.value.key == "formation.contexts.join"


_PIECES = [
    "Ana", "ana", "ANA", "Lisbon", "New", "York", "new york", "York City", "Jean-Luc",
    "jean luc", "Ana's", "Zoë", "İstanbul", "istanbul", "東京", "🎉", "I", "the", "C++", "3",
    "_x", "«", "»", '"', "“", "”", "(", ")", "!", ".", ". ", " ", "  ", "\n", "-", "'",
]  # fmt: skip


def _reference_mentions(text: str, known: list[str]) -> list[tuple[int, int, str]]:
    """The lexical NER's rule, one regular expression per name (quadratic, obviously right):
    every whole-word case-insensitive occurrence of a name (one name's left to right, not
    overlapping), minus the spans nested in another."""
    import re

    from memory_core.text.names import extract_names

    spans: set[tuple[int, int]] = set()
    for name in [*extract_names(text), *known]:
        if re.search(r"\w", name):  # a name without a word character names nothing
            pattern = r"(?<!\w)" + re.escape(name) + r"(?!\w)"
            spans |= {m.span() for m in re.finditer(pattern, text, flags=re.IGNORECASE)}
    outer = [s for s in spans if not any(o != s and o[0] <= s[0] and s[1] <= o[1] for o in spans)]
    return [(start, end, text[start:end]) for start, end in sorted(outer)]


@settings(max_examples=400, deadline=None)
@given(
    text=st.lists(st.sampled_from(_PIECES), max_size=30).map(" ".join),
    known=st.lists(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=3).map("".join)),
)
def test_lexical_ner_matches_the_one_regex_per_name_rule(text: str, known: list[str]) -> None:
    from memory_core.formation.stages.ner import LexicalNER

    found = [(m.start, m.end, m.surface) for m in LexicalNER().mentions(text, known)]
    assert found == _reference_mentions(text, known)


def test_a_predicate_with_several_values_is_reaffirmed_or_new(
    tmp_path: Path, backends: Backends
) -> None:
    """Classified from the newest same-object row alone (``relations.live_for``), not from
    every live relation of the subject: the same outcome as comparing with all of them."""
    store = _store(tmp_path, backends)
    _say(store, "c1", ["Ana visited Porto with Bruno."], 1_700_000_000)
    _say(store, "c2", ["Ana visited Lisbon with Bruno."], 1_700_100_000)
    _say(store, "c3", ["Ana visited Porto again with Bruno."], 1_700_200_000)
    visits = [r for r in store.relations(entity="Ana") if r.predicate == "visited"]
    assert [(r.object, r.mutation.kind) for r in visits] == [
        ("Porto", "new"),
        ("Lisbon", "new"),
        ("Porto", "reaffirmation"),
    ]
    assert visits[0].mutation.reason == "no live relation with this subject and predicate"
    assert visits[1].mutation.reason == "visited holds several values"
    assert visits[2].mutation.other == visits[0].id
    assert all(r.status == "active" for r in visits)


def test_a_named_speakers_turn_is_stored_with_the_name_in_its_vector(
    tmp_path: Path, backends: Backends
) -> None:
    """Who said a turn is part of what it is about ("what does Gina love?"): a named
    speaker's fragment vector encodes "Gina: ..."; a chat role's ("user") does not, so a
    user's question keeps the vector it was asked with."""
    store = MemoryStore(tmp_path / "m.db", backends=backends)
    try:
        said = [
            LogMessage({"role": "user", "name": "Gina", "content": "I love dancing."}, 1e9),
            LogMessage({"role": "user", "content": "Where is my bike?"}, 1e9 + 1),
        ]
        store.append(said, conversation="c1", source="ingest")
        store.form_all()
        rows = {
            text: vector
            for text, vector in store._reader.execute(
                "SELECT f.canonical, v.vector FROM fragments f"
                " JOIN fragment_vectors v ON v.fragment_id = f.id"
            )
        }
    finally:
        store.close()
    encode = backends.encoder.encode
    named = np.frombuffer(rows["I love dancing."], dtype="<f4")
    assert np.allclose(named, encode(["Gina: I love dancing."])[0], atol=1e-5)
    assert not np.allclose(named, encode(["I love dancing."])[0], atol=1e-3)
    plain = np.frombuffer(rows["Where is my bike?"], dtype="<f4")
    assert np.allclose(plain, encode(["Where is my bike?"])[0], atol=1e-5)


def test_a_named_speakers_topics_are_still_told_apart(tmp_path: Path, backends: Backends) -> None:
    """The speaker's name in a turn's stored vector does not make one speaker's turns one
    topic: segmentation and contexts read the text alone (``Item.topic``). With the name
    in, every turn of this transcript was one segment."""
    baking = [
        "I baked sourdough bread with rye flour this morning.",
        "The dough rose slowly because the kitchen was cold.",
        "Next time I will add more water to the starter.",
    ]
    football = [
        "Our football team won the match on Saturday, three to one.",
        "The striker scored twice in the second half.",
        "The referee gave a penalty in the last minute.",
    ]
    store = MemoryStore(tmp_path / "m.db", backends=backends)
    try:
        said = [
            LogMessage({"role": "user", "name": "Gina", "content": text}, 1e9 + i)
            for i, text in enumerate(baking + football)
        ]
        store.append(said, conversation="c1", source="ingest")
        store.form_all()
        counted = store._reader.execute("SELECT count(*) FROM segments").fetchone()
        assert counted is not None
        (segments,) = counted
    finally:
        store.close()
    assert segments >= 2
