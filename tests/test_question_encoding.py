"""Encodings started ahead of their lookup (memory_core/question_encoding.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from memory_core import LogMessage, MemoryStore
from memory_core.formation import Backends
from memory_core.question_encoding import AHEAD, QuestionEncodings


class _Counting:
    """An encoder of questions that counts its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, question: str) -> np.ndarray:
        self.calls.append(question)
        return np.full(4, len(self.calls), np.float32)


def test_a_lookup_takes_the_encoding_started_ahead_once() -> None:
    encodings, encode = QuestionEncodings(), _Counting()
    try:
        encodings.ahead("where does Ana live?", encode)
        first = encodings.take("where does Ana live?", encode)
        again = encodings.take("where does Ana live?", encode)  # not shared: its own
        other = encodings.take("something else", encode)
        vectors = [first.result()[0][0], again.result()[0][0], other.result()[0][0]]
        assert sorted(vectors) == [1.0, 2.0, 3.0]
        assert sorted(encode.calls) == sorted(
            ["where does Ana live?", "where does Ana live?", "something else"]
        )
    finally:
        encodings.shutdown()


def test_two_lookups_of_one_text_each_take_one_encoding() -> None:
    encodings, encode = QuestionEncodings(), _Counting()
    try:
        encodings.ahead("same", encode)
        encodings.ahead("same", encode)
        taken = [encodings.take("same", encode), encodings.take("same", encode)]
        assert len({id(t) for t in taken}) == 2
        assert [t.result()[0][0] for t in taken] == [1.0, 2.0]  # oldest first
        assert encode.calls == ["same", "same"]
    finally:
        encodings.shutdown()


def test_encodings_nobody_takes_are_forgotten_past_the_bound() -> None:
    encodings, encode = QuestionEncodings(), _Counting()
    try:
        for i in range(AHEAD + 5):
            encodings.ahead(f"q{i}", encode)
        encodings.take("q0", encode).result()  # forgotten: encoded again
        encodings.take(f"q{AHEAD + 4}", encode).result()  # kept: not encoded again
        assert encode.calls.count("q0") == 2
        assert encode.calls.count(f"q{AHEAD + 4}") == 1
    finally:
        encodings.shutdown()


def test_a_store_lookup_uses_the_encoding_started_ahead(
    tmp_path: Path, backends: Backends
) -> None:
    store = MemoryStore(tmp_path / "m.db", backends=backends)
    try:
        store.append(
            [LogMessage({"role": "user", "content": "Ana moved to Lisbon last spring."}, 1e9)],
            conversation="c",
        )
        store.form_all()
        encoder = backends.encoder
        calls: list[str] = []
        real = encoder.encode_question

        def counted(text: str) -> np.ndarray:
            calls.append(text)
            return real(text)  # type: ignore[no-any-return]

        encoder.encode_question = counted  # type: ignore[method-assign]
        try:
            store.encode_ahead("Where does Ana live now?")
            recall = store.recall_area("Where does Ana live now?", limit=4, budget_tokens=200)
        finally:
            del encoder.encode_question
        assert calls == ["Where does Ana live now?"]  # encoded once, ahead
        assert recall.hits and "Lisbon" in recall.hits[0].text
    finally:
        store.close()
