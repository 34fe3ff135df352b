"""The client's side of one HTTP exchange, as the chat handler sees it.

The chat endpoint is served by two servers: the lean front (:mod:`proxy.http.front`), which
answers the common case of ``POST /v1/chat/completions`` with least work, and aiohttp,
which serves every other route and any chat request the front hands over (see there).
The handler reads the request and writes its answer through :class:`ClientIO`, so one
handler, with one set of rules, serves both. :class:`AiohttpIO` adapts an aiohttp
request.

Invariants an implementation keeps: ``send`` answers a whole response once; ``start``
begins a stream, then ``write`` (each call bounded by the caller's timeout, waiting
while the client reads slower than the answer comes) and ``end``; ``abort`` drops the
connection at once. A client that goes away cancels the handler's task.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from aiohttp import web
from multidict import CIMultiDictProxy

__all__ = ["AiohttpIO", "ClientIO"]


class ClientIO(Protocol):
    """One request's head and body, and the way back to its client."""

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        """The request headers, case-insensitive, repeated names kept in order."""
        ...

    @property
    def query_string(self) -> str:
        """The raw query (percent-encoded, without ``?``); empty when none was sent."""
        ...

    @property
    def content_length(self) -> int | None: ...

    def body_ready(self) -> bool:
        """Whether the whole body has arrived (reading it then waits for nothing)."""
        ...

    async def read(self) -> bytes:
        """The whole body; may raise ``web.HTTPRequestEntityTooLarge`` past the limit."""
        ...

    async def send(
        self,
        status: int,
        body: bytes,
        headers: Mapping[str, str],
        content_type: str = "application/json",
        charset: str | None = None,
    ) -> None:
        """Answer a whole response, without suspending (it is handed to the transport or
        to the server as it is: the caller relies on nothing else running meanwhile)."""
        ...

    async def start(self, status: int, headers: Mapping[str, str]) -> None:
        """Begin a streamed response (its headers go out now)."""
        ...

    async def write(self, data: bytes) -> None:
        """Send a part of the streamed body; returns once the client can take more."""
        ...

    async def end(self) -> None:
        """End the streamed body."""
        ...

    def abort(self) -> None:
        """Drop the connection now (a client that reads nothing)."""
        ...


class AiohttpIO:
    """:class:`ClientIO` over an aiohttp request; the handler returns :attr:`response`."""

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self.response: web.StreamResponse | None = None

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self._request.headers

    @property
    def query_string(self) -> str:
        return self._request.rel_url.raw_query_string

    @property
    def content_length(self) -> int | None:
        return self._request.content_length

    def body_ready(self) -> bool:
        return self._request.content.is_eof()

    async def read(self) -> bytes:
        return await self._request.read()

    async def send(
        self,
        status: int,
        body: bytes,
        headers: Mapping[str, str],
        content_type: str = "application/json",
        charset: str | None = None,
    ) -> None:
        self.response = web.Response(
            status=status, body=body, headers=headers, content_type=content_type, charset=charset
        )

    async def start(self, status: int, headers: Mapping[str, str]) -> None:
        self.response = web.StreamResponse(status=status, headers=headers)
        await self.response.prepare(self._request)

    async def write(self, data: bytes) -> None:
        assert self.response is not None
        await self.response.write(data)

    async def end(self) -> None:
        assert self.response is not None
        await self.response.write_eof()

    def abort(self) -> None:
        if self._request.transport is not None:
            self._request.transport.abort()
