"""The ``/memory`` API: ingest, search, stats, the area of a question, inspection views
and receipts.

Every endpoint acts on the caller's tenant only (same keys as chat). Every JSON body is
one of the typed models of :mod:`.schemas` (views of memory validated into
:mod:`memory_core.views` models), so ``GET /openapi.json`` describes what is served.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from aiohttp import web
from pydantic import ValidationError

from memory_core import (
    STRATEGIES,
    InvalidInputError,
    LogMessage,
    MemoryCoreError,
    Recall,
    SnapshotNotFoundError,
    check_timestamp,
    query_terms,
)

from ..chat.receipt import RECEIPT_TEXT_CHARS
from ..errors import ApiError, RetrievalSkipped
from ..http.body import check_conversation_id
from ..http.same_site import refuse_cross_site
from ..services import SERVICES
from ..tenants.memory import TenantMemory
from ..tenants.pool import tenant_of
from .json_io import int_param, json_body, json_response, question_param, snapshot_param
from .schemas import (
    AreaResponse,
    ContextsResponse,
    EntitiesResponse,
    IngestResponse,
    Receipt,
    ReceiptCitation,
    RelationsResponse,
    SearchHit,
    SearchResponse,
    StatsResponse,
)

__all__ = [
    "area",
    "contexts",
    "entities",
    "ingest",
    "receipt",
    "relations",
    "search",
    "search_response",
    "stats",
]

V = TypeVar("V")
_MAX_INGEST_MESSAGES = 100_000


async def ingest(request: web.Request) -> web.Response:
    """Store a transcript as if it had passed through the proxy, then form memory."""
    svc = request.app[SERVICES]
    refuse_cross_site(request.headers)
    tenant = tenant_of(request.headers, svc.config.auth)
    background = _form_param(request)
    payload = await json_body(request, svc)
    conversation = payload.get("conversation_id")
    if conversation is not None:
        conversation = check_conversation_id(conversation, "conversation_id")
    messages = _transcript(payload.get("messages"))
    memory = await svc.tenants.open(tenant, claim=True)  # in a cluster: once this node holds it
    began = time.perf_counter()
    try:
        result = await memory.append(messages, conversation, "ingest")
        formed = 0 if background else await memory.form()
    except InvalidInputError as exc:
        raise ApiError(400, str(exc), param="messages") from exc
    except MemoryCoreError as exc:
        svc.metrics.memory_failures.labels(stage="ingest").inc()
        raise ApiError(
            500,
            f"memory could not store the transcript: {exc}",
            type_="server_error",
            code="memory_error",
        ) from exc
    svc.metrics.ingested.inc(result.appended)
    svc.log.write(
        {
            "event": "ingest",
            "tenant": tenant,
            "conversation": result.conversation_id,
            "messages": len(messages),
            "appended": result.appended,
            "already_stored": result.already_stored,
            "superseded": result.superseded,
            "formed": formed,
            "formation": "queued" if background else "done",
            "ms": round((time.perf_counter() - began) * 1000, 1),
        }
    )
    if background:
        settings = svc.config.memory
        pending = memory.form_soon(0.0, settings.formation_max_defer_ms / 1000)
        if pending is not None:
            svc.watch_formation(memory.name, pending)
    return json_response(
        IngestResponse(
            conversation_id=result.conversation_id,
            appended=result.appended,
            already_stored=result.already_stored,
            superseded=result.superseded,
            fragments_formed=formed,
            formation="queued" if background else "done",
        )
    )


def _form_param(request: web.Request) -> bool:
    """``form=wait`` (default: formed before answering) or ``form=background``."""
    value = request.query.get("form", "wait")
    if value not in ("wait", "background"):
        raise ApiError(400, "query parameter 'form' must be 'wait' or 'background'", param="form")
    return value == "background"


async def search(request: web.Request) -> web.Response:
    """What retrieval would return for ``q`` (``k`` fragments, ``budget`` tokens)."""
    svc = request.app[SERVICES]
    tenant = tenant_of(request.headers, svc.config.auth)
    query = question_param(request)
    k = int_param(request, "k", 8, 1, 200)
    budget = int_param(request, "budget", 600, 1, 100_000)
    as_of = snapshot_param(request, "as_of")
    strategy = request.query.get("strategy", "bm25")
    if strategy not in STRATEGIES:
        names = ", ".join(STRATEGIES.names())
        raise ApiError(
            400, f"query parameter 'strategy' must be one of: {names}", param="strategy"
        )
    began = time.perf_counter()
    try:
        recall = await svc.tenants.get(tenant).recall(
            query, limit=k, budget_tokens=budget, exclude_hashes=(), strategy=strategy, as_of=as_of
        )
    except SnapshotNotFoundError as exc:
        raise _no_snapshot(exc) from exc
    except RetrievalSkipped as exc:
        raise _busy(exc) from exc
    except MemoryCoreError as exc:
        raise ApiError(
            500, f"search failed: {exc}", type_="server_error", code="memory_error"
        ) from exc
    return json_response(search_response(query, recall, time.perf_counter() - began))


def _busy(exc: RetrievalSkipped) -> ApiError:
    """A lookup shed (see :class:`RetrievalSkipped`): 503, to be tried again."""
    return ApiError(
        503,
        f"memory is busy, try again: {exc}",
        type_="server_error",
        code="memory_busy",
        headers={"Retry-After": "1"},
    )


def search_response(query: str, recall: Recall, seconds: float) -> SearchResponse:
    """What ``GET /memory/search`` answers (and ``areamem search --json`` prints). A hit's
    text is cut as a receipt's fragments are (:data:`RECEIPT_TEXT_CHARS`): a hit of a
    pasted megabyte must not make the answer megabytes per hit."""
    return SearchResponse(
        query=query,
        terms=query_terms(query),
        hits=[
            SearchHit(
                fragment_id=h.fragment_id,
                score=h.score,
                text=h.text[:RECEIPT_TEXT_CHARS],
                role=h.role,
                speaker=h.speaker,
                conversation_id=h.conversation_id,
                conversation_label=h.conversation_label or h.conversation_id,
                ts=h.ts,
                ext_id=h.ext_id,
                kind=h.kind,
            )
            for h in recall.hits
        ],
        context=recall.context.text,
        citations=[ReceiptCitation(number=n, fragment_id=f) for n, f in recall.context.citations],
        tokens=recall.context.tokens,
        elapsed_ms=round(seconds * 1000, 3),
    )


async def stats(request: web.Request) -> web.Response:
    """Sizes of the caller's memory: log, fragments (live), queue, failures, names."""
    svc = request.app[SERVICES]
    tenant = tenant_of(request.headers, svc.config.auth)
    try:
        counts = await svc.tenants.get(tenant).stats()
    except MemoryCoreError as exc:
        raise ApiError(
            500, f"stats failed: {exc}", type_="server_error", code="memory_error"
        ) from exc
    body = StatsResponse(tenant=tenant, **dict(counts))
    return json_response(body)


async def area(request: web.Request) -> web.Response:
    """Why an area would be chosen for ``q``: foci, region, score terms, timings."""
    svc = request.app[SERVICES]
    tenant = tenant_of(request.headers, svc.config.auth)
    query = question_param(request)
    k = int_param(request, "k", 8, 1, 200)
    as_of = snapshot_param(request, "as_of")
    memory = svc.tenants.get(tenant)
    try:
        report = await memory.explain_area(query, limit=k, as_of=as_of)
    except SnapshotNotFoundError as exc:
        raise _no_snapshot(exc) from exc
    except RetrievalSkipped as exc:
        raise _busy(exc) from exc
    except MemoryCoreError as exc:
        raise ApiError(
            500, f"area retrieval failed: {exc}", type_="server_error", code="memory_error"
        ) from exc
    return json_response(AreaResponse(query=query, **dict(report)))


_UNNAMED_SPEAKERS = frozenset({"user", "assistant", "system", "developer", "tool", "function"})
"""What the entity of a speaker that gave no name is called: its chat role. Such an entity
holds the speaker's relations ("user has_sister Marta"), but it is a side of the chat, not
something memory learned of: it is not listed."""


async def entities(request: web.Request) -> web.Response:
    """Entities with aliases (and their languages) and the contexts they appear in; the
    unnamed speakers ("user", "assistant") are left out."""
    memory, limit = _inspected(request)
    name = request.query.get("name") or None
    found = await _inspect(memory.entities(limit=limit + len(_UNNAMED_SPEAKERS), name=name))
    named = [e for e in found if not (e.is_speaker and e.name.casefold() in _UNNAMED_SPEAKERS)]
    return json_response(EntitiesResponse(entities=named[:limit]))


async def contexts(request: web.Request) -> web.Response:
    """Contexts with the conversations they span and sample fragments."""
    memory, limit = _inspected(request)
    found = await _inspect(memory.contexts(limit=limit))
    return json_response(ContextsResponse(contexts=found))


async def relations(request: web.Request) -> web.Response:
    """Relations with their source fragments and mutation records (``entity`` filters)."""
    memory, limit = _inspected(request)
    entity = request.query.get("entity") or None
    found = await _inspect(memory.relations(entity=entity, limit=limit))
    return json_response(RelationsResponse(entity=entity, relations=found))


def _no_snapshot(exc: SnapshotNotFoundError) -> ApiError:
    return ApiError(404, f"{exc} for this tenant", code="snapshot_not_found", param="as_of")


def _inspected(request: web.Request) -> tuple[TenantMemory, int]:
    svc = request.app[SERVICES]
    tenant = tenant_of(request.headers, svc.config.auth)
    return svc.tenants.get(tenant), int_param(request, "limit", 100, 1, 10_000)


async def _inspect(query: Awaitable[list[V]]) -> list[V]:
    try:
        return await query
    except MemoryCoreError as exc:
        raise ApiError(
            500, f"inspection failed: {exc}", type_="server_error", code="memory_error"
        ) from exc


async def receipt(request: web.Request) -> web.Response:
    svc = request.app[SERVICES]
    tenant = tenant_of(request.headers, svc.config.auth)
    receipt_id = request.match_info["receipt_id"]
    try:
        body = await svc.tenants.get(tenant).receipt(receipt_id)
    except MemoryCoreError as exc:
        raise ApiError(500, str(exc), type_="server_error", code="memory_error") from exc
    if body is None:
        raise ApiError(404, f"No receipt '{receipt_id}' for this tenant.", code="receipt_not_found")
    try:
        return json_response(Receipt.model_validate(body))
    except ValidationError as exc:  # stored by an edited or damaged file
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ApiError(
            500,
            f"receipt {receipt_id} is stored in another shape: {where}: {first['msg']}",
            type_="server_error",
            code="memory_error",
        ) from None


def _transcript(value: Any) -> list[LogMessage]:
    if not isinstance(value, list) or not value:
        raise ApiError(400, "'messages' must be a non-empty array", param="messages")
    if len(value) > _MAX_INGEST_MESSAGES:
        raise ApiError(400, f"at most {_MAX_INGEST_MESSAGES} messages per call", param="messages")
    now = time.time()
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise ApiError(400, f"messages[{i}] must be an object", param=f"messages[{i}]")
        message = {k: v for k, v in item.items() if k not in ("timestamp", "id")}
        ts = _timestamp(item.get("timestamp"), i, now)
        out.append(LogMessage(message, ts, _message_id(item.get("id"), i)))
    return out


def _message_id(value: Any, index: int) -> str | None:
    """The transcript's own id of a message (a LoCoMo ``dia_id``, a row number): a string
    or a whole number, kept as text; anything else would be stored as Python's repr."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    where = f"messages[{index}].id"
    raise ApiError(400, f"{where} must be a string or a whole number", param=where)


def _timestamp(value: Any, index: int, default: float) -> float:
    """Epoch seconds from a number or an ISO 8601 string (naive means UTC), finite and
    within memory's range (see :func:`memory_core.check_timestamp`)."""
    where = f"messages[{index}].timestamp"
    if value is None:
        return default
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return check_timestamp(value, where)
        except InvalidInputError as exc:
            raise ApiError(400, str(exc), param=where) from exc
    if isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.UTC)
            return _timestamp(parsed.timestamp(), index, default)
    raise ApiError(
        400,
        f"messages[{index}].timestamp must be epoch seconds or an ISO 8601 "
        f"date-time, got {value!r}",
        param=f"messages[{index}].timestamp",
    )


