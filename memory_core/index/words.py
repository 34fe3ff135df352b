"""Memory's words and their vectors, beside the graph: what the word bridge searches.

Formation stores the vector of each content word memory's fragments use
(:mod:`memory_core.storage.tables.word_vectors`); :class:`WordIndex` reads the rows added since
its last read, as the memory graph reads fragments, and publishes a :class:`Words` view with
each graph version. A question's word that memory never uses ("job", asked of a Portuguese
memory) is matched to the words memory does use by cosine ("emprego", "trabalho"):
:mod:`memory_core.retrieval.bridge`.

Invariants: a :class:`Words` is immutable: ``vectors`` is a read-only view of the first
``len(vectors)`` rows of an append-only buffer, the word list and the row map are shared with
later views and only grow (a row at or past ``len(vectors)`` is not this view's); every row
is L2-normalised (a stored vector of the wrong size or no length is skipped).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..storage import Connection
from ..storage.tables import word_vectors
from .buffer import AppendBuffer

__all__ = ["NO_WORDS", "WordIndex", "Words"]

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Words:
    """The words memory uses, with their vectors, as of one graph version."""

    words: Sequence[str]  # row -> word (shared, append-only)
    rows: Mapping[str, int]  # word -> row (shared, only gains keys)
    vectors: F32  # row -> unit vector (a read-only prefix view)
    languages: npt.NDArray[np.int16] = dataclasses.field(
        default_factory=lambda: np.zeros(0, np.int16)
    )
    """row -> the language of the word's first fragment, as an index into ``codes``"""
    codes: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """language code -> its index (shared, only gains keys)"""

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    def row_of(self, word: str) -> int | None:
        """The row of ``word`` in this view, or None."""
        row = self.rows.get(word)
        return row if row is not None and row < len(self) else None

    def any_besides(self, language: str | None) -> bool:
        """Whether memory uses a word first used in another language than ``language``
        (or of unknown language); with None, whether it uses any word."""
        n = len(self)
        code = self.codes.get(language) if language is not None else None
        return n > 0 and (code is None or bool(np.any(self.languages[:n] != code)))

    def nearest(
        self, vector: F32, k: int, *, besides: str | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` words nearest to the unit ``vector`` by cosine, nearest first (ties:
        the earlier row); ``besides``: only words first used in another language than
        this one (a word of unknown language, ``und``, always qualifies)."""
        n = len(self)
        if n == 0 or k <= 0:
            return []
        cosines = self.vectors @ np.asarray(vector, np.float32)
        code = self.codes.get(besides) if besides is not None else None
        if code is not None:
            same = self.languages[:n] == code
            cosines[same] = -np.inf
            k = min(k, n - int(same.sum()))
            if k <= 0:
                return []
        k = min(k, n)
        top = np.argpartition(-cosines, k - 1)[:k] if k < n else np.arange(n)
        order = top[np.lexsort((top, -cosines[top]))]
        return [(self.words[int(i)], float(cosines[int(i)])) for i in order]


NO_WORDS = Words((), {}, np.zeros((0, 0), np.float32))


class WordIndex:
    """Reads :mod:`~memory_core.storage.tables.word_vectors` incrementally (see the module
    docstring); not thread-safe: the memory graph's refresh lock serialises it."""

    def __init__(self, dim: int) -> None:
        self._dim = dim
        self._cursor = 0
        self._words: list[str] = []
        self._languages = AppendBuffer(np.int16)
        self._codes: dict[str, int] = {}
        self._rows: dict[str, int] = {}
        self._vectors = AppendBuffer(np.float32, dim)

    def read(self, conn: Connection) -> list[tuple[str, str, F32]]:
        """The rows added since the last read (in the caller's read transaction), not yet
        published: ``(word, language, unit vector)``."""
        rows = word_vectors.since(conn, self._cursor)
        if rows:
            self._cursor = rows[-1][0]
        found = []
        for _, word, language, blob in rows:
            if len(blob) != 4 * self._dim or word in self._rows:
                continue
            vector = np.frombuffer(blob, dtype="<f4").astype(np.float32)
            length = float(np.linalg.norm(vector))
            if np.isfinite(length) and length > 0:
                found.append((word, language, vector / length))
        return found

    def publish(self, added: Sequence[tuple[str, str, F32]]) -> Words:
        """A view with ``added`` appended."""
        fresh = [row for row in added if row[0] not in self._rows]
        if fresh:
            self._vectors.extend(np.stack([v for _, _, v in fresh]))
            for word, _, _ in fresh:
                self._rows[word] = len(self._words)
                self._words.append(word)
            codes = [self._codes.setdefault(lang, len(self._codes)) for _, lang, _ in fresh]
            self._languages.extend(codes)
        return Words(
            self._words, self._rows, self._vectors.view(), self._languages.view(), self._codes
        )
