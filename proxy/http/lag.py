"""How late the event loop runs: what a time-budgeted step (a memory lookup) must allow for."""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["LoopLag"]


class LoopLag:
    """How late the event loop runs what is due: the worst lateness of the last five
    50 ms ticks (a quarter second or more). A loop this late delays every await by as
    much, so work that must fit a time budget (a memory lookup) is not started while
    it is high."""

    TICK_S = 0.05
    WINDOW = 5

    def __init__(self) -> None:
        self._samples: deque[float] = deque([0.0], maxlen=self.WINDOW)

    @property
    def recent_ms(self) -> float:
        return max(self._samples) * 1000

    def forget(self) -> None:
        """Drop the samples so far (the loop ran late while the process started up)."""
        self._samples.clear()
        self._samples.append(0.0)

    async def watch(self) -> None:
        """Sample until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.TICK_S
            await asyncio.sleep(self.TICK_S)
            self._samples.append(max(0.0, loop.time() - due))
