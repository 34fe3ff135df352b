"""LLM formation stages through the real LiteLLMGenerator against the fake upstream.

The generator is synchronous (formation runs in a worker thread) while the fake
upstream serves from the test's event loop, so every stage call runs in a thread.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from memory_core.formation.interfaces import (
    BackendError,
    FragmentView,
    Interpretation,
    Normalised,
    RelationCandidate,
)
from memory_core.formation.models.llm import LiteLLMGenerator
from memory_core.formation.models.llm_stages import (
    LLMNormaliser,
    LLMRelationExtractor,
    LLMSegmenter,
)
from memory_core.formation.models.structured import (
    Answer,
    extract_json,
    schema_of,
    structured_call,
)
from proxy.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

T = TypeVar("T")

UTTERANCES = [
    "I adopted a puppy last week.",
    "She chews every shoe in the house.",
    "Anyway, how is your new job going?",
    "Great, I started at the bank on Monday.",
]

RELATION = {
    "subject": "<speaker>",
    "predicate": "lives_in",
    "object": "Lisbon",
    "object_is_entity": True,
    "confidence": 0.9,
    "valid_from": "2023",
    "correction": False,
}


@pytest.fixture
def upstream(upstream: FakeUpstream) -> FakeUpstream:
    """The shared fake upstream, closing each connection: litellm caches its synchronous
    clients (and their pooled sockets) beyond the test, and the server is gone after it."""
    upstream.keep_alive = False
    return upstream


def generator(base: str, model: str = "tiny-llm") -> LiteLLMGenerator:
    return LiteLLMGenerator(
        provider="openai", model=model, api_base=base, api_key="test", timeout_s=5
    )


async def in_thread(call: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(call, *args)


def last_user(body: dict[str, Any]) -> str:
    return str(next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user"))


def relations(**changes: Any) -> str:
    return json.dumps({"relations": [{**RELATION, **changes}]})


# --- each stage, valid output ---------------------------------------------------------


async def test_segmenter_parses_boundaries(upstream: FakeUpstream) -> None:
    upstream.script = ['{"boundaries": [1]}']
    segmenter = LLMSegmenter(generator(upstream.url))
    assert await in_thread(segmenter.boundaries, UTTERANCES) == [1]
    assert segmenter.interpretation == Interpretation("segmentation", "llm", "tiny-llm", "1")
    body = upstream.requests[0].body
    assert body["model"] == "tiny-llm"
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "segmentation"
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["boundaries"]["items"]["maximum"] == 2
    prompt = last_user(body)
    assert "[0] I adopted a puppy last week." in prompt
    assert "[3] Great, I started at the bank on Monday." in prompt
    assert '"boundaries"' in body["messages"][0]["content"]  # the schema is in the prompt too


async def test_segmenter_skips_the_model_for_a_single_utterance(upstream: FakeUpstream) -> None:
    segmenter = LLMSegmenter(generator(upstream.url))
    assert await in_thread(segmenter.boundaries, ["only one"]) == []
    assert upstream.requests == []


async def test_normaliser_keeps_english_text(upstream: FakeUpstream) -> None:
    upstream.script = [
        json.dumps({"language": "en", "english": "I live in Lisbon now.", "names": []})
    ]
    normaliser = LLMNormaliser(generator(upstream.url))
    result = await in_thread(normaliser.normalise, "I live in Lisbon now!")
    assert result == Normalised(lang="en", canonical="I live in Lisbon now!", translated=False)
    assert normaliser.interpretation.label == "normalisation:llm:tiny-llm@1"


async def test_fake_translator_drives_the_normaliser(upstream: FakeUpstream) -> None:
    dictionary = {
        "A Maria mudou-se para a Alemanha em 2021.": {
            "language": "pt",
            "english": "Maria moved to Germany in 2021.",
            "names": [
                {"original": "Maria", "english": "Maria"},
                {"original": "Alemanha", "english": "Germany"},
            ],
        }
    }

    def translator(body: dict[str, Any]) -> str:
        return json.dumps(dictionary[last_user(body)])

    upstream.script = [translator]
    normaliser = LLMNormaliser(generator(upstream.url))
    result = await in_thread(normaliser.normalise, "A Maria mudou-se para a Alemanha em 2021.")
    assert result == Normalised(
        lang="pt",
        canonical="Maria moved to Germany in 2021.",
        translated=True,
        names=(("Maria", "Maria"), ("Alemanha", "Germany")),
    )


async def test_relation_extractor_returns_candidates(upstream: FakeUpstream) -> None:
    upstream.script = [
        json.dumps(
            {
                "relations": [
                    RELATION,
                    {
                        **RELATION,
                        "subject": "Ana",
                        "predicate": "born_on",
                        "object": "12 May",
                        "object_is_entity": False,
                        "confidence": 1,
                        "valid_from": None,
                        "correction": True,
                    },
                ]
            }
        )
    ]
    extractor = LLMRelationExtractor(generator(upstream.url))
    fragment = FragmentView(
        "Actually I have lived in Lisbon since 2023, and Ana was born on 12 May.",
        speaker="Caroline",
        role="user",
        mentions=("Lisbon", "Ana"),
    )
    result = await in_thread(extractor.extract, fragment)
    assert result == [
        RelationCandidate("<speaker>", "lives_in", "Lisbon", True, 0.9, "2023", False),
        RelationCandidate("Ana", "born_on", "12 May", False, 1.0, None, True),
    ]
    assert extractor.interpretation.stage == "relations"
    prompt = last_user(upstream.requests[0].body)
    assert "Caroline" in prompt and "<speaker>" in prompt and "Lisbon, Ana" in prompt


# --- parsing and the retry ------------------------------------------------------------


async def test_fenced_json_with_prose_is_accepted(upstream: FakeUpstream) -> None:
    upstream.script = ['Sure! Here it is:\n```json\n{"boundaries": [0, 2]}\n```\nHope it helps.']
    segmenter = LLMSegmenter(generator(upstream.url))
    assert await in_thread(segmenter.boundaries, UTTERANCES) == [0, 2]
    assert len(upstream.requests) == 1


async def test_malformed_then_valid_answer_succeeds_on_retry(upstream: FakeUpstream) -> None:
    upstream.script = ['{"boundaries": [1,', '{"boundaries": [2]}']
    segmenter = LLMSegmenter(generator(upstream.url))
    assert await in_thread(segmenter.boundaries, UTTERANCES) == [2]
    assert len(upstream.requests) == 2
    retry = upstream.requests[1].body["messages"]
    assert retry[-2] == {"role": "assistant", "content": '{"boundaries": [1,'}
    assert retry[-1]["role"] == "user"
    assert "the answer is not a JSON object" in retry[-1]["content"]
    assert "Expecting" in retry[-1]["content"]  # the JSON syntax error itself


async def test_retry_names_the_schema_violation(upstream: FakeUpstream) -> None:
    upstream.script = ['{"boundaries": [1, 7]}', '{"boundaries": [1]}']
    segmenter = LLMSegmenter(generator(upstream.url))
    assert await in_thread(segmenter.boundaries, UTTERANCES) == [1]
    error = "$.boundaries[1]: 7 is greater than the maximum 2"
    assert error in upstream.requests[1].body["messages"][-1]["content"]


async def test_malformed_twice_raises_with_the_raw_output(upstream: FakeUpstream) -> None:
    upstream.script = ["no idea", "still no JSON here"]
    segmenter = LLMSegmenter(generator(upstream.url))
    with pytest.raises(BackendError, match="invalid structured output after one retry") as info:
        await in_thread(segmenter.boundaries, UTTERANCES)
    assert info.value.raw == "still no JSON here"
    assert "not a JSON object" in str(info.value)
    assert len(upstream.requests) == 2


# --- schema and semantic violations ---------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ("{}", "$: missing required field(s) boundaries"),
        ('{"boundaries": "1"}', '$.boundaries: expected array, got "1"'),
        ('{"boundaries": [1.5]}', "$.boundaries[0]: expected integer, got 1.5"),
        ('{"boundaries": [3]}', "$.boundaries[0]: 3 is greater than the maximum 2"),
        ('{"boundaries": [-1]}', "$.boundaries[0]: -1 is less than the minimum 0"),
        ('{"boundaries": [2, 1]}', "$.boundaries: must be in increasing order"),
        ('{"boundaries": [1, 1]}', "$.boundaries: must be in increasing order"),
        ('{"boundaries": [], "why": "x"}', "$: unexpected field(s) why"),
    ],
)
async def test_segmenter_rejects_invalid_answers(
    upstream: FakeUpstream, answer: str, error: str
) -> None:
    upstream.script = [answer, answer]
    segmenter = LLMSegmenter(generator(upstream.url))
    with pytest.raises(BackendError) as info:
        await in_thread(segmenter.boundaries, UTTERANCES)
    assert error in str(info.value)
    assert info.value.raw == answer


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ({"language": "pt", "english": "Hi"}, "$: missing required field(s) names"),
        ({"language": "Portuguese", "english": "Hi", "names": []}, "does not match"),
        (
            {"language": "pt", "english": "Hi", "names": [{"original": "Berlim", "english": "B"}]},
            "$.names[0].original: 'Berlim' does not occur in the text",
        ),
        ({"language": "pt", "english": " ", "names": []}, "$.english: empty"),
        ({"language": "pt", "english": 3, "names": []}, "$.english: expected string, got 3"),
    ],
)
async def test_normaliser_rejects_invalid_answers(
    upstream: FakeUpstream, answer: dict[str, Any], error: str
) -> None:
    upstream.script = [json.dumps(answer)] * 2
    normaliser = LLMNormaliser(generator(upstream.url))
    with pytest.raises(BackendError) as info:
        await in_thread(normaliser.normalise, "Olá, a Maria vive em Lisboa.")
    assert error in str(info.value)


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (relations(predicate="Lives In"), '$.relations[0].predicate: "Lives In" does not match'),
        (relations(predicate="livesIn"), "does not match"),
        (relations(subject=""), "$.relations[0].subject: needs at least 1 character"),
        (relations(object="  "), "$.relations[0].object: blank"),
        (relations(confidence=1.5), "$.relations[0].confidence: 1.5 is greater than"),
        (relations(object_is_entity="yes"), "object_is_entity: expected boolean"),
        (relations(valid_from=2023), "valid_from: expected string or null, got 2023"),
        (json.dumps({"relations": [{"subject": "a"}]}), "missing required field(s) predicate"),
    ],
)
async def test_relation_extractor_rejects_invalid_answers(
    upstream: FakeUpstream, answer: str, error: str
) -> None:
    upstream.script = [answer, answer]
    extractor = LLMRelationExtractor(generator(upstream.url))
    with pytest.raises(BackendError) as info:
        await in_thread(extractor.extract, FragmentView("I live in Lisbon.", "Caroline", "user"))
    assert error in str(info.value)


# --- transport failures ---------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_unreachable_endpoint_raises_naming_it() -> None:
    base = f"http://127.0.0.1:{closed_port()}/v1"
    segmenter = LLMSegmenter(generator(base))
    with pytest.raises(BackendError) as info:
        await in_thread(segmenter.boundaries, UTTERANCES)
    assert base in str(info.value)
    assert "openai/tiny-llm" in str(info.value)


async def test_upstream_error_status_is_not_retried(upstream: FakeUpstream) -> None:
    extractor = LLMRelationExtractor(generator(upstream.url, model="fail-500"))
    with pytest.raises(BackendError, match="fail-500") as info:
        await in_thread(extractor.extract, FragmentView("I live in Lisbon.", None, "user"))
    assert upstream.url in str(info.value)
    assert len(upstream.requests) == 1


# --- the pure helpers -----------------------------------------------------------------


def test_extract_json_finds_one_object_in_prose() -> None:
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('The {answer} is {"a": [1, 2]} as asked.') == {"a": [1, 2]}
    assert extract_json('```\n{"a": true}\n```') == {"a": True}
    with pytest.raises(ValueError, match="not a JSON object"):
        extract_json("")


def test_the_schema_a_model_sees_is_the_answer_models_written_in_place() -> None:
    class Inner(Answer):
        n: int = 0

    class Outer(Answer):
        inner: Inner
        note: str | None

    schema = schema_of(Outer)
    assert "$defs" not in json.dumps(schema) and schema.pop("title") == "Outer"
    assert "title" not in json.dumps(schema)  # the answer's own title only
    assert schema["properties"]["inner"]["properties"]["n"]["type"] == "integer"
    assert schema["required"] == ["inner", "note"] and schema["additionalProperties"] is False


def test_structured_call_wraps_generator_exceptions() -> None:
    class Broken:
        name = "broken"

        def generate(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> str:
            raise RuntimeError("out of memory")

    with pytest.raises(BackendError, match="broken: generation failed: RuntimeError"):
        structured_call(Broken(), [{"role": "user", "content": "hi"}], Answer)
