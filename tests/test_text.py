"""One notion of a word for the graph, retrieval, reconstruction and linking
(memory_core.text.words), and of a name (memory_core.text.names, .lexicon, .kinship)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_core.text.kinship import by_predicate, by_word, phrases
from memory_core.text.lexicon import (
    is_common_noun,
    is_common_word,
    is_function_word,
    is_verb_form,
)
from memory_core.text.names import NameIndex, extract_names
from memory_core.text.question import Question, foci
from memory_core.text.question import _opens_sentence as opens_sentence
from memory_core.text.words import (
    MAX_QUERY_TERMS,
    _caption_pieces,
    content_stems,
    fold,
    normalise_name,
    query_terms,
    split_sentences,
    stem,
)

from .kept import kept


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


# -- names: capitals that name something (memory_core.text.names, .lexicon, .kinship) ------


@pytest.mark.parametrize(
    "text",
    [
        # English: interjections, courtesy, adverbs, gerunds, adjectives opening a sentence
        "Here is my plan. Perfect weather today. Becoming a baker is my dream.",
        "Thanks! Honestly, that was great. Congrats on the new job.",
        "Wow. Absolutely. Seriously? Unfortunately it rained. Kickboxing helps.",
        "Sounds good. Looking forward to it. Speaking of which, Going out later?",
        "How'd it go? It'll be fine. Must've been hard. Let's see.",
        "Yeah, Here's one I did. Sure, See you soon! Plus, Anytime.",
        # Portuguese
        "Olá! Perfeito. Obrigado pela ajuda. Quando vens? Genial.",
        "Obrigada! Exatamente. Finalmente acabei. Caminhando devagar. Bom dia!",
        "Desculpa, Claro que sim. Parabéns! Adorei. Saudades.",
        # Spanish
        "¡Hola! ¿Dónde está la estación? Genial, gracias. Perfecto.",
        "¡Gracias! Bueno, Vale. Perfectamente bien. ¿Cuándo llegas? Claro.",
        "Felicidades. Encantado. Ojalá llueva. Caminando llegamos.",
        # verbs out of the lexicon opening a sentence (LoCoMo conv-30 translated)
        "Continua assim! Mandei uma foto. Acredita em você. Segue em frente.",
        "Te vejo amanhã. Continuo trabalhando. Adoraria ter isso. Eba! Concordo!",
        "Arriesgarse da miedo. Lamento oír eso. Entiendo cómo te sientes.",
        # shouting, laughter, days and months
        "JUST DOING IT! That is INTENSE. LOL. Hahaha. Mmm. Woohoo!",
        "Last Friday was fun. See you on Monday. Em Março, na sexta-feira.",
    ],
)
def test_sentence_openers_shouting_and_dates_are_no_names(text: str) -> None:
    assert extract_names(text) == []


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("Marta is a nurse in Braga.", ["Marta", "Braga"]),
        ("Obrigado, Marta! Vemo-nos em Lisboa.", ["Marta", "Lisboa"]),
        ("¿Dónde está Ana? Vive en Sevilla.", ["Ana", "Sevilla"]),
        ("Ana mora em Coimbra. Max adopted a puppy.", ["Ana", "Coimbra", "Max"]),
        ("Jon and Gina met. Robert, also known as Bob, came.", ["Jon", "Gina", "Robert", "Bob"]),
        ("Hey Mel! Congrats on the Nike deal.", ["Mel", "Nike"]),
        ("Awesome John, Glad Max is ok.", ["John", "Max"]),
        ("Visiting Lisbon was fun.", ["Lisbon"]),
        ("Becoming Nicole changed how I see things.", ["Nicole"]),
        ("New York is big and the Grand Canyon is deep.", ["New York", "Grand Canyon"]),
        ("Harry Potter and Game of Thrones are great.", ["Harry Potter", "Game of Thrones"]),
        ("Moro na Póvoa de Varzim.", ["Póvoa de Varzim"]),
        ("Dr. Silva met J.K. Rowling in St. Louis.", ["Silva", "J.K. Rowling", "St. Louis"]),
        ("I love Ed Sheeran's songs.", ["Ed Sheeran"]),
        ("We watch the NBA in the UK. LOL", ["NBA", "UK"]),
    ],
)
def test_names_are_found_wherever_they_stand(text: str, names: list[str]) -> None:
    assert extract_names(text) == names


def test_a_common_word_is_a_name_only_where_it_is_written_as_one() -> None:
    assert extract_names("Chess is fun.") == []  # only opens the sentence
    assert extract_names("I played Chess with Rui.") == ["Chess", "Rui"]
    assert extract_names("I played Chess, chess is fun.") == []  # also in lower case
    assert extract_names("Seeing it was Amazing.") == []  # not a noun: emphasis
    assert extract_names("Happy Birthday!") == []  # common words only, opening
    assert extract_names("I watched Iron Man.") == ["Iron Man"]


def test_a_word_only_capitalised_where_a_clause_opens_is_no_name_when_written_lower() -> None:
    assert extract_names("Remenber this. I remenber that.") == []
    assert extract_names("Lisbon is lovely. i love Lisbon.") == ["Lisbon"]


def test_quoted_terms_are_names_when_they_read_as_titles() -> None:
    text = 'We read "Finding Home." and "The Name of the Wind", not "me-time".'
    assert extract_names(text) == ["Finding Home", "The Name of the Wind"]
    assert extract_names('A quote: "Turn on the light - happiness hides in the dark"') == []
    assert extract_names('She said "Thanks" and left.') == []


@pytest.mark.parametrize(
    "word",
    ["Here", "Thanks", "Olá", "Obrigado", "Dónde", "Quando", "Friday", "Sábado", "How'd", "Hahaha"],
)
def test_function_words_are_never_names(word: str) -> None:
    assert is_function_word(word)


@pytest.mark.parametrize(
    "word",
    [
        "Perfect", "Becoming", "Perfeito", "Perfeitas", "Genial", "Geniales", "Happily",
        "Cities", "Caminhando", "Finalmente", "Unconditional", "Friendship", "Dairy-free",
    ],
)  # fmt: skip
def test_common_words_are_known_in_their_forms(word: str) -> None:
    assert is_common_word(word)


@pytest.mark.parametrize(
    "word",
    ["Marta", "Braga", "Ana", "Feedzai", "Beijing", "Manning", "Orlando", "James", "Sevilla"],
)
def test_names_are_not_common_words(word: str) -> None:
    assert not is_common_word(word)


def test_parts_of_speech_are_read_from_the_forms() -> None:
    assert is_verb_form("Visiting") and is_verb_form("Loved") and is_verb_form("Visitei")
    assert not is_verb_form("Wedding") and not is_verb_form("Beijing")
    assert is_common_noun("Chess") and is_common_noun("Turtles") and is_common_noun("Irmã")
    assert not is_common_noun("Amazing") and not is_common_noun("Honestly")


def test_relations_are_named_in_three_languages() -> None:
    sister = by_word("irmã")
    assert sister is not None and sister is by_word("Hermana") is by_word("sister")
    assert sister is by_predicate("has_sister") and by_predicate("has_mom") is by_word("mãe")
    assert phrases(sister) == ("my sister", "minha irmã", "mi hermana")
    dog = by_word("perro")
    assert dog is not None and not dog.person
    assert by_predicate("lives_in") is None and by_word("table") is None


def test_known_common_words_count_only_where_written_as_names() -> None:
    index = NameIndex(["Here", "Chess", "Iron Man", "Marta", "Friday", "user", "assistant"])
    assert index.names() == ["Chess", "Iron Man", "Marta"]  # function words name nothing
    assert index.mentioned("Here we go again") == []
    assert index.mentioned("We are here. Chess is fun, chess!") == []
    assert index.mentioned("I love Chess and Iron Man") == ["Iron Man", "Chess"]
    assert index.mentioned("ask the user, or the assistant") == []
    assert index.mentioned("how is marta's job?") == ["Marta"]


def test_a_speaker_called_by_a_function_or_calendar_word_is_a_name_written_as_one() -> None:
    """People are called April, May or Will: learned as a speaker's name, such a word is
    a name where it is written as one (capitalised, not opening a sentence, not also
    written in lower case there); never a role name, and as any other name, no name
    learned from what was said."""
    index = NameIndex(["Will", "April"])
    assert index.names() == []
    index.add(["Will", "April", "May", "user", "Assistant"], speakers=True)
    assert sorted(index.names()) == ["April", "May", "Will"]
    assert index.mentioned("What did April buy?") == ["April"]
    assert index.mentioned("Where did Will go hiking with May?") == ["Will", "May"]
    assert index.mentioned("Will you come in April?") == ["April"]
    assert index.mentioned("May I ask what you will do?") == []
    assert index.mentioned("I will see Will") == []  # lower case there too: not a name


def test_a_name_is_mentioned_whichever_way_its_accents_are_encoded() -> None:
    """Before: a name learned composed ("Zoé", NFC) was not found in a question that
    wrote it decomposed ("Zoe" and a combining accent, NFD, as some keyboards and
    copied text do), nor the other way round: the index compared code points."""
    composed, decomposed = "Zo\u00e9 Ribeiro", "Zoe\u0301 Ribeiro"
    assert NameIndex([composed]).mentioned(f"What does {decomposed} do?") == [composed]
    assert NameIndex([decomposed]).mentioned(f"What does {composed} do?") == [decomposed]
    assert NameIndex(["Jos\u00e9"]).mentioned("Jose\u0301, Jose and JOS\u00c9") == ["Jos\u00e9"]


def test_relation_phrases_are_mentioned_in_any_language_once_held() -> None:
    index = NameIndex(["Marta"])
    assert index.mentioned("Should I visit my sister?") == []
    index.add_relations(["has_sister", "lives_in", "has_boss"])
    assert index.mentioned("Should I visit my sister?") == ["my sister"]
    assert index.mentioned("Devo visitar a minha irma?") == ["minha irmã"]
    assert index.mentioned("¿Debería visitar a mi hermana?") == ["mi hermana"]
    assert index.mentioned("O meu chefe ligou") == ["meu chefe"]
    assert index.mentioned("Should I call my brother?") == []
    assert len(index) == 1  # relation phrases are not names


def test_a_name_learned_after_a_lookup_is_mentioned_the_next_time() -> None:
    index = NameIndex(["Marta"])
    assert index.mentioned("Did Rui call Marta?") == ["Marta"]
    answer = index.mentioned("Did Rui call Marta?")  # the kept answer, a copy of it
    answer.append("changed by the caller")
    index.add(["Rui"])
    assert index.mentioned("Did Rui call Marta?") == ["Rui", "Marta"]
    assert index.mentioned("Did Rui call Marta?") == ["Rui", "Marta"]


@pytest.mark.parametrize(
    ("text", "language", "terms"),
    [
        ("O que a Gina fez para promover a sua loja de roupas?", "pt",
         ("gina", "fez", "promover", "loja", "roupas")),
        ("¿Qué ciudades ha visitado Jon con su hermana?", "es",
         ("ciudades", "visitado", "jon", "hermana")),
        ("Did Al move to LA with the EU grant?", "en", ("al", "move", "la", "eu", "grant")),
    ],
)  # fmt: skip
def test_a_question_reads_its_own_language_s_function_words_as_none(
    text: str, language: str, terms: tuple[str, ...]
) -> None:
    """A Portuguese or Spanish question's articles, prepositions and pronouns are no
    terms (they kept every sentence of a block that shares "de" or "que", and weighed on
    BM25); an English question keeps "la" and "eu" ("LA", "the EU")."""
    question = Question.of(text)
    assert question.language == language
    assert question.terms == terms
    assert question.content == frozenset(stem(t) for t in terms)


def test_fold_reads_ascii_as_the_general_rule_does() -> None:
    """ASCII is only lowered (the fast path); everything else is case-folded and
    stripped of its marks; both agree wherever they meet."""
    import unicodedata

    def general(word: str) -> str:
        decomposed = unicodedata.normalize("NFKD", word.casefold())
        return "".join(c for c in decomposed if not unicodedata.combining(c))

    ascii_words = ["".join(map(chr, range(128))), "Melanie", "LA", "conv-26", ""]
    others = ["Não", "ÉCOLE", "Straße", "ﬁlm", "İstanbul", "x\u0301", "Ωμέγα", "\ud800"]
    for word in [*ascii_words, *others]:
        assert fold(word) == general(word), repr(word)
    assert fold("Não") == "nao" and fold("Straße") == "strasse"


def test_long_words_are_stemmed_and_looked_up_alike_and_never_kept() -> None:
    """A word's stem and its lexicon answers are kept for words of at most 64
    characters; a pasted hash or a megabyte run of letters is read every time (kept, a
    few thousand of them would hold gigabytes in a long-running worker)."""
    from memory_core.text.lexicon import is_common_word, is_verb_form

    kept_before = [kept(f).cache_info().currsize for f in (stem, is_common_word, is_verb_form)]
    for i in range(30):
        huge = "a" * 200_000 + f"{i:03d}visiting"
        assert stem(huge) == huge.removesuffix("ing")
        assert is_common_word(huge) is kept(is_common_word).__wrapped__(huge)
        assert is_verb_form(huge) is kept(is_verb_form).__wrapped__(huge)
    assert [
        kept(f).cache_info().currsize for f in (stem, is_common_word, is_verb_form)
    ] == kept_before
    assert stem("painting") == "paint" and is_verb_form("Visiting") and is_common_word("dog")


_SENTENCE_START_REFERENCE = re.compile(r"(?:^|[.!?¿¡…:;\n])[\W_]*$")


@given(st.text(alphabet=st.sampled_from([*" .!?¿¡…:;\n,-_'\u00e9a7A"]), max_size=30))
def test_a_sentence_opens_where_the_sentence_start_regex_said(text: str) -> None:
    """Only punctuation and spaces after a sentence's end (or the text's start) stand
    before the place: as ``(?:^|[.!?¿¡…:;\\n])[\\W_]*$`` on the text before it said
    (the reference), at every place of the text."""
    for end in range(len(text) + 1):
        expected = _SENTENCE_START_REFERENCE.search(text[:end]) is not None
        assert opens_sentence(text, end) == expected, (text, end)


def test_foci_of_a_pasted_run_of_punctuation_are_read_once() -> None:
    """Before: each capitalised word searched the whole text before it with the
    sentence-start regex, whose ``[\\W_]*$`` runs over a punctuation run from each of its
    characters: 1,500 "!" then "x" and a hundred names took 1.3 s in Question.of (the
    question's 2,000 characters), holding the lookup thread. Now one step back per
    character before each word."""
    text = "!" * 1_500 + "x " + "Ana Bob Cid Dan Eve " * 20
    found = {f.word: f.name for f in Question.of(text).foci}
    assert found == {"ana": True, "bob": True, "cid": True, "dan": True, "eve": True}
    assert [f.name for f in foci("!" * 1_000 + " Ana.  Bob, Cid")] == [False, False, True]



_CAPTION_REFERENCE = re.compile(r"(\[[^\]]*\])")


@given(st.text(alphabet=st.sampled_from([*"[]. ?!aAx"]), max_size=40))
def test_sentences_split_as_the_caption_regex_split_them(text: str) -> None:
    """Bracketed spans are cut out as ``re.split(r"(\\[[^\\]]*\\])")`` cut them (the
    reference: the same pieces, in order), without its cost."""
    assert _caption_pieces(text) == _CAPTION_REFERENCE.split(text)


def test_a_run_of_opening_brackets_is_split_once() -> None:
    """Before: each "[" without a "]" after it was searched to the text's end (the
    regex tried every one): quadratic (16,000 "[": 68 ms, a 32,000-character block line
    four times that, on every lookup that shows it). Now one pass."""
    run = "[" * 200_000
    text = f"Look. [a photo] then {run} done. End."
    assert split_sentences(text) == ["Look.", "[a photo]", f"then {run} done.", "End."]
