"""Results kept for short texts only.

The text functions a lookup or a formation pass calls again and again with the same words,
sentences and turns keep their latest results (:func:`functools.lru_cache`). Kept by their
text, whatever its length, they would keep whatever memory is sent: a worker that formed a
few thousand distinct megabyte messages (or one-word megabyte "words") would hold them all
until it stopped. :func:`kept_when_short` keeps a result only when its text is short (a
word, a sentence, a turn); a longer text is computed every time and kept nowhere.

Invariant: a function wrapped returns what it returns unwrapped (it must be pure); only how
often it is computed changes.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

__all__ = ["kept_when_short"]

F = TypeVar("F", bound=Callable[..., Any])


def kept_when_short(maxsize: int, chars: int) -> Callable[[F], F]:
    """A decorator for a pure function whose first parameter is a text (passed by
    position or by its name): its results for the latest ``maxsize`` calls whose text
    has at most ``chars`` characters are kept (``cache_info`` reports on them, as
    :func:`functools.lru_cache`'s does); the other arguments pass as they are given.
    Anything else (a longer text, one that is not a ``str``) is computed every time."""

    def wrap(function: F) -> F:
        kept = functools.lru_cache(maxsize=maxsize)(function)
        name = next(iter(inspect.signature(function).parameters))

        @functools.wraps(function)
        def call(*given: Any, **named: Any) -> Any:
            text = given[0] if given else named.get(name)
            if isinstance(text, str) and len(text) <= chars:
                return kept(*given, **named)
            return function(*given, **named)

        call.cache_info = kept.cache_info  # type: ignore[attr-defined]
        call.cache_clear = kept.cache_clear  # type: ignore[attr-defined]
        return cast(F, call)

    return wrap
