"""Exchanges a cluster node answered while still claiming their tenant, kept on disk
until the tenant's log has them.

Why: a node sent a tenant it does not hold answers at once, without memory, and the
exchange waits for the claim (seconds; a dead holder's lease must expire first). Held in
memory only, it would be lost if the node died meanwhile, although its answer went out
whole; the proxy's promise is that such an answer is stored (:mod:`.chat`). So the
exchange is written here first, before its answer completes, and removed once appended.

Layout: ``<data_dir>/spool/<tenant>/<ns>-<random>.json`` (folders 0700, files 0600: they
hold conversation text). Invariants:

* a file under its final name is complete: it is written to a hidden temporary file,
  fsynced, renamed, and the folder fsynced; a leftover temporary file (a kill mid-write,
  before the answer completed) is deleted when the spool is opened;
* replaying an entry twice stores nothing twice: the log's hash chain keeps each turn
  once, so a kill between the append and the removal only repeats a no-op;
* an entry is handled by one task at a time (:meth:`Spool.take` marks it taken until
  :meth:`Spool.remove` or :meth:`Spool.put_back`); one that cannot be deleted after its
  append (a read-only folder) is reported and given back, never left taken;
* an entry given back waits on disk for the first of: the node's own retries
  (:mod:`.replays`, which need no traffic), the tenant's next append, the node's next
  start;
* no file is larger than the spool's ``max_entry_bytes``: a larger entry is refused when
  written (it waits for its claim in memory, as when the disk is full), and a larger file
  is set aside unread;
* a file carries the sha256 of its content (:func:`_checksum`: the tenant, the
  conversation, the messages and, when the answer has one a later Responses request
  may continue, its ``response_id``, as canonical JSON); one whose content no longer matches
  (a disk that flipped a bit, an operator's partial copy that still parses) is no entry;
* a file that cannot be read as an entry is moved to ``spool/.unreadable/<tenant>/`` and
  reported, never replayed and never silently dropped.

Format 1 (before the checksum) is still read, without one: those files were written by
the previous version, before its upgrade, and are replayed at the first start after it,
checked as they always were (every field's type); a file of format 1 that carries a
checksum is a format 2 file changed on disk, and no entry. That is as safe as it was, no
less: a format 1 file corrupted into another valid entry would be replayed wrong, as
before the upgrade. It opens no new way in: the checksum guards against accidents, not
people, since whoever can write the spool folder can as easily write a format 2 file
with a matching sum.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_core import LogMessage

from ..config import TENANT_NAME
from ..errors import ProxyError
from .durable import TEMP_PREFIX, replace_file

__all__ = ["MAX_ENTRY_BYTES", "Spool", "SpoolEntry", "SpoolError"]

MAX_ENTRY_BYTES = 256 * 1024 * 1024
"""The largest entry written or read by default (the app allows more when
``server.max_body_bytes`` does): a larger file was read whole before it was parsed."""

_UNREADABLE = ".unreadable"  # a name no tenant can have
_UNREADABLE_ERRORS = (OSError, ValueError, KeyError, TypeError, RecursionError, OverflowError)
"""What reading a file that is no entry raises: JSON nested past the parser's depth
(``RecursionError``) and a time of hundreds of digits (``OverflowError``) included, which
escaped the replay and left the file to end every later one."""
_FORMAT = 2
_FORMATS = (1, 2)
"""What is read: 1, before the checksum (see the module docstring), and 2."""


class SpoolError(ProxyError):
    """An entry could not be written (disk full, permissions): the exchange then waits
    for its claim in memory only."""


@dataclass(frozen=True)
class SpoolEntry:
    """One exchange waiting for its tenant: what :meth:`TenantMemory.append` takes."""

    path: Path
    tenant: str
    conversation: str | None
    messages: tuple[LogMessage, ...]
    response_id: str | None = None
    """The answer's id a later Responses request may continue (linked when appended)."""


class Spool:
    """The spool folder of one node. :meth:`put`, :meth:`pending` and :meth:`remove`
    touch the disk (call them off the event loop); the rest answer from the in-memory
    record of the entries on disk and of those a task is handling."""

    def __init__(
        self,
        folder: Path,
        events: Callable[[dict[str, Any]], None],
        *,
        max_entry_bytes: int = MAX_ENTRY_BYTES,
    ) -> None:
        self.folder = folder
        self._events = events
        self._max_bytes = max_entry_bytes
        self._taken: set[Path] = set()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        for temp in folder.glob(f"*/{TEMP_PREFIX}*"):
            temp.unlink(missing_ok=True)
        self._on_disk = {
            p for p in folder.glob("*/[0-9]*.json") if TENANT_NAME.fullmatch(p.parent.name)
        }
        """The entries this spool wrote or found and has not removed or set aside."""

    def __len__(self) -> int:
        """Entries on disk (those written or found by this process, not yet removed)."""
        return len(self._on_disk)

    def put(
        self,
        tenant: str,
        conversation: str | None,
        messages: Sequence[LogMessage],
        response_id: str | None = None,
    ) -> SpoolEntry:
        """Write an entry durably and mark it taken by the caller."""
        if not TENANT_NAME.fullmatch(tenant):
            raise SpoolError(f"not a tenant name: {tenant!r}")
        content: dict[str, Any] = {
            "tenant": tenant,
            "conversation": conversation,
            "messages": [_entry_message(m) for m in messages],
        }
        if response_id is not None:  # only then: the sum of an entry without one is as before
            content["response_id"] = response_id
        folder = self.folder / tenant
        name = f"{time.time_ns():020d}-{secrets.token_hex(4)}.json"
        try:
            body = {"format": _FORMAT, **content, "sha256": _checksum(content)}
            data = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
            if len(data) > self._max_bytes:
                raise ValueError(f"{len(data)} bytes, larger than an entry may be")
            folder.mkdir(mode=0o700, exist_ok=True)
            replace_file(folder / name, data, 0o600)
        except (OSError, TypeError, ValueError) as exc:
            raise SpoolError(f"could not spool an exchange of {tenant}: {exc}") from exc
        entry = SpoolEntry(folder / name, tenant, conversation, tuple(messages))
        self._taken.add(entry.path)
        self._on_disk.add(entry.path)
        return entry

    def waiting(self, tenant: str) -> bool:
        """Whether ``tenant`` has entries on disk that no task has taken."""
        return any(p.parent.name == tenant and p not in self._taken for p in self._on_disk)

    def count(self, tenant: str) -> int:
        """The tenant's entries on disk (taken or not)."""
        return sum(p.parent.name == tenant for p in self._on_disk)

    def tenants(self) -> list[str]:
        """Tenants with entries on disk."""
        return sorted({p.parent.name for p in self._on_disk})

    def pending(self, tenant: str) -> list[SpoolEntry]:
        """The tenant's entries no task has taken, oldest first; unreadable files are
        moved aside and reported."""
        found = []
        for path in sorted((self.folder / tenant).glob("[0-9]*.json")):
            if path in self._taken:
                continue
            self._on_disk.add(path)  # a file copied in from another node's spool counts too
            try:
                found.append(_read(path, tenant, self._max_bytes))
            except _UNREADABLE_ERRORS as exc:
                self._set_aside(path, tenant, exc)
        return found

    def take(self, entry: SpoolEntry) -> bool:
        """Mark ``entry`` taken; False when another task has it already."""
        if entry.path in self._taken:
            return False
        self._taken.add(entry.path)
        return True

    def put_back(self, entry: SpoolEntry) -> None:
        """Give ``entry`` up, still on disk, for a later replay."""
        self._taken.discard(entry.path)

    def remove(self, entry: SpoolEntry) -> None:
        """The tenant's log has ``entry``: delete it (a lost deletion only repeats a
        no-op replay). One that cannot be deleted (the folder gone read-only) is reported
        and given back, so that a later replay deletes it; it never raises."""
        try:
            entry.path.unlink(missing_ok=True)
        except OSError as exc:
            self._taken.discard(entry.path)
            self._events({"event": "spool_remove_failed", "tenant": entry.tenant,
                          "file": str(entry.path), "error": str(exc)})  # fmt: skip
            return
        self._taken.discard(entry.path)
        self._on_disk.discard(entry.path)

    def set_aside(self, entry: SpoolEntry, reason: str) -> None:
        """Move an entry the log refuses (it would be refused again at every replay)."""
        self._set_aside(entry.path, entry.tenant, reason)
        self._taken.discard(entry.path)

    def _set_aside(self, path: Path, tenant: str, reason: object) -> None:
        self._on_disk.discard(path)
        aside = self.folder / _UNREADABLE / tenant
        moved: str | None = str(aside / path.name)
        try:
            aside.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.replace(path, aside / path.name)
        except OSError:  # reported all the same; the next pass tries the move again
            moved = None
        self._events(
            {
                "event": "spool_unreadable",
                "tenant": tenant,
                "file": str(path),
                "moved_to": moved,
                "error": str(reason),
            }
        )


def _entry_message(message: LogMessage) -> dict[str, Any]:
    """One message of an entry as written (``sources`` only when it restates any)."""
    entry: dict[str, Any] = {"message": message.message, "ts": message.ts, "ext_id": message.ext_id}
    if message.sources:
        entry["sources"] = list(message.sources)
    return entry


def _read(path: Path, tenant: str, max_bytes: int) -> SpoolEntry:
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{size} bytes, larger than an entry may be ({max_bytes})")
    data = json.loads(path.read_bytes().decode("utf-8", "surrogatepass"))
    if not isinstance(data, dict) or data.get("format") not in _FORMATS:
        raise ValueError("not a spool entry of format 1 or 2")
    if data["tenant"] != tenant:
        raise ValueError(f"entry of tenant {data['tenant']!r} in {tenant!r}'s folder")
    conversation = data["conversation"]
    if conversation is not None and not isinstance(conversation, str):
        raise TypeError("conversation must be a string or null")
    messages = []
    for item in data["messages"]:
        message, ts, ext_id = item["message"], item["ts"], item.get("ext_id")
        sources = item.get("sources", [])
        if not isinstance(message, dict) or isinstance(ts, bool) or not isinstance(ts, int | float):
            raise TypeError("each message needs an object and a numeric ts")
        if ext_id is not None and not isinstance(ext_id, str):
            raise TypeError("ext_id must be a string or null")
        if not isinstance(sources, list) or not all(
            isinstance(f, int) and not isinstance(f, bool) for f in sources
        ):
            raise TypeError("sources must be a list of fragment ids")
        messages.append(LogMessage(message, float(ts), ext_id, tuple(sources)))
    if not messages:
        raise ValueError("an entry without messages")
    response_id = data.get("response_id")
    if response_id is not None and not isinstance(response_id, str):
        raise TypeError("response_id must be a string or absent")
    if data["format"] != 1 or "sha256" in data:  # format 1 never carried one
        content = {k: data[k] for k in ("tenant", "conversation", "messages", "response_id")
                   if k in data}
        if data["format"] == 1 or data.get("sha256") != _checksum(content):
            raise ValueError("checksum mismatch: the file changed after it was written")
    elif response_id is not None:
        raise ValueError("a format 1 entry with a response_id (format 1 never had one)")
    return SpoolEntry(path, tenant, conversation, tuple(messages), response_id)


def _checksum(content: dict[str, Any]) -> str:
    """The sha256 of an entry's content as canonical JSON (keys sorted, no spaces): the
    same for the content written and for the content read back, whatever the file's
    layout (JSON reads back every string and number it wrote as it was)."""
    canonical = json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
