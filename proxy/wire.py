"""The OpenAI chat wire format: request validation, memory injection, answer extraction.

Validation checks only what the proxy relies on (model, messages, stream) and leaves
every other field as the client sent it. Injection inserts one message immediately
before the last user message and leaves every other message the same object, so the
forwarded history is identical to the client's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory_core import message_text

from .errors import ApiError

__all__ = ["ChatRequest", "answer_from_json", "answer_from_sse", "inject", "parse_chat"]

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


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


def parse_chat(raw: bytes) -> ChatRequest:
    """Validate a request body; raises :class:`ApiError` (400) naming the problem."""
    if not raw.strip():
        raise _invalid("request body is empty; expected a JSON object", None)
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _invalid(f"request body is not valid JSON: {exc}", None) from exc
    if not isinstance(body, dict):
        raise _invalid(f"request body must be a JSON object, got {type(body).__name__}", None)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("'model' is required and must be a non-empty string", "model")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _invalid("'stream' must be a boolean", "stream")
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
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _invalid(f"{where} must be an object", where)
        if message.get("role") not in _ROLES:
            raise _invalid(
                f"{where}.role must be one of {', '.join(sorted(_ROLES))}", f"{where}.role"
            )
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            raise _invalid(
                f"{where}.content must be a string, an array of parts or null", f"{where}.content"
            )
        if isinstance(content, list) and not all(isinstance(p, dict) for p in content):
            raise _invalid(f"{where}.content parts must be objects", f"{where}.content")
    return value


def _invalid(message: str, param: str | None) -> ApiError:
    return ApiError(400, message, code="invalid_request", param=param)


def inject(request: ChatRequest, text: str, role: str) -> list[dict[str, Any]]:
    """A new message list with ``text`` inserted just before the last user message."""
    index = request.last_user_index
    memory = {"role": role, "content": text}
    return [*request.messages[:index], memory, *request.messages[index:]]


def answer_from_json(raw: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The assistant message (choice 0) and the usage of a non-streamed completion."""
    try:
        data = json.loads(raw)
        message = data["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None, None
    usage = data.get("usage")
    answer = _assistant(message.get("content"), message.get("tool_calls"))
    return answer, usage if isinstance(usage, dict) else None


def answer_from_sse(chunks: Sequence[bytes]) -> dict[str, Any] | None:
    """The assistant message assembled from a relayed SSE stream (choice 0)."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for line in b"".join(chunks).split(b"\n"):
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            break
        delta = _delta(payload)
        if delta is None:
            continue
        if isinstance(delta.get("content"), str):
            text.append(delta["content"])
        for call in delta.get("tool_calls") or []:
            _merge_call(calls, call)
    ordered = [calls[i] for i in sorted(calls)]
    return _assistant("".join(text) if text else None, ordered or None)


def _delta(payload: bytes) -> Mapping[str, Any] | None:
    try:
        data = json.loads(payload)
        for choice in data.get("choices") or []:
            if choice.get("index", 0) == 0:
                delta = choice.get("delta") or {}
                return delta if isinstance(delta, dict) else None
    except (ValueError, AttributeError):
        return None
    return None


def _merge_call(calls: dict[int, dict[str, Any]], part: Mapping[str, Any]) -> None:
    slot = calls.setdefault(int(part.get("index", 0)), {"type": "function", "function": {}})
    if part.get("id"):
        slot["id"] = part["id"]
    function = part.get("function") or {}
    target = slot["function"]
    if function.get("name"):
        target["name"] = target.get("name", "") + function["name"]
    if function.get("arguments"):
        target["arguments"] = target.get("arguments", "") + function["arguments"]


def _assistant(content: Any, tool_calls: Any) -> dict[str, Any] | None:
    if not content and not tool_calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message
