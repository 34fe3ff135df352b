"""Names as people use them (issue 29, item 3): the names a speaker is addressed by.

Through a real :class:`MemoryStore` in a temp folder: the other speaker's vocatives
("Hey Kate!", "Oi Bia, tudo bem?", "¿Qué tal, Pepa?") make the name an alias of the
speaker they reply to, with the fragments it was used in; a question by that name finds
the speaker's own turns; a third person of the same name keeps their own entity; junk
("Hey, what?", "Oh God,", "¡Dios mío!", very long or odd names) makes no alias.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from memory_core import LogMessage, MemoryStore
from memory_core.dream import ContextPair, EntityPair, Verdict
from memory_core.formation import Backends
from memory_core.retrieval.addressed import as_named
from memory_core.storage.tables.dream import alias_shares
from memory_core.storage.tables.entities import VOCATIVE
from memory_core.text.question import QUESTION_CHARS, Question
from memory_core.views import EntityView


def _turns(speakers: Sequence[str], lines: Sequence[str], start: float = 1.7e9) -> list[LogMessage]:
    """Alternating named turns (the speakers in turn), one minute apart."""
    return [
        LogMessage(
            {"role": "user", "name": speakers[i % len(speakers)], "content": text}, start + 60 * i
        )
        for i, text in enumerate(lines)
    ]


@pytest.fixture
def store(tmp_path: Path, backends: Backends) -> Iterator[MemoryStore]:
    memory = MemoryStore(tmp_path / "m.db", backends=backends)
    try:
        yield memory
    finally:
        memory.close()


def _formed(store: MemoryStore, turns: list[LogMessage], conversation: str = "c1") -> None:
    store.append(turns, conversation=conversation, source="ingest")
    store.form_all()


def _vocatives(store: MemoryStore) -> dict[str, tuple[str, list[int]]]:
    """Each vocative alias (case-folded) with its entity's name and where it was used."""
    return {
        alias.alias.casefold(): (entity.name, alias.used_in)
        for entity in store.entities(limit=1000)
        for alias in entity.aliases
        if alias.source == VOCATIVE
    }


def _entity(store: MemoryStore, name: str) -> list[EntityView]:
    return [e for e in store.entities(limit=1000) if e.name.casefold() == name.casefold()]


KATE = [
    "I just finished a long shift at the hospital, I work as a nurse in the cardiology ward.",
    "Hey Kate! That sounds exhausting. How many hours was it?",
    "Twelve hours. I also volunteer at the animal shelter on Sundays.",
    "Thanks, Kate. I admire that. I am learning to play the cello these days.",
    "Oh nice, a cello! My grandfather played the violin.",
    "That's lovely, Kate! I should practise more.",
]


def test_a_nickname_question_finds_the_speakers_own_turns(store: MemoryStore) -> None:
    """Tom calls Katarzyna "Kate": "Kate" becomes her alias, from the turns where Tom
    says it, and "What does Kate do?" finds her turn about her job as "What does
    Katarzyna do?" does."""
    _formed(store, _turns(["Katarzyna", "Tom"], KATE))
    found = _vocatives(store)
    assert set(found) == {"kate"}
    owner, used = found["kate"]
    assert owner == "Katarzyna" and len(used) == 3
    recall = store.recall_area("What does Kate do for work?", limit=3, budget_tokens=800)
    texts = [h.text for h in recall.hits]
    # her next turn goes on from this one (its BM25 document holds "work", lent by her
    # own previous turn), so the two are close; the job is among the two best
    assert any("nurse" in t for t in texts[:2]), texts
    assert recall.area is not None and recall.area["named"] == {"Kate": ["Katarzyna"]}
    by_label = store.recall_area("What does Katarzyna do for work?", limit=3, budget_tokens=800)
    assert [h.fragment_id for h in by_label.hits] == [h.fragment_id for h in recall.hits]


APRIL_AND_WILL = [
    "I bought a green bicycle at the flea market this morning.",
    "Nice! I went hiking in the Alps last week with my brother.",
    "Did you take photos of the glaciers up there?",
    "Yes, lots of photos. My brother bought a new camera for the trip.",
    "I want to ride the bicycle to the lake on Sunday.",
    "The lake is lovely in the morning, take a jacket.",
]


def test_speakers_called_april_and_will_are_named_by_questions(store: MemoryStore) -> None:
    """People are called April or Will; before, a speaker's name that is also a month or
    a function word was no name at all: "What did April buy?" had no focus on her
    (only BM25 and the vectors) and weighed neither speaker's turns."""
    _formed(store, _turns(["April", "Will"], APRIL_AND_WILL))
    for question, speaker, answer in (
        ("What did April buy at the flea market?", "April", "green bicycle"),
        ("Where did Will go hiking?", "Will", "Alps"),
    ):
        recall = store.recall_area(question, limit=6, budget_tokens=2000)
        assert recall.area is not None
        assert f"entity:{speaker}" in recall.area["foci"], recall.area["foci"]
        assert answer in recall.hits[0].text
        factor = {f["id"]: f["factor"] for f in recall.area["fragments"]}
        others = [h.fragment_id for h in recall.hits if h.speaker != speaker]
        assert others and all(factor[i] < 1 for i in others)  # the other speaker set back
    will = store.recall_area("Will you tell me about the lake?", limit=3, budget_tokens=800)
    assert will.area is not None and "entity:Will" not in will.area["foci"]


def test_a_third_person_with_the_same_name_keeps_her_own_entity(store: MemoryStore) -> None:
    """After Tom calls Katarzyna "Kate", "I saw Kate yesterday" talks about somebody
    else: a Kate of her own, not merged into Katarzyna; the name is then ambiguous, so a
    question by it adds neither's label."""
    _formed(store, _turns(["Katarzyna", "Tom"], KATE))
    later = [
        "By the way, my neighbour Kate is a baker, I saw Kate yesterday at the market.",
        "Oh, your neighbour Kate bakes? Great.",
    ]
    _formed(store, _turns(["Katarzyna", "Tom"], later, start=1.8e9))
    kates = _entity(store, "Kate")
    assert len(kates) == 1 and not kates[0].is_speaker
    (katarzyna,) = _entity(store, "Katarzyna")
    assert katarzyna.is_speaker and kates[0].id != katarzyna.id
    assert [a.source for a in katarzyna.aliases if a.alias.casefold() == "kate"] == [VOCATIVE]
    recall = store.recall_area("What does Kate do?", limit=3, budget_tokens=800)
    assert recall.area is not None and "named" not in recall.area


def test_the_vocative_alias_survives_a_reopened_store(tmp_path: Path, backends: Backends) -> None:
    """Formation reloads its entities from the database: the name stays a vocative one
    (a later non-vocative "Kate" is still somebody else)."""
    first = MemoryStore(tmp_path / "m.db", backends=backends)
    try:
        _formed(first, _turns(["Katarzyna", "Tom"], KATE))
    finally:
        first.close()
    again = MemoryStore(tmp_path / "m.db", backends=backends)
    try:
        _formed(again, _turns(["Tom"], ["I told Kate about it at the party."], start=1.8e9))
        assert len(_entity(again, "Kate")) == 1
        assert set(_vocatives(again)) == {"kate"}
    finally:
        again.close()


PORTUGUESE = [
    "Passei o dia todo no estúdio a gravar o meu novo disco de fado.",
    "Oi Bia, tudo bem? Que bom saber do disco!",
    "Tudo ótimo. Amanhã vou ao Porto tocar num bar.",
    "Obrigado, Bia, vou tentar ir ver-te.",
]
SPANISH = [
    "Hoy terminé mi turno en la panadería muy temprano.",
    "¿Qué tal, Pepa? ¿Sigues haciendo pan de centeno?",
    "Sí, y ahora también hago croissants los domingos.",
    "Hola Pepa, ¡me encantan los croissants!",
]


@pytest.mark.parametrize(
    ("speakers", "lines", "name", "owner", "question", "word"),
    [
        (["Beatriz", "Rui"], PORTUGUESE, "bia", "Beatriz", "O que a Bia grava?", "fado"),
        (["Josefa", "Carlos"], SPANISH, "pepa", "Josefa", "¿Qué hace Pepa los domingos?", "croiss"),
    ],
)
def test_portuguese_and_spanish_vocatives(
    store: MemoryStore,
    speakers: list[str],
    lines: list[str],
    name: str,
    owner: str,
    question: str,
    word: str,
) -> None:
    _formed(store, _turns(speakers, lines))
    found = _vocatives(store)
    assert len(found[name][1]) == 2
    assert set(found) == {name} and found[name][0] == owner
    recall = store.recall_area(question, limit=3, budget_tokens=800)
    assert any(word in h.text for h in recall.hits), [h.text for h in recall.hits]


HOSTILE = [
    "Hey, what? I did not get that.",
    "Oh God, that is a lot of work.",
    "¡Dios mío! ¡Qué sorpresa!",
    "Hey, What? Say it again.",
    "Thanks, Everyone! Hi guys!",
    "Hey " + "Abcdefghij" * 6 + "!",
    "Hey \u200bK\u200bate! Hey 😀😀! Hey \u03a9\u03bc\u03ad\u03b3\u03b11!",
    "Hey KATE!!! Hola Señor, ¿qué tal?",
    "I saw my sister, Kate. Paris, France.",
    "Oi Mãe, tudo bem? Obrigado, Deus.",
]


@pytest.mark.parametrize("reply", HOSTILE)
def test_hostile_vocatives_make_no_alias(store: MemoryStore, reply: str) -> None:
    _formed(store, _turns(["Katarzyna", "Tom"], ["I work as a nurse.", reply]))
    assert _vocatives(store) == {}


def test_unanswered_turns_and_another_speakers_name_make_no_alias(store: MemoryStore) -> None:
    """A turn that replies to nobody (a conversation's first, or one after the speaker's
    own turn) teaches nothing, nor does a vocative calling another speaker's name (Tom
    greets Marek, who is not the speaker Tom replies to)."""
    _formed(store, _turns(["Tom"], ["Hey Jo! Long time."]), conversation="c1")
    _formed(store, _turns(["Marek"], ["I moved flats.", "Hi Jo, are you there?"]), "c2")
    _formed(store, _turns(["Ana", "Tom"], ["I got a new bike.", "Hey Marek!"]), "c3")
    assert _vocatives(store) == {}


def test_a_conversations_opening_vocative_calls_whoever_answers(store: MemoryStore) -> None:
    """"Hey Mel!" opening a conversation calls nobody known yet: the name founds no
    entity, and the answer tells whom it called (Melanie, from that first fragment)."""
    lines = [
        "Hey Mel! Good to see you! How have you been?",
        "Hey Caroline! Busy with the kids and my pottery class.",
        "Pottery sounds fun, Mel! What do you make?",
    ]
    _formed(store, _turns(["Caroline", "Melanie"], lines[:1]))
    assert _vocatives(store) == {} and not _entity(store, "Mel")
    _formed(store, _turns(["Melanie", "Caroline"], lines[1:], start=1.7e9 + 60))
    found = _vocatives(store)
    assert set(found) == {"mel"} and found["mel"][0] == "Melanie"
    (melanie,) = _entity(store, "Melanie")
    (alias,) = [a for a in melanie.aliases if a.source == VOCATIVE]
    assert alias.used_in[0] == alias.fragment_id == 1 and len(alias.used_in) == 2
    assert not _entity(store, "Mel")


def test_the_name_in_a_reply_to_the_speaker_still_names_them(store: MemoryStore) -> None:
    """Once Tom calls Katarzyna "Kate", "Kate" in Tom's reply to her that is no vocative
    ("you rock Kate") is still her, not a new Kate; in her own turn it would not be."""
    more = ["I got a promotion to head nurse today.", "No way, you rock Kate"]
    _formed(store, _turns(["Katarzyna", "Tom"], [*KATE, *more]))
    assert not _entity(store, "Kate")
    (katarzyna,) = _entity(store, "Katarzyna")
    assert katarzyna.mentions >= 5


def test_a_vocative_after_the_speakers_own_turn_waits_for_the_reply(store: MemoryStore) -> None:
    """A session Caroline opens after her own last turn ("Hey Mel, what's up?") replies
    to nobody: the name, already Melanie's, founds no Mel of its own."""
    lines = ["Hey Mel! How are you?", "Great, Caroline! I painted a lake.", "Lovely, Mel!"]
    _formed(store, _turns(["Caroline", "Melanie"], lines))
    _formed(store, _turns(["Caroline"], ["Bye for now!"], start=1.7e9 + 600))
    again = ["Hey Mel, what's up? Long week.", "Hi! I went camping with the kids."]
    _formed(store, _turns(["Caroline", "Melanie"], again, start=1.8e9))
    assert not _entity(store, "Mel")
    assert len(_vocatives(store)["mel"][1]) == 3


def test_a_consolidation_cycle_does_not_merge_the_third_person_into_the_speaker(
    store: MemoryStore,
) -> None:
    """The Dreamer judges pairs of entities that share a name; a name a speaker is only
    addressed by is not shared (no candidate pair), so the neighbour Kate stays apart
    from Katarzyna whatever a judge would say of their contexts."""
    _formed(store, _turns(["Katarzyna", "Tom"], KATE))
    neighbour = ["My neighbour Kate is a baker and works at the market every day."]
    _formed(store, _turns(["Katarzyna"], neighbour, start=1.8e9))
    (kate,) = _entity(store, "Kate")
    (katarzyna,) = _entity(store, "Katarzyna")
    assert alias_shares(store._reader, [kate.id, katarzyna.id], limit=10) == []
    store.dream()
    assert [e.id for e in _entity(store, "Kate")] == [kate.id]
    assert [a.source for a in katarzyna.aliases if a.alias == "Kate"] == [VOCATIVE]


class _Merging:
    """A judge that finds every candidate pair one (a model may say so of two speakers,
    where the rules keep them apart)."""

    label = "merging@test"

    def entities(self, pairs: Sequence[EntityPair]) -> list[Verdict]:
        return [Verdict("merge", "one person") for _ in pairs]

    def contexts(self, pairs: Sequence[ContextPair]) -> list[Verdict]:
        return [Verdict("keep", "not asked") for _ in pairs]


def test_a_merge_keeps_a_name_the_merged_speaker_speaks_by_over_a_vocative(
    tmp_path: Path, backends: Backends
) -> None:
    """Tom calls Katarzyna "Kate" (a vocative alias); elsewhere a speaker labelled Kate
    is said to be Katarzyna, and a cycle merges Kate into Katarzyna. "Kate" was then
    only the vocative it had been: the merged speaker's own name was dropped (one row
    per name and entity, the survivor's kept), so the name counted as never shared and
    a later "I saw Kate" founded a new Kate beside her. The name a speaker speaks by is
    hers; it replaces the vocative."""
    memory = MemoryStore(tmp_path / "m.db", backends=backends, judge=_Merging())
    try:
        _formed(memory, _turns(["Katarzyna", "Tom"], KATE))
        said = ["Kate, also known as Katarzyna, fixed my bike.", "I did, it was easy."]
        _formed(memory, _turns(["Tom", "Kate"], said, start=1.9e9), conversation="c2")
        (kate,) = _entity(memory, "Kate")
        report = memory.dream()
        assert [d.ids for d in report.decisions if d.kind == "merge_entities"] == [
            [_entity(memory, "Katarzyna")[0].id, kate.id]
        ]
        (katarzyna,) = _entity(memory, "Katarzyna")
        assert [a.source for a in katarzyna.aliases if a.alias.casefold() == "kate"] == ["name"]
        _formed(memory, _turns(["Tom"], ["I saw Kate at the hospital today."], start=2e9), "c2")
        assert _entity(memory, "Kate") == []  # she is Katarzyna, founded nowhere else
    finally:
        memory.close()


@pytest.mark.parametrize("label", ["(.*)", "\U0001f642", "  ", "\\", "***"])
def test_a_speaker_label_of_no_words_founds_no_entity_per_turn(
    store: MemoryStore, label: str
) -> None:
    """A speaker labelled with no letters or digits ("(.*)", an emoji) cannot be keyed
    by name: before, every turn of theirs founded one more entity of that name (three
    for "(.*)" in four turns). Their turns are now read as the unnamed speaker's, and
    the named speaker stays one entity."""
    _formed(store, _turns([label, "Tom"], KATE))
    _formed(store, _turns([label, "Tom"], KATE[:2], start=1.8e9), conversation="c2")
    speakers = [e.name for e in store.entities(limit=1000) if e.is_speaker]
    assert len(speakers) == len(set(speakers)) and speakers.count("Tom") == 1, speakers
    assert label not in [e.name for e in store.entities(limit=1000)]
    assert _vocatives(store) == {}


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What does Zoe\u0301 do? Is zo\u00e9 ok?", "What does Zofia do? Is Zofia ok?"),
        ("Did K\\1 call (.*)?", "Did \\g<0> \\1 call (.*)?"),
    ],
)
def test_the_question_encoded_names_the_speaker_however_the_name_is_written(
    question: str, expected: str
) -> None:
    """Before: a name found in a question written decomposed ("Zoe" and a combining
    accent) was not replaced in the text the question is encoded from (the name index
    reads it composed, the replacement looked for the composed spelling). A speaker
    label with a backslash or a group reference is put in as written."""
    named = Question.of(question).naming(
        (("Zo\u00e9", ("Zofia",)), ("K\\1", ("\\g<0> \\1",)))
    )
    assert as_named(named) == expected


def test_the_question_encoded_stays_as_short_as_a_question() -> None:
    """Before: each name asked was replaced by the speakers' labels whatever their
    length, so a question of 2,000 characters repeating a nickname ("Jo Jo Jo ...") of
    a speaker whose label is 20,000 characters long became a 13 MB text, handed to the
    encoder (2 MB of it took 81 s to encode with e5). The text encoded is cut as a
    question is (:func:`~memory_core.text.question.question_excerpt`)."""
    named = Question.of("Jo " * 666).naming((("Jo", ("X" * 20_000,)),))
    text = as_named(named)
    assert len(text) <= QUESTION_CHARS + 3 and text.startswith("X" * 100)
    two = Question.of("Jo " * 666).naming((("Jo", ("Al " * 700,)), ("Al", ("X" * 2_000,))))
    assert len(as_named(two)) <= QUESTION_CHARS + 3  # never a label inside a label inside...
