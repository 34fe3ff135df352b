"""One notion of a word for the graph, retrieval, reconstruction and linking
(memory_core.text.words)."""

from __future__ import annotations

import pytest

from memory_core.text.words import (
    MAX_QUERY_TERMS,
    content_stems,
    normalise_name,
    query_terms,
    split_sentences,
    stem,
)


@pytest.mark.parametrize(
    "forms",
    [
        ("paint", "paints", "painted", "painting"),
        ("participate", "participated"),
        ("puppy", "puppies"),
        ("dress", "dresses"),
        ("story", "stories"),
    ],
)
def test_inflections_share_a_stem(forms: tuple[str, ...]) -> None:
    assert len({stem(word) for word in forms}) == 1


@pytest.mark.parametrize("word", ["cat", "bus", "is", "2023", "東京", "café"])
def test_short_words_numbers_and_other_scripts_keep_their_form(word: str) -> None:
    assert stem(word) == word


def test_content_words_skip_stop_words_single_letters_and_repeats() -> None:
    assert query_terms("Did she paint the 2 DOGS, and the dogs garden? I x") == [
        "paint",
        "2",
        "dogs",
        "garden",
    ]
    assert content_stems("She painted puppies") == frozenset({"paint", "puppi"})


def test_query_terms_are_bounded() -> None:
    text = " ".join(f"word{i}" for i in range(5000))
    assert len(query_terms(text)) == MAX_QUERY_TERMS


def test_names_are_keyed_without_case_accents_articles_or_possessives() -> None:
    assert normalise_name("The Beatles's") == "beatles"
    assert normalise_name("José  Álvarez") == "jose alvarez"
    assert normalise_name("der Rhein") == "rhein"
    assert normalise_name("MELANIE\u2019s") == "melanie"


def test_sentences_end_at_terminal_punctuation_but_not_after_abbreviations() -> None:
    text = "Hi Dr. Smith. I met J. Doe, e.g. at work! [image: a dog. cute] Right… ok"
    assert split_sentences(text) == [
        "Hi Dr. Smith.",
        "I met J. Doe, e.g. at work!",
        "[image: a dog. cute]",
        "Right…",
        "ok",
    ]
