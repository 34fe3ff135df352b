"""Entities worth the name, in real use (issue 27, point 5).

Through the real proxy (default policy, the fake upstream's ``recall`` model answering
from the memory block it is shown), in English, Portuguese and Spanish:

- a capitalised word that merely opens a sentence ("Here", "Perfect", "Becoming",
  "Olá", "Perfeito", "Obrigado", "Dónde", "Genial", "Quando") is no entity, and a later
  turn made of such words consults nothing;
- entities are typed: "my sister Marta" is a person, "in Braga" a place, "works at
  Feedzai" an organisation;
- a relation of the user's that memory holds ("my sister", "a minha irmã", "mi
  hermana") makes the policy consult memory, and the block it injects names her; one
  memory does not hold ("my brother") does not;
- the chat's unnamed sides ("user", "assistant") are not listed as entities, although
  the user's relations are kept ("user has_sister Marta").
"""

from __future__ import annotations

from typing import Any

import pytest

from proxy.fake_upstream import FakeUpstream

from .conftest import MakeProxy
from .live import Live, live

pytestmark = pytest.mark.e2e

HISTORY = [
    {"role": "user", "content": "Hi there."},
    {"role": "assistant", "content": "Hello! How can I help?"},
]
"""An earlier exchange, so the turn after it is not a conversation's first."""


async def _entities(user: Live) -> dict[str, str]:
    """Listed entity names, case-folded, with their labels."""
    return {str(e["name"]).casefold(): str(e["label"]) for e in await user.entities()}


# --- no junk entities -------------------------------------------------------------------------

JUNK = [
    (
        "Here is my plan. Perfect weather today. Becoming a baker is my dream.",
        {"here", "perfect", "becoming"},
        "Here we go again",
    ),
    (
        "Olá! Perfeito, obrigado. Quando chegas? Genial, até logo.",
        {"olá", "perfeito", "obrigado", "quando", "genial"},
        "Perfeito, obrigado!",
    ),
    (
        "¡Hola! ¿Dónde está la estación? Genial, gracias. Perfecto.",
        {"hola", "dónde", "genial", "gracias", "perfecto"},
        "Genial, gracias.",
    ),
    (
        "Thanks! Honestly, Seeing the sunrise was Amazing. Wow, JUST DOING IT!",
        {"thanks", "honestly", "seeing", "amazing", "wow", "just", "doing"},
        "Wow, thanks again!",
    ),
]


@pytest.mark.parametrize(("told", "junk", "later"), JUNK)
async def test_sentence_openers_are_no_entities_and_consult_nothing(
    make_proxy: MakeProxy, upstream: FakeUpstream, told: str, junk: set[str], later: str
) -> None:
    user = await live(make_proxy, upstream)
    await user.say(told)
    assert junk.isdisjoint(await _entities(user))
    turn = await user.chat(later, history=HISTORY)
    assert not turn.consulted, turn.receipt.get("decision")


async def test_the_trial_junk_case_leaves_an_empty_entity_list(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    user = await live(make_proxy, upstream)
    await user.say("Here is my plan. Perfect weather today. Becoming a baker is my dream.")
    assert await _entities(user) == {}


# --- a relation of the user's consults memory --------------------------------------------------

RELATIONS = [
    (
        "My sister Marta is a nurse in Braga.",
        "Should I visit my sister?",
        "Should I call my brother?",
    ),
    (
        "A minha irmã Marta é enfermeira em Braga.",
        "Devo visitar a minha irmã?",
        "Devo ligar ao meu irmão?",
    ),
    (
        "Mi hermana Marta es enfermera en Braga.",
        "¿Debería visitar a mi hermana?",
        "¿Debería llamar a mi hermano?",
    ),
]


@pytest.mark.parametrize(("told", "asked", "unheld"), RELATIONS)
async def test_a_relation_memory_holds_consults_memory_and_names_her(
    make_proxy: MakeProxy, upstream: FakeUpstream, told: str, asked: str, unheld: str
) -> None:
    user = await live(make_proxy, upstream)
    await user.say(told)
    entities = await _entities(user)
    assert entities["marta"] == "PER" and entities["braga"] == "LOC"
    turn = await user.chat(asked, history=HISTORY)
    assert turn.consulted, turn.receipt.get("decision")
    assert "mentions_entity" in turn.receipt["decision"]["reason"]
    assert "Marta" in turn.block
    other = await user.chat(unheld, history=HISTORY)
    assert not other.consulted, other.receipt.get("decision")


async def test_a_relation_told_in_one_language_is_asked_about_in_another(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    user = await live(make_proxy, upstream)
    await user.say("My boss Rui is very demanding.")
    for asked in (
        "Should I talk to my boss?",
        "Devo falar com o meu chefe?",
        "¿Hablo con mi jefe?",
    ):
        turn = await user.chat(asked, history=HISTORY)
        assert turn.consulted, (asked, turn.receipt.get("decision"))


# --- types ------------------------------------------------------------------------------------

TYPES: list[tuple[str, dict[str, str]]] = [
    ("Ana works at Feedzai.", {"ana": "PER", "feedzai": "ORG"}),
    (
        "A Ana trabalha na Feedzai e mora em Lisboa.",
        {"ana": "PER", "feedzai": "ORG", "lisboa": "LOC"},
    ),
    (
        "Ana trabaja en Feedzai y vive en Sevilla.",
        {"ana": "PER", "feedzai": "ORG", "sevilla": "LOC"},
    ),
    ("Dr. Silva moved to Porto last spring.", {"silva": "PER", "porto": "LOC"}),
    ("O meu cão Max adora a Praia da Rocha.", {"max": "MISC", "praia da rocha": "LOC"}),
]


@pytest.mark.parametrize(("told", "expected"), TYPES)
async def test_entities_are_typed_person_place_organisation_or_thing(
    make_proxy: MakeProxy, upstream: FakeUpstream, told: str, expected: dict[str, str]
) -> None:
    user = await live(make_proxy, upstream)
    await user.say(told)
    entities = await _entities(user)
    assert {name: entities.get(name) for name in expected} == expected


# --- the chat's sides ----------------------------------------------------------------------------


async def _relations(user: Live) -> list[dict[str, Any]]:
    return list((await user.get("/memory/relations"))["relations"])


async def test_unnamed_speakers_are_not_listed_but_keep_their_relations(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    user = await live(make_proxy, upstream)
    await user.say("My sister Marta is a nurse in Braga. I live in Lisbon.")
    names = await _entities(user)
    assert "user" not in names and "assistant" not in names
    assert {"marta", "braga", "lisbon"} <= set(names)
    held = {(r["subject"], r["predicate"], r["object"]) for r in await _relations(user)}
    assert ("user", "has_sister", "Marta") in held
    turn = await user.chat("What does the user want? Ask the assistant.", history=HISTORY)
    assert not turn.consulted, turn.receipt.get("decision")


async def test_a_portuguese_relation_is_stored_as_the_users_claim(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    user = await live(make_proxy, upstream)
    await user.say("Mi hermana Marta es enfermera en Braga.")
    await user.say("A minha prima Beatriz mora em Coimbra.")
    held = {(r["subject"], r["predicate"], r["object"]) for r in await _relations(user)}
    assert {("user", "has_sister", "Marta"), ("user", "has_cousin", "Beatriz")} <= held


async def test_a_known_name_still_consults_memory_in_any_case(
    make_proxy: MakeProxy, upstream: FakeUpstream
) -> None:
    user = await live(make_proxy, upstream)
    await user.say("Marta lives in Braga.")
    for asked in ("How is Marta doing?", "what about marta?", "E a Marta?"):
        turn = await user.chat(asked, history=HISTORY)
        assert turn.consulted, (asked, turn.receipt.get("decision"))
        assert "Marta" in turn.block


# --- the rules alone ----------------------------------------------------------------------------

TYPED = [
    ("My sister Marta is a nurse in Braga.", [("Marta", "PER", "sister"), ("Braga", "LOC", None)]),
    (
        "A minha irmã Marta é enfermeira em Braga.",
        [("Marta", "PER", "sister"), ("Braga", "LOC", None)],
    ),
    (
        "Mi hermana Marta es enfermera en Braga.",
        [("Marta", "PER", "sister"), ("Braga", "LOC", None)],
    ),
    ("Marta is my sister.", [("Marta", "PER", "sister")]),
    ("His brother Rui said hi.", [("Rui", "PER", None)]),
    ("O meu chefe Rui é simpático.", [("Rui", "PER", "boss")]),
    (
        "My dog Max loves the Smoky Mountains.",
        [("Max", "MISC", "dog"), ("Smoky Mountains", "LOC", None)],
    ),
    ("Ana works at Feedzai.", [("Ana", "PER", None), ("Feedzai", "ORG", None)]),
    (
        "Soy de Sevilla y trabajo para Telefónica.",
        [("Sevilla", "LOC", None), ("Telefónica", "ORG", None)],
    ),
    (
        "Rui studied at the University of Porto.",
        [("Rui", "PER", None), ("University of Porto", "ORG", None)],
    ),
    ("Dona Marta foi para Coimbra.", [("Marta", "PER", None), ("Coimbra", "LOC", None)]),
    ("I love English and Spanish.", [("English", "MISC", None), ("Spanish", "MISC", None)]),
]


@pytest.mark.parametrize(("text", "expected"), TYPED)
def test_lexical_ner_types_mentions_by_their_cues(
    text: str, expected: list[tuple[str, str, str | None]]
) -> None:
    from memory_core.formation.stages.ner import LexicalNER

    found = [(m.surface, m.label, m.relation) for m in LexicalNER().mentions(text)]
    assert found == expected


def test_claims_type_what_ner_left_untyped() -> None:
    from memory_core.formation.interfaces import RelationCandidate
    from memory_core.formation.stages.linking import EntityCache
    from memory_core.formation.stages.relations import SPEAKER

    claims = [
        RelationCandidate("Rui", "works_at", "Lumen"),
        RelationCandidate("Rui", "lives_in", "Faro"),
        RelationCandidate(SPEAKER, "has_dog", "Bolt"),
        RelationCandidate(SPEAKER, "has_mom", "Clara"),
    ]
    label = EntityCache.label_for
    assert [label(n, "MISC", claims) for n in ("Lumen", "Faro", "Bolt", "Clara", "Rui")] == [
        "ORG",
        "LOC",
        "MISC",
        "PER",
        "PER",
    ]
    assert label("Lumen", "LOC", claims) == "LOC"  # NER's own type stands
    assert label("Other", "MISC", claims) == "MISC"


def test_relations_ner_read_are_claims_unless_the_extractor_read_them() -> None:
    from memory_core.formation.interfaces import Mention, RelationCandidate
    from memory_core.formation.stages.linking import EntityCache
    from memory_core.formation.stages.relations import SPEAKER

    mentions = [
        Mention(0, 5, "Marta", "PER", relation="sister"),
        Mention(9, 12, "Rui", "PER", relation="boss"),
        Mention(20, 25, "Braga", "LOC"),
    ]
    read = [RelationCandidate(SPEAKER, "has_boss", "Rui")]
    assert EntityCache.cued_relations(mentions, [1, 2, 3], read) == [("has_sister", 1)]
