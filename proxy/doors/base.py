"""Front doors: the wire formats a client may speak to the proxy, and what each needs.

Every door is answered by the one chat handler (:mod:`proxy.chat.handler`), with one set of rules
(policy, memory, timeouts, storing the exchange before its answer completes, receipts,
logs). A door says how to read its request (:meth:`Door.parse`: the request itself, and
the same conversation as chat-completion messages, which the policy, retrieval and the
log read whatever the door), where and how memory goes and what is forwarded
(:meth:`Door.route`), how to read the answer it forwards (:class:`Answers`, for what is
stored) and how the client is answered (:meth:`Door.io`: its own JSON, events and error
bodies).

Two ways through: *native*, when the routed upstream serves the door's API itself
(``upstreams[].serves``): the door's own request, with memory placed in it, is forwarded
raw and the answer relayed untouched; *bridged*, otherwise: the request is mapped to chat
completions, memory placed as for any chat request, forwarded like one (fast path or
litellm), and the chat answer mapped back on the way to the client (:class:`Presenter`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from multidict import CIMultiDictProxy

from ..http import sse
from ..http.client_io import ClientIO
from ..upstream.base import Upstream
from .chat_wire import (
    ChatRequest,
    answer_from_json,
    answer_from_sse,
    encoded,
    inject,
    parse_chat,
    splice_memory,
)

__all__ = [
    "CHAT",
    "Answers",
    "ChatDoor",
    "Door",
    "DoorIO",
    "ForeignDoor",
    "ForeignRequest",
    "Parsed",
    "Presenter",
    "Route",
    "StreamMapper",
]

AnswerOf = Callable[[bytes], tuple[dict[str, Any] | None, dict[str, Any] | None]]
StreamAnswerOf = Callable[[Sequence[bytes]], tuple[dict[str, Any] | None, dict[str, Any] | None]]
IdOf = Callable[[bytes], str | None]
StreamIdOf = Callable[[Sequence[bytes]], str | None]


def _no_id(_: object) -> None:
    return None


@dataclass(frozen=True)
class Answers:
    """How to read what the upstream answered (the assistant message, in chat form, and
    the usage): from a whole body, and from the chunks of a stream; and, for an API
    whose later requests may name an answer (the Responses API's
    ``previous_response_id``), the id it gave the answer (None: none, or no such API)."""

    whole: AnswerOf
    stream: StreamAnswerOf
    whole_id: IdOf = _no_id
    stream_id: StreamIdOf = _no_id


CHAT_ANSWERS = Answers(answer_from_json, answer_from_sse)


@dataclass(frozen=True)
class Parsed:
    """A door's request: ``chat`` the conversation as chat completions (what the policy,
    retrieval and the log read), ``native`` the door's own parsed request, ``previous``
    the id of an earlier answer it continues (the Responses API's
    ``previous_response_id``: the request holds only the new turns)."""

    chat: ChatRequest
    native: Any = None
    previous: str | None = None


@dataclass(frozen=True)
class Route:
    """What is forwarded, to whom, and how its answer is read."""

    upstream: Upstream
    body: Mapping[str, Any]
    raw: bytes
    answers: Answers
    bridged: bool = False


class Presenter(ClientIO, Protocol):
    """The client's side as a door presents it: a bridged answer (chat completions)
    turned into the door's format, the proxy's own errors too."""

    def bridge(self, parsed: Parsed) -> None:
        """From now on, answers are chat completions (for ``parsed``) to present in the
        door's format."""
        ...


class StreamMapper(Protocol):
    """A chat-completion event stream turned into a door's, chunk by chunk."""

    on_error: Callable[[bytes], bytes] | None
    """The door's error event for the chat stream's error event."""

    def feed(self, chunk: bytes) -> bytes: ...

    def close(self) -> bytes:
        """What the door's stream still needs to end (nothing if it already has)."""
        ...




class DoorIO:
    """The common part of a door's :class:`Presenter`: the request passes through; the
    proxy's own errors (OpenAI-shaped, whole or as a stream's last event) and, once
    bridged, chat-completion answers are rewritten by the hooks a door defines."""

    def __init__(self, client: ClientIO) -> None:
        self._client = client
        self._bridged: Parsed | None = None
        self._stream: StreamMapper | None = None
        self._failed = False

    def bridge(self, parsed: Parsed) -> None:
        self._bridged = parsed

    # -- hooks ----------------------------------------------------------------------

    def error(self, status: int, body: bytes) -> bytes:
        """An error answer (the proxy's or the upstream's) in the door's shape."""
        return body

    def error_event(self, data: bytes) -> bytes:
        """The proxy's ``data: {"error": ...}`` event (a stream failed midway)."""
        return data

    def whole(self, parsed: Parsed, body: bytes) -> bytes:
        """A bridged chat completion in the door's shape."""
        return body

    def mapper(self, parsed: Parsed) -> StreamMapper | None:
        """What turns a bridged chat stream into the door's."""
        return None

    def relayed(self, data: bytes) -> None:
        """Notes what of a native stream went out (a door that numbers its events)."""

    # -- ClientIO -------------------------------------------------------------------

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self._client.headers

    @property
    def query_string(self) -> str:
        return self._client.query_string

    @property
    def content_length(self) -> int | None:
        return self._client.content_length

    def body_ready(self) -> bool:
        return self._client.body_ready()

    async def read(self) -> bytes:
        return await self._client.read()

    async def send(
        self,
        status: int,
        body: bytes,
        headers: Mapping[str, str],
        content_type: str = "application/json",
        charset: str | None = None,
    ) -> None:
        if status >= 400:
            body = self.error(status, body)
        elif self._bridged is not None:  # our JSON now, whatever the upstream labelled its
            body = self.whole(self._bridged, body)
            content_type, charset = "application/json", "utf-8"
        await self._client.send(status, body, headers, content_type, charset)

    async def start(self, status: int, headers: Mapping[str, str]) -> None:
        if self._bridged is not None:
            self._stream = self.mapper(self._bridged)
            if self._stream is not None:
                self._stream.on_error = self._upstream_failed
        await self._client.start(status, headers)

    async def write(self, data: bytes) -> None:
        if self._failed:  # an error event ended the stream (an upstream's may be followed)
            return
        if data.startswith(sse.ERROR_PREFIX):  # the stream's last event: nothing follows it
            data = self.error_event(data)
            self._failed = True
        elif self._stream is not None:
            data = self._stream.feed(data)
        else:
            self.relayed(data)
        if data:
            await self._client.write(data)

    async def end(self) -> None:
        if self._stream is not None and not self._failed:
            tail = self._stream.close()
            if tail:
                await self._client.write(tail)
        await self._client.end()

    def abort(self) -> None:
        self._client.abort()

    def _upstream_failed(self, data: bytes) -> bytes:
        """The upstream's error event in a bridged stream: its last event, as the
        proxy's own."""
        self._failed = True
        return self.error_event(data)


class Door(Protocol):
    """One wire format (see the module docstring)."""

    @property
    def name(self) -> str:
        """What logs and metrics call it."""
        ...

    def parse(self, raw: bytes) -> Parsed: ...

    def route(
        self, parsed: Parsed, upstream: Upstream, memory: str | None, role: str, raw: bytes
    ) -> Route:
        """Where and how the request goes, with ``memory`` (the block, None for none)."""
        ...

    def io(self, client: ClientIO) -> ClientIO:
        """The client as this door answers it."""
        ...

    def without(self, parsed: Parsed, drop: Collection[int]) -> tuple[Parsed, bytes]:
        """The request without the chat messages ``drop`` (indices into
        ``parsed.chat.messages``; never its last user message), and its bytes: every other
        chat message kept, in order."""
        ...


class ChatDoor:
    """``POST /v1/chat/completions``: the proxy's own format (memory spliced into the
    client's bytes, see :func:`proxy.doors.chat_wire.splice_memory`)."""

    name = "chat"

    def parse(self, raw: bytes) -> Parsed:
        return Parsed(parse_chat(raw))

    def route(
        self, parsed: Parsed, upstream: Upstream, memory: str | None, role: str, raw: bytes
    ) -> Route:
        chat = parsed.chat
        if memory is None:
            return Route(upstream, chat.body, raw, CHAT_ANSWERS)
        body = {**chat.body, "messages": inject(chat, memory, role)}
        return Route(upstream, body, splice_memory(raw, chat, memory, role), CHAT_ANSWERS)

    def io(self, client: ClientIO) -> ClientIO:
        return client

    def without(self, parsed: Parsed, drop: Collection[int]) -> tuple[Parsed, bytes]:
        chat = _chat_without(parsed.chat, drop)
        return Parsed(chat), encoded(chat.body)


CHAT = ChatDoor()


def _chat_without(chat: ChatRequest, drop: Collection[int]) -> ChatRequest:
    messages = [m for i, m in enumerate(chat.messages) if i not in drop]
    last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    return ChatRequest({**chat.body, "messages": messages}, chat.model, chat.stream, messages, last)


class ForeignRequest(Protocol):
    """A request of another API, validated: ``body`` as parsed, ``chat`` read as chat
    completions."""

    @property
    def body(self) -> dict[str, Any]: ...

    @property
    def chat(self) -> ChatRequest: ...

    @property
    def items(self) -> list[Any]:
        """The request's own list of turns or input items."""
        ...

    @property
    def origin(self) -> tuple[int, ...]:
        """For each chat message, the index of its item (-1: from outside the items)."""
        ...


@dataclass(frozen=True)
class ForeignDoor:
    """A door for another API, native or bridged (see the module docstring): how its
    requests are read (``read``, a 400 for a bad one), where memory goes in one forwarded
    raw (``place(request, memory, role)``), the chat-completion request it becomes when
    bridged (``to_chat``, a 400 for what cannot be), how its native answers are read, and
    its :class:`Presenter`. ``name`` is also the API an upstream lists in ``serves``."""

    name: str
    items_key: str
    """The body's field that holds :attr:`ForeignRequest.items`."""
    read: Callable[[bytes], ForeignRequest]
    place: Callable[[Any, str, str], dict[str, Any]]
    to_chat: Callable[[Any], dict[str, Any]]
    answers: Answers
    presenter: Callable[[ClientIO], ClientIO]
    previous: Callable[[Any], str | None] = _no_id
    """The id of the earlier answer a request continues (see :attr:`Parsed.previous`)."""

    def parse(self, raw: bytes) -> Parsed:
        request = self.read(raw)
        return Parsed(request.chat, request, self.previous(request))

    def route(
        self, parsed: Parsed, upstream: Upstream, memory: str | None, role: str, raw: bytes
    ) -> Route:
        request: ForeignRequest = parsed.native
        native = upstream.native(self.name)
        if native is not None:
            if memory is None:
                return Route(native, request.body, raw, self.answers)
            body = self.place(request, memory, role)
            return Route(native, body, encoded(body), self.answers)
        chat = self.to_chat(request)
        if memory is not None:
            chat["messages"] = inject(request.chat, memory, role)
        return Route(upstream, chat, encoded(chat), CHAT_ANSWERS, bridged=True)

    def io(self, client: ClientIO) -> ClientIO:
        return self.presenter(client)

    def without(self, parsed: Parsed, drop: Collection[int]) -> tuple[Parsed, bytes]:
        """Items go when every chat message read from them goes (an item holding another
        message too is kept whole)."""
        request: Any = parsed.native
        kept = [i for i in range(len(request.chat.messages)) if i not in drop]
        going = {request.origin[i] for i in drop} - {request.origin[i] for i in kept}
        items: list[Any] = []
        renumber: dict[int, int] = {}
        for index, item in enumerate(request.items):
            if index not in going:
                renumber[index] = len(items)
                items.append(item)
        chat = _chat_without(request.chat, drop)
        origin = tuple(renumber.get(request.origin[i], -1) for i in kept)
        body = {**request.body, self.items_key: items}
        shorter = dataclasses.replace(
            request,
            body=body,
            chat=chat,
            items=items,
            origin=origin,
            last_user=origin[chat.last_user_index],
        )
        return Parsed(chat, shorter, parsed.previous), encoded(body)
