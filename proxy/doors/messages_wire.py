"""The Anthropic Messages wire format (``POST /v1/messages``): validation, memory
placement, and the mapping to and from chat completions.

A request is validated as far as the proxy reads it (model, ``max_tokens``, stream,
``system``, the turns and their content blocks), everything else left as sent. Its turns
are also read as chat-completion messages (:func:`as_chat`): what the policy, retrieval
and the log see, whatever door a conversation came through (``system`` a system message;
a turn's text, image and document blocks a user or assistant message; ``tool_use``
blocks tool calls; ``tool_result`` blocks tool messages; a user turn's block chat
completions has no part for is kept as it is, so that no turn is ever left out).

Memory is placed in the last user turn, as a text block before what the user wrote
(after the turn's ``tool_result`` blocks, which Anthropic wants first): turns must
alternate, so it cannot be a message of its own; ``system`` and every earlier turn stay
byte-identical, so prompt caches keep hitting.

An upstream that does not serve this API is reached through chat completions
(:func:`to_chat`): tools, tool choice, stop sequences, temperature, top_p, ``max_tokens``
and the user id map over; fields chat completions has no place for are not sent (an
upstream that serves ``/v1/messages`` gets the request raw, all of it). A block the model
must read but chat completions cannot carry (a document or image by Files API id, a
block type it has no part for), or a tool only Anthropic can serve (a server tool, one
whose schema only Anthropic knows), is refused with a 400 naming it, never dropped or
turned into something else. Assistant turns' thinking blocks are left out (chat
completions has no place for them). Its answer comes
back as a message (:func:`message_from_chat`, :class:`ChatToMessagesStream` for the
event sequence ``message_start``, ``content_block_start`` / ``_delta`` / ``_stop``,
``message_delta``, ``message_stop``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ApiError
from ..http import sse
from .chat_wire import ChatRequest, encoded, fast_encoded, fast_loads, request_head
from .lenient import count, items, mapping, mappings, position
from .stream import ChatStreamReader, event_objects, json_object

__all__ = [
    "ChatToMessagesStream",
    "MessagesRequest",
    "answer_from_message",
    "answer_from_message_events",
    "as_chat",
    "error_body",
    "inject_native",
    "message_from_chat",
    "parse_messages",
    "to_chat",
]

_ROLES = frozenset({"user", "assistant"})
_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    499: "api_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class MessagesRequest:
    """A validated Messages request; ``body`` is the parsed JSON, untouched; ``chat`` the
    same conversation as chat-completion messages; ``items`` the turns
    (``body["messages"]``); ``origin`` for each chat message the index of its turn (-1:
    the system prompt); ``last_user`` the index of the turn that ``chat``'s last user
    message comes from."""

    body: dict[str, Any]
    model: str
    stream: bool
    chat: ChatRequest
    items: list[Any]
    origin: tuple[int, ...]
    last_user: int


def parse_messages(raw: bytes) -> MessagesRequest:
    """Validate a request body; raises :class:`ApiError` (400) naming the problem."""
    body, model, stream = request_head(raw)
    tokens = body.get("max_tokens")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise _invalid("'max_tokens' is required and must be a positive integer", "max_tokens")
    _system(body.get("system"))
    turns = _turns(body.get("messages"))
    messages, origin = as_chat(body.get("system"), turns)
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if not users:
        raise _invalid(
            "'messages' must contain a user turn that is not only tool results", "messages"
        )
    chat = ChatRequest({"model": model, "messages": messages}, model, stream, messages, users[-1])
    return MessagesRequest(body, model, stream, chat, turns, tuple(origin), origin[users[-1]])


def _system(value: Any) -> None:
    if value is None or isinstance(value, str):
        return
    if not isinstance(value, list):
        raise _invalid("'system' must be a string or an array of text blocks", "system")
    for i, block in enumerate(value):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise _invalid(f"system[{i}] must be a text block", f"system[{i}]")
        if not isinstance(block.get("text"), str):
            raise _invalid(f"system[{i}].text must be a string", f"system[{i}].text")


def _turns(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise _invalid("'messages' is required and must be a non-empty array", "messages")
    for i, turn in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(turn, dict):
            raise _invalid(f"{where} must be an object", where)
        if turn.get("role") not in _ROLES:
            raise _invalid(f"{where}.role must be 'user' or 'assistant'", f"{where}.role")
        content = turn.get("content")
        if isinstance(content, str):
            continue
        if not isinstance(content, list):
            raise _invalid(
                f"{where}.content must be a string or an array of blocks", f"{where}.content"
            )
        for j, block in enumerate(content):
            _block(block, f"{where}.content[{j}]")
    return value


def _block(block: Any, where: str) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise _invalid(f"{where} must be an object with a string 'type'", where)
    kind = block["type"]
    if kind == "text" and not isinstance(block.get("text"), str):
        raise _invalid(f"{where}.text must be a string", f"{where}.text")
    named = isinstance(block.get("id"), str) and isinstance(block.get("name"), str)
    if kind == "tool_use" and not named:
        raise _invalid(f"{where} (tool_use) needs a string 'id' and 'name'", where)
    if kind == "tool_result" and not isinstance(block.get("tool_use_id"), str):
        raise _invalid(f"{where} (tool_result) needs a string 'tool_use_id'", where)


def _invalid(message: str, param: str | None) -> ApiError:
    return ApiError(400, message, code="invalid_request", param=param)


# -- Messages -> chat completions ------------------------------------------------------


def as_chat(
    system: Any, turns: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[int]]:
    """The conversation as chat-completion messages, and for each the index of the turn
    it comes from (-1 for the system message)."""
    messages: list[dict[str, Any]] = []
    origin: list[int] = []
    text = _text(system)
    if text:
        messages.append({"role": "system", "content": text})
        origin.append(-1)
    for index, turn in enumerate(turns):
        for message in _chat_messages(turn):
            messages.append(message)
            origin.append(index)
    return messages, origin


def _chat_messages(turn: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    role, content = turn["role"], turn["content"]
    if isinstance(content, str):
        yield {"role": role, "content": content}
        return
    if role == "user":
        for block in content:
            if block["type"] == "tool_result":
                yield {
                    "role": "tool",
                    "tool_call_id": block["tool_use_id"],
                    "content": _text(block.get("content")),
                }
        parts = [_part(b) or dict(b) for b in content if b["type"] != "tool_result"]
        if parts:
            texts = [p["text"] for p in parts if p["type"] == "text"]
            whole = len(texts) == len(parts)
            yield {"role": "user", "content": "\n".join(texts) if whole else parts}
        return
    message: dict[str, Any] = {"role": "assistant", "content": _text(content) or None}
    calls = [_call(b) for b in content if b["type"] == "tool_use"]
    if calls:
        message["tool_calls"] = calls
    if message["content"] is not None or calls:
        yield message


def _part(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """A user turn's text, image or document block as a chat content part; None for a
    block chat completions has no part for."""
    kind, source = block["type"], mapping(block.get("source"))
    if kind == "text":
        return {"type": "text", "text": block["text"]}
    data = f"data:{source.get('media_type')};base64,{source.get('data')}"
    if kind == "image" and source.get("type") == "base64":
        return {"type": "image_url", "image_url": {"url": data}}
    if kind == "image" and source.get("type") == "url":
        return {"type": "image_url", "image_url": {"url": source.get("url")}}
    if kind == "document" and source.get("type") == "base64":
        return {"type": "file", "file": {"file_data": data}}
    if kind == "document" and source.get("type") == "text":
        return {"type": "text", "text": str(source.get("data") or "")}
    return None


_LEFT_OUT = frozenset({"thinking", "redacted_thinking"})
"""Assistant blocks a bridged request leaves out (chat completions has no place for
them, and the model does not need them)."""


def _bridgeable(block: Mapping[str, Any], role: str) -> bool:
    if role == "assistant":
        return block["type"] in ("text", "tool_use") or block["type"] in _LEFT_OUT
    return block["type"] == "tool_result" or _part(block) is not None


def _check_bridgeable(turns: Sequence[Mapping[str, Any]]) -> None:
    """Raises a 400 naming the first block chat completions cannot carry."""
    for i, turn in enumerate(turns):
        content = turn["content"]
        for j, block in enumerate(content if isinstance(content, list) else []):
            if not _bridgeable(block, turn["role"]):
                raise ApiError(
                    400,
                    f"a {block['type']!r} block (messages[{i}].content[{j}]) needs an upstream"
                    " that serves the Messages API itself (upstreams[].serves: [messages]);"
                    " this model's upstream is reached through chat completions",
                    code="unsupported_parameter",
                    param=f"messages[{i}].content[{j}]",
                )


def _call(block: Mapping[str, Any]) -> dict[str, Any]:
    arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
    return {
        "id": block["id"],
        "type": "function",
        "function": {"name": block["name"], "arguments": arguments},
    }


def _text(value: Any) -> str:
    """The text of a string or of the text blocks of a block list."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return ""
    texts = [b.get("text") for b in value if isinstance(b, dict) and b.get("type") == "text"]
    return "\n".join(t for t in texts if isinstance(t, str))


def to_chat(request: MessagesRequest) -> dict[str, Any]:
    """The chat-completions request an upstream without this API gets (see the module
    docstring for what maps over); raises a 400 for a block it cannot carry."""
    body = request.body
    _check_bridgeable(request.items)
    chat: dict[str, Any] = {
        "model": request.model,
        "messages": request.chat.messages,
        "max_tokens": body["max_tokens"],
    }
    if request.stream:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    for key in ("temperature", "top_p"):
        if key in body:
            chat[key] = body[key]
    stops = body.get("stop_sequences")
    if stops is not None:  # dropped, a stop of the wrong type would stop nothing
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise _invalid("'stop_sequences' must be an array of strings", "stop_sequences")
        chat["stop"] = stops
    metadata = body.get("metadata")
    user = metadata.get("user_id") if isinstance(metadata, dict) else None
    if isinstance(user, str):
        chat["user"] = user
    _check_tools(body.get("tools"))
    tools = [_tool(t) for t in body.get("tools") or [] if isinstance(t, dict) and "name" in t]
    if tools:
        chat["tools"] = tools
        choice = _tool_choice(body.get("tool_choice"))
        if choice is not None:
            chat["tool_choice"] = choice
    return chat


def _check_tools(tools: Any) -> None:
    """Raises a 400 naming the first tool only Anthropic can serve: a server tool
    (``web_search_…``, ``code_execution_…``) or one whose schema only Anthropic knows
    (``bash_…``, ``text_editor_…``, ``computer_…``); as a function without its schema
    the model would call something else."""
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind not in (None, "custom"):
            raise ApiError(
                400,
                f"a tool of type {kind!r} (tools[{i}]) needs an upstream that serves the"
                " Messages API itself (upstreams[].serves: [messages]); this model's"
                " upstream is reached through chat completions",
                code="unsupported_parameter",
                param=f"tools[{i}]",
            )


def _tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": tool["name"],
        "parameters": tool.get("input_schema") or {"type": "object"},
    }
    if isinstance(tool.get("description"), str):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _tool_choice(choice: Any) -> Any:
    if not isinstance(choice, dict):
        return None
    kind = choice.get("type")
    if kind == "tool" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    return {"auto": "auto", "any": "required", "none": "none"}.get(str(kind))


def inject_native(request: MessagesRequest, text: str) -> dict[str, Any]:
    """The request body with ``text`` as a text block in the last user turn, before what
    the user wrote (after its ``tool_result`` blocks)."""
    turns = list(request.body["messages"])
    turn = dict(turns[request.last_user])
    content = turn["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    at = 0
    while at < len(blocks) and blocks[at].get("type") == "tool_result":
        at += 1
    turn["content"] = [*blocks[:at], {"type": "text", "text": text}, *blocks[at:]]
    turns[request.last_user] = turn
    return {**request.body, "messages": turns}


# -- chat completions -> Messages ------------------------------------------------------


def message_from_chat(data: Mapping[str, Any], model: str) -> dict[str, Any]:
    """A chat completion (choice 0) as a Messages response (read leniently: see
    :mod:`.lenient`)."""
    choices = items(data.get("choices"))
    choice = mapping(choices[0]) if choices else {}
    message = mapping(choice.get("message"))
    content: list[dict[str, Any]] = []
    if isinstance(message.get("content"), str) and message["content"]:
        content.append({"type": "text", "text": message["content"]})
    for call in mappings(message.get("tool_calls")):
        content.append(_tool_use(call))
    usage = mapping(data.get("usage"))
    return {
        "id": _message_id(data.get("id")),
        "type": "message",
        "role": "assistant",
        "model": str(data.get("model") or model),
        "content": content,
        "stop_reason": _STOP_REASONS.get(str(choice.get("finish_reason")), "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": count(usage.get("prompt_tokens")),
            "output_tokens": count(usage.get("completion_tokens")),
        },
    }


def _tool_use(call: Mapping[str, Any]) -> dict[str, Any]:
    function = mapping(call.get("function"))
    return {
        "type": "tool_use",
        "id": str(call.get("id") or f"toolu_{uuid.uuid4().hex[:24]}"),
        "name": str(function.get("name") or ""),
        "input": _arguments(function.get("arguments")),
    }


def _arguments(raw: Any) -> Any:
    """A tool call's arguments as the ``input`` object of a ``tool_use`` block: what
    does not read as an object kept as ``_raw`` (or ``_value``)."""
    try:
        parsed = fast_loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        return {"_raw": raw}
    return parsed if isinstance(parsed, dict) else {"_value": parsed}


def _message_id(value: Any) -> str:
    text = str(value or uuid.uuid4().hex)
    return text if text.startswith("msg_") else f"msg_{text}"


@dataclass
class ChatToMessagesStream(ChatStreamReader):
    """Turns a chat-completion SSE stream into the Messages event sequence, chunk by
    chunk (the bytes a chunk completes are given back at once; a line split across two
    chunks waits for its end). The final ``message_delta`` and ``message_stop`` come when
    the chat stream says ``[DONE]``, or from :meth:`close` when it ended without it."""

    model: str
    _started: bool = False
    _block: int = -1
    _open: str | None = None
    _calls: dict[int, int] = field(default_factory=dict)
    _stop: str = "end_turn"
    _usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})

    def _chunk(self, data: dict[str, Any]) -> bytes:
        out = self._start(data)
        if isinstance(data.get("usage"), dict):
            self._usage["input_tokens"] = count(data["usage"].get("prompt_tokens"))
            self._usage["output_tokens"] = count(data["usage"].get("completion_tokens"))
        for choice in mappings(data.get("choices")):
            if choice.get("index", 0) == 0:
                out += self._choice(choice)
        return out

    def _start(self, data: Mapping[str, Any]) -> bytes:
        if self._started:
            return b""
        self._started = True
        message: dict[str, Any] = {
            "id": _message_id(data.get("id")),
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": str(data.get("model") or self.model),
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return _event("message_start", {"type": "message_start", "message": message})

    def _choice(self, choice: Mapping[str, Any]) -> bytes:
        out = b""
        delta = mapping(choice.get("delta"))
        text = delta.get("content")
        if isinstance(text, str) and text:
            out += self._open_block("text", {"type": "text", "text": ""})
            out += _event("content_block_delta", {
                "type": "content_block_delta", "index": self._block,
                "delta": {"type": "text_delta", "text": text},
            })  # fmt: skip
        for call in mappings(delta.get("tool_calls")):
            out += self._call_delta(call)
        reason = choice.get("finish_reason")
        if reason:
            self._stop = _STOP_REASONS.get(str(reason), "end_turn")
        return out

    def _call_delta(self, call: Mapping[str, Any]) -> bytes:
        out = b""
        at = position(call.get("index"))
        function = mapping(call.get("function"))
        if at not in self._calls:
            block = {
                "type": "tool_use",
                "id": str(call.get("id") or f"toolu_{uuid.uuid4().hex[:24]}"),
                "name": str(function.get("name") or ""),
                "input": {},
            }
            out += self._open_block(f"tool:{at}", block)
            self._calls[at] = self._block
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            out += _event("content_block_delta", {
                "type": "content_block_delta", "index": self._calls[at],
                "delta": {"type": "input_json_delta", "partial_json": arguments},
            })  # fmt: skip
        return out

    def _open_block(self, key: str, block: Mapping[str, Any]) -> bytes:
        if self._open == key:
            return b""
        out = self._close_block()
        self._block += 1
        self._open = key
        return out + _event(
            "content_block_start",
            {"type": "content_block_start", "index": self._block, "content_block": block},
        )

    def _close_block(self) -> bytes:
        if self._open is None:
            return b""
        self._open = None
        return _event("content_block_stop", {"type": "content_block_stop", "index": self._block})

    def _finish(self) -> bytes:
        out = self._start({}) + self._close_block()
        out += _event("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": self._stop, "stop_sequence": None},
            "usage": dict(self._usage),
        })  # fmt: skip
        return out + _event("message_stop", {"type": "message_stop"})


def _event(name: str, data: Mapping[str, Any]) -> bytes:
    return sse.event(fast_encoded(data), name)


# -- answers (what is stored of an exchange) -------------------------------------------


def answer_from_message(raw: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The assistant message (chat form) and the usage of a Messages response."""
    data = json_object(raw)
    if data.get("type") != "message":
        return None, None
    usage = data.get("usage")
    return _answer(data.get("content")), usage if isinstance(usage, dict) else None


def answer_from_message_events(
    chunks: Sequence[bytes],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The assistant message (chat form) assembled from a Messages event stream; none
    when the stream failed midway (an ``error`` event, where Anthropic's SDK raises: the
    answer never reached the client whole)."""
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[tuple[int, str], list[str]] = {}
    usage: dict[str, Any] = {}
    for event in event_objects(chunks):
        if event.get("type") == "error":
            return None, usage or None
        _apply(event, blocks, partial, usage)
    for (index, part), pieces in partial.items():  # each block's deltas joined once
        block = blocks[index]
        if part == "text":
            block["text"] = str(block.get("text") or "") + "".join(pieces)
        elif block.get("type") == "tool_use":
            block["input"] = _arguments("".join(pieces))
    return _answer([blocks[i] for i in sorted(blocks)]), usage or None


def _apply(
    event: Mapping[str, Any],
    blocks: dict[int, dict[str, Any]],
    partial: dict[tuple[int, str], list[str]],
    usage: dict[str, Any],
) -> None:
    """Reads one event: a block started, a delta's piece kept (by block and field), the
    usage reported."""
    kind = event.get("type")
    index = event.get("index")
    if kind == "content_block_start" and isinstance(index, int):
        blocks[index] = dict(mapping(event.get("content_block")))
        partial.pop((index, "text"), None)  # a block started again starts its text again
    elif kind == "content_block_delta" and isinstance(index, int) and index in blocks:
        delta = mapping(event.get("delta"))
        if delta.get("type") == "text_delta":
            partial.setdefault((index, "text"), []).append(str(delta.get("text", "")))
        elif delta.get("type") == "input_json_delta":
            partial.setdefault((index, "input"), []).append(str(delta.get("partial_json", "")))
    elif kind in ("message_start", "message_delta"):
        source = mapping(event.get("message")).get("usage") if kind == "message_start" else None
        for reported in (source, event.get("usage")):
            if isinstance(reported, dict):
                usage.update(reported)


def _answer(content: Any) -> dict[str, Any] | None:
    """Content blocks as an assistant chat message (text and tool calls), or None."""
    if not isinstance(content, list):
        return None
    text = _text(content)
    calls = [_call(b) for b in content if isinstance(b, dict) and b.get("type") == "tool_use"
             and isinstance(b.get("id"), str) and isinstance(b.get("name"), str)]  # fmt: skip
    if not text and not calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return message


# -- errors ---------------------------------------------------------------------------


def error_body(status: int, message: str) -> bytes:
    """An error as Anthropic's clients read it (a lone surrogate an upstream's message
    escaped stays escaped: :func:`~.chat_wire.encoded`)."""
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return encoded({"type": "error", "error": {"type": kind, "message": message}})
