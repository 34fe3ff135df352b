"""Any other provider, through litellm's async API (a few ms more per call): the request
rebuilt from the chat body, the stream's chunks written as SSE by the proxy, the client's
headers passed as ``extra_headers`` (and ``api-version``, the one query parameter litellm
can carry)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from memory_core import litellm_module

from ..config import UpstreamConfig
from ..errors import UpstreamError, UpstreamStreamError
from ..http import sse
from ..http.headers import Forward, relayed
from .base import Reply, Stream, Upstream
from .failures import status_error, timeout
from .fast import Natives

__all__ = ["LiteLLMUpstream"]


class LiteLLMUpstream:
    """Any litellm provider through ``litellm.acompletion``; SSE written by the proxy."""

    def __init__(self, config: UpstreamConfig) -> None:
        self.config = config
        self._litellm: Any = None
        self._natives = Natives(config)

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
            return timeout(self.config)
        if "APIConnectionError" in name and not isinstance(status, int):
            return UpstreamError(
                502, f"upstream unreachable: {message}", code="upstream_unreachable"
            )
        if isinstance(status, int) and 400 <= status < 600:
            response = getattr(exc, "response", None)
            raw = getattr(response, "content", None)
            return status_error(
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
