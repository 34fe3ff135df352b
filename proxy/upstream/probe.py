"""The start-up check of each upstream: one short ``GET <api_base>/models``.

It runs in the background once the proxy listens and never holds start-up or a request
back: an upstream that cannot be reached is said at once in the log
(``upstream_unreachable``, with what the error was), instead of the first chat's 502.
Any HTTP answer means reachable. The names an OpenAI-style list holds are handed back,
so a route with a glob and no ``advertise`` lists what its upstream serves in
``/v1/models`` (Open WebUI offers only the models listed there).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from ..config import UpstreamConfig
from .urls import endpoint_url, shown_url

__all__ = ["PROBE_TIMEOUT_S", "probe"]

PROBE_TIMEOUT_S = 5.0
"""The longest a check waits for an upstream (connect and answer together)."""
_MAX_BODY = 1 << 20


async def probe(
    upstream: UpstreamConfig, events: Callable[[dict[str, Any]], None]
) -> list[str] | None:
    """Check ``upstream`` once and log what was found; returns the model names it lists
    (None when it lists none, was not reached, or has no ``api_base`` to check)."""
    if upstream.api_base is None:  # a provider's own cloud: nothing local to check
        return None
    url = endpoint_url(upstream.api_base, "models")
    shown = shown_url(url)
    began = time.perf_counter()
    key = upstream.api_key()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    limit = aiohttp.ClientTimeout(total=min(PROBE_TIMEOUT_S, upstream.timeout_s))
    try:
        async with (
            aiohttp.ClientSession(timeout=limit) as http,
            http.get(url, headers=headers) as answer,
        ):
            status = answer.status
            body = await answer.content.read(_MAX_BODY) if status == 200 else b""
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        events({"event": "upstream_unreachable", "model": upstream.model, "url": shown,
                "error": str(exc) or type(exc).__name__,
                "then": "chat requests for it get 502 until it answers"})  # fmt: skip
        return None
    names = _listed(body)
    ms = round((time.perf_counter() - began) * 1000, 1)
    events({"event": "upstream_ok", "model": upstream.model, "url": shown, "status": status,
            "models": len(names) if names is not None else None, "ms": ms})  # fmt: skip
    return names


def _listed(body: bytes) -> list[str] | None:
    """The ``id`` of each model of an OpenAI ``{"data": [{"id": ...}]}`` list; None for
    anything else (a body nested past the JSON reader's recursion limit included)."""
    try:
        document = json.loads(body) if body else None
    except (ValueError, RecursionError):
        return None
    data = document.get("data") if isinstance(document, dict) else None
    if not isinstance(data, list):
        return None
    names = [item.get("id") for item in data if isinstance(item, dict)]
    return [name for name in names if isinstance(name, str)][:1000]
