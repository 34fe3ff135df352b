"""What every API handler reads and answers: query parameters, JSON bodies, typed JSON
responses. Bad input is a 400 :class:`ApiError` naming the parameter."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import BaseModel

from ..errors import ApiError
from ..http.body import load_json, read_body
from ..http.client_io import AiohttpIO
from ..services import Services

__all__ = [
    "int_param",
    "json_body",
    "json_response",
    "question_param",
    "snapshot_id",
    "snapshot_param",
]


def json_response(body: BaseModel, status: int = 200) -> web.Response:
    """``body`` as the JSON it stands for. A value that does not fit its model has already
    failed validation: a drift between producer and contract is a 500, never a silently
    different body."""
    return web.json_response(body.model_dump(mode="json", exclude_none=False), status=status)


async def json_body(request: web.Request, svc: Services) -> dict[str, Any]:
    """The request's body: a JSON object, bounded in size and time (else a 4xx)."""
    server = svc.config.server
    raw = await read_body(
        AiohttpIO(request), limit=server.max_body_bytes, timeout_s=server.body_timeout_s
    )
    payload = load_json(raw)
    if not isinstance(payload, dict):
        raise ApiError(400, "request body must be a JSON object")
    return payload


def question_param(request: web.Request) -> str:
    """The non-blank query parameter ``q``."""
    query = request.query.get("q", "")
    if not query.strip():
        raise ApiError(400, "query parameter 'q' is required", param="q")
    return query


def int_param(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    """An integer query parameter in ``[low, high]`` (``default`` when absent), written
    in ASCII digits (Python's int() also reads "١٢", "1_0", "+5" and surrounding spaces)."""
    raw = request.query.get(name)
    if raw is None:
        return default
    digits = raw.removeprefix("-")
    written = digits.isascii() and digits.isdigit() and len(digits) <= 18
    value = int(raw) if written else low - 1
    if not low <= value <= high:
        raise ApiError(
            400, f"query parameter '{name}' must be an integer in [{low}, {high}]", param=name
        )
    return value


def snapshot_param(request: web.Request, name: str) -> int | None:
    """An optional snapshot id in the query string (``as_of``, ``before``)."""
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    return snapshot_id(raw, f"query parameter '{name}'", name)


def snapshot_id(raw: str, where: str, param: str) -> int:
    """``raw`` as a snapshot id (a positive integer), else a 400 naming ``where``."""
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 18 or int(text) < 1:
        raise ApiError(400, f"{where} must be a snapshot id (a positive integer)", param=param)
    return int(text)
