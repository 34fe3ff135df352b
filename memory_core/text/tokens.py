"""Token counting for the memory budget, with the tokenizer of the model a request names.

:func:`counter_for` picks a tokenizer from the model name's last path segment, lower-cased
(``openai/gpt-4o-mini``, ``azure/gpt-35-turbo`` and ``openrouter/openai/gpt-4o`` resolve
as their bare names), by the first of these rules that matches:

* **OpenAI models**, the names tiktoken's model table knows (gpt-4o*, gpt-4.1*, gpt-4.5*,
  gpt-5*, o1*, o3*, o4-mini*, chatgpt-4o*, gpt-4*, gpt-3.5*, Azure's gpt-35*, ``ft:``
  names): that model's encoding, ``tiktoken:o200k_base``, ``tiktoken:cl100k_base`` (gpt-4,
  gpt-3.5) or ``tiktoken:p50k_base`` (text-davinci-002/003). An Azure deployment counts so
  when its name is the base model's; a custom deployment name is an unknown model.
  o200k_harmony (gpt-oss) and p50k_edit add only special tokens to o200k_base and
  p50k_base, which are counted as plain text here, so they share those counters.
* **Claude models** (``claude`` at a word start: ``anthropic/claude-sonnet-4``, Bedrock's
  ``us.anthropic.claude-...``): ``hf:anthropic_tokenizer``, the Hugging Face
  ``tokenizers`` file litellm ships. It is the tokenizer Anthropic published for Claude 1
  and 2, litellm's approximation of Claude's tokenizer. None is published for Claude 3 and
  later (Anthropic counts through an API call), so for those it is an approximation, not
  an exact count (litellm itself counts Claude 3 and later with tiktoken instead).
* **DeepSeek models** (``deepseek`` in the name, except ``-distill-`` models, which are
  Qwen or Llama underneath): ``hf:deepseek_tokenizer``, the V3 tokenizer litellm ships
  (R1 uses it too; V2 and the old coder models have close but different vocabularies).
* **Anything else** (unknown or local models, no model): the default, o200k_base: the
  encoding of every OpenAI model since gpt-4o, so the likeliest right one for an
  OpenAI-compatible upstream, and shipped by litellm. On the short English and code samples
  measured the shipped tokenizers agreed within a token; on other languages o200k_base
  counts fewer (a German sentence: 12 against 18 or 19 for cl100k, Claude's and
  DeepSeek's), so for an unknown model the memory block may run over its budget there.

Everything is read from files litellm ships (``litellm/litellm_core_utils/tokenizers``;
the BPE files are named by the sha1 of their blob URL, as tiktoken's cache names them),
so nothing is ever downloaded, and litellm itself is never imported. litellm ships the
BPE files of o200k_base, cl100k_base and p50k_base, not those of r50k_base or gpt2: the
retired models that use them (davinci, curie, ada, text-davinci-001) get the default. A
tokenizer that cannot be loaded, for that or any other reason, is replaced by the default
counter, named e.g. ``tiktoken:o200k_base (fallback for tiktoken:r50k_base)``; if
o200k_base itself cannot be loaded, by an estimate of one token per three characters.
No error reaches the request path.

A counter's ``name`` (it ends up in receipts) is the tokenizer's key, short and stable
(with ``(fallback for <key>)`` when it stands in for another); :func:`choose_tokenizer`
says why a model got it. Loaded tokenizers (a handful) are kept for the process; the
resolution of a model name to its counter is kept in a bounded LRU, so a client sending
a million distinct model names costs a million cheap resolutions, not a million entries.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import os
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .kept import kept_when_short

__all__ = [
    "DEFAULT_MAX_NAMES",
    "DEFAULT_TOKENIZER",
    "MAX_MODEL_CHARS",
    "TokenCounter",
    "TokenizerChoice",
    "Tokenizers",
    "choose_tokenizer",
    "counter_for",
    "default_counter",
    "load_tokenizer",
    "warm_tokenizers",
]

DEFAULT_TOKENIZER = "tiktoken:o200k_base"
DEFAULT_MAX_NAMES = 1024
MAX_MODEL_CHARS = 256
"""Longer model names are no model's (the default counter, not cached)."""

_BLOB = "https://openaipublic.blob.core.windows.net/"
_BPE_FILES: Mapping[str, tuple[str, ...]] = {
    "o200k_base": ("encodings/o200k_base.tiktoken",),
    "cl100k_base": ("encodings/cl100k_base.tiktoken",),
    "p50k_base": ("encodings/p50k_base.tiktoken",),
    "r50k_base": ("encodings/r50k_base.tiktoken",),
    "gpt2": ("gpt-2/encodings/main/vocab.bpe", "gpt-2/encodings/main/encoder.json"),
}
_SAME_COUNTS: Mapping[str, str] = {"o200k_harmony": "o200k_base", "p50k_edit": "p50k_base"}
_HF_FILES = frozenset({"anthropic_tokenizer", "deepseek_tokenizer"})
_CLAUDE = re.compile(r"(?:^|[^a-z0-9])claude")


class TokenCounter(Protocol):
    """Anything that counts tokens of a text."""

    name: str

    def count(self, text: str) -> int: ...


@dataclass(frozen=True, slots=True)
class TokenizerChoice:
    """The tokenizer a model name resolves to (its key, a counter's name) and why."""

    key: str
    reason: str


_COUNTS_KEPT = 2048
"""Short texts whose counts a tokenizer keeps: the block counts each fragment's line, and
the same fragments come back question after question (a tenth of a lookup's CPU was BPE)."""
_KEPT_CHARS = 1000
"""Longer texts are counted every time (:mod:`.kept`; a text's count never changes): what
is kept stays under ~8 MB a tokenizer (:data:`_COUNTS_KEPT` texts of up to 1,000
characters of up to 4 bytes), a handful of tokenizers a process."""


class _Tiktoken:
    def __init__(self, encoding: object, name: str) -> None:
        self._encoding = encoding
        self.name = name
        self._kept = kept_when_short(_COUNTS_KEPT, _KEPT_CHARS)(self._tokens)

    def count(self, text: str) -> int:
        return self._kept(text)

    def _tokens(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))  # type: ignore[attr-defined]


class _HuggingFace:
    def __init__(self, tokenizer: object, name: str) -> None:
        self._tokenizer = tokenizer
        self.name = name
        self._kept = kept_when_short(_COUNTS_KEPT, _KEPT_CHARS)(self._tokens)

    def count(self, text: str) -> int:
        return self._kept(text)

    def _tokens(self, text: str) -> int:
        try:
            return self._ids(text)
        except TypeError:  # lone surrogates cannot cross into Rust as UTF-8
            return self._ids(text.encode("utf-8", "replace").decode("utf-8"))

    def _ids(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)  # type: ignore[attr-defined]


class _Estimate:
    def __init__(self, why: str) -> None:
        self.name = f"estimate:chars/3 ({why})"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 3)


class _Fallback:
    """The default counter standing in for a tokenizer that failed to load."""

    def __init__(self, inner: TokenCounter, key: str, failure: Exception) -> None:
        self._inner = inner
        self.name = f"{inner.name} (fallback for {key})"
        self.failure = f"{type(failure).__name__}: {failure}"

    def count(self, text: str) -> int:
        return self._inner.count(text)


def _openai(segment: str) -> str | None:
    try:
        from tiktoken.model import encoding_name_for_model

        encoding = encoding_name_for_model(segment)
    except Exception:  # KeyError for names it does not know; anything else: not known either
        return None
    return "tiktoken:" + _SAME_COUNTS.get(encoding, encoding)


def _claude(segment: str) -> str | None:
    return "hf:anthropic_tokenizer" if _CLAUDE.search(segment) else None


def _deepseek(segment: str) -> str | None:
    return "hf:deepseek_tokenizer" if "deepseek" in segment and "distill" not in segment else None


_RULES: tuple[tuple[str, Callable[[str], str | None]], ...] = (
    ("OpenAI model: tiktoken's encoding for it", _openai),
    ("Claude model: litellm's Anthropic tokenizer", _claude),
    ("DeepSeek model: litellm's DeepSeek tokenizer", _deepseek),
)


def choose_tokenizer(model: str | None) -> TokenizerChoice:
    """The tokenizer for ``model`` by the module's rules; never raises, loads nothing."""
    if not isinstance(model, str) or not model.strip():
        return TokenizerChoice(DEFAULT_TOKENIZER, "default: no model named")
    if len(model) > MAX_MODEL_CHARS:
        return TokenizerChoice(DEFAULT_TOKENIZER, "default: model name too long")
    segment = model.strip().rsplit("/", 1)[-1].lower()
    for reason, rule in _RULES:
        key = rule(segment)
        if key is not None:
            return TokenizerChoice(key, reason)
    return TokenizerChoice(DEFAULT_TOKENIZER, "default: no tokenizer known for this model")


def _litellm_bpe_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return folder if folder.is_dir() else None


def _shipped_dir() -> Path:
    folder = _litellm_bpe_dir()
    if folder is None:
        raise FileNotFoundError("litellm's tokenizer files not found")
    return folder


def _load_tiktoken(encoding: str) -> TokenCounter:
    """tiktoken's encoding, only where every file it reads is in the cache folder (else
    tiktoken would download it)."""
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(_shipped_dir()))
    cache = os.environ["TIKTOKEN_CACHE_DIR"]
    files = _BPE_FILES.get(encoding)
    if files is None:
        raise LookupError(f"no BPE file known for {encoding}")
    names = (hashlib.sha1((_BLOB + file).encode()).hexdigest() for file in files)
    if not cache or not all((Path(cache) / name).is_file() for name in names):
        raise FileNotFoundError(f"{encoding}: BPE file not in {cache or 'the (disabled) cache'}")
    import tiktoken

    return _Tiktoken(tiktoken.get_encoding(encoding), f"tiktoken:{encoding}")


def _load_hf(name: str) -> TokenCounter:
    if name not in _HF_FILES:
        raise LookupError(f"no tokenizer file known for {name}")
    path = _shipped_dir() / f"{name}.json"
    from tokenizers import Tokenizer

    return _HuggingFace(Tokenizer.from_file(str(path)), f"hf:{name}")


_LOADERS: Mapping[str, Callable[[str], TokenCounter]] = {"tiktoken": _load_tiktoken, "hf": _load_hf}


def load_tokenizer(key: str) -> TokenCounter:
    """The counter for a tokenizer key (``tiktoken:<encoding>``, ``hf:<file>``); raises
    when it cannot be loaded offline."""
    kind, _, name = key.partition(":")
    loader = _LOADERS.get(kind)
    if loader is None:
        raise LookupError(f"no loader for {key}")
    return loader(name)


def default_counter() -> TokenCounter:
    """The best offline counter available on this machine."""
    if _litellm_bpe_dir() is None:
        return _Estimate("litellm's BPE files not found")
    try:
        return _load_tiktoken("o200k_base")
    except Exception as exc:  # any failure to load the BPE means "estimate instead"
        return _Estimate(f"tiktoken unavailable: {exc}")


class Tokenizers:
    """Counters by model name: a bounded LRU of names over a handful of loaded tokenizers.

    After the first call for a name, :meth:`counter_for` is one cache lookup. Each
    tokenizer is loaded once (under a lock: loading takes up to a few hundred ms); one
    that fails is replaced by the default counter for the life of this object.
    """

    def __init__(
        self,
        *,
        max_names: int = DEFAULT_MAX_NAMES,
        load: Callable[[str], TokenCounter] = load_tokenizer,
    ) -> None:
        self._load = load
        self._loaded: dict[str, TokenCounter] = {}
        self._lock = threading.RLock()
        self._by_name = functools.lru_cache(maxsize=max_names)(self._resolve)

    def counter_for(self, model: str | None) -> TokenCounter:
        """The counter for ``model``'s tokenizer (see the module docstring); never raises."""
        if isinstance(model, str) and len(model) <= MAX_MODEL_CHARS:
            return self._by_name(model)
        return self._resolve(model)

    def counter(self, key: str) -> TokenCounter:
        """The counter for a tokenizer key, loaded on first use, the default if it fails."""
        found = self._loaded.get(key)
        if found is None:
            with self._lock:
                found = self._loaded.get(key) or self._load_or_fall_back(key)
                self._loaded[key] = found
        return found

    @property
    def cached_names(self) -> int:
        """How many model names the LRU holds now (at most ``max_names``)."""
        return self._by_name.cache_info().currsize

    @property
    def loaded(self) -> tuple[str, ...]:
        """The tokenizer keys loaded so far (or replaced by the default)."""
        return tuple(self._loaded)

    def _resolve(self, model: str | None) -> TokenCounter:
        return self.counter(choose_tokenizer(model).key)

    def _load_or_fall_back(self, key: str) -> TokenCounter:
        try:
            return self._load(key)
        except Exception as exc:  # any failure to load means "the default instead"
            if key == DEFAULT_TOKENIZER:
                return _Estimate(f"{key} unavailable: {exc}")
            return _Fallback(self.counter(DEFAULT_TOKENIZER), key, exc)


_SHARED = Tokenizers()


def counter_for(model: str | None) -> TokenCounter:
    """The counter for the tokenizer of ``model``, shared by the whole process."""
    return _SHARED.counter_for(model)


SHIPPED = (
    "tiktoken:o200k_base",
    "tiktoken:cl100k_base",
    "hf:anthropic_tokenizer",
    "hf:deepseek_tokenizer",
)
"""The tokenizers current models use, loaded by :func:`warm_tokenizers`."""


def warm_tokenizers() -> tuple[str, ...]:
    """Load the shipped tokenizers of current models now (about a second in all), so a
    request naming one never waits for its loading inside its retrieval budget; returns
    the names of the counters loaded."""
    return tuple(_SHARED.counter(key).name for key in SHIPPED)
