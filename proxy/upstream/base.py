"""What an upstream adapter is: the interface the chat handler forwards through.

Invariant: :meth:`Upstream.stream` returns only after the first bytes of a successful
response arrived, so the proxy can still answer an upstream failure with a proper error
status instead of a broken 200. Adapters translate every foreign failure into
:class:`~proxy.errors.UpstreamError` (before the response started) or
:class:`~proxy.errors.UpstreamStreamError` (after), exactly once (:mod:`.failures`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..config import UpstreamConfig
from ..http.headers import Forward

__all__ = ["Reply", "Stream", "Upstream"]


@dataclass(frozen=True)
class Reply:
    """A complete non-streamed answer: the upstream's status, body bytes and the response
    headers to relay (already filtered by :func:`proxy.http.headers.relayed`)."""

    status: int
    body: bytes
    content_type: str
    headers: Mapping[str, str] = field(default_factory=dict)


class Stream(Protocol):
    """A started upstream stream of SSE bytes, and the response headers to relay."""

    @property
    def headers(self) -> Mapping[str, str]: ...

    def chunks(self) -> AsyncIterator[bytes]: ...

    async def close(self) -> None: ...


class Upstream(Protocol):
    """Forwards one chat request: ``body`` parsed, ``raw`` its exact bytes, ``forward``
    the client's headers and query that the policy lets through."""

    config: UpstreamConfig

    async def complete(self, body: Mapping[str, Any], raw: bytes, forward: Forward) -> Reply: ...

    async def stream(self, body: Mapping[str, Any], raw: bytes, forward: Forward) -> Stream: ...

    def native(self, api: str) -> Upstream | None:
        """The adapter that forwards requests of ``api`` (``responses``, ``messages``) raw
        to this upstream, or None when it does not serve that API itself."""
        ...

    async def close(self) -> None: ...
