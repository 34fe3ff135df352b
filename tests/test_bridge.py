"""The word bridge: a question's words that memory never uses meet memory's words in
another language through their vectors (``memory_core.retrieval.bridge``), kept by
formation (``word_vectors``) and read with each graph version (``index.words``).

An English question about a Portuguese memory shared only names with it, so BM25, the
graph's word foci and the block's sentence choice found nothing for "job" in "perdi o
emprego". The encoder here is a small bilingual one (each word a concept's vector, a text
the mean of its words'), so what is tested is the bridge, never a model's quirks; the
real proxy with multilingual-e5-small is tested in ``test_live_multilingual.py``.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from memory_core import LogMessage, MemoryStore
from memory_core.formation import FormationConfig, build_backends
from memory_core.formation.config import EncoderConfig
from memory_core.graph import GraphSettings
from memory_core.index.words import WordIndex, Words
from memory_core.retrieval.bridge import BridgeConfig, bridge
from memory_core.storage.tables import word_vectors
from memory_core.text.language import detect_language
from memory_core.text.question import Question, focus_words

F32 = npt.NDArray[np.float32]

CONCEPTS = {
    "job": ("job", "emprego", "trabajo"),
    "bakery": ("bakery", "padaria", "panadería"),
    "lost": ("lost", "perdi", "perdí", "perdeu"),
    "garden": ("garden", "jardim", "jardín"),
    "tomatoes": ("tomatoes", "tomates", "tomato"),
    "rome": ("rome", "roma"),
}
"""Words that mean one thing in English, Portuguese and Spanish."""


def _unit(seed: str, dim: int = 384) -> F32:
    rng = np.random.default_rng(zlib.crc32(seed.encode()))
    v = rng.standard_normal(dim).astype(np.float32)
    return np.asarray(v / np.linalg.norm(v), np.float32)


class BilingualEncoder:
    """Each known word is its concept's vector (a translation: cosine 1 before a little
    noise of its own), any other word a random direction; a text is the normalised mean of
    its words' vectors."""

    name = "test/bilingual"
    dimension = 384
    multilingual = True

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self._concept = {w: c for c, words in CONCEPTS.items() for w in words}

    def word(self, word: str) -> F32:
        concept = self._concept.get(word.lower())
        if concept is None:
            return _unit(word.lower())
        v = _unit(concept) + 0.05 * _unit(word.lower())
        return np.asarray(v / np.linalg.norm(v), np.float32)

    def encode(self, texts: Sequence[str]) -> F32:
        self.calls.append(list(texts))
        rows = []
        for text in texts:
            words = [w for w in text.replace("?", " ").replace(".", " ").split() if w]
            v = np.sum([self.word(w) for w in words], axis=0) if words else _unit(text)
            rows.append(v / max(float(np.linalg.norm(v)), 1e-9))
        return np.asarray(rows, np.float32).reshape(len(texts), self.dimension)


TOLD_PT = [
    "Ontem perdi o emprego na padaria.",
    "O meu jardim tem tomates e flores.",
    "Fui a Roma em maio com a minha irmã.",
    "A minha irmã Ana joga ténis aos sábados.",
]


def _store(path: Path, encoder: BilingualEncoder, **encoder_settings: object) -> MemoryStore:
    formation = FormationConfig(encoder=EncoderConfig.model_validate(encoder_settings))
    backends = build_backends(formation, encoder=encoder)
    return MemoryStore(path, backends=backends, formation=formation)


def _told(store: MemoryStore, texts: Sequence[str]) -> None:
    history = [
        LogMessage({"role": "user", "content": t}, 1_700_000_000.0 + i)
        for i, t in enumerate(texts)
    ]
    store.append(history, conversation="c1", source="ingest")
    store.form_all()


def _rows(store: MemoryStore) -> list[tuple[int, str, str, bytes]]:
    with store._read_lock:
        return word_vectors.since(store._reader, 0)


# --- the vocabulary -------------------------------------------------------------------


def _words(entries: Sequence[tuple[str, str]]) -> Words:
    index = WordIndex(384)
    encoder = BilingualEncoder()
    return index.publish([(w, lang, encoder.word(w)) for w, lang in entries])


def test_the_nearest_words_come_by_cosine_and_only_from_other_languages_when_asked() -> None:
    words = _words([("emprego", "pt"), ("jardim", "pt"), ("job", "en"), ("padaria", "pt")])
    probe = BilingualEncoder().word("job")
    assert [w for w, _ in words.nearest(probe, 2)] == ["job", "emprego"]
    assert next(w for w, _ in words.nearest(probe, 2, besides="en")) == "emprego"
    assert all(w != "job" for w, _ in words.nearest(probe, 4, besides="en"))
    assert words.nearest(probe, 0) == []
    assert words.nearest(probe, 2, besides="xx")[0][0] == "job"  # a language memory lacks


def test_a_view_is_a_prefix_that_later_words_never_change() -> None:
    index = WordIndex(384)
    encoder = BilingualEncoder()
    first = index.publish([("emprego", "pt", encoder.word("emprego"))])
    second = index.publish([("jardim", "pt", encoder.word("jardim"))])
    assert len(first) == 1 and first.row_of("jardim") is None
    assert len(second) == 2 and second.row_of("jardim") == 1
    assert [w for w, _ in first.nearest(encoder.word("garden"), 5)] == ["emprego"]


def test_stored_vectors_of_the_wrong_size_or_no_length_are_skipped(tmp_path: Path) -> None:
    encoder = BilingualEncoder()
    store = _store(tmp_path / "m.db", encoder)
    try:
        _told(store, TOLD_PT[:1])
        with store._write_lock:
            word_vectors.add(
                store._writer,
                [("broken", "pt", b"\x00" * 12), ("zero", "pt", np.zeros(384, "<f4").tobytes())],
                "test",
            )
        index = WordIndex(384)
        with store._read_lock:
            words = index.publish(index.read(store._reader))
        assert words.row_of("broken") is None and words.row_of("zero") is None
        assert words.row_of("emprego") is not None
        found = store.recall_area("When did I lose my job?", limit=3, budget_tokens=500)
        assert found.hits  # the lookup still answers
    finally:
        store.close()


# --- matching a question's words -----------------------------------------------------


def test_an_unknown_word_is_matched_to_memory_words_of_another_language() -> None:
    words = _words([("emprego", "pt"), ("padaria", "pt"), ("jardim", "pt"), ("perdi", "pt")])
    encoder = BilingualEncoder()
    question = Question.of("When did I lose my job at the bakery?")
    bridged = bridge(question, words, encoder.encode, BridgeConfig(min_cosine=0.5))
    assert dict(bridged.bridged) == {"job": ("emprego",), "bakery": ("padaria",)}
    assert {"emprego", "padaria"} <= set(bridged.terms)
    assert {"emprego", "padaria"} <= bridged.content
    assert bridged.foci == question.foci  # what the question asks stays its own
    assert bridged.translations("job") == ("emprego",)
    assert bridged.translations("lose") == ()


def test_words_memory_uses_and_same_language_words_are_never_matched() -> None:
    words = _words([("job", "en"), ("tomatoes", "en"), ("tomates", "pt")])
    encoder = BilingualEncoder()
    question = Question.of("Did I lose my job?")
    assert bridge(question, words, encoder.encode, BridgeConfig(min_cosine=0.5)) is question
    english = Question.of("Do I grow a tomato?")  # "tomatoes" is English: no translation
    matched = bridge(english, words, encoder.encode, BridgeConfig(min_cosine=0.5))
    assert dict(matched.bridged) == {"tomato": ("tomates",)}


def test_nothing_is_encoded_when_memory_has_no_word_of_another_language() -> None:
    english = _words([("job", "en"), ("garden", "en")])
    encoder = BilingualEncoder()
    question = Question.of("When did I lose my work at the bakery?")
    assert question.language == "en"
    assert english.any_besides("en") is False and english.any_besides("pt") is True
    assert bridge(question, english, encoder.encode, BridgeConfig(min_cosine=0.5)) is question
    assert encoder.calls == []  # no word of it was encoded
    undetermined = _words([("job", "en"), ("padaria", "und")])
    assert undetermined.any_besides("en") is True  # a word of unknown language still may be
    bridged = bridge(question, undetermined, encoder.encode, BridgeConfig(min_cosine=0.5))
    assert dict(bridged.bridged) == {"bakery": ("padaria",)}
    assert encoder.calls  # now it was


def test_a_name_is_matched_only_when_nearly_the_same_word() -> None:
    words = _words([("roma", "pt"), ("jon", "pt")])
    encoder = BilingualEncoder()
    question = Question.of("When was I in Rome with Jean?")
    matched = bridge(question, words, encoder.encode, BridgeConfig(min_cosine=-1.0))
    assert dict(matched.bridged).get("rome") == ("roma",)
    assert "jean" not in dict(matched.bridged)  # a random direction: far under 0.95


def test_the_bridge_is_off_without_translations_words_or_a_vocabulary() -> None:
    words = _words([("emprego", "pt")])
    encoder = BilingualEncoder()
    question = Question.of("Did I lose my job?")
    off = BridgeConfig(translations=0)
    assert bridge(question, words, encoder.encode, off) is question
    assert bridge(question, _words([]), encoder.encode, BridgeConfig()) is question
    none = BridgeConfig(max_words=0)
    assert bridge(question, words, encoder.encode, none) is question
    assert encoder.calls == []  # nothing was encoded for it


# --- formation keeps the words; retrieval uses them ----------------------------------


def test_formation_keeps_each_word_once_with_its_fragments_language(tmp_path: Path) -> None:
    encoder = BilingualEncoder()
    store = _store(tmp_path / "m.db", encoder)
    try:
        _told(store, TOLD_PT[:2])
        _told(store, TOLD_PT[:3])  # the first two again: no word twice
        rows = _rows(store)
        words = [w for _, w, _, _ in rows]
        assert len(words) == len(set(words))
        assert {"emprego", "padaria", "jardim", "tomates", "roma"} <= set(words)
        assert {lang for _, _, lang, _ in rows} == {"pt"}
        assert "o" not in words and "na" not in words  # function words are no foci
    finally:
        store.close()


def test_an_english_question_finds_a_portuguese_statement_through_the_bridge(
    tmp_path: Path,
) -> None:
    encoder = BilingualEncoder()
    store = _store(tmp_path / "m.db", encoder)
    try:
        _told(store, TOLD_PT)
        asked = "When did I lose my job at the bakery?"
        found = store.recall_area(asked, limit=2, budget_tokens=800)
        assert "emprego" in found.hits[0].text
        assert found.area is not None
        assert found.area["bridged"]["job"] == ["emprego"]
        assert "bm25" in found.area["foci"]
        explained = store.explain_area("When did I lose my job at the bakery?", limit=2)
        assert explained.bridged["bakery"] == ["padaria"]
    finally:
        store.close()


def test_the_bridge_weighs_in_the_ranking(tmp_path: Path) -> None:
    """The same memory and question with the bridge off: the statement about the job is
    no longer found by its words (only the dense term can find it)."""
    encoder = BilingualEncoder()
    store = _store(tmp_path / "m.db", encoder)
    try:
        _told(store, TOLD_PT)
        on = store.recall_area("job bakery", limit=4, budget_tokens=800)
        terms_on = {f["id"]: f["terms"]["bm25"] for f in on.area["fragments"]} if on.area else {}
    finally:
        store.close()
    store = MemoryStore(
        tmp_path / "m.db",
        backends=build_backends(FormationConfig(), encoder=encoder),
        graph=GraphSettings(bridge=BridgeConfig(translations=0)),
    )
    try:
        off = store.recall_area("job bakery", limit=4, budget_tokens=800)
        terms_off = {f["id"]: f["terms"]["bm25"] for f in off.area["fragments"]} if off.area else {}
    finally:
        store.close()
    assert max(terms_on.values()) > 0
    assert max(terms_off.values(), default=0.0) == 0


@pytest.mark.parametrize(
    ("settings", "kept"),
    [({}, False), ({"words": "on"}, True), ({"words": "off"}, False)],
)
def test_an_english_encoder_keeps_no_words_unless_asked(
    tmp_path: Path, settings: dict[str, str], kept: bool
) -> None:
    encoder = BilingualEncoder()
    encoder.multilingual = False
    store = _store(tmp_path / "m.db", encoder, **settings)
    try:
        _told(store, TOLD_PT[:1])
        assert bool(_rows(store)) is kept
    finally:
        store.close()


def test_a_pass_encodes_at_most_max_new_words(tmp_path: Path) -> None:
    encoder = BilingualEncoder()
    store = _store(tmp_path / "m.db", encoder, max_new_words=3)
    try:
        _told(store, [" ".join(f"palavra{chr(97 + i)}x" for i in range(20))])
        assert len(_rows(store)) == 3
        assert [len(c) for c in encoder.calls].count(3) == 1  # the three in one call
    finally:
        store.close()


def test_memory_keeps_at_most_max_words_vectors(tmp_path: Path) -> None:
    encoder = BilingualEncoder()
    store = _store(tmp_path / "m.db", encoder, max_words=5)
    try:
        _told(store, [" ".join(f"palavra{chr(97 + i)}x" for i in range(4))])
        _told(store, [" ".join(f"outra{chr(97 + i)}x" for i in range(4))])
        assert len(_rows(store)) == 5
        _told(store, ["Ontem perdi o emprego na padaria."])
        assert len(_rows(store)) == 5  # full: new words go without, formation goes on
        assert store.stats().failed == 0
    finally:
        store.close()


def test_forming_memory_again_for_another_encoder_drops_the_word_vectors(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.db"
    store = _store(path, BilingualEncoder())
    _told(store, TOLD_PT)
    assert _rows(store)
    store.close()

    class Other(BilingualEncoder):
        name = "test/other"

    other = _store(path, Other())
    try:
        other.recall("emprego", limit=3, budget_tokens=500)  # the first use checks
        assert other.reencoded is not None
        assert _rows(other) == []  # no vector of the old encoder is left
        other.form_all()
        assert {w for _, w, _, _ in _rows(other)} >= {"emprego", "padaria"}
        with other._read_lock:
            made_by = {
                str(row[0])
                for row in other._reader.execute("SELECT DISTINCT encoder FROM word_vectors")
            }
        assert len(made_by) == 1 and "test/other" in made_by.pop()
    finally:
        other.close()


# --- languages and focus words ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("¡Hola, Jon! Qué gusto verte. ¿Qué tal?", "es"),
        ("Vamos a crear contenido genial para tus redes.", "es"),
        ("Uau, também tô animado! Vai ser demais!", "pt"),
        ("A minha prima Beatriz mora em Coimbra.", "pt"),
        ("Yeah, its a great idea!", "en"),
        ("When did Gina get her tattoo?", "en"),
        ("Onde mora a minha prima?", "pt"),
        ("¿Dónde vive mi hermano Carlos?", "es"),
        ("Bonjour, je suis très content", "fr"),
        ("Ich bin müde und das ist gut", "de"),
        ("", "und"),
        ("1234 5678", "und"),
        ("ÇÃÕ", "pt"),
    ],
)
def test_the_language_vote_tells_portuguese_and_spanish_apart(text: str, language: str) -> None:
    assert detect_language(text) == language


def test_focus_words_are_the_words_a_question_could_ask_about() -> None:
    words = focus_words("Ontem perdi o emprego na Padaria Central, 2023, X1 abc-def!")
    assert "emprego" in words and "padaria" in words and "central" in words
    assert "o" not in words and "na" not in words
    assert "2023" not in words and "x1" not in words
    assert len(focus_words(" ".join(f"w{i}ord" for i in range(50)), limit=5)) == 0
    assert len(focus_words(" ".join(f"word{chr(97 + i % 26)}x" for i in range(50)), limit=5)) == 5
