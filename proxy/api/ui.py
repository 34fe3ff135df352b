"""The inspector page: ``GET /ui`` and ``GET /ui/{file}``, the files of ``proxy/static/ui``.

The page is plain HTML, CSS and JavaScript with no build step and no third-party file.

The page holds no data: everything it shows comes from the ``/memory`` API, called with
the key typed into the page (kept in the tab's sessionStorage) as ``Authorization:
Bearer``, so the API's own auth guards every datum, and the page and its files are
served without a key, as ``/openapi.json`` is (a browser cannot send a bearer key when
it navigates).

Invariants:

- Only the files the folder holds when :func:`mount` runs are served (read then,
  once); a requested name is a key of that table or a 404, so no path (``..``, encoded,
  absolute, backslashes) reaches any other file.
- Every answer carries its content type (only the types of :data:`_TYPES` are served), an
  ETag (a matching ``If-None-Match`` is a 304), ``Cache-Control: no-cache`` (revalidated
  each time, so a changed file is seen at once) and the headers of
  :data:`_SECURITY`, among them a Content-Security-Policy that lets the page load and
  call its own origin only and run no inline script.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from ..errors import ApiError

__all__ = ["CONTENT_SECURITY_POLICY", "STATIC", "UI_ASSETS", "file", "mount", "page"]

STATIC = Path(__file__).resolve().parent.parent / "static" / "ui"
"""The folder whose files the inspector serves."""

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".svg": "image/svg+xml",
}
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
_SECURITY = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
_PAGE = "index.html"

@dataclass(frozen=True, slots=True)
class _Asset:
    """A served file: its bytes, content type and entity tag."""

    body: bytes
    content_type: str
    etag: str


UI_ASSETS: web.AppKey[Mapping[str, _Asset]] = web.AppKey("ui_assets", Mapping)
"""The files the inspector serves, read once when the app is made (:func:`mount`)."""


def mount(app: web.Application, folder: Path = STATIC) -> None:
    """Read the inspector's files from ``folder`` for :func:`page` and :func:`file`
    (routed at ``/ui`` and ``/ui/{file}`` by :mod:`.routes`; ``file`` may name a
    subfolder's file, ``sub/name.js``); raises FileNotFoundError when
    ``folder`` has no ``index.html``."""
    assets = _load(folder)
    if _PAGE not in assets:
        raise FileNotFoundError(f"the inspector's page is missing: {folder / _PAGE}")
    app[UI_ASSETS] = assets


async def page(request: web.Request) -> web.Response:
    """The inspector page."""
    return _answer(request, request.app[UI_ASSETS][_PAGE])


async def file(request: web.Request) -> web.Response:
    """One of the page's files, by its exact name (anything else is a 404); no name
    (``/ui/``, as an address with a query is written: ``/ui/?q=...``) is the page."""
    name = request.match_info["file"] or _PAGE
    asset = request.app[UI_ASSETS].get(name)
    if asset is None:
        raise ApiError(404, f"The inspector has no file '{name[:200]}'.", code="not_found")
    return _answer(request, asset)


def _load(folder: Path) -> dict[str, _Asset]:
    """Every file of ``folder`` (and its subfolders) with a served type, by its path
    relative to ``folder`` with ``/`` separators; hidden files and folders are left out."""
    assets = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        kind = _TYPES.get(path.suffix)
        if kind is None or not path.is_file() or any(p.startswith(".") for p in name.split("/")):
            continue
        body = path.read_bytes()
        assets[name] = _Asset(body, kind, f'"{hashlib.sha256(body).hexdigest()[:32]}"')
    return assets


def _answer(request: web.Request, asset: _Asset) -> web.Response:
    headers = {**_SECURITY, "ETag": asset.etag, "Cache-Control": "no-cache"}
    asked = _tags(request.headers.get("If-None-Match", ""))
    if asset.etag in asked or "*" in asked:
        return web.Response(status=304, headers=headers)
    return web.Response(body=asset.body, headers={**headers, "Content-Type": asset.content_type})


def _tags(header: str) -> set[str]:
    """The entity tags an ``If-None-Match`` header names (weak ones compared as strong)."""
    return {tag.strip().removeprefix("W/") for tag in header.split(",")}
