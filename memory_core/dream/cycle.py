"""One consolidation cycle: read what is new, judge the candidates, write, snapshot.

1. **Read** (one read transaction, no write lock): the material formed since the last
   cycle and the candidate pairs (:mod:`.candidates`).
2. **Judge** (no transaction): the backend decides every candidate (:mod:`.judges`); a
   model that fails leaves its pairs as they are and the failure is reported.
3. **Write** (one transaction): merges, reviews, links, strengths, reinforcement
   (:mod:`.consolidate`), the Dreamer's state moved to the material read, then the
   snapshot that folds in the journal (formation since the previous snapshot) and this
   cycle's own change (:func:`memory_core.history.fold`), a new generation, and old
   snapshots pruned. A crash at any point leaves the previous snapshot current and the
   store as it was before this transaction.

The write re-checks that no other cycle or rollback committed since the read (the
caller holds the tenant's lock, :mod:`memory_core.exclusive`, so this is a guard against
another writer that ignores it) and applies nothing if one did. Rows formed while the
cycle ran (row ids above what was read) are examined by the next one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .. import history
from ..errors import DreamBusyError
from ..storage import Connection, journal, read_snapshot, transaction
from ..storage import dream as rows
from ..storage import history as history_rows
from .candidates import Material, read_material
from .config import DreamConfig
from .consolidate import Consolidation, Decisions
from .judges import Judge, JudgeFailure, Verdict
from .report import DreamReport

__all__ = ["Dreamer", "Step"]

Step = Callable[[str], None]
"""Told each step of a cycle as it starts (``reading``, ``judging``, ``writing``)."""


class Dreamer:
    """Runs consolidation cycles on ``conn`` (a store's formation connection; the caller
    serialises cycles, formation passes and rollbacks on it)."""

    def __init__(
        self,
        conn: Connection,
        config: DreamConfig,
        judge: Judge,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._conn, self._config, self._judge, self._clock = conn, config, judge, clock

    def run(
        self,
        *,
        trigger: str,
        formed: int = 0,
        released: int = 0,
        on_step: Step | None = None,
    ) -> DreamReport:
        """One cycle; the report of what it did (also kept with its snapshot)."""
        step = on_step or (lambda _: None)
        began, started_at = time.perf_counter(), self._clock()
        step("reading")
        with read_snapshot(self._conn, "cannot read memory for a consolidation cycle"):
            generation = history_rows.state(self._conn).generation
            material = read_material(self._conn, self._config, generation)
        step("judging")
        failures: list[str] = []
        entity_verdicts = self._judged(
            lambda: self._judge.entities(material.entity_pairs),
            len(material.entity_pairs),
            failures,
        )
        context_verdicts = self._judged(
            lambda: self._judge.contexts(material.context_pairs),
            len(material.context_pairs),
            failures,
        )
        step("writing")
        decisions = Decisions(self._config.max_reported)
        now = self._clock()
        with transaction(self._conn, journal=False):
            self._check_unchanged(material)
            recorder = journal.Recorder(self._conn)
            try:
                cycle = self._consolidate(
                    material, entity_verdicts, context_verdicts, decisions, now
                )
                own = recorder.changeset()
            finally:
                recorder.close()
            report = {
                "trigger": trigger,
                "cycle": cycle,
                "started_at": started_at,
                "released": released,
                "formed": formed,
                "material": material.counts(),
                "decisions": [d.model_dump(mode="json") for d in decisions.kept],
                "totals": decisions.totals,
                "failures": failures,
                "judge": self._judge.label,
            }
            snapshot = history.fold(self._conn, kind="cycle", now=now, report=report, own=own)
            history_rows.bump(self._conn)
            history_rows.prune(self._conn, self._config.keep_snapshots)
            row = history_rows.snapshot(self._conn, snapshot)
            assert row is not None
            new_generation = history_rows.state(self._conn).generation
        return DreamReport(
            snapshot=snapshot,
            cycle=cycle,
            trigger=trigger,
            started_at=started_at,
            elapsed_ms=round((time.perf_counter() - began) * 1000, 3),
            released=released,
            formed=formed,
            material=material.counts(),
            decisions=decisions.kept,
            totals=decisions.totals,
            failures=failures,
            rows_changed=row.rows_changed,
            snapshot_bytes=row.bytes,
            generation=new_generation,
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

    def _check_unchanged(self, material: Material) -> None:
        state = rows.state(self._conn)
        generation = history_rows.state(self._conn).generation
        if state["cycle"] != material.state["cycle"] or generation != material.generation:
            raise DreamBusyError(
                "another consolidation cycle or a rollback committed while this cycle ran;"
                " nothing was applied"
            )

    def _consolidate(
        self,
        material: Material,
        entity_verdicts: list[Verdict],
        context_verdicts: list[Verdict],
        decisions: Decisions,
        now: float,
    ) -> int:
        """The cycle's writes (inside its transaction); returns the cycle's number."""
        cycle = int(material.state["cycle"]) + 1
        work = Consolidation(self._conn, self._config, cycle, now, decisions)
        label = self._judge.label
        work.entities(material.entity_pairs, entity_verdicts, label)
        survivors = set(work.merged_into)
        work.review(survivors)
        work.contexts(material.context_pairs, context_verdicts, label)
        work.strengthen(material.relations, survivors)
        pairs = work.reinforce(material.relations, survivors, int(material.state.get("pairs", 0)))
        work.report_mutations(material.mutations)
        rows.store_state(
            self._conn,
            {
                **{key: float(value) for key, value in material.upto.items()},
                "cycle": float(cycle),
                "pairs": float(pairs),
                "last_cycle_at": now,
            },
        )
        return cycle
