"""The MiniLM encoder: one inference thread, questions first, each runtime faithful to the
sentence-transformers pipeline, and the ONNX export cached, verified and offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from memory_core.formation import FormationConfig
from memory_core.formation.backends import SentenceEncoder
from memory_core.formation.config import FormationConfigError, parse_formation
from memory_core.text.embeddings import DEFAULT_RUNTIME, MiniLMEncoder

ROOT = Path(__file__).resolve().parent.parent
TEXTS = [
    "When did Caroline go to the LGBTQ support group?",
    "ok",
    "A much longer turn about what Melanie painted with her kids at the lake last summer " * 6,
]
VARIED = [
    *TEXTS,
    "",
    "   ",
    "Zoë's café in Zürich serves crème brûlée — très bien!",
    "東京で友達と寿司を食べました。",
    "Мы ездили в Санкт-Петербург прошлым летом.",
    "مرحبا، كيف حالك اليوم؟",
    "I got a new puppy 🐶🎉 and named him Biscuit!!!",
    "tabs\tand\nnewlines\n\nin one turn",
    "What did Melanie paint? " * 3,
    "x",
    "1234567890 3.14159 $100 50% #hashtag @mention http://example.com/path?q=1",
    " ".join(f"word{i}" for i in range(5000)),  # truncated to 128 wordpieces
    *(
        f"Turn {i}: we talked about {topic} for a while."
        for i, topic in enumerate(
            [
                "hiking",
                "pottery",
                "a job interview",
                "the new apartment",
                "grief",
                "camping",
                "adoption agencies",
                "a concert",
                "running",
                "school",
                "vegan recipes",
                "chess",
                "a road trip to Oaxaca",
                "painting sunsets",
                "a charity race",
                "my grandmother",
            ]
        )
    ),
]
FP32_ATOL = 1e-5  # measured 1.5e-7 (float rounding), min cosine 1 - 1e-7
INT8_MIN_COSINE = 0.97  # measured 0.985 on LoCoMo turns, 0.973 for a bare "ok" (one text per call)


@pytest.fixture(scope="module")
def reference() -> MiniLMEncoder:
    return MiniLMEncoder(runtime="torch")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def encoder(cache: Path) -> MiniLMEncoder:
    return MiniLMEncoder(runtime="onnx", cache_dir=cache)


def _exported(cache: Path, name: str = "model.onnx") -> Path:
    (path,) = cache.glob(f"minilm-*/{name}")
    return path


def test_onnx_int8_is_the_default_everywhere() -> None:
    assert DEFAULT_RUNTIME == "onnx-int8"
    assert FormationConfig().encoder.runtime == "onnx-int8"
    torch = {"encoder": {"model": "minilm", "runtime": "torch"}}
    assert parse_formation(torch).encoder.runtime == "torch"
    with pytest.raises(FormationConfigError, match="e5 encoder runs on onnx"):
        parse_formation({"encoder": {"runtime": "torch"}})  # e5, the default


def test_an_unknown_runtime_is_refused_with_its_key() -> None:
    with pytest.raises(FormationConfigError) as caught:
        parse_formation({"encoder": {"runtime": "onnx8"}})
    assert caught.value.key == "formation.encoder.runtime"
    assert "onnx-int8" in caught.value.reason


def test_one_text_goes_through_the_trace_and_gives_the_pipelines_vector(
    reference: MiniLMEncoder,
) -> None:
    together = reference.encode(TEXTS)  # three texts: the sentence-transformers pipeline
    assert reference.fast_path == "traced"
    alone = np.stack([reference.encode([t])[0] for t in TEXTS])  # one text each: the trace
    np.testing.assert_allclose(alone, together, atol=1e-5)
    assert np.allclose(np.linalg.norm(alone, axis=1), 1.0, atol=1e-5)


def test_the_onnx_runtime_gives_the_reference_vectors(
    encoder: MiniLMEncoder, reference: MiniLMEncoder
) -> None:
    expected = reference.encode(VARIED)
    batch = encoder.encode(VARIED)
    assert encoder.fast_path.startswith("onnx (")
    np.testing.assert_allclose(batch, expected, atol=FP32_ATOL)
    assert np.min(np.sum(batch * expected, axis=1)) >= 0.999
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)


def test_a_batch_gives_each_texts_own_vector(encoder: MiniLMEncoder) -> None:
    alone = np.stack([encoder.encode([t])[0] for t in VARIED])
    np.testing.assert_allclose(encoder.encode(VARIED), alone, atol=FP32_ATOL)


def test_a_long_text_is_cut_to_its_first_wordpieces(encoder: MiniLMEncoder) -> None:
    long = " ".join(f"word{i}" for i in range(5000))
    cut = " ".join(f"word{i}" for i in range(300))  # already past 128 wordpieces
    np.testing.assert_allclose(encoder.encode([long]), encoder.encode([cut]), atol=1e-6)


def test_the_export_is_reused_by_the_next_load(encoder: MiniLMEncoder, cache: Path) -> None:
    encoder.encode(["make sure the first load happened"])
    exported = _exported(cache)
    before = exported.stat()
    again = MiniLMEncoder(runtime="onnx", cache_dir=cache)
    again.encode(["second load"])
    assert again.fast_path == f"onnx (reused {exported})"
    after = exported.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_truncated_export_is_detected_and_rebuilt(
    encoder: MiniLMEncoder, cache: Path, tmp_path: Path
) -> None:
    expected = encoder.encode(TEXTS)
    copy = tmp_path / "cache"
    shutil.copytree(_exported(cache).parent, copy / _exported(cache).parent.name)
    broken = _exported(copy)
    with open(broken, "r+b") as file:
        file.truncate(broken.stat().st_size // 2)  # as if a write had been cut short
    rebuilt = MiniLMEncoder(runtime="onnx", cache_dir=copy)
    np.testing.assert_allclose(rebuilt.encode(TEXTS), expected, atol=FP32_ATOL)
    assert rebuilt.fast_path == f"onnx (rebuilt {broken})"
    assert broken.stat().st_size == _exported(cache).stat().st_size
    assert not list(copy.rglob("*.partial"))


def test_the_int8_runtime_stays_close_to_the_reference(
    cache: Path, reference: MiniLMEncoder
) -> None:
    int8 = MiniLMEncoder(runtime="onnx-int8", cache_dir=cache)
    vectors = int8.encode(VARIED)
    assert int8.fast_path.startswith("onnx-int8 (")
    assert np.min(np.sum(vectors * reference.encode(VARIED), axis=1)) >= INT8_MIN_COSINE


def test_an_int8_vector_does_not_depend_on_its_batch(cache: Path) -> None:
    """Each text is its own call (its own activation scale): alone, batched with long
    texts, on one lane or two, a text gets the same vector, and as a question too."""
    one_lane = MiniLMEncoder(runtime="onnx-int8", cache_dir=cache, threads=1)
    two_lanes = MiniLMEncoder(runtime="onnx-int8", cache_dir=cache, threads=2)
    alone = np.stack([one_lane.encode([t])[0] for t in VARIED])
    long = [" ".join(["a much longer text about many other things"] * 20)] * 5
    for encoder in (one_lane, two_lanes):
        batched = encoder.encode([*long, *VARIED, *long])[len(long) : len(long) + len(VARIED)]
        np.testing.assert_allclose(batched, alone, atol=1e-6)
    for text, vector in zip(VARIED, alone, strict=True):
        np.testing.assert_allclose(two_lanes.encode_question(text)[0], vector, atol=1e-6)
    assert np.allclose(np.linalg.norm(alone, axis=1), 1.0, atol=1e-5)


def test_int8_lanes_fill_every_row_of_a_large_batch(cache: Path) -> None:
    texts = [f"text number {i} " + "word " * (i % 40) for i in range(100)]
    encoder = MiniLMEncoder(runtime="onnx-int8", cache_dir=cache, threads=2)
    vectors = encoder.encode(texts)
    assert vectors.shape == (100, MiniLMEncoder.dimension)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors[37], encoder.encode([texts[37]])[0], atol=1e-6)


INT8_QUESTION_MIN_COSINE = 0.97  # measured: 0.9727 for "ok", >= 0.9908 on the 999 LoCoMo questions


def test_questions_take_the_int8_graph_and_stored_texts_never_do(
    cache: Path, encoder: MiniLMEncoder
) -> None:
    """A question alone is its own activation scale: close to float32. What is stored
    (``encode``, one text or many) stays the float32 vector."""
    fast = MiniLMEncoder(runtime="onnx", cache_dir=cache, question_weights="int8")
    for text in VARIED:
        exact = encoder.encode([text])[0]
        np.testing.assert_allclose(fast.encode([text])[0], exact, atol=FP32_ATOL)
        question = fast.encode_question(text)
        assert question.shape == (1, MiniLMEncoder.dimension)
        assert float(question[0] @ exact) >= INT8_QUESTION_MIN_COSINE
    assert (cache / _exported(cache).parent.name / "model.int8.onnx").exists()
    plain = MiniLMEncoder(runtime="onnx", cache_dir=cache)  # float32 questions: the vector stored
    np.testing.assert_allclose(
        plain.encode_question(TEXTS[0])[0], encoder.encode([TEXTS[0]])[0], atol=FP32_ATOL
    )


def test_question_weights_follow_the_runtime_unless_set() -> None:
    assert FormationConfig().encoder.question_weights == "int8"
    torch = {"model": "minilm", "runtime": "torch"}
    assert parse_formation({"encoder": torch}).encoder.question_weights == "float32"
    with pytest.raises(FormationConfigError) as caught:
        parse_formation({"encoder": {**torch, "question_weights": "int8"}})
    assert "needs an onnx runtime" in caught.value.reason
    with pytest.raises(FormationConfigError) as caught:
        parse_formation({"encoder": {"question_weights": "int4"}})
    assert caught.value.key == "formation.encoder.question_weights"


def test_the_export_never_touches_the_network(tmp_path: Path) -> None:
    """A fresh cache, in a process whose every socket connection or name lookup is
    refused and recorded (an audit hook), with no offline variables set beforehand."""
    code = (
        "import sys\n"
        "seen = []\n"
        "def guard(event, args):\n"
        "    if event.startswith(('socket.connect', 'socket.getaddrinfo', 'socket.gethost')):\n"
        "        seen.append(event)\n"
        "        raise OSError(f'network access refused: {event} {args}')\n"
        "sys.addaudithook(guard)\n"
        "from pathlib import Path\n"
        "from memory_core.text.embeddings import MiniLMEncoder\n"
        "encoder = MiniLMEncoder(cache_dir=Path(sys.argv[1]))\n"
        "print(encoder.encode(['offline']).shape, encoder.fast_path.split()[1], seen)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_OFFLINE")}
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=110,
        cwd=ROOT,
        env=env,
    )
    assert result.stdout.strip().splitlines()[-1:] == ["(1, 384) (exported []"], result.stderr


def test_every_caller_is_served_by_the_same_inference_thread(encoder: MiniLMEncoder) -> None:
    names: set[str] = set()
    original = encoder._encode_now

    def spy(texts: list[str]) -> np.ndarray:
        names.add(threading.current_thread().name)
        return original(texts)

    encoder._encode_now = spy  # type: ignore[method-assign]
    try:
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda t: encoder.encode([t]), TEXTS * 3))
        batch = encoder.encode([f"turn {i}" for i in range(70)])  # cut into 32-text chunks
    finally:
        del encoder._encode_now
    assert len(names) == 1 and next(iter(names)).startswith("minilm-")
    assert all(r.shape == (1, 384) for r in results) and batch.shape == (70, 384)


def test_an_inference_error_reaches_the_caller(encoder: MiniLMEncoder) -> None:
    def broken(texts: list[str]) -> np.ndarray:
        raise RuntimeError("tensor on fire")

    encoder._encode_now = broken  # type: ignore[method-assign]
    try:
        with pytest.raises(RuntimeError, match="tensor on fire"):
            encoder.encode(["anything"])
    finally:
        del encoder._encode_now
    assert encoder.encode(["still works"]).shape == (1, 384)


def test_a_lone_surrogate_is_encoded_not_refused(encoder: MiniLMEncoder) -> None:
    """The proxy refuses such bodies at its edge; a library caller still gets a vector
    (the tokenizer raised TypeError on ``\\ud800``), the same as for ``?`` in its place."""
    broken, plain = "\ud800 When did Caroline go?", "? When did Caroline go?"
    np.testing.assert_allclose(encoder.encode([broken]), encoder.encode([plain]), atol=FP32_ATOL)
    np.testing.assert_allclose(
        encoder.encode_question(broken), encoder.encode_question(plain), atol=FP32_ATOL
    )
    assert encoder.encode([broken, "ok"]).shape == (2, MiniLMEncoder.dimension)


def test_only_a_question_computed_as_its_stored_text_may_stand_for_it(
    encoder: MiniLMEncoder, reference: MiniLMEncoder, cache: Path
) -> None:
    """float32 questions run alone while stored texts run in batches, torch may trace a
    single text: neither gives a reuse key; onnx-int8 runs both alone in one session."""
    assert SentenceEncoder(encoder).reuse_key("Where are the bees?") is None
    assert SentenceEncoder(reference).reuse_key("Where are the bees?") is None
    int8 = SentenceEncoder(MiniLMEncoder(runtime="onnx-int8", cache_dir=cache))
    key = int8.reuse_key("Where are the bees?")
    assert key is not None and key != int8.reuse_key("Where are the bees")
