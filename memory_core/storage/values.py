"""How stored values read back: defensively, so that no stored value can break a reader.

Rows written before the log validated its input (or by hand) may hold anything in a
column: a timestamp that is inf, nan, 1e308 or text, a text column holding NULL or
bytes. Every typed row this package returns is read through these functions.
``memory_core.log.messages`` re-exports the timestamp bounds and :func:`stored_timestamp` next to
:func:`~memory_core.log.messages.check_timestamp`, the rule they mirror for what is written.
"""

from __future__ import annotations

import math

__all__ = ["MAX_TIMESTAMP", "MIN_TIMESTAMP", "stored_text", "stored_timestamp"]

MIN_TIMESTAMP = -2_208_988_800.0
"""1900-01-01T00:00:00Z in epoch seconds: the earliest timestamp memory accepts."""
MAX_TIMESTAMP = 7_258_118_400.0
"""2200-01-01T00:00:00Z in epoch seconds: every accepted timestamp is before it."""


def stored_timestamp(value: object) -> float | None:
    """A timestamp column as read back: its value if it is epoch seconds in
    ``[MIN_TIMESTAMP, MAX_TIMESTAMP)`` (what :func:`memory_core.log.messages.check_timestamp`
    accepts), else None (unknown): inf, nan, out of range, NULL, text, bytes."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int) and not MIN_TIMESTAMP <= value < MAX_TIMESTAMP:
        return None  # before float(): an int may be too large for a float
    seconds = float(value)
    ok = math.isfinite(seconds) and MIN_TIMESTAMP <= seconds < MAX_TIMESTAMP
    return seconds if ok else None


def stored_text(value: object) -> str:
    """A text column as read back: bytes decoded (invalid UTF-8 replaced), NULL as ``""``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)
