"""multilingual-e5-small is the default encoder, and formation's thresholds hold with it.

Formation's thresholds are stated on MiniLM's cosines; e5 puts every pair of dialogue turns
between about 0.79 and 0.93, so read as they were, a whole conversation became one segment
and one context (LoCoMo conv-30: 1 and 1, against MiniLM's 24 and 13). Each threshold is now
read through the encoder's cosine scale (``memory_core.text.similarity``).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from memory_core import LogMessage, MemoryStore
from memory_core.dream import DreamConfig
from memory_core.formation import FormationConfig, build_backends, parse_formation
from memory_core.formation.config import EncoderConfig
from memory_core.formation.stages.segmenter import DEFAULT_THRESHOLD
from memory_core.text.e5 import E5Encoder
from memory_core.text.similarity import IDENTITY, CosineScale

from .topics import tell_both


def test_e5_is_the_default_encoder_and_minilm_stays_selectable() -> None:
    assert FormationConfig().encoder.model == "e5"
    default = build_backends(FormationConfig(encoder=EncoderConfig(words="off")))
    assert "multilingual-e5-small" in default.encoder.interpretation.label
    assert default.encoder.multilingual
    minilm = build_backends(FormationConfig(encoder=EncoderConfig(model="minilm")))
    assert "MiniLM" in minilm.encoder.interpretation.label
    assert minilm.encoder.cosine_scale.identity and not minilm.encoder.multilingual


def test_thresholds_are_read_through_the_encoders_cosine_scale() -> None:
    scale = E5Encoder.cosine_scale
    config = FormationConfig().scaled(scale)
    assert config.contexts.join == pytest.approx((0.5 - scale.offset) / scale.slope)
    assert 0.85 < config.contexts.join < 0.95
    assert config.linking.context > config.contexts.join > config.contexts.secondary
    assert config.linking.homonym < config.contexts.secondary
    assert 0.9 < config.linking.homonym_cohesion < 1.0
    assert 0.95 < config.contexts.secondary_ratio < 1.0  # near-1 cosines: near-1 ratios
    assert FormationConfig().scaled(IDENTITY) == FormationConfig()
    dream = DreamConfig().scaled(scale)
    assert dream.entity_similarity == pytest.approx(scale.threshold(0.45))
    assert dream.context_merge == 1.0  # past e5's range: never met but by identity
    assert DreamConfig().scaled(IDENTITY) == DreamConfig()
    heuristic = parse_formation(
        {"encoder": {"words": "off"}, "segmentation": {"backend": "embedding"}}
    )
    segmenter = build_backends(heuristic).segmenter
    assert f"t{scale.threshold(DEFAULT_THRESHOLD):g}" in segmenter.interpretation.label


def test_a_cosine_scale_keeps_order_and_refuses_a_slope_that_would_not() -> None:
    scale = CosineScale(offset=-3.0, slope=4.0)
    values = [scale.threshold(t) for t in (0.0, 0.2, 0.5, 0.9)]
    assert values == sorted(values)
    assert scale.threshold(5.0) == 1.0
    assert scale.cohesion(0.0) == pytest.approx(math.sqrt(0.75))  # a mean cosine of 0: 0.75 here
    assert CosineScale(offset=0.5).cohesion(0.5) == 0.0  # under the scale's range
    assert math.isclose(scale.cohesion(1.0), 1.0)
    assert IDENTITY.threshold(0.3) == 0.3 and IDENTITY.ratio(0.85, 0.5) == pytest.approx(0.85)
    for slope in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="slope"):
            CosineScale(offset=0.0, slope=slope)


def test_e5_tells_two_topics_of_one_conversation_apart(tmp_path: Path) -> None:
    """Four turns about bread, then four about football: two contexts (one, before the
    thresholds were read through e5's scale)."""
    store = MemoryStore(
        tmp_path / "m.db", formation=FormationConfig(encoder=EncoderConfig(words="off"))
    )
    try:
        tell_both(store)
        contexts = store.contexts()
        assert len(contexts) >= 2, [c.label for c in contexts]
        found = store.recall_area("How did the bread turn out?", limit=3, budget_tokens=600)
        assert "bread" in found.hits[0].text or "crust" in found.hits[0].text
    finally:
        store.close()


def test_one_person_told_about_in_three_languages_is_one_entity(tmp_path: Path) -> None:
    """With e5 a mention's context reads alike in English, Portuguese and Spanish, so the
    same name in the same circumstances links to one entity (MiniLM, English-only, made
    the Portuguese "Beatriz" a homonym of the English one, and a cycle kept them apart)."""
    store = MemoryStore(
        tmp_path / "m.db", formation=FormationConfig(encoder=EncoderConfig(words="off"))
    )
    told = [
        ("c1", "My cousin Beatriz lives in Coimbra and works in a bookshop."),
        ("c1", "Beatriz loves hiking in the mountains."),
        ("c2", "A minha prima Beatriz mora em Coimbra e trabalha numa livraria."),
        ("c2", "A Beatriz adora caminhar nas montanhas."),
        ("c3", "Mi prima Beatriz vive en Coímbra y trabaja en una librería."),
    ]
    try:
        for i, (conversation, text) in enumerate(told):
            message = LogMessage({"role": "user", "content": text}, 1_700_000_000.0 + i)
            store.append([message], conversation=conversation, source="ingest")
        store.form_all()
        store.dream(trigger="test")
        named = [e for e in store.entities() if e.name == "Beatriz"]
        assert len(named) == 1 and named[0].mentions == 5, named
    finally:
        store.close()
