"""Transformers backends, run for real on tiny models built from configs.

Each model is a few thousand random weights saved to a temp folder with a WordPiece
tokenizer written from a vocabulary file, then loaded through the same offline code path
as a real checkpoint. Where an assertion needs a known output, the weights are set so the
answer does not depend on the random ones: a NER head whose bias alone picks the tag, and
a causal LM whose final norm is zero, so every logit ties and greedy decoding picks
token 0.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers

from memory_core.formation.interfaces import BackendError, Mention
from memory_core.formation.models.hf import (
    TokenTag,
    TransformersGenerator,
    TransformersMentionEncoder,
    TransformersNER,
    tags_to_mentions,
)

# Token 0 is an ordinary word, so a causal LM whose logits all tie answers "hello".
VOCAB = [
    "hello", "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "alice", "bob", "##by", "lives", "in", "paris", "and", "the", "city", ".", ",", ":",
    "{", "}", "[", "]", '"', "<", ">", "/", "user", "system", "assistant", "type", "object",
]  # fmt: skip
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]
TEXT = "Alice and Bobby lives in Paris."
WORDS = ["Alice", "and", "Bobby", "lives", "in", "Paris", "."]
TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</{{ m['role'] }}>{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def _tokenizer(folder: Path) -> Any:
    folder.mkdir(parents=True, exist_ok=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return transformers.BertTokenizer(vocab=str(vocab))  # in transformers 5, the fast one


def _bert_config(**extra: Any) -> Any:
    return transformers.BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,  # short, so one sentence already needs several windows
        pad_token_id=1,
        **extra,
    )


def _ner_folder(root: Path, name: str, favoured: str | None, logit: float = 2.0) -> Path:
    """A tiny NER model; with ``favoured``, every token gets that tag whatever the input."""
    folder = root / name
    tokenizer = _tokenizer(folder)
    torch.manual_seed(0)
    config = _bert_config(
        num_labels=len(LABELS),
        id2label=dict(enumerate(LABELS)),
        label2id={label: i for i, label in enumerate(LABELS)},
    )
    model = transformers.BertForTokenClassification(config)
    if favoured is not None:
        with torch.no_grad():
            model.classifier.weight.zero_()
            model.classifier.bias.zero_()
            model.classifier.bias[LABELS.index(favoured)] = logit
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _favoured_probability(logit: float = 2.0) -> float:
    return math.exp(logit) / (math.exp(logit) + len(LABELS) - 1)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    folders = {
        "random": _ner_folder(root, "random", None),
        "b_per": _ner_folder(root, "b_per", "B-PER"),
        "i_per": _ner_folder(root, "i_per", "I-PER"),
        "o": _ner_folder(root, "o", "O"),
        "encoder": _encoder_folder(root / "encoder"),
        "plain_lm": _lm_folder(root / "plain_lm", template=None),
        "chat_lm": _lm_folder(root / "chat_lm", template=TEMPLATE),
    }
    return folders


def _encoder_folder(folder: Path) -> Path:
    tokenizer = _tokenizer(folder)
    torch.manual_seed(0)
    transformers.BertModel(_bert_config()).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _lm_folder(folder: Path, template: str | None) -> Path:
    tokenizer = _tokenizer(folder)
    if template is not None:
        tokenizer.chat_template = template
    config = transformers.LlamaConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=VOCAB.index("[PAD]"),
        bos_token_id=VOCAB.index("[CLS]"),
        eos_token_id=VOCAB.index("[SEP]"),
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        model.model.norm.weight.zero_()  # every logit 0: greedy decoding picks token 0
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _ner(models: dict[str, Path], name: str) -> TransformersNER:
    return TransformersNER("tiny-ner", str(models[name]), config_key="formation.ner")


# --- tags_to_mentions: hand-made tag sequences --------------------------------------------


def _tags(
    text: str, tagged: list[tuple[str, str]], words: list[int] | None = None
) -> list[TokenTag]:
    """Tokens for ``(piece, tag)`` pairs found left to right in ``text``; score 0.5."""
    tokens, cursor = [], 0
    for i, (piece, tag) in enumerate(tagged):
        start = text.index(piece, cursor)
        cursor = start + len(piece)
        tokens.append(TokenTag(start, cursor, words[i] if words else i, tag, 0.5))
    return tokens


def test_bio_spans_are_labelled_without_prefix() -> None:
    text = "Ann Lee met Bob in New York ."
    tags = [
        ("Ann", "B-PER"), ("Lee", "I-PER"), ("met", "O"), ("Bob", "B-PER"), ("in", "O"),
        ("New", "B-LOC"), ("York", "I-LOC"), (".", "O"),
    ]  # fmt: skip
    assert tags_to_mentions(_tags(text, tags), text) == [
        Mention(0, 7, "Ann Lee", "PER", 0.5),
        Mention(12, 15, "Bob", "PER", 0.5),
        Mention(19, 27, "New York", "LOC", 0.5),
    ]


def test_iob1_inside_tags_start_entities_and_b_splits_neighbours() -> None:
    text = "Ann Bob Cy went"
    tags = [("Ann", "I-PER"), ("Bob", "B-PER"), ("Cy", "I-PER"), ("went", "O")]
    assert [m.surface for m in tags_to_mentions(_tags(text, tags), text)] == ["Ann", "Bob Cy"]


def test_label_change_and_stray_inside_tag_start_new_entities() -> None:
    text = "Acme Paris x Rome"
    tags = [("Acme", "B-ORG"), ("Paris", "I-LOC"), ("x", "O"), ("Rome", "I-LOC")]
    found = tags_to_mentions(_tags(text, tags), text)
    assert [(m.surface, m.label) for m in found] == [
        ("Acme", "ORG"), ("Paris", "LOC"), ("Rome", "LOC"),
    ]  # fmt: skip


def test_word_pieces_follow_the_first_piece() -> None:
    text = "Bobby went"
    pieces = [("Bob", "B-PER"), ("by", "B-LOC"), ("went", "O")]
    tokens = _tags(text, pieces, words=[0, 0, 1])
    tokens[1] = TokenTag(3, 5, 0, "B-LOC", 0.9)
    [bobby] = tags_to_mentions(tokens, text)
    assert (bobby.start, bobby.end, bobby.surface, bobby.label) == (0, 5, "Bobby", "PER")
    assert bobby.confidence == pytest.approx(0.7)
    outside = [TokenTag(0, 3, 0, "O", 0.9), TokenTag(3, 5, 0, "B-PER", 0.9)]
    assert tags_to_mentions(outside, text) == []


def test_confidence_is_the_mean_token_probability() -> None:
    text = "Ann Lee"
    tokens = [TokenTag(0, 3, 0, "B-PER", 0.9), TokenTag(4, 7, 1, "I-PER", 0.5)]
    assert tags_to_mentions(tokens, text)[0].confidence == pytest.approx(0.7)


# --- TransformersNER on tiny models -------------------------------------------------------


def test_ner_on_random_weights_returns_well_formed_mentions(models: dict[str, Path]) -> None:
    ner = _ner(models, "random")
    ner.load()
    found = ner.mentions(TEXT)
    assert found == sorted(found, key=lambda m: m.start)
    for mention in found:
        assert 0 <= mention.start < mention.end <= len(TEXT)
        assert mention.surface == TEXT[mention.start : mention.end]
        assert mention.label in {"PER", "LOC", "ORG", "MISC"}
        assert 0.0 < mention.confidence <= 1.0
    assert ner.mentions(TEXT) == found


def test_ner_begin_tags_give_one_mention_per_word_across_windows(
    models: dict[str, Path],
) -> None:
    text = " ".join([TEXT] * 4)  # about 36 tokens; the model takes 16 at a time
    found = _ner(models, "b_per").mentions(text)
    assert [m.surface for m in found] == WORDS * 4
    assert {m.label for m in found} == {"PER"}
    assert all(m.confidence == pytest.approx(_favoured_probability()) for m in found)


def test_ner_inside_tags_join_the_whole_text(models: dict[str, Path]) -> None:
    text = " ".join([TEXT] * 4)
    [whole] = _ner(models, "i_per").mentions(text)
    assert (whole.start, whole.end, whole.surface, whole.label) == (0, len(text), text, "PER")
    assert whole.confidence == pytest.approx(_favoured_probability())


def test_ner_adds_unclaimed_known_names(models: dict[str, Path]) -> None:
    found = _ner(models, "o").mentions(TEXT, known=["paris", "Ali", "Bobby lives", " "])
    assert found == [Mention(10, 21, "Bobby lives", "MISC", 1.0), Mention(25, 30, "Paris")]
    tagged = _ner(models, "b_per").mentions(TEXT, known=["alice", "Paris in"])
    assert [m.surface for m in tagged] == WORDS
    assert tagged[0].label == "PER"


def test_ner_of_empty_text_is_empty(models: dict[str, Path]) -> None:
    assert _ner(models, "b_per").mentions("  ") == []


# --- TransformersMentionEncoder -----------------------------------------------------------


def _encoder(models: dict[str, Path], batch_size: int = 32) -> TransformersMentionEncoder:
    return TransformersMentionEncoder(
        "tiny-encoder", str(models["encoder"]), config_key="formation.mentions",
        batch_size=batch_size,
    )  # fmt: skip


def test_encoder_vectors_are_unit_float32_and_deterministic(models: dict[str, Path]) -> None:
    encoder = _encoder(models)
    assert encoder.dimension == 32
    texts = ["Alice lives in Paris.", "Bob", "the city, the city and the city " * 4]
    vectors = encoder.encode(texts)
    assert vectors.shape == (3, 32)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(encoder.encode(texts), vectors)
    one_by_one = _encoder(models, batch_size=1).encode(texts)
    np.testing.assert_allclose(one_by_one, vectors, atol=1e-5)  # padding does not leak in


def test_encoder_of_nothing_is_an_empty_matrix(models: dict[str, Path]) -> None:
    assert _encoder(models).encode([]).shape == (0, 32)


# --- TransformersGenerator ----------------------------------------------------------------

MESSAGES = [
    {"role": "system", "content": "find relations"},
    {"role": "user", "content": "Alice lives in Paris."},
]
SCHEMA = {"type": "object"}


def _generator(
    models: dict[str, Path], name: str, *, schema_in_prompt: bool = True
) -> TransformersGenerator:
    return TransformersGenerator(
        "tiny-lm", str(models[name]), config_key="formation.causal_lm", max_new_tokens=3,
        schema_in_prompt=schema_in_prompt,
    )  # fmt: skip


def test_generator_uses_the_chat_template(models: dict[str, Path]) -> None:
    generator = _generator(models, "chat_lm")
    prompt = generator.prompt(MESSAGES, SCHEMA)
    assert prompt.startswith("<system>find relations</system><user>Alice lives in Paris.")
    assert prompt.endswith('{"type": "object"}</user><assistant>')
    assert generator.generate(MESSAGES, SCHEMA) == "hello hello hello"


def test_generator_without_template_uses_role_lines(models: dict[str, Path]) -> None:
    generator = _generator(models, "plain_lm")
    assert generator.prompt(MESSAGES, {}) == (
        "system: find relations\nuser: Alice lives in Paris.\nassistant:"
    )
    assert "JSON schema" in generator.prompt(MESSAGES, SCHEMA)
    unchanged = _generator(models, "plain_lm", schema_in_prompt=False)
    assert unchanged.prompt(MESSAGES, SCHEMA) == generator.prompt(MESSAGES, {})
    assert generator.generate(MESSAGES, SCHEMA) == "hello hello hello"
    assert generator.name == "tiny-lm"


# --- offline failures and interpretations ------------------------------------------------


@pytest.mark.parametrize("stage", ["ner", "mentions", "causal_lm"])
def test_missing_model_names_the_model_and_the_config_key(tmp_path: Path, stage: str) -> None:
    key = f"formation.{stage}"
    with pytest.raises(BackendError) as caught:
        _build(stage, "org/absent-model", str(tmp_path / "absent"), key).load()
    assert "'org/absent-model' is not available offline" in str(caught.value)
    assert f"set {key}.model_path to a local folder" in str(caught.value)


def test_model_missing_from_the_cache_names_the_model() -> None:
    with pytest.raises(BackendError, match=r"'org/absent-model'.*formation\.ner\.model_path"):
        _build("ner", "org/absent-model", None, "formation.ner").load()


def _build(stage: str, model: str, path: str | None, key: str) -> Any:
    if stage == "ner":
        return TransformersNER(model, path, config_key=key)
    if stage == "mentions":
        return TransformersMentionEncoder(model, path, config_key=key)
    return TransformersGenerator(model, path, config_key=key)


def test_interpretations_name_the_model_not_the_folder(models: dict[str, Path]) -> None:
    ner = _ner(models, "o")
    assert (ner.interpretation.stage, ner.interpretation.backend) == ("ner", "transformers")
    assert ner.interpretation.model == "tiny-ner"
    assert _encoder(models).interpretation.label == "mentions:transformers:tiny-encoder@1"
