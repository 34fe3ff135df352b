"""Helpers shared by the scripts in this folder: URLs, errors, percentiles and tables.

Nothing here touches the network or the environment; the scripts import it as a sibling
module (``python scripts/<name>.py`` puts this folder on ``sys.path``).
"""

from __future__ import annotations

import json
import math
import signal
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

__all__ = [
    "api_error_message",
    "base_url",
    "format_ms",
    "percentile",
    "proc_status",
    "render_table",
    "select_indices",
    "sigterm_as_interrupt",
]


def select_indices(spec: str, count: int) -> list[int]:
    """Indexes from ``all``, ``N``, ``N-M`` or a comma list of those (0-based, in order,
    without repeats); ValueError names what is wrong."""
    if spec.strip().lower() == "all":
        return list(range(count))
    chosen: list[int] = []
    for part in spec.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise ValueError(f"--conversations {spec!r}: expected all, N, N-M "
                             "or a comma-separated list of those") from None
        if not 0 <= first <= last < count:
            raise ValueError(f"--conversations {spec!r}: {part.strip()} is outside 0-{count - 1} "
                             f"(the file has {count} conversations)")
        chosen.extend(range(first, last + 1))
    return list(dict.fromkeys(chosen))


def proc_status() -> dict[str, int]:
    """The ``kB`` fields of ``/proc/self/status`` (VmRSS, VmHWM, ...) in bytes; empty off
    Linux."""
    try:
        lines = Path("/proc/self/status").read_text(encoding="ascii").splitlines()
    except OSError:
        return {}
    fields = {}
    for line in lines:
        key, _, value = line.partition(":")
        parts = value.split()
        if len(parts) == 2 and parts[1] == "kB":
            fields[key] = int(parts[0]) * 1024
    return fields


def sigterm_as_interrupt() -> None:
    """Make SIGTERM unwind like Ctrl-C, so ``finally`` blocks clean up (children, folders)."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def base_url(url: str) -> str:
    """The proxy's root URL: ``http://host:port`` from that or from ``.../v1``."""
    root = url.strip().rstrip("/")
    return root.removesuffix("/v1").rstrip("/")


def api_error_message(status: int, body: bytes) -> str:
    """``HTTP <status> <type>: <message>`` from an OpenAI error body, else the raw text."""
    try:
        error = json.loads(body)["error"]
        return f"HTTP {status} {error.get('type') or 'error'}: {error['message']}"
    except (ValueError, KeyError, TypeError, AttributeError):
        text = body.decode("utf-8", "replace").strip().replace("\n", " ")
        return f"HTTP {status}: {text[:300] or '(empty body)'}"


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def format_ms(value: float, *, signed: bool = False) -> str:
    """Milliseconds with two decimals (``+`` for positive deltas when ``signed``)."""
    if math.isnan(value):
        return "-"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        parts = [
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])
