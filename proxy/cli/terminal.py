"""What the commands print for a person: stored text made inert for a terminal.

Memory holds what clients sent and what export files say: a chat message, a model name,
a conversation id or a manifest may carry terminal escape sequences (``ESC [2J`` clears
the screen, an OSC sequence sets the window title or the clipboard) or line breaks that
would print as a row of their own. Every line a command prints for a person goes through
:func:`inert` (``--json`` output is JSON, which escapes them itself): each character that
is not printable (controls, line and paragraph separators, format characters such as a
bidi override) is written as its escape, ``\\u001b``, as the request log's text lines are
(one function, :func:`proxy.http.request_log.inert`).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..http.request_log import inert

__all__ = ["inert", "inert_lines"]


def inert_lines(lines: Iterable[str]) -> str:
    """The lines, each made inert, one per line: a line break inside one is escaped."""
    return "\n".join(inert(line) for line in lines)

