"""Upstream adapters: where a chat request is forwarded (:class:`Router`), and how.

Two adapters share one small interface (:mod:`.base`). :class:`.fast.FastUpstream` forwards to an
OpenAI-compatible server over pooled keep-alive connections (:mod:`proxy.upstream.http1`) and
relays its bytes untouched. :class:`.via_litellm.LiteLLMUpstream` goes through litellm's async API
for every other provider (a few ms more per call). Both translate every foreign failure
into :class:`UpstreamError` (before the response started) or :class:`UpstreamStreamError`
(after), exactly once (:mod:`.failures`).

Both forward what :mod:`proxy.http.headers` lets through of the client's request (headers;
the query on the fast path, ``api-version`` alone through litellm) and return the
upstream's relayable response headers, on an error status too (a 429's ``Retry-After``
reaches the client). The fast path asks for ``identity``; a gzip or deflate body sent
anyway is decoded before it is relayed, any other content-coding is relayed with its
``Content-Encoding``: never bytes without their encoding. An upstream 401 or 403 refuses
the proxy's own upstream credentials, not the client's key to the proxy, so it reaches
the client as 502 ``upstream_auth_failed`` / ``upstream_permission_denied`` with
``x-should-retry: false`` (SDKs report a 401 as "your API key is wrong").

Invariant: :meth:`Upstream.stream` returns only after the first bytes of a successful
response arrived, so the proxy can still answer an upstream failure with a proper error
status instead of a broken 200.
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Sequence

from ..config import UpstreamConfig
from .base import Upstream
from .fast import FastUpstream
from .via_litellm import LiteLLMUpstream

__all__ = ["Router", "build_upstream"]


class Router:
    """Maps a requested model name to its upstream: the first matching glob wins."""

    def __init__(self, upstreams: Sequence[Upstream]) -> None:
        self.upstreams = tuple(upstreams)
        self._listed: dict[int, list[str]] = {}

    def note_listed(self, index: int, names: Sequence[str]) -> None:
        """The models upstream ``index`` lists (its start-up check): advertised when its
        route is a glob with no ``advertise`` of its own."""
        self._listed[index] = list(names)

    def route(self, model: str) -> Upstream | None:
        for upstream in self.upstreams:
            if fnmatch.fnmatchcase(model, upstream.config.model):
                return upstream
        return None

    def advertised(self) -> list[str]:
        """Model names for ``/v1/models``: declared names and glob-free routes; a glob
        route that declares none, the names its upstream lists that the glob matches."""
        names: dict[str, None] = {}
        for index, upstream in enumerate(self.upstreams):
            route = upstream.config
            names.update(dict.fromkeys(route.advertise))
            if not any(c in route.model for c in "*?["):
                names[route.model] = None
            elif not route.advertise:
                listed = self._listed.get(index, [])
                matched = (n for n in listed if fnmatch.fnmatchcase(n, route.model))
                names.update(dict.fromkeys(matched))
        return list(names)

    async def close(self) -> None:
        await asyncio.gather(*(u.close() for u in self.upstreams))


def build_upstream(config: UpstreamConfig) -> Upstream:
    """The adapter for one configured route."""
    return FastUpstream(config) if config.uses_fast_path else LiteLLMUpstream(config)
