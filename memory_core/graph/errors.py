"""The graph engine's exceptions, under memory_core's one root."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import (
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from ..configuration import ConfigModel, ConfigurationError, reason_of
from ..errors import MemoryCoreError

__all__ = ["GraphConfigError", "GraphError", "GraphModel"]


class GraphError(MemoryCoreError):
    """Edge arrays, node ids, foci or a graph version handed to the engine are malformed."""


class GraphConfigError(GraphError, ConfigurationError):
    """An invalid graph setting; ``key`` is its dotted path (``line`` when read from a file)."""

    def __init__(
        self, key: str, reason: str, *, file: str | None = None, line: int | None = None
    ) -> None:
        ConfigurationError.__init__(self, file, line, key, reason)


class GraphModel(ConfigModel):
    """A setting of the engine (``pulse``, ``area``, ``wave``): read from config.yaml
    with the rest of ``retrieval:`` (where the configuration reports a bad value with its
    file, line and key), or built in code, where an invalid value raises
    :class:`GraphConfigError` naming its key (``pulse.gamma``) instead of pydantic's
    error: the engine's callers catch the engine's exceptions."""

    section: ClassVar[str] = ""

    @model_validator(mode="wrap")
    @classmethod
    def _named_errors(
        cls, data: Any, handler: ModelWrapValidatorHandler[Any], info: ValidationInfo
    ) -> Any:
        if info.context is not None:  # read by the configuration, which says where
            return handler(data)
        try:
            return handler(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(part) for part in (cls.section, *first["loc"]))
            raise GraphConfigError(key, reason_of(first)) from None
