"""Reading a request body: size, time, media type and JSON shape, checked at the edge.

Every endpoint that takes a JSON body reads it here, so one rule holds everywhere: a
body over the size limit is refused before it is read (413), a body that does not arrive
in time is refused (408, the slow client holds no handler), a body that is not JSON, or
is JSON the rest of the proxy cannot carry (nested past :data:`MAX_DEPTH`, a lone UTF-16
surrogate that no UTF-8 store or upstream can encode) is a 400 naming the problem. Past
this module a body is a plain JSON value that encodes back to UTF-8.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web
from multidict import CIMultiDictProxy

from ..errors import ApiError
from .client_io import ClientIO

__all__ = ["MAX_CONVERSATION_ID", "MAX_DEPTH", "check_conversation_id", "load_json", "read_body"]

MAX_DEPTH = 128
"""The deepest nesting of arrays and objects accepted (tool schemas use about 10)."""

MAX_CONVERSATION_ID = 200
"""The longest explicit conversation id (header or ingest field), in characters."""

_JSON_TYPES = ("application/json", "text/json")


async def read_body(
    client: ClientIO, *, limit: int, timeout_s: float, media_types: frozenset[str] = frozenset()
) -> bytes:
    """The body bytes; raises 413 past ``limit``, 408 after ``timeout_s``, 415 for a
    declared media type that is not JSON nor one of ``media_types`` (no ``Content-Type``
    at all is accepted)."""
    _check_media_type(client.headers, media_types)
    if client.content_length is not None and client.content_length > limit:
        raise _too_large(client.content_length, limit)
    try:
        if client.body_ready():  # it all came with the head: nothing to wait for
            return await client.read()  # (a timer and a task per request saved)
        return await asyncio.wait_for(client.read(), timeout_s)
    except web.HTTPRequestEntityTooLarge as exc:
        raise _too_large(None, limit) from exc
    except TimeoutError as exc:
        raise ApiError(
            408,
            f"the request body did not arrive within {timeout_s:g} s (server.body_timeout_s)",
            code="request_timeout",
        ) from exc


def load_json(raw: bytes) -> Any:
    """``raw`` parsed; raises a 400 :class:`ApiError` saying what is wrong with it."""
    if not raw.strip():
        raise _invalid("request body is empty; expected a JSON object")
    try:
        value = json.loads(raw)
    except RecursionError as exc:
        raise _invalid(f"request body is nested more than {MAX_DEPTH} levels deep") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise _invalid(f"request body is not valid JSON: {exc}") from exc
    _check_value(value)
    return value


def check_conversation_id(value: object, where: str) -> str:
    """An explicit conversation id as given (a header or an ingest field): a non-blank
    string of at most :data:`MAX_CONVERSATION_ID` printable characters; else a 400 naming
    ``where``. The id is rendered in the memory block's headings."""
    if (
        isinstance(value, str)
        and value.strip()
        and len(value) <= MAX_CONVERSATION_ID
        and value.isprintable()
    ):
        return value
    raise ApiError(
        400,
        f"{where} must be a non-empty string of at most {MAX_CONVERSATION_ID} printable characters",
        code="invalid_request",
        param=where,
    )


def _check_value(value: Any) -> None:
    """Depth and encodability of every string, walked without recursion."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            _check_text(item)
            continue
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_DEPTH:
            raise _invalid(f"request body is nested more than {MAX_DEPTH} levels deep")
        if isinstance(item, dict):
            for key, child in item.items():
                _check_text(key)
                pending.append((child, depth + 1))
        else:
            pending.extend((child, depth + 1) for child in item)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = text[max(0, exc.start - 20) : exc.start].encode("utf-8", "replace").decode()
        raise _invalid(
            "request body contains a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape)"
            f" after {where!r}: it is not valid Unicode text"
        ) from exc


def _check_media_type(headers: CIMultiDictProxy[str], also: frozenset[str]) -> None:
    declared = headers.get("Content-Type")
    if declared is None:
        return
    kind = declared.partition(";")[0].strip().lower()
    if kind in _JSON_TYPES or kind.endswith("+json") or kind in also:
        return
    raise ApiError(
        415,
        f"Content-Type {kind!r} is not supported: send the body as JSON with "
        "'Content-Type: application/json'",
        code="unsupported_media_type",
    )


def _too_large(size: int | None, limit: int) -> ApiError:
    got = f" ({size} bytes)" if size is not None else ""
    return ApiError(
        413,
        f"Request body too large{got}: the limit is {limit} bytes (server.max_body_bytes).",
        code="request_too_large",
    )


def _invalid(message: str) -> ApiError:
    return ApiError(400, message, code="invalid_request")
