"""Refusing what a browser sends on behalf of another site (cross-site request forgery).

With ``auth.mode: open`` (the default) nothing but the network guards the proxy, and a
page of any site the user visits can make the browser send it *simple* requests: a POST
whose body has no Content-Type needs no CORS preflight, and the page need not read the
answer for it to be acted on (a chat sent upstream on the user's key and stored as
memory; memory ingested, rolled back, replaced, consolidated). The proxy answers no CORS
preflight, so no page of another origin can use its API any other way. A browser says
where a request comes from: ``Sec-Fetch-Site`` (every current browser) and ``Origin``
(every cross-origin POST). The chat endpoints and those that change memory refuse a
request either of them places on another site: 403 ``cross_site_request``. Clients that
are no browser send neither; the inspector's own requests are same-origin.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from ..errors import ApiError

__all__ = ["refuse_cross_site"]

_OWN_SITE = frozenset({"same-origin", "none"})
"""``Sec-Fetch-Site`` values of a request this origin's page made, or a person typed."""


def refuse_cross_site(headers: Mapping[str, str]) -> None:
    """Raise 403 when a browser sent the request of ``headers`` for another site. A browser's
    ``Sec-Fetch-Site`` is taken alone (it holds behind a reverse proxy that rewrites
    ``Host``); ``Origin`` is compared with ``Host`` only when a browser sends no
    ``Sec-Fetch-Site``."""
    site = headers.get("Sec-Fetch-Site")
    if site is not None:
        if site.strip().lower() not in _OWN_SITE:
            raise _refused(f"Sec-Fetch-Site: {site[:40]}")
        return
    origin = headers.get("Origin")
    if origin is not None and not _own(origin, headers.get("Host", "")):
        raise _refused(f"Origin: {origin[:100]}")


def _own(origin: str, host: str) -> bool:
    """Whether ``origin`` is this server's own (its host and port as the request names
    them); ``null`` (a sandboxed or opaque page) is none."""
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()


def _refused(said: str) -> ApiError:
    return ApiError(
        403,
        f"a browser sent this request for a page of another site ({said}): the proxy serves"
        " clients and its own inspector page",
        code="cross_site_request",
    )
