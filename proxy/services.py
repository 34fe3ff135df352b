"""Everything a request handler needs, built once per app and passed explicitly."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from policies import PolicyEngine, PolicyStore

from .config import Config
from .metrics import Metrics
from .requestlog import RequestLog
from .tenants import Tenants
from .upstream import Router

__all__ = ["SERVICES", "Services"]


@dataclass
class Services:
    """The app's long-lived parts. ``background`` holds post-answer work until done."""

    config: Config
    router: Router
    tenants: Tenants
    policies: PolicyStore
    engine: PolicyEngine
    metrics: Metrics
    log: RequestLog
    background: set[asyncio.Task[Any]] = field(default_factory=set)

    def spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` after the answer; kept referenced until it finishes."""
        task = asyncio.get_running_loop().create_task(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def drain(self) -> None:
        """Wait for all post-answer work (shutdown, tests)."""
        while self.background:
            for memory in self.tenants.opened():
                memory.hurry()  # formation waiting for a quiet moment starts now
            await asyncio.gather(*list(self.background), return_exceptions=True)


SERVICES: web.AppKey[Services] = web.AppKey("services", Services)
