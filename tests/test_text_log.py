"""The log's lines: the text line a person reads (``logging.format: text``): fields,
duration, nothing a terminal would act on; and the file's JSON line, whatever a field holds."""

from __future__ import annotations

import io
import json
import sys
import threading
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


def test_lines_written_from_many_threads_stay_whole(tmp_path: Path) -> None:
    """The store's events and the workers' reports write from threads beside the loop:
    each record is one whole line, in the file and on stdout."""
    stdout = io.StringIO()
    log = RequestLog(tmp_path / "proxy.jsonl", stdout=True, stdout_format="json", stream=stdout)
    payload = "é" * 3000  # long lines: a write of several buffer fills

    def writer(n: int) -> None:
        for i in range(300):
            log.write({"event": "formed", "by": f"worker {n}", "i": i, "pad": payload})

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log.close()
    for text in ((tmp_path / "proxy.jsonl").read_text("utf-8"), stdout.getvalue()):
        records = [json.loads(line) for line in text.splitlines()]
        assert len(records) == 8 * 300
        assert {(r["by"], r["i"]) for r in records} == {
            (f"worker {n}", i) for n in range(8) for i in range(300)
        }


def test_a_close_beside_writing_threads_loses_no_line_and_raises_nothing(tmp_path: Path) -> None:
    """A shutdown closes the log while threads still write: each line lands (in the open
    file or appended after the close) and no writer sees an exception."""
    raised: list[BaseException] = []
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch between any two bytecodes, nearly
    try:
        _close_beside_writers(tmp_path, raised)
    finally:
        sys.setswitchinterval(switch)
    assert raised == []


def _close_beside_writers(tmp_path: Path, raised: list[BaseException]) -> None:
    for attempt in range(20):
        path = tmp_path / f"proxy-{attempt}.jsonl"
        log = RequestLog(path, stdout=False)
        start = threading.Barrier(5)

        def writer(log: RequestLog = log, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                for i in range(200):
                    log.write({"event": "formed", "i": i})
            except BaseException as exc:  # the assertion after the threads names it
                raised.append(exc)

        threads = [threading.Thread(target=writer) for _ in range(4)]
        for thread in threads:
            thread.start()
        start.wait()
        log.close()
        for thread in threads:
            thread.join()
        assert len(path.read_text("utf-8").splitlines()) == 4 * 200
