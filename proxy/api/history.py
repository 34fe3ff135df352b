"""The ``/memory`` endpoints of memory's history: cycles, snapshots, diffs, rollback.

- ``POST /memory/dream`` runs a consolidation cycle now and answers its report;
- ``GET /memory/snapshots`` lists the chain, ``GET /memory/snapshots/{id}`` shows one with
  its report, ``GET /memory/snapshots/{a}/diff/{b}`` what differs between two;
- ``POST /memory/rollback {"snapshot": id, "reform": false}`` restores a snapshot;
- ``GET /memory/held`` lists the messages a rollback holds back from formation.

Each acts on the caller's tenant only. A cycle or rollback already running for the tenant
(here or in another process) is a 409 ``memory_busy``; an unknown snapshot a 404.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from aiohttp import web
from pydantic import ValidationError

from memory_core import (
    DreamBusyError,
    HeldRow,
    MemoryCoreError,
    SnapshotNotFoundError,
    SnapshotRow,
    describe_snapshot,
    stored_timestamp,
    undo_of,
)

from ..errors import ApiError
from ..http.same_site import refuse_cross_site
from ..services import SERVICES, Services
from ..tenants.memory import TenantMemory
from ..tenants.pool import tenant_of
from .json_io import int_param, json_body, json_response, snapshot_id, snapshot_param
from .schemas import (
    HeldMessage,
    HeldResponse,
    RollbackRequest,
    RollbackResponse,
    SnapshotDetail,
    SnapshotsResponse,
    SnapshotSummary,
)

__all__ = ["diff", "dream", "held", "rollback", "snapshot", "snapshot_param", "snapshots"]

T = TypeVar("T")
_HELD_SHOWN = 100


async def dream(request: web.Request) -> web.Response:
    """Run a consolidation cycle now (whatever the policy says); its report."""
    refuse_cross_site(request.headers)
    svc, memory = _tenant(request)
    report = await _history(svc, memory.name, memory.dream(trigger="demand"))
    svc.note_dream(memory.name, report.elapsed_ms / 1000, report.trigger, report.snapshot)
    return json_response(report)


async def snapshots(request: web.Request) -> web.Response:
    """The newest snapshots (``limit``, older than ``before``) and the history's state."""
    svc, memory = _tenant(request)
    limit = int_param(request, "limit", 100, 1, 10_000)
    before = snapshot_param(request, "before")
    rows = await _history(svc, memory.name, memory.snapshots(limit=limit, before=before))
    state = await _history(svc, memory.name, memory.history_state())
    return json_response(
        SnapshotsResponse(
            tenant=memory.name,
            head=state.head,
            generation=state.generation,
            held=state.held,
            journal_entries=state.journal_entries,
            journal_bytes=state.journal_bytes,
            last_rollback_at=state.last_rollback_at,
            snapshots=[SnapshotSummary(**_summary(row)) for row in rows],
        )
    )


async def snapshot(request: web.Request) -> web.Response:
    """One snapshot with its report."""
    svc, memory = _tenant(request)
    wanted = _path_snapshot(request, "snapshot")
    row = await _history(svc, memory.name, memory.snapshot(wanted))
    if row is None:
        raise _not_found(wanted)
    return json_response(SnapshotDetail(**_summary(row), report=row.report))


async def diff(request: web.Request) -> web.Response:
    """What differs from snapshot ``a``'s state to ``b``'s: entities, relations, contexts."""
    svc, memory = _tenant(request)
    first, second = _path_snapshot(request, "a"), _path_snapshot(request, "b")
    limit = int_param(request, "limit", 200, 1, 10_000)
    found = await _history(svc, memory.name, memory.diff(first, second, limit=limit))
    return json_response(found)


async def rollback(request: web.Request) -> web.Response:
    """Restore memory to a snapshot (the log is kept; later messages are held)."""
    refuse_cross_site(request.headers)
    svc, memory = _tenant(request)
    payload = await json_body(request, svc)
    try:
        asked = RollbackRequest.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise ApiError(400, f"{where}: {first['msg']}", param=where) from None
    began = time.perf_counter()
    restored, formed = await _history(
        svc, memory.name, memory.rollback(asked.snapshot, reform=asked.reform)
    )
    elapsed = time.perf_counter() - began
    held = await _history(svc, memory.name, memory.held_rows(limit=_HELD_SHOWN))
    state = await _history(svc, memory.name, memory.history_state())
    svc.note_rollback(memory.name, elapsed, restored.target, restored.snapshot)
    return json_response(
        RollbackResponse(
            tenant=memory.name,
            restored=restored.target,
            snapshot=restored.snapshot,
            undo=restored.undo if restored.undo is not None else restored.snapshot - 1,
            checkpoint=restored.checkpoint,
            rows_changed=restored.rows_changed,
            tables=restored.tally,
            held=state.held,
            newly_held=restored.newly_held,
            formed_again=restored.formed_again,
            reformed=formed,
            held_messages=[_held(row) for row in held],
            generation=restored.generation,
            elapsed_ms=round(elapsed * 1000, 3),
        )
    )


async def held(request: web.Request) -> web.Response:
    """The messages a rollback holds back from formation, oldest first."""
    svc, memory = _tenant(request)
    limit = int_param(request, "limit", 100, 1, 10_000)
    rows = await _history(svc, memory.name, memory.held_rows(limit=limit))
    state = await _history(svc, memory.name, memory.history_state())
    return json_response(
        HeldResponse(tenant=memory.name, held=state.held, messages=[_held(r) for r in rows])
    )


def _path_snapshot(request: web.Request, name: str) -> int:
    return snapshot_id(request.match_info[name], f"snapshot id '{name}'", name)


def _tenant(request: web.Request) -> tuple[Services, TenantMemory]:
    svc = request.app[SERVICES]
    tenant = tenant_of(request.headers, svc.config.auth)
    return svc, svc.tenants.get(tenant)


async def _history(svc: Services, tenant: str, work: Awaitable[T]) -> T:
    """``work``'s result; memory_core's errors as the API's (404, 409, 500)."""
    try:
        return await work
    except SnapshotNotFoundError as exc:
        raise ApiError(404, f"{exc} for this tenant", code="snapshot_not_found") from exc
    except DreamBusyError as exc:
        raise ApiError(409, str(exc), type_="server_error", code="memory_busy") from exc
    except MemoryCoreError as exc:
        svc.metrics.memory_failures.labels(stage="history").inc()
        svc.log.write({"event": "history_failed", "tenant": tenant, "error": str(exc)})
        raise ApiError(500, str(exc), type_="server_error", code="memory_error") from exc


def _not_found(wanted: int) -> ApiError:
    return ApiError(404, f"no snapshot {wanted} for this tenant", code="snapshot_not_found")


def _summary(row: SnapshotRow) -> dict[str, Any]:
    trigger = row.report.get("trigger")
    totals = row.report.get("totals")
    return {
        "id": row.id,
        "parent": row.parent,
        "kind": row.kind,
        "target": row.target,
        "created_at": row.created_at,
        "bytes": row.bytes,
        "rows_changed": row.rows_changed,
        "counts": row.counts,
        "trigger": trigger if isinstance(trigger, str) else None,
        "decisions": totals if isinstance(totals, dict) else {},
        "description": describe_snapshot(row),
        "undo": undo_of(row),
    }


def _held(row: HeldRow) -> HeldMessage:
    return HeldMessage(
        log_id=row.log_id,
        conversation_id=row.conversation_id,
        role=row.role,
        text=row.text,
        ts=stored_timestamp(row.ts),
        held_at=row.held_at,
        held_by=row.snapshot_id,
    )
