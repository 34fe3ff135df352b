"""Reading an upstream's answer whatever shape it has.

What an upstream answered is read twice: for what is stored of the exchange, and, for a
bridged door, to present it in the door's own format. A broken or hostile upstream can
put any JSON value anywhere (``"choices": ["x"]``, a tool call's ``"index": null``, a
usage count of ``"12"`` or ``1e400``). Each accessor here gives the type the reader
expects, or an empty one, so that no field of the wrong type turns an answer the client
is owed into a 500 or a stream cut short; what is well-formed reads as before.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["count", "items", "mapping", "mappings", "position"]


def mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def items(value: Any) -> list[Any]:
    """``value`` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def mappings(value: Any) -> list[dict[str, Any]]:
    """The objects of the array ``value`` (anything else in it left out)."""
    return [item for item in items(value) if isinstance(item, dict)]


def count(value: Any) -> int:
    """A token count: a non-negative whole number, else 0 (a string, a boolean, a NaN, an
    infinity or a negative number counts nothing)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return max(0, int(value))


def position(value: Any) -> int:
    """A streamed tool call's position: an integer, else 0 (what a stream of one call
    leaves out)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
