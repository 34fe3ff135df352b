"""An upstream's URL as people may see it: in the log, the banner, an error's message."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["shown_url"]


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
