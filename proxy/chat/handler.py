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
not memory); nothing for a request answered with an error. A streamed answer is relayed
whole however long it runs, but kept for storing only up to :data:`MAX_KEPT_STREAM_BYTES`
(what a non-streamed answer may be at most): past it only the request's turns are stored,
and the log line and receipt say why (``memory_error``).
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from memory_core import MemoryCoreError, conversation_id

from ..api.json_io import snapshot_id
from ..doors.base import CHAT, CHAT_ANSWERS, Answers, Door, DoorIO, Parsed
from ..doors.chat_wire import ChatRequest, is_completion, own_completion, own_completion_events
from ..errors import (
    ApiError,
    UpstreamError,
    UpstreamStreamError,
    error_body,
    internal_error_body,
)
from ..http import sse
from ..http.body import check_conversation_id, read_body
from ..http.client_io import AiohttpIO, ClientIO
from ..http.headers import Forward, forward_of, merged
from ..http.same_site import refuse_cross_site
from ..services import SERVICES, Services
from ..tenants.memory import TenantMemory
from ..tenants.pool import tenant_of
from ..upstream.base import Upstream
from ..upstream.fast import MAX_REPLY_BYTES
from . import commands, ingest
from .receipt import receipt_of
from .turn import AS_OF_HEADER, MEMORY_HEADER, MemoryTurn, off_the_loop

__all__ = [
    "AS_OF_HEADER",
    "MAX_KEPT_STREAM_BYTES",
    "RECEIPT_HEADER",
    "answer_chat",
    "chat_completions",
]

MAX_KEPT_STREAM_BYTES = MAX_REPLY_BYTES
"""The most of a streamed answer kept to be stored: an upstream streaming without end
would otherwise fill the proxy's memory with chunks (the relay itself keeps nothing)."""

RECEIPT_HEADER = "X-Memory-Receipt"
CLIENT_CLOSED = 499
"""The status logged for a request whose client went away before its answer ended."""
_LARGE_BODY = 256 * 1024
"""Bodies (bytes) past which parsing and splicing run on a worker thread (see
:func:`.turn.off_the_loop`)."""
_LIFTS_LEADING_SYSTEM = frozenset({"anthropic"})
"""Providers litellm sends the leading system messages of as the model's system prompt
(later ones stay in place, as user text)."""


@dataclass
class _Exchange:
    """What one request did, accumulated for the log line, receipt and ingestion."""

    started: float
    api: str = "chat"
    answers: Answers = CHAT_ANSWERS
    tenant: str | None = None
    chat: ChatRequest | None = None
    turn: MemoryTurn | None = None
    """What memory did for the request (once its body is read)."""
    receipt_id: str | None = None
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
    dropped: str | None = None
    """Why the answer is not stored although it was relayed whole (too long to keep)."""

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
    bridged: bool = False


async def _handle(client: ClientIO, svc: Services, ex: _Exchange, door: Door) -> None:
    refuse_cross_site(client.headers)  # a page of another site: no upstream call, no memory
    ex.tenant = tenant_of(client.headers, svc.config.auth)
    server = svc.config.server
    raw = await read_body(client, limit=server.max_body_bytes, timeout_s=server.body_timeout_s)
    large = len(raw) > _LARGE_BODY
    parsed = await off_the_loop(large, door.parse, raw)
    ex.chat = parsed.chat
    explicit = _conversation_header(client, svc.config.memory.conversation_header)
    turn = ex.turn = MemoryTurn(
        svc.turns,
        ex.tenant,
        parsed.chat,
        conversation_id(parsed.chat.messages, explicit),
        explicit,
        client.headers.get(MEMORY_HEADER),
    )
    if parsed.previous is not None:  # only its new turns: the rest is stored with that answer
        await turn.continue_from(parsed.previous)
    turns = await off_the_loop(large, _turns, parsed.chat.messages)
    if turns.command is not None:
        await _command(client, svc, ex, turn, parsed, turns.command)
        return
    if turns.drop:
        parsed, raw = await off_the_loop(large, door.without, parsed, turns.drop)
    chat = ex.chat = turn.chat = parsed.chat
    turn.unremembered = turns.unremembered
    upstream = svc.router.route(chat.model)
    if upstream is None:
        raise ApiError(
            404,
            f"The model '{chat.model}' does not exist: no upstream in the config matches it.",
            code="model_not_found",
            param="model",
        )
    t = ex.mark("parse_ms", ex.started)
    memory = await turn.open()
    if memory is not None:
        memory.note_request()
    decision = turn.decide()
    await turn.read_as_of(client.headers.get(AS_OF_HEADER), _snapshot_header)
    t = ex.mark("policy_ms", t)
    if decision.retrieve and memory is not None:
        await turn.recall_memory()
        ex.mark("retrieval_ms", t)
        ex.receipt_id = "rcpt_" + uuid.uuid4().hex[:24]
    turn.note(ex.receipt_id)
    role = memory_role(svc.config.memory.role, upstream.config.provider, chat)
    route = await off_the_loop(large, door.route, parsed, upstream, turn.block, role, raw)
    ex.answers = route.answers
    if route.bridged and isinstance(client, DoorIO):  # a Protocol check costs 0.1 ms
        client.bridge(parsed)
    headers = {RECEIPT_HEADER: ex.receipt_id} if ex.receipt_id else {}
    conversation_header = svc.config.memory.conversation_header
    forward = forward_of(client.headers.items(), client.query_string, conversation_header)
    out = _Outbound(
        route.upstream, dict(route.body), route.raw, headers, memory, forward, route.bridged
    )
    if chat.stream:
        await _relay(client, svc, ex, out)
    else:
        await _forward(client, svc, ex, out)


@dataclass(frozen=True)
class _Turns:
    """What a history holds of in-chat commands: the command to answer now (its latest
    user message), the chat messages to leave out (earlier commands and their answers),
    and, of those kept, the ones said while memory was off (by their new indices)."""

    command: commands.Command | None
    drop: frozenset[int]
    unremembered: frozenset[int]


def memory_role(configured: str, provider: str, chat: ChatRequest) -> str:
    """The memory message's role: the configured one, except a system message that would
    directly follow the leading system messages (a conversation's first user turn) on a
    provider that lifts those into its system prompt: there it would join the system
    prompt of that turn only, so the next turn's prompt would differ from its start and
    miss the prompt cache. It goes as a user message instead (litellm joins it to the
    user turn, as the Messages door places it)."""
    before = chat.messages[: chat.last_user_index]
    leading = all(m.get("role") in ("system", "developer") for m in before)
    if configured == "system" and provider in _LIFTS_LEADING_SYSTEM and leading:
        return "user"
    return configured


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


async def _command(
    client: ClientIO,
    svc: Services,
    ex: _Exchange,
    turn: MemoryTurn,
    parsed: Parsed,
    command: commands.Command,
) -> None:
    """Answer an in-chat command (see :mod:`.commands`): by the proxy, in the door's
    format, nothing forwarded, nothing stored."""
    ex.command = command.verb if command.known else "unknown"
    turn.ingest = False
    memory = await turn.open()
    context = commands.Context(memory, turn.conversation, turn.memory_error)
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


def _snapshot_header(value: str) -> int:
    return snapshot_id(value, f"header {AS_OF_HEADER}", AS_OF_HEADER)


def _conversation_header(client: ClientIO, name: str) -> str | None:
    """The client's explicit conversation id: printable, at most 200 characters."""
    value = client.headers.get(name, "").strip()
    return check_conversation_id(value, f"header {name}") if value else None


async def _forward(client: ClientIO, svc: Services, ex: _Exchange, out: _Outbound) -> None:
    began = time.perf_counter()
    try:
        reply = await out.upstream.complete(out.body, out.raw, out.forward)
    finally:
        _upstream_took(svc, ex, "false", began)
    if out.bridged and reply.status < 400 and not is_completion(reply.body):
        raise UpstreamError(  # nothing a door could present: not an empty answer either
            502,
            f"the upstream answered {reply.status} with a body that is not a chat completion",
            code="upstream_error",
        )
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
    if ex.dropped is not None:
        return
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
    kept = 0
    send = _Sender(client, svc.config.server.write_timeout_s)
    started = False
    try:
        await client.start(200, headers)
        started = True
        async for chunk in stream.chunks():
            kept += len(chunk)
            if kept > MAX_KEPT_STREAM_BYTES and ex.dropped is None:
                _drop_answer(svc, ex, kept)
            if ex.dropped is not None:
                del chunks[:-1]  # the chunk before: a [DONE] marker may straddle the two
            chunks.append(chunk)
            await _relay_chunk(svc, ex, send, chunks, chunk)
    except UpstreamStreamError as exc:
        ex.outcome, ex.error = exc.code, str(exc)
        svc.metrics.errors.labels(kind=exc.code).inc()
        chunks.clear()
        await send.quietly(sse.event(error_body(str(exc), type_="upstream_error", code=exc.code)))
    except ConnectionError as exc:
        why = str(exc) if isinstance(exc, _ClientTooSlow) else "client closed the connection"
        _client_left(ex, f"{why} mid-stream")
        svc.metrics.errors.labels(kind="client_disconnected").inc()
        chunks.clear()
    except Exception as exc:  # a defect once the answer has begun: no 500 can follow
        if not started:
            raise
        ex.outcome, ex.error = "internal_error", f"{type(exc).__name__}: {exc}"
        svc.metrics.errors.labels(kind="internal").inc()
        chunks.clear()
        await send.quietly(sse.event(internal_error_body(exc)))
    finally:
        await stream.close()
        _upstream_took(svc, ex, "true", began)
    if ex.outcome == "ok":
        ex.sse = chunks
        await _store_once(svc, ex)
    _queue_receipt(svc, ex, out.memory)
    await send.quietly(None)


def _drop_answer(svc: Services, ex: _Exchange, kept: int) -> None:
    """Stop keeping a streamed answer past :data:`MAX_KEPT_STREAM_BYTES`: the relay goes
    on, and only the request's turns are stored."""
    ex.dropped = f"answer not stored: the stream passed {MAX_KEPT_STREAM_BYTES:,} bytes ({kept:,})"
    svc.metrics.memory_failures.labels(stage="answer_too_long").inc()
    if ex.turn is not None and ex.turn.memory_error is None:
        ex.turn.memory_error = ex.dropped


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
    cut = sse.done_end(chunks[-2] if len(chunks) > 1 else None, chunk)
    if ex.stored is None and cut is not None:
        await send(chunk[:cut])
        ex.sse = chunks
        await _store_once(svc, ex)
        chunk = chunk[cut:]
    if chunk:
        await send(chunk)


async def _store_once(svc: Services, ex: _Exchange) -> None:
    if ex.stored is not None:
        return
    if ex.turn is None or not ex.turn.ingest:  # nothing to store: parsed after, for the log
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
    ex.stored = asyncio.ensure_future(_ingest(ex, durable))
    ex.stored.add_done_callback(lambda _: ingest.resolve(durable))
    try:
        await asyncio.wait_for(asyncio.shield(durable), svc.config.memory.ingest_wait_ms / 1000)
    except TimeoutError:
        svc.metrics.memory_failures.labels(stage="ingest_late").inc()
    ex.mark("store_ms", began)


def _queue_receipt(svc: Services, ex: _Exchange, memory: TenantMemory | None) -> None:
    """Queue the receipt on the tenant's writer thread (ordered before later reads).

    The loop only takes a snapshot of the turn (a shallow copy); the receipt is built,
    validated against its contract and serialised on the writer thread (50-80 us that
    the event loop does not pay). A receipt that does not fit its contract is counted and
    not stored: memory never breaks chat.
    """
    receipt_id, turn = ex.receipt_id, ex.turn
    if receipt_id is None or memory is None or turn is None:
        return
    snapshot, stages, status = copy.copy(turn), dict(ex.stages), ex.status
    created_at = time.time()
    saving = memory.save_receipt(
        receipt_id,
        lambda: receipt_of(
            snapshot, receipt_id, created_at, upstream_status=status, timings_ms=stages
        ).model_dump(mode="json"),
    )
    svc.spawn(_save_receipt(svc, turn, saving))


async def _save_receipt(svc: Services, turn: MemoryTurn, saving: asyncio.Future[None]) -> None:
    try:
        await saving
    except ValidationError as exc:
        svc.metrics.memory_failures.labels(stage="receipt").inc()
        turn.memory_error = f"receipt not built: {exc.error_count()} invalid field(s)"
    except MemoryCoreError as exc:
        svc.metrics.memory_failures.labels(stage="receipt").inc()
        turn.memory_error = f"receipt not saved: {exc}"


async def _after(svc: Services, ex: _Exchange) -> None:
    """After the answer: store what was not stored yet, write the log line."""
    ex.stages["total_ms"] = round((time.perf_counter() - ex.started) * 1000, 3)
    _parse_reply(ex)
    if ex.stored is None:  # an error, or a client that left: never a complete answer
        ex.stored = asyncio.ensure_future(_ingest(ex))
    ingested = await ex.stored
    svc.log.write(_record(ex, ingested))


async def _ingest(ex: _Exchange, durable: asyncio.Future[None] | None = None) -> int:
    """Store what the exchange keeps, decided now (see the module docstring): the
    request's turns, and the answer when it is complete; nothing after an error (see
    :func:`.ingest.store_turn`)."""
    turn = ex.turn
    if turn is None or not (ex.status < 400 or ex.status == CLIENT_CLOSED):
        return 0
    answer = ex.answer if ex.outcome == "ok" else None
    return await ingest.store_turn(turn, turn.history(answer), durable, _answer_id(ex))


def _answer_id(ex: _Exchange) -> str | None:
    """The id the upstream gave a whole answer, for an API whose later requests may name
    it (see :class:`~proxy.doors.base.Answers`); None otherwise."""
    if ex.outcome != "ok" or ex.status >= 400:
        return None
    if ex.sse is not None:
        return ex.answers.stream_id(ex.sse)
    return ex.answers.whole_id(ex.reply) if ex.reply is not None else None


def _record(ex: _Exchange, ingested: int) -> dict[str, Any]:
    chat, turn = ex.chat, ex.turn
    recall = turn.recall if turn else None
    summary = turn.summary() if turn else {"tenant": ex.tenant}
    return {
        "event": "chat",
        "api": ex.api,
        "command": ex.command,
        "tenant": ex.tenant,
        "model": chat.model if chat else None,
        "stream": chat.stream if chat else None,
        "conversation": turn.conversation if turn else None,
        "decision": summary.get("decision"),
        "reason": summary.get("reason"),
        "rule": summary.get("rule"),
        "fragments_injected": summary.get("fragments_injected", 0),
        "fragments_cited": summary.get("fragments_cited", 0),
        "memory_tokens": summary.get("memory_tokens", 0),
        "graph_version": recall.area.get("graph_version") if recall and recall.area else None,
        "usage": ex.usage,
        "stages_ms": ex.stages,
        "status": ex.status,
        "outcome": ex.outcome,
        "error": ex.error,
        "memory_error": summary.get("memory_error"),
        "receipt": ex.receipt_id,
        "ingested": ingested,
    }
