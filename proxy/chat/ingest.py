"""Storing an answered exchange in its tenant's log, and scheduling its formation: the
memory turn's last step (:mod:`.turn`), for the chat handler and the LiteLLM hook alike.

On a single node the append is the durable step. On a cluster node that does not hold
the tenant yet, the append waits for the claim (seconds), so the exchange is first
written to the node's spool (:mod:`proxy.cluster.spool`) and removed from it once appended; entries
left by a node that died or stopped meanwhile are replayed when it starts again, and
entries left by a failed claim are retried by the node itself, with a backoff
(:mod:`proxy.cluster.replays`), or replayed after the tenant's next successful append,
whichever comes first.

An exchange whose answer has an id a later request may name (the Responses API's
``previous_response_id``) links that id with the turns, in the append's transaction
(:meth:`TenantMemory.append`); a spooled entry keeps the id with its turns, so a replay
(by the retries, or after a restart) links it as the append would have.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from memory_core import InvalidInputError, LogMessage, MemoryCoreError

from ..cluster.spool import SpoolEntry, SpoolError
from ..errors import ProxyError
from .turn import MemoryTurn, TurnServices

__all__ = ["replay_spool", "resolve", "store", "store_turn"]


async def store_turn(
    turn: MemoryTurn,
    history: Sequence[LogMessage],
    durable: asyncio.Future[None] | None = None,
    response_id: str | None = None,
) -> int:
    """Append ``history`` (what :meth:`MemoryTurn.history` keeps of the exchange) to the
    turn's tenant and schedule its formation; a failure is counted, logged and kept on
    the turn (:attr:`MemoryTurn.memory_error`), never raised. ``durable`` is resolved
    once the exchange is on disk (in a cluster's spool while its tenant is claimed:
    before the append); ``response_id`` is linked with the turns (module docstring).
    Returns the rows added."""
    if not history:
        return 0
    services = turn.services
    conversation = turn.conversation
    try:
        return await store(services, turn.tenant, conversation, history, durable, response_id)
    except (MemoryCoreError, ProxyError) as exc:  # a claim that failed, in a cluster
        turn.memory_error = f"ingestion failed: {exc}"
        services.failed("ingest")
        services.log({"event": "ingest_failed", "tenant": turn.tenant, "error": str(exc)})
        return 0


async def store(
    svc: TurnServices,
    tenant: str,
    conversation: str | None,
    history: Sequence[LogMessage],
    durable: asyncio.Future[None] | None = None,
    response_id: str | None = None,
) -> int:
    """Append ``history`` (raises :class:`MemoryCoreError` or :class:`ProxyError`); in a
    cluster, spooled first while the tenant is being claimed, and ``durable`` resolved
    then (the answer need not wait for the claim). Returns the rows added."""
    placement, spool = svc.placement, svc.spool
    entry: SpoolEntry | None = None
    if placement is not None and spool is not None and not placement.ready(tenant):
        try:
            entry = await asyncio.to_thread(
                spool.put, tenant, conversation, history, response_id
            )
        except SpoolError as exc:  # the exchange still waits for the claim, in memory
            svc.log({"event": "spool_failed", "tenant": tenant, "error": str(exc)})
        else:
            if durable is not None:
                resolve(durable)
    try:
        appended = await _append(svc, tenant, conversation, history, response_id)
    except BaseException:
        if entry is not None and spool is not None:
            spool.put_back(entry)  # replayed later: retried, or at the next success
            svc.spool_waits()
        raise
    if spool is not None:
        if entry is not None:
            await asyncio.to_thread(spool.remove, entry)
        if spool.waiting(tenant):
            svc.spawn(replay_spool(svc, tenant))
    return appended


def resolve(durable: asyncio.Future[None]) -> None:
    """Say the exchange is durable (once: the first of the spool and the append)."""
    if not durable.done():
        durable.set_result(None)


async def replay_spool(svc: TurnServices, tenant: str) -> int:
    """Append the tenant's spooled exchanges no other task is handling, oldest first;
    stops at the first failure (the rest stay spooled, and the node's retries are told).
    Returns the rows added."""
    spool = svc.spool
    if spool is None:
        return 0
    added = 0
    for entry in await asyncio.to_thread(spool.pending, tenant):
        if not spool.take(entry):
            continue
        try:
            rows = await _append(
                svc, tenant, entry.conversation, entry.messages, entry.response_id
            )
        except InvalidInputError as exc:  # refused now, refused at every replay
            spool.set_aside(entry, str(exc))
            continue
        except (MemoryCoreError, ProxyError) as exc:
            spool.put_back(entry)
            svc.log({"event": "spool_replay_failed", "tenant": tenant, "error": str(exc)})
            break
        except BaseException:
            spool.put_back(entry)
            raise
        await asyncio.to_thread(spool.remove, entry)
        added += rows
        svc.log({"event": "spool_replayed", "tenant": tenant, "ingested": rows})
    if spool.waiting(tenant):  # a failure, or an entry that could not be removed
        svc.spool_waits()
    return added


async def _append(
    svc: TurnServices,
    tenant: str,
    conversation: str | None,
    history: Sequence[LogMessage],
    response_id: str | None = None,
) -> int:
    memory = await svc.tenants.open(tenant, claim=True)  # in a cluster: once held
    # the conversation as the whole history names it: the stored turns may lack its
    # first user message (a command), which would otherwise name another one
    result = await memory.append(history, conversation, svc.source, response_id)
    svc.ingested(result.appended)
    settings = svc.settings
    pending = memory.form_soon(
        settings.formation_grace_ms / 1000, settings.formation_max_defer_ms / 1000
    )
    if pending is not None:
        svc.watch_formation(memory.name, pending)
    return result.appended
