"""Retrieval strategies by name: what ``memory.retrieval`` in config.yaml may choose.

For now the registry holds each strategy's name and a one-line description; the
implementations are attached later. Configuration validates a chosen name against
:data:`STRATEGIES`, so a new strategy becomes selectable by registering it here.
"""

from __future__ import annotations

from .registry import Registry

__all__ = ["STRATEGIES"]

STRATEGIES: Registry[str] = Registry("retrieval strategy")
"""Strategy name -> its description."""

for _name, _description in (
    (
        "area",
        "the question's foci activate the memory graph; the area where they converge is "
        "chosen and its fragments fused with BM25",
    ),
    ("bm25", "full-text search (FTS5, BM25) over fragment text only"),
):
    STRATEGIES.register(_name, _description, _description)
