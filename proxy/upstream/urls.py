"""An upstream's URL as people may see it: in the log, the banner, an error's message."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["endpoint_url", "shown_url"]


def endpoint_url(base: str, endpoint: str) -> str:
    """``endpoint`` (``chat/completions``, ``models``) under ``base``'s path, its query
    kept where it belongs: ``https://x.azure.com/openai/deployments/d?api-version=1`` and
    ``models`` make ``https://x.azure.com/openai/deployments/d/models?api-version=1``
    (the endpoint pasted after the whole URL went into the query, and the request went to
    ``base``'s own path)."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/") + "/" + endpoint.lstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def shown_url(url: str) -> str:
    """``url`` as the log may show it: without a user and password (``https://u:k@host``)
    or a query (``?api-key=...``), which can hold a key; keys are never logged."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<an unreadable URL>"
    query = "?..." if parts.query else ""
    return urlunsplit((parts.scheme, host + port, parts.path, "", "")) + query
