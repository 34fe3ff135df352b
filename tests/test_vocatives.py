"""Vocatives: which names a turn addresses its listener by (pure text, no store)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_core.text.vocatives import MAX_WORD, vocatives


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("Hey Kate!", ["Kate"]),
        ("Thanks, Jo.", ["Jo"]),
        ("Kate, did you finish the report?", ["Kate"]),
        ("Hey Mel how are you?", ["Mel"]),
        ("That's great, Mel! Keep going.", ["Mel"]),
        ("Hey Caroline! Good to see you. Thanks, Mel!", ["Caroline", "Mel"]),
        ("Oi Bia, tudo bem?", ["Bia"]),
        ("Obrigado, Zé", ["Zé"]),
        ("Obrigada Zé!", ["Zé"]),
        ("Valeu, Rui! Até amanhã.", ["Rui"]),
        ("Hola Carlitos", ["Carlitos"]),
        ("¿Qué tal, Pepa?", ["Pepa"]),
        ("Gracias, Lucía.", ["Lucía"]),
        ("Oye Nacho, ¿vienes?", ["Nacho"]),
        ("Hey Jo-Ann!", ["Jo-Ann"]),
        ("Yeah Mel, let's go!", ["Mel"]),
        ("Whoa, Mel, that sign looks serious.", ["Mel"]),
        ("Cool, thanks Mel! Can't wait.", ["Mel"]),
        ("Claro, Bia!", ["Bia"]),
    ],
)
def test_vocatives_in_three_languages(text: str, names: list[str]) -> None:
    found = vocatives(text)
    assert [v.name for v in found] == names
    assert all(text[v.start : v.end] == v.name for v in found)


@pytest.mark.parametrize(
    "text",
    [
        "I saw Kate yesterday.",
        "Hey, what?",
        "Hey, What? Say that again.",
        "Oh God, that is a lot.",
        "¡Dios mío!",
        "Ay, Dios mío, ¿qué pasó?",
        "Hi everyone! Hey guys!",
        "Thanks, Mom.",
        "Hey dude, thanks man!",
        "I saw my sister, Kate.",
        "I went with Ana and, Rui.",
        "Edinburgh, Scotland would be great.",
        "Emma Watson, she's a big supporter.",
        "Aragorn's brave attitude inspired me.",
        "Hey KATE!!!",
        "Hey K!",
        "Hey " + "Abcdefghij" * 3 + "!",
        "Hey Kate2!",
        "Wow, Amazing!",
        "Olá, Obrigado!",
        "Shure, I will send it later.",
        "Wow, Chicago sounds great!",
    ],
)
def test_no_vocative(text: str) -> None:
    assert vocatives(text) == []


@given(st.text(max_size=300))
def test_any_text_gives_names_that_are_its_spans(text: str) -> None:
    for vocative in vocatives(text):
        assert text[vocative.start : vocative.end] == vocative.name
        assert all(2 <= len(w) <= MAX_WORD for w in vocative.name.split(" "))
        assert vocative.name[0].isupper()


def test_cost_is_bounded_by_the_head_of_the_text() -> None:
    text = "Hey Kate! " + "Thanks, Jo. " * 100_000
    found = vocatives(text)
    assert found[0].name == "Kate" and max(v.end for v in found) <= 4_000


@pytest.mark.parametrize(
    "text",
    [
        "Hey Zoe\u0301!",  # "Zoé" decomposed (NFD): the accent is a combining mark
        "Thanks, Rene\u0301e.",
        "Hey Ka\u200dte!",  # a zero-width joiner inside the name
        "That's lovely, Jo\u200cao!",  # a zero-width non-joiner
    ],
)
def test_a_name_cut_inside_a_word_is_no_vocative(text: str) -> None:
    """Before: a combining mark or a joiner ended the name, so the vocative was its
    head ("Zoe", "Rene", "Ka"): a wrong name, and it became the speaker's alias. A name
    that a mark or a joiner goes on is left alone (a wrong name is the worse error)."""
    assert vocatives(text) == []


def test_a_direction_mark_after_a_name_ends_it() -> None:
    assert [v.name for v in vocatives("Thanks, Kate\u200f!")] == ["Kate"]
