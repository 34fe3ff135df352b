"""The dream policy: when an automatic consolidation cycle (the Dreamer) runs for a tenant.

The ``dream:`` section of the policy file is parsed (by `policies.schema`) into a
`DreamPolicy`; `DreamPolicy.decide` turns one tenant's `DreamState` into a `DreamDecision`
with a human-readable reason. Everything is an immutable value and every check is pure:
the caller measures the state (clock, idle time, log counts) and acts on the decision.
Cycles started on demand do not ask this policy.

Order of precedence, first that applies wins:

1. a cycle already running for the tenant never starts another;
2. ``enabled: false`` (top level or the tenant's override) stops automatic cycles;
3. fewer than ``min_messages`` messages logged since the last cycle: nothing to consolidate;
4. a rollback less than ``after_rollback_s`` seconds ago: let the restored memory settle;
5. the rules, in order; the first that matches starts a cycle.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

__all__ = [
    "DEFAULT_DREAM_AFTER_ROLLBACK_S",
    "DEFAULT_DREAM_MIN_MESSAGES",
    "DREAM_RULE_TYPES",
    "DreamDecision",
    "DreamOverride",
    "DreamPolicy",
    "DreamRule",
    "DreamSettings",
    "DreamState",
    "IdleRule",
    "IntervalRule",
    "MaterialRule",
    "ScheduleRule",
    "default_dream_rules",
    "time_of_day",
]

DEFAULT_DREAM_MIN_MESSAGES = 1
DEFAULT_DREAM_AFTER_ROLLBACK_S = 3600.0

_DAY_S = 86_400
_TIME_OF_DAY = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")

_T = TypeVar("_T")


@dataclass(frozen=True)
class DreamState:
    """What the caller measured for one tenant, at `now` (epoch seconds).

    `idle_s` is the time since the tenant's last chat request (``math.inf`` when there
    was none since the proxy started); `new_messages` counts the log rows since the last
    cycle; `last_cycle_at` is when the last completed cycle ended, `first_new_at` when the
    oldest message not yet consolidated was logged, `last_rollback_at` when memory was last
    rolled back (each None when unknown or never); `running` says a cycle runs right now.
    """

    now: float
    idle_s: float
    new_messages: int
    last_cycle_at: float | None = None
    first_new_at: float | None = None
    last_rollback_at: float | None = None
    running: bool = False


@dataclass(frozen=True)
class DreamDecision:
    """Whether to start a cycle, and why; `reason` is always filled, also for "no".

    `rule` is the name (or type) of the rule that fired, None when no rule decided.
    """

    run: bool
    reason: str
    rule: str | None = None


# -- rules ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _DreamRuleBase:
    """Fields every dream rule shares. `line` (1-based, None for built-ins) is not compared."""

    type: ClassVar[str]
    name: str | None = None
    line: int | None = field(default=None, compare=False)

    @property
    def label(self) -> str:
        """The rule's name when it has one, else its type; used in reasons."""
        return self.name or self.type


@dataclass(frozen=True, kw_only=True)
class IdleRule(_DreamRuleBase):
    """Fires when the tenant sent no chat request for `seconds`. Invariant: seconds > 0."""

    type: ClassVar[str] = "idle"
    seconds: float = 600.0

    def match(self, state: DreamState) -> str | None:
        if state.idle_s < self.seconds:
            return None
        idle = "since start" if math.isinf(state.idle_s) else f"for {_seconds(state.idle_s)}"
        return (
            f"no request {idle} (>= {_seconds(self.seconds)}) "
            f"with {_count(state.new_messages, 'new message')}"
        )


@dataclass(frozen=True, kw_only=True)
class MaterialRule(_DreamRuleBase):
    """Fires when at least `messages` messages were logged since the last cycle, busy or
    not. Invariant: messages >= 1."""

    type: ClassVar[str] = "material"
    messages: int = 500

    def match(self, state: DreamState) -> str | None:
        if state.new_messages < self.messages:
            return None
        return f"{_count(state.new_messages, 'new message')} (>= {self.messages})"


@dataclass(frozen=True, kw_only=True)
class ScheduleRule(_DreamRuleBase):
    """Fires daily at the UTC times of day `at` (``"HH:MM"``), once per time.

    It fires when the most recent scheduled time at or before `now` is later than the last
    cycle (or there is no last cycle), so a time missed while the proxy was down still
    gets its cycle, once. Invariant: `at` is non-empty and each item is ``"HH:MM"``.
    """

    type: ClassVar[str] = "schedule"
    at: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.at:
            raise ValueError("a schedule needs at least one time")
        for text in self.at:
            time_of_day(text)

    def latest(self, now: float) -> float:
        """The most recent scheduled time (epoch seconds) at or before `now`."""
        midnight = now - now % _DAY_S
        times = (midnight + 60 * time_of_day(text) for text in self.at)
        return max(t if t <= now else t - _DAY_S for t in times)

    def match(self, state: DreamState) -> str | None:
        due = self.latest(state.now)
        if state.last_cycle_at is not None and due <= state.last_cycle_at:
            return None
        since = "no cycle yet" if state.last_cycle_at is None else "after the last cycle"
        return f"scheduled {_utc(due)} UTC, {since}"


@dataclass(frozen=True, kw_only=True)
class IntervalRule(_DreamRuleBase):
    """Fires when the last cycle, or with none yet the first message since, is at least
    `hours` old; with neither known it does not fire. Invariant: hours > 0."""

    type: ClassVar[str] = "interval"
    hours: float = 24.0

    def match(self, state: DreamState) -> str | None:
        if state.last_cycle_at is not None:
            since, what = state.last_cycle_at, "last cycle"
        elif state.first_new_at is not None:
            since, what = state.first_new_at, "first new message"
        else:
            return None
        age_h = (state.now - since) / 3600
        if age_h < self.hours:
            return None
        return f"{what} {age_h:.1f} h ago (>= {_number(self.hours)} h)"


DreamRule = IdleRule | MaterialRule | ScheduleRule | IntervalRule

DREAM_RULE_TYPES: dict[str, type[DreamRule]] = {
    cls.type: cls for cls in (IdleRule, MaterialRule, ScheduleRule, IntervalRule)
}


def default_dream_rules() -> tuple[DreamRule, ...]:
    """The rules used when the section names none: idle for 600 s, or 500 new messages."""
    return (IdleRule(), MaterialRule())


def time_of_day(text: str) -> int:
    """Minutes past midnight of ``"HH:MM"`` (24 h, two digits each); ValueError otherwise."""
    found = _TIME_OF_DAY.fullmatch(text)
    if found is None:
        raise ValueError(f'must be a time of day "HH:MM" (00:00 to 23:59), got {text!r}')
    return int(found.group(1)) * 60 + int(found.group(2))


# -- settings and overrides -----------------------------------------------------------


@dataclass(frozen=True)
class DreamSettings:
    """The dream settings that apply to one tenant, after its override.

    `enabled_by` names where `enabled` came from (None for the section's own top level,
    else the override's label, e.g. ``"tenant 'alice'"``); `applied` lists the overrides
    applied. Invariants: min_messages >= 1, after_rollback_s >= 0.
    """

    enabled: bool = True
    min_messages: int = DEFAULT_DREAM_MIN_MESSAGES
    after_rollback_s: float = DEFAULT_DREAM_AFTER_ROLLBACK_S
    rules: tuple[DreamRule, ...] = field(default_factory=default_dream_rules)
    enabled_by: str | None = None
    applied: tuple[str, ...] = ()


@dataclass(frozen=True)
class DreamOverride:
    """Keys a tenant's override sets; None means "not set, keep the base value".

    `key` is the tenant name, `label` says it for reasons; `line` is the 1-based line of
    the override in its file (None when built in code).
    """

    key: str
    label: str
    enabled: bool | None = None
    min_messages: int | None = None
    after_rollback_s: float | None = None
    rules: tuple[DreamRule, ...] | None = None
    line: int | None = field(default=None, compare=False)

    def apply(self, settings: DreamSettings) -> DreamSettings:
        """Return `settings` with every key this override sets replaced."""
        return DreamSettings(
            enabled=_pick(self.enabled, settings.enabled),
            min_messages=_pick(self.min_messages, settings.min_messages),
            after_rollback_s=_pick(self.after_rollback_s, settings.after_rollback_s),
            rules=_pick(self.rules, settings.rules),
            enabled_by=settings.enabled_by if self.enabled is None else self.label,
            applied=(*settings.applied, self.label),
        )


@dataclass(frozen=True)
class DreamPolicy:
    """The whole ``dream:`` section: base settings plus per-tenant overrides (exact names)."""

    base: DreamSettings = DreamSettings()
    tenants: tuple[DreamOverride, ...] = ()

    def effective(self, tenant: str) -> DreamSettings:
        """Settings for `tenant`: the base, then the first override with its exact name."""
        for override in self.tenants:
            if override.key == tenant:
                return override.apply(self.base)
        return self.base

    def decide(self, tenant: str, state: DreamState) -> DreamDecision:
        """Whether an automatic cycle starts now for `tenant`, in the module's precedence."""
        settings = self.effective(tenant)
        held = _held(settings, state)
        if held is not None:
            return DreamDecision(False, held)
        for index, rule in enumerate(settings.rules, start=1):
            detail = rule.match(state)
            if detail is not None:
                return DreamDecision(True, f"rule {index} '{rule.label}': {detail}", rule.label)
        return DreamDecision(False, "no rule matched" if settings.rules else "no rules configured")


def _held(settings: DreamSettings, state: DreamState) -> str | None:
    """Why no rule may start a cycle (steps 1 to 4 of the precedence), else None."""
    if state.running:
        return "a cycle is already running"
    if not settings.enabled:
        by = settings.enabled_by
        return f"dream policy disabled by {by}" if by else "dream policy disabled"
    if state.new_messages < settings.min_messages:
        shown = _count(state.new_messages, "new message")
        return f"only {shown} (min_messages {settings.min_messages})"
    if state.last_rollback_at is not None:
        ago = state.now - state.last_rollback_at
        if ago < settings.after_rollback_s:
            window = _number(settings.after_rollback_s)
            return f"rollback {_seconds(ago)} ago (after_rollback_s {window})"
    return None


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if abs(value) >= 10 else f"{value:.3g} s"


def _number(value: float) -> str:
    """``3600`` rather than ``3600.0``, and never ``1.2096e+06``."""
    return f"{value:.0f}" if value == int(value) else f"{value:g}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _utc(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(epoch))


def _pick(value: _T | None, fallback: _T) -> _T:
    return fallback if value is None else value
