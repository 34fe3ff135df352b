"""Message identity: the hash chain that tells new turns from ones already stored.

Clients resend the whole history on every turn. Each message is identified by
``sha256(conversation_id, parent hash, canonical message)``, so the same history always
yields the same hashes (ingestion is idempotent) and an edited or regenerated turn yields
a new hash under the same parent (a branch).

A conversation is identified by its opening: every message up to and including the first
user message. Two chats that open with a different first question are two conversations;
a client may instead name the conversation explicitly (``X-Conversation-Id`` or the
``conversation_id`` of an ingested transcript), which seeds the chain with that name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidInputError

__all__ = [
    "IDENTITY_KEYS",
    "canonical",
    "chain_hashes",
    "conversation_id",
    "message_text",
    "utf8",
]

IDENTITY_KEYS = ("role", "name", "content", "tool_calls", "tool_call_id", "function_call")
"""The keys of a message that make its identity (hashed); the others are kept, not hashed."""


def canonical(message: Mapping[str, Any]) -> str:
    """Stable JSON of the parts of a message that make its identity (not timestamps)."""
    if not isinstance(message, Mapping):
        raise InvalidInputError("a message must be an object")
    ident = {k: message[k] for k in IDENTITY_KEYS if message.get(k) is not None}
    return json.dumps(ident, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def utf8(text: str, index: int) -> bytes:
    """``text`` in UTF-8. A lone UTF-16 surrogate (an unpaired ``\\ud800``-``\\udfff``
    escape) has no UTF-8 form, so no digest or store can take it: the caller's error,
    naming ``messages[index]``."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"messages[{index}] contains a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff),"
            " which no UTF-8 store can hold"
        ) from exc


def message_text(content: Any) -> str:
    """Plain text of a message's ``content``: a string, or the text parts of a list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") in ("text", "input_text")
        ]
        return "\n".join(t for t in texts if t)
    return ""


def conversation_id(messages: Sequence[Mapping[str, Any]], explicit: str | None = None) -> str:
    """The conversation a message list belongs to (see module docstring)."""
    if explicit:
        return explicit
    digest = hashlib.sha256()
    for index, message in enumerate(messages):
        digest.update(utf8(canonical(message), index))
        digest.update(b"\x00")
        if message.get("role") == "user":
            break
    return "c" + digest.hexdigest()[:15]


def chain_hashes(messages: Sequence[Mapping[str, Any]], conv_id: str) -> list[str]:
    """Hash of every message, each covering its whole prefix within ``conv_id``."""
    hashes = []
    parent = "conv:" + conv_id
    for index, message in enumerate(messages):
        digest = hashlib.sha256()
        digest.update(parent.encode())
        digest.update(b"\x00")
        digest.update(utf8(canonical(message), index))
        parent = digest.hexdigest()
        hashes.append(parent)
    return hashes
