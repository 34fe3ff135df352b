"""Memory in Portuguese and Spanish, tried as a new user would (issue 28's trial), through
a real proxy on loopback in front of the fake upstream's ``recall`` model.

"Onde mora a minha prima Beatriz?" and "¿Dónde vive mi hermano Carlos?" got no statement
although ``Beatriz lives_in Coimbra`` and ``Carlos lives_in Sevilla`` were stored: the
block only shows a fact that shares a word with the question beyond its subject, and
"mora" / "vive" are not "lives". Each predicate now carries the words a question asks
about it with in English, Portuguese and Spanish. "Dónde" became an entity. And the
Portuguese and the English "Beatriz" were two entities: a question in another language
reads unlike the entity's contexts, so it founded a homonym; a question or a restatement
now links to the entity of the name it says and never founds a homonym of it.
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy, proxy_config
from .live import Live, live

pytestmark = pytest.mark.e2e

TOLD = (
    "A minha prima Beatriz mora em Coimbra e trabalha numa livraria.",
    "Mi hermano Carlos vive en Sevilla y es profesor.",
)


def _statements(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.startswith("- ")]


@pytest.mark.parametrize(
    ("question", "statement"),
    [
        ("Onde mora a minha prima Beatriz?", "Beatriz lives in Coimbra"),
        ("¿Dónde vive mi hermano Carlos?", "Carlos lives in Sevilla"),
        ("Onde vive o Carlos?", "Carlos lives in Sevilla"),
        ("¿Dónde vive Beatriz?", "Beatriz lives in Coimbra"),
        ("Where does my cousin Beatriz live?", "Beatriz lives in Coimbra"),
        ("Where does Carlos live?", "Carlos lives in Sevilla"),
    ],
)
async def test_a_question_in_any_language_is_shown_the_statement_that_answers_it(
    make_proxy: MakeProxy, upstream: FakeUpstream, question: str, statement: str
) -> None:
    user = await live(make_proxy, upstream)
    for told in TOLD:
        await user.say(told)
    turn = await user.chat(question)
    assert any(statement in line for line in _statements(turn.block)), turn.block


@pytest.mark.parametrize(
    ("question", "statement"),
    [
        ("Onde trabalha a Beatriz?", "Beatriz works at"),
        ("¿Dónde trabaja Beatriz?", "Beatriz works at"),
    ],
)
async def test_other_predicates_are_asked_about_in_portuguese_and_spanish(
    make_proxy: MakeProxy, upstream: FakeUpstream, question: str, statement: str
) -> None:
    user = await live(make_proxy, upstream)
    await user.say("Beatriz works at Bertrand.")
    turn = await user.chat(question)
    assert any(statement in line for line in _statements(turn.block)), turn.block


async def test_a_fact_not_asked_about_is_still_left_out(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    """The words are the predicate's, not any word: "O que a Beatriz lê?" (what does
    she read?) is not about where she lives."""
    user = await live(make_proxy, upstream)
    await user.say(TOLD[0])
    turn = await user.chat("O que a Beatriz lê?")
    assert not any("lives in" in line for line in _statements(turn.block)), turn.block


async def test_questions_in_three_languages_about_one_person_make_one_entity(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    user = await live(make_proxy, upstream)
    for told in TOLD:
        await user.say(told)
    for question in (
        "Onde mora a minha prima Beatriz?",
        "Where does my cousin Beatriz live?",
        "¿Dónde vive mi prima Beatriz?",
        "¿Dónde vive mi hermano Carlos?",
        "Where does my brother Carlos live?",
    ):
        await user.chat(question)
    names = sorted(str(e["name"]) for e in await user.entities())
    assert names == ["Beatriz", "Carlos", "Coimbra", "Sevilla"]  # never "Dónde", never twice


async def test_a_questions_mention_joins_the_entity_it_names(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    """The question's mention counts as one of Beatriz's (linked by name), not as a
    new entity; what people state is still judged by context as before."""
    user = await live(make_proxy, upstream)
    await user.say(TOLD[0])
    asked = await user.chat("Onde mora a minha prima Beatriz?")
    assert "Coimbra" in asked.block
    entities = [e for e in await user.entities() if e["name"] == "Beatriz"]
    assert len(entities) == 1 and entities[0]["mentions"] >= 2  # the question's mention joined


@pytest.mark.parametrize(
    ("question", "missing"),
    [
        ("O que a Beatriz faz nos fins de semana?", "Memory holds nothing about: fins, semana"),
        ("A Beatriz tem um cão?", "Memory holds nothing about: cão"),
        ("¿Tiene Carlos un perro?", "Memory holds nothing about: perro"),
        ("Does Carlos have a dog?", "Memory holds nothing about: dog"),
    ],
)
async def test_the_coverage_note_names_topics_never_portuguese_or_spanish_function_words(
    make_proxy: MakeProxy, upstream: FakeUpstream, question: str, missing: str
) -> None:
    """ "faz" / "hace" (does), "tem" / "tiene" (has), articles and pronouns are how a
    question is worded, as "does" and "have" are in English: never named as missing."""
    user = await live(make_proxy, upstream)
    for told in TOLD:
        await user.say(told)
    turn = await user.chat(question)
    notes = [line for line in turn.block.splitlines() if "Memory holds nothing" in line]
    assert notes == [missing], turn.block


async def test_an_english_question_finds_what_was_said_in_portuguese_with_the_e5_encoder(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    """``formation.encoder.model: e5``: no word of the question is in memory (cousin /
    prima, work / trabalha, bookshop / livraria), so only meaning can find it; the
    lexical terms step back (memory knows none of its words) and the fact is shown."""
    config = proxy_config(upstream.url)
    del config["policy"]
    config["memory"] = {"retrieval_timeout_ms": 60_000, "formation_workers": 0}
    config["formation"] = {"encoder": {"model": "e5"}}
    user = Live(await make_proxy(config, own_backends=True))
    told = [
        "A minha prima trabalha numa livraria no centro da cidade.",
        "O meu carro novo é vermelho e muito rápido.",
        "Ontem choveu o dia inteiro e fiquei em casa.",
        "O jantar de domingo foi peixe grelhado com batatas.",
    ]
    transcript = {
        "conversation_id": "semana-1",
        "messages": [
            {"role": "user", "content": text, "timestamp": f"2024-03-0{i + 1}T10:00:00"}
            for i, text in enumerate(told)
        ],
    }
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{user.proxy.url}/memory/ingest", json=transcript) as response:
            assert response.status == 200, await response.text()
    await user.proxy.settle()
    question = "Where does my cousin work?"
    found = await user.get("/memory/search", q=question, k="4", strategy="area")
    assert "livraria" in found["hits"][0]["text"], found["hits"]
    turn = await user.chat(question)
    assert "livraria" in turn.block


async def test_an_english_questions_words_are_matched_to_the_portuguese_words_memory_holds(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    """With e5, formation keeps each word's vector and the word bridge matches "job" to
    "emprego": the receipt says which words were matched, the statement is shown, and an
    English question about English memory matches nothing (no other language to bridge
    to)."""
    config = proxy_config(upstream.url)
    del config["policy"]
    config["memory"] = {"retrieval_timeout_ms": 60_000, "formation_workers": 0}
    config["formation"] = {"encoder": {"model": "e5"}}
    user = Live(await make_proxy(config, own_backends=True))
    for told in (
        "Ontem perdi o meu emprego na padaria do bairro.",
        "O meu carro novo é vermelho e muito rápido.",
        "O jantar de domingo foi peixe grelhado com batatas.",
        "I bought a new bicycle for my daughter.",
    ):
        await user.say(told)
    turn = await user.chat("When did I lose my job?")
    bridged = turn.receipt["graph_area"]["bridged"]
    assert "emprego" in bridged.get("job", []), bridged
    assert "emprego" in turn.block
    english = await user.chat("What did I buy for my daughter?")
    assert english.receipt["graph_area"]["bridged"] == {}
    assert "bicycle" in english.block


async def test_a_store_made_with_minilm_is_formed_again_with_e5_on_upgrade(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    """Upgrading to the new default: the proxy opens a store MiniLM formed, forms its memory
    again from the log with e5 (nothing said is lost), says so in its log when it starts
    and when it is done, and the memory then answers across languages."""
    first = Live(await make_proxy(proxy_config(upstream.url), name="upgrade"))
    transcript = {
        "conversation_id": "semana-1",
        "messages": [
            {"role": "user", "content": text, "timestamp": f"2024-03-0{i + 1}T10:00:00"}
            for i, text in enumerate(
                [
                    "Ontem perdi o meu emprego na padaria do bairro.",
                    "O meu carro novo é vermelho e muito rápido.",
                    "My sister Ana plays tennis on Saturdays.",
                ]
            )
        ],
    }
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{first.proxy.url}/memory/ingest", json=transcript) as response:
            assert response.status == 200, await response.text()
    await first.proxy.settle()
    before = await first.get("/memory/stats")
    assert before["queued"] == 0 and before["fragments"] == 3
    await first.proxy.server.close()

    config = proxy_config(upstream.url)
    config["formation"] = {"encoder": {"model": "e5"}}
    config["memory"] = {"retrieval_timeout_ms": 60_000}  # e5 loads in the test's process
    second = Live(await make_proxy(config, name="upgrade", own_backends=True))
    for _ in range(1200):
        events = {r.get("event"): r for r in second.proxy.log_records()}
        if "memory_reencoded" in events:
            break
        await asyncio.sleep(0.1)
    started, done = events["memory_reencoding"], events["memory_reencoded"]
    assert "MiniLM" in started["from"][0] and "multilingual-e5-small" in started["to"]
    assert started["queued"] == 3 and done["formed"] == 3
    after = await second.get("/memory/stats")
    assert after["log_messages"] == before["log_messages"] and after["queued"] == 0
    assert after["fragments"] == 3
    turn = await second.chat("When did I lose my job?")
    assert "emprego" in turn.block, (turn.receipt.get("decision"), turn.receipt.get("memory_error"))
    assert "emprego" in turn.receipt["graph_area"]["bridged"].get("job", [])
