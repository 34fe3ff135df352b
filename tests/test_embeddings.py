"""The MiniLM encoder: one inference thread, questions first, a traced path for one text."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from memory_core.embeddings import MiniLMEncoder

TEXTS = [
    "When did Caroline go to the LGBTQ support group?",
    "ok",
    "A much longer turn about what Melanie painted with her kids at the lake last summer " * 6,
]


@pytest.fixture(scope="module")
def encoder() -> MiniLMEncoder:
    return MiniLMEncoder()


def test_one_text_goes_through_the_trace_and_gives_the_pipelines_vector(
    encoder: MiniLMEncoder,
) -> None:
    together = encoder.encode(TEXTS)  # three texts: the sentence-transformers pipeline
    assert encoder.fast_path == "traced"
    alone = np.stack([encoder.encode([t])[0] for t in TEXTS])  # one text each: the trace
    np.testing.assert_allclose(alone, together, atol=1e-5)
    assert np.allclose(np.linalg.norm(alone, axis=1), 1.0, atol=1e-5)


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
