"""The append-only message log, branch detection and the durable formation queue.

Invariants:
- ``log`` rows are never updated or deleted (SQLite triggers enforce it); everything
  else in memory is derived from them and can be rebuilt.
- A message is appended once: its chain hash is unique, so resending a history appends
  only the turns that are new.
- Every appended user/assistant/tool turn is queued in the same transaction, so a crash
  after the append loses nothing: the queue is drained on the next start.
- A logged timestamp is finite epoch seconds in ``[MIN_TIMESTAMP, MAX_TIMESTAMP)``
  (years 1900 to 2199; :func:`check_timestamp`). Rows logged before that rule may hold
  anything (inf, nan, 1e308, text): readers go through :func:`stored_timestamp`, which
  reads such a value as unknown (None), so no stored value can break a reader (it and
  the bounds live in :mod:`.storage.values`, where stored rows are read, and are
  re-exported here).
- The cost of an append follows its history's length and never fails on it: lists of
  ids go to SQLite as one JSON parameter (``json_each``), never one variable each
  (:mod:`memory_core.storage.tables.log` holds the SQL).
- The path of the latest append is the live branch. Sibling subtrees hanging off that
  path (an edited or regenerated turn's predecessor) are recorded as superseded, and so
  is the memory derived from them (fragments, and the relations they support); a path
  that becomes live again is restored (its relations too, unless a later change replaced
  them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInputError
from ..storage import Connection, transaction
from ..storage.tables import fragments, relations
from ..storage.tables import log as log_rows
from ..storage.values import MAX_TIMESTAMP, MIN_TIMESTAMP, stored_timestamp
from .chain import IDENTITY_KEYS, chain_hashes, conversation_id, message_text, utf8

__all__ = [
    "MAX_TIMESTAMP",
    "MIN_TIMESTAMP",
    "AppendResult",
    "LogMessage",
    "append_messages",
    "check_timestamp",
    "stored_timestamp",
]

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def check_timestamp(value: object, where: str) -> float:
    """``value`` as epoch seconds, or :class:`InvalidInputError` naming ``where``.

    Accepted: an int or float (not a bool), finite, in ``[MIN_TIMESTAMP,
    MAX_TIMESTAMP)``. ``where`` names the value for the message, e.g.
    ``"messages[3].timestamp"``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"{where} must be a number of seconds since the epoch")
    seconds = stored_timestamp(value)
    if seconds is None:
        shown = f"{value:.6g}" if isinstance(value, float) else "an integer out of range"
        raise InvalidInputError(
            f"{where} must be a finite time between the years 1900 and 2199"
            f" ({MIN_TIMESTAMP:.0f} <= seconds < {MAX_TIMESTAMP:.0f}), got {shown}"
        )
    return seconds


@dataclass(frozen=True)
class LogMessage:
    """One message to log: the message as received and when it was said; ``sources``:
    the stored fragments it restates (an answer that restates the memory it was shown,
    see :mod:`memory_core.text.acts`), so formation ranks it below them."""

    message: Mapping[str, Any]
    ts: float
    ext_id: str | None = None
    sources: tuple[int, ...] = ()


@dataclass(frozen=True)
class AppendResult:
    """What an append did: the conversation, new rows, and branch bookkeeping."""

    conversation_id: str
    appended: int
    already_stored: int
    superseded: int
    restored: int
    hashes: tuple[str, ...]


def append_messages(
    conn: Connection,
    messages: Sequence[LogMessage],
    *,
    explicit_conversation: str | None,
    source: str,
    now: float,
) -> AppendResult:
    """Append the new messages of ``messages`` (a whole history) in one transaction."""
    bodies = [_validated(m, i) for i, m in enumerate(messages)]
    if not bodies:
        raise InvalidInputError("no messages to append")
    conv = conversation_id(bodies, explicit_conversation)
    hashes = chain_hashes(bodies, conv)
    with transaction(conn):
        stored = log_rows.stored_ids(conn, hashes)
        appended = 0
        for position, (item, body, digest) in enumerate(zip(messages, bodies, hashes, strict=True)):
            if digest in stored:
                continue
            parent = hashes[position - 1] if position else None
            stored[digest] = _insert(conn, item, body, digest, parent, conv, position, source, now)
            appended += 1
        superseded, restored = _settle_branches(conn, hashes, stored, now)
    return AppendResult(
        conversation_id=conv,
        appended=appended,
        already_stored=len(hashes) - appended,
        superseded=superseded,
        restored=restored,
        hashes=tuple(hashes),
    )


def _validated(item: LogMessage, index: int) -> Mapping[str, Any]:
    message = item.message
    check_timestamp(item.ts, f"messages[{index}].timestamp")
    if not isinstance(message, Mapping):
        raise InvalidInputError(f"messages[{index}] must be an object")
    role = message.get("role")
    if not isinstance(role, str) or role not in _ROLES:
        raise InvalidInputError(f"messages[{index}].role must be one of {sorted(_ROLES)}")
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise InvalidInputError(f"messages[{index}].content must be a string, a list or null")
    if not isinstance(message.get("name"), str | None):  # else stored as its repr: "True"
        raise InvalidInputError(f"messages[{index}].name must be a string or null")
    rest = {k: v for k, v in message.items() if k not in IDENTITY_KEYS}
    if rest:  # the identity keys are checked as they are hashed (chain.utf8)
        utf8(json.dumps(rest, ensure_ascii=False, default=str), index)
    return message


def _insert(
    conn: Connection,
    item: LogMessage,
    body: Mapping[str, Any],
    digest: str,
    parent: str | None,
    conv: str,
    position: int,
    source: str,
    now: float,
) -> int:
    role = str(body["role"])
    name = body.get("name")
    row_id = log_rows.insert_message(
        conn,
        digest=digest,
        parent=parent,
        conversation_id=conv,
        position=position,
        role=role,
        name=str(name) if name is not None else None,
        ext_id=item.ext_id,
        message=json.dumps(dict(body), ensure_ascii=False, separators=(",", ":")),
        text=message_text(body.get("content")),
        ts=float(item.ts),
        logged_at=now,
        source=source,
    )
    if item.sources:
        log_rows.insert_sources(conn, row_id, item.sources)
    if role in ("user", "assistant"):
        log_rows.enqueue(conn, row_id, now)
    return row_id


def _settle_branches(
    conn: Connection, hashes: Sequence[str], ids: Mapping[str, int], now: float
) -> tuple[int, int]:
    """Make ``hashes`` the live path: supersede sibling subtrees, restore the path."""
    path_ids = [ids[h] for h in hashes]
    restored = _restore(conn, path_ids)
    parents = hashes[:-1]
    if not parents:
        return 0, restored
    on_path = set(hashes)
    siblings = [
        (digest, parent)
        for digest, parent in log_rows.children_of(conn, parents)
        if digest not in on_path
    ]
    superseded = 0
    child_of = {hashes[i - 1]: hashes[i] for i in range(1, len(hashes))}
    for digest, parent in siblings:
        superseded += _supersede_subtree(conn, digest, child_of[parent], now)
    return superseded, restored


def _restore(conn: Connection, path_ids: Sequence[int]) -> int:
    back = log_rows.superseded_among(conn, path_ids)
    if back:
        log_rows.unsupersede(conn, back)
        fragments.set_superseded(conn, back, False)
        relations.restore_for_logs(conn, back)
    return len(back)


def _supersede_subtree(conn: Connection, root: str, replacement: str, now: float) -> int:
    ids = log_rows.live_subtree(conn, root)
    if not ids:
        return 0
    log_rows.record_branch(conn, root, replacement, now, ids)
    fragments.set_superseded(conn, ids, True)
    relations.supersede_for_logs(conn, ids)
    return len(ids)
