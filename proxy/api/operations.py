"""The OpenAPI operation of every endpoint the proxy serves (see :mod:`.routes`, which
pairs each with its path and handler, and :mod:`.openapi`, which assembles the document).

Each function returns one operation object; the chat doors take the conversation-header
name (``memory.conversation_header``), the only configuration the document shows.
Authentication: with ``auth.mode: keys`` every ``/v1`` and ``/memory`` endpoint (and
``/metrics`` with ``auth.metrics: keys``) wants a proxy key, as ``Authorization: Bearer``
or ``X-Api-Key``; with ``auth.mode: open`` none does. Hence each secured operation lists
both schemes and the empty requirement ``{}``.
"""

from __future__ import annotations

from typing import Any

from memory_core import STRATEGIES

from ..chat.handler import AS_OF_HEADER, RECEIPT_HEADER
from ..http.body import MAX_CONVERSATION_ID

__all__ = [
    "area",
    "chat",
    "cluster_tenants",
    "contexts",
    "diff",
    "dream",
    "entities",
    "export",
    "forgets",
    "health",
    "held",
    "import_",
    "ingest",
    "messages",
    "metrics",
    "models",
    "openapi",
    "ready",
    "receipt",
    "receipts",
    "relations",
    "responses",
    "rollback",
    "search",
    "snapshot",
    "snapshots",
    "stats",
    "ui_file",
    "ui_page",
]

Json = dict[str, Any]
_SECURED: list[Json] = [{"bearerAuth": []}, {"apiKeyHeader": []}, {}]
_PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"


# --- building blocks ---------------------------------------------------------------------


def _ref(name: str) -> Json:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(description: str, schema: Json, headers: Json | None = None) -> Json:
    response: Json = {
        "description": description,
        "content": {"application/json": {"schema": schema}},
    }
    if headers:
        response["headers"] = headers
    return response


def _error(description: str, headers: Json | None = None) -> Json:
    return _json(description, _ref("ErrorResponse"), headers)


def _relayed(description: str, headers: Json | None = None) -> Json:
    """An error the proxy answers itself or relays from the upstream as it came."""
    schema = {"anyOf": [_ref("ErrorResponse"), _ref("UpstreamErrorResponse")]}
    return _json(description, schema, headers)


_RETRY_AFTER: Json = {
    "Retry-After": {
        "description": "Seconds to wait before retrying (relayed from the upstream, or ours).",
        "schema": {"type": "string"},
    }
}
_INTERNAL = _error("A defect in the proxy, answered as an error object (its type only).")
_UNAUTHORIZED = _error("Missing or unknown proxy key (``auth.mode: keys``).")


def _query(name: str, description: str, schema: Json, *, required: bool = False) -> Json:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": schema,
    }


def _integer(low: int, high: int, default: int) -> Json:
    return {"type": "integer", "minimum": low, "maximum": high, "default": default}


def _question() -> Json:
    return _query("q", "The question.", {"type": "string", "minLength": 1}, required=True)


def _limit() -> Json:
    return _query("limit", "Most rows returned.", _integer(1, 10_000, 100))


def _operation(
    operation_id: str,
    summary: str,
    tag: str,
    responses: Json,
    *,
    secured: bool = True,
    parameters: list[Json] | None = None,
    body: Json | None = None,
) -> Json:
    """One operation; a secured one answers 401 for a missing or unknown key, and every
    operation can answer a 500 (the error middleware's answer to a defect)."""
    operation: Json = {"operationId": operation_id, "summary": summary, "tags": [tag]}
    if parameters:
        operation["parameters"] = parameters
    if body is not None:
        operation["requestBody"] = body
    if secured:
        operation["security"] = _SECURED
        responses = {**responses, "401": _UNAUTHORIZED}
    operation["responses"] = dict(sorted({**responses, "500": _INTERNAL}.items()))
    return operation


_RECEIPT: Json = {
    RECEIPT_HEADER: {
        "description": "The receipt id, when memory was consulted "
        "(``GET /memory/receipts/{receipt_id}``).",
        "schema": {"type": "string"},
    }
}


def chat(conversation_header: str) -> Json:
    stream = {
        "schema": {"type": "string"},
        "x-sse-data": {"oneOf": [_ref("ChatCompletionChunk"), _ref("ErrorResponse")]},
    }
    ok = {
        "description": "The upstream's answer, relayed as it arrives: a chat completion, or "
        "with ``stream: true`` server-sent events (each ``data:`` a chunk, the last "
        "``data: [DONE]``; an upstream failure mid-stream is one ``data:`` error object).",
        "headers": _RECEIPT,
        "content": {
            "application/json": {"schema": _ref("ChatCompletion")},
            "text/event-stream": stream,
        },
    }
    parameters = [
        {
            "name": "X-Memory",
            "in": "header",
            "description": "``force`` consults memory, ``off`` neither consults nor stores "
            "the exchange, ``auto`` (or absent) lets the trigger policy decide.",
            "schema": {"type": "string", "examples": ["auto", "force", "off"]},
        },
        {
            "name": conversation_header,
            "in": "header",
            "description": "Explicit conversation id (else derived from the first messages).",
            "schema": {"type": "string", "minLength": 1, "maxLength": MAX_CONVERSATION_ID},
        },
        {
            "name": AS_OF_HEADER,
            "in": "header",
            "description": "A snapshot id: memory is read as it was at that snapshot (the "
            "current memory is neither read nor changed; the exchange is still stored). "
            "Not a snapshot of the tenant: 400 ``snapshot_not_found``.",
            "schema": {"type": "integer", "minimum": 1},
        },
    ]
    body = {
        "required": True,
        "content": {"application/json": {"schema": _ref("ChatCompletionRequest")}},
    }
    responses = {
        "200": ok,
        "400": _relayed("Invalid request body (or the upstream's own 400)."),
        "404": _relayed("No upstream routes the model (``model_not_found``)."),
        "408": _error("The body did not arrive within ``server.body_timeout_s``."),
        "413": _error("The body is larger than ``server.max_body_bytes``."),
        "415": _error("The body's declared media type is not JSON."),
        "502": _relayed("The upstream is unreachable, failed, or refused our credentials."),
        "504": _relayed("The upstream did not answer in time."),
        "4XX": _relayed("Another error status of the upstream, relayed.", _RETRY_AFTER),
        "5XX": _relayed("Another error status of the upstream, relayed.", _RETRY_AFTER),
    }
    return _operation(
        "createChatCompletion",
        "Chat completion with memory: decide, recall, inject, forward, store. The query "
        "string is forwarded to the upstream as sent. A client that leaves before the "
        "answer ends is logged with status 499 (no response is sent).",
        "chat",
        responses,
        parameters=parameters,
        body=body,
    )


def _chat_headers(conversation_header: str) -> list[Json]:
    return [p for p in chat(conversation_header)["parameters"] if p["in"] == "header"]


def messages(conversation_header: str) -> Json:
    """``POST /v1/messages``: every answer, errors included, in Anthropic's shape."""
    stream = {
        "schema": {"type": "string"},
        "x-sse-events": "Anthropic's: message_start, content_block_start/delta/stop, "
        "message_delta, message_stop; a failure midway ends with an error event.",
    }
    ok = {
        "description": "The answer: a message, or with ``stream: true`` Anthropic's event "
        "sequence (relayed from an upstream that serves this API, else made from the chat "
        "completion of the routed upstream).",
        "headers": _RECEIPT,
        "content": {"application/json": {"schema": _ref("Message")}, "text/event-stream": stream},
    }
    error = _ref("AnthropicError")
    responses = {
        "200": ok,
        "400": _json("Invalid request body (``invalid_request_error``).", error),
        "404": _json("No upstream routes the model.", error),
        "4XX": _json("Another error status, the proxy's or the upstream's.", error),
        "5XX": _json("The upstream failed or did not answer in time.", error),
    }
    operation = _operation(
        "createMessage",
        "Anthropic Messages with memory (memory a text block of the last user turn, or "
        "a message before it when bridged to chat completions). The key may come as "
        "``x-api-key``.",
        "chat",
        responses,
        parameters=_chat_headers(conversation_header),
        body={"required": True, "content": {"application/json": {
            "schema": _ref("MessagesRequest")}}},
    )  # fmt: skip
    operation["responses"]["401"] = _json("Missing or unknown proxy key.", error)
    operation["responses"]["500"] = _json("A defect in the proxy.", error)
    return operation


def responses(conversation_header: str) -> Json:
    """``POST /v1/responses``: errors keep the OpenAI shape."""
    stream = {
        "schema": {"type": "string"},
        "x-sse-events": "The Responses API's typed events (response.created ... "
        "response.completed); a failure midway ends with an error event.",
    }
    ok = {
        "description": "The answer: a response, or with ``stream: true`` its event "
        "sequence (relayed from an upstream that serves this API, else made from the chat "
        "completion of the routed upstream).",
        "headers": _RECEIPT,
        "content": {
            "application/json": {"schema": _ref("Response")},
            "text/event-stream": stream,
        },
    }
    responses = {
        "200": ok,
        "400": _relayed(
            "Invalid request body, or a field only the Responses API can serve sent to an "
            "upstream reached through chat completions (``unsupported_parameter``)."
        ),
        "404": _relayed("No upstream routes the model (``model_not_found``)."),
        "4XX": _relayed("Another error status, the proxy's or the upstream's.", _RETRY_AFTER),
        "5XX": _relayed("The upstream failed or did not answer in time.", _RETRY_AFTER),
    }
    return _operation(
        "createResponse",
        "OpenAI Responses with memory (an input message right before the latest user "
        "input item); forwarded raw to an upstream that serves the API, else bridged.",
        "chat",
        responses,
        parameters=_chat_headers(conversation_header),
        body={"required": True, "content": {"application/json": {
            "schema": _ref("ResponsesRequest")}}},
    )  # fmt: skip


def models() -> Json:
    ok = _json("The models the proxy routes.", _ref("ModelList"))
    return _operation("listModels", "Models advertised by the config.", "service", {"200": ok})


def health() -> Json:
    ok = _json("The process serves (see ``status``).", _ref("Health"))
    return _operation("health", "Liveness.", "service", {"200": ok}, secured=False)


def ready() -> Json:
    responses = {
        "200": _json("Warm: models and graphs loaded.", _ref("Readiness")),
        "503": _json("Starting or stopping.", _ref("Readiness")),
    }
    return _operation("ready", "Readiness.", "service", responses, secured=False)


def metrics() -> Json:
    ok = {
        "description": "Prometheus text exposition format 0.0.4.",
        "content": {_PROMETHEUS: {"schema": {"type": "string"}}},
    }
    operation = _operation("metrics", "Prometheus metrics.", "service", {"200": ok})
    operation["description"] = "Wants a proxy key only with ``auth.metrics: keys``."
    return operation


def cluster_tenants() -> Json:
    ok = _json("This node's tenants (none outside a cluster).", _ref("ClusterTenants"))
    operation = _operation(
        "clusterTenants", "The tenants a cluster node holds.", "service", {"200": ok}
    )
    operation["description"] = "Wants a proxy key only with ``auth.metrics: keys``."
    return operation


def ingest() -> Json:
    form = _query(
        "form",
        "``wait``: form memory before answering; ``background``: answer once stored.",
        {"type": "string", "enum": ["wait", "background"], "default": "wait"},
    )
    body = {"required": True, "content": {"application/json": {"schema": _ref("IngestRequest")}}}
    responses = {
        "200": _json("What was stored.", _ref("IngestResponse")),
        "400": _error("Invalid body or parameter."),
        "408": _error("The body did not arrive within ``server.body_timeout_s``."),
        "413": _error("The body is larger than ``server.max_body_bytes``."),
        "415": _error("The body's declared media type is not JSON."),
    }
    return _operation(
        "ingest",
        "Store a transcript as if it had passed through the proxy, then form memory.",
        "memory",
        responses,
        parameters=[form],
        body=body,
    )


def _as_of() -> Json:
    return _query(
        "as_of", "Answer from this snapshot's memory (the current one unchanged).", _snapshot_id()
    )


def _snapshot_id() -> Json:
    return {"type": "integer", "minimum": 1}


def search() -> Json:
    parameters = [
        _question(),
        _query("k", "Most fragments.", _integer(1, 200, 8)),
        _query("budget", "Token budget of the memory block.", _integer(1, 100_000, 600)),
        _query(
            "strategy",
            "The retrieval strategy: ``bm25`` (full text, the default) or ``area`` (what a "
            "chat's memory turn uses by default).",
            {"type": "string", "default": "bm25", "enum": list(STRATEGIES.names())},
        ),
        _as_of(),
    ]
    responses = {
        "200": _json("What retrieval found.", _ref("SearchResponse")),
        "400": _error("Missing ``q``, a parameter out of range or an unknown strategy."),
        "404": _error("``as_of`` names no snapshot of the tenant (``snapshot_not_found``)."),
        "503": _error("Memory is busy (``memory_busy``); retry.", _RETRY_AFTER),
    }
    return _operation(
        "search",
        "What retrieval returns for a question.",
        "memory",
        responses,
        parameters=parameters,
    )


def stats() -> Json:
    ok = _json("Sizes of the caller's memory.", _ref("StatsResponse"))
    return _operation("stats", "Sizes of the caller's memory.", "memory", {"200": ok})


def entities() -> Json:
    name = _query("name", "Only the entity with this name or alias.", {"type": "string"})
    return _inspection(
        "entities",
        "Entities with aliases and contexts.",
        _json("Entities, most mentioned first.", _ref("EntitiesResponse")),
        name,
    )


def contexts() -> Json:
    return _inspection(
        "contexts",
        "Contexts with conversations and samples.",
        _json("Contexts, largest first.", _ref("ContextsResponse")),
    )


def relations() -> Json:
    entity = _query(
        "entity", "Only relations of this entity (subject or object).", {"type": "string"}
    )
    return _inspection(
        "relations",
        "Relations with sources and mutation records.",
        _json("Relations by id.", _ref("RelationsResponse")),
        entity,
    )


def _inspection(operation_id: str, summary: str, ok: Json, *filters: Json) -> Json:
    """An inspection view: ``limit`` and its own filters; 400 for a ``limit`` out of range."""
    responses = {"200": ok, "400": _error("``limit`` out of range.")}
    return _operation(operation_id, summary, "memory", responses, parameters=[_limit(), *filters])


def area() -> Json:
    responses = {
        "200": _json("Foci, the chosen area with every score term, timings.", _ref("AreaResponse")),
        "400": _error("Missing ``q`` or ``k`` out of range."),
        "404": _error("``as_of`` names no snapshot of the tenant (``snapshot_not_found``)."),
        "503": _error(
            "Memory is busy (``memory_busy``: another process rolled it back or consolidated"
            " it, and its graph is being read again); retry.",
            _RETRY_AFTER,
        ),
    }
    return _operation(
        "area",
        "Why an area would be chosen for a question.",
        "memory",
        responses,
        parameters=[_question(), _query("k", "Most fragments.", _integer(1, 200, 8)), _as_of()],
    )


def receipt() -> Json:
    receipt_id = {
        "name": "receipt_id",
        "in": "path",
        "required": True,
        "description": f"The id a chat response's ``{RECEIPT_HEADER}`` header named.",
        "schema": {"type": "string"},
    }
    responses = {
        "200": _json("The receipt.", _ref("Receipt")),
        "404": _error("No such receipt for this tenant (``receipt_not_found``)."),
    }
    return _operation(
        "receipt",
        "What one chat request did with memory.",
        "memory",
        responses,
        parameters=[receipt_id],
    )


def _listing(name: str, summary: str, found: str, schema: str) -> Json:
    """A ``GET`` of the caller's newest rows of one kind, ``limit`` at most."""
    responses = {
        "200": _json(found, _ref(schema)),
        "400": _error("``limit`` out of range."),
    }
    return _operation(name, summary, "memory", responses, parameters=[_limit()])


def receipts() -> Json:
    return _listing(
        "receipts",
        "The caller's newest receipts: time, model, decision, what was found.",
        "The newest receipts, newest first.",
        "ReceiptsResponse",
    )


def forgets() -> Json:
    return _listing(
        "forgets",
        "What ``/memory forget`` forgot (in force, or undone by ``/memory unforget``).",
        "The forgets, newest first.",
        "ForgetsResponse",
    )


def openapi() -> Json:
    ok = _json("This document.", {"type": "object"})
    return _operation("openapi", "This OpenAPI document.", "service", {"200": ok}, secured=False)


# --- history -----------------------------------------------------------------------------

_BUSY = _error("A cycle or a rollback already runs for this tenant (``memory_busy``).")
_NO_SNAPSHOT = _error("No such snapshot for this tenant (``snapshot_not_found``).")


def _path_snapshot(name: str, description: str) -> Json:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": _snapshot_id(),
    }


def dream() -> Json:
    responses = {"200": _json("The cycle's report.", _ref("DreamReport")), "409": _BUSY}
    return _operation(
        "dream",
        "Run a consolidation cycle now: held messages released, everything queued formed, "
        "memory consolidated, a snapshot taken.",
        "history",
        responses,
    )


def snapshots() -> Json:
    parameters = [_limit(), _query("before", "Only snapshots older than this one.", _snapshot_id())]
    responses = {
        "200": _json("The newest snapshots, newest first.", _ref("SnapshotsResponse")),
        "400": _error("A parameter out of range."),
    }
    return _operation(
        "snapshots", "The snapshot chain.", "history", responses, parameters=parameters
    )


def snapshot() -> Json:
    responses = {
        "200": _json("The snapshot with its report.", _ref("SnapshotDetail")),
        "400": _error("Not a snapshot id."),
        "404": _NO_SNAPSHOT,
    }
    parameters = [_path_snapshot("snapshot", "The snapshot's id.")]
    return _operation("snapshot", "One snapshot.", "history", responses, parameters=parameters)


def diff() -> Json:
    parameters = [
        _path_snapshot("a", "From this snapshot's state."),
        _path_snapshot("b", "To this snapshot's state (either may be the older)."),
        _query("limit", "Most rows listed per section.", _integer(1, 10_000, 200)),
    ]
    responses = {
        "200": _json("Entities, relations, contexts added, removed, changed.", _ref("Diff")),
        "400": _error("Not a snapshot id, or ``limit`` out of range."),
        "404": _NO_SNAPSHOT,
    }
    return _operation(
        "diff", "What differs between two snapshots.", "history", responses, parameters=parameters
    )


def rollback() -> Json:
    body = {
        "required": True,
        "content": {"application/json": {"schema": _ref("RollbackRequest")}},
    }
    responses = {
        "200": _json("What the rollback did.", _ref("RollbackResponse")),
        "400": _error("Invalid body."),
        "404": _NO_SNAPSHOT,
        "409": _BUSY,
        "408": _error("The body did not arrive within ``server.body_timeout_s``."),
        "413": _error("The body is larger than ``server.max_body_bytes``."),
        "415": _error("The body's declared media type is not JSON."),
    }
    return _operation(
        "rollback",
        "Restore memory to a snapshot. The log is kept: messages it no longer holds the "
        "formation of are held until the next cycle (or formed at once with ``reform``). "
        "Recorded as a snapshot; the answer's ``undo`` names the snapshot to roll back to to"
        " undo it exactly.",
        "history",
        responses,
        body=body,
    )


def export() -> Json:
    responses = {
        "200": {
            "description": "The caller's memory as one file (``areamem import`` and"
            " ``POST /memory/import`` read it).",
            "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
        },
        "409": _error(
            "An export of this memory is already being written or sent (``export_busy``).",
            _RETRY_AFTER,
        ),
    }
    return _operation(
        "exportMemory",
        "The caller's memory (log and derived memory, with its history) as one file: a zip"
        " with a manifest (format ``areamem-export``, version, schema, rows and sha256 per"
        " part), read in one transaction.",
        "history",
        responses,
    )


def import_() -> Json:
    body = {
        "required": True,
        "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
    }
    responses = {
        "200": _json("What was loaded.", _ref("ImportResponse")),
        "400": _error(
            "Not a sound export of this schema (``invalid_export``: not an export, truncated,"
            " corrupt, a newer format version), or ``replace`` is not true or false."
        ),
        "408": _error("The body did not arrive within ``server.body_timeout_s``."),
        "409": _error(
            "The tenant already holds memory (``memory_not_empty``; ``replace=true`` replaces"
            " it), or a cycle or rollback runs (``memory_busy``)."
        ),
        "413": _error("The body is larger than ``server.max_body_bytes``."),
        "415": _error("The body's declared media type is not a zip (or octet stream)."),
    }
    replace = _query(
        "replace",
        "Replace what the tenant holds (default: refuse a tenant that holds memory).",
        {"type": "boolean", "default": False},
    )
    return _operation(
        "importMemory",
        "Load an export into the caller's memory, in one transaction: refused with nothing"
        " changed when the file is not a sound export or the tenant holds memory.",
        "history",
        responses,
        body=body,
        parameters=[replace],
    )


def held() -> Json:
    responses = {
        "200": _json("Held messages, oldest first.", _ref("HeldResponse")),
        "400": _error("``limit`` out of range."),
    }
    return _operation(
        "held",
        "Messages a rollback holds back from formation.",
        "history",
        responses,
        parameters=[_limit()],
    )


# --- inspector ---------------------------------------------------------------------------

_TEXT: Json = {"schema": {"type": "string"}}
_CACHED: Json = {
    "ETag": {"description": "The file's entity tag.", "schema": {"type": "string"}},
    "Cache-Control": {
        "description": "``no-cache``: revalidated each time.",
        "schema": {"type": "string"},
    },
}
_NOT_MODIFIED: Json = {"description": "``If-None-Match`` named the file's tag.", "headers": _CACHED}


def ui_page() -> Json:
    ok = {
        "description": "The inspector page (no data: it calls the ``/memory`` API with the "
        "key typed into it), with a Content-Security-Policy allowing this origin only.",
        "headers": {
            **_CACHED,
            "Content-Security-Policy": {
                "description": "The page's policy.",
                "schema": {"type": "string"},
            },
        },
        "content": {"text/html": _TEXT},
    }
    return _operation(
        "inspector",
        "The inspector page.",
        "inspector",
        {"200": ok, "304": _NOT_MODIFIED},
        secured=False,
    )


def ui_file() -> Json:
    file = {
        "name": "file",
        "in": "path",
        "required": True,
        "description": "A file of the page, by its exact name (``app.js``, ``vendor/…``); "
        "empty (``/ui/``, as in ``/ui/?q=...&tenant=...``) is the page itself.",
        "schema": {"type": "string"},
    }
    ok = {
        "description": "The file.",
        "headers": _CACHED,
        "content": {
            t: _TEXT
            for t in ("text/javascript", "text/css", "text/html", "text/plain", "image/svg+xml")
        },
    }
    responses = {"200": ok, "304": _NOT_MODIFIED, "404": _error("No such file (``not_found``).")}
    return _operation(
        "inspectorFile",
        "A file of the inspector page (only those of ``proxy/static/ui``).",
        "inspector",
        responses,
        secured=False,
        parameters=[file],
    )
