"""Retrieval strategies by name: what ``memory.retrieval`` in config.yaml may choose.

A strategy turns a question into a :class:`~.store.Recall` over one tenant's store.
Configuration validates a chosen name against :data:`STRATEGIES` (an unknown name is
refused with the registered ones and a did-you-mean); the proxy runs the chosen one
through :meth:`.MemoryStore.retrieve`, labels its receipts with :attr:`Strategy.label`,
and warms the memory graph at start-up only for strategies that read it. A new strategy
becomes selectable by registering it here: no ``if name == ...`` anywhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..registry import Registry

if TYPE_CHECKING:
    from ..store.memory_store import MemoryStore, Recall

__all__ = ["STRATEGIES", "Strategy"]

Run = Callable[["MemoryStore", str, int, int, Collection[str], str | None], "Recall"]
"""``(store, question, limit, budget_tokens, exclude_hashes, model) -> Recall``."""


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


def _area(
    store: MemoryStore,
    question: str,
    limit: int,
    budget: int,
    exclude: Collection[str],
    model: str | None,
) -> Recall:
    return store.recall_area(
        question, limit=limit, budget_tokens=budget, exclude_hashes=exclude, model=model
    )


def _bm25(
    store: MemoryStore,
    question: str,
    limit: int,
    budget: int,
    exclude: Collection[str],
    model: str | None,
) -> Recall:
    return store.recall(
        question, limit=limit, budget_tokens=budget, exclude_hashes=exclude, model=model
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
