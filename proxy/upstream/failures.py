"""Upstream failures said to the client, once for both adapters: an error status relayed
with its body and headers, a refused upstream credential as 502 (never the upstream's
401, which SDKs read as the client's key being wrong), a timeout as 504, an unreachable
upstream as 502.
"""

from __future__ import annotations

import json

from ..config import UpstreamConfig
from ..errors import UpstreamError
from .urls import shown_url

__all__ = ["credentials_refused", "error_code", "status_error", "timeout", "unreachable"]


def status_error(
    status: int, body: bytes | None, headers: dict[str, str], config: UpstreamConfig
) -> UpstreamError:
    """An upstream error status, relayed with its body and headers; 401/403 excepted."""
    if status in (401, 403):
        return credentials_refused(status, body, headers, config)
    text = (body or b"").decode("utf-8", "replace")[:500]
    return UpstreamError(
        status,
        f"upstream returned HTTP {status}: {text}",
        code=f"upstream_http_{status}",
        raw=body,
        headers=headers,
    )


def credentials_refused(
    status: int, body: bytes | None, headers: dict[str, str], config: UpstreamConfig
) -> UpstreamError:
    """An upstream 401/403 refuses the proxy's upstream key, which the client cannot fix:
    502, never the upstream's status (an SDK reads 401 as the client's key being wrong).
    The upstream's message is left out (it may quote the key, masked, and tells the reader
    to fix "your API key"); its error code stays."""
    where = config.api_base or config.provider
    what = "rejected" if status == 401 else "refused this request made with"
    detail = error_code(body)
    return UpstreamError(
        502,
        f"The upstream ({where}) {what} the proxy's upstream credentials (HTTP {status}"
        f"{', ' + detail if detail else ''}). Your key to this proxy was accepted; the "
        "proxy's operator must check the upstream API key configured for this model and "
        "its permissions.",
        code="upstream_auth_failed" if status == 401 else "upstream_permission_denied",
        headers={**headers, "x-should-retry": "false"},
    )


def error_code(body: bytes | None) -> str | None:
    """The ``error.code`` (else ``error.type``) of an OpenAI-style error body (None for
    anything else, a body nested past the JSON reader's recursion limit included)."""
    try:
        error = json.loads(body or b"").get("error")
        value = error.get("code") or error.get("type")
    except (ValueError, AttributeError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def timeout(config: UpstreamConfig) -> UpstreamError:
    return UpstreamError(
        504, f"upstream did not answer within {config.timeout_s:g} s", code="upstream_timeout"
    )


def unreachable(config: UpstreamConfig, exc: BaseException) -> UpstreamError:
    return UpstreamError(
        502,
        f"upstream {shown_url(config.api_base or '')} unreachable: {exc}",
        code="upstream_unreachable",
    )
