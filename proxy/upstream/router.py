"""Upstream adapters: where a chat request is forwarded, and how.

Two adapters share one small interface. :class:`FastUpstream` forwards to an
OpenAI-compatible server over pooled keep-alive connections (:mod:`proxy.upstream.http1`) and
relays its bytes untouched. :class:`LiteLLMUpstream` goes through litellm's async API
for every other provider (a few ms more per call). Both translate every foreign failure
into :class:`UpstreamError` (before the response started) or :class:`UpstreamStreamError`
(after), exactly once, here.

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
import json
import zlib
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

from memory_core.formation.models.llm import litellm_module

from ..config import UpstreamConfig
from ..errors import UpstreamError, UpstreamStreamError
from ..http import sse
from ..http.headers import Forward, relayed
from .http1 import (
    Http1Client,
    Http1ConnectError,
    Http1Disconnected,
    Http1Error,
    Http1Response,
)

__all__ = ["FastUpstream", "LiteLLMUpstream", "Reply", "Router", "Stream", "Upstream"]


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


class Router:
    """Maps a requested model name to its upstream: the first matching glob wins."""

    def __init__(self, upstreams: Sequence[Upstream]) -> None:
        self.upstreams = tuple(upstreams)

    def route(self, model: str) -> Upstream | None:
        for upstream in self.upstreams:
            if fnmatch.fnmatchcase(model, upstream.config.model):
                return upstream
        return None

    def advertised(self) -> list[str]:
        """Model names for ``/v1/models``: declared names and glob-free routes."""
        names: dict[str, None] = {}
        for upstream in self.upstreams:
            names.update(dict.fromkeys(upstream.config.advertise))
            if not any(c in upstream.config.model for c in "*?["):
                names[upstream.config.model] = None
        return list(names)

    async def close(self) -> None:
        await asyncio.gather(*(u.close() for u in self.upstreams))


def build_upstream(config: UpstreamConfig) -> Upstream:
    """The adapter for one configured route."""
    return FastUpstream(config) if config.uses_fast_path else LiteLLMUpstream(config)


class _Natives:
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
        self._url = f"{base or config.api_base}/{endpoint}"
        self._path = _request_path(self._url)
        self._anthropic = endpoint == "messages"
        self._http: Http1Client | None = None
        self._natives = _Natives(config)

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
            raise _timeout(self.config) from exc
        except Http1ConnectError as exc:
            raise _unreachable(self.config, exc) from exc
        except Http1Error as exc:
            raise UpstreamError(
                502, f"upstream request failed: {exc}", code="upstream_error"
            ) from exc
        if response.status >= 400:
            body = await _read_quietly(response)
            raise _status_error(
                response.status, body, relayed(response.headers.items()), self.config
            )
        return response

    async def complete(self, body: Mapping[str, Any], raw: bytes, forward: Forward) -> Reply:
        response = await self._post(raw, forward)
        try:
            data = await response.read(limit=MAX_REPLY_BYTES)
        except TimeoutError as exc:
            raise _timeout(self.config) from exc
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
    """The path of ``url`` as a request target: percent-encoded where it was not."""
    return quote(urlsplit(url).path or "/", safe="/%:@!$&'()*+,;=-._~")


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


class LiteLLMUpstream:
    """Any litellm provider through ``litellm.acompletion``; SSE written by the proxy."""

    def __init__(self, config: UpstreamConfig) -> None:
        self.config = config
        self._litellm: Any = None
        self._natives = _Natives(config)

    def native(self, api: str) -> Upstream | None:
        return self._natives.get(api)

    def _lib(self) -> Any:
        if self._litellm is None:
            self._litellm = litellm_module()
        return self._litellm

    def _kwargs(self, body: Mapping[str, Any], forward: Forward, *, stream: bool) -> dict[str, Any]:
        extra = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}
        kwargs: dict[str, Any] = {
            "model": f"{self.config.provider}/{body['model']}",
            "messages": body["messages"],
            "stream": stream,
            "timeout": self.config.timeout_s,
            "api_base": self.config.api_base,
            "api_key": self.config.api_key() or ("none" if self.config.api_base else None),
            "max_retries": 0,
        }
        known = {
            "temperature",
            "top_p",
            "n",
            "stop",
            "max_tokens",
            "max_completion_tokens",
            "presence_penalty",
            "frequency_penalty",
            "logit_bias",
            "user",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
            "response_format",
            "seed",
            "logprobs",
            "top_logprobs",
            "stream_options",
            "reasoning_effort",
            "modalities",
            "audio",
            "metadata",
            "store",
            "service_tier",
            "prediction",
        }
        kwargs.update({k: v for k, v in extra.items() if k in known})
        unknown = {k: v for k, v in extra.items() if k not in known}
        if unknown:
            kwargs["extra_body"] = unknown
        return kwargs | _litellm_forward(forward)

    async def complete(self, body: Mapping[str, Any], raw: bytes, forward: Forward) -> Reply:
        try:
            response = await self._lib().acompletion(**self._kwargs(body, forward, stream=False))
        except Exception as exc:
            raise self._translate(exc) from exc
        data = json.dumps(response.model_dump(exclude_none=True)).encode()
        return Reply(200, data, "application/json", _litellm_headers(response))

    async def stream(self, body: Mapping[str, Any], raw: bytes, forward: Forward) -> Stream:
        wrapper: Any = None
        try:
            wrapper = await self._lib().acompletion(**self._kwargs(body, forward, stream=True))
            iterator = wrapper.__aiter__()
            first = await iterator.__anext__()
        except StopAsyncIteration:
            return _LiteLLMStream(None, None, self._translate, _litellm_headers(wrapper))
        except Exception as exc:
            raise self._translate(exc) from exc
        return _LiteLLMStream(iterator, first, self._translate, _litellm_headers(wrapper))

    def _translate(self, exc: BaseException) -> UpstreamError:
        status = getattr(exc, "status_code", None)
        name = type(exc).__name__
        message = str(getattr(exc, "message", exc))
        if "Timeout" in name:
            return _timeout(self.config)
        if "APIConnectionError" in name and not isinstance(status, int):
            return UpstreamError(
                502, f"upstream unreachable: {message}", code="upstream_unreachable"
            )
        if isinstance(status, int) and 400 <= status < 600:
            response = getattr(exc, "response", None)
            raw = getattr(response, "content", None)
            return _status_error(
                status,
                raw if isinstance(raw, bytes) else message.encode(),
                _header_items(getattr(response, "headers", None)),
                self.config,
            )
        return UpstreamError(
            502, f"upstream call failed ({name}): {message}", code="upstream_error"
        )

    async def close(self) -> None:
        """Close and forget litellm's cached HTTP clients (they belong to this event loop)."""
        await self._natives.close()
        if self._litellm is None:
            return
        await self._litellm.close_litellm_async_clients()
        self._litellm.in_memory_llm_clients_cache.flush_cache()


class _LiteLLMStream:
    def __init__(
        self, iterator: Any, first: Any, translate: Any, headers: Mapping[str, str]
    ) -> None:
        self._iterator, self._first, self._translate = iterator, first, translate
        self.headers = headers

    async def chunks(self) -> AsyncIterator[bytes]:
        if self._iterator is None:
            yield sse.DONE
            return
        yield _sse(self._first)
        while True:
            try:
                chunk = await self._iterator.__anext__()
            except StopAsyncIteration:
                break
            except Exception as exc:
                error = self._translate(exc)
                raise UpstreamStreamError(error.message, error.code or "upstream_error") from exc
            yield _sse(chunk)
        yield sse.DONE

    async def close(self) -> None:
        closer = getattr(self._iterator, "aclose", None)
        if closer is not None:
            await closer()


def _sse(chunk: Any) -> bytes:
    return sse.event(json.dumps(chunk.model_dump(exclude_none=True)).encode())


def _litellm_forward(forward: Forward) -> dict[str, Any]:
    """What litellm can carry of the client's request: the headers (``extra_headers``)
    and ``api-version`` (Azure); it has no way to send another query parameter."""
    kwargs: dict[str, Any] = {}
    if forward.headers:
        kwargs["extra_headers"] = dict(forward.headers)
    version = forward.param("api-version")
    if version is not None:
        kwargs["api_version"] = version
    return kwargs


_PROVIDER_PREFIX = "llm_provider-"


def _litellm_headers(response: Any) -> dict[str, str]:
    """The provider's response headers litellm kept (``_response_headers``, else the
    ``llm_provider-*`` copies in ``_hidden_params``), filtered by the relay policy."""
    raw = getattr(response, "_response_headers", None)
    if isinstance(raw, Mapping):
        return _header_items(raw)
    hidden = getattr(response, "_hidden_params", None)
    extra = hidden.get("additional_headers") if isinstance(hidden, Mapping) else None
    if not isinstance(extra, Mapping):
        return {}
    return _header_items(
        {
            k.removeprefix(_PROVIDER_PREFIX): v
            for k, v in extra.items()
            if k.startswith(_PROVIDER_PREFIX)
        }
    )


def _header_items(headers: Any) -> dict[str, str]:
    """The relayable part of a foreign header mapping (httpx, dict or None)."""
    if not isinstance(headers, Mapping):
        return {}
    return relayed(_strings(headers.items()))


def _strings(items: Iterable[tuple[Any, Any]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in items if isinstance(k, str) and isinstance(v, str)]


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


def _status_error(
    status: int, body: bytes | None, headers: dict[str, str], config: UpstreamConfig
) -> UpstreamError:
    """An upstream error status, relayed with its body and headers; 401/403 excepted."""
    if status in (401, 403):
        return _credentials_refused(status, body, headers, config)
    text = (body or b"").decode("utf-8", "replace")[:500]
    return UpstreamError(
        status,
        f"upstream returned HTTP {status}: {text}",
        code=f"upstream_http_{status}",
        raw=body,
        headers=headers,
    )


def _credentials_refused(
    status: int, body: bytes | None, headers: dict[str, str], config: UpstreamConfig
) -> UpstreamError:
    """An upstream 401/403 refuses the proxy's upstream key, which the client cannot fix:
    502, never the upstream's status (an SDK reads 401 as the client's key being wrong).
    The upstream's message is left out (it may quote the key, masked, and tells the reader
    to fix "your API key"); its error code stays."""
    where = config.api_base or config.provider
    what = "rejected" if status == 401 else "refused this request made with"
    detail = _error_code(body)
    return UpstreamError(
        502,
        f"The upstream ({where}) {what} the proxy's upstream credentials (HTTP {status}"
        f"{', ' + detail if detail else ''}). Your key to this proxy was accepted; the "
        "proxy's operator must check the upstream API key configured for this model and "
        "its permissions.",
        code="upstream_auth_failed" if status == 401 else "upstream_permission_denied",
        headers={**headers, "x-should-retry": "false"},
    )


def _error_code(body: bytes | None) -> str | None:
    """The ``error.code`` (else ``error.type``) of an OpenAI-style error body."""
    try:
        error = json.loads(body or b"").get("error")
        value = error.get("code") or error.get("type")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _timeout(config: UpstreamConfig) -> UpstreamError:
    return UpstreamError(
        504, f"upstream did not answer within {config.timeout_s:g} s", code="upstream_timeout"
    )


def _unreachable(config: UpstreamConfig, exc: BaseException) -> UpstreamError:
    return UpstreamError(
        502, f"upstream {config.api_base} unreachable: {exc}", code="upstream_unreachable"
    )
