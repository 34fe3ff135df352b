"""``POST /v1/responses``: the OpenAI Responses API as a front door (see :mod:`.doors`).

Native when the routed upstream serves ``/v1/responses`` (``upstreams[].serves:
[responses]``): the request goes out raw, memory an input message right before the latest
user input item (:func:`.responses_wire.inject_native`), everything else as sent
(``previous_response_id``, tools of every kind, reasoning items, fields the proxy does not
know), and the answer comes back untouched. A request naming ``previous_response_id``
holds only its new input: the id of each relayed answer (a whole response's ``id``, a
stream's ``response.created`` / ``response.completed``) is linked, per tenant, to the
conversation it was stored in, so the later turn is stored there, after that answer (see
:meth:`proxy.chat.turn.MemoryTurn.continue_from`); an id the tenant's memory never linked
starts a conversation of its own, and the request is forwarded as sent either way; a
``previous_response_id`` that is no string, or longer than
:data:`.responses_wire.MAX_RESPONSE_ID`, is a 400. Bridged otherwise: the request becomes a chat
completion (:func:`.responses_wire.to_chat`, which refuses with a 400 what only the
Responses API can serve), memory placed as in any chat request, and the answer presented
as a response or the Responses event sequence (:class:`ResponsesIO`). A stream failing
midway ends with the API's ``error`` event.
"""

from __future__ import annotations

from ..http import sse
from ..http.client_io import ClientIO
from .base import Answers, DoorIO, ForeignDoor, Parsed, StreamMapper
from .chat_wire import encoded
from .responses_wire import (
    ChatToResponsesStream,
    answer_from_response,
    answer_from_response_events,
    inject_native,
    parse_responses,
    response_from_chat,
    response_id_of,
    response_id_of_events,
    to_chat,
)
from .stream import json_object

__all__ = ["RESPONSES", "ResponsesIO"]


class ResponsesIO(DoorIO):
    """The client of a Responses request: errors keep the OpenAI shape the API shares
    with chat completions; once bridged, chat answers become responses and event streams;
    a stream that fails midway ends with an ``error`` event numbered after the last one
    sent."""

    def __init__(self, client: ClientIO) -> None:
        super().__init__(client)
        self._relayed = 0

    def relayed(self, data: bytes) -> None:
        self._relayed += sse.count(data)

    def error_event(self, data: bytes) -> bytes:
        error = json_object(sse.data_of(data) or b"").get("error")
        error = error if isinstance(error, dict) else {}
        mapper = self._stream
        sequence = mapper.sequence if isinstance(mapper, ChatToResponsesStream) else self._relayed
        event = {
            "type": "error",
            "code": str(error.get("code") or "upstream_error"),
            "message": str(error.get("message") or "upstream error"),
            "param": error.get("param"),
            "sequence_number": sequence,
        }
        return sse.event(encoded(event), "error")

    def whole(self, parsed: Parsed, body: bytes) -> bytes:
        return encoded(response_from_chat(json_object(body), parsed.native.body))

    def mapper(self, parsed: Parsed) -> StreamMapper:
        return ChatToResponsesStream(parsed.native.body)


RESPONSES = ForeignDoor(
    name="responses",
    items_key="input",
    read=parse_responses,
    place=inject_native,
    to_chat=to_chat,
    answers=Answers(
        answer_from_response, answer_from_response_events, response_id_of, response_id_of_events
    ),
    presenter=ResponsesIO,
    previous=lambda request: request.previous_response_id,
)
