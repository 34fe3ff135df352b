"""Typed access to what :func:`memory_core.text.kept.kept_when_short` adds to the function
it decorates (``cache_info``, ``__wrapped__``); the decorator types the result as the
function itself."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, cast


class Kept(Protocol):
    __wrapped__: Callable[..., Any]

    def cache_info(self) -> functools._CacheInfo: ...


def kept(function: Callable[..., Any]) -> Kept:
    """``function``'s cache; ``function`` must be decorated with ``kept_when_short``."""
    return cast(Kept, function)
