"""The decision: does this request consult memory, why, and with what budget.

Order of precedence, first that applies wins:

1. the ``X-Memory`` header: ``off`` never retrieves, ``force`` always does (even when the
   policy is disabled); ``auto``, absent or empty defers to the policy, and any other
   value is treated as ``auto`` with a note in the reason;
2. ``enabled: false`` (top level or an override) stops automatic retrieval;
3. cooldown: a retrieval in the same (tenant, conversation) suppresses rule-triggered
   retrievals for the configured following user turns and/or seconds;
4. the rules, in order; the first that matches retrieves.

Cooldown only covers *later* turns: a request whose user-turn count is not above that of
the last retrieval (a regenerated or edited turn, or a new conversation reusing an id) is
not suppressed, so regenerating an answer gets the memory the original got. Hence a first
turn is never suppressed by cooldown. The engine remembers each conversation's last
retrieval in memory only, bounded (least recently retrieved forgotten first); a restart
forgets cooldowns, which at worst retrieves once more than necessary.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

from policies.context import EntityIndex, TurnContext
from policies.policy import Cooldown, Policy, Settings
from policies.rules import Similarity, lexical_similarity

__all__ = ["HEADER_NAME", "Decision", "PolicyEngine"]

HEADER_NAME = "X-Memory"
_HEADER_VALUES = ("auto", "force", "off")


@dataclass(frozen=True)
class Decision:
    """Whether to retrieve, and the human-readable reason; always filled, also for "no".

    `rule` is the name (or type) of the rule that fired, None when no rule decided (header,
    disabled, cooldown, no match). The budgets are those in effect for the request's model
    and tenant, given also when `retrieve` is False so that logs show them.
    """

    retrieve: bool
    reason: str
    rule: str | None
    budget_tokens: int
    max_fragments: int


class _Retrieval(NamedTuple):
    user_turns: int
    at: float


class PolicyEngine:
    """Decides per request; holds the policy source and the per-conversation cooldown state.

    `policy_provider` is called once per decision, so a hot-reloaded policy applies to the
    next request (``PolicyEngine(lambda: store.current)``). `similarity` serves the
    ``topic_shift`` rule (swap in an embedding similarity if one is at hand). Thread-safe.
    """

    def __init__(
        self,
        policy_provider: Callable[[], Policy],
        *,
        similarity: Similarity = lexical_similarity,
        max_conversations: int = 10_000,
    ) -> None:
        if max_conversations < 1:
            raise ValueError(f"max_conversations must be >= 1, got {max_conversations}")
        self._provider = policy_provider
        self._similarity = similarity
        self._max_conversations = max_conversations
        self._last: OrderedDict[tuple[str, str], _Retrieval] = OrderedDict()
        self._lock = threading.Lock()

    def decide(self, ctx: TurnContext, entities: EntityIndex | None = None) -> Decision:
        """Decide for one request and, when it retrieves, start that conversation's cooldown.

        `entities` is the tenant's index of known names; without it ``mentions_entity``
        does not match.
        """
        settings = self._provider().effective(ctx.model, ctx.tenant)
        mode, note = _header_mode(ctx.header)
        if mode == "off":
            return _decision(settings, False, f"header {HEADER_NAME}: off")
        if mode == "force":
            decision = _decision(settings, True, f"header {HEADER_NAME}: force")
        else:
            decision = self._automatic(ctx, entities, settings)
        if decision.retrieve:
            self._remember(ctx)
        if note:
            decision = replace(decision, reason=decision.reason + note)
        return decision

    def _automatic(
        self, ctx: TurnContext, entities: EntityIndex | None, settings: Settings
    ) -> Decision:
        if not settings.enabled:
            by = settings.enabled_by
            return _decision(settings, False, f"disabled for {by}" if by else "disabled by policy")
        cooling = self._cooling(ctx, settings.cooldown)
        if cooling:
            return _decision(settings, False, cooling)
        for index, rule in enumerate(settings.rules, start=1):
            detail = rule.match(ctx, entities, self._similarity)
            if detail is not None:
                return _decision(
                    settings, True, f"rule {index} '{rule.label}' {detail}", rule.label
                )
        reason = "no rule matched" if settings.rules else "no rules configured"
        return _decision(settings, False, reason)

    def _cooling(self, ctx: TurnContext, cooldown: Cooldown) -> str | None:
        """The cooldown reason if the conversation is cooling down, else None."""
        if not cooldown.active:
            return None
        with self._lock:
            last = self._last.get((ctx.tenant, ctx.conversation_id))
        if last is None or ctx.user_turns <= last.user_turns:
            return None
        turns_ago = ctx.user_turns - last.user_turns
        if turns_ago <= cooldown.turns:
            return f"cooldown: retrieved {turns_ago} turn(s) ago (cooldown {cooldown.turns} turns)"
        seconds_ago = ctx.now - last.at
        if seconds_ago < cooldown.seconds:
            return f"cooldown: retrieved {seconds_ago:.1f}s ago (cooldown {cooldown.seconds:g}s)"
        return None

    def _remember(self, ctx: TurnContext) -> None:
        key = (ctx.tenant, ctx.conversation_id)
        with self._lock:
            self._last[key] = _Retrieval(ctx.user_turns, ctx.now)
            self._last.move_to_end(key)
            while len(self._last) > self._max_conversations:
                self._last.popitem(last=False)


def _header_mode(header: str | None) -> tuple[str, str]:
    """Return (mode, note): the header's mode and a reason suffix when it was invalid."""
    value = (header or "").strip().lower()
    if not value:
        return "auto", ""
    if value in _HEADER_VALUES:
        return value, ""
    shown = header if header is None or len(header) <= 40 else header[:40] + "..."
    return (
        "auto",
        f"; invalid {HEADER_NAME} header {shown!r} (expected auto|force|off), treated as auto",
    )


def _decision(settings: Settings, retrieve: bool, reason: str, rule: str | None = None) -> Decision:
    return Decision(retrieve, reason, rule, settings.budget_tokens, settings.max_fragments)
