"""Upstream adapters: where a chat request is forwarded, and how.

Two adapters share one small interface. :class:`FastUpstream` forwards to an
OpenAI-compatible server over a pooled aiohttp session and relays its bytes untouched
(about 1 ms per call on the reference machine). :class:`LiteLLMUpstream` goes through
litellm's async API for every other provider (a few ms more per call). Both translate
every foreign failure into :class:`UpstreamError` (before the response started) or
:class:`UpstreamStreamError` (after), exactly once, here.

Invariant: :meth:`Upstream.stream` returns only after the first bytes of a successful
response arrived, so the proxy can still answer an upstream failure with a proper error
status instead of a broken 200.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from memory_core.formation.llm import litellm_module

from .config import UpstreamConfig
from .errors import UpstreamError, UpstreamStreamError

__all__ = ["FastUpstream", "LiteLLMUpstream", "Reply", "Router", "Stream", "Upstream"]


@dataclass(frozen=True)
class Reply:
    """A complete non-streamed answer: the upstream's status and body bytes."""

    status: int
    body: bytes
    content_type: str


class Stream(Protocol):
    """A started upstream stream of SSE bytes."""

    def chunks(self) -> AsyncIterator[bytes]: ...

    async def close(self) -> None: ...


class Upstream(Protocol):
    """Forwards one chat request. ``raw`` is the exact body to send when unchanged."""

    config: UpstreamConfig

    async def complete(self, body: Mapping[str, Any], raw: bytes) -> Reply: ...

    async def stream(self, body: Mapping[str, Any], raw: bytes) -> Stream: ...

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


class FastUpstream:
    """Raw, pooled aiohttp forwarding to an OpenAI-compatible ``/chat/completions``."""

    def __init__(self, config: UpstreamConfig) -> None:
        self.config = config
        self._url = f"{config.api_base}/chat/completions"
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            timeout = aiohttp.ClientTimeout(
                total=None, connect=self.config.connect_timeout_s, sock_read=self.config.timeout_s
            )
            connector = aiohttp.TCPConnector(limit=256, keepalive_timeout=60)
            self._session = aiohttp.ClientSession(
                timeout=timeout, connector=connector, auto_decompress=False
            )
        return self._session

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        key = self.config.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def _post(self, raw: bytes) -> aiohttp.ClientResponse:
        try:
            response = await self._client().post(self._url, data=raw, headers=self._headers())
        except TimeoutError as exc:
            raise _timeout(self.config) from exc
        except aiohttp.ClientConnectorError as exc:
            raise _unreachable(self.config, exc) from exc
        except aiohttp.ClientError as exc:
            raise UpstreamError(
                502, f"upstream request failed: {exc}", code="upstream_error"
            ) from exc
        if response.status >= 400:
            body = await _read_quietly(response)
            raise _status_error(response.status, body)
        return response

    async def complete(self, body: Mapping[str, Any], raw: bytes) -> Reply:
        response = await self._post(raw)
        try:
            data = await response.read()
        except TimeoutError as exc:
            raise _timeout(self.config) from exc
        except aiohttp.ClientError as exc:
            raise UpstreamError(
                502, f"upstream closed the connection: {exc}", code="upstream_error"
            ) from exc
        finally:
            response.release()
        return Reply(
            response.status, data, response.headers.get("Content-Type", "application/json")
        )

    async def stream(self, body: Mapping[str, Any], raw: bytes) -> Stream:
        response = await self._post(raw)
        stream = _AiohttpStream(response)
        await stream.prime()
        return stream

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


class _AiohttpStream:
    """Relays an upstream SSE body chunk by chunk, as the upstream produces it."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self._first: bytes | None = None

    async def prime(self) -> None:
        try:
            self._first = await self._next()
        except UpstreamStreamError as exc:
            self._response.close()
            code = 504 if exc.code == "upstream_timeout" else 502
            raise UpstreamError(code, str(exc), code=exc.code) from exc

    async def _next(self) -> bytes:
        try:
            return await self._response.content.readany()
        except TimeoutError as exc:
            raise UpstreamStreamError(
                "upstream stopped sending (read timeout)", "upstream_timeout"
            ) from exc
        except aiohttp.ClientError as exc:
            raise UpstreamStreamError(
                f"upstream stream broke: {exc}", "upstream_disconnected"
            ) from exc

    async def chunks(self) -> AsyncIterator[bytes]:
        if self._first:
            yield self._first
        while True:
            chunk = await self._next()
            if not chunk:
                if not self._response.content.at_eof():
                    raise UpstreamStreamError(
                        "upstream stream ended early", "upstream_disconnected"
                    )
                return
            yield chunk

    async def close(self) -> None:
        self._response.close()


class LiteLLMUpstream:
    """Any litellm provider through ``litellm.acompletion``; SSE written by the proxy."""

    def __init__(self, config: UpstreamConfig) -> None:
        self.config = config
        self._litellm: Any = None

    def _lib(self) -> Any:
        if self._litellm is None:
            self._litellm = litellm_module()
        return self._litellm

    def _kwargs(self, body: Mapping[str, Any], stream: bool) -> dict[str, Any]:
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
        return kwargs

    async def complete(self, body: Mapping[str, Any], raw: bytes) -> Reply:
        try:
            response = await self._lib().acompletion(**self._kwargs(body, stream=False))
        except Exception as exc:
            raise self._translate(exc) from exc
        data = json.dumps(response.model_dump(exclude_none=True)).encode()
        return Reply(200, data, "application/json")

    async def stream(self, body: Mapping[str, Any], raw: bytes) -> Stream:
        try:
            wrapper = await self._lib().acompletion(**self._kwargs(body, stream=True))
            iterator = wrapper.__aiter__()
            first = await iterator.__anext__()
        except StopAsyncIteration:
            return _LiteLLMStream(None, None, self._translate)
        except Exception as exc:
            raise self._translate(exc) from exc
        return _LiteLLMStream(iterator, first, self._translate)

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
            raw = getattr(getattr(exc, "response", None), "content", None)
            return _status_error(status, raw if isinstance(raw, bytes) else message.encode())
        return UpstreamError(
            502, f"upstream call failed ({name}): {message}", code="upstream_error"
        )

    async def close(self) -> None:
        """Close and forget litellm's cached HTTP clients (they belong to this event loop)."""
        if self._litellm is None:
            return
        await self._litellm.close_litellm_async_clients()
        self._litellm.in_memory_llm_clients_cache.flush_cache()


class _LiteLLMStream:
    def __init__(self, iterator: Any, first: Any, translate: Any) -> None:
        self._iterator, self._first, self._translate = iterator, first, translate

    async def chunks(self) -> AsyncIterator[bytes]:
        if self._iterator is None:
            yield b"data: [DONE]\n\n"
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
        yield b"data: [DONE]\n\n"

    async def close(self) -> None:
        closer = getattr(self._iterator, "aclose", None)
        if closer is not None:
            await closer()


def _sse(chunk: Any) -> bytes:
    return b"data: " + json.dumps(chunk.model_dump(exclude_none=True)).encode() + b"\n\n"


async def _read_quietly(response: aiohttp.ClientResponse) -> bytes:
    try:
        return await response.read()
    except (TimeoutError, aiohttp.ClientError):
        return b""
    finally:
        response.release()


def _status_error(status: int, body: bytes | None) -> UpstreamError:
    text = (body or b"").decode("utf-8", "replace")[:500]
    return UpstreamError(
        status, f"upstream returned HTTP {status}: {text}", code=f"upstream_http_{status}", raw=body
    )


def _timeout(config: UpstreamConfig) -> UpstreamError:
    return UpstreamError(
        504, f"upstream did not answer within {config.timeout_s:g} s", code="upstream_timeout"
    )


def _unreachable(config: UpstreamConfig, exc: BaseException) -> UpstreamError:
    return UpstreamError(
        502, f"upstream {config.api_base} unreachable: {exc}", code="upstream_unreachable"
    )
