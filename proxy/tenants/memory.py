"""One tenant's memory behind async methods (:class:`TenantMemory`).

Each tenant has its own SQLite file ``<data_dir>/tenants/<tenant>.db`` (opened by
:class:`.pool.Tenants`); a request only ever receives the store of the tenant its key
maps to (:func:`.pool.tenant_of`). Writes for a tenant run on that
tenant's single writer thread, in submission order, so a receipt written at the end of a
request is visible to any later request of the same tenant (receipt reads go through the
same thread). Formation runs on the tenant's own formation thread, so a slow model never
delays the durable log; searches run on a shared reader pool and never wait for either.
With formation worker processes (:class:`RemoteFormation`, ``memory.formation_workers``)
the formation thread forms nothing: it only reads what a worker formed into the graph.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from memory_core import (
    STRATEGIES,
    AppendResult,
    Continuation,
    Diff,
    DreamBusyError,
    DreamReport,
    ForgetRow,
    Forgotten,
    HeldRow,
    HistoryState,
    LogMessage,
    Manifest,
    MemoryChangedError,
    MemoryCoreError,
    MemoryStore,
    Recall,
    ReceiptRow,
    Restored,
    SnapshotRow,
    Step,
    StoreStats,
)
from memory_core.views import AreaExplanation, ContextView, EntityView, RelationView

from ..errors import RetrievalSkipped
from .as_of import AsOfCopies

__all__ = ["HeldForget", "LastTurn", "RecallGate", "RemoteFormation", "TenantMemory"]

_TURNS_KEPT = 10_000


@dataclass(frozen=True)
class LastTurn:
    """What memory did in a conversation's latest chat turn: the policy's decision, the
    receipt when memory was consulted, the error when memory failed."""

    at: float
    retrieve: bool
    reason: str
    rule: str | None
    receipt_id: str | None
    memory_error: str | None


@dataclass(frozen=True)
class HeldForget:
    """A forget by words listed to the user and waiting for ``/memory forget confirm``:
    what was asked, the fragments it would forget, and those it would keep (they only
    deny the words; confirmed by id, they are forgotten too)."""

    request: str
    offered: tuple[int, ...]
    kept: tuple[int, ...] = ()

    @property
    def listed(self) -> frozenset[int]:
        """Every fragment id the listing showed: what a confirm may name."""
        return frozenset(self.offered + self.kept)


REFRESH_INTERVAL_S = 0.25
"""Least time between two graph refreshes of a tenant (see ``TenantMemory.refresh_graph``)."""

T = TypeVar("T")
Events = Callable[[dict[str, Any]], None]
_HURRY_CHECK_S = 0.05
_WARM_QUESTIONS = (
    "what did we talk about last time",
    "where does she live now and what does she do",
    "remember the plan we made for the trip",
    "who was at the meeting on Monday",
)


class RecallGate:
    """Admission for memory lookups: at most ``limit`` queued or running at once.

    Why: when lookups arrive faster than the reader threads serve them, queueing them
    makes every one wait past its budget while the abandoned ones still burn CPU — under
    load nearly every request then times out. Refusing at once past the limit, and
    dropping a lookup that waited past its deadline before it started, keeps each
    request's wait within its budget and spends the CPU on lookups that can still help.
    Used from the event loop thread only.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0

    def enter(self) -> bool:
        if self.in_flight >= self.limit:
            return False
        self.in_flight += 1
        return True

    def leave(self) -> None:
        self.in_flight -= 1


class RemoteFormation(Protocol):
    """Formation in other processes (:class:`proxy.tenants.workers.FormationWorkers`)."""

    def notify(self, tenant: str) -> None:
        """The tenant has newly logged rows."""

    async def form(self, tenant: str) -> int:
        """Form what the tenant has queued now; the rows formed meanwhile."""


class TenantMemory:
    """One tenant's store with async access (writer thread + shared reader pool).

    With ``remote``, formation is asked of other processes; the formation thread then
    only refreshes the graph with what they formed (:meth:`refresh_graph`)."""

    def __init__(
        self,
        name: str,
        store: MemoryStore,
        readers: ThreadPoolExecutor,
        events: Events | None = None,
        gate: RecallGate | None = None,
        remote: RemoteFormation | None = None,
        as_of: AsOfCopies | None = None,
    ) -> None:
        self.name = name
        self.store = store
        self._as_of = as_of
        self.dreaming = False
        """A consolidation cycle, a rollback or an import runs for this tenant (started
        here; one at a time: :meth:`_one_at_a_time`)."""
        self.exporting = False
        """An export of this tenant is being written or sent (one at a time: each is a
        copy of the memory on disk until it is sent)."""
        self._events = events
        self._remote = remote
        self._learned: list[str] = []
        self._refresh_due = False
        self._last_refresh = -math.inf
        self._last_request = -math.inf
        self._opened = time.monotonic()
        self._pending: asyncio.Future[int] | None = None
        self._hurry = False
        self._started = False  # the waiting pass has begun forming
        self._again = False  # an exchange was stored after it began: form once more
        self._stopping = False
        self._pass: Future[Any] | None = None
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"mem-w-{name}")
        self._former = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"mem-f-{name}")
        self._readers = readers
        self._gate = gate or RecallGate(4)
        self._off = store.memory_off()
        self._rereads: set[asyncio.Future[bool]] = set()
        self._turns: OrderedDict[str, LastTurn] = OrderedDict()
        self._held_forgets: OrderedDict[str, HeldForget] = OrderedDict()

    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._writer, fn, *args)

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._readers, fn, *args)

    async def append(
        self,
        messages: Sequence[LogMessage],
        conversation: str | None,
        source: str,
        response_id: str | None = None,
    ) -> AppendResult:
        """Log the new turns of ``messages``; ``response_id`` (the answer's id, when the
        API lets a later request name it) is linked with them (see
        :meth:`continuation`)."""
        return await self._write(
            lambda: self.store.append(
                messages, conversation=conversation, source=source, response_id=response_id
            )
        )

    async def continuation(self, response_id: str) -> Continuation | None:
        """The conversation, and its stored messages, that a request naming
        ``response_id`` (the Responses API's ``previous_response_id``) continues; None for
        an id this tenant's memory never linked."""
        return await self._read(self.store.continuation, response_id)

    async def form(self, on_pass: Callable[[int], None] | None = None) -> int:
        """Form what is queued, on the tenant's formation thread (appends never wait),
        or by its worker process when formation is remote; ``on_pass`` (local formation
        only) is told the rows formed so far after each pass, on the formation thread."""
        if self._stopping:
            return 0
        if self._remote is not None:
            return await self._remote.form(self.name)  # each pass logged by the workers
        pass_ = self._former.submit(self.store.form_summary, on_pass)
        self._pass = pass_
        summary = await asyncio.wrap_future(pass_)
        if (summary.rows or summary.failed) and self._events is not None:
            self._events({"event": "formed", "tenant": self.name, **summary.report()})
        return summary.rows

    def forming(self) -> bool:
        """Whether a formation pass is running (or about to) on the formation thread."""
        return self._pass is not None and not self._pass.done()

    def cancel_formation(self) -> None:
        """Shutdown: no new pass starts; one waiting for a quiet moment is called off
        (its rows stay in the durable queue). A pass already running finishes its batch."""
        self._stopping = True
        if self._pending is not None and not self._pending.done():
            self._pending.cancel()

    def note_request(self) -> None:
        """A chat request of this tenant has started (formation waits for a quiet moment)."""
        self._last_request = time.monotonic()

    def form_soon(self, grace_s: float, max_wait_s: float) -> asyncio.Future[int] | None:
        """Schedule a formation pass for once no request of this tenant has started for
        ``grace_s`` (after ``max_wait_s`` at the latest, at once after :meth:`hurry`).
        Returns the new pass, or None when one is already waiting: it will form
        everything queued, this exchange included (a pass that has begun runs again after
        the next quiet moment, since it may have found the queue empty before this
        exchange).

        Why: on two cores a formation pass (model calls, graph append) running while the
        next question is retrieved nearly doubled that retrieval's latency. Under steady
        traffic formation then runs in larger batches instead of competing per exchange.
        """
        if self._remote is not None:
            if not self._stopping:  # no grace: the pass runs in another process
                self._remote.notify(self.name)
            return None
        if self._stopping:
            return None
        if self._pending is not None and not self._pending.done():
            self._again = self._again or self._started  # it may have read the queue already
            return None
        self._pending = asyncio.ensure_future(self._quiet_then_form(grace_s, max_wait_s))
        return self._pending

    def hurry(self) -> None:
        """Let a waiting formation pass start now (shutdown, draining)."""
        self._hurry = True

    async def _quiet_then_form(self, grace_s: float, max_wait_s: float) -> int:
        formed = 0
        try:
            while True:
                deadline = time.monotonic() + max_wait_s
                while not self._hurry:  # checked every 50 ms: hurry() comes from any task
                    wait = min(self._last_request + grace_s, deadline) - time.monotonic()
                    if wait <= 0:
                        break
                    await asyncio.sleep(min(wait, _HURRY_CHECK_S))
                self._hurry = False
                self._started, self._again = True, False
                formed += await self.form()
                self._started = False
                # form_all stops at an empty queue: an exchange stored after that check
                # would wait for the next one; it gets a pass of its own (after a quiet
                # moment, like any other)
                if not self._again or self._stopping:
                    return formed
        finally:
            self._started = False

    async def refresh_graph(self, names: Sequence[str]) -> None:
        """Another process committed a pass: learn its ``names`` and append its rows to
        the graph, on the formation thread. Calls arriving while one waits join it (it
        reads every row past the graph's cursors).

        At most one refresh per :data:`REFRESH_INTERVAL_S`: under back-to-back traffic
        every answer ends a pass, and a refresh (a few ms holding the GIL) per answer
        slowed the next questions; a new version every quarter second keeps what was
        said retrievable well within a second.
        """
        self._learned.extend(names)
        if self._refresh_due:
            return
        self._refresh_due = True
        wait = self._last_refresh + REFRESH_INTERVAL_S - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        await asyncio.get_running_loop().run_in_executor(self._former, self._refresh)

    def _refresh(self) -> None:
        self._refresh_due = False
        self._last_refresh = time.monotonic()
        names, self._learned = self._learned, []
        self.store.refresh_graph(names)

    def warm_graph(self) -> None:
        """Read the memory graph on the formation thread now, so the first area query
        does not pay for it (a failure is logged; that query then reads it itself)."""
        future = self._former.submit(self.store.warm_graph)
        future.add_done_callback(self._warmed)

    def _warmed(self, future: Future[Any]) -> None:
        exc = future.exception()
        if exc is not None and self._events is not None:
            self._events({"event": "graph_warm_failed", "tenant": self.name, "error": str(exc)})

    def encode_ahead(self, strategy: str, question: str) -> None:
        """Start encoding ``question`` for the lookup about to be asked for
        (:meth:`MemoryStore.encode_ahead`: only once the encoder is loaded, only for a
        strategy that reads the vector); never blocks the loop and never fails the turn (a
        store closing under it leaves the lookup to say so)."""
        with contextlib.suppress(MemoryCoreError):
            self.store.encode_ahead(strategy, question)

    async def recall(
        self,
        question: str,
        *,
        limit: int,
        budget_tokens: int,
        exclude_hashes: Collection[str],
        strategy: str = "bm25",
        deadline: float = math.inf,
        model: str | None = None,
        as_of: int | None = None,
    ) -> Recall:
        """Retrieval by the named ``strategy``
        (:data:`memory_core.retrieval.strategies.STRATEGIES`), the block counted with
        ``model``'s tokenizer; with ``as_of``, from that snapshot's state
        (:meth:`as_of_store`), the current one unchanged.

        Raises :class:`RetrievalSkipped` at once when the reader threads already have
        their limit of lookups, or when this one would start after ``deadline``
        (``time.monotonic()``): see :class:`RecallGate`."""
        store = self.store if as_of is None else await self.as_of_store(as_of)
        gate = self._gate
        if not gate.enter():
            raise RetrievalSkipped(
                f"{gate.limit} lookups already in flight (memory.max_concurrent_retrievals)"
            )

        def run() -> Recall:
            if time.monotonic() >= deadline:
                raise RetrievalSkipped("waited past its time budget for a reader thread")
            return store.retrieve(
                strategy,
                question,
                limit=limit,
                budget_tokens=budget_tokens,
                exclude_hashes=exclude_hashes,
                model=model,
            )

        loop = asyncio.get_running_loop()
        try:
            work = self._readers.submit(run)
        except BaseException:
            gate.leave()
            raise
        work.add_done_callback(lambda _: loop.call_soon_threadsafe(gate.leave))
        try:
            return await asyncio.wrap_future(work)
        except MemoryChangedError as exc:
            raise self._rereading(exc) from exc

    def save_receipt(
        self, receipt_id: str, build: Callable[[], Mapping[str, Any]]
    ) -> asyncio.Future[None]:
        """Submit the write now (ordering it before later reads); await the result.

        ``build`` makes the receipt's body on the writer thread, so building and
        serialising it costs the event loop nothing; its errors come out of the future.
        """
        return asyncio.get_running_loop().run_in_executor(
            self._writer, lambda: self.store.save_receipt(receipt_id, build())
        )

    async def receipt(self, receipt_id: str) -> dict[str, Any] | None:
        return await self._write(self.store.receipt, receipt_id)

    async def conversation_receipt(self, conversation: str) -> dict[str, Any] | None:
        return await self._write(self.store.conversation_receipt, conversation)

    def note_turn(self, conversation: str, turn: LastTurn) -> None:
        """What memory did in ``conversation``'s latest turn (for ``/memory why``; the
        newest :data:`_TURNS_KEPT` conversations are kept, in this process)."""
        self._turns[conversation] = turn
        self._turns.move_to_end(conversation)
        while len(self._turns) > _TURNS_KEPT:
            self._turns.popitem(last=False)

    def last_turn(self, conversation: str) -> LastTurn | None:
        return self._turns.get(conversation)

    def memory_is_off(self, conversation: str) -> bool:
        """Whether the user switched memory off in ``conversation`` (``/memory off``)."""
        return conversation in self._off

    async def switch_memory(self, conversation: str, *, on: bool) -> bool:
        """Switch memory on or off for ``conversation`` (stored: it outlives the
        process); whether that changed anything."""
        changed = await self._write(lambda: self.store.switch_memory(conversation, on=on))
        if on:
            self._off.discard(conversation)
        else:
            self._off.add(conversation)
        return changed

    async def forget_fragments(
        self, fragment_ids: Sequence[int], *, request: str, conversation: str | None
    ) -> Forgotten:
        done = await self._write(
            lambda: self.store.forget_fragments(
                fragment_ids, request=request, conversation=conversation
            )
        )
        self._forgets_changed()
        return done

    async def forget_matching(
        self, words: str, *, conversation: str | None, preview: bool = False
    ) -> Forgotten:
        """Forget what asserts ``words`` (see ``MemoryStore.forget_matching``), or with
        ``preview`` only say what that would be."""
        done = await self._write(
            lambda: self.store.forget_matching(words, conversation=conversation, preview=preview)
        )
        if not preview:
            self._forgets_changed()
        return done

    def hold_forget(self, conversation: str, held: HeldForget) -> None:
        """Keep ``held`` for ``conversation``'s confirm, in place of one held before
        (in this process, for the newest :data:`_TURNS_KEPT` conversations)."""
        self._held_forgets[conversation] = held
        self._held_forgets.move_to_end(conversation)
        while len(self._held_forgets) > _TURNS_KEPT:
            self._held_forgets.popitem(last=False)

    def held_forget(self, conversation: str) -> HeldForget | None:
        """The forget waiting for confirmation in ``conversation``, if any."""
        return self._held_forgets.get(conversation)

    def drop_forget(self, conversation: str) -> HeldForget | None:
        """Stop holding ``conversation``'s forget (confirmed or cancelled); what it was."""
        return self._held_forgets.pop(conversation, None)

    async def unforget(self, forget_id: int | None) -> ForgetRow | None:
        undone = await self._write(self.store.unforget, forget_id)
        self._forgets_changed()
        return undone

    async def forgets(self, *, limit: int) -> list[ForgetRow]:
        return await self._write(lambda: self.store.forgets(limit=limit))

    def _forgets_changed(self) -> None:
        """Copies as of a snapshot were made with the forgets of their time: dropped, so
        an answer as of a snapshot never shows what was forgotten since."""
        if self._as_of is not None:
            self._as_of.close()

    @contextlib.contextmanager
    def _one_at_a_time(self, what: str) -> Iterator[None]:
        """Mark a cycle, a rollback or an import running (:attr:`dreaming`) for the block;
        raises :class:`DreamBusyError` at once when one already runs here. The tenant's
        lock (:func:`memory_core.MemoryStore.rollback`) refuses one run by another process,
        but one asked here would wait for the formation thread behind the first (as long
        as a cycle's model takes), then run: a rollback would undo the cycle it waited for,
        and the first to end would mark the tenant idle while the second ran."""
        if self.dreaming:
            raise DreamBusyError(
                f"cannot start {what}: a consolidation cycle, a rollback or an import is"
                f" already running for {self.name}"
            )
        self.dreaming = True
        try:
            yield
        finally:
            self.dreaming = False

    def _ids_reassigned(self) -> None:
        """Memory was rolled back or replaced: the fragment ids a forget waiting for its
        confirm listed may now name other messages (a rollback frees the ids of what it
        removes, and the next messages formed take them), so no such forget is kept; a
        confirm then forgets nothing and asks for a new listing."""
        self._held_forgets.clear()

    async def recent_receipts(self, limit: int) -> list[ReceiptRow]:
        """The newest ``limit`` receipts (on the writer thread: after every receipt
        already submitted)."""
        return await self._write(self.store.recent_receipts, limit)

    async def entities(self, *, limit: int, name: str | None) -> list[EntityView]:
        return await self._read(lambda: self.store.entities(limit=limit, name=name))

    async def contexts(self, *, limit: int) -> list[ContextView]:
        return await self._read(lambda: self.store.contexts(limit=limit))

    async def relations(self, *, entity: str | None, limit: int) -> list[RelationView]:
        return await self._read(lambda: self.store.relations(entity=entity, limit=limit))

    async def explain_area(
        self, question: str, *, limit: int, as_of: int | None = None
    ) -> AreaExplanation:
        store = self.store if as_of is None else await self.as_of_store(as_of)
        try:
            return await self._read(lambda: store.explain_area(question, limit=limit))
        except MemoryChangedError as exc:
            raise self._rereading(exc) from exc

    def _rereading(self, exc: MemoryChangedError) -> RetrievalSkipped:
        """Start reading the graph again now (not at the cycle loop's next tick) and shed
        the lookup that found it stale: another process rolled memory back or consolidated
        it, and a large graph takes a while to read, which no lookup should wait for."""
        reread = asyncio.ensure_future(self.check_generation())
        self._rereads.add(reread)
        reread.add_done_callback(self._reread)
        return RetrievalSkipped(f"{exc}; try again")

    def _reread(self, done: asyncio.Future[bool]) -> None:
        self._rereads.discard(done)
        exc = None if done.cancelled() else done.exception()
        if exc is not None and self._events is not None:
            self._events({"event": "graph_reread_failed", "tenant": self.name, "error": str(exc)})

    # -- history: cycles, snapshots, rollback -------------------------------------------

    async def as_of_store(self, snapshot: int) -> MemoryStore:
        """A read-only store whose memory is ``snapshot``'s (made on first use, then kept:
        :class:`.as_of.AsOfCopies`); raises :class:`SnapshotNotFoundError`."""
        if self._as_of is None:
            raise MemoryCoreError("answers as of a snapshot are not available here")
        return await self._as_of.store(self.store, snapshot)

    async def dream(self, trigger: str, on_step: Step | None = None) -> DreamReport:
        """A whole consolidation cycle on the formation thread: held rows released, what
        is queued formed (by the worker process when formation is remote), consolidated,
        snapshot taken, graph read again. Raises :class:`DreamBusyError` when a cycle or
        a rollback already runs for the tenant (here or in another process)."""
        loop = asyncio.get_running_loop()
        form = None if self._remote is None else self._remote_form(loop)
        with self._one_at_a_time("a consolidation cycle"):
            return await loop.run_in_executor(
                self._former,
                lambda: self.store.dream(trigger=trigger, form=form, on_step=on_step),
            )

    def _remote_form(self, loop: asyncio.AbstractEventLoop) -> Callable[[], int]:
        """Formation by the worker process, waited for from the formation thread; a failed
        pass is logged and the cycle goes on (its rows stay queued)."""
        remote = self._remote
        assert remote is not None

        def form() -> int:
            try:
                return asyncio.run_coroutine_threadsafe(remote.form(self.name), loop).result()
            except MemoryCoreError as exc:
                if self._events is not None:
                    self._events({"event": "formation_failed", "tenant": self.name,
                                  "error": str(exc), "during": "dream"})  # fmt: skip
                return 0

        return form

    async def rollback(self, snapshot: int, *, reform: bool) -> tuple[Restored, int]:
        """Restore memory to ``snapshot`` (see :meth:`MemoryStore.rollback`); with
        ``reform`` the held rows are queued and formed at once; a forget waiting for its
        confirm is dropped (:meth:`_ids_reassigned`). Returns what the rollback did and
        the rows formed."""
        loop = asyncio.get_running_loop()
        with self._one_at_a_time(f"a rollback to snapshot {snapshot}"):
            self._ids_reassigned()
            try:
                restored = await loop.run_in_executor(
                    self._former, lambda: self.store.rollback(snapshot)
                )
            finally:
                self._ids_reassigned()  # and those listed from the state before, meanwhile
        if not reform:
            return restored, 0
        await loop.run_in_executor(self._former, self.store.release_held)
        return restored, await self.form()

    async def export(self, dest: Path) -> Manifest:
        """Write this memory to ``dest`` (see :meth:`MemoryStore.export`), on a reader thread."""
        return await self._read(lambda: self.store.export(dest, tenant=self.name))

    async def import_export(
        self, source: Path, *, replace: bool, max_bytes: int | None = None
    ) -> Manifest:
        """Load the export at ``source`` (see :meth:`MemoryStore.import_export`) on the
        formation thread; copies as of a snapshot are dropped (they were of the memory
        replaced), and the conversations switched off are those of the memory loaded."""

        def load() -> tuple[Manifest, set[str]]:
            manifest = self.store.import_export(source, replace=replace, max_bytes=max_bytes)
            return manifest, self.store.memory_off()

        loop = asyncio.get_running_loop()
        with self._one_at_a_time("an import"):
            manifest, self._off = await loop.run_in_executor(self._former, load)
        self._ids_reassigned()
        self._forgets_changed()
        return manifest

    async def snapshots(self, *, limit: int, before: int | None) -> list[SnapshotRow]:
        return await self._read(lambda: self.store.snapshots(limit=limit, before=before))

    async def snapshot(self, snapshot: int) -> SnapshotRow | None:
        return await self._read(lambda: self.store.snapshot(snapshot))

    async def diff(self, first: int, second: int, *, limit: int) -> Diff:
        return await self._read(lambda: self.store.diff(first, second, limit=limit))

    async def held_rows(self, *, limit: int) -> list[HeldRow]:
        return await self._read(lambda: self.store.held_rows(limit=limit))

    async def history_state(self) -> HistoryState:
        return await self._read(self.store.history_state)

    async def checkpoint(self) -> int | None:
        """Fold a journal grown past its bounds into a checkpoint snapshot (on the
        formation thread); the snapshot's id, or None."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._former, self.store.checkpoint)

    async def check_generation(self) -> bool:
        """Read the graph again if memory was rolled back, consolidated or replaced (an
        import) by another process (on the formation thread, like every graph read); then
        the switched-off conversations are read again and the copies as of snapshots
        dropped (an import replaces the snapshots too). Whether it was read again."""

        def check() -> set[str] | None:
            """The switched-off conversations read again, when memory moved."""
            return self.store.memory_off() if self.store.check_generation() else None

        loop = asyncio.get_running_loop()
        off = await loop.run_in_executor(self._former, check)
        if off is None:
            return False
        self._off = off
        self._ids_reassigned()  # a cycle elsewhere is not told apart from a rollback
        self._forgets_changed()
        return True

    @property
    def idle_s(self) -> float:
        """Seconds since this tenant's last chat request, or since its memory was opened
        here when none came since (a proxy that just started has not seen it idle)."""
        return time.monotonic() - max(self._last_request, self._opened)

    async def stats(self) -> StoreStats:
        return await self._read(self.store.stats)

    def warm(self, strategy: str) -> None:
        """Start-up warm-up, on the calling thread: read the memory graph (when the
        strategy uses it), then run lookups through the same path as a request (question
        encoding on the store's own thread, pulse, area, reconstruction), so none of it is
        first done while a client waits."""
        if STRATEGIES.get(strategy).uses_graph:
            self.store.warm_graph()
        for question in _WARM_QUESTIONS:  # a few: the interpreter specialises hot code
            self.store.retrieve(strategy, question, limit=4, budget_tokens=200)

    def close(self) -> None:
        self._former.shutdown(wait=True)
        self._writer.shutdown(wait=True)
        if self._as_of is not None:
            self._as_of.close()
        self.store.close()
