"""The OpenAI chat wire format: request validation, memory injection, answer extraction.

Validation checks only what the proxy relies on (model, messages, stream) and leaves
every other field as the client sent it. Injection inserts one message immediately
before the last user message and leaves every other message the same object, so the
forwarded history is identical to the client's. :func:`splice_memory` does the same on
the client's bytes: the forwarded body is the client's body plus exactly the inserted
message, byte for byte (numbers like ``1e999``, key order, whitespace, escapes).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from memory_core import message_text

from ..errors import ApiError
from ..http import sse
from ..http.body import load_json
from .lenient import items, mapping, mappings, position

__all__ = [
    "ChatRequest",
    "answer_from_json",
    "answer_from_sse",
    "encoded",
    "failure",
    "inject",
    "is_completion",
    "message_offset",
    "own_completion",
    "own_completion_events",
    "parse_chat",
    "request_head",
    "splice_memory",
]

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_MAX_MODEL_NAME = 256


@dataclass(frozen=True)
class ChatRequest:
    """A validated chat completion request; ``body`` is the parsed JSON, untouched."""

    body: dict[str, Any]
    model: str
    stream: bool
    messages: list[dict[str, Any]]
    last_user_index: int

    @property
    def latest_user_text(self) -> str:
        return message_text(self.messages[self.last_user_index].get("content"))

    def recent_user_text(self, earlier_turns: int) -> str:
        """The latest user message preceded by up to ``earlier_turns`` earlier user
        messages (oldest first, one per line): what retrieval reads when a follow-up like
        "and where does she live now?" only makes sense with the turn before it."""
        users = [
            message_text(m.get("content"))
            for m in self.messages[: self.last_user_index]
            if m.get("role") == "user"
        ]
        earlier = users[len(users) - earlier_turns :] if earlier_turns > 0 else []
        return "\n".join([*earlier, self.latest_user_text])

    @property
    def user_turns(self) -> int:
        return sum(1 for m in self.messages if m.get("role") == "user")


def request_head(raw: bytes) -> tuple[dict[str, Any], str, bool]:
    """The body, model and stream flag every front door's request has (a JSON object,
    a model name of at most 256 characters, an optional boolean ``stream``); raises
    :class:`ApiError` (400) naming the problem."""
    body = load_json(raw)
    if not isinstance(body, dict):
        raise _invalid(f"request body must be a JSON object, got {type(body).__name__}", None)
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _invalid("'model' is required and must be a non-empty string", "model")
    if len(model) > _MAX_MODEL_NAME:
        raise _invalid(f"'model' is longer than {_MAX_MODEL_NAME} characters", "model")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _invalid("'stream' must be a boolean", "stream")
    return body, model, stream


def parse_chat(raw: bytes) -> ChatRequest:
    """Validate a request body; raises :class:`ApiError` (400) naming the problem."""
    body, model, stream = request_head(raw)
    messages = _messages(body.get("messages"))
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    if last_user < 0:
        raise _invalid("'messages' must contain at least one user message", "messages")
    return ChatRequest(body, model, stream, messages, last_user)


def _messages(value: Any) -> list[dict[str, Any]]:
    if value is None:
        raise _invalid("'messages' is required", "messages")
    if not isinstance(value, list):
        raise _invalid(f"'messages' must be an array, got {type(value).__name__}", "messages")
    if not value:
        raise _invalid("'messages' must not be empty", "messages")
    for i, message in enumerate(value):
        _message(message, f"messages[{i}]")
    return value


def _message(message: Any, where: str) -> None:
    """One message: the fields the proxy reads or stores must have the API's types."""
    if not isinstance(message, dict):
        raise _invalid(f"{where} must be an object", where)
    if not isinstance(message.get("role"), str) or message["role"] not in _ROLES:
        raise _invalid(f"{where}.role must be one of {', '.join(sorted(_ROLES))}", f"{where}.role")
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise _invalid(
            f"{where}.content must be a string, an array of parts or null", f"{where}.content"
        )
    if isinstance(content, list):
        for j, part in enumerate(content):
            _part(part, f"{where}.content[{j}]")
    for key in ("name", "tool_call_id"):
        if key in message and not isinstance(message[key], str):
            raise _invalid(f"{where}.{key} must be a string", f"{where}.{key}")
    calls = message.get("tool_calls")
    if calls is not None and (
        not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls)
    ):
        raise _invalid(f"{where}.tool_calls must be an array of objects", f"{where}.tool_calls")


def _part(part: Any, where: str) -> None:
    """A content part: an object with a string ``type``; a text part's ``text`` a string."""
    if not isinstance(part, dict):
        raise _invalid(f"{where} must be an object", where)
    kind = part.get("type")
    if not isinstance(kind, str) or not kind:
        raise _invalid(f"{where}.type must be a non-empty string", f"{where}.type")
    if kind == "text" and not isinstance(part.get("text"), str):
        raise _invalid(f"{where}.text must be a string (a text part)", f"{where}.text")


def _invalid(message: str, param: str | None) -> ApiError:
    return ApiError(400, message, code="invalid_request", param=param)


def inject(request: ChatRequest, text: str, role: str) -> list[dict[str, Any]]:
    """A new message list with ``text`` inserted just before the last user message."""
    index = request.last_user_index
    memory = {"role": role, "content": text}
    return [*request.messages[:index], memory, *request.messages[index:]]


def splice_memory(raw: bytes, request: ChatRequest, text: str, role: str) -> bytes:
    """``raw`` (the body ``request`` was parsed from) with the memory message inserted
    just before the last user message; it parses to what :func:`inject` builds.

    Only the inserted bytes differ from the client's, so nothing the client wrote is
    re-serialised (``1e999`` would become the invalid ``Infinity``, ``1E2`` ``100.0``).
    A body the scanner cannot place the message in (not UTF-8) is re-serialised.
    """
    offset = message_offset(raw, request.last_user_index)
    if offset is None:
        return encoded({**request.body, "messages": inject(request, text, role)})
    return raw[:offset] + encoded({"role": role, "content": text}) + b"," + raw[offset:]


_WS = re.compile(rb"[ \t\n\r]*+")
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_STRUCTURAL = re.compile(rb'["{}\[\]]')
_SCALAR = re.compile(rb"[^ \t\n\r,\]}]++")
_BOM = b"\xef\xbb\xbf"


class _Unplaced(Exception):
    """The scanner met something other than the JSON it expects."""


def message_offset(raw: bytes, index: int) -> int | None:
    """The byte offset of ``messages[index]`` in the JSON object ``raw``, or None.

    ``messages`` is the top-level key ``json.loads`` keeps (the last one when repeated,
    escapes decoded). The scan is iterative and linear in ``len(raw)``: regular
    expressions skip strings (escapes respected) and count bracket depth, nothing
    recurses. ``raw`` must be valid JSON (it was parsed before); None for a body that is
    not UTF-8 or has no such element.
    """
    try:
        start = _messages_value(raw)
        return None if start is None else _element(raw, start, index)
    except _Unplaced:
        return None


def _messages_value(raw: bytes) -> int | None:
    pos = _skip(raw, len(_BOM) if raw.startswith(_BOM) else 0)
    if raw[pos : pos + 1] != b"{":
        return None
    pos = _skip(raw, pos + 1)
    found = None
    while raw[pos : pos + 1] == b'"':
        key_end = _string_end(raw, pos)
        colon = _skip(raw, key_end)
        if raw[colon : colon + 1] != b":":
            return None
        value = _skip(raw, colon + 1)
        if _is_messages(raw[pos:key_end]):
            found = value
        pos = _skip(raw, _value_end(raw, value))
        if raw[pos : pos + 1] != b",":
            break
        pos = _skip(raw, pos + 1)
    return found if raw[pos : pos + 1] == b"}" else None


def _element(raw: bytes, start: int, index: int) -> int | None:
    if raw[start : start + 1] != b"[":
        return None
    pos = _skip(raw, start + 1)
    for _ in range(index):
        pos = _skip(raw, _value_end(raw, pos))
        if raw[pos : pos + 1] != b",":
            return None
        pos = _skip(raw, pos + 1)
    return pos if raw[pos : pos + 1] == b"{" else None


def _is_messages(key: bytes) -> bool:
    return key == b'"messages"' or (b"\\" in key and json.loads(key) == "messages")


def _skip(raw: bytes, pos: int) -> int:
    match = _WS.match(raw, pos)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _string_end(raw: bytes, pos: int) -> int:
    match = _STRING.match(raw, pos)
    if match is None:
        raise _Unplaced(pos)
    return match.end()


def _value_end(raw: bytes, pos: int) -> int:
    """The end of the JSON value starting at ``pos``: a string, a container (bracket
    depth counted, strings skipped whole) or a scalar."""
    first = raw[pos : pos + 1]
    if first == b'"':
        return _string_end(raw, pos)
    if first not in (b"{", b"["):
        match = _SCALAR.match(raw, pos)
        if match is None:
            raise _Unplaced(pos)
        return match.end()
    depth = 0
    while True:
        match = _STRUCTURAL.search(raw, pos)
        if match is None:
            raise _Unplaced(pos)
        pos = match.start()
        if raw[pos] == 0x22:  # '"'
            pos = _string_end(raw, pos)
            continue
        depth += 1 if raw[pos] in b"{[" else -1
        pos += 1
        if depth == 0:
            return pos


def encoded(value: Any) -> bytes:
    """``value`` as compact-enough UTF-8 JSON (escaped only where UTF-8 cannot hold it)."""
    try:
        return json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a lone surrogate: only a \u escape can carry it
        return json.dumps(value).encode()


def fast_encoded(value: Any) -> bytes:
    """:func:`encoded`, compact, by orjson where it can (a bridged stream encodes an event
    per chunk: a fifth of the stream's cost with :mod:`json`); what orjson refuses (an
    integer past 64 bits, a lone surrogate, a key that is not a string) as
    :func:`encoded` writes it."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return encoded(value)


def fast_loads(raw: bytes | str) -> Any:
    """``json.loads`` by orjson where it can; what orjson refuses and :mod:`json` reads
    (``NaN``, a lone surrogate escape, a number past 64 bits) by :mod:`json`. Raises
    ``ValueError`` for what neither reads, a value nested past :mod:`json`'s recursion
    limit included (an upstream's event can be anything)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply to read") from exc


def is_completion(raw: bytes) -> bool:
    """Whether ``raw`` is a chat completion as far as another door presents one: a JSON
    object with an array of choices."""
    try:
        return isinstance(mapping(fast_loads(raw)).get("choices"), list)
    except ValueError:
        return False


def answer_from_json(raw: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The assistant message (choice 0) and the usage of a non-streamed completion
    (read leniently: see :mod:`.lenient`)."""
    try:
        data = mapping(fast_loads(raw))
    except ValueError:
        return None, None
    choices = items(data.get("choices"))
    message = mapping(mapping(choices[0]).get("message")) if choices else {}
    usage = data.get("usage")
    answer = _assistant(message.get("content"), message.get("tool_calls"))
    return answer, usage if isinstance(usage, dict) else None


def answer_from_sse(
    chunks: Sequence[bytes],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The assistant message assembled from a relayed SSE stream (choice 0), and the
    usage the stream reported (``stream_options.include_usage``; the last one wins).
    A stream that reports an error (:func:`failure`) has no answer: its client's SDK
    raises there, so the answer never reached it whole."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] | None = None
    for payload in sse.payloads(chunks):
        if payload == sse.DONE_PAYLOAD:
            break
        data = _json_object(payload)
        if failure(data):
            return None, usage
        delta, reported = _delta(data), data.get("usage")
        usage = reported if isinstance(reported, dict) else usage
        if delta is None:
            continue
        if isinstance(delta.get("content"), str):
            text.append(delta["content"])
        for call in mappings(delta.get("tool_calls")):
            _merge_call(calls, call)
    ordered = [_joined(calls[i]) for i in sorted(calls)]
    return _assistant("".join(text) if text else None, ordered or None), usage


def _json_object(payload: bytes) -> dict[str, Any]:
    """One event's JSON object; empty for anything else."""
    try:
        return mapping(fast_loads(payload))
    except ValueError:
        return {}


def failure(event: Mapping[str, Any]) -> bool:
    """Whether a chat stream's event reports an error (``{"error": {...}}``, as OpenAI's
    servers end a stream that fails midway): the ``openai`` SDK raises on any such
    event, whatever follows it."""
    return bool(event.get("error"))


def _delta(data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    choices = data.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            delta = choice.get("delta") or {}
            return delta if isinstance(delta, dict) else None
    return None


def _merge_call(calls: dict[int, dict[str, Any]], part: Mapping[str, Any]) -> None:
    """Adds a streamed tool call's delta to its call; the name and arguments are kept as
    their pieces, joined once by :func:`_joined` (a call writing a file can come in
    hundreds of thousands of deltas: joining at each would copy it each time)."""
    slot = calls.setdefault(position(part.get("index")), {"type": "function", "function": {}})
    if isinstance(part.get("id"), str) and part["id"]:
        slot["id"] = part["id"]
    function = mapping(part.get("function"))
    for key in ("name", "arguments"):
        if isinstance(function.get(key), str) and function[key]:
            slot["function"].setdefault(key, []).append(function[key])


def _joined(call: dict[str, Any]) -> dict[str, Any]:
    """A call assembled by :func:`_merge_call`, its pieces joined."""
    pieces: dict[str, list[str]] = call["function"]
    return {**call, "function": {key: "".join(parts) for key, parts in pieces.items()}}


def _assistant(content: Any, tool_calls: Any) -> dict[str, Any] | None:
    content = content if isinstance(content, str | list) else None
    tool_calls = mappings(tool_calls)
    if not content and not tool_calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def own_completion(model: str, text: str) -> bytes:
    """A chat completion the proxy answers itself (no model wrote it: no tokens used)."""
    return encoded({
        "id": _own_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    })  # fmt: skip


def own_completion_events(model: str, text: str) -> list[bytes]:
    """The same as a stream: the text in one chunk, the finish, the usage, ``[DONE]``."""
    common = {"id": _own_id(), "object": "chat.completion.chunk", "created": int(time.time()),
              "model": model}  # fmt: skip
    chunks = [
        {**common, "choices": [{"index": 0, "finish_reason": None,
                                "delta": {"role": "assistant", "content": text}}]},
        {**common, "choices": [{"index": 0, "finish_reason": "stop", "delta": {}}]},
        {**common, "choices": [], "usage": {"prompt_tokens": 0, "completion_tokens": 0,
                                            "total_tokens": 0}},
    ]  # fmt: skip
    return [sse.event(encoded(c)) for c in chunks] + [sse.DONE]


def _own_id() -> str:
    return f"chatcmpl-areamem-{uuid.uuid4().hex[:24]}"
