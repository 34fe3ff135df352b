"""``GET /memory/receipts`` and ``GET /memory/forgets``: records a person looks through.

``/memory/receipts`` lists the caller's newest receipts.

Receipts are found by the id a chat response's ``X-Memory-Receipt`` header named
(``GET /memory/receipts/{id}``, :func:`.memory.receipt`); this lists the newest of them
(the inspector page shows them) with what tells them apart: time, model, conversation,
the policy's decision, what was found and injected. Bodies stay behind their ids.
``/memory/forgets`` lists what ``/memory forget`` forgot, undone forgets included.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from memory_core import MemoryCoreError

from ..errors import ApiError
from ..services import SERVICES
from ..tenants.memory import TenantMemory
from ..tenants.pool import tenant_of
from .json_io import int_param, json_response
from .schemas import ForgetsResponse, ForgetSummary, ReceiptsResponse, ReceiptSummary

__all__ = ["forgets", "recent"]

_Read = Callable[[TenantMemory, int], Awaitable[Sequence[Any]]]


async def recent(request: web.Request) -> web.Response:
    """The newest ``limit`` receipts of the caller's tenant, newest first."""
    tenant, rows = await _listed(request, "receipts", lambda m, n: m.recent_receipts(n))
    summaries = [ReceiptSummary.model_validate(dataclasses.asdict(r)) for r in rows]
    return json_response(ReceiptsResponse(tenant=tenant, receipts=summaries))


async def forgets(request: web.Request) -> web.Response:
    """The newest ``limit`` forgets of the caller's tenant, newest first."""
    tenant, rows = await _listed(request, "forgets", lambda m, n: m.forgets(limit=n))
    summaries = [ForgetSummary.model_validate(dataclasses.asdict(r)) for r in rows]
    return json_response(ForgetsResponse(tenant=tenant, forgets=summaries))


async def _listed(request: web.Request, what: str, read: _Read) -> tuple[str, Sequence[Any]]:
    """The caller's tenant and the newest ``limit`` rows ``read`` gives (a storage failure
    is a 500 that names ``what``)."""
    svc = request.app[SERVICES]
    tenant = tenant_of(request.headers, svc.config.auth)
    limit = int_param(request, "limit", 100, 1, 10_000)
    try:
        rows = await read(svc.tenants.get(tenant), limit)
    except MemoryCoreError as exc:
        raise ApiError(
            500, f"{what} could not be read: {exc}", type_="server_error", code="memory_error"
        ) from exc
    return tenant, rows
