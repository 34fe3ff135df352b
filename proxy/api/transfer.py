"""``GET /memory/export`` and ``POST /memory/import``: the caller's memory as one file.

The file is an export of :mod:`memory_core.transfer` (a zip: a manifest and the log and
derived memory verbatim). An export is written to the data folder's ``exports/`` (private),
streamed, then removed; an import's body is bounded like every admin body
(``server.max_body_bytes``, ``server.body_timeout_s``; larger memories go through
``areamem import``), kept in that folder while it is loaded, then removed. An import into a
tenant that holds memory is a 409 ``memory_not_empty`` unless ``replace=true``; a file that
is not a sound export of this schema a 400 ``invalid_export``; nothing is changed then.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from pathlib import Path

from aiohttp import web

from memory_core import DreamBusyError, ExportFileError, MemoryCoreError, MemoryNotEmptyError

from ..errors import ApiError
from ..http.body import read_body
from ..http.client_io import AiohttpIO
from ..http.same_site import refuse_cross_site
from ..services import SERVICES, Services
from ..tenants.pool import tenant_of
from .json_io import json_response
from .schemas import ImportResponse

__all__ = ["export", "import_"]

_CHUNK = 1 << 20
_ZIP = frozenset({"application/zip", "application/octet-stream"})


_INFLATION = 64
"""An export over HTTP may inflate to this many times the body limit (an export's rows
compress about fivefold; larger memories go through ``areamem import``)."""


async def export(request: web.Request) -> web.StreamResponse:
    """The caller's memory as an export file (``application/zip``); one at a time per
    tenant (a 409 ``export_busy`` meanwhile), since each is a copy of the memory on disk
    until it is sent."""
    svc = request.app[SERVICES]
    memory = svc.tenants.get(tenant_of(request.headers, svc.config.auth))
    if memory.exporting:
        raise ApiError(
            409,
            "an export of this memory is already being written or sent; try again after it",
            type_="server_error",
            code="export_busy",
            headers={"Retry-After": "5"},
        )
    memory.exporting = True
    path = _scratch(svc, memory.name)
    try:
        try:
            await memory.export(path)
        except MemoryCoreError as exc:
            raise ApiError(
                500, f"export failed: {exc}", type_="server_error", code="memory_error"
            ) from exc
        response = web.StreamResponse(
            headers={
                "Content-Type": "application/zip",
                "Content-Disposition": f'attachment; filename="{memory.name}.areamem"',
                "Content-Length": str(path.stat().st_size),
            }
        )
        loop = asyncio.get_running_loop()
        with path.open("rb") as file:
            path.unlink()  # the open file is read to its end; nothing is left behind meanwhile
            await response.prepare(request)
            while chunk := await loop.run_in_executor(None, file.read, _CHUNK):  # off the loop
                await response.write(chunk)
        await response.write_eof()
        return response
    finally:
        memory.exporting = False
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


async def import_(request: web.Request) -> web.Response:
    """Load an export (the body) into the caller's memory; ``replace=true`` to replace
    what it holds."""
    svc = request.app[SERVICES]
    refuse_cross_site(request.headers)
    tenant = tenant_of(request.headers, svc.config.auth)  # before megabytes are read
    replace = _replace_param(request)
    server = svc.config.server
    body = await read_body(
        AiohttpIO(request),
        limit=server.max_body_bytes,
        timeout_s=server.body_timeout_s,
        media_types=_ZIP,
    )
    memory = await svc.tenants.open(tenant, claim=True)
    path = _scratch(svc, memory.name)
    try:
        path.write_bytes(body)
        # a zip of the body's size may inflate a thousandfold: bounded before it is read
        limit = _INFLATION * server.max_body_bytes
        manifest = await memory.import_export(path, replace=replace, max_bytes=limit)
    except ExportFileError as exc:
        told = str(exc).replace(str(path), "the uploaded export")  # the data folder's place
        raise ApiError(400, told, code="invalid_export") from exc
    except MemoryNotEmptyError as exc:
        raise ApiError(409, str(exc), code="memory_not_empty") from exc
    except DreamBusyError as exc:
        raise ApiError(409, str(exc), type_="server_error", code="memory_busy") from exc
    except MemoryCoreError as exc:
        raise ApiError(
            500, f"import failed: {exc}", type_="server_error", code="memory_error"
        ) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return json_response(
        ImportResponse(
            tenant=memory.name,
            from_tenant=manifest.tenant,
            created_at=manifest.created_at,
            version=manifest.version,
            replaced=replace,
            counts=manifest.counts,
        )
    )


def _replace_param(request: web.Request) -> bool:
    value = request.query.get("replace", "false")
    if value not in ("true", "false"):
        raise ApiError(400, "query parameter 'replace' must be 'true' or 'false'", param="replace")
    return value == "true"


def _scratch(svc: Services, tenant: str) -> Path:
    """A private file name in the data folder's ``exports/`` (made 0700 when missing)."""
    folder = svc.config.server.data_dir / "exports"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder / f"{tenant}-{uuid.uuid4().hex}.areamem"
