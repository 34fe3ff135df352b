"""The history half of :class:`~memory_core.store.memory_store.MemoryStore`: snapshots, rollback,
consolidation cycles, diffs, copies as of a snapshot, and keeping the graph and the readers right
while memory changes wholesale.

:class:`StoreHistory` is a base of ``MemoryStore`` (which builds the attributes it
declares): its methods run on the store's connections under the store's locks, like the
rest of the store. What makes it work is in :mod:`.history` (the chain), :mod:`.dream`
(the cycles) and :mod:`.storage` (the SQL).
"""

from __future__ import annotations

import abc
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..dream import DreamConfig, Dreamer, DreamReport, Judge, Step, build_judge
from ..formation import Backends
from ..formation.dates import date_formed
from ..history import snapshots as history
from ..history.diff import diff_of
from ..history.snapshots import Restored
from ..history.views import Diff, HistoryState
from ..index.memory_graph import MemoryGraph, MemoryGraphIndex
from ..storage import Connection, connect, read_snapshot
from ..storage.tables import dream as dream_rows
from ..storage.tables import history as history_rows
from ..storage.tables.history import HeldRow, SnapshotRow
from ..transfer import Manifest
from ..transfer import export as export_memory
from ..transfer import import_ as import_memory
from .exclusive import exclusive
from .names import KnownNames

__all__ = ["DreamStatus", "Events", "StoreHistory", "log_event"]

Events = Callable[[dict[str, Any]], None]
"""Told one record (a JSON object) per consolidation cycle and per rollback, with counts."""

_log = logging.getLogger("memory_core.history")


def log_event(record: dict[str, Any]) -> None:
    """The default :data:`Events`: one line on the ``memory_core.history`` logger."""
    _log.info("%s", json.dumps(record, ensure_ascii=False, default=str))


@dataclass(frozen=True)
class DreamStatus:
    """Where a store stands between consolidation cycles (see :meth:`MemoryStore.dream_status`)."""

    cycle: int
    new_messages: int
    first_new_at: float | None
    last_cycle_at: float | None
    last_rollback_at: float | None



class StoreHistory(abc.ABC):
    """Memory's history for one store (see the module docstring)."""

    path: Path
    names: KnownNames
    _clock: Callable[[], float]
    _dream: DreamConfig
    _judge: Judge | None
    _graph: MemoryGraphIndex
    _reader: Connection
    _read_lock: threading.Lock
    _forming: Connection
    _form_lock: threading.Lock
    _events: Events
    _encoder_checked: bool

    @abc.abstractmethod
    def form_all(self) -> int:
        """Drain the formation queue (the store's own formation)."""

    @abc.abstractmethod
    def _prepared(self, graph: MemoryGraph) -> MemoryGraph:
        """``graph``, ready for lookups (the store compiles its kernels)."""

    @abc.abstractmethod
    def _get_backends(self) -> Backends:
        """The formation backends (their encoder's cosine scale reads the Dreamer's
        similarities: :meth:`.dream.DreamConfig.scaled`)."""

    def snapshots(self, *, limit: int = 100, before: int | None = None) -> list[SnapshotRow]:
        """The newest ``limit`` snapshots (older than ``before``), newest first."""
        with self._read_lock:
            return history_rows.snapshots(self._reader, limit=limit, before=before)

    def snapshot(self, snapshot_id: int) -> SnapshotRow | None:
        with self._read_lock:
            return history_rows.snapshot(self._reader, snapshot_id)

    def held_rows(self, *, limit: int = 100) -> list[HeldRow]:
        """Log rows a rollback holds back from formation, oldest first."""
        with self._read_lock:
            return history_rows.held_rows(self._reader, limit=limit)

    def history_state(self) -> HistoryState:
        """Where memory's history stands (read in one transaction)."""
        with self._read_lock, read_snapshot(self._reader, "cannot read memory's history"):
            state = history_rows.state(self._reader)
            entries, size = history_rows.journal_size(self._reader)
            return HistoryState(
                head=history_rows.head(self._reader),
                generation=state.generation,
                last_rollback_at=state.last_rollback_at,
                journal_entries=entries,
                journal_bytes=size,
                held=history_rows.held_count(self._reader),
            )

    def rollback(self, target: int) -> Restored:
        """Restore derived memory to snapshot ``target``; the log rows memory no longer
        holds the formation of (and those still queued) are held until released (see
        :mod:`.history`). Queries in flight, and those that start before the new graph
        is published, read the state before; later ones the state after. Raises
        :class:`DreamBusyError` when a cycle or another rollback runs for this tenant,
        :class:`SnapshotNotFoundError` for an unknown snapshot."""
        began = time.perf_counter()
        with (
            exclusive(self.path, f"a rollback to snapshot {target}"),
            self._form_lock,
            self._transition(),
        ):
            restored = history.rollback(self._forming, target, now=self._clock())
            self._replaced()
        self._events(_rollback_record(restored, time.perf_counter() - began))
        return restored

    def export(self, dest: Path, *, tenant: str) -> Manifest:
        """Write this memory to ``dest`` (:mod:`memory_core.transfer`), read in one read
        transaction of a connection of its own (lookups and writes meanwhile wait for
        nothing); its manifest."""
        reading = connect(self.path, readonly=True)
        try:
            return export_memory(reading, dest, tenant=tenant, now=self._clock())
        finally:
            reading.close()

    def import_export(
        self, source: Path, *, replace: bool = False, max_bytes: int | None = None
    ) -> Manifest:
        """Load the export at ``source`` into this store, in one transaction (refused,
        nothing changed, when the file is not a sound export of this schema, when it
        inflates past ``max_bytes``, or when this store holds memory and ``replace`` is
        False); the graph is read again, and the next use checks again that the vectors
        are this store's encoder's (as at an open: formed again, or refused).
        Raises :class:`ExportFileError`, :class:`MemoryNotEmptyError`, or
        :class:`DreamBusyError` while a cycle or a rollback runs for this tenant."""
        began = time.perf_counter()
        with exclusive(self.path, "an import"), self._form_lock, self._transition():
            manifest = import_memory(self._forming, source, replace=replace, max_bytes=max_bytes)
            self._replaced()
        counts = manifest.counts
        self._events({
            "event": "import", "from_tenant": manifest.tenant, "created_at": manifest.created_at,
            "log": counts.get("log", 0), "fragments": counts.get("fragments", 0),
            "relations": counts.get("relations", 0), "snapshots": counts.get("snapshots", 0),
            "replace": replace, "ms": round((time.perf_counter() - began) * 1000, 1),
        })  # fmt: skip
        return manifest

    def dream_status(self) -> DreamStatus:
        """What the dream policy weighs (read in one transaction): messages logged since
        the last cycle, when the oldest of them was logged, the last cycle and rollback."""
        with self._read_lock, read_snapshot(self._reader, "cannot read the Dreamer's state"):
            state = dream_rows.state(self._reader)
            messages, first = dream_rows.new_log(self._reader, int(state["log"]))
            memory = history_rows.state(self._reader)
        last = state.get("last_cycle_at")
        return DreamStatus(
            cycle=int(state["cycle"]),
            new_messages=messages,
            first_new_at=first,
            last_cycle_at=last,
            last_rollback_at=memory.last_rollback_at,
        )

    def dream(
        self,
        *,
        trigger: str = "demand",
        form: Callable[[], int] | None = None,
        on_step: Step | None = None,
    ) -> DreamReport:
        """One whole consolidation cycle: held rows released, everything queued formed
        (by ``form``, else here), then :meth:`consolidate`. Raises :class:`DreamBusyError`
        when a cycle or a rollback runs for this tenant."""
        step = on_step or (lambda _: None)
        with exclusive(self.path, "a consolidation cycle"):
            step("releasing")
            released = self.release_held()
            step("forming")
            formed = form() if form is not None else self.form_all()
            return self.consolidate(
                trigger=trigger, formed=formed, released=released, on_step=on_step
            )

    def consolidate(
        self,
        *,
        trigger: str,
        formed: int = 0,
        released: int = 0,
        on_step: Step | None = None,
    ) -> DreamReport:
        """The consolidation of a cycle (caller holds the tenant's lock,
        :func:`.exclusive.exclusive`, and has formed what was queued): see
        :mod:`.dream.cycle`. Lookups read the state before until the new graph is read."""
        dreamer = Dreamer(self._dream, self._dream_judge(), clock=self._clock)
        reading = connect(self.path, readonly=True)  # its own: lookups never wait for it
        try:
            plan = dreamer.read(
                reading, trigger=trigger, formed=formed, released=released, on_step=on_step
            )
        finally:
            reading.close()
        plan = dreamer.judge(plan, on_step)
        with self._form_lock, self._transition():
            report = dreamer.write(self._forming, plan, on_step)
        self._events(_cycle_record(report))
        return report

    def _dream_judge(self) -> Judge:
        if self._judge is None:
            scale = self._get_backends().encoder.cosine_scale
            self._judge = build_judge(self._dream.scaled(scale))
        return self._judge

    def checkpoint(self, *, force: bool = False) -> int | None:
        """Fold the journal into a checkpoint snapshot when it holds more than
        ``dream.journal_entries`` writes or ``dream.journal_bytes`` bytes (or ``force``,
        when it holds any), so it stays bounded without cycles; the snapshot's id, None
        when nothing was folded. Raises :class:`DreamBusyError` while a cycle or a
        rollback runs for this tenant. Derived memory is not changed."""
        with exclusive(self.path, "a checkpoint"), self._form_lock:
            return history.checkpoint(
                self._forming,
                now=self._clock(),
                entries=0 if force else self._dream.journal_entries,
                size=0 if force else self._dream.journal_bytes,
                keep=self._dream.keep_snapshots,
            )

    def release_held(self) -> int:
        """Queue every held log row for formation again; how many."""
        with self._form_lock:
            return history.release(self._forming, self._clock())

    def diff(self, first: int, second: int, *, limit: int = 200) -> Diff:
        """What changed in entities, relations and contexts from snapshot ``first``'s
        state to ``second``'s (either order), with sources."""
        with self._read_lock, read_snapshot(self._reader, "cannot diff snapshots"):
            path = history.path_between(self._reader, first, second)
            return diff_of(self._reader, path, first=first, second=second, limit=limit)

    def materialize(self, target: int, dest: Path) -> None:
        """A copy of this store's file at ``dest`` whose memory is snapshot ``target``'s
        (for answers "as of" it; costs a copy of the file, read through a connection of
        its own: lookups meanwhile wait for nothing)."""
        source = connect(self.path, readonly=True)
        try:
            history.materialize(source, target, dest, now=self._clock())
        finally:
            source.close()

    def generation_moved(self) -> bool:
        """Whether memory's generation moved past the published graph's (a cycle or a
        rollback made by another process): one small read."""
        graph = self._graph.current()
        if graph is None:
            return False
        with self._read_lock:
            return history_rows.state(self._reader).generation != graph.generation

    def check_generation(self) -> bool:
        """Read the graph again if another process rolled memory back or consolidated it
        (lookups meanwhile go without memory, never reading a mix); whether it did."""
        graph = self._graph.current()
        if graph is None:
            return False
        with self._read_lock:
            generation = history_rows.state(self._reader).generation
        if generation == graph.generation:
            return False
        with self._form_lock:
            self.names = KnownNames(self._forming)
            self._prepared(self._graph.reload(self._forming))
        return True

    def _replaced(self) -> None:
        """After a rollback or an import (caller holds the formation lock), what an open
        does for memory it did not form itself, which would otherwise wait for the next
        open: the date backfill, when one is pending (fragments a rollback kept may have
        lost the dates the backfill gave them; an export may carry one cut short), and
        the check, at the next use, that the vectors are this store's encoder's (a
        rollback to before memory was formed again for it, an export made with another)."""
        date_formed(self._forming)
        self._encoder_checked = False

    @contextlib.contextmanager
    def _transition(self) -> Iterator[None]:
        """Around a change of memory's generation made here (caller holds the formation
        lock): the reader is held at the state before until the graph of the state after
        is read, then both move at once, so no lookup reads a mix of two states and the
        lookups meanwhile are served from the state before."""
        pinned = self._graph.started
        if pinned:
            with self._read_lock:
                self._reader.execute("BEGIN")
                history_rows.state(self._reader)  # the read transaction starts here
        try:
            yield
        except BaseException:
            if pinned:
                with self._read_lock:
                    self._unpin()
            raise
        self.names = KnownNames(self._forming)
        if not pinned:
            return
        try:
            self._prepared(self._graph.reload(self._forming, publishing=self._moving()))
        finally:
            with self._read_lock:
                self._unpin()

    @contextlib.contextmanager
    def _moving(self) -> Iterator[None]:
        """The moment lookups move to the new state: the reader let go, the graph published."""
        with self._read_lock:
            self._unpin()
            yield

    def _unpin(self) -> None:
        if self._reader.in_transaction:
            self._reader.execute("COMMIT")


def _cycle_record(report: DreamReport) -> dict[str, Any]:
    """The line a cycle logs: what it formed and decided, and the rows its snapshot holds."""
    return {
        "event": "dream_done",
        "cycle": report.cycle,
        "snapshot": report.snapshot,
        "trigger": report.trigger,
        "released": report.released,
        "formed": report.formed,
        "decisions": dict(sorted(report.totals.items())),
        "failures": len(report.failures),
        "rows_changed": report.rows_changed,
        "ms": round(report.elapsed_ms, 1),
    }


def _rollback_record(restored: Restored, seconds: float) -> dict[str, Any]:
    """The line a rollback logs: what it restored, the rows it changed per table, what it
    holds back, and the snapshot that undoes it."""
    return {
        "event": "rollback",
        "restored": restored.target,
        "snapshot": restored.snapshot,
        "undo": restored.undo,
        "rows_changed": restored.rows_changed,
        "tables": {t: sum(ops.values()) for t, ops in sorted(restored.tally.items())},
        "held": restored.held,
        "newly_held": restored.newly_held,
        "formed_again": restored.formed_again,
        "ms": round(seconds * 1000, 1),
    }
