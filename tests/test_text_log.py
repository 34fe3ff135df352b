"""The log's lines: the text line a person reads (``logging.format: text``): fields,
duration, nothing a terminal would act on; and the file's JSON line, whatever a field holds."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from proxy.http.request_log import RequestLog, text_line


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


def test_a_lone_surrogate_is_logged_as_its_escape_and_never_raises(tmp_path: Path) -> None:
    """A client's ``"model": "\\ud800"`` decodes to a lone surrogate, which UTF-8 cannot
    write: the file line used to raise from ``RequestLog.write`` (which never raises);
    it is now the JSON escape, reading back as the same text, on one line."""
    stdout = io.StringIO()
    log = RequestLog(tmp_path / "l.jsonl", stdout=True, stdout_format="json", stream=stdout)
    log.write({"event": "chat", "model": "a\ud800b\udfff"})
    log.close()
    (line,) = (tmp_path / "l.jsonl").read_text("utf-8").splitlines()
    assert json.loads(line)["model"] == "a\ud800b\udfff"
    assert "\\ud800" in line and stdout.getvalue() == line + "\n"
