"""The graph engine's exceptions, under memory_core's one root."""

from __future__ import annotations

from ..errors import MemoryCoreError

__all__ = ["GraphConfigError", "GraphError"]


class GraphError(MemoryCoreError):
    """Edge arrays, node ids, foci or a graph version handed to the engine are malformed."""


class GraphConfigError(GraphError):
    """An invalid graph setting; ``key`` is its dotted path."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key, self.reason = key, reason
