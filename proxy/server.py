"""The proxy listening: the lean front on the socket, aiohttp behind it.

One listening socket; every connection starts with :mod:`proxy.http.front`, which answers the
chat requests it fully understands and hands anything else, with the connection, to
aiohttp's server of the same app (same services, same limits). Shutdown closes the
front's connections first (in-flight answers get ``server.shutdown_grace_s``), then
aiohttp's and the app's (post-answer work, formation).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from .app import create_runner
from .http.front import FrontServer
from .services import Services

__all__ = ["ProxyServer"]


class ProxyServer:
    """The app of ``services``, served on ``host:port`` once :meth:`start` returns."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.runner: web.AppRunner = create_runner(services)
        self._front: FrontServer | None = None
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> None:
        """Set the app up (its start-up work begins) and listen; raises OSError when the
        address cannot be bound."""
        await self.runner.setup()
        server = self.runner.server
        assert server is not None
        self._front = FrontServer(self.services, server)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._front.protocol, host, port, backlog=128, reuse_address=True
        )

    @property
    def front(self) -> FrontServer:
        assert self._front is not None
        return self._front

    @property
    def port(self) -> int:
        """The bound port (the one chosen when ``port`` was 0)."""
        assert self._server is not None
        sockname = self._server.sockets[0].getsockname()
        return int(sockname[1])

    async def close(self) -> None:
        """Stop listening, let in-flight requests finish within the grace, stop the app."""
        if self._server is not None:
            self._server.close()
        if self._front is not None:
            await self._front.shutdown(self.services.config.server.shutdown_grace_s)
        await self.runner.cleanup()
