"""The text log line a person reads (``logging.format: text``): fields, duration, and
nothing a terminal would act on."""

from __future__ import annotations

import pytest

from proxy.http.request_log import text_line


def test_the_formation_line_reads_as_text() -> None:
    line = text_line({"event": "formed", "tenant": "t", "rows": 4, "entities": 2, "ms": 12.4})
    assert line.endswith("INFO  formed tenant=t rows=4 entities=2 (12 ms)")


@pytest.mark.parametrize(
    "value",
    ["\x1b[31mred", "ok\x9b31m", "two\nlines", "a\u2028b", "x\u202ey", "\U000e0001tag", "\x07"],
)
def test_a_text_line_never_writes_a_control_character_raw(value: str) -> None:
    """A client's model name or conversation id reaches the text log: a line break or a
    terminal escape in it is escaped, never acted on by the terminal that shows it."""
    line = text_line({"event": "chat", "model": value, "status": 200})
    assert line.isprintable() and "\n" not in line
    assert "model=\"" in line and "status=200" in line
