"""The latest questions' vectors, kept until the turn they were asked in is logged.

A lookup encodes the latest user message as its question; when the exchange is logged moments later,
:meth:`AskedQuestions.taken` hands the vectors of the logged texts that were asked over to
:mod:`memory_core.storage.tables.question_vectors`, so formation does not encode them again. Only
vectors whose encoder gave a reuse key are kept (see
:meth:`~memory_core.formation.backends.SentenceEncoder.reuse_key`); only a text logged exactly as it
was asked matches. Bounded: a question whose turn is never logged (ingestion off, a failed upstream)
is forgotten after :data:`LIMIT` newer ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .messages import LogMessage

__all__ = ["LIMIT", "AskedQuestions"]

LIMIT = 512
"""The most questions remembered at once (~1.5 KB each)."""


class AskedQuestions:
    """Question text -> (reuse key, float32 vector bytes); thread-safe (lookups run on
    several reader threads, appends on the writer thread)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._kept: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, text: str, key: str | None, vector: npt.NDArray[np.float32]) -> None:
        """Keep ``vector`` for ``text`` when its encoder gave a ``key``."""
        if key is None or not text.strip():  # an empty turn forms no fragment
            return
        value = (key, np.ascontiguousarray(vector, dtype=np.float32).tobytes())
        with self._lock:
            self._kept[text] = value
            self._kept.move_to_end(text)
            while len(self._kept) > self._limit:
                self._kept.popitem(last=False)

    def taken(self, messages: Sequence[LogMessage]) -> list[tuple[str, bytes]]:
        """``(key, vector bytes)`` of those of ``messages`` whose text content was asked
        (each forgotten here once taken)."""
        found = []
        with self._lock:
            if not self._kept:
                return []
            for message in messages:
                content = message.message.get("content")
                if isinstance(content, str) and content in self._kept:
                    found.append(self._kept.pop(content))
        return found
