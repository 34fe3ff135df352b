"""The route table: every endpoint the proxy serves, with its handler and its OpenAPI
operation, read by the router (:func:`add_routes`) and by ``GET /openapi.json``
(:func:`build_document`) alike, so neither can list a route the other lacks.

Authentication is each handler's (the tenant comes from the key); ``/openapi.json`` and
the inspector page are open: they describe the API and hold no tenant's data (the page
calls the ``/memory`` API with the key typed into it).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from aiohttp import web

from ..chat.handler import chat_completions, route_of
from ..doors.messages import MESSAGES
from ..doors.responses import RESPONSES
from ..services import SERVICES
from . import history, memory, operations, receipts, service, transfer, ui
from .openapi import document

__all__ = ["ROUTES", "Route", "add_routes", "build_document", "openapi_json"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Json = dict[str, Any]


@dataclass(frozen=True)
class Route:
    """One endpoint: ``path`` as OpenAPI writes it (``pattern``: the router's, where it
    says more, ``{file:.*}``), its handler, and its operation given the
    conversation-header name."""

    method: Literal["GET", "POST"]
    path: str
    handler: Handler
    operation: Callable[[str], Json]
    pattern: str | None = None


def _fixed(operation: Callable[[], Json]) -> Callable[[str], Json]:
    """An operation the conversation header does not change."""
    return lambda _header: operation()


def _renamed(operation: Callable[[str], Json], operation_id: str) -> Callable[[str], Json]:
    """The same operation under another id (one handler served at two paths)."""
    return lambda header: {**operation(header), "operationId": operation_id}


async def openapi_json(request: web.Request) -> web.Response:
    """The document (built once, then served as the same bytes)."""
    header = request.app[SERVICES].config.memory.conversation_header
    return web.Response(body=_body(header), content_type="application/json")


ROUTES: tuple[Route, ...] = (
    Route("POST", "/v1/chat/completions", chat_completions, operations.chat),
    Route(
        "POST",
        "/chat/completions",
        chat_completions,
        _renamed(operations.chat, "createChatCompletionUnversioned"),
    ),
    Route("POST", "/v1/messages", route_of(MESSAGES), operations.messages),
    Route("POST", "/v1/responses", route_of(RESPONSES), operations.responses),
    Route("GET", "/v1/models", service.models, _fixed(operations.models)),
    Route("GET", "/healthz", service.healthz, _fixed(operations.health)),
    Route("GET", "/readyz", service.readyz, _fixed(operations.ready)),
    Route("GET", "/metrics", service.metrics, _fixed(operations.metrics)),
    Route("GET", "/cluster/tenants", service.cluster_tenants, _fixed(operations.cluster_tenants)),
    Route("POST", "/memory/ingest", memory.ingest, _fixed(operations.ingest)),
    Route("GET", "/memory/search", memory.search, _fixed(operations.search)),
    Route("GET", "/memory/stats", memory.stats, _fixed(operations.stats)),
    Route("GET", "/memory/entities", memory.entities, _fixed(operations.entities)),
    Route("GET", "/memory/contexts", memory.contexts, _fixed(operations.contexts)),
    Route("GET", "/memory/relations", memory.relations, _fixed(operations.relations)),
    Route("GET", "/memory/area", memory.area, _fixed(operations.area)),
    Route("GET", "/memory/receipts", receipts.recent, _fixed(operations.receipts)),
    Route("GET", "/memory/forgets", receipts.forgets, _fixed(operations.forgets)),
    Route("GET", "/memory/receipts/{receipt_id}", memory.receipt, _fixed(operations.receipt)),
    Route("POST", "/memory/dream", history.dream, _fixed(operations.dream)),
    Route("GET", "/memory/snapshots", history.snapshots, _fixed(operations.snapshots)),
    Route("GET", "/memory/snapshots/{snapshot}", history.snapshot, _fixed(operations.snapshot)),
    Route("GET", "/memory/snapshots/{a}/diff/{b}", history.diff, _fixed(operations.diff)),
    Route("POST", "/memory/rollback", history.rollback, _fixed(operations.rollback)),
    Route("GET", "/memory/held", history.held, _fixed(operations.held)),
    Route("GET", "/memory/export", transfer.export, _fixed(operations.export)),
    Route("POST", "/memory/import", transfer.import_, _fixed(operations.import_)),
    Route("GET", "/openapi.json", openapi_json, _fixed(operations.openapi)),
    Route("GET", "/ui", ui.page, _fixed(operations.ui_page)),
    Route("GET", "/ui/{file}", ui.file, _fixed(operations.ui_file), pattern="/ui/{file:.*}"),
)
"""Every endpoint, in the order the document lists them."""


def add_routes(app: web.Application, ui_folder: Path = ui.STATIC) -> None:
    """Route every entry of :data:`ROUTES` on ``app``, the inspector's files read from
    ``ui_folder`` (raises FileNotFoundError when it has no ``index.html``)."""
    ui.mount(app, ui_folder)
    for route in ROUTES:
        app.router.add_route(route.method, route.pattern or route.path, route.handler)


def build_document(conversation_header: str = "X-Conversation-Id") -> Json:
    """The OpenAPI document of :data:`ROUTES` (see :mod:`.openapi`)."""
    return document(ROUTES, conversation_header)


@functools.lru_cache(maxsize=4)
def _body(conversation_header: str) -> bytes:
    return json.dumps(build_document(conversation_header)).encode()
