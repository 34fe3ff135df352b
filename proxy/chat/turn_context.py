"""What the trigger policy is told about a chat turn (:class:`policies.TurnContext`), read
the same way by the proxy (:mod:`.chat`) and the LiteLLM hook (:mod:`.litellm_hook`)."""

from __future__ import annotations

import time

from memory_core import message_text
from policies import TurnContext

from ..doors.chat_wire import ChatRequest

__all__ = ["turn_context"]

_RECENT_TURNS = 3


def turn_context(
    chat: ChatRequest, *, tenant: str, conversation: str, header: str | None
) -> TurnContext:
    """The policy's view of ``chat``'s latest turn; ``header`` is ``X-Memory`` as sent."""
    return TurnContext(
        tenant=tenant,
        model=chat.model,
        conversation_id=conversation,
        user_turns=chat.user_turns,
        latest_user_text=chat.latest_user_text,
        header=header,
        now=time.time(),
        recent_user_texts=_recent_user_texts(chat),
    )


def _recent_user_texts(chat: ChatRequest) -> tuple[str, ...]:
    """The user turns before the latest one (most recent last), for topic-shift rules."""
    earlier = [m for m in chat.messages[: chat.last_user_index] if m.get("role") == "user"]
    return tuple(message_text(m.get("content")) for m in earlier[-_RECENT_TURNS:])
