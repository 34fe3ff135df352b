"""The parsed policy: base settings plus per-model and per-tenant overrides.

Everything here is an immutable value, so a `Policy` can be shared by concurrent requests
and swapped whole on hot reload. `Policy.effective` resolves the settings for one request:
base values, then the first model override whose glob matches, then the tenant override;
a key an override sets replaces the value below it entirely (a `cooldown` or `rules` in an
override is not merged with the base one). The policy also carries the `DreamPolicy` of
its ``dream:`` section, which has tenant overrides of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TypeVar

from policies.dream import DreamPolicy
from policies.rules import Rule, default_rules

__all__ = [
    "DEFAULT_BUDGET_TOKENS",
    "DEFAULT_MAX_FRAGMENTS",
    "Cooldown",
    "Override",
    "Policy",
    "Settings",
]

DEFAULT_BUDGET_TOKENS = 600
DEFAULT_MAX_FRAGMENTS = 8

_T = TypeVar("_T")


@dataclass(frozen=True)
class Cooldown:
    """After a retrieval, suppress rule-triggered retrievals for the next `turns` user turns
    and/or until `seconds` have passed. Zero turns and zero seconds mean no cooldown.

    Invariant: both are >= 0.
    """

    turns: int = 0
    seconds: float = 0.0

    @property
    def active(self) -> bool:
        """Whether this cooldown can suppress anything at all."""
        return self.turns > 0 or self.seconds > 0


@dataclass(frozen=True)
class Settings:
    """The settings that apply to one request, after overrides.

    `enabled_by` names where `enabled` came from: None for the policy's own top level,
    else the label of the override that set it (e.g. ``"tenant 'alice'"``), so that a
    "disabled" decision can say who disabled it. `applied` lists every override applied,
    in order. Invariants: budget_tokens >= 1, max_fragments >= 1.
    """

    enabled: bool = True
    budget_tokens: int = DEFAULT_BUDGET_TOKENS
    max_fragments: int = DEFAULT_MAX_FRAGMENTS
    cooldown: Cooldown = Cooldown()
    rules: tuple[Rule, ...] = field(default_factory=default_rules)
    enabled_by: str | None = None
    applied: tuple[str, ...] = ()


@dataclass(frozen=True)
class Override:
    """Keys an override sets; None means "not set, keep the value below".

    `key` is the model glob or the tenant name; `label` says which, for reasons and logs.
    `line` is the 1-based line of the override in its file (None when built in code).
    """

    key: str
    label: str
    enabled: bool | None = None
    budget_tokens: int | None = None
    max_fragments: int | None = None
    cooldown: Cooldown | None = None
    rules: tuple[Rule, ...] | None = None
    line: int | None = field(default=None, compare=False)

    def apply(self, settings: Settings) -> Settings:
        """Return `settings` with every key this override sets replaced."""
        set_enabled = self.enabled is not None
        return Settings(
            enabled=settings.enabled if self.enabled is None else self.enabled,
            budget_tokens=_pick(self.budget_tokens, settings.budget_tokens),
            max_fragments=_pick(self.max_fragments, settings.max_fragments),
            cooldown=_pick(self.cooldown, settings.cooldown),
            rules=_pick(self.rules, settings.rules),
            enabled_by=self.label if set_enabled else settings.enabled_by,
            applied=(*settings.applied, self.label),
        )


@dataclass(frozen=True)
class Policy:
    """A whole parsed policy file. `source` is its path, or ``"<inline>"``.

    Model globs match case-insensitively (fnmatch syntax), first match wins; tenant
    names match exactly. `dream` says when automatic consolidation cycles run.
    """

    source: str = "<inline>"
    base: Settings = Settings()
    models: tuple[Override, ...] = ()
    tenants: tuple[Override, ...] = ()
    dream: DreamPolicy = field(default_factory=DreamPolicy)

    def effective(self, model: str, tenant: str) -> Settings:
        """Settings for a request to `model` by `tenant`: base, then model, then tenant."""
        settings = self.base
        folded = model.casefold()
        for override in self.models:
            if fnmatchcase(folded, override.key.casefold()):
                settings = override.apply(settings)
                break
        for override in self.tenants:
            if override.key == tenant:
                settings = override.apply(settings)
                break
        return settings


def _pick(value: _T | None, fallback: _T) -> _T:
    return fallback if value is None else value
