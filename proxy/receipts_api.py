"""``GET /memory/receipts``: the caller's newest receipts, for a person looking for one.

Receipts are found by the id a chat response's ``X-Memory-Receipt`` header named
(``GET /memory/receipts/{id}``, :func:`.admin.receipt`); this lists the newest of them
(the inspector page shows them) with what tells them apart: time, model, conversation,
the policy's decision, what was found and injected. Bodies stay behind their ids.
"""

from __future__ import annotations

from aiohttp import web

from memory_core import MemoryCoreError
from memory_core.storage.receipts import ReceiptRow

from .api_io import int_param, json_response
from .errors import ApiError
from .schemas import ReceiptsResponse, ReceiptSummary
from .services import SERVICES
from .tenants import tenant_of

__all__ = ["recent"]


async def recent(request: web.Request) -> web.Response:
    """The newest ``limit`` receipts of the caller's tenant, newest first."""
    svc = request.app[SERVICES]
    tenant = tenant_of(request.headers, svc.config.auth)
    limit = int_param(request, "limit", 100, 1, 10_000)
    try:
        rows = await svc.tenants.get(tenant).recent_receipts(limit)
    except MemoryCoreError as exc:
        raise ApiError(
            500, f"receipts could not be read: {exc}", type_="server_error", code="memory_error"
        ) from exc
    return json_response(ReceiptsResponse(tenant=tenant, receipts=[_summary(r) for r in rows]))


def _summary(row: ReceiptRow) -> ReceiptSummary:
    return ReceiptSummary(
        id=row.id,
        created_at=row.created_at,
        model=row.model,
        conversation_id=row.conversation_id,
        retrieve=row.retrieve,
        reason=row.reason,
        fragments=row.fragments,
        tokens=row.tokens,
        memory_error=row.memory_error,
    )
