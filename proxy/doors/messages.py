"""``POST /v1/messages``: Anthropic's Messages API as a front door (see :mod:`.doors`).

Native when the routed upstream serves ``/v1/messages`` (``upstreams[].serves``; an
``anthropic`` upstream does by default): the request goes out raw with memory as a text
block of the last user turn (:func:`~proxy.doors.messages_wire.inject_native`), and the answer comes
back untouched. Bridged otherwise: the request becomes a chat completion
(:func:`~proxy.doors.messages_wire.to_chat`), memory placed as in any chat request, and the answer
(JSON or the chat stream) is presented as a message or Anthropic's event sequence
(:class:`MessagesIO`). Either way the proxy's own errors reach the client as Anthropic
error objects, and a stream failing midway ends with an ``error`` event.
"""

from __future__ import annotations

from typing import Any

from ..http import sse
from .base import Answers, DoorIO, ForeignDoor, Parsed, StreamMapper
from .chat_wire import encoded
from .messages_wire import (
    ChatToMessagesStream,
    MessagesRequest,
    answer_from_message,
    answer_from_message_events,
    error_body,
    inject_native,
    message_from_chat,
    parse_messages,
    to_chat,
)
from .stream import json_object

__all__ = ["MESSAGES", "MessagesIO"]


class MessagesIO(DoorIO):
    """The client of a Messages request: errors as Anthropic error objects; once
    bridged, chat-completion answers as messages and event streams."""

    def error(self, status: int, body: bytes) -> bytes:
        """An error already in Anthropic's shape (a native upstream's) is kept; an
        OpenAI-shaped one (the proxy's, a bridged upstream's) rewritten."""
        data = json_object(body)
        if data.get("type") == "error":
            return body
        error = data.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        text = message if isinstance(message, str) else body.decode("utf-8", "replace")[:2000]
        return error_body(status, text)

    def error_event(self, data: bytes) -> bytes:
        error = json_object(sse.data_of(data) or b"").get("error")
        message = error.get("message") if isinstance(error, dict) else "upstream error"
        body = {"type": "error", "error": {"type": "api_error", "message": str(message)}}
        return sse.event(encoded(body), "error")

    def whole(self, parsed: Parsed, body: bytes) -> bytes:
        return encoded(message_from_chat(json_object(body), parsed.chat.model))

    def mapper(self, parsed: Parsed) -> StreamMapper:
        return ChatToMessagesStream(parsed.chat.model)


def _place(request: MessagesRequest, memory: str, role: str) -> dict[str, Any]:
    """Memory in the last user turn (Anthropic has no system turns between messages:
    ``role`` has no place here)."""
    return inject_native(request, memory)


MESSAGES = ForeignDoor(
    name="messages",
    items_key="messages",
    read=parse_messages,
    place=_place,
    to_chat=to_chat,
    answers=Answers(answer_from_message, answer_from_message_events),
    presenter=MessagesIO,
)
