"""Token counting for the memory budget.

Counts with tiktoken's ``o200k_base`` encoding (the tokenizer of current OpenAI models,
a fair proxy for others) read from the BPE files that litellm ships, so nothing is ever
downloaded. Where those files are missing it falls back to a conservative estimate of
one token per three characters, and says so in ``name``.
"""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path
from typing import Protocol

__all__ = ["TokenCounter", "default_counter"]


class TokenCounter(Protocol):
    """Anything that counts tokens of a text."""

    name: str

    def count(self, text: str) -> int: ...


class _Tiktoken:
    def __init__(self, encoding: object, name: str) -> None:
        self._encoding = encoding
        self.name = name

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))  # type: ignore[attr-defined]


class _Estimate:
    def __init__(self, why: str) -> None:
        self.name = f"estimate:chars/3 ({why})"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 3)


def _litellm_bpe_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return folder if folder.is_dir() else None


def default_counter() -> TokenCounter:
    """The best offline counter available on this machine."""
    folder = _litellm_bpe_dir()
    if folder is None:
        return _Estimate("litellm's BPE files not found")
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(folder))
    try:
        import tiktoken

        return _Tiktoken(tiktoken.get_encoding("o200k_base"), "tiktoken:o200k_base")
    except Exception as exc:  # any failure to load the BPE means "estimate instead"
        return _Estimate(f"tiktoken unavailable: {exc}")
