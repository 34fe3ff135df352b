"""The time budget of one queued row (``formation.row_time_budget_s``).

A pass runs its stages over a batch of rows; each row is charged the time of the stage
calls made for it alone (normalisation, NER, relations) and an equal share of the calls
made for several rows at once (embedding, segmentation, mention vectors). Between stages
the pipeline drops the rows whose total exceeds the budget: they are recorded as failed
and the rest of the batch goes on. The budget is cooperative: a single backend call is
not interrupted, so each call must itself be bounded (the size caps of
:class:`.config.FormationConfig`, ``llm.timeout_s``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence

from .items import Item

__all__ = ["RowBudget"]


class RowBudget:
    """Seconds spent per row of one pass, against ``limit_s``."""

    def __init__(self, limit_s: float, timer: Callable[[], float] = time.perf_counter) -> None:
        self.limit_s = limit_s
        self._timer = timer
        self._spent: dict[int, float] = {}

    @contextlib.contextmanager
    def charge(self, items: Sequence[Item]) -> Iterator[None]:
        """Charge the block's duration to ``items``, shared equally."""
        began = self._timer()
        try:
            yield
        finally:
            share = (self._timer() - began) / max(len(items), 1)
            for item in items:
                self._spent[item.log_id] = self.spent(item) + share

    def spent(self, item: Item) -> float:
        """Seconds charged to ``item`` so far."""
        return self._spent.get(item.log_id, 0.0)

    def exceeded(self, item: Item) -> bool:
        return self.spent(item) > self.limit_s
