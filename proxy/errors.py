"""The proxy's exception tree, and the OpenAI-style error objects clients receive.

Foreign errors (aiohttp, litellm, memory_core) are translated once, where they are
caught: the upstream adapters and the memory adapter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from memory_core.configuration import ConfigurationError

__all__ = [
    "ApiError",
    "ConfigError",
    "ListenError",
    "MemoryMoving",
    "MemoryUnavailable",
    "ProxyError",
    "RetrievalSkipped",
    "UpstreamError",
    "UpstreamStreamError",
    "error_body",
    "internal_error_body",
]


class ProxyError(Exception):
    """Root of every error the proxy raises on purpose."""


class ConfigError(ProxyError, ConfigurationError):
    """The configuration (or the policy it names) is unreadable or invalid.

    ``str(error)`` is ``<file>:<line>: <dotted.key>: <reason>`` (the line left out when
    unknown), the one form every configuration error in the project takes.
    """

    def __init__(self, file: str, key: str, reason: str, *, line: int | None = None) -> None:
        ConfigurationError.__init__(self, file, line, key, reason)


class ListenError(ProxyError):
    """The proxy cannot listen on its address (in use by another process, not allowed);
    the message names the address."""


class ApiError(ProxyError):
    """An error answered to the client as an OpenAI error object with an HTTP status,
    and ``headers`` (e.g. an upstream's ``Retry-After``) on that response."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = (
            status,
            message,
            type_,
            code,
            param,
        )
        self.headers = dict(headers or {})

    def body(self) -> bytes:
        """The JSON body of the error response."""
        return error_body(self.message, type_=self.type, code=self.code, param=self.param)


class RetrievalSkipped(ProxyError):
    """A memory lookup was not run: the reader threads were full, or it would have
    started past its time budget (the request goes on without memory)."""


class UpstreamError(ApiError):
    """The upstream failed before answering; ``raw`` is its own error body when it sent one,
    ``headers`` its relayable response headers."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str,
        raw: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(status, message, type_="upstream_error", code=code, headers=headers)
        self.raw = raw

    def body(self) -> bytes:
        """The upstream's own OpenAI-style error when it sent one, else ours."""
        if self.raw is not None and _is_openai_error(self.raw):
            return self.raw
        return super().body()


class UpstreamStreamError(ProxyError):
    """The upstream stream broke after the response had started."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def internal_error_body(exc: BaseException) -> bytes:
    """The 500 body for a defect in the proxy: the exception's type, never its text
    (which may quote a request or a key)."""
    return error_body(
        f"internal error in the proxy: {type(exc).__name__}",
        type_="server_error",
        code="internal_error",
    )


def error_body(
    message: str, *, type_: str, code: str | None = None, param: str | None = None
) -> bytes:
    """``{"error": {...}}`` as the OpenAI API writes it."""
    error: dict[str, Any] = {"message": message, "type": type_, "param": param, "code": code}
    return json.dumps({"error": error}).encode()


def _is_openai_error(raw: bytes) -> bool:
    """Whether an upstream's error body is an OpenAI error object (relayed as it is);
    a body nested past the JSON reader's recursion limit is not one."""
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(parsed, dict) and isinstance(parsed.get("error"), dict)


class MemoryMoving(ApiError):
    """A cluster node is taking a tenant over (its lease, its database restored from the
    replica): its memory is not here yet. Chat goes on without it; the ``/memory`` API
    answers 503 with ``Retry-After``."""

    def __init__(self, tenant: str, node: str) -> None:
        super().__init__(
            503,
            f"node {node} is taking over the memory of tenant {tenant} (restoring it from"
            " the replica): retry in a moment",
            type_="server_error",
            code="memory_moving",
            headers={"Retry-After": "1"},
        )


class MemoryUnavailable(ApiError):
    """A cluster node could not claim a tenant it must write (a lease it cannot read, a
    restore that failed, the node stopping): answered 503 with the reason and
    ``Retry-After``, nothing written; the next request claims again."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            503,
            reason,
            type_="server_error",
            code="memory_unavailable",
            headers={"Retry-After": "1"},
        )
