"""Retrieval strategies by name: what ``memory.retrieval`` in config.yaml may choose.

A strategy turns a :class:`~memory_core.text.question.Question` into a
:class:`.recall.Recall` over one tenant's memory (read through :class:`.recall.Memory`:
strategies never import the store). Configuration validates a chosen name against
:data:`STRATEGIES` (an unknown name is refused with the registered ones and a
did-you-mean); the proxy runs the chosen one through :meth:`.MemoryStore.retrieve`, labels
its receipts with :attr:`Strategy.label`, and warms the memory graph at start-up only for
strategies that read it. A new strategy becomes selectable by registering it here: no
``if name == ...`` anywhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from ..registry import Registry
from ..text.question import Question
from .recall import Memory, Recall, recall_area, recall_bm25

__all__ = ["STRATEGIES", "Strategy"]

Run = Callable[[Memory, Question, int, int, Collection[str], "str | None"], Recall]
"""``(memory, question, limit, budget_tokens, exclude_hashes, model) -> Recall``."""


@dataclass(frozen=True)
class Strategy:
    """One retrieval strategy: how it runs, what its receipts call it, what it needs."""

    name: str
    description: str
    label: str
    """The receipt's ``area.kind``."""
    uses_graph: bool
    """Reads the memory graph (so the proxy reads the graph before it is ready)."""
    run: Run
    uses_vector: bool = False
    """Reads the question's vector (so its encoding may start before the lookup does:
    :meth:`.MemoryStore.encode_ahead`)."""


def _area(
    memory: Memory,
    question: Question,
    limit: int,
    budget: int,
    exclude: Collection[str],
    model: str | None,
) -> Recall:
    return recall_area(
        memory, question, limit=limit, budget_tokens=budget, exclude_hashes=exclude, model=model
    )


def _bm25(
    memory: Memory,
    question: Question,
    limit: int,
    budget: int,
    exclude: Collection[str],
    model: str | None,
) -> Recall:
    return recall_bm25(
        memory, question, limit=limit, budget_tokens=budget, exclude_hashes=exclude, model=model
    )


STRATEGIES: Registry[Strategy] = Registry("retrieval strategy")
"""Strategy name -> :class:`Strategy`."""

for _strategy in (
    Strategy(
        "area",
        "the question's foci activate the memory graph; the area where they converge is "
        "chosen and its fragments fused with BM25",
        "area (graph + bm25)",
        True,
        _area,
        uses_vector=True,
    ),
    Strategy(
        "bm25",
        "full-text search (FTS5, BM25) over fragment text only",
        "fts5-bm25 fragments",
        False,
        _bm25,
    ),
):
    STRATEGIES.register(_strategy.name, _strategy, _strategy.description)
