"""Conversations continued by a response id: the Responses API's ``previous_response_id``.

A chat-completions client resends its whole history each turn, and the hash chain
(:mod:`.chain`) finds the turns already stored. A Responses API client continuing an
earlier response sends only its new input and that response's id; the rest lives with
the upstream. So when a response is relayed, its id is linked, in the transaction that
logs the exchange, to the conversation and to the last message logged with it (the
chain's tip, :func:`link_response`); a later request naming that id reads the stored path
from the conversation's start to the tip (:func:`continuation`). Put before the request's
new turns, that path makes the history a chat client would have sent: the same
conversation, the same chain hashes, so the append stores only the new turns, after the
tip, and branches settle as for any history (continuing an older response is an edit
that branches there).

A link whose path no longer hashes to its tip (rows written by hand) continues nothing:
the turn is then a conversation of its own, as it would be without the link.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..storage import Connection
from ..storage.tables import log as log_rows
from ..storage.tables import responses
from .chain import chain_hashes
from .messages import AppendResult

__all__ = ["Continuation", "continuation", "link_response"]


@dataclass(frozen=True)
class Continuation:
    """What a response id continues: its ``conversation`` and the stored ``messages`` of
    that conversation up to and including the last one logged with the response."""

    conversation: str
    messages: tuple[Mapping[str, Any], ...]


def link_response(conn: Connection, response_id: str, result: AppendResult, now: float) -> None:
    """Link ``response_id`` to the conversation and tip of the append ``result`` (caller's
    transaction, the append's)."""
    if result.hashes:
        responses.link(conn, response_id, result.conversation_id, result.hashes[-1], now)


def continuation(conn: Connection, response_id: str, now: float) -> Continuation | None:
    """What ``response_id`` continues, or None: never linked (an unknown or forged id,
    another tenant's, a link past its bound) or a path that no longer leads to the tip."""
    found = responses.linked(conn, response_id, now)
    if found is None:
        return None
    messages: list[Mapping[str, Any]] = []
    for text in log_rows.path_to(conn, found.tip):
        try:
            message = json.loads(text)
        except ValueError:
            return None
        if not isinstance(message, dict):
            return None
        messages.append(message)
    if not messages or chain_hashes(messages, found.conversation_id)[-1] != found.tip:
        return None
    return Continuation(found.conversation_id, tuple(messages))
