"""``POST /v1/chat/completions``: decide, recall, inject, forward, relay, then ingest.

The request path does what the answer needs: validate, route, ask the policy, recall
memory (bounded by ``retrieval_timeout_ms``, fail-open), forward and relay, and log the
exchange durably *before the answer completes*: a non-streamed answer is sent once its
exchange is in the tenant's log, a streamed one's ``data: [DONE]`` (or its end, when the
upstream sends none) once it is. So every answer a client received whole is stored, even
if the process is killed the next instant (bounded by ``memory.ingest_wait_ms``: past it
the answer goes out and the write goes on). On a cluster node still claiming the tenant,
the exchange is on disk once it is in the node's spool (:mod:`.ingest`). Forming memory
and writing the request log happen afterwards, in background tasks; the receipt is
queued on the tenant's writer thread before the loop can read anything more from any
client (before a stream's end; a whole answer's right after it is handed to the
transport, so its building does not hold the interpreter while the answer is written),
so a client that reads it afterwards finds it.

Every request is counted and logged once, whatever its outcome: an error answered to
the client, an internal failure (500), or a client that went away (outcome
``client_disconnected``, status 499, the upstream call cancelled). What is stored of an
exchange: the request's turns and the answer when the answer was complete; only the
request's turns when the client left before the answer's end (an answer nobody saw is
not memory); nothing for a request answered with an error.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web
from pydantic import ValidationError

from memory_core import (
    LogMessage,
    MemoryCoreError,
    Recall,
    chain_hashes,
    conversation_id,
)
from memory_core.retrieval.strategies import STRATEGIES
from memory_core.views import AreaSummary
from policies import Decision

from ..api.json_io import snapshot_id
from ..api.schemas import (
    Receipt,
    ReceiptArea,
    ReceiptCitation,
    ReceiptCoverage,
    ReceiptDecision,
    ReceiptFocus,
    ReceiptFragment,
    ReceiptStatement,
)
from ..doors.base import CHAT, CHAT_ANSWERS, Answers, Door, DoorIO, Parsed
from ..doors.chat_wire import ChatRequest, own_completion, own_completion_events
from ..errors import (
    ApiError,
    MemoryMoving,
    ProxyError,
    RetrievalSkipped,
    UpstreamStreamError,
    error_body,
    internal_error_body,
)
from ..http.body import check_conversation_id, read_body
from ..http.client_io import AiohttpIO, ClientIO
from ..http.headers import Forward, forward_of, merged
from ..services import SERVICES, Services
from ..tenants.memory import LastTurn, TenantMemory, tenant_of
from ..upstream.router import Upstream
from . import commands, ingest
from .turn_context import turn_context

__all__ = ["answer_chat", "chat_completions"]

T = TypeVar("T")
RECEIPT_HEADER = "X-Memory-Receipt"
AS_OF_HEADER = "X-Memory-As-Of"
"""A request header naming a snapshot: memory is read as of it (the current state is
neither read nor changed; the exchange is still stored)."""
CLIENT_CLOSED = 499
"""The status logged for a request whose client went away before its answer ended."""
_DONE_LINE = re.compile(rb"(?:^|\n)data: ?\[DONE\]")
"""The stream's end marker as an SSE line; ``[DONE]`` inside a JSON string (a model
asked to say it) can never start a line, a JSON string holding no raw newline."""
_DONE_REACH = 16
_LARGE_BODY = 256 * 1024
_LARGE_HISTORY = 1_000
"""Bodies (bytes) and histories (messages) past which parsing, splicing and hashing run
on a worker thread (see :func:`_off_loop`)."""
_TIMER_HEADROOM = 0.05
"""The least share of the retrieval budget kept for the timer firing late (one loop
iteration) and the way back; more when the loop is measurably late."""
_RECEIPT_TEXT_CHARS = 2_000
"""A receipt keeps this much of each fragment's text (its length beside it): a receipt
is written per request, a stored message may be megabytes."""


@dataclass
class _Exchange:
    """What one request did, accumulated for the log line, receipt and ingestion."""

    started: float
    api: str = "chat"
    answers: Answers = CHAT_ANSWERS
    tenant: str | None = None
    chat: ChatRequest | None = None
    conversation: str | None = None
    explicit_conversation: str | None = None
    decision: Decision | None = None
    recall: Recall | None = None
    receipt_id: str | None = None
    retrieval: str = "bm25"
    as_of: int | None = None
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
    stored: asyncio.Future[int] | None = None
    parsed: bool = False
    command: str | None = None
    unremembered: frozenset[int] = frozenset()
    """Indices of ``chat.messages`` said while memory was off: never stored."""

    def mark(self, stage: str, since: float) -> float:
        now = time.perf_counter()
        self.stages[stage] = round((now - since) * 1000, 3)
        return now


def route_of(door: Door) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The aiohttp route of ``door`` (for chat: the requests the front hands over, see
    :mod:`proxy.http.front`)."""

    async def answer(request: web.Request) -> web.StreamResponse:
        client = AiohttpIO(request)
        await answer_chat(request.app[SERVICES], client, door)
        assert client.response is not None
        return client.response

    return answer


chat_completions = route_of(CHAT)


async def answer_chat(svc: Services, client: ClientIO, door: Door = CHAT) -> None:
    """Answer one request of ``door``'s format through ``client``; never raises but for
    cancellation (the client went away: its server cancels the task)."""
    ex = _Exchange(started=time.perf_counter(), api=door.name)
    client = door.io(client)
    try:
        await _handle(client, svc, ex, door)
    except ApiError as exc:
        ex.status, ex.error, ex.outcome = exc.status, exc.message, exc.code or exc.type
        svc.metrics.errors.labels(kind=exc.code or exc.type).inc()
        await client.send(exc.status, exc.body(), exc.headers)
    except asyncio.CancelledError:
        _client_left(ex, "client closed the connection before the answer ended")
        svc.metrics.errors.labels(kind="client_disconnected").inc()
        _finish(svc, ex)
        raise
    except Exception as exc:  # a defect: still answered as an error, counted and logged
        ex.status, ex.outcome = 500, "internal_error"
        ex.error = f"{type(exc).__name__}: {exc}"
        svc.metrics.errors.labels(kind="internal").inc()
        await client.send(500, internal_error_body(exc), {})
    _finish(svc, ex)


def _finish(svc: Services, ex: _Exchange) -> None:
    """Count the request and hand it to the post-answer work (log line, formation)."""
    stream = str(bool(ex.chat and ex.chat.stream)).lower()
    svc.metrics.requests.labels(api=ex.api, stream=stream, status=str(ex.status)).inc()
    took = time.perf_counter() - ex.started
    svc.metrics.request_seconds.labels(api=ex.api, stream=stream).observe(took)
    svc.spawn(_after(svc, ex))


def _client_left(ex: _Exchange, why: str) -> None:
    ex.status, ex.outcome, ex.error = CLIENT_CLOSED, "client_disconnected", why
    ex.answer, ex.reply, ex.sse = None, None, None


@dataclass(frozen=True)
class _Outbound:
    """What goes to the upstream: the route, the body (and its exact bytes), the client's
    headers and query the policy forwards, and our own headers for the client."""

    upstream: Upstream
    body: dict[str, Any]
    raw: bytes
    headers: dict[str, str]
    memory: TenantMemory | None
    forward: Forward


async def _handle(client: ClientIO, svc: Services, ex: _Exchange, door: Door) -> None:
    ex.tenant = tenant_of(client.headers, svc.config.auth)
    server = svc.config.server
    raw = await read_body(client, limit=server.max_body_bytes, timeout_s=server.body_timeout_s)
    large = len(raw) > _LARGE_BODY
    parsed = await _off_loop(large, door.parse, raw)
    ex.chat = parsed.chat
    ex.explicit_conversation = _conversation_header(client, svc.config.memory.conversation_header)
    ex.conversation = conversation_id(parsed.chat.messages, ex.explicit_conversation)
    turns = await _off_loop(large, _turns, parsed.chat.messages)
    if turns.command is not None:
        await _command(client, svc, ex, parsed, turns.command)
        return
    if turns.drop:
        parsed, raw = await _off_loop(large, door.without, parsed, turns.drop)
    ex.unremembered = turns.unremembered
    chat = ex.chat = parsed.chat
    upstream = svc.router.route(chat.model)
    if upstream is None:
        raise ApiError(
            404,
            f"The model '{chat.model}' does not exist: no upstream in the config matches it.",
            code="model_not_found",
            param="model",
        )
    t = ex.mark("parse_ms", ex.started)
    memory = await _memory(svc, ex)
    if memory is not None:
        memory.note_request()
    decision = _decide(client, svc, ex, chat, memory)
    ex.as_of = await _as_of(client, memory)
    t = ex.mark("policy_ms", t)
    text = None
    if decision.retrieve and memory is not None:
        await _recall(svc, ex, memory)
        ex.mark("retrieval_ms", t)
        if ex.recall and ex.recall.context.text:
            text = ex.recall.context.text
    if memory is not None:
        memory.note_turn(ex.conversation, _last_turn(ex, decision))
    role = svc.config.memory.role
    route = await _off_loop(large, door.route, parsed, upstream, text, role, raw)
    ex.answers = route.answers
    if route.bridged and isinstance(client, DoorIO):  # a Protocol check costs 0.1 ms
        client.bridge(parsed)
    headers = {RECEIPT_HEADER: ex.receipt_id} if ex.receipt_id else {}
    conversation_header = svc.config.memory.conversation_header
    forward = forward_of(client.headers.items(), client.query_string, conversation_header)
    out = _Outbound(route.upstream, dict(route.body), route.raw, headers, memory, forward)
    if chat.stream:
        await _relay(client, svc, ex, out)
    else:
        await _forward(client, svc, ex, out)


_SWITCHED_OFF = "memory is off in this conversation (/memory off; /memory on resumes it)"


@dataclass(frozen=True)
class _Turns:
    """What a history holds of in-chat commands: the command to answer now (its latest
    user message), the chat messages to leave out (earlier commands and their answers),
    and, of those kept, the ones said while memory was off (by their new indices)."""

    command: commands.Command | None
    drop: frozenset[int]
    unremembered: frozenset[int]


def _turns(messages: Sequence[Mapping[str, Any]]) -> _Turns:
    command = commands.latest_command(messages)
    if command is not None:
        return _Turns(command, frozenset(), frozenset())
    drop = commands.command_turns(messages)
    off = commands.off_turns(messages)
    if drop:
        kept = [i for i in range(len(messages)) if i not in drop]
        off = frozenset(new for new, old in enumerate(kept) if old in off)
    return _Turns(None, drop, off)


def _remembered(ex: _Exchange) -> list[dict[str, Any]]:
    """The request's messages that are stored: those not said while memory was off."""
    assert ex.chat is not None
    if not ex.unremembered:
        return ex.chat.messages
    return [m for i, m in enumerate(ex.chat.messages) if i not in ex.unremembered]


def _last_turn(ex: _Exchange, decision: Decision) -> LastTurn:
    return LastTurn(
        at=time.time(),
        retrieve=decision.retrieve,
        reason=decision.reason,
        rule=decision.rule,
        receipt_id=ex.receipt_id,
        memory_error=ex.memory_error,
    )


async def _command(
    client: ClientIO, svc: Services, ex: _Exchange, parsed: Parsed, command: commands.Command
) -> None:
    """Answer an in-chat command (see :mod:`.commands`): by the proxy, in the door's
    format, nothing forwarded, nothing stored."""
    assert ex.conversation is not None
    ex.command = command.verb if command.known else "unknown"
    ex.ingest = False
    memory = await _memory(svc, ex)
    context = commands.Context(memory, ex.conversation, ex.memory_error)
    text = await commands.run(command, context)
    svc.metrics.commands.labels(command=ex.command).inc()
    ex.answer = {"role": "assistant", "content": text}
    if isinstance(client, DoorIO):
        client.bridge(parsed)
    chat = parsed.chat
    if not chat.stream:
        await client.send(200, own_completion(chat.model, text), {})
        return
    await client.start(200, {})
    for chunk in own_completion_events(chat.model, text):
        await client.write(chunk)
    await client.end()


def _decide(
    client: ClientIO,
    svc: Services,
    ex: _Exchange,
    chat: ChatRequest,
    memory: TenantMemory | None,
) -> Decision:
    """Ask the policy whether to consult memory; also settles ingestion and identity."""
    assert ex.tenant is not None
    assert ex.conversation is not None
    header = client.headers.get("X-Memory")
    switched_off = memory is not None and memory.memory_is_off(ex.conversation)
    ex.ingest = (
        svc.config.memory.ingest
        and (header or "").strip().lower() != "off"
        and not switched_off
    )
    context = turn_context(chat, tenant=ex.tenant, conversation=ex.conversation, header=header)
    decision = svc.engine.decide(context, memory.store.names if memory else None)
    if switched_off:
        decision = dataclasses.replace(
            decision, retrieve=False, reason=_SWITCHED_OFF, rule=None
        )
    ex.decision = decision
    svc.metrics.decisions.labels(
        retrieve=str(decision.retrieve).lower(), rule=decision.rule or "none"
    ).inc()
    return decision


async def _as_of(client: ClientIO, memory: TenantMemory | None) -> int | None:
    """The snapshot ``X-Memory-As-Of`` names (memory is read as it was then), or None. A
    value that is not a snapshot id, or names no snapshot of the tenant, is a 400: the
    client asked for a state of memory that does not exist."""
    value = client.headers.get(AS_OF_HEADER, "").strip()
    if not value:
        return None
    wanted = snapshot_id(value, f"header {AS_OF_HEADER}", AS_OF_HEADER)
    if memory is not None and await memory.snapshot(wanted) is None:
        raise ApiError(
            400,
            f"header {AS_OF_HEADER}: no snapshot {wanted} for this tenant",
            code="snapshot_not_found",
            param=AS_OF_HEADER,
        )
    return wanted


def _conversation_header(client: ClientIO, name: str) -> str | None:
    """The client's explicit conversation id: printable, at most 200 characters."""
    value = client.headers.get(name, "").strip()
    return check_conversation_id(value, f"header {name}") if value else None


async def _memory(svc: Services, ex: _Exchange) -> TenantMemory | None:
    """The tenant's memory, or None (and counted) when its store cannot be opened."""
    assert ex.tenant is not None
    try:
        return await svc.tenants.open(ex.tenant)
    except MemoryMoving as exc:  # a cluster node taking the tenant over: chat goes on
        ex.memory_error = exc.message
        svc.metrics.memory_failures.labels(stage="moving").inc()
        return None
    except MemoryCoreError as exc:
        ex.memory_error = f"open: {exc}"
        svc.metrics.memory_failures.labels(stage="open").inc()
        return None


async def _recall(svc: Services, ex: _Exchange, memory: TenantMemory) -> None:
    """Recall within the time budget; any failure leaves the request without memory."""
    assert ex.chat is not None and ex.decision is not None and ex.conversation is not None
    chat, decision = ex.chat, ex.decision
    began = time.perf_counter()
    settings = svc.config.memory
    lag_ms = svc.lag.recent_ms
    headroom_ms = max(lag_ms, settings.retrieval_timeout_ms * _TIMER_HEADROOM)
    budget_s = (settings.retrieval_timeout_ms - headroom_ms) / 1000  # timers fire late
    deadline = time.monotonic() + budget_s
    ex.retrieval = settings.retrieval

    async def lookup() -> Recall:
        remembered = _remembered(ex)
        excluded = await _off_loop(
            len(remembered) > _LARGE_HISTORY, chain_hashes, remembered, ex.conversation
        )
        return await memory.recall(
            chat.recent_user_text(settings.context_turns),
            limit=decision.max_fragments,
            budget_tokens=decision.budget_tokens,
            exclude_hashes=excluded,
            strategy=settings.retrieval,
            deadline=deadline,
            model=chat.model,
            as_of=ex.as_of,
        )

    shed = False
    try:
        _check_lag(lag_ms, settings.retrieval_timeout_ms)
        ex.recall = await asyncio.wait_for(lookup(), timeout=budget_s)
    except RetrievalSkipped as exc:
        ex.memory_error = f"retrieval skipped: {exc}"
        svc.metrics.memory_failures.labels(stage="retrieval_skipped").inc()
        shed = True  # not looked up: the lookups' latency leaves it out
    except TimeoutError:
        ex.memory_error = f"retrieval exceeded {svc.config.memory.retrieval_timeout_ms:g} ms"
        svc.metrics.memory_failures.labels(stage="retrieval_timeout").inc()
    except MemoryCoreError as exc:
        ex.memory_error = f"retrieval failed: {exc}"
        svc.metrics.memory_failures.labels(stage="retrieval").inc()
    except Exception as exc:  # memory never turns a chat into a 500, whatever is stored
        ex.memory_error = f"retrieval failed: {type(exc).__name__}: {exc}"
        svc.metrics.memory_failures.labels(stage="retrieval").inc()
    if not shed:
        svc.metrics.retrieval_seconds.observe(time.perf_counter() - began)
    ex.receipt_id = "rcpt_" + uuid.uuid4().hex[:24]


async def _off_loop(large: bool, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, on a worker thread when ``large``: parsing, hashing or splicing
    megabytes would otherwise stop the event loop (every other request) for its whole
    duration; on a thread the loop still gets its turn every few milliseconds."""
    if not large:
        return fn(*args)
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def _check_lag(lag_ms: float, budget_ms: float) -> None:
    """Shed memory lookups while the event loop runs late by half the budget or more: a
    lookup started then would overrun its budget by the lateness alone. Below that, the
    lookup's own timer is shortened by the lateness (at least by ``_TIMER_HEADROOM``),
    so that fired late it still ends the wait within the budget."""
    if lag_ms >= budget_ms / 2:
        raise RetrievalSkipped(f"the proxy is overloaded (event loop {lag_ms:.0f} ms late)")


async def _forward(client: ClientIO, svc: Services, ex: _Exchange, out: _Outbound) -> None:
    began = time.perf_counter()
    try:
        reply = await out.upstream.complete(out.body, out.raw, out.forward)
    finally:
        _upstream_took(svc, ex, "false", began)
    ex.status, ex.reply = reply.status, reply.body
    await _store_once(svc, ex)
    content_type, _, charset = reply.content_type.partition(";")
    await client.send(
        reply.status,
        reply.body,
        merged(reply.headers, out.headers),
        content_type=content_type.strip() or "application/json",
        charset=charset.partition("=")[2].strip() or None,
    )
    # after the answer is written, yet before the loop runs anything else (``send`` does
    # not suspend): a receipt read the client sends afterwards still finds it queued
    _queue_receipt(svc, ex, out.memory)


def _upstream_took(svc: Services, ex: _Exchange, stream: str, began: float) -> None:
    took = time.perf_counter() - began
    svc.metrics.upstream_seconds.labels(api=ex.api, stream=stream).observe(took)
    ex.mark("upstream_ms", began)


def _parse_reply(ex: _Exchange) -> None:
    """Answer and usage from the relayed reply (once: before the exchange is stored
    when it is, else after the answer, for the log line)."""
    if ex.parsed:
        return
    ex.parsed = True
    if ex.sse is not None:
        ex.answer, ex.usage = ex.answers.stream(ex.sse)
        return
    if ex.reply is None:
        return
    ex.answer, ex.usage = ex.answers.whole(ex.reply)


async def _relay(client: ClientIO, svc: Services, ex: _Exchange, out: _Outbound) -> None:
    began = time.perf_counter()
    try:
        stream = await out.upstream.stream(out.body, out.raw, out.forward)
    except BaseException:
        _upstream_took(svc, ex, "true", began)  # refused or failed before its first byte
        raise
    ex.mark("upstream_first_byte_ms", began)
    headers = merged(
        stream.headers,
        {
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            **out.headers,
        },
    )
    chunks: list[bytes] = []
    send = _Sender(client, svc.config.server.write_timeout_s)
    try:
        await client.start(200, headers)
        async for chunk in stream.chunks():
            chunks.append(chunk)
            await _relay_chunk(svc, ex, send, chunks, chunk)
    except UpstreamStreamError as exc:
        ex.outcome, ex.error = exc.code, str(exc)
        svc.metrics.errors.labels(kind=exc.code).inc()
        chunks.clear()
        await send.quietly(
            b"data: " + error_body(str(exc), type_="upstream_error", code=exc.code) + b"\n\n",
        )
    except ConnectionError as exc:
        why = str(exc) if isinstance(exc, _ClientTooSlow) else "client closed the connection"
        _client_left(ex, f"{why} mid-stream")
        svc.metrics.errors.labels(kind="client_disconnected").inc()
        chunks.clear()
    finally:
        await stream.close()
        _upstream_took(svc, ex, "true", began)
    if ex.outcome == "ok":
        ex.sse = chunks
        await _store_once(svc, ex)
    _queue_receipt(svc, ex, out.memory)
    await send.quietly(None)


class _ClientTooSlow(ConnectionError):
    """The client read nothing of the stream for ``server.write_timeout_s``."""


class _Sender:
    """Writes to the client, each write bounded in time: a client that stops reading
    would otherwise hold the handler and the upstream call (back-pressured) until the
    upstream's own timeout. Past the bound the connection is dropped."""

    def __init__(self, client: ClientIO, limit_s: float):
        self._client, self._limit_s = client, limit_s

    async def __call__(self, data: bytes | None) -> None:
        """Write ``data`` (``None``: end the response)."""
        write = self._client.end() if data is None else self._client.write(data)
        try:
            await asyncio.wait_for(write, self._limit_s)
        except TimeoutError as exc:
            self._client.abort()
            raise _ClientTooSlow(f"the client read nothing for {self._limit_s:g} s") from exc

    async def quietly(self, data: bytes | None) -> None:
        """As a call, unless the client is gone (or too slow): then nothing."""
        try:
            await self(data)
        except ConnectionError:
            return


async def _relay_chunk(
    svc: Services,
    ex: _Exchange,
    send: _Sender,
    chunks: list[bytes],
    chunk: bytes,
) -> None:
    """Write ``chunk`` (the last of ``chunks``); if it ends the stream (a ``data: [DONE]``
    line, possibly begun in the chunk before), the exchange is logged between the marker
    and the blank line that lets a client act on it."""
    cut = _done_end(chunks[-2] if len(chunks) > 1 else None, chunk)
    if ex.stored is None and cut is not None:
        await send(chunk[:cut])
        ex.sse = chunks
        await _store_once(svc, ex)
        chunk = chunk[cut:]
    if chunk:
        await send(chunk)


def _done_end(previous: bytes | None, chunk: bytes) -> int | None:
    """Where in ``chunk`` the end-marker line ends (0 when it ended in ``previous``), or
    None without one. ``previous`` lends its last bytes, as the line may be split."""
    lent = b"" if previous is None else previous[-_DONE_REACH:]
    window = lent + chunk
    found = _DONE_LINE.search(window) if previous is None else _done_after_start(window)
    return None if found is None else max(0, found.end() - len(lent))


def _done_after_start(window: bytes) -> re.Match[bytes] | None:
    """The marker after a newline only: the window's start is mid-line."""
    found = _DONE_LINE.search(window)
    if found is not None and found.start() == 0 and not window.startswith(b"\n"):
        return _DONE_LINE.search(window, 1)  # from 1 on, ``^`` cannot match
    return found


async def _store_once(svc: Services, ex: _Exchange) -> None:
    if ex.stored is not None:
        return
    if not ex.ingest:  # nothing to store: the answer is parsed after it, for the log
        ex.stored = asyncio.get_running_loop().create_future()
        ex.stored.set_result(0)
        return
    _parse_reply(ex)
    await _store_exchange(svc, ex)


async def _store_exchange(svc: Services, ex: _Exchange) -> None:
    """Log the exchange durably before its answer completes (bounded by
    ``memory.ingest_wait_ms``; the write goes on past it and is awaited after)."""
    began = time.perf_counter()
    durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    ex.stored = asyncio.ensure_future(_ingest(svc, ex, _history(ex), durable))
    ex.stored.add_done_callback(lambda _: ingest.resolve(durable))
    try:
        await asyncio.wait_for(asyncio.shield(durable), svc.config.memory.ingest_wait_ms / 1000)
    except TimeoutError:
        svc.metrics.memory_failures.labels(stage="ingest_late").inc()
    ex.mark("store_ms", began)


def _queue_receipt(svc: Services, ex: _Exchange, memory: TenantMemory | None) -> None:
    """Queue the receipt on the tenant's writer thread (ordered before later reads).

    The loop only takes a snapshot of the exchange (a shallow copy, its stage timings
    copied); the receipt is built, validated against its contract and serialised on the
    writer thread (50-80 us that the event loop does not pay). A receipt that does not
    fit its contract is counted and not stored: memory never breaks chat.
    """
    if ex.receipt_id is None or memory is None:
        return
    snapshot = copy.copy(ex)
    snapshot.stages = dict(ex.stages)
    created_at = time.time()
    saving = memory.save_receipt(
        ex.receipt_id, lambda: _receipt(snapshot, created_at).model_dump(mode="json")
    )
    svc.spawn(_save_receipt(svc, ex, saving))


async def _save_receipt(svc: Services, ex: _Exchange, saving: asyncio.Future[None]) -> None:
    try:
        await saving
    except ValidationError as exc:
        svc.metrics.memory_failures.labels(stage="receipt").inc()
        ex.memory_error = f"receipt not built: {exc.error_count()} invalid field(s)"
    except MemoryCoreError as exc:
        svc.metrics.memory_failures.labels(stage="receipt").inc()
        ex.memory_error = f"receipt not saved: {exc}"


def _receipt(ex: _Exchange, created_at: float) -> Receipt:
    """The receipt of a snapshot of ``ex``, validated as built (on the writer thread)."""
    assert ex.receipt_id is not None and ex.tenant is not None
    assert ex.conversation is not None and ex.decision is not None and ex.chat is not None
    recall = ex.recall
    area = recall.area if recall else None
    return Receipt(
        id=ex.receipt_id,
        created_at=created_at,
        tenant=ex.tenant,
        model=ex.chat.model,
        conversation_id=ex.conversation,
        decision=_decision(ex.decision),
        memory_error=ex.memory_error,
        area=ReceiptArea(
            kind=STRATEGIES.get(ex.retrieval).label,
            fragments=_fragments(recall) if recall else [],
        ),
        injected_text=recall.context.text if recall else "",
        tokens=recall.context.tokens if recall else 0,
        timings_ms=dict(ex.stages),
        upstream_status=ex.status,
        graph_version=area.get("graph_version") if area else None,
        graph_area=AreaSummary.model_validate(area) if area else None,
        statements=[
            ReceiptStatement(
                kind=s.kind,
                text=s.text,
                relation_ids=list(s.relation_ids),
                fragment_ids=list(s.fragment_ids),
            )
            for s in recall.context.statements
        ]
        if recall
        else [],
        citations=[ReceiptCitation(number=n, fragment_id=f) for n, f in recall.context.citations]
        if recall
        else [],
        coverage=_coverage(recall) if recall else None,
        tokenizer=recall.tokenizer if recall else "",
        as_of=ex.as_of,
    )


def _coverage(recall: Recall) -> ReceiptCoverage:
    coverage = recall.context.coverage
    return ReceiptCoverage(
        foci=[
            ReceiptFocus(focus=v.focus, covered=v.covered, where=v.where) for v in coverage.verdicts
        ],
        nothing_found=coverage.nothing_found,
    )


def _fragments(recall: Recall) -> list[ReceiptFragment]:
    cited = recall.context.cited
    return [
        ReceiptFragment(
            id=h.fragment_id,
            score=round(h.score, 4),
            conversation_id=h.conversation_id,
            ts=h.ts,
            role=h.role,
            speaker=h.speaker,
            text=h.text[:_RECEIPT_TEXT_CHARS],
            text_chars=len(h.text),
            cited=h.fragment_id in cited,
        )
        for h in recall.hits
    ]


def _decision(decision: Decision) -> ReceiptDecision:
    return ReceiptDecision(
        retrieve=decision.retrieve,
        reason=decision.reason,
        rule=decision.rule,
        budget_tokens=decision.budget_tokens,
        max_fragments=decision.max_fragments,
    )


async def _after(svc: Services, ex: _Exchange) -> None:
    """After the answer: store what was not stored yet, write the log line."""
    ex.stages["total_ms"] = round((time.perf_counter() - ex.started) * 1000, 3)
    _parse_reply(ex)
    if ex.stored is None:  # an error, or a client that left: never a complete answer
        ex.stored = asyncio.ensure_future(_ingest(svc, ex, _history(ex)))
    ingested = await ex.stored
    svc.log.write(_record(ex, ingested))


def _history(ex: _Exchange) -> list[LogMessage]:
    """What to store of the exchange, decided now (see the module docstring): the
    request's turns, and the answer when it is complete; nothing after an error."""
    chat = ex.chat
    stored = ex.status < 400 or ex.status == CLIENT_CLOSED
    if chat is None or ex.tenant is None or not ex.ingest or not stored:
        return []
    now = time.time()
    history = [LogMessage(m, now) for m in _remembered(ex)]
    if ex.answer is not None and ex.outcome == "ok":
        history.append(LogMessage(ex.answer, now))
    return history


async def _ingest(
    svc: Services,
    ex: _Exchange,
    history: list[LogMessage],
    durable: asyncio.Future[None] | None = None,
) -> int:
    """Append ``history`` to the tenant's log and schedule formation; a failure is
    counted and logged, never raised. ``durable`` is resolved once the exchange is on
    disk (in a cluster's spool while its tenant is claimed: before the append)."""
    if not history or ex.tenant is None:
        return 0
    try:
        return await ingest.store(svc, ex.tenant, ex.conversation, history, durable)
    except (MemoryCoreError, ProxyError) as exc:  # a claim that failed, in a cluster
        svc.metrics.memory_failures.labels(stage="ingest").inc()
        ex.memory_error = f"ingestion failed: {exc}"
        svc.log.write({"event": "ingest_failed", "tenant": ex.tenant, "error": str(exc)})
        return 0


def _record(ex: _Exchange, ingested: int) -> dict[str, Any]:
    chat, decision, recall = ex.chat, ex.decision, ex.recall
    return {
        "event": "chat",
        "api": ex.api,
        "command": ex.command,
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
