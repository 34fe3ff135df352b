"""Export and import of a tenant's memory: one file, verbatim rows, a format version.

An export is a zip file: ``manifest.json`` and one part per table, ``tables/<name>.jsonl``
(one JSON array per row, in the columns the manifest lists; a blob is ``{"$b": base64}``).
The manifest says ``format: areamem-export``, ``version`` (:data:`VERSION`), when it was
made, the tenant, the schema (the migrations applied to the exported file) and, per part,
its rows and sha256.

What travels is the log (every message with its conversation, time, ids and hash chain)
and derived memory with its history, verbatim: row ids included, so the imported memory
gives the same areas and the same blocks as the exported one did, and its snapshots can
still be rolled back to. Forming the log again on import would not: consolidation cycles
(merges, corrections judged by a model) and the encoder's vectors would have to be made
again and need not come out the same. The price is that both sides must have the same
schema: an export of another schema is refused (open the older file with this version
first, which migrates it, then export it again).

An export reads one read transaction (a consistent state whatever is written
meanwhile) and is written beside its destination, then renamed: a failed export leaves no
half file. An import runs in one transaction: a file that is not an export, a truncated or
corrupt one, a newer format version, another schema, or a target that already holds memory
(unless ``replace``) is refused with a clear error and leaves what is stored unchanged.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from .errors import ExportFileError, MemoryNotEmptyError, StorageError
from .storage import Connection, read_snapshot, transaction
from .storage.tables import history as history_rows
from .storage.tables import transfer as rows

__all__ = ["FORMAT", "VERSION", "Manifest", "Part", "export", "import_"]

FORMAT = "areamem-export"
VERSION = 1
"""The format version this code writes and the newest it reads."""
_MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Part:
    """One table's part of an export."""

    columns: list[str]
    rows: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """What an export holds (``manifest.json``)."""

    format: str
    version: int
    created_at: str
    tenant: str
    schema: list[str]
    parts: dict[str, Part] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        """Rows per table."""
        return {name: part.rows for name, part in self.parts.items()}

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "counts": self.counts}


def export(conn: Connection, dest: Path, *, tenant: str, now: float) -> Manifest:
    """Write ``conn``'s memory to ``dest`` (see the module docstring); its manifest."""
    partial = dest.with_name(f".{dest.name}.partial")
    try:
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            manifest = _write(conn, archive, tenant, now)
        os.replace(partial, dest)
    except OSError as exc:
        raise StorageError(f"cannot write the export {dest}: {exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    return manifest


def import_(
    conn: Connection, source: Path, *, replace: bool = False, max_bytes: int | None = None
) -> Manifest:
    """Load the export at ``source`` into ``conn``'s file in one transaction (see the
    module docstring); its manifest. Raises :class:`ExportFileError` or
    :class:`MemoryNotEmptyError`, changing nothing.

    What is read is bounded before it is read: the manifest by :data:`_MAX_MANIFEST`, a
    row by :data:`_MAX_ROW`, and with ``max_bytes`` the whole export once decompressed (a
    zip's members say their sizes, and reading one never returns more than it says), so
    a small file that inflates to gigabytes is refused, not read."""
    try:
        with zipfile.ZipFile(source) as archive:
            _bounded(archive, source, max_bytes)
            manifest = _manifest(archive, source)
            _same_schema(manifest, conn)
            with transaction(conn, journal=False):
                if not replace and not rows.is_empty(conn):
                    raise MemoryNotEmptyError(
                        "this tenant already holds memory: import into a new tenant, or"
                        " replace what it holds (--replace, or replace=true)"
                    )
                replaced = history_rows.state(conn)
                rows.clear(conn, rows.tables(conn))
                for table, part in manifest.parts.items():
                    _load(conn, archive, table, part)
                rows.check_references(conn)
                _sound_state(conn)
                rows.rebuild_index(conn)
                history_rows.bump_past(conn, replaced)  # readers and formers read it again
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise ExportFileError(f"{source}: not an areamem export, or truncated: {exc}") from exc
    except OSError as exc:
        raise ExportFileError(f"{source}: cannot read the export: {exc}") from exc
    return manifest


def _write(conn: Connection, archive: zipfile.ZipFile, tenant: str, now: float) -> Manifest:
    with read_snapshot(conn, "cannot export memory"):
        parts = {}
        for table in rows.tables(conn):
            names = rows.columns(conn, table)
            with archive.open(f"tables/{table}.jsonl", "w", force_zip64=True) as out:
                count, digest = _dump(out, rows.rows(conn, table, names))
            parts[table] = Part(names, count, digest)
        manifest = Manifest(
            format=FORMAT,
            version=VERSION,
            created_at=datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
            tenant=tenant,
            schema=rows.schema(conn),
            parts=parts,
        )
    archive.writestr(_MANIFEST, json.dumps(manifest.as_json(), indent=2, ensure_ascii=False))
    return manifest


def _dump(out: IO[bytes], values: Iterator[Sequence[Any]]) -> tuple[int, str]:
    digest = hashlib.sha256()
    count = 0
    for row in values:
        line = (json.dumps([_encode(v) for v in row], ensure_ascii=False) + "\n").encode()
        digest.update(line)
        out.write(line)
        count += 1
    return count, digest.hexdigest()


def _encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$b": base64.b64encode(value).decode("ascii")}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        encoded = value.get("$b")
        if not isinstance(encoded, str):
            raise ValueError("a value is neither JSON's nor a blob")
        return base64.b64decode(encoded, validate=True)
    return value


_MAX_MANIFEST = 16 << 20
"""The most a manifest may hold (its parts' names, columns and hashes: kilobytes)."""

_MAX_ROW = 64 << 20
"""The most one row's line may hold (a fragment's text and its vector, base64)."""


def _bounded(archive: zipfile.ZipFile, source: Path, max_bytes: int | None) -> None:
    """Refuse an export whose manifest, or whole, would inflate past the bounds."""
    members = archive.infolist()
    manifest = next((m for m in members if m.filename == _MANIFEST), None)
    if manifest is not None and manifest.file_size > _MAX_MANIFEST:
        raise ExportFileError(
            f"{source}: its {_MANIFEST} says {manifest.file_size} bytes, more than the"
            f" {_MAX_MANIFEST} a manifest holds"
        )
    total = sum(m.file_size for m in members)
    if max_bytes is not None and total > max_bytes:
        raise ExportFileError(
            f"{source}: the export inflates to {total} bytes, more than the {max_bytes}"
            " allowed here (import it with `areamem import`, which has no such limit)"
        )


def _manifest(archive: zipfile.ZipFile, source: Path) -> Manifest:
    """The manifest, checked: the format, a version this code reads, well-formed parts."""
    try:
        body = json.loads(archive.read(_MANIFEST))
    except KeyError:
        raise ExportFileError(f"{source}: not an areamem export (no {_MANIFEST})") from None
    except ValueError as exc:
        raise ExportFileError(f"{source}: its {_MANIFEST} is not JSON: {exc}") from exc
    except RecursionError:
        raise ExportFileError(f"{source}: its {_MANIFEST} is nested too deeply") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise ExportFileError(f"{source}: not an areamem export (format is not '{FORMAT}')")
    version = body.get("version")
    if not isinstance(version, int) or version < 1 or version > VERSION:
        raise ExportFileError(
            f"{source}: export format version {version!r}; this areamem reads versions 1 to"
            f" {VERSION} (a newer areamem made it: import it there)"
        )
    try:
        parts = {str(t): Part(**p) for t, p in body["parts"].items()}
        return Manifest(
            format=FORMAT,
            version=version,
            created_at=str(body["created_at"]),
            tenant=str(body["tenant"]),
            schema=[str(m) for m in body["schema"]],
            parts=parts,
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ExportFileError(f"{source}: its {_MANIFEST} is incomplete: {exc}") from exc


def _sound_state(conn: Connection) -> None:
    """The loaded bookkeeping row holds counters, else :class:`ExportFileError`: an
    import moves them on (and every later cycle and rollback), so a text or a float past
    64 bits there would fail each of those for good."""
    if not history_rows.state_is_sound(conn):
        raise ExportFileError(
            "the export's memory_state is not one row of whole-number counters (generation,"
            " derived_version) within SQLite's integers"
        )


def _same_schema(manifest: Manifest, conn: Connection) -> None:
    here = rows.schema(conn)
    if manifest.schema != here:
        lacks = [m for m in here if m not in manifest.schema]
        extra = [m for m in manifest.schema if m not in here]
        differ = "; ".join(
            f"{what} {', '.join(names)}"
            for what, names in (("the export lacks", lacks), ("only the export has", extra))
            if names
        )
        raise ExportFileError(
            f"the export's schema ({_last(manifest.schema)}) is not this store's"
            f" ({_last(here)}{'; ' + differ if differ else ''}): open the exported file with"
            " this areamem (it migrates) and export it again"
        )
    known = set(rows.tables(conn))
    if set(manifest.parts) != known:
        raise ExportFileError(
            f"the export's tables differ from this store's: {sorted(set(manifest.parts) ^ known)}"
        )
    for table, part in manifest.parts.items():
        if part.columns != rows.columns(conn, table):
            raise ExportFileError(f"the export's columns of {table} are not this store's")


def _load(conn: Connection, archive: zipfile.ZipFile, table: str, part: Part) -> None:
    """One part into its table, its rows and sha256 checked (a mismatch raises, and the
    caller's transaction is rolled back)."""
    digest = hashlib.sha256()
    try:
        with archive.open(f"tables/{table}.jsonl") as stream:
            decoded = _decoded(stream, digest, table, len(part.columns))
            loaded = rows.load(conn, table, part.columns, decoded)
    except KeyError:
        raise ExportFileError(f"the export has no part for {table}") from None
    except (ValueError, TypeError, zipfile.BadZipFile) as exc:
        raise ExportFileError(f"the export's part for {table} is corrupt: {exc}") from exc
    if loaded != part.rows or digest.hexdigest() != part.sha256:
        raise ExportFileError(
            f"the export's part for {table} is corrupt or truncated ({loaded} rows of"
            f" {part.rows}, or its sha256 differs from the manifest's)"
        )


def _decoded(stream: IO[bytes], digest: Any, table: str, width: int) -> Iterator[list[Any]]:
    while line := stream.readline(_MAX_ROW + 1):
        if len(line) > _MAX_ROW:
            raise ValueError(f"a row of {table} is longer than {_MAX_ROW} bytes")
        digest.update(line)
        try:
            values = json.loads(line)
        except RecursionError:
            raise ValueError(f"a row of {table} is nested too deeply") from None
        if not isinstance(values, list) or len(values) != width:
            raise ValueError(f"a row of {table} is not a JSON array of {width} values")
        yield [_decode(v) for v in values]


def _last(schema: Sequence[str]) -> str:
    return schema[-1] if schema else "no migrations"
