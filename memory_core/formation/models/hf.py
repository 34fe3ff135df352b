"""Transformers backends for formation: NER, mention vectors and a local causal LM.

The design names Hugging Face models for three stages (``dslim/bert-large-NER``,
``google-bert/bert-base-multilingual-uncased``, Ministral 3B). Weights cannot be downloaded
at run time, so every model here is loaded with ``local_files_only=True``: from
``model_path`` when the configuration gives one, else from the local Hugging Face cache
by name. A model that is not there fails with a :class:`BackendError` naming the model
and the config key to set.

Importing this module costs nothing: torch and transformers are imported on first use,
and the weights are loaded on first use too (or at once through ``load()``, which the
pipeline calls at startup to fail early). Loading is guarded by a lock, so concurrent
first calls load once. Inference runs under ``torch.inference_mode()`` on the CPU unless a
``device`` is given; thread counts are the caller's business.

An :class:`Interpretation` records the model *name*, not its path: the name says which
model produced a row, the path only says where its files were on one machine.
"""

from __future__ import annotations

import abc
import importlib
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np

from ..interfaces import BackendError, Interpretation, Mention, Vectors
from ..stages.ner import occurrences

__all__ = [
    "TokenTag",
    "TransformersGenerator",
    "TransformersMentionEncoder",
    "TransformersNER",
    "tags_to_mentions",
]

_BACKEND = "transformers"
_FALLBACK_MAX_LENGTH = 512
_T = TypeVar("_T")


def _transformers() -> Any:
    """The transformers module, imported on first use and typed ``Any`` at this boundary."""
    return importlib.import_module("transformers")


class _OfflineModel(abc.ABC):
    """A tokenizer and model loaded once, offline, from a folder or the local cache.

    Subclasses name the model ``_kind`` (for messages) and build their parts in
    :meth:`_build`; every failure to load becomes one :class:`BackendError` here.
    """

    _kind: ClassVar[str] = "model"

    def __init__(self, model: str, model_path: str | None, *, config_key: str, device: str) -> None:
        self._model = model
        self._model_path = model_path
        self._config_key = config_key
        self._device = device
        self._parts: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    @property
    def _source(self) -> str:
        return self._model_path if self._model_path else self._model

    def load(self) -> None:
        """Load the tokenizer and weights now (normally done on first use)."""
        self._loaded()

    def _loaded(self) -> tuple[Any, Any]:
        with self._lock:
            if self._parts is None:
                self._parts = self._offline(self._build)
            return self._parts

    @abc.abstractmethod
    def _build(self, transformers: Any, source: str) -> tuple[Any, Any]:
        """Load this backend's (tokenizer, model) from ``source`` with ``transformers``."""

    def _offline(self, build: Callable[[Any, str], _T]) -> _T:
        """Run ``build(transformers, source)``; any failure means the model is unusable."""
        try:
            if self._model_path and not Path(self._model_path).is_dir():
                raise FileNotFoundError(f"no such folder: {self._model_path}")
            return build(_transformers(), self._source)
        except Exception as exc:
            raise BackendError(
                f"{self._kind} {self._model!r} is not available offline: set "
                f"{self._config_key}.model_path to a local folder holding it, or put it in the "
                f"Hugging Face cache (error: {exc})"
            ) from exc

    @contextmanager
    def _inference(self) -> Iterator[None]:
        """Inference mode, with runtime failures (memory, shapes) as :class:`BackendError`."""
        import torch

        try:
            with torch.inference_mode():
                yield
        except (RuntimeError, ValueError) as exc:
            raise BackendError(f"{self._kind} {self._model!r} failed: {exc}") from exc


def _load_pair(transformers: Any, source: str, model_class: str, device: str) -> tuple[Any, Any]:
    """Tokenizer and model in eval mode; progress bars off, as they would litter server logs."""
    transformers.utils.logging.disable_progress_bar()
    tokenizer = transformers.AutoTokenizer.from_pretrained(source, local_files_only=True)
    model = getattr(transformers, model_class).from_pretrained(source, local_files_only=True)
    model.to(device)
    model.eval()
    return tokenizer, model


def _max_length(tokenizer: Any, model: Any) -> int:
    """The longest input the model accepts: the smaller of the tokenizer's and the model's.

    A tokenizer without a limit reports a huge sentinel; a model without position
    embeddings has none either; then 512, BERT's length.
    """
    limits = [
        int(value)
        for value in (
            getattr(tokenizer, "model_max_length", None),
            getattr(model.config, "max_position_embeddings", None),
        )
        if isinstance(value, int) and 0 < value < 1_000_000
    ]
    return min(limits) if limits else _FALLBACK_MAX_LENGTH


# --- NER ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenTag:
    """One sub-word token's prediction: ``text[start:end]``, its word index, tag, probability.

    ``word`` groups the pieces of one word (``Bob`` ``##by``); tokens of the same word are
    consecutive.
    """

    start: int
    end: int
    word: int
    tag: str
    score: float


def _split_tag(tag: str) -> tuple[str, str]:
    """``B-PER`` -> ``("B", "PER")``; ``O`` -> ``("O", "")``; a bare ``PER`` reads as inside."""
    if tag == "O" or not tag:
        return "O", ""
    if len(tag) > 2 and tag[0] in "BI" and tag[1] in "-_":
        return tag[0], tag[2:]
    return "I", tag


def tags_to_mentions(tokens: Sequence[TokenTag], text: str) -> list[Mention]:
    """Entity spans from token tags, in BIO or IOB1 style, labelled without the prefix.

    A word takes the tag of its first piece (its other pieces extend the span and are never
    split off). ``B-X`` always starts an entity; ``I-X`` continues an open ``X`` entity and
    otherwise starts one (IOB1, or a stray ``I-`` after ``O``); ``O`` closes. Confidence is
    the mean probability of the span's tokens. Spans come sorted by start, never overlap,
    and ``surface == text[start:end]``.
    """
    spans: list[_Span] = []
    current: _Span | None = None
    previous_word: int | None = None
    for token in sorted(tokens, key=lambda t: (t.start, t.end)):
        continuation = token.word == previous_word
        previous_word = token.word
        if continuation:
            if current is not None:
                current.extend(token)
            continue
        prefix, label = _split_tag(token.tag)
        if prefix == "O":
            current = None
        elif prefix == "I" and current is not None and current.label == label:
            current.extend(token)
        else:
            current = _Span(token.start, token.end, label, [token.score])
            spans.append(current)
    return [
        Mention(s.start, s.end, text[s.start : s.end], s.label, float(np.mean(s.scores)))
        for s in spans
    ]


@dataclass
class _Span:
    """An entity being assembled from consecutive tokens."""

    start: int
    end: int
    label: str
    scores: list[float]

    def extend(self, token: TokenTag) -> None:
        self.end = token.end
        self.scores.append(token.score)


def _known_mentions(text: str, known: Sequence[str], taken: list[Mention]) -> list[Mention]:
    """Whole-word, case-insensitive matches of ``known`` names that overlap no other span.

    Longer names are matched first, so "New York City" wins over "New York". Linear in the text: one
    pass finds every name (:func:`~memory_core.formation.stages.ner.occurrences`), and the
    characters already taken are marked in a byte per character.
    """
    found: list[Mention] = []
    occupied = bytearray(len(text))
    for mention in taken:
        occupied[mention.start : mention.end] = b"\x01" * (mention.end - mention.start)
    names = sorted({k.strip() for k in known if k.strip()}, key=len, reverse=True)
    spans = occurrences(text, names)
    for name in names:
        for start, end in spans[name]:
            if occupied.find(1, start, end) != -1:
                continue
            occupied[start:end] = b"\x01" * (end - start)
            found.append(Mention(start, end, text[start:end], "MISC", 1.0))
    return found


class TransformersNER(_OfflineModel):
    """NER with a token-classification model (``dslim/bert-large-NER`` by default).

    Long texts are cut into overlapping windows of the model's length (a stride of a
    quarter window); a token seen in two windows keeps the prediction of the window where
    it sits farther from an edge, where the model saw most context. Needs a fast tokenizer
    (for character offsets and word ids).
    """

    _kind = "NER model"

    def __init__(
        self,
        model: str,
        model_path: str | None,
        *,
        config_key: str,
        batch_size: int = 16,
        device: str = "cpu",
    ) -> None:
        super().__init__(model, model_path, config_key=config_key, device=device)
        self._batch_size = batch_size
        self.interpretation = Interpretation("ner", _BACKEND, model)

    def _build(self, transformers: Any, source: str) -> tuple[Any, Any]:
        tokenizer, model = _load_pair(
            transformers, source, "AutoModelForTokenClassification", self._device
        )
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError("a fast tokenizer (tokenizer.json) is needed for offsets")
        return tokenizer, model

    def mentions(self, text: str, known: Sequence[str] = ()) -> list[Mention]:
        """Entities the model tags in ``text``, plus unclaimed matches of ``known`` names."""
        found = tags_to_mentions(self._token_tags(text), text) if text.strip() else []
        found += _known_mentions(text, known, found)
        return sorted(found, key=lambda m: (m.start, m.end))

    def _token_tags(self, text: str) -> list[TokenTag]:
        import torch

        tokenizer, model = self._loaded()
        max_length = _max_length(tokenizer, model)
        encoded = tokenizer(
            text,
            truncation=True,
            max_length=max_length,
            stride=max(1, max_length // 4),
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding=True,
            return_tensors="pt",
        )
        inputs = {
            key: value
            for key, value in encoded.items()
            if key not in ("offset_mapping", "overflow_to_sample_mapping")
        }
        windows = inputs["input_ids"].shape[0]
        probabilities = []
        with self._inference():
            for first in range(0, windows, self._batch_size):
                batch = {
                    k: v[first : first + self._batch_size].to(model.device)
                    for k, v in inputs.items()
                }
                logits = model(**batch).logits
                probabilities.append(torch.softmax(logits.float(), dim=-1).cpu())
        return _merge_windows(encoded, torch.cat(probabilities).numpy(), model.config.id2label)


def _merge_windows(encoded: Any, probabilities: Any, id2label: dict[int, str]) -> list[TokenTag]:
    """One :class:`TokenTag` per token of the text, from the windows that saw it."""
    best: dict[tuple[int, int], tuple[int, TokenTag]] = {}
    for window in range(probabilities.shape[0]):
        words = encoded.word_ids(window)
        offsets = encoded["offset_mapping"][window].tolist()
        positions = [i for i, word in enumerate(words) if word is not None]
        if not positions:
            continue
        first, last = positions[0], positions[-1]
        for i in positions:
            start, end = offsets[i]
            if start == end:
                continue
            label = int(probabilities[window, i].argmax())
            tag = TokenTag(
                start, end, words[i], id2label[label], float(probabilities[window, i, label])
            )
            centrality = min(i - first, last - i)
            if (start, end) not in best or centrality > best[start, end][0]:
                best[start, end] = (centrality, tag)
    return [tag for _, tag in sorted(best.values(), key=lambda item: item[1].start)]


# --- mention vectors ---------------------------------------------------------------------


class TransformersMentionEncoder(_OfflineModel):
    """Mention-context vectors from an encoder (mBERT by default): masked mean pooling.

    ``dimension`` is the model's ``hidden_size``, read from its config file at construction
    (cheap; a missing model fails there already). Weights load on first :meth:`encode`.
    Texts longer than the model's length are truncated: mention contexts are short.
    Vectors are L2-normalised float32, so a dot product is the cosine similarity.
    """

    _kind = "mention encoder model"

    def __init__(
        self,
        model: str,
        model_path: str | None,
        *,
        config_key: str,
        batch_size: int = 32,
        device: str = "cpu",
    ) -> None:
        super().__init__(model, model_path, config_key=config_key, device=device)
        self._batch_size = batch_size
        self.interpretation = Interpretation("mentions", _BACKEND, model)
        self.dimension: int = self._offline(_hidden_size)

    def _build(self, transformers: Any, source: str) -> tuple[Any, Any]:
        return _load_pair(transformers, source, "AutoModel", self._device)

    def encode(self, texts: Sequence[str]) -> Vectors:
        """One unit vector per text (shape ``len(texts) x dimension``)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        tokenizer, model = self._loaded()
        max_length = _max_length(tokenizer, model)
        chunks = []
        with self._inference():
            for first in range(0, len(texts), self._batch_size):
                batch = list(texts[first : first + self._batch_size])
                chunks.append(self._pooled(tokenizer, model, batch, max_length))
        return np.concatenate(chunks).astype(np.float32, copy=False)

    @staticmethod
    def _pooled(tokenizer: Any, model: Any, texts: list[str], max_length: int) -> Vectors:
        import torch

        encoded = tokenizer(
            texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
        ).to(model.device)
        hidden = model(**encoded).last_hidden_state.float()
        mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        mean = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        unit = torch.nn.functional.normalize(mean, p=2.0, dim=-1)
        return np.asarray(unit.cpu().numpy(), dtype=np.float32)


def _hidden_size(transformers: Any, source: str) -> int:
    config = transformers.AutoConfig.from_pretrained(source, local_files_only=True)
    config = getattr(config, "text_config", None) or config
    return int(config.hidden_size)


# --- causal LM ---------------------------------------------------------------------------


class TransformersGenerator(_OfflineModel):
    """A local causal LM answering chat messages with text (expected JSON; the caller validates).

    The prompt is the tokenizer's chat template when it has one, else plain
    ``role: content`` lines ending in ``assistant:``. The JSON schema is appended to the
    last message unless ``schema_in_prompt`` is False (for callers whose messages already
    carry it). Decoding is greedy, so one prompt always gives one answer; only the newly
    generated text is returned.
    """

    _kind = "causal LM"

    def __init__(
        self,
        model: str,
        model_path: str | None,
        *,
        config_key: str,
        max_new_tokens: int = 512,
        schema_in_prompt: bool = True,
        device: str = "cpu",
    ) -> None:
        super().__init__(model, model_path, config_key=config_key, device=device)
        self.name = model
        self._max_new_tokens = max_new_tokens
        self._schema_in_prompt = schema_in_prompt

    def _build(self, transformers: Any, source: str) -> tuple[Any, Any]:
        return _load_pair(transformers, source, "AutoModelForCausalLM", self._device)

    def prompt(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> str:
        """The exact text given to the model for ``messages`` and ``schema``."""
        tokenizer, _ = self._loaded()
        return _render(tokenizer, self._messages(messages, schema))

    def generate(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> str:
        """The model's answer to ``messages``, greedy, at most ``max_new_tokens`` tokens."""
        tokenizer, model = self._loaded()
        templated = bool(getattr(tokenizer, "chat_template", None))
        text = _render(tokenizer, self._messages(messages, schema))
        encoded = tokenizer(text, return_tensors="pt", add_special_tokens=not templated)
        encoded = encoded.to(model.device)
        with self._inference():
            output = model.generate(
                input_ids=encoded["input_ids"],
                attention_mask=encoded["attention_mask"],
                generation_config=self._greedy(tokenizer, model),
            )
        new_tokens = output[0, encoded["input_ids"].shape[1] :]
        return str(tokenizer.decode(new_tokens, skip_special_tokens=True)).strip()

    def _messages(
        self, messages: list[dict[str, str]], schema: dict[str, Any]
    ) -> list[dict[str, str]]:
        return _with_schema(messages, schema if self._schema_in_prompt else {})

    def _greedy(self, tokenizer: Any, model: Any) -> Any:
        """Greedy decoding; stops at the model's end token, pads with the tokenizer's."""
        defaults = model.generation_config
        eos = _first_set(defaults.eos_token_id, tokenizer.eos_token_id)
        pad = _first_set(tokenizer.pad_token_id, defaults.pad_token_id)
        if pad is None:
            pad = eos[0] if isinstance(eos, list) else eos
        return _transformers().GenerationConfig(
            max_new_tokens=self._max_new_tokens,
            do_sample=False,
            num_beams=1,
            eos_token_id=eos,
            pad_token_id=pad,
        )


def _first_set(*values: Any) -> Any:
    return next((value for value in values if value is not None), None)


def _with_schema(messages: list[dict[str, str]], schema: dict[str, Any]) -> list[dict[str, str]]:
    """``messages`` with the schema appended to the last one (templates may reject a late
    system message, and some accept no system role at all)."""
    copied = [dict(message) for message in messages]
    if not schema:
        return copied
    instruction = "Answer with JSON only, matching this JSON schema:\n" + json.dumps(
        schema, sort_keys=True
    )
    if not copied:
        return [{"role": "user", "content": instruction}]
    last = copied[-1]
    last["content"] = f"{last.get('content', '')}\n\n{instruction}"
    return copied


def _render(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    if getattr(tokenizer, "chat_template", None):
        return str(
            tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        )
    lines = [f"{m.get('role', 'user')}: {m.get('content', '')}" for m in messages]
    return "\n".join([*lines, "assistant:"])
