"""``GET /openapi.json``: the OpenAPI 3.1 description of every endpoint the proxy serves.

The paths are the route table's (:mod:`.routes`: each route's path, method and
operation, the same entries the router serves), and the schemas are the typed models the
handlers serve (:mod:`.schemas`, :mod:`memory_core.views`), so the document cannot drift
from the bodies or the routes: a handler that served another shape would fail its own
validation first, and a route the router serves is described or it is not a route. The
document is built once per conversation-header name (the only configuration it shows)
on first request, and served without authentication: it describes the API, never a
tenant's data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from memory_core import Diff, DreamReport

from .openapi_doors import DOOR_SCHEMAS
from .schemas import (
    AreaResponse,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ClusterTenants,
    ContextsResponse,
    EntitiesResponse,
    ErrorResponse,
    ForgetsResponse,
    Health,
    HeldResponse,
    ImportResponse,
    IngestRequest,
    IngestResponse,
    ModelList,
    Readiness,
    Receipt,
    ReceiptsResponse,
    RelationsResponse,
    RollbackRequest,
    RollbackResponse,
    SearchResponse,
    SnapshotDetail,
    SnapshotsResponse,
    StatsResponse,
    UpstreamErrorResponse,
)

__all__ = ["OPENAPI_VERSION", "Described", "document"]

OPENAPI_VERSION = "3.1.0"
Json = dict[str, Any]

_RESPONSES: tuple[type[BaseModel], ...] = (
    AreaResponse,
    ImportResponse,
    Diff,
    DreamReport,
    HeldResponse,
    RollbackResponse,
    SnapshotDetail,
    SnapshotsResponse,
    ChatCompletion,
    ChatCompletionChunk,
    ClusterTenants,
    ContextsResponse,
    EntitiesResponse,
    ErrorResponse,
    Health,
    IngestResponse,
    ModelList,
    Readiness,
    Receipt,
    ReceiptsResponse,
    ForgetsResponse,
    RelationsResponse,
    SearchResponse,
    StatsResponse,
    UpstreamErrorResponse,
)
_REQUESTS: tuple[type[BaseModel], ...] = (ChatCompletionRequest, IngestRequest, RollbackRequest)


class Described(Protocol):
    """A route as the document reads it: its method, its path (an OpenAPI template),
    and its operation given the conversation-header name."""

    @property
    def method(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def operation(self) -> Callable[[str], Json]: ...


def document(routes: Iterable[Described], conversation_header: str) -> Json:
    """The OpenAPI 3.1.0 document of ``routes``; ``conversation_header`` is
    ``memory.conversation_header``."""
    paths: Json = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = route.operation(
            conversation_header
        )
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "areamem",
            "version": "0.1.0",
            "summary": "OpenAI-compatible proxy that gives any chat client a long-term memory.",
        },
        "tags": [
            {
                "name": "chat",
                "description": "Chat with memory: OpenAI chat completions and Responses,"
                " Anthropic Messages.",
            },
            {"name": "service", "description": "Models, health, readiness, metrics."},
            {"name": "memory", "description": "The caller's memory: ingest, search, views."},
            {
                "name": "history",
                "description": "Consolidation cycles, snapshots, diffs, rollback.",
            },
            {"name": "inspector", "description": "The inspector page and its files."},
        ],
        "paths": paths,
        "components": {"schemas": _schemas(), "securitySchemes": _security_schemes()},
    }


def _schemas() -> Json:
    """Every model's JSON Schema (2020-12, as OpenAPI 3.1 uses), ``$defs`` hoisted."""
    modes: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        *((m, "serialization") for m in _RESPONSES),
        *((m, "validation") for m in _REQUESTS),
    ]
    _, top = models_json_schema(modes, ref_template="#/components/schemas/{model}")
    schemas: Json = {**top.get("$defs", {}), **DOOR_SCHEMAS}
    return dict(sorted(schemas.items()))


def _security_schemes() -> Json:
    return {
        "bearerAuth": {
            "type": "http",
            "scheme": "bearer",
            "description": "A proxy key (``auth.keys``); it selects the tenant.",
        },
        "apiKeyHeader": {
            "type": "apiKey",
            "in": "header",
            "name": "X-Api-Key",
            "description": "The same proxy key, for clients that send it this way.",
        },
    }
