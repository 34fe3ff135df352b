"""The service endpoints: models, health, readiness, metrics and a cluster node's tenants.

None of them reads a tenant's memory: ``/v1/models`` lists the configured upstreams'
models, ``/healthz`` and ``/readyz`` say whether the proxy (and its formation workers)
can answer, ``/metrics`` is Prometheus text, ``/cluster/tenants`` which tenants this
node holds.
"""

from __future__ import annotations

from aiohttp import web

from ..services import SERVICES
from ..tenants.pool import tenant_of
from .json_io import json_response
from .schemas import ClusterTenants, Health, ModelCard, ModelList, Readiness

__all__ = ["cluster_tenants", "healthz", "metrics", "models", "readyz"]


async def models(request: web.Request) -> web.Response:
    svc = request.app[SERVICES]
    tenant_of(request.headers, svc.config.auth)
    created = int(svc.config.source.stat().st_mtime)
    data = [
        ModelCard(id=name, object="model", created=created, owned_by="areamem")
        for name in svc.router.advertised()
    ]
    return json_response(ModelList(object="list", data=data))


async def healthz(request: web.Request) -> web.Response:
    """Liveness (always 200 while the process serves): ``status`` is ``starting`` until
    models and graphs are loaded, ``ok`` then, ``stopping`` during shutdown."""
    svc = request.app[SERVICES]
    error = svc.policies.last_error
    status = {"ready": "ok"}.get(svc.state, svc.state)
    return json_response(
        Health.model_validate(
            {
                "status": status,
                "policy": str(svc.policies.current.source),
                "policy_error": str(error) if error else None,
                "tenants_open": len(svc.tenants.opened()),
                "formation_workers": [
                    vars(state) for state in (svc.workers.states() if svc.workers else [])
                ],
            }
        )
    )


async def readyz(request: web.Request) -> web.Response:
    """Readiness: 200 once warm (the first request is then as fast as the hundredth),
    503 while starting or stopping, so a load balancer sends traffic only when ready."""
    state = request.app[SERVICES].state
    body = Readiness.model_validate({"status": state})
    return json_response(body, status=200 if state == "ready" else 503)


async def metrics(request: web.Request) -> web.Response:
    """Prometheus text; with ``auth.metrics: keys`` only for a caller with a proxy key."""
    svc = request.app[SERVICES]
    if svc.config.auth.metrics == "keys":
        tenant_of(request.headers, svc.config.auth)
    body = svc.metrics.render()
    return web.Response(
        body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
    )


async def cluster_tenants(request: web.Request) -> web.Response:
    """The tenants this cluster node holds or held (operators' view: the same auth as
    ``/metrics``)."""
    svc = request.app[SERVICES]
    if svc.config.auth.metrics == "keys":
        tenant_of(request.headers, svc.config.auth)
    placement = svc.placement
    body = ClusterTenants.model_validate(
        {
            "node": placement.node if placement else None,
            "replication_lag_s": placement.lag_s if placement else 0.0,
            "tenants": placement.places() if placement else [],
        }
    )
    return json_response(body)
