"""The aiohttp application: routes, error middleware, startup recovery, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from aiohttp import web

from memory_core import Backends, MemoryCoreError, build_backends
from memory_core.worker import WorkerSettings
from policies import PolicyEngine, PolicyError, PolicyStore

from .api.routes import add_routes
from .chat.handler import CLIENT_CLOSED
from .chat.ingest import replay_spool
from .cluster.leases import Leases, lease_store
from .cluster.placement import Placement
from .cluster.replays import SpoolReplays
from .cluster.replication import Litestream, litestream_binary
from .cluster.spool import MAX_ENTRY_BYTES, Spool
from .config import ClusterConfig, Config
from .errors import ApiError, ConfigError, error_body, internal_error_body
from .http.metrics import Metrics
from .http.request_log import RequestLog
from .http.server_log import UNPARSED, server_logger
from .services import SERVICES, Services
from .tenants.dreams import DreamScheduler
from .tenants.pool import tenants_of
from .tenants.workers import FormationWorkers
from .upstream.base import Upstream
from .upstream.probe import probe
from .upstream.router import Router, build_upstream

__all__ = ["build_services", "create_app", "create_runner"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_QUIET_LAG_MS = 20.0
"""An automatic consolidation cycle starts only while the event loop is at most this late
(a busier loop is answering requests: the cycle waits for the next quiet tick)."""
_SELF_LOGGED = frozenset(
    {"/v1/chat/completions", "/chat/completions", "/v1/messages", "/v1/responses", "/readyz"}
)
"""Routes whose failures are not logged here: chat logs every request itself, and a
503 from ``/readyz`` is its normal answer while starting."""


def build_services(
    config: Config,
    upstreams: list[Upstream] | None = None,
    backends: Backends | None = None,
) -> Services:
    """Wire the app's parts from ``config``; raises PolicyError for a bad initial policy,
    ConfigError for a data folder that cannot be made or written, and BackendError for
    a formation model that cannot be loaded."""
    log = _request_log(config)

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

    metrics = Metrics()
    workers = _formation_workers(config, metrics, log)
    policies = PolicyStore(
        str(config.policy_path),
        root_key=config.policy_key,
        on_error=policy_failed,
        on_reload=policy_reloaded,
    )
    tenants = tenants_of(
        config, backends or build_backends(config.formation), events=log.write, remote=workers
    )
    services = Services(
        config=config,
        router=Router(
            upstreams if upstreams is not None else [build_upstream(u) for u in config.upstreams]
        ),
        tenants=tenants,
        policies=policies,
        engine=PolicyEngine(lambda: policies.current),
        metrics=metrics,
        log=log,
        workers=workers,
    )
    if config.cluster is not None:
        _cluster(services, config.cluster)
    services.dreams = DreamScheduler(
        tenants,
        lambda: policies.current.dream,
        events=log.write,
        done=services.note_dream,
        failed=lambda: metrics.memory_failures.labels(stage="dream").inc(),
        quiet=lambda: services.state == "ready" and services.lag.recent_ms < _QUIET_LAG_MS,
    )
    return services


def _request_log(config: Config) -> RequestLog:
    """The data folder (made, owner only) and the request log in it; a folder that cannot
    be made or a log file that cannot be opened is a ConfigError naming
    ``server.data_dir``, never a traceback."""
    folder = config.server.data_dir
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return RequestLog(
            config.log_file if config.logging.file else None,
            stdout=config.logging.stdout,
            stdout_format=config.logging.format,
        )
    except OSError as exc:
        used = exc.filename or folder  # the folder, or what it holds (a file as logs/)
        raise ConfigError(
            str(config.source), "server.data_dir", f"cannot use {used}: {exc.strerror or exc}"
        ) from exc


_SOCKET_PATH_BYTES = 100


def _cluster(services: Services, cluster: ClusterConfig) -> None:
    """Serve tenants under leases, replicated by Litestream (:mod:`proxy.cluster.placement`): this
    node's own daemon, or an external one's control socket."""
    tenants = services.tenants
    workdir = services.config.server.data_dir / "litestream"
    litestream = Litestream(
        litestream_binary(), workdir, sync_interval_s=cluster.sync_interval_s
    )
    if cluster.litestream_socket is not None:
        litestream.socket_path = cluster.litestream_socket
    else:
        services.litestream = litestream
        if len(os.fsencode(litestream.socket_path)) > _SOCKET_PATH_BYTES:  # unix limit: 107
            digest = hashlib.sha256(os.fsencode(workdir.resolve())).hexdigest()[:16]
            litestream.socket_path = Path(tempfile.gettempdir()) / f"areamem-ls-{digest}.sock"
    placement = Placement(
        cluster,
        tenants.folder,
        Leases(lease_store(cluster.lease_root)),
        litestream,
        open_store=tenants.open_claimed,
        drop_store=tenants.drop,
        events=services.log.write,
        metrics=services.metrics,
    )
    tenants.placement = services.placement = placement
    spool = services.spool = Spool(
        services.config.server.data_dir / "spool",
        services.log.write,
        max_entry_bytes=max(MAX_ENTRY_BYTES, 4 * services.config.server.max_body_bytes),
    )
    services.metrics.spooled.labels(node=cluster.node).set_function(lambda: len(spool))
    services.replays = SpoolReplays(
        spool,
        lambda tenant: replay_spool(services.turns, tenant),
        node=cluster.node,
        low_s=cluster.spool_retry_min_s,
        high_s=cluster.spool_retry_max_s,
        events=services.log.write,
        metrics=services.metrics,
    )


def _formation_workers(
    config: Config, metrics: Metrics, log: RequestLog
) -> FormationWorkers | None:
    """The formation worker processes ``memory.formation_workers`` asks for (not started)."""
    count = config.memory.formation_workers
    if count == 0:
        return None
    settings = WorkerSettings(config.server.data_dir / "tenants", config.formation)
    return FormationWorkers(settings, count, metrics=metrics, events=log.write)


def create_runner(services: Services) -> web.AppRunner:
    """The app in a runner with the server's protections: a handler is cancelled when its
    client goes away (so is its upstream call), a connection that sends no complete
    request head within ``server.header_timeout_s`` (or idles that long) is closed,
    shutdown gives in-flight requests ``server.shutdown_grace_s``, and a head aiohttp
    cannot parse is a request-log record (:mod:`.http.server_log`), not a traceback."""
    server = services.config.server

    def unparsed(status: int) -> None:
        services.metrics.http_requests.labels(route=UNPARSED, status=str(status)).inc()

    return web.AppRunner(
        create_app(services),
        access_log=None,
        logger=server_logger(services.log, unparsed),  # a bad head: a record, no traceback
        handler_cancellation=True,
        keepalive_timeout=server.header_timeout_s,
        shutdown_timeout=server.shutdown_grace_s,
    )


def create_app(services: Services) -> web.Application:
    """The proxy app around already-built services."""
    app = web.Application(
        client_max_size=services.config.server.max_body_bytes,
        middlewares=[_errors],
    )
    app[SERVICES] = services
    add_routes(app)  # the route table (/openapi.json describes the same)
    app.cleanup_ctx.append(_lifecycle)
    return app


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    svc = app[SERVICES]
    loop = asyncio.get_running_loop()
    watchers = [loop.create_task(svc.policies.watch(1.0)), loop.create_task(svc.lag.watch())]
    if svc.dreams is not None:
        watchers.append(loop.create_task(svc.dreams.watch(1.0)))
    svc.start_workers()
    if svc.litestream is not None:
        await svc.litestream.start()
    if svc.placement is not None:
        await svc.placement.start()
    svc.spawn(_start(svc))
    svc.spawn(_check_upstreams(svc))
    yield
    for watcher in watchers:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    if svc.replays is not None:  # before the placement stops: its entries stay spooled
        await svc.replays.stop()
    finished = await svc.stop(svc.config.server.shutdown_grace_s)
    if svc.placement is not None:  # ship what each tenant has, then release it
        await svc.placement.stop()
    if svc.litestream is not None:
        await svc.litestream.stop()
    await svc.router.close()
    if finished:  # else a formation thread is still busy: closing would wait for it
        svc.tenants.close()
    svc.log.close()


async def _start(svc: Services) -> None:
    """Warm up (then report ready), then form what a previous run left queued."""
    began = time.perf_counter()
    # in a cluster, a database on disk is not this node's until it claims the tenant
    tenants = svc.tenants.existing() if svc.placement is None else []
    try:
        await asyncio.get_running_loop().run_in_executor(None, svc.tenants.warm_up, tenants)
    except Exception as exc:  # ready anyway: the first requests load what failed here
        svc.log.write({"event": "warm_up_failed", "error": f"{type(exc).__name__}: {exc}"})
    if svc.state == "starting":
        svc.lag.forget()  # warm-up's own lateness (models loading) says nothing of load
        svc.state = "ready"
    elapsed = round((time.perf_counter() - began) * 1000, 1)
    svc.log.write({"event": "ready", "warm_up_ms": elapsed, "tenants": len(tenants)})
    if svc.placement is None:  # a claimed tenant's queue is formed once it is open
        await _recover(svc)
    elif svc.replays is not None:  # exchanges answered while a claim ran, before a stop
        svc.replays.nudge()


async def _check_upstreams(svc: Services) -> None:
    """Check each upstream once, in the background (:mod:`.upstream.probe`): warned in
    the log when unreachable, its listed models advertised where the route asks none."""
    routes = svc.router.upstreams
    found = await asyncio.gather(*(probe(u.config, svc.log.write) for u in routes))
    for index, names in enumerate(found):
        if names is not None:
            svc.router.note_listed(index, names)


async def _recover(svc: Services) -> None:
    """Form memory from log rows a previous run appended but did not process (here, or
    by the tenant's formation worker)."""
    for tenant in svc.tenants.existing():
        memory = svc.tenants.get(tenant)
        began = time.perf_counter()
        reencoding = memory.store.reencoded
        try:
            if reencoding is not None:  # warm-up found vectors of another encoder
                formed = await _reencode(svc, tenant, reencoding)
            else:
                formed = await memory.form()
        except MemoryCoreError as exc:
            svc.metrics.memory_failures.labels(stage="recovery").inc()
            svc.log.write({"event": "recovery_failed", "tenant": tenant, "error": str(exc)})
            continue
        if reencoding is not None:
            seconds = round(time.perf_counter() - began, 1)
            svc.log.write({"event": "memory_reencoded", "tenant": tenant, "formed": formed,
                           "seconds": seconds})  # fmt: skip
        elif formed:
            svc.log.write({"event": "recovered", "tenant": tenant, "formed": formed})


REENCODE_PROGRESS_S = 10.0
"""How often a store being formed again for another encoder logs its progress."""


async def _reencode(svc: Services, tenant: str, reencoding: tuple[tuple[str, ...], int]) -> int:
    """Form again, from the log, a tenant's memory whose vectors another encoder made (the
    store queued every formed row when it was opened: ``MemoryStore.reencoded``), with a
    log line when it starts and one every :data:`REENCODE_PROGRESS_S` seconds: memory is
    partial until it is done, and a person upgrading should see why and for how long."""
    memory = svc.tenants.get(tenant)
    encoders, queued = reencoding
    encoder = memory.store.encoder_label
    svc.log.write({"event": "memory_reencoding", "tenant": tenant, "from": list(encoders),
                   "to": encoder, "queued": queued})  # fmt: skip
    loop = asyncio.get_running_loop()
    began = last = time.perf_counter()

    def progress(formed: int) -> None:  # on the formation thread
        nonlocal last
        now = time.perf_counter()
        if now - last < REENCODE_PROGRESS_S:
            return
        last = now
        line = {"event": "memory_reencoding_progress", "tenant": tenant, "formed": formed,
                "queued": queued, "seconds": round(now - began, 1)}  # fmt: skip
        loop.call_soon_threadsafe(svc.log.write, line)

    return await memory.form(on_pass=progress)


_HOMES = frozenset({"/", "/v1", "/v1/"})
"""Paths a person types into a browser: sent to the inspector (an API client asking
JSON still gets the 404 it always did)."""


def _browser_home(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return request.method == "GET" and request.path in _HOMES and "text/html" in accept


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every request is counted by route and status; every error leaves as an
    OpenAI-style error object, and one that is not the chat handler's (which logs its
    own) is logged."""
    svc = request.app[SERVICES]
    began = time.perf_counter()
    status = CLIENT_CLOSED
    try:
        response = await _answer(request, handler, svc)
        status = response.status
        return response
    finally:
        route = request.match_info.route.resource
        name = route.canonical if route is not None else "unmatched"
        svc.metrics.http_requests.labels(route=name, status=str(status)).inc()
        if status >= 400 and name not in _SELF_LOGGED:
            svc.log.write(
                {
                    "event": "http",
                    "method": request.method,
                    "path": request.path[:200],
                    "status": status,
                    "ms": round((time.perf_counter() - began) * 1000, 3),
                }
            )


async def _answer(request: web.Request, handler: Handler, svc: Services) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        return web.Response(
            status=exc.status,
            body=exc.body(),
            content_type="application/json",
            headers=exc.headers,
        )
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status == 404 and _browser_home(request):
            raise web.HTTPFound("/ui") from None
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
            status=500, body=internal_error_body(exc), content_type="application/json"
        )
