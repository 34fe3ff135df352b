"""The proxy listening: the lean front on the socket, aiohttp behind it.

One listening socket; every connection starts with :mod:`proxy.http.front`, which answers the
chat requests it fully understands and hands anything else, with the connection, to
aiohttp's server of the same app (same services, same limits). Shutdown closes the
front's connections first (in-flight answers get ``server.shutdown_grace_s``), then
aiohttp's and the app's (post-answer work, formation).

The address is bound before anything starts (no start-up work, no ``ready`` line): a
port another process holds is a :class:`~proxy.errors.ListenError` at once.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Sequence

from aiohttp import web

from .app import create_runner
from .errors import ListenError
from .http.front import FrontServer
from .services import Services

__all__ = ["ProxyServer", "bind"]


class ProxyServer:
    """The app of ``services``, served on ``host:port`` once :meth:`start` returns."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.runner: web.AppRunner = create_runner(services)
        self._front: FrontServer | None = None
        self._servers: list[asyncio.Server] = []
        self._set_up = False

    async def start(
        self, host: str, port: int, sockets: Sequence[socket.socket] | None = None
    ) -> None:
        """Bind ``host:port`` (or take ``sockets``, bound by :func:`bind`): raises
        :class:`ListenError` when it cannot be bound, before any start-up work; then set
        the app up (its start-up work begins) and accept connections."""
        loop = asyncio.get_running_loop()
        for sock in sockets if sockets is not None else bind(host, port):
            listening = await loop.create_server(
                self._connection, sock=sock, backlog=128, start_serving=False
            )
            self._servers.append(listening)
        self._set_up = True
        await self.runner.setup()
        app_server = self.runner.server
        assert app_server is not None
        self._front = FrontServer(self.services, app_server)
        for listening in self._servers:
            await listening.start_serving()

    def _connection(self) -> asyncio.Protocol:
        return self.front.protocol()

    @property
    def front(self) -> FrontServer:
        assert self._front is not None
        return self._front

    @property
    def port(self) -> int:
        """The bound port (the one chosen when ``port`` was 0)."""
        sockname = self._servers[0].sockets[0].getsockname()
        return int(sockname[1])

    async def close(self) -> None:
        """Stop listening, let in-flight requests finish within the grace, stop the app."""
        for listening in self._servers:
            listening.close()
        if not self._set_up:  # the address was not bound: nothing started
            return
        if self._front is not None:
            await self._front.shutdown(self.services.config.server.shutdown_grace_s)
        await self.runner.cleanup()


def bind(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address ``host`` names, on ``port`` (listening once the
    proxy starts); raises :class:`ListenError` naming the address when one cannot be."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise ListenError(_cannot(host, port, exc)) from exc
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(found):
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:
        for sock in bound:
            sock.close()
        raise ListenError(_cannot(host, port, exc)) from exc
    return bound


def _cannot(host: str, port: int, exc: OSError) -> str:
    shown = f"[{host}]" if ":" in host else host
    reason = exc.strerror or str(exc)
    if exc.errno == errno.EADDRINUSE:
        reason += " (another areamem, or another server, holds it: stop it or use --port)"
    return f"cannot listen on {shown}:{port}: {reason}"
