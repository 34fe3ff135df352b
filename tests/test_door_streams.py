"""The bridged stream mappers on hostile chat chunks: lone surrogates, integers past 64
bits, ``NaN`` and broken lines never break a stream, and what comes out is the door's
event sequence, each event valid JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from proxy.doors.chat_wire import answer_from_sse
from proxy.doors.messages_wire import ChatToMessagesStream, answer_from_message_events
from proxy.doors.responses_wire import ChatToResponsesStream
from proxy.doors.stream import ChatStreamReader
from proxy.http import sse


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


@pytest.mark.timeout(30)
def test_an_answer_of_a_great_many_small_deltas_is_assembled_once() -> None:
    """300,000 deltas of 16 characters (a tool call writing a 5 MB file, a long answer):
    each delta used to copy everything assembled so far (20 s for each of the two, the
    event loop held while the exchange was stored); now the pieces are joined once."""
    count, piece = 300_000, "0123456789abcdef"
    call = {"index": 0, "function": {"arguments": piece}}
    chat = [_chunk(piece, choices=[{"index": 0, "delta": {"content": "", "tool_calls": [call]}}])]
    answer, _ = answer_from_sse(chat * count)
    assert answer is not None
    assert answer["tool_calls"][0]["function"]["arguments"] == piece * count
    start = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
    delta = {"type": "content_block_delta", "index": 0,
             "delta": {"type": "text_delta", "text": piece}}  # fmt: skip
    events = [sse.event(json.dumps(e).encode()) for e in (start, delta)]
    message, _ = answer_from_message_events([events[0]] + [events[1]] * count)
    assert message is not None and message["content"] == piece * count


@pytest.mark.timeout(30)
def test_a_bridged_tool_call_of_a_great_many_deltas_is_assembled_once() -> None:
    """The Responses mapping of a chat tool call in 300,000 deltas of 16 characters (its
    ``arguments`` copied whole at each delta: 20 s, the event loop held mid-stream)."""
    count, piece = 300_000, "0123456789abcdef"
    call = {"index": 0, "id": "call_1", "function": {"name": "write", "arguments": piece}}
    chunk = _chunk("", choices=[{"index": 0, "delta": {"tool_calls": [call]}}])
    reader = ChatToResponsesStream({"model": "m"})
    out = b"".join(reader.feed(chunk) for _ in range(count)) + reader.close()
    final = _events(out)[-1]
    assert final["type"] == "response.completed"
    assert final["response"]["output"][0]["arguments"] == piece * count
