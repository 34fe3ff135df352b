"""The memory turn: what memory does for one chat turn, whoever serves it.

Four steps, one code path for areamem's chat handler (every front door,
:mod:`.handler`) and for the LiteLLM hook (:mod:`proxy.litellm_hook`):

1. **decide** (:meth:`MemoryTurn.decide`): the trigger policy reads the turn
   (:func:`turn_context`) within the switches the user set: ``X-Memory: off`` stores
   nothing, and a conversation switched off with ``/memory off`` is neither read nor
   stored;
2. **recall** (:meth:`MemoryTurn.recall_memory`): within ``memory.retrieval_timeout_ms``
   less what the event loop runs late by (shed at once while it is half the budget late),
   as of a snapshot when ``X-Memory-As-Of`` names one (:meth:`MemoryTurn.read_as_of`);
   any failure leaves the turn without memory (memory never breaks chat);
3. **inject**: the block (:attr:`MemoryTurn.block`), which the caller places immediately
   before the latest user message (a door splices it into the request it forwards);
4. **ingest** (:meth:`MemoryTurn.history`, then :func:`.ingest.store_turn`): what was
   said with memory on, and the answer when it is whole, appended to the tenant's log
   and formed.

A request that continues an earlier answer by its id (the Responses API's
``previous_response_id``: it holds only the new turns) is put in that answer's
conversation first (:meth:`MemoryTurn.continue_from`): its turns are stored after the
ones stored with that answer, as if the client had resent the whole history, unless the
client names another conversation (the conversation header wins).

What differs between the callers is what they hand in (:class:`TurnServices`: where a
failure is counted, where the log goes, the source the log rows carry), never the steps.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from memory_core import (
    LogMessage,
    MemoryCoreError,
    Recall,
    chain_hashes,
    message_text,
    question_excerpt,
    restated_by,
)
from policies import Decision, PolicyEngine, TurnContext

from ..cluster.placement import Placement
from ..cluster.spool import Spool
from ..config import MemoryConfig
from ..doors.chat_wire import ChatRequest
from ..errors import ApiError, MemoryMoving, RetrievalSkipped
from ..http.lag import LoopLag
from ..tenants.memory import LastTurn, TenantMemory
from ..tenants.pool import Tenants

__all__ = [
    "AS_OF_HEADER",
    "MEMORY_HEADER",
    "MemoryTurn",
    "TurnServices",
    "off_the_loop",
    "turn_context",
]

T = TypeVar("T")
MEMORY_HEADER = "X-Memory"
"""A request header: ``off`` stores nothing of the exchange; the policy reads it too
(``force`` / ``off`` rules)."""
AS_OF_HEADER = "X-Memory-As-Of"
"""A request header naming a snapshot: memory is read as of it (the current state is
neither read nor changed; the exchange is still stored)."""
LARGE_HISTORY = 1_000
"""Histories (messages) past which hashing runs on a worker thread (see
:func:`off_the_loop`)."""
_TIMER_HEADROOM = 0.05
"""The least share of the retrieval budget kept for the timer firing late (one loop
iteration) and the way back; more when the loop is measurably late."""
_RECENT_TURNS = 3
_SWITCHED_OFF = "memory is off in this conversation (/memory off; /memory on resumes it)"


def _ignore(*_: object) -> None:
    return None


@dataclass(frozen=True)
class TurnServices:
    """What a memory turn uses, built once by its caller.

    ``failed`` counts a memory failure by stage (``open``, ``retrieval_timeout`` ...),
    ``decided`` counts a decision, ``looked_up`` times a lookup that ran, ``ingested``
    counts appended rows; ``log`` writes an event line; ``spawn`` keeps background work
    referenced until it ends and ``watch_formation`` reports a scheduled formation pass.
    ``source`` labels the log rows (``proxy``, ``litellm``). ``placement`` and ``spool``
    are a cluster node's (see :mod:`.ingest`); ``spool_waits`` is told when a spooled
    entry is given back to wait for a later replay (the node's retries,
    :mod:`proxy.cluster.replays`).
    """

    tenants: Tenants
    engine: PolicyEngine
    settings: MemoryConfig
    lag: LoopLag
    log: Callable[[dict[str, Any]], None]
    spawn: Callable[[Coroutine[Any, Any, Any]], None]
    watch_formation: Callable[[str, asyncio.Future[int]], None]
    source: str = "proxy"
    failed: Callable[[str], None] = _ignore
    decided: Callable[[Decision], None] = _ignore
    looked_up: Callable[[float], None] = _ignore
    ingested: Callable[[int], None] = _ignore
    placement: Placement | None = None
    spool: Spool | None = None
    spool_waits: Callable[[], None] = _ignore


@dataclass
class MemoryTurn:
    """One chat turn's memory, step by step (see the module docstring); what each step
    found stays on it for the receipt and the log line.

    ``unremembered``: indices of ``chat.messages`` said while memory was off (never
    stored, never searched for). ``earlier``: the stored messages of the conversation a
    request continues by an answer's id (:meth:`continue_from`), up to that answer.
    """

    services: TurnServices
    tenant: str
    chat: ChatRequest
    conversation: str
    explicit_conversation: str | None = None
    header: str | None = None
    unremembered: frozenset[int] = frozenset()
    earlier: tuple[Mapping[str, Any], ...] = ()
    memory: TenantMemory | None = None
    decision: Decision | None = None
    recall: Recall | None = None
    as_of: int | None = None
    ingest: bool = True
    memory_error: str | None = None
    shed: bool = field(default=False, repr=False)
    _opened: bool = field(default=False, repr=False)

    async def open(self) -> TenantMemory | None:
        """The tenant's memory, or None (and counted) when it cannot be opened now: a
        cluster node still claiming the tenant, or a store that fails to open. Opened
        once per turn: a later call returns what the first found."""
        if self._opened:
            return self.memory
        self._opened = True
        try:
            self.memory = await self.services.tenants.open(self.tenant)
        except MemoryMoving as exc:  # a cluster node taking the tenant over: chat goes on
            self._fail("moving", exc.message)
        except MemoryCoreError as exc:
            self._fail("open", f"open: {exc}")
        return self.memory

    async def continue_from(self, response_id: str) -> None:
        """Put the turn in the conversation of the answer ``response_id`` names, after
        the messages stored with it (:attr:`earlier`), when this tenant's memory linked
        that id and no explicit conversation names another one. Otherwise (an unknown,
        forged or another tenant's id; memory that cannot be read now) the turn stays a
        conversation of its own; the request is forwarded as sent either way."""
        memory = await self.open()
        if memory is None:
            return
        try:
            found = await memory.continuation(response_id)
        except MemoryCoreError as exc:
            self._fail("continuation", f"previous response not read: {exc}")
            return
        explicit = self.explicit_conversation
        if found is None or (explicit is not None and explicit != found.conversation):
            return
        self.conversation, self.earlier = found.conversation, found.messages

    def decide(self) -> Decision:
        """Ask the policy whether to consult memory; also settles whether the exchange
        is stored."""
        memory, settings = self.memory, self.services.settings
        switched_off = memory is not None and memory.memory_is_off(self.conversation)
        self.ingest = (
            settings.ingest and (self.header or "").strip().lower() != "off" and not switched_off
        )
        context = turn_context(
            self.chat,
            tenant=self.tenant,
            conversation=self.conversation,
            header=self.header,
            earlier=self.earlier,
        )
        decision = self.services.engine.decide(context, memory.store.names if memory else None)
        if switched_off:
            decision = dataclasses.replace(
                decision, retrieve=False, reason=_SWITCHED_OFF, rule=None
            )
        self.decision = decision
        self.services.decided(decision)
        return decision

    async def read_as_of(self, value: str | None, snapshot_id: Callable[[str], int]) -> None:
        """The snapshot ``value`` (``X-Memory-As-Of``) names, read by ``snapshot_id``:
        memory is then read as it was. Raises :class:`ApiError` (400) for a value that
        names no snapshot of the tenant: the client asked for a state of memory that
        does not exist."""
        value = (value or "").strip()
        if not value:
            return
        wanted = snapshot_id(value)
        if self.memory is not None and await self.memory.snapshot(wanted) is None:
            raise ApiError(
                400,
                f"header {AS_OF_HEADER}: no snapshot {wanted} for this tenant",
                code="snapshot_not_found",
                param=AS_OF_HEADER,
            )
        self.as_of = wanted

    async def recall_memory(self) -> None:
        """Recall within the time budget when the decision says so; any failure leaves
        the turn without memory (:attr:`memory_error` says why, counted by stage)."""
        memory, decision = self.memory, self.decision
        if memory is None or decision is None or not decision.retrieve:
            return
        settings = self.services.settings
        began = time.perf_counter()
        lag_ms = self.services.lag.recent_ms
        headroom_ms = max(lag_ms, settings.retrieval_timeout_ms * _TIMER_HEADROOM)
        budget_s = (settings.retrieval_timeout_ms - headroom_ms) / 1000  # timers fire late
        deadline = time.monotonic() + budget_s
        try:
            _check_lag(lag_ms, settings.retrieval_timeout_ms)
            self.recall = await asyncio.wait_for(self._lookup(memory, deadline), budget_s)
        except RetrievalSkipped as exc:
            self._fail("retrieval_skipped", f"retrieval skipped: {exc}")
            self.shed = True  # not looked up: the lookups' latency leaves it out
        except TimeoutError:
            limit = settings.retrieval_timeout_ms
            self._fail("retrieval_timeout", f"retrieval exceeded {limit:g} ms")
        except MemoryCoreError as exc:
            self._fail("retrieval", f"retrieval failed: {exc}")
        except Exception as exc:  # memory never turns a chat into a 500, whatever is stored
            self._fail("retrieval", f"retrieval failed: {type(exc).__name__}: {exc}")
        if not self.shed:
            self.services.looked_up(time.perf_counter() - began)

    async def _lookup(self, memory: TenantMemory, deadline: float) -> Recall:
        assert self.decision is not None
        settings, decision, chat = self.services.settings, self.decision, self.chat
        question = chat.recent_user_text(settings.context_turns)
        if self.as_of is None:  # a snapshot's store encodes its own
            memory.encode_ahead(settings.retrieval, question)
        remembered = [*self.earlier, *self.remembered()]
        excluded = await off_the_loop(
            len(remembered) > LARGE_HISTORY, chain_hashes, remembered, self.conversation
        )
        return await memory.recall(
            question,
            limit=decision.max_fragments,
            budget_tokens=decision.budget_tokens,
            exclude_hashes=excluded,
            strategy=settings.retrieval,
            deadline=deadline,
            model=chat.model,
            as_of=self.as_of,
        )

    @property
    def block(self) -> str | None:
        """The memory block to place before the latest user message, or None."""
        recall = self.recall
        return recall.context.text if recall is not None and recall.context.text else None

    def note(self, receipt_id: str | None) -> None:
        """Keep what memory did in this turn for ``/memory why``."""
        if self.memory is not None:
            self.memory.note_turn(self.conversation, self.last_turn(receipt_id))

    def last_turn(self, receipt_id: str | None) -> LastTurn:
        decision = self.decision
        return LastTurn(
            at=time.time(),
            retrieve=decision.retrieve if decision else False,
            reason=decision.reason if decision else "",
            rule=decision.rule if decision else None,
            receipt_id=receipt_id,
            memory_error=self.memory_error,
        )

    def remembered(self) -> list[dict[str, Any]]:
        """The request's messages that are stored: those not said while memory was off,
        less, in a continued conversation, leading system messages the conversation
        already holds (the Responses API's ``instructions``, resent each turn)."""
        messages = self.chat.messages
        if self.unremembered:
            messages = [m for i, m in enumerate(messages) if i not in self.unremembered]
        if self.earlier:
            messages = _without_repeated_instructions(messages, self.earlier)
        return messages

    def history(self, answer: Mapping[str, Any] | None) -> list[LogMessage]:
        """What to store of the exchange: the remembered turns, and ``answer`` (the
        assistant's message, when it is whole) with the fragments of the block it
        restates (:func:`memory_core.restated_by`: formation ranks it below them);
        nothing when ingestion is off."""
        if not self.ingest:
            return []
        now = time.time()
        turns = [*self.earlier, *self.remembered()]  # earlier: stored already, skipped
        history = [LogMessage(m, now) for m in turns]
        if answer is not None:
            said = message_text(answer.get("content"))
            sources = restated_by(self.recall, said) if self.recall is not None else ()
            history.append(LogMessage(answer, now, sources=sources))
        return history

    def summary(self) -> dict[str, Any]:
        """The decision and what was injected, as the log line and metadata show them."""
        decision, recall = self.decision, self.recall
        return {
            "tenant": self.tenant,
            "decision": decision.retrieve if decision else None,
            "reason": decision.reason if decision else None,
            "rule": decision.rule if decision else None,
            "fragments_injected": len(recall.context.shown) if recall else 0,
            "fragments_cited": len(recall.context.cited) if recall else 0,
            "memory_tokens": recall.context.tokens if recall else 0,
            "memory_error": self.memory_error,
        }

    def _fail(self, stage: str, error: str) -> None:
        self.memory_error = error
        self.services.failed(stage)


def _without_repeated_instructions(
    messages: list[dict[str, Any]], earlier: tuple[Mapping[str, Any], ...]
) -> list[dict[str, Any]]:
    """``messages`` less its leading system messages equal to one of ``earlier``."""
    held = [m for m in earlier if m.get("role") == "system"]
    lead = 0
    while lead < len(messages) and messages[lead].get("role") == "system":
        lead += 1
    kept = [m for m in messages[:lead] if m not in held]
    return kept + messages[lead:] if len(kept) < lead else messages


def turn_context(
    chat: ChatRequest,
    *,
    tenant: str,
    conversation: str,
    header: str | None,
    earlier: Sequence[Mapping[str, Any]] = (),
) -> TurnContext:
    """The policy's view of ``chat``'s latest turn; ``header`` is ``X-Memory`` as sent;
    ``earlier``: the stored turns a continued request follows (:attr:`MemoryTurn.earlier`),
    counted and read as if the request held them (else each continued turn would be a
    conversation's first). Each text is read as retrieval reads a question
    (:func:`memory_core.question_excerpt`, its head and tail): the rules run on the event
    loop, and over a pasted megabyte ``mentions_entity`` and ``topic_shift`` took seconds,
    holding every request."""
    said = [*earlier, *chat.messages[: chat.last_user_index]]
    users = [m for m in said if m.get("role") == "user"]
    recent = (message_text(m.get("content")) for m in users[-_RECENT_TURNS:])
    before = sum(1 for m in earlier if m.get("role") == "user")
    return TurnContext(
        tenant=tenant,
        model=chat.model,
        conversation_id=conversation,
        user_turns=chat.user_turns + before,
        latest_user_text=question_excerpt(chat.latest_user_text),
        header=header,
        now=time.time(),
        recent_user_texts=tuple(question_excerpt(text) for text in recent),
    )


async def off_the_loop(large: bool, fn: Callable[..., T], *args: Any) -> T:
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
