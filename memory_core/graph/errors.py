"""The graph engine's exceptions, under memory_core's one root."""

from __future__ import annotations

from ..configuration import ConfigurationError
from ..errors import MemoryCoreError

__all__ = ["GraphConfigError", "GraphError"]


class GraphError(MemoryCoreError):
    """Edge arrays, node ids, foci or a graph version handed to the engine are malformed."""


class GraphConfigError(GraphError, ConfigurationError):
    """An invalid graph setting; ``key`` is its dotted path (``line`` when read from a file)."""

    def __init__(
        self, key: str, reason: str, *, file: str | None = None, line: int | None = None
    ) -> None:
        ConfigurationError.__init__(self, file, line, key, reason)
