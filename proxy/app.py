"""The aiohttp application: routes, error middleware, startup recovery, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from memory_core import MemoryCoreError, default_counter
from memory_core.formation import Backends, build_backends
from policies import PolicyEngine, PolicyError, PolicyStore

from . import admin
from .chat import chat_completions
from .config import Config
from .errors import ApiError, error_body
from .metrics import Metrics
from .requestlog import RequestLog
from .services import SERVICES, Services
from .tenants import Tenants
from .upstream import Router, Upstream, build_upstream

__all__ = ["build_services", "create_app"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def build_services(
    config: Config,
    upstreams: list[Upstream] | None = None,
    backends: Backends | None = None,
) -> Services:
    """Wire the app's parts from ``config``; raises PolicyError for a bad initial policy
    and BackendError for a formation model that cannot be loaded."""
    log = RequestLog(config.log_file if config.logging.file else None, stdout=config.logging.stdout)

    def policy_failed(error: PolicyError) -> None:
        log.write(
            {
                "event": "policy_reload_failed",
                "file": error.file,
                "line": error.line,
                "error": error.message,
                "kept": "previous policy",
            }
        )

    def policy_reloaded(policy: object) -> None:
        log.write({"event": "policy_reloaded", "file": str(config.policy_path)})

    policies = PolicyStore(
        str(config.policy_path),
        root_key=config.policy_key,
        on_error=policy_failed,
        on_reload=policy_reloaded,
    )
    return Services(
        config=config,
        router=Router(
            upstreams if upstreams is not None else [build_upstream(u) for u in config.upstreams]
        ),
        tenants=Tenants(
            config.server.data_dir,
            default_counter(),
            config.formation,
            backends or build_backends(config.formation),
            graph=config.retrieval,
            warm_graph=config.memory.retrieval == "area",
            events=log.write,
        ),
        policies=policies,
        engine=PolicyEngine(lambda: policies.current),
        metrics=Metrics(),
        log=log,
    )


def create_app(services: Services) -> web.Application:
    """The proxy app around already-built services."""
    app = web.Application(
        client_max_size=services.config.server.max_body_bytes,
        middlewares=[_errors],
    )
    app[SERVICES] = services
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/chat/completions", chat_completions)
    app.router.add_get("/v1/models", admin.models)
    app.router.add_get("/healthz", admin.healthz)
    app.router.add_get("/metrics", admin.metrics)
    app.router.add_post("/memory/ingest", admin.ingest)
    app.router.add_get("/memory/search", admin.search)
    app.router.add_get("/memory/stats", admin.stats)
    app.router.add_get("/memory/entities", admin.entities)
    app.router.add_get("/memory/contexts", admin.contexts)
    app.router.add_get("/memory/relations", admin.relations)
    app.router.add_get("/memory/area", admin.area)
    app.router.add_get("/memory/receipts/{receipt_id}", admin.receipt)
    app.cleanup_ctx.append(_lifecycle)
    return app


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    svc = app[SERVICES]
    watcher = asyncio.get_running_loop().create_task(svc.policies.watch(1.0))
    svc.spawn(_recover(svc))
    yield
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watcher
    await svc.drain()
    await svc.router.close()
    svc.tenants.close()
    svc.log.close()


async def _recover(svc: Services) -> None:
    """Form memory from log rows a previous run appended but did not process."""
    for tenant in svc.tenants.existing():
        try:
            formed = await svc.tenants.get(tenant).form()
        except MemoryCoreError as exc:
            svc.metrics.memory_failures.labels(stage="recovery").inc()
            svc.log.write({"event": "recovery_failed", "tenant": tenant, "error": str(exc)})
            continue
        if formed:
            svc.log.write({"event": "recovered", "tenant": tenant, "formed": formed})


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error leaves as an OpenAI-style error object."""
    svc = request.app[SERVICES]
    try:
        return await handler(request)
    except ApiError as exc:
        return web.Response(status=exc.status, body=exc.body(), content_type="application/json")
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        kind = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}.get(
            exc.status, "http_error"
        )
        message = f"{exc.reason}: {request.method} {request.path}"
        return web.Response(
            status=exc.status,
            body=error_body(message, type_="invalid_request_error", code=kind),
            content_type="application/json",
        )
    except Exception as exc:
        svc.metrics.errors.labels(kind="internal").inc()
        svc.log.write({"event": "internal_error", "path": request.path, "error": repr(exc)})
        return web.Response(
            status=500,
            body=error_body(
                f"internal error in the proxy: {type(exc).__name__}",
                type_="server_error",
                code="internal_error",
            ),
            content_type="application/json",
        )
