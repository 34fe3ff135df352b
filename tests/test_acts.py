"""What a turn does (memory_core.text.acts) and what a conversation is called
(memory_core.text.conversations), in English, Portuguese and Spanish."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_core.text.acts import (
    asks,
    is_question,
    restated_share,
    sentence_asks,
    sentence_states,
    tells,
    unstated,
)
from memory_core.text.conversations import is_opaque, label_of
from memory_core.text.question import Question

QUESTIONS = [
    "Where does my cousin live?",
    "where does ana live",  # no question mark, lower case
    "Should I visit my sister?",
    "Is Ana in Lisbon",
    "Which city is she in",
    "How many kids does Mel have",
    "Do you remember what I said about Tom",
    "Tell me about Ana.",
    "Hi! Where does Ana live?",
    "Onde mora a minha prima Beatriz?",
    "Diz-me onde mora a Beatriz",
    "Lembras-te do Tom?",
    "Você lembra onde a Ana mora",
    "¿Dónde vive mi prima Beatriz?",
    "Dime dónde vive Carlos",
    "Te acuerdas de Carlos",
    "¿Debería visitar a mi hermana?",
]
STATEMENTS = [
    "When I was a kid, I lived in Paris.",
    "Quando eu era criança morava no Porto.",
    "Cuando era niño vivía en Sevilla.",
    "What I want is a new bike.",
    "My sister Ana moved to Lisbon to open a bakery.",
    "Sorry, I was wrong: Tom lives in Valencia.",
    "Ana moved. Did you know?",  # tells something, then asks
    "Wow, that's great! Did you go to the beach? I went yesterday.",
    "Thanks!",
    "Que bom!",
]


@pytest.mark.parametrize("text", QUESTIONS)
def test_a_question_in_any_of_the_three_languages_is_one(text: str) -> None:
    assert asks(text) and is_question(text)


@pytest.mark.parametrize("text", STATEMENTS)
def test_a_turn_that_tells_something_or_only_chats_is_no_question(text: str) -> None:
    assert not is_question(text)


def test_a_text_asks_when_any_sentence_does_and_what_it_asks_is_what_it_does_not_state() -> None:
    assert asks("Ana moved. Did you know?") and not is_question("Ana moved. Did you know?")
    assert not asks("Ana moved to Porto.")
    assert unstated("Ana moved to Porto. Where does Tom live?") == "Where does Tom live?"
    assert unstated("volcano") == "volcano"  # the keywords of a search state nothing
    assert sentence_states("Tom lives in Madrid.") and not sentence_states("Ana's bakery")


def test_a_text_tells_when_one_sentence_states_something_in_any_of_the_three_languages() -> None:
    assert tells("Wow, Caroline! I just signed up for a pottery class yesterday.")
    assert tells("Ana moved to Porto. Did you know?")  # it asks, but it tells too
    assert tells("Ontem fui à praia com os miúdos.") and tells("Ayer fuimos al museo.")
    for nothing in ("Cool! What did it look like?", "Thanks, Mel!", "Que bom!", "¿Y tú?"):
        assert not tells(nothing)


def test_the_coverage_note_is_about_what_a_turn_asks_not_what_it_tells() -> None:
    mixed = Question.of("Ana moved to Porto. Where does Tom live?")
    assert [f.word for f in mixed.note_foci] == ["tom", "live"]
    assert Question.of("My sister Ana moved to Lisbon to open a bakery.").note_foci == ()
    assert [f.word for f in Question.of("volcano").note_foci] == ["volcano"]


def test_an_answer_restates_by_the_share_of_its_words_the_block_holds() -> None:
    block = ["Beatriz lives in Coimbra", "A minha prima Beatriz mora em Coimbra"]
    assert restated_share("From what you told me: Beatriz lives in Coimbra", block) == 0.75
    assert restated_share("I don't know.", block) == 0.0
    assert restated_share("", block) == 0.0
    assert restated_share("Coimbra has a famous university founded in 1290.", block) < 0.3
    huge = "Coimbra " * 1_000_000  # read up to a bound: a megabyte answer costs little
    assert restated_share(huge, block) == 1.0


@pytest.mark.parametrize(
    ("conversation", "opaque"),
    [
        ("c6e33dcb712345678", True),  # the proxy's own
        ("3fa85f64-5717-4562-b3fc-2c963f66afa6", True),  # a UUID (Open WebUI)
        ("01HV8X9K2M3N4P5Q6R7S8T9V0W", True),  # a ULID
        ("conv-26", False),
        ("week-1", False),
        ("trip-to-porto", False),
        ("2024-03-01-trip", False),
    ],
)
def test_an_id_that_is_only_an_identifier_is_told_apart_from_a_name(
    conversation: str, opaque: bool
) -> None:
    assert is_opaque(conversation) is opaque


def test_a_long_id_is_judged_alike_and_not_kept() -> None:
    """Answers are kept for ids of at most 256 characters only: a library caller's
    megabyte id is judged by the same rule and left to be collected."""
    long_hex = "3fa85f64" * 40_000  # 320,000 hex characters, digits among them
    long_name = "trip-to-porto-" * 30_000
    before = is_opaque.cache_info().currsize  # type: ignore[attr-defined]
    assert is_opaque(long_hex) is True
    assert is_opaque(long_name) is False
    assert is_opaque.cache_info().currsize == before  # type: ignore[attr-defined]
    assert is_opaque("3fa85f64-5717-4562-b3fc-2c963f66afa6") is True  # kept, same answer
    assert is_opaque("3fa85f64-5717-4562-b3fc-2c963f66afa6") is True


def test_a_conversation_is_called_by_its_name_or_by_what_it_opened_with() -> None:
    opening = "A minha prima Beatriz mora em Coimbra e trabalha numa livraria."
    assert label_of("trip-to-porto", opening) == "trip-to-porto"
    assert label_of("c6e33dcb712345678", opening) == "chat about Beatriz, Coimbra, prima"
    assert label_of("c6e33dcb712345678", "¿Dónde vive mi hermano Carlos?") == (
        "chat about Carlos, vive, hermano"
    )
    assert label_of("c6e33dcb712345678", "hi") == "chat"
    assert label_of("c6e33dcb712345678", None) == "chat"


_CLOSERS = " \t\n\"'\u201d\u2019\u00bb)"
_MARKS = [*_CLOSERS, "a", "?", "\uff1f", "\u00bf", "."]


@given(st.text(alphabet=st.sampled_from(_MARKS), max_size=40))
def test_a_sentence_asks_as_the_closing_regex_read_it(sentence: str) -> None:
    """The trailing quotes, brackets and spaces are skipped as the regex
    ``[\\s"'\u201d\u2019\u00bb)]+$`` did (the reference), without its cost (no word of
    these letters is a request or an English question opening)."""
    text = sentence.strip()
    closed = re.sub(r"[\s\"'\u201d\u2019\u00bb)]+$", "", text)
    opened = re.sub(r"^[\s\"'\u201c\u2018\u00ab(]+", "", text)
    expected = bool(text) and (closed.endswith(("?", "\uff1f")) or opened.startswith("\u00bf"))
    assert sentence_asks(sentence) == expected


@pytest.mark.parametrize("filler", [" ", "'", ")", " ' ) "])
def test_a_long_run_of_closing_characters_inside_a_turn_is_read_once(filler: str) -> None:
    """Before: the closing characters were cut by ``re.sub(r"[...]+$")``, which tries
    every start of a run that does not reach the end: quadratic in it (a turn of 40,000
    spaces between two words took 4 s in :func:`asks`, 1 s at 20,000); formation and
    retrieval read such turns. Now one pass from the end."""
    text = "where " + filler * (200_000 // len(filler)) + "now"
    assert not asks(text) and not is_question(text)
    assert asks(text + "?" + filler * 1000) and is_question("Where now?" + " " * 50_000)
