"""Server-sent events (proxy/http/sse.py): the one place streams are written and read."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proxy.http import sse


def test_an_event_is_its_name_line_its_data_line_and_a_blank_line() -> None:
    assert sse.event(b'{"a": 1}') == b'data: {"a": 1}\n\n'
    assert sse.event(b"{}", "message_stop") == b"event: message_stop\ndata: {}\n\n"
    assert sse.event(sse.DONE_PAYLOAD) == sse.DONE


def test_a_whole_stream_gives_the_payload_of_each_data_line() -> None:
    stream = [b'event: x\ndata: {"a":', b' 1}\n\ndata:{"b": 2}\n', b"\n: comment\ndata: [DONE]\n\n"]
    assert list(sse.payloads(stream)) == [b'{"a": 1}', b'{"b": 2}', b"[DONE]"]
    assert sse.data_of(b"event: x") is None and sse.data_of(b"data:  7 ") == b"7"


@given(st.lists(st.binary(max_size=40), max_size=8), st.data())
def test_lines_come_out_whole_however_the_chunks_split_them(
    pieces: list[bytes], data: st.DataObject
) -> None:
    text = b"\n".join(p.replace(b"\n", b"") for p in pieces) + b"\n"
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    reader = sse.Lines()
    lines = [line for chunk in chunks for line in reader.feed(chunk)]
    assert lines == [line.strip() for line in text.split(b"\n")[:-1]]


def test_the_end_marker_is_found_across_a_chunk_boundary_and_never_inside_a_string() -> None:
    assert sse.done_end(None, b"data: [DONE]\n\n") == len(b"data: [DONE]")
    assert sse.done_end(b'data: {"x": 1}\n\ndata: [DO', b"NE]\n\n") == len(b"NE]")
    assert sse.done_end(None, b'data: {"text": "data: [DONE]"}\n\n') is None
    assert sse.count(b"data: 1\n\ndata: 2\n\n") == 2
