"""The OpenAI Responses wire format (``POST /v1/responses``): validation, memory
placement, and the mapping to and from chat completions.

A request is validated as far as the proxy reads it (model, stream, ``instructions``,
``input``, ``previous_response_id``: a string of at most :data:`MAX_RESPONSE_ID`
characters, or null), everything else left as sent. Its input is also read as chat-completion
messages (:func:`as_chat`: ``instructions`` a system message; message items by role,
their text, image and file parts, a user's part chat completions has no part for kept as
it is, so that no input is ever left out; ``function_call`` items tool calls;
``function_call_output`` items tool messages; reasoning items and references to stored
items have no place there), which the policy, retrieval and the log read.

Memory is placed immediately before the latest user input item, as an input message of
the configured role (a string ``input`` becomes that item and a user item): ``instructions``
and every earlier item stay as they were.

An upstream that does not serve this API is reached through chat completions
(:func:`to_chat`): function tools, tool choice, ``max_output_tokens``, temperature,
top_p and the user map over. What only the Responses API has (``previous_response_id``,
built-in tools, stored items, a user's part chat completions cannot carry such as an
image by file id) cannot be bridged: such a request is refused with a 400 naming the
field, never half-served. The answer comes back as a response
(:func:`response_from_chat`) or as its event stream (:class:`ChatToResponsesStream`).

A native answer's id is read too (:func:`response_id_of`, :func:`response_id_of_events`;
none from a failed answer or one without an id): a later request naming it as its
``previous_response_id`` is stored in the same conversation (see :mod:`.responses`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ApiError
from ..http import sse
from .chat_wire import ChatRequest, fast_encoded, request_head
from .lenient import count, items, mapping, mappings, position
from .stream import ChatStreamReader, event_objects, json_object

__all__ = [
    "MAX_RESPONSE_ID",
    "ChatToResponsesStream",
    "ResponsesRequest",
    "answer_from_response",
    "answer_from_response_events",
    "as_chat",
    "inject_native",
    "parse_responses",
    "response_from_chat",
    "response_id_of",
    "response_id_of_events",
    "to_chat",
]

_MESSAGE_ROLES = frozenset({"user", "assistant", "system", "developer"})
_UNBRIDGEABLE = ("previous_response_id", "conversation", "prompt", "background")
_FAILED = frozenset({"error", "response.failed"})
"""Events that end a Responses stream without its answer."""
MAX_RESPONSE_ID = 256
"""The longest ``previous_response_id`` read (OpenAI's ids are about 50 characters): a
longer one is refused, never looked up."""
_ID_EVENTS = frozenset({"response.created", "response.in_progress", "response.completed",
                        "response.incomplete"})  # fmt: skip
"""Events whose ``response`` carries the response's id."""


@dataclass(frozen=True)
class ResponsesRequest:
    """A validated Responses request; ``body`` untouched; ``chat`` the conversation as
    chat-completion messages; ``items`` the input as a list of items; ``origin`` for each
    chat message the index of its item (-1: the instructions); ``last_user`` the index in
    ``items`` of the latest user input item; ``previous_response_id`` the response it
    continues (None: none named)."""

    body: dict[str, Any]
    model: str
    stream: bool
    chat: ChatRequest
    items: list[Any]
    origin: tuple[int, ...]
    last_user: int
    previous_response_id: str | None = None


def parse_responses(raw: bytes) -> ResponsesRequest:
    """Validate a request body; raises :class:`ApiError` (400) naming the problem."""
    body, model, stream = request_head(raw)
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise _invalid("'instructions' must be a string", "instructions")
    previous = _previous(body.get("previous_response_id"))
    items = _items(body.get("input"))
    messages, origin = as_chat(instructions, items)
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if not users:
        raise _invalid("'input' must contain a user message", "input")
    chat = ChatRequest({"model": model, "messages": messages}, model, stream, messages, users[-1])
    last = origin[users[-1]]
    return ResponsesRequest(body, model, stream, chat, items, tuple(origin), last, previous)


def _previous(value: Any) -> str | None:
    """``previous_response_id`` as sent, or None when null (an empty one names none)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise _invalid("'previous_response_id' must be a string", "previous_response_id")
    if len(value) > MAX_RESPONSE_ID:
        raise _invalid(
            f"'previous_response_id' must be at most {MAX_RESPONSE_ID} characters",
            "previous_response_id",
        )
    return value or None


def _items(value: Any) -> list[Any]:
    if isinstance(value, str):
        if not value:
            raise _invalid("'input' must not be empty", "input")
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise _invalid("'input' is required: a string or a non-empty array of items", "input")
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise _invalid(f"{where} must be an object", where)
        if "role" in item and item["role"] not in _MESSAGE_ROLES:
            roles = ", ".join(sorted(_MESSAGE_ROLES))
            raise _invalid(f"{where}.role must be one of {roles}", f"{where}.role")
        content = item.get("content")
        if "role" in item and not isinstance(content, str | list):
            raise _invalid(f"{where}.content must be a string or an array of parts", where)
        for j, part in enumerate(content if isinstance(content, list) else []):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise _invalid(f"{where}.content[{j}] must be an object with a 'type'", where)
            texts = part["type"] in ("input_text", "output_text")
            if texts and not isinstance(part.get("text"), str):
                raise _invalid(f"{where}.content[{j}].text must be a string", where)
    return value


def _invalid(message: str, param: str | None) -> ApiError:
    return ApiError(400, message, code="invalid_request", param=param)


# -- Responses -> chat completions -------------------------------------------------------


def as_chat(
    instructions: str | None, items: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[int]]:
    """The input as chat-completion messages, and for each the index of its item (-1 for
    the instructions)."""
    messages: list[dict[str, Any]] = []
    origin: list[int] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
        origin.append(-1)
    for index, item in enumerate(items):
        for message in _chat_messages(item, messages):
            messages.append(message)
            origin.append(index)
    return messages, origin


def _chat_messages(
    item: Mapping[str, Any], before: list[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    kind = item.get("type", "message")
    if kind == "message" and "role" in item:
        role = "system" if item["role"] == "developer" else item["role"]
        content = item["content"]
        if isinstance(content, str):
            yield {"role": role, "content": content}
            return
        user = role == "user"
        parts = [q for q in (_part(p) or (dict(p) if user else None) for p in content) if q]
        texts = [p["text"] for p in parts if p["type"] == "text"]
        if parts:
            whole = len(texts) == len(parts) or role != "user"
            yield {"role": role, "content": "\n".join(texts) if whole else parts}
    elif kind == "function_call":
        call = {
            "id": str(item.get("call_id") or item.get("id") or ""),
            "type": "function",
            "function": {"name": str(item.get("name", "")), "arguments": str(
                item.get("arguments") or "{}")},
        }  # fmt: skip
        last = before[-1] if before else None
        if last is not None and last["role"] == "assistant" and not last.get("content"):
            last.setdefault("tool_calls", []).append(call)  # one turn, several calls
        else:
            yield {"role": "assistant", "content": None, "tool_calls": [call]}
    elif kind == "function_call_output":
        yield {
            "role": "tool",
            "tool_call_id": str(item.get("call_id", "")),
            "content": _output(item.get("output")),
        }


def _output(output: Any) -> Any:
    """A function call's output as a tool message's content: a string as it is; a list
    of text parts (``input_text``, as the Responses API allows) as chat text parts;
    anything else as its JSON text."""
    if isinstance(output, str):
        return output
    parts = [_part(p) if isinstance(p, dict) else None for p in items(output)]
    if isinstance(output, list) and output and all(p and p["type"] == "text" for p in parts):
        return parts
    return json.dumps(output)


def _part(part: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "input_image":
        url = part.get("image_url")
        if isinstance(url, str):
            return {"type": "image_url", "image_url": {"url": url}}
    if kind == "input_file" and ("file_id" in part or "file_data" in part):
        keys = ("file_id", "filename", "file_data")
        return {"type": "file", "file": {k: part[k] for k in keys if k in part}}
    return None


_BRIDGED_ITEMS = frozenset({"message", "function_call", "function_call_output", "reasoning"})
"""Input items chat completions can carry (reasoning items are left out: the model does
not need them); any other (a reference to a stored item, a built-in tool's call) only
the Responses API can serve."""


def _check_bridgeable(items: Sequence[Mapping[str, Any]]) -> None:
    """Raises a 400 naming the first input item, or part of a user's input, chat
    completions cannot carry."""
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if not isinstance(kind, str) or kind not in _BRIDGED_ITEMS:
            raise _unbridgeable(f"an input item of type {kind!r}", f"input[{i}]")
        content = item.get("content")
        if item.get("role") != "user" or not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            if _part(part) is None:
                raise _unbridgeable(f"a part of type {part['type']!r}", f"input[{i}].content[{j}]")


def to_chat(request: ResponsesRequest) -> dict[str, Any]:
    """The chat-completions request an upstream without this API gets; raises a 400
    for what cannot be bridged (see the module docstring)."""
    body = request.body
    for key in _UNBRIDGEABLE:
        if body.get(key) not in (None, False):
            raise _unbridgeable(f"'{key}'", key)
    _check_bridgeable(request.items)
    chat: dict[str, Any] = {"model": request.model, "messages": request.chat.messages}
    if request.stream:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    if isinstance(body.get("max_output_tokens"), int):
        chat["max_tokens"] = body["max_output_tokens"]
    for key in ("temperature", "top_p", "user", "parallel_tool_calls"):
        if key in body and body[key] is not None:
            chat[key] = body[key]
    text_format = _response_format(body.get("text"))
    if text_format is not None:
        chat["response_format"] = text_format
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and isinstance(reasoning.get("effort"), str):
        chat["reasoning_effort"] = reasoning["effort"]
    tools = body.get("tools") or []
    if not isinstance(tools, list):  # its keys or letters are no tools of another type
        raise _invalid("'tools' must be an array of tools", "tools")
    if tools:
        chat["tools"] = [_tool(t, i) for i, t in enumerate(tools)]
        choice = _tool_choice(body.get("tool_choice"))
        if choice is not None:
            chat["tool_choice"] = choice
    return chat


def _response_format(text: Any) -> dict[str, Any] | None:
    """``text.format`` (structured output) as chat's ``response_format``."""
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") in (None, "text"):
        return None
    if fmt.get("type") == "json_schema":
        keys = ("name", "schema", "strict", "description")
        return {"type": "json_schema", "json_schema": {k: fmt[k] for k in keys if k in fmt}}
    return {"type": fmt["type"]}


def _tool(tool: Any, index: int) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type") != "function" or "name" not in tool:
        kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
        raise _unbridgeable(f"a tool of type {kind!r}", f"tools[{index}]")
    function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
    return {"type": "function", "function": function}


def _tool_choice(choice: Any) -> Any:
    if choice in ("auto", "required", "none"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and "name" in choice:
        return {"type": "function", "function": {"name": choice["name"]}}
    return None


def _unbridgeable(what: str, param: str) -> ApiError:
    return ApiError(
        400,
        f"{what} needs an upstream that serves the Responses API itself (upstreams[].serves:"
        " [responses]); this model's upstream is reached through chat completions",
        code="unsupported_parameter",
        param=param,
    )


def inject_native(request: ResponsesRequest, text: str, role: str) -> dict[str, Any]:
    """The request body with a ``role`` message holding ``text`` right before the latest
    user input item (a string input becomes a list)."""
    memory = {"role": role, "content": text}
    items = request.items
    at = request.last_user
    return {**request.body, "input": [*items[:at], memory, *items[at:]]}


# -- chat completions -> Responses -------------------------------------------------------


def response_from_chat(data: Mapping[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """A chat completion (choice 0) as a Responses object (read leniently: see
    :mod:`.lenient`)."""
    choices = items(data.get("choices"))
    choice = mapping(choices[0]) if choices else {}
    message = mapping(choice.get("message"))
    output: list[dict[str, Any]] = []
    if isinstance(message.get("content"), str) and message["content"]:
        output.append(_message_item(message["content"], "completed"))
    for call in mappings(message.get("tool_calls")):
        output.append(_call_item(call, "completed"))
    usage = _usage(mapping(data.get("usage")))
    finish = choice.get("finish_reason")
    return _response(_response_id(data.get("id")), request, output, usage, finish)


def _response(
    response_id: str,
    request: Mapping[str, Any],
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    finish: Any,
    *,
    status: str | None = None,
) -> dict[str, Any]:
    truncated = finish == "length"
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status or ("incomplete" if truncated else "completed"),
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if truncated else None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "model": str(request.get("model", "")),
        "output": output,
        "parallel_tool_calls": bool(request.get("parallel_tool_calls", True)),
        "previous_response_id": None,
        "temperature": request.get("temperature"),
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "top_p": request.get("top_p"),
        "metadata": request.get("metadata") or {},
        "usage": usage,
    }


def _message_item(text: str, status: str, item_id: str | None = None) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id or f"msg_{uuid.uuid4().hex}",
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _call_item(call: Mapping[str, Any], status: str, item_id: str | None = None) -> dict[str, Any]:
    function = mapping(call.get("function"))
    return {
        "type": "function_call",
        "id": item_id or f"fc_{uuid.uuid4().hex}",
        "call_id": str(call.get("id") or f"call_{uuid.uuid4().hex[:24]}"),
        "name": str(function.get("name") or ""),
        "arguments": str(function.get("arguments") or ""),
        "status": status,
    }


def _usage(reported: Mapping[str, Any]) -> dict[str, Any]:
    prompt = count(reported.get("prompt_tokens"))
    completion = count(reported.get("completion_tokens"))
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def _response_id(value: Any) -> str:
    text = str(value or uuid.uuid4().hex)
    return text if text.startswith("resp_") else f"resp_{text}"


@dataclass
class ChatToResponsesStream(ChatStreamReader):
    """Turns a chat-completion SSE stream into the Responses event sequence, chunk by
    chunk (see :class:`~proxy.doors.stream.ChatStreamReader` for the reading rule);
    ``response.completed`` comes with the chat stream's ``[DONE]`` or :meth:`close`."""

    request: Mapping[str, Any]
    _id: str = ""
    _sequence: int = 0
    _text: list[str] = field(default_factory=list)
    _message: str | None = None
    _calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    _output: list[dict[str, Any]] = field(default_factory=list)
    _usage: dict[str, Any] | None = None
    _reason: Any = None
    _started: bool = False

    @property
    def sequence(self) -> int:
        """The number the next event gets."""
        return self._sequence

    def _chunk(self, data: dict[str, Any]) -> bytes:
        out = self._start(data)
        if isinstance(data.get("usage"), dict):
            self._usage = _usage(data["usage"])
        for choice in mappings(data.get("choices")):
            if choice.get("index", 0) == 0:
                out += self._choice(choice)
        return out

    def _emit(self, kind: str, data: Mapping[str, Any]) -> bytes:
        event = {"type": kind, "sequence_number": self._sequence, **data}
        self._sequence += 1
        return sse.event(fast_encoded(event), kind)

    def _start(self, data: Mapping[str, Any]) -> bytes:
        if self._started:
            return b""
        self._started = True
        self._id = _response_id(data.get("id"))
        shell = _response(self._id, self.request, [], None, None, status="in_progress")
        return self._emit("response.created", {"response": shell}) + self._emit(
            "response.in_progress", {"response": shell}
        )

    def _choice(self, choice: Mapping[str, Any]) -> bytes:
        out = b""
        delta = mapping(choice.get("delta"))
        text = delta.get("content")
        if isinstance(text, str) and text:
            out += self._text_delta(text)
        for call in mappings(delta.get("tool_calls")):
            out += self._call_delta(call)
        if choice.get("finish_reason"):
            self._reason = choice["finish_reason"]
        return out

    def _text_delta(self, text: str) -> bytes:
        out = b""
        if self._message is None:
            self._message = f"msg_{uuid.uuid4().hex}"
            item = {**_message_item("", "in_progress", self._message), "content": []}
            out += self._emit("response.output_item.added",
                              {"output_index": len(self._output), "item": item})  # fmt: skip
            out += self._emit("response.content_part.added", {
                "item_id": self._message, "output_index": len(self._output), "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []},
            })  # fmt: skip
        self._text.append(text)
        return out + self._emit("response.output_text.delta", {
            "item_id": self._message, "output_index": len(self._output), "content_index": 0,
            "delta": text,
        })  # fmt: skip

    def _call_delta(self, call: Mapping[str, Any]) -> bytes:
        out = self._close_message()
        at = position(call.get("index"))
        function = mapping(call.get("function"))
        slot = self._calls.get(at)
        if slot is None:
            item = _call_item({"id": call.get("id"), "function": {
                "name": function.get("name"), "arguments": ""}}, "in_progress")  # fmt: skip
            slot = self._calls[at] = {"item": item, "index": len(self._output), "pieces": []}
            self._output.append(item)
            out += self._emit("response.output_item.added",
                              {"output_index": slot["index"], "item": item})  # fmt: skip
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            slot["pieces"].append(arguments)  # joined once, at the end: never copied per delta
            out += self._emit("response.function_call_arguments.delta", {
                "item_id": slot["item"]["id"], "output_index": slot["index"], "delta": arguments,
            })  # fmt: skip
        return out

    def _close_message(self) -> bytes:
        if self._message is None:
            return b""
        text, index = "".join(self._text), len(self._output)
        item = _message_item(text, "completed", self._message)
        part = item["content"][0]
        self._output.append(item)
        common = {"item_id": self._message, "output_index": index, "content_index": 0}
        out = self._emit("response.output_text.done", {**common, "text": text})
        out += self._emit("response.content_part.done", {**common, "part": part})
        out += self._emit("response.output_item.done", {"output_index": index, "item": item})
        self._message, self._text = None, []
        return out

    def _finish(self) -> bytes:
        out = self._start({}) + self._close_message()
        for slot in self._calls.values():
            item = slot["item"]
            item["status"], item["arguments"] = "completed", "".join(slot["pieces"])
            out += self._emit("response.function_call_arguments.done", {
                "item_id": item["id"], "output_index": slot["index"],
                "arguments": item["arguments"],
            })  # fmt: skip
            out += self._emit("response.output_item.done",
                              {"output_index": slot["index"], "item": item})  # fmt: skip
        final = _response(self._id, self.request, self._output, self._usage, self._reason)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        return out + self._emit(kind, {"response": final})


# -- answers -----------------------------------------------------------------------------


def answer_from_response(raw: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The assistant message (chat form) and the usage of a Responses object."""
    data = json_object(raw)
    if data.get("object") != "response":
        return None, None
    usage = data.get("usage")
    return _answer(data.get("output")), usage if isinstance(usage, dict) else None


def answer_from_response_events(
    chunks: Sequence[bytes],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The same from an event stream: its final response, else the text deltas; none
    when the stream failed (an ``error`` or ``response.failed`` event: the answer never
    reached the client whole)."""
    deltas: list[str] = []
    for event in event_objects(chunks):
        if event.get("type") in _FAILED:
            return None, None
        if event.get("type") in ("response.completed", "response.incomplete"):
            response = mapping(event.get("response"))
            usage = response.get("usage")
            return _answer(response.get("output")), usage if isinstance(usage, dict) else None
        if event.get("type") == "response.output_text.delta":
            deltas.append(str(event.get("delta", "")))
    text = "".join(deltas)
    return ({"role": "assistant", "content": text} if text else None), None


def response_id_of(raw: bytes) -> str | None:
    """The id of a Responses object (a whole answer), or None: no id, not a response, or
    a failed one."""
    data = json_object(raw)
    if data.get("object") != "response" or data.get("status") == "failed":
        return None
    return _id(data)


def response_id_of_events(chunks: Sequence[bytes]) -> str | None:
    """The same from an event stream: its response's id (``response.created`` carries
    it first, ``response.completed`` again); None when the stream failed or named none."""
    found = None
    for event in event_objects(chunks):
        kind = event.get("type")
        if kind in _FAILED:
            return None
        if kind in _ID_EVENTS and found is None:
            found = _id(mapping(event.get("response")))
    return found


def _id(response: Mapping[str, Any]) -> str | None:
    value = response.get("id")
    ok = isinstance(value, str) and 0 < len(value) <= MAX_RESPONSE_ID
    return value if ok else None


def _answer(output: Any) -> dict[str, Any] | None:
    if not isinstance(output, list):
        return None
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            texts += [str(p.get("text", "")) for p in items(item.get("content"))
                      if isinstance(p, dict) and p.get("type") == "output_text"]  # fmt: skip
        elif item.get("type") == "function_call":
            calls.append(
                {
                    "id": str(item.get("call_id", "")),
                    "type": "function",
                    "function": {
                        "name": str(item.get("name", "")),
                        "arguments": str(item.get("arguments", "")),
                    },
                }
            )
    text = "".join(texts)
    if not text and not calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return message
