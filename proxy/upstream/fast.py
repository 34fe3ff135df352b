"""The fast path: raw, pooled HTTP/1.1 forwarding to an OpenAI-compatible server (or a
native API of the upstream), the client's bytes out as they came, the answer's back as
they arrive (:mod:`.http1`). A gzip or deflate body sent despite ``identity`` is decoded
before it is relayed; any other content-coding is relayed with its ``Content-Encoding``.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from ..config import UpstreamConfig
from ..errors import UpstreamError, UpstreamStreamError
from ..http.headers import Forward, relayed
from .base import Reply, Stream, Upstream
from .failures import status_error, timeout, unreachable
from .http1 import (
    Http1Client,
    Http1ConnectError,
    Http1Disconnected,
    Http1Error,
    Http1Response,
)
from .urls import endpoint_url

__all__ = ["ANTHROPIC_VERSION", "MAX_REPLY_BYTES", "FastUpstream", "Natives"]


class Natives:
    """The native adapters of one upstream, made on first use (see
    :meth:`Upstream.native`)."""

    def __init__(self, config: UpstreamConfig) -> None:
        self._config = config
        self._made: dict[str, FastUpstream] = {}

    def get(self, api: str) -> FastUpstream | None:
        base = self._config.native_base
        if api not in self._config.native_apis or base is None:
            return None
        if api not in self._made:
            self._made[api] = FastUpstream(self._config, endpoint=api, base=base)
        return self._made[api]

    async def close(self) -> None:
        await asyncio.gather(*(u.close() for u in self._made.values()))


class FastUpstream:
    """Raw, pooled HTTP/1.1 forwarding to an OpenAI-compatible ``/chat/completions``
    (:mod:`proxy.upstream.http1`): the client's bytes go out as they came, the answer's come back
    as they arrive. The same for a native API of the upstream (``endpoint``: ``responses``
    or ``messages``; Anthropic's takes its key as ``x-api-key`` and an
    ``anthropic-version``, the client's when it sent one)."""

    def __init__(
        self, config: UpstreamConfig, *, endpoint: str = "chat/completions", base: str = ""
    ) -> None:
        self.config = config
        self._url = endpoint_url(base or config.api_base or "", endpoint)
        self._path = _request_path(self._url)
        self._anthropic = endpoint == "messages"
        self._http: Http1Client | None = None
        self._natives = Natives(config)

    def native(self, api: str) -> Upstream | None:
        return self._natives.get(api)

    def _client(self) -> Http1Client:
        if self._http is None or self._http.closed:
            self._http = Http1Client(
                self._url,
                connect_timeout_s=self.config.connect_timeout_s,
                read_timeout_s=self.config.timeout_s,
                limit=256,
                keepalive_s=60,
            )
        return self._http

    def _headers(self, forward: Forward) -> list[tuple[str, str]]:
        headers = [
            *forward.headers.items(),
            ("Content-Type", "application/json"),
            ("Accept-Encoding", "identity"),
        ]
        key = self.config.api_key()
        if self._anthropic:
            if key:
                headers.append(("x-api-key", key))
            if not any(name.lower() == "anthropic-version" for name, _ in headers):
                headers.append(("anthropic-version", ANTHROPIC_VERSION))
        elif key:
            headers.append(("Authorization", f"Bearer {key}"))
        return headers

    def _target(self, query: str) -> str:
        """The request target with the client's query string, byte for byte."""
        return f"{self._path}?{query}" if query else self._path

    async def _post(self, raw: bytes, forward: Forward) -> Http1Response:
        try:
            response = await self._client().post(
                self._target(forward.query), self._headers(forward), raw
            )
        except TimeoutError as exc:
            raise timeout(self.config) from exc
        except Http1ConnectError as exc:
            raise unreachable(self.config, exc) from exc
        except Http1Error as exc:
            raise UpstreamError(
                502, f"upstream request failed: {exc}", code="upstream_error"
            ) from exc
        if response.status >= 400:
            body = await _read_quietly(response)
            raise status_error(
                response.status, body, relayed(response.headers.items()), self.config
            )
        return response

    async def complete(self, body: Mapping[str, Any], raw: bytes, forward: Forward) -> Reply:
        response = await self._post(raw, forward)
        try:
            data = await response.read(limit=MAX_REPLY_BYTES)
        except TimeoutError as exc:
            raise timeout(self.config) from exc
        except Http1Disconnected as exc:
            raise UpstreamError(
                502, f"upstream answer incomplete: {exc}", code="upstream_error"
            ) from exc
        except Http1Error as exc:
            raise UpstreamError(
                502, f"upstream answer refused: {exc}", code="upstream_error"
            ) from exc
        finally:
            response.close()
        data, headers = _decoded_reply(response, data)
        return Reply(
            response.status,
            data,
            response.headers.get("Content-Type", "application/json"),
            headers,
        )

    async def stream(self, body: Mapping[str, Any], raw: bytes, forward: Forward) -> Stream:
        response = await self._post(raw, forward)
        stream = _Http1Stream(response)
        await stream.prime()
        return stream

    async def close(self) -> None:
        await self._natives.close()
        if self._http is not None:
            await self._http.close()


ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` sent to a native Anthropic upstream when the client sent none."""


MAX_REPLY_BYTES = 256 * 1024 * 1024
"""The largest non-streamed answer relayed (a 502 past it, instead of the proxy's memory
filling up with an upstream that never stops sending)."""


def _request_path(url: str) -> str:
    """The path and query of ``url`` as a request target: percent-encoded where they
    were not (an ``api_base`` may hold a query: Azure's ``?api-version=``)."""
    parts = urlsplit(url)
    path = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
    query = quote(parts.query, safe="/%:@!$&'()*+,;=-._~?")
    return f"{path}?{query}" if query else path


class _Decoder:
    """Undoes a gzip or deflate content-coding chunk by chunk (``deflate`` as zlib data
    or, as some servers send it, raw)."""

    def __init__(self) -> None:
        self._zlib = zlib.decompressobj(wbits=32 + zlib.MAX_WBITS)  # gzip or zlib header
        self._pending: bytes | None = b""  # what was fed before the first output

    def feed(self, data: bytes) -> bytes:
        if self._pending is None:
            return self._zlib.decompress(data)
        self._pending += data
        try:
            out = self._zlib.decompress(data)
        except zlib.error:
            self._zlib = zlib.decompressobj(wbits=-zlib.MAX_WBITS)
            out = self._zlib.decompress(self._pending)
        if out:
            self._pending = None
        return out

    def flush(self) -> bytes:
        return self._zlib.flush()


_DECODABLE = frozenset({"gzip", "x-gzip", "deflate"})


def _coding(response: Http1Response) -> str | None:
    """The response's content-coding, lower case; None for none (or ``identity``)."""
    coding = response.headers.get("Content-Encoding", "").strip().lower()
    return None if coding in ("", "identity") else coding


def _decoder(response: Http1Response, headers: dict[str, str]) -> _Decoder | None:
    """A decoder for a gzip/deflate body; for another coding, the ``Content-Encoding``
    goes back into ``headers`` so the client gets the bytes with their encoding."""
    coding = _coding(response)
    if coding in _DECODABLE:
        return _Decoder()
    if coding is not None:
        headers["Content-Encoding"] = response.headers["Content-Encoding"]
    return None


def _decoded(coding: str | None, data: bytes) -> bytes | None:
    """A complete body without its content-coding; None for a coding the proxy cannot
    decode. Raises ``zlib.error`` for a corrupt gzip/deflate body."""
    if coding is None:
        return data
    if coding not in _DECODABLE:
        return None
    decoder = _Decoder()
    return decoder.feed(data) + decoder.flush()


def _decoded_reply(response: Http1Response, data: bytes) -> tuple[bytes, dict[str, str]]:
    """A complete body and the headers to relay with it: decoded when the proxy can,
    else with its ``Content-Encoding``."""
    headers = relayed(response.headers.items())
    coding = _coding(response)
    try:
        decoded = _decoded(coding, data)
    except zlib.error as exc:
        raise UpstreamError(
            502, f"upstream sent a corrupt {coding} body: {exc}", code="upstream_error"
        ) from exc
    if decoded is None:
        headers["Content-Encoding"] = response.headers["Content-Encoding"]
        return data, headers
    return decoded, headers


class _Http1Stream:
    """Relays an upstream SSE body chunk by chunk, as the upstream produces it (decoded
    chunk by chunk when it came gzip- or deflate-encoded)."""

    def __init__(self, response: Http1Response) -> None:
        self._response = response
        self._body = response.chunks()
        self._first: bytes | None = None
        self.headers = relayed(response.headers.items())
        self._decoder = _decoder(response, self.headers)

    async def prime(self) -> None:
        try:
            self._first = await self._next()
        except UpstreamStreamError as exc:
            self._response.close()
            code = 504 if exc.code == "upstream_timeout" else 502
            raise UpstreamError(code, str(exc), code=exc.code) from exc

    async def _next(self) -> bytes:
        """The next piece of the body; ``b""`` at its end."""
        try:
            return await anext(self._body, b"")
        except TimeoutError as exc:
            raise UpstreamStreamError(
                "upstream stopped sending (read timeout)", "upstream_timeout"
            ) from exc
        except Http1Disconnected as exc:
            raise UpstreamStreamError(
                f"upstream stream ended early: {exc}", "upstream_disconnected"
            ) from exc
        except Http1Error as exc:
            raise UpstreamStreamError(
                f"upstream stream broke: {exc}", "upstream_disconnected"
            ) from exc

    async def chunks(self) -> AsyncIterator[bytes]:
        chunk = self._first
        while chunk:
            data = self._decode(chunk)
            if data:
                yield data
            chunk = await self._next()
        tail = self._decode(None)
        if tail:
            yield tail

    def _decode(self, chunk: bytes | None) -> bytes:
        """``chunk`` decoded (``None``: the decoder's remainder at the end)."""
        if self._decoder is None:
            return chunk or b""
        try:
            return self._decoder.flush() if chunk is None else self._decoder.feed(chunk)
        except zlib.error as exc:
            raise UpstreamStreamError(
                f"upstream sent a corrupt compressed stream: {exc}", "upstream_error"
            ) from exc

    async def close(self) -> None:
        await self._body.aclose()
        self._response.close()


async def _read_quietly(response: Http1Response) -> bytes | None:
    """An error body, decoded; None when it cannot be read (or is past
    :data:`MAX_REPLY_BYTES`) or decoded."""
    try:
        data = await response.read(limit=MAX_REPLY_BYTES)
    except (TimeoutError, Http1Error):
        return None
    finally:
        response.close()
    try:
        return _decoded(_coding(response), data)
    except zlib.error:
        return None
