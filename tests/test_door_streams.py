"""The bridged stream mappers on hostile chat chunks: lone surrogates, integers past 64
bits, ``NaN`` and broken lines never break a stream, and what comes out is the door's
event sequence, each event valid JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from proxy.doors.messages_wire import ChatToMessagesStream
from proxy.doors.responses_wire import ChatToResponsesStream
from proxy.doors.stream import ChatStreamReader


def _chunk(content: str, **extra: object) -> bytes:
    data = {"id": "c1", "choices": [{"index": 0, "delta": {"content": content}}], **extra}
    return b"data: " + json.dumps(data).encode() + b"\n\n"


HOSTILE = [
    _chunk("lone \ud800 surrogate"),  # json.dumps escapes it: \ud800
    _chunk("big", created=2**80),
    b'data: {"id": "c1", "choices": [{"index": 0, "delta": {"content": "nan"}}], "x": NaN}\n\n',
    b"data: {not json\n\n",
    _chunk(" ok \u00e9\U0001f600"),
    b'data: {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n',
    b"data: [DONE]\n\n",
]


def _events(raw: bytes) -> list[dict[str, Any]]:
    events = []
    for block in raw.split(b"\n\n"):
        data = [line[6:] for line in block.split(b"\n") if line.startswith(b"data: ")]
        if data:
            events.append(json.loads(b"".join(data)))
    return events


@pytest.mark.parametrize(
    ("mapper", "delta", "last"),
    [
        (lambda: ChatToResponsesStream({"model": "m"}), "response.output_text.delta",
         "response.completed"),
        (lambda: ChatToMessagesStream("m"), "content_block_delta", "message_stop"),
    ],
)  # fmt: skip
def test_hostile_chunks_never_break_a_bridged_stream(
    mapper: Callable[[], ChatStreamReader], delta: str, last: str
) -> None:
    reader = mapper()
    out = b"".join(reader.feed(chunk) for chunk in HOSTILE) + reader.close()
    events = _events(out)
    assert events[-1]["type"] == last
    texts = [e["delta"] for e in events if e["type"] == delta]
    joined = "".join(t if isinstance(t, str) else str(t["text"]) for t in texts)
    assert joined == "lone \ud800 surrogatebignan ok \u00e9\U0001f600"


@pytest.mark.timeout(60)
def test_a_huge_line_arriving_in_small_pieces_is_read_once() -> None:
    """An 8 MB event (a long answer in one chunk) in 256-byte pieces: each piece used to
    join and split everything still pending (137 GB copied, hours); now each byte is
    joined once."""
    text = "x" * 8_000_000
    line = _chunk(text) + b"data: [DONE]\n\n"
    reader = ChatToMessagesStream("m")
    out = b"".join(reader.feed(line[i : i + 256]) for i in range(0, len(line), 256))
    events = _events(out + reader.close())
    assert [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"] == [text]
    assert events[-1]["type"] == "message_stop"
