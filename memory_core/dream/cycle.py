"""One consolidation cycle: read what is new, judge the candidates, write, snapshot.

1. **Read** (one read transaction, on a connection of its own: nothing waits for it):
   the material formed since the last cycle and the candidate pairs
   (:mod:`.candidates`).
2. **Judge** (no transaction, no lock: formation and lookups go on, however slow a
   model is): the backend decides every candidate (:mod:`.judges`); a model that fails
   leaves its pairs as they are and the failure is reported.
3. **Write** (one transaction, on the formation connection): merges, reviews, links,
   strengths, reinforcement (:mod:`.consolidate`), the Dreamer's state moved to the
   material read, then the snapshot that folds in the journal (formation since the
   previous snapshot) and this cycle's own change (:func:`memory_core.history.snapshots.fold`), a
   new generation, and old snapshots pruned. A crash at any point leaves the previous
   snapshot current and the store as it was before this transaction.

The write re-checks that no other cycle or rollback committed since the read (the
caller holds the tenant's lock, :mod:`memory_core.store.exclusive`, so this is a guard against
another writer that ignores it) and applies nothing if one did. Rows formed while the
cycle ran (row ids above what was read) are examined by the next one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import DreamBusyError
from ..history import snapshots as history
from ..storage import Connection, journal, read_snapshot, transaction
from ..storage.tables import dream as rows
from ..storage.tables import history as history_rows
from .candidates import Material, read_material
from .config import DreamConfig
from .consolidate import Consolidation, Decisions
from .judges import Judge, JudgeFailure, Verdict
from .report import DreamReport

__all__ = ["Dreamer", "Plan", "Step"]

Step = Callable[[str], None]
"""Told each step of a cycle as it starts (``reading``, ``judging``, ``writing``)."""


def _silent(step: str) -> None:
    """A :data:`Step` that tells nobody."""


@dataclass
class Plan:
    """A cycle read and judged, ready to be written (:meth:`Dreamer.write`)."""

    trigger: str
    formed: int
    released: int
    began: float
    started_at: float
    material: Material
    entity_verdicts: list[Verdict]
    context_verdicts: list[Verdict]
    failures: list[str] = field(default_factory=list)


class Dreamer:
    """Plans a cycle on a connection it only reads (:meth:`plan`: no write lock, and the
    judge's calls, a model's included, hold nothing), then writes it on the store's
    formation connection (:meth:`write`; the caller serialises cycles, formation passes
    and rollbacks on it)."""

    def __init__(
        self,
        config: DreamConfig,
        judge: Judge,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._config, self._judge, self._clock = config, judge, clock

    def read(
        self,
        conn: Connection,
        *,
        trigger: str,
        formed: int = 0,
        released: int = 0,
        on_step: Step | None = None,
    ) -> Plan:
        """Step 1: the material and its candidates, in one read transaction on ``conn``."""
        began, started_at = time.perf_counter(), self._clock()
        (on_step or _silent)("reading")
        with read_snapshot(conn, "cannot read memory for a consolidation cycle"):
            generation = history_rows.state(conn).generation
            material = read_material(conn, self._config, generation)
        return Plan(trigger, formed, released, began, started_at, material, [], [])

    def judge(self, plan: Plan, on_step: Step | None = None) -> Plan:
        """Step 2: the judge's verdicts (no connection, no lock)."""
        (on_step or _silent)("judging")
        material = plan.material
        plan.entity_verdicts = self._judged(
            lambda: self._judge.entities(material.entity_pairs),
            len(material.entity_pairs),
            plan.failures,
        )
        plan.context_verdicts = self._judged(
            lambda: self._judge.contexts(material.context_pairs),
            len(material.context_pairs),
            plan.failures,
        )
        return plan

    def write(self, conn: Connection, plan: Plan, on_step: Step | None = None) -> DreamReport:
        """Step 3: everything the cycle changes and its snapshot, in one transaction."""
        (on_step or _silent)("writing")
        decisions = Decisions(self._config.max_reported)
        now = self._clock()
        material = plan.material
        with transaction(conn, journal=False):
            self._check_unchanged(conn, material)
            recorder = journal.Recorder(conn)
            try:
                cycle = self._consolidate(conn, plan, decisions, now)
                own = recorder.changeset()
            finally:
                recorder.close()
            report = {
                "trigger": plan.trigger,
                "cycle": cycle,
                "started_at": plan.started_at,
                "released": plan.released,
                "formed": plan.formed,
                "material": material.counts(),
                "decisions": [d.model_dump(mode="json") for d in decisions.kept],
                "totals": decisions.totals,
                "failures": plan.failures,
                "judge": self._judge.label,
            }
            snapshot = history.fold(conn, kind="cycle", now=now, report=report, own=own)
            history_rows.bump(conn)
            history_rows.prune(conn, self._config.keep_snapshots)
            row = history_rows.snapshot(conn, snapshot)
            assert row is not None
            generation = history_rows.state(conn).generation
        return DreamReport(
            snapshot=snapshot,
            cycle=cycle,
            trigger=plan.trigger,
            started_at=plan.started_at,
            elapsed_ms=round((time.perf_counter() - plan.began) * 1000, 3),
            released=plan.released,
            formed=plan.formed,
            material=material.counts(),
            decisions=decisions.kept,
            totals=decisions.totals,
            failures=plan.failures,
            rows_changed=row.rows_changed,
            snapshot_bytes=row.bytes,
            generation=generation,
        )

    def _judged(
        self, decide: Callable[[], list[Verdict]], count: int, failures: list[str]
    ) -> list[Verdict]:
        """The judge's verdicts on ``count`` pairs; all "keep" when it failed (reported)."""
        if not count:
            return []
        try:
            return decide()
        except JudgeFailure as exc:
            failures.append(f"{self._judge.label}: {exc}; {count} pairs left as they are")
            return [Verdict("keep", f"not decided: {exc}") for _ in range(count)]

    def _check_unchanged(self, conn: Connection, material: Material) -> None:
        state = rows.state(conn)
        generation = history_rows.state(conn).generation
        if state["cycle"] != material.state["cycle"] or generation != material.generation:
            raise DreamBusyError(
                "another consolidation cycle or a rollback committed while this cycle ran;"
                " nothing was applied"
            )

    def _consolidate(self, conn: Connection, plan: Plan, decisions: Decisions, now: float) -> int:
        """The cycle's writes (inside its transaction); returns the cycle's number."""
        material = plan.material
        cycle = int(material.state["cycle"]) + 1
        work = Consolidation(conn, self._config, cycle, now, decisions)
        label = self._judge.label
        work.entities(material.entity_pairs, plan.entity_verdicts, label)
        survivors = set(work.merged_into)
        work.review(survivors)
        work.contexts(material.context_pairs, plan.context_verdicts, label)
        work.strengthen(material.relations, survivors)
        pairs = work.reinforce(material.relations, survivors, int(material.state.get("pairs", 0)))
        work.report_mutations(material.mutations)
        rows.store_state(
            conn,
            {
                **{key: float(value) for key, value in material.upto.items()},
                "cycle": float(cycle),
                "pairs": float(pairs),
                "last_cycle_at": now,
            },
        )
        return cycle
