"""``POST /v1/chat/completions``: decide, recall, inject, forward, relay, then ingest.

The request path does only what the answer needs: validate, route, ask the policy,
recall memory (bounded by ``retrieval_timeout_ms``, fail-open), forward and relay.
Logging the exchange, forming memory from it and writing the request log happen after
the answer, in background tasks; the receipt is queued on the tenant's writer thread
before the response completes, so a client that reads it afterwards finds it.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from memory_core import (
    LogMessage,
    MemoryCoreError,
    Recall,
    chain_hashes,
    conversation_id,
    message_text,
)
from policies import Decision, TurnContext

from .errors import ApiError, UpstreamStreamError, error_body
from .services import SERVICES, Services
from .tenants import TenantMemory, tenant_of
from .upstream import Upstream
from .wire import ChatRequest, answer_from_json, answer_from_sse, inject, parse_chat

__all__ = ["chat_completions"]

RECEIPT_HEADER = "X-Memory-Receipt"


@dataclass
class _Exchange:
    """What one request did, accumulated for the log line, receipt and ingestion."""

    started: float
    tenant: str | None = None
    chat: ChatRequest | None = None
    conversation: str | None = None
    explicit_conversation: str | None = None
    decision: Decision | None = None
    recall: Recall | None = None
    receipt_id: str | None = None
    retrieval: str = "bm25"
    memory_error: str | None = None
    ingest: bool = True
    status: int = 200
    error: str | None = None
    outcome: str = "ok"
    answer: dict[str, Any] | None = None
    reply: bytes | None = None
    sse: list[bytes] | None = None
    usage: dict[str, Any] | None = None
    stages: dict[str, float] = field(default_factory=dict)

    def mark(self, stage: str, since: float) -> float:
        now = time.perf_counter()
        self.stages[stage] = round((now - since) * 1000, 3)
        return now


async def chat_completions(request: web.Request) -> web.StreamResponse:
    svc = request.app[SERVICES]
    ex = _Exchange(started=time.perf_counter())
    try:
        response = await _handle(request, svc, ex)
    except ApiError as exc:
        ex.status, ex.error, ex.outcome = exc.status, exc.message, exc.code or exc.type
        svc.metrics.errors.labels(kind=exc.code or exc.type).inc()
        response = web.Response(status=exc.status, body=exc.body(), content_type="application/json")
    stream = str(bool(ex.chat and ex.chat.stream)).lower()
    svc.metrics.requests.labels(stream=stream, status=str(ex.status)).inc()
    svc.metrics.request_seconds.labels(stream=stream).observe(time.perf_counter() - ex.started)
    svc.spawn(_after(svc, ex))
    return response


@dataclass(frozen=True)
class _Outbound:
    """What goes to the upstream: the route, the body (and its exact bytes), our headers."""

    upstream: Upstream
    body: dict[str, Any]
    raw: bytes
    headers: dict[str, str]
    memory: TenantMemory | None


async def _handle(request: web.Request, svc: Services, ex: _Exchange) -> web.StreamResponse:
    ex.tenant = tenant_of(request, svc.config.auth)
    raw = await _read_body(request, svc.config.server.max_body_bytes)
    chat = ex.chat = parse_chat(raw)
    upstream = svc.router.route(chat.model)
    if upstream is None:
        raise ApiError(
            404,
            f"The model '{chat.model}' does not exist: no upstream in the config matches it.",
            code="model_not_found",
            param="model",
        )
    t = ex.mark("parse_ms", ex.started)
    memory = _memory(svc, ex)
    if memory is not None:
        memory.note_request()
    decision = _decide(request, svc, ex, chat, memory)
    t = ex.mark("policy_ms", t)
    body = chat.body
    if decision.retrieve and memory is not None:
        await _recall(svc, ex, memory)
        ex.mark("retrieval_ms", t)
        if ex.recall and ex.recall.context.text:
            messages = inject(chat, ex.recall.context.text, svc.config.memory.role)
            body = {**chat.body, "messages": messages}
            raw = json.dumps(body, ensure_ascii=False).encode()
    headers = {RECEIPT_HEADER: ex.receipt_id} if ex.receipt_id else {}
    out = _Outbound(upstream, body, raw, headers, memory)
    if chat.stream:
        return await _relay(request, svc, ex, out)
    return await _forward(svc, ex, out)


def _decide(
    request: web.Request,
    svc: Services,
    ex: _Exchange,
    chat: ChatRequest,
    memory: TenantMemory | None,
) -> Decision:
    """Ask the policy whether to consult memory; also settles ingestion and identity."""
    assert ex.tenant is not None
    header = request.headers.get("X-Memory")
    ex.ingest = svc.config.memory.ingest and (header or "").strip().lower() != "off"
    ex.explicit_conversation = request.headers.get(svc.config.memory.conversation_header) or None
    ex.conversation = conversation_id(chat.messages, ex.explicit_conversation)
    context = TurnContext(
        tenant=ex.tenant,
        model=chat.model,
        conversation_id=ex.conversation,
        user_turns=chat.user_turns,
        latest_user_text=chat.latest_user_text,
        header=header,
        now=time.time(),
        recent_user_texts=_recent_user_texts(chat),
    )
    decision = ex.decision = svc.engine.decide(context, memory.store.names if memory else None)
    svc.metrics.decisions.labels(
        retrieve=str(decision.retrieve).lower(), rule=decision.rule or "none"
    ).inc()
    return decision


def _recent_user_texts(chat: ChatRequest, count: int = 3) -> tuple[str, ...]:
    """The user turns before the latest one (most recent last), for topic-shift rules."""
    earlier = [m for m in chat.messages[: chat.last_user_index] if m.get("role") == "user"]
    return tuple(message_text(m.get("content")) for m in earlier[-count:])


def _memory(svc: Services, ex: _Exchange) -> TenantMemory | None:
    """The tenant's memory, or None (and counted) when its store cannot be opened."""
    assert ex.tenant is not None
    try:
        return svc.tenants.get(ex.tenant)
    except MemoryCoreError as exc:
        ex.memory_error = f"open: {exc}"
        svc.metrics.memory_failures.labels(stage="open").inc()
        return None


async def _recall(svc: Services, ex: _Exchange, memory: TenantMemory) -> None:
    """Recall within the time budget; any failure leaves the request without memory."""
    assert ex.chat is not None and ex.decision is not None and ex.conversation is not None
    chat, decision = ex.chat, ex.decision
    began = time.perf_counter()
    ex.retrieval = svc.config.memory.retrieval
    try:
        ex.recall = await asyncio.wait_for(
            memory.recall(
                chat.recent_user_text(svc.config.memory.context_turns),
                limit=decision.max_fragments,
                budget_tokens=decision.budget_tokens,
                exclude_hashes=chain_hashes(chat.messages, ex.conversation),
                area=svc.config.memory.retrieval == "area",
            ),
            timeout=svc.config.memory.retrieval_timeout_ms / 1000,
        )
    except TimeoutError:
        ex.memory_error = f"retrieval exceeded {svc.config.memory.retrieval_timeout_ms:g} ms"
        svc.metrics.memory_failures.labels(stage="retrieval_timeout").inc()
    except MemoryCoreError as exc:
        ex.memory_error = f"retrieval failed: {exc}"
        svc.metrics.memory_failures.labels(stage="retrieval").inc()
    svc.metrics.retrieval_seconds.observe(time.perf_counter() - began)
    ex.receipt_id = "rcpt_" + uuid.uuid4().hex[:24]


async def _forward(svc: Services, ex: _Exchange, out: _Outbound) -> web.Response:
    began = time.perf_counter()
    try:
        reply = await out.upstream.complete(out.body, out.raw)
    finally:
        svc.metrics.upstream_seconds.labels(stream="false").observe(time.perf_counter() - began)
        ex.mark("upstream_ms", began)
    ex.status, ex.reply = reply.status, reply.body
    _queue_receipt(svc, ex, out.memory)
    content_type, _, charset = reply.content_type.partition(";")
    return web.Response(
        status=reply.status,
        body=reply.body,
        headers=out.headers,
        content_type=content_type.strip() or "application/json",
        charset=charset.partition("=")[2].strip() or None,
    )


async def _read_body(request: web.Request, limit: int) -> bytes:
    """The request body, refused with 413 past ``limit`` bytes (checked before reading)."""
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(request.content_length, limit)
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise _too_large(None, limit) from exc


def _too_large(size: int | None, limit: int) -> ApiError:
    got = f" ({size} bytes)" if size is not None else ""
    return ApiError(
        413,
        f"Request body too large{got}: the limit is {limit} bytes (server.max_body_bytes).",
        code="request_too_large",
    )


def _parse_reply(ex: _Exchange) -> None:
    """Answer and usage from the relayed reply, off the request path."""
    if ex.sse is not None:
        ex.answer = answer_from_sse(ex.sse)
        return
    if ex.reply is None:
        return
    ex.answer, ex.usage = answer_from_json(ex.reply)


async def _relay(
    request: web.Request, svc: Services, ex: _Exchange, out: _Outbound
) -> web.StreamResponse:
    began = time.perf_counter()
    stream = await out.upstream.stream(out.body, out.raw)
    ex.mark("upstream_first_byte_ms", began)
    response = web.StreamResponse(
        status=200,
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            **out.headers,
        },
    )
    chunks: list[bytes] = []
    try:
        await response.prepare(request)
        async for chunk in stream.chunks():
            chunks.append(chunk)
            await response.write(chunk)
    except UpstreamStreamError as exc:
        ex.outcome, ex.error = exc.code, str(exc)
        svc.metrics.errors.labels(kind=exc.code).inc()
        chunks.clear()
        await _write_quietly(
            response,
            b"data: " + error_body(str(exc), type_="upstream_error", code=exc.code) + b"\n\n",
        )
    except ConnectionError:
        ex.outcome, ex.error = "client_disconnected", "client closed the connection mid-stream"
        svc.metrics.errors.labels(kind="client_disconnected").inc()
        chunks.clear()
    finally:
        await stream.close()
        svc.metrics.upstream_seconds.labels(stream="true").observe(time.perf_counter() - began)
        ex.mark("upstream_ms", began)
    ex.sse = chunks
    _queue_receipt(svc, ex, out.memory)
    await _write_quietly(response, None)
    return response


async def _write_quietly(response: web.StreamResponse, data: bytes | None) -> None:
    """Write (or end with ``None``) unless the client is already gone."""
    try:
        if data is None:
            await response.write_eof()
        else:
            await response.write(data)
    except ConnectionError:
        return


def _queue_receipt(svc: Services, ex: _Exchange, memory: TenantMemory | None) -> None:
    """Queue the receipt on the tenant's writer thread (ordered before later reads)."""
    if ex.receipt_id is None or memory is None:
        return
    svc.spawn(_save_receipt(svc, ex, memory.save_receipt(_receipt(ex))))


async def _save_receipt(svc: Services, ex: _Exchange, saving: asyncio.Future[None]) -> None:
    try:
        await saving
    except MemoryCoreError as exc:
        svc.metrics.memory_failures.labels(stage="receipt").inc()
        ex.memory_error = f"receipt not saved: {exc}"


def _receipt(ex: _Exchange) -> dict[str, Any]:
    assert ex.decision is not None and ex.chat is not None
    recall = ex.recall
    return {
        "id": ex.receipt_id,
        "created_at": time.time(),
        "tenant": ex.tenant,
        "model": ex.chat.model,
        "conversation_id": ex.conversation,
        "decision": _decision(ex.decision),
        "memory_error": ex.memory_error,
        "area": {
            "kind": "fts5-bm25 fragments" if ex.retrieval == "bm25" else "area (graph + bm25)",
            "fragments": [
                {
                    "id": h.fragment_id,
                    "score": round(h.score, 4),
                    "conversation_id": h.conversation_id,
                    "ts": h.ts,
                    "role": h.role,
                    "speaker": h.speaker,
                    "text": h.text,
                    "cited": h.fragment_id in recall.context.cited,
                }
                for h in recall.hits
            ]
            if recall
            else [],
        },
        "injected_text": recall.context.text if recall else "",
        "tokens": recall.context.tokens if recall else 0,
        "timings_ms": dict(ex.stages),
        "upstream_status": ex.status,
        "graph_version": recall.area.get("graph_version") if recall and recall.area else None,
        "graph_area": dict(recall.area) if recall and recall.area else None,
    }


def _decision(decision: Decision) -> dict[str, Any]:
    return {
        "retrieve": decision.retrieve,
        "reason": decision.reason,
        "rule": decision.rule,
        "budget_tokens": decision.budget_tokens,
        "max_fragments": decision.max_fragments,
    }


async def _after(svc: Services, ex: _Exchange) -> None:
    """After the answer: parse the reply, ingest, write the log line."""
    _parse_reply(ex)
    ex.stages["total_ms"] = round((time.perf_counter() - ex.started) * 1000, 3)
    ingested = await _ingest(svc, ex)
    svc.log.write(_record(ex, ingested))


async def _ingest(svc: Services, ex: _Exchange) -> int:
    """Append the request's new turns and the answer to the log; schedule formation."""
    chat = ex.chat
    if chat is None or ex.tenant is None or not ex.ingest or ex.status >= 400:
        return 0
    now = time.time()
    history = [LogMessage(m, now) for m in chat.messages]
    if ex.answer is not None and ex.outcome == "ok":
        history.append(LogMessage(ex.answer, now))
    try:
        memory = svc.tenants.get(ex.tenant)
        result = await memory.append(history, ex.explicit_conversation, "proxy")
        svc.metrics.ingested.inc(result.appended)
        settings = svc.config.memory
        pending = memory.form_soon(
            settings.formation_grace_ms / 1000, settings.formation_max_defer_ms / 1000
        )
    except MemoryCoreError as exc:
        svc.metrics.memory_failures.labels(stage="ingest").inc()
        ex.memory_error = f"ingestion failed: {exc}"
        return 0
    if pending is not None:
        svc.spawn(_formed(svc, memory, pending))
    return result.appended


async def _formed(svc: Services, memory: TenantMemory, pending: asyncio.Future[int]) -> None:
    """Wait for a scheduled formation pass; a failure is logged and counted (the rows stay
    queued and are retried by the next pass)."""
    try:
        await pending
    except Exception as exc:  # a background pass: nobody else would ever see it
        svc.metrics.memory_failures.labels(stage="formation").inc()
        error = str(exc) if isinstance(exc, MemoryCoreError) else f"{type(exc).__name__}: {exc}"
        svc.log.write({"event": "formation_failed", "tenant": memory.name, "error": error})


def _record(ex: _Exchange, ingested: int) -> dict[str, Any]:
    chat, decision, recall = ex.chat, ex.decision, ex.recall
    return {
        "event": "chat",
        "tenant": ex.tenant,
        "model": chat.model if chat else None,
        "stream": chat.stream if chat else None,
        "conversation": ex.conversation,
        "decision": decision.retrieve if decision else None,
        "reason": decision.reason if decision else None,
        "rule": decision.rule if decision else None,
        "fragments_injected": len(recall.context.cited) if recall else 0,
        "memory_tokens": recall.context.tokens if recall else 0,
        "graph_version": recall.area.get("graph_version") if recall and recall.area else None,
        "usage": ex.usage,
        "stages_ms": ex.stages,
        "status": ex.status,
        "outcome": ex.outcome,
        "error": ex.error,
        "memory_error": ex.memory_error,
        "receipt": ex.receipt_id,
        "ingested": ingested,
    }
