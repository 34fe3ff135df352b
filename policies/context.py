"""What the engine is told about one chat request, and the seam to memory's known names.

The proxy builds one `TurnContext` per request from the OpenAI messages it received;
the engine never sees the raw request. `EntityIndex` is the only thing the engine asks of
memory, so the policy package stays free of SQL and can be tested with a plain fake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["EntityIndex", "TurnContext"]


@dataclass(frozen=True)
class TurnContext:
    """One chat request as the trigger policy sees it.

    `user_turns` counts the user messages in the request, the latest included; it is 1
    on the first turn of a conversation and 0 only for a request with no user message
    (which no turn-based rule matches). `header` is the raw value of the ``X-Memory``
    request header, or None when absent. `now` is epoch seconds, passed in so that
    cooldowns are deterministic under test and replay. `recent_user_texts` holds the
    user messages before the latest one, oldest first; only the `topic_shift` rule reads
    it, and it may be left empty.
    """

    tenant: str
    model: str
    conversation_id: str
    user_turns: int
    latest_user_text: str
    header: str | None
    now: float
    recent_user_texts: tuple[str, ...] = ()


class EntityIndex(Protocol):
    """The names memory already knows for a tenant: entities and their aliases, and the
    phrases that name the user's relations memory holds ("my sister")."""

    def mentioned(self, text: str) -> list[str]:
        """Return the known names that occur in `text`, in any order, without duplicates;
        a name that is also a common word only where the text writes it as a name."""
        ...
