"""Reading a policy from YAML, with errors that point at the file and line.

The format (``policies/default.yaml`` is the commented reference)::

    enabled: true            # master switch for automatic retrieval (the header still works)
    budget_tokens: 600       # max tokens of injected memory text (>= 1)
    max_fragments: 8         # max fragments retrieved (>= 1)
    cooldown:                # after a retrieval, suppress rule-triggered retrievals
      turns: 0               #   for this many following user turns (>= 0)
      seconds: 0             #   and/or for this many seconds (>= 0)
    rules:                   # in order; the first that matches triggers retrieval
      - type: first_turn                 # exactly one user message in the request
      - type: pattern                    # case-insensitive regex search, latest user message
        patterns: ["\\bremember\\b", "last time"]
      - type: mentions_entity            # latest user message names something memory knows
      - type: every_n_turns              # user_turns % n == 0
        n: 3
      - type: topic_shift                # latest message shares few words with recent ones
        threshold: 0.2                   #   fires below this share, 0 < threshold <= 1
        window: 3                        #   compared with this many earlier user turns
        min_words: 3                     #   shorter messages never fire
      - type: always
    overrides:
      models:                # fnmatch glob on the model name, case-insensitive; first wins
        "gpt-4o-mini*": {budget_tokens: 300}
      tenants:               # exact tenant name; applied after the model override
        alice: {enabled: false}
    dream:                   # when an automatic consolidation cycle runs for a tenant
      enabled: true          #   automatic cycles on/off (on-demand cycles are not affected)
      min_messages: 1        #   none with fewer messages logged since the last cycle (>= 1)
      after_rollback_s: 3600 #   none within this many seconds after a rollback (>= 0)
      rules:                 #   in order; the first that matches starts a cycle
        - type: idle                     # no chat request of the tenant for `seconds`
          seconds: 600                   #   > 0
        - type: material                 # at least `messages` messages since the last cycle
          messages: 500                  #   >= 1
        - type: schedule                 # daily at these UTC times, once per time
          at: ["03:30", "15:00"]         #   non-empty; each "HH:MM" (quote them)
        - type: interval                 # the last cycle (or the first new message) is
          hours: 24                      #   at least this old, > 0
      tenants:               #   exact tenant name: any key of ``dream`` but ``tenants``
        alice: {enabled: false}

Any rule may carry ``name:`` (shown in decision reasons instead of its type), and a rule
with no parameters may be written as a bare string (``- always``; ``- idle`` for a dream
rule with its default parameters). An override may set any top-level key except
``overrides`` and ``dream``, a dream override any key of ``dream`` except ``tenants``; a
key an override sets replaces the value below entirely.

Absent keys take their defaults (enabled, 600 tokens, 8 fragments, no cooldown, and the
rules first_turn, pattern with `DEFAULT_PATTERNS`, mentions_entity); an empty document is
the default policy. The ``dream`` section's defaults are the values shown above with the
rules idle and material; a dream rule's parameter defaults to the value shown (600 s,
500 messages, 24 h), except that a schedule needs ``at``. A key written with no value is
an empty section for ``cooldown``, ``overrides`` and ``dream`` (and their children) and
an error elsewhere; ``rules: []`` means no rule (in ``dream``: no automatic cycle).

Validation is strict: unknown keys, duplicate keys, wrong types, negative or zero counts,
unknown rule types, bad or empty-matching regexes, times of day that are not ``"HH:MM"``
and broken YAML all raise `PolicyError` with the file, the 1-based line of the offending
key and its path (list items counted from 1, like rules in decision reasons:
``rules[2] (pattern).patterns[1]``, ``dream.rules[3] (schedule).at[1]``). The format is
a set of pydantic models read through the project's one configuration mechanism
(:mod:`memory_core.configuration`: YAML composed with lines, strict frozen models, one
error form), then turned into the engine's immutable values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Literal, TypedDict, cast

from pydantic import AfterValidator, BeforeValidator, Field

from memory_core.configuration import (
    ConfigModel,
    ConfigurationError,
    Document,
    KeyPath,
    ListOf,
    Name,
    read_yaml,
    validate,
)
from policies.dream import (
    DreamOverride,
    DreamPolicy,
    DreamRule,
    DreamSettings,
    IdleRule,
    IntervalRule,
    MaterialRule,
    ScheduleRule,
    time_of_day,
)
from policies.errors import PolicyError
from policies.policy import Cooldown, Override, Policy, Settings
from policies.rules import (
    AlwaysRule,
    EveryNTurnsRule,
    FirstTurnRule,
    MentionsEntityRule,
    PatternRule,
    Rule,
    TopicShiftRule,
)

__all__ = ["PolicySpec", "load_policy", "parse_policy"]


def parse_policy(text: str, source: str = "<inline>", *, root_key: str | None = None) -> Policy:
    """Parse policy YAML `text`; `source` names it in errors and in `Policy.source`.

    With `root_key`, the policy is the value of that top-level key of a larger document
    (the proxy's config.yaml); line numbers stay those of the whole file, and a missing
    or empty key gives the default policy.
    """
    try:
        return _read(read_yaml(text, source), source, root_key)
    except PolicyError:
        raise
    except ConfigurationError as exc:
        raise PolicyError(exc.file, exc.line, exc.reason, key=exc.key) from None


def load_policy(path: str, *, root_key: str | None = None) -> Policy:
    """Read and parse the policy file at `path` (UTF-8); unreadable files are PolicyErrors."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(path, None, f"cannot read policy file: {exc}") from exc
    return parse_policy(text, path, root_key=root_key)


# -- the format -----------------------------------------------------------------------


def _regex(text: str) -> str:
    try:
        pattern = re.compile(text, re.IGNORECASE)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {text!r}: {exc}") from None
    if pattern.search(""):
        raise ValueError(
            f"regular expression {text!r} matches empty text, so it would match every message"
        )
    return text


def _bare_rule(value: object) -> object:
    """``- always`` is ``- {type: always}``."""
    return {"type": value} if isinstance(value, str) else value


def _empty_if_null(value: object) -> object:
    return {} if value is None else value


class _RuleSpec(ConfigModel):
    """Keys every rule may have."""

    name: Name | None = None


class _FirstTurn(_RuleSpec):
    type: Literal["first_turn"]


class _Pattern(_RuleSpec):
    type: Literal["pattern"]
    patterns: ListOf[Annotated[Name, AfterValidator(_regex)]] = Field(min_length=1)


class _MentionsEntity(_RuleSpec):
    type: Literal["mentions_entity"]


class _EveryNTurns(_RuleSpec):
    type: Literal["every_n_turns"]
    n: int = Field(ge=1)


class _TopicShift(_RuleSpec):
    type: Literal["topic_shift"]
    threshold: float = Field(TopicShiftRule.threshold, gt=0, le=1, allow_inf_nan=False)
    window: int = Field(TopicShiftRule.window, ge=1)
    min_words: int = Field(TopicShiftRule.min_words, ge=1)


class _Always(_RuleSpec):
    type: Literal["always"]


_AnyRule = Annotated[
    _FirstTurn | _Pattern | _MentionsEntity | _EveryNTurns | _TopicShift | _Always,
    Field(discriminator="type"),
]
_RuleItem = Annotated[_AnyRule, BeforeValidator(_bare_rule)]


class _SettingFields(TypedDict, total=False):
    """The setting keys one mapping sets (the policy's top level or one override)."""

    enabled: bool
    budget_tokens: int
    max_fragments: int
    cooldown: Cooldown
    rules: tuple[Rule, ...]


class _CooldownSpec(ConfigModel):
    turns: int = Field(0, ge=0)
    seconds: float = Field(0.0, ge=0, allow_inf_nan=False)


class _SettingsSpec(ConfigModel):
    """The keys the top level and an override may set (an override: only those it sets)."""

    enabled: bool = True
    budget_tokens: int = Field(Settings.budget_tokens, ge=1)
    max_fragments: int = Field(Settings.max_fragments, ge=1)
    cooldown: _CooldownSpec = _CooldownSpec()
    rules: ListOf[_RuleItem] = ()


_Targets = Annotated[dict[str, _SettingsSpec], BeforeValidator(_empty_if_null)]


class _OverridesSpec(ConfigModel):
    models: _Targets = Field(default_factory=dict)
    tenants: _Targets = Field(default_factory=dict)


def _time_of_day(value: object) -> object:
    """An ``"HH:MM"`` string; an unquoted ``12:00`` reaches here as YAML's number 720."""
    if isinstance(value, int) and not isinstance(value, bool):
        hint = f" (YAML reads an unquoted {value // 60}:{value % 60:02d} as a number)"
        shown = hint if 0 <= value < 24 * 60 else ""
        raise ValueError(f'must be a time of day "HH:MM" in quotes, got integer {value}{shown}')
    if isinstance(value, str):
        time_of_day(value)
    return value


class _DreamRuleSpec(ConfigModel):
    """Keys every dream rule may have."""

    name: Name | None = None


class _Idle(_DreamRuleSpec):
    type: Literal["idle"]
    seconds: float = Field(IdleRule.seconds, gt=0)

    def value(self, line: int | None) -> DreamRule:
        return IdleRule(name=self.name, line=line, seconds=self.seconds)


class _Material(_DreamRuleSpec):
    type: Literal["material"]
    messages: int = Field(MaterialRule.messages, ge=1)

    def value(self, line: int | None) -> DreamRule:
        return MaterialRule(name=self.name, line=line, messages=self.messages)


class _Schedule(_DreamRuleSpec):
    type: Literal["schedule"]
    at: ListOf[Annotated[str, BeforeValidator(_time_of_day)]] = Field(min_length=1)

    def value(self, line: int | None) -> DreamRule:
        return ScheduleRule(name=self.name, line=line, at=self.at)


class _Interval(_DreamRuleSpec):
    type: Literal["interval"]
    hours: float = Field(IntervalRule.hours, gt=0)

    def value(self, line: int | None) -> DreamRule:
        return IntervalRule(name=self.name, line=line, hours=self.hours)


_AnyDreamRule = Annotated[_Idle | _Material | _Schedule | _Interval, Field(discriminator="type")]


class _DreamFields(TypedDict, total=False):
    """The dream keys one mapping sets (the section's top level or one tenant override)."""

    enabled: bool
    min_messages: int
    after_rollback_s: float
    rules: tuple[DreamRule, ...]


class _DreamSettingsSpec(ConfigModel):
    """The keys the ``dream`` section and a tenant override in it may set."""

    enabled: bool = True
    min_messages: int = Field(DreamSettings.min_messages, ge=1)
    after_rollback_s: float = Field(DreamSettings.after_rollback_s, ge=0)
    rules: ListOf[Annotated[_AnyDreamRule, BeforeValidator(_bare_rule)]] = ()


class _DreamSpec(_DreamSettingsSpec):
    tenants: Annotated[dict[str, _DreamSettingsSpec], BeforeValidator(_empty_if_null)] = Field(
        default_factory=dict
    )


class PolicySpec(_SettingsSpec):
    """A policy document as written (its JSON Schema describes the format)."""

    overrides: _OverridesSpec = _OverridesSpec()
    dream: _DreamSpec = _DreamSpec()


# -- from the format to the engine's values -------------------------------------------


def _read(document: Document, source: str, root_key: str | None) -> Policy:
    value, prefix = document.value, cast("KeyPath", ())
    if root_key is not None:
        if value is not None and not isinstance(value, Mapping):
            raise document.error((), f"expected a mapping with key {root_key!r}")
        value, prefix = (value or {}).get(root_key), (root_key,)
    if value is None:
        return Policy(source=source)
    spec = validate(PolicySpec, value, document, prefix, first_index=1)
    builder = _Builder(document, prefix)
    overrides = spec.overrides
    return Policy(
        source=source,
        base=Settings(**builder.fields(spec, ())),
        models=builder.overrides("model", overrides.models, ("overrides", "models")),
        tenants=builder.overrides("tenant", overrides.tenants, ("overrides", "tenants")),
        dream=builder.dream(spec.dream),
    )


class _Builder:
    """Turns validated specs into policy values, with the lines of the document."""

    def __init__(self, document: Document, prefix: KeyPath) -> None:
        self.document, self.prefix = document, prefix

    def line(self, path: KeyPath) -> int | None:
        return self.document.line((*self.prefix, *path))

    def fields(self, spec: _SettingsSpec, path: KeyPath) -> _SettingFields:
        """The settings ``spec`` sets (at the top level, every one but unset rules)."""
        given = spec.model_fields_set
        top = not path
        fields: _SettingFields = {}
        if top or "enabled" in given:
            fields["enabled"] = spec.enabled
        if top or "budget_tokens" in given:
            fields["budget_tokens"] = spec.budget_tokens
        if top or "max_fragments" in given:
            fields["max_fragments"] = spec.max_fragments
        if top or "cooldown" in given:
            cooldown = spec.cooldown
            fields["cooldown"] = Cooldown(turns=cooldown.turns, seconds=cooldown.seconds)
        if "rules" in given:
            fields["rules"] = self.rules(spec.rules, (*path, "rules"))
        return fields

    def overrides(
        self, kind: str, targets: Mapping[str, _SettingsSpec], path: KeyPath
    ) -> tuple[Override, ...]:
        return tuple(
            Override(
                key=key,
                label=f"{kind} '{key}'",
                line=self.line((*path, key)),
                **self.fields(spec, (*path, key)),
            )
            for key, spec in targets.items()
        )

    def rules(self, specs: tuple[_AnyRule, ...], path: KeyPath) -> tuple[Rule, ...]:
        return tuple(self.rule(spec, self.line((*path, i))) for i, spec in enumerate(specs))

    def rule(self, spec: _AnyRule, line: int | None) -> Rule:
        if isinstance(spec, _Pattern):
            patterns = tuple(re.compile(p, re.IGNORECASE) for p in spec.patterns)
            return PatternRule(name=spec.name, line=line, patterns=patterns)
        if isinstance(spec, _EveryNTurns):
            return EveryNTurnsRule(name=spec.name, line=line, n=spec.n)
        if isinstance(spec, _TopicShift):
            return TopicShiftRule(
                name=spec.name,
                line=line,
                threshold=spec.threshold,
                window=spec.window,
                min_words=spec.min_words,
            )
        if isinstance(spec, _FirstTurn):
            return FirstTurnRule(name=spec.name, line=line)
        if isinstance(spec, _MentionsEntity):
            return MentionsEntityRule(name=spec.name, line=line)
        return AlwaysRule(name=spec.name, line=line)

    def dream(self, spec: _DreamSpec) -> DreamPolicy:
        tenants = tuple(
            DreamOverride(
                key=key,
                label=f"tenant '{key}'",
                line=self.line(("dream", "tenants", key)),
                **self.dream_fields(override, ("dream", "tenants", key)),
            )
            for key, override in spec.tenants.items()
        )
        base = DreamSettings(**self.dream_fields(spec, ("dream",)))
        return DreamPolicy(base=base, tenants=tenants)

    def dream_fields(self, spec: _DreamSettingsSpec, path: KeyPath) -> _DreamFields:
        """The dream settings ``spec`` sets (at the section's top level, all but unset rules)."""
        given = spec.model_fields_set
        top = path == ("dream",)
        fields: _DreamFields = {}
        if top or "enabled" in given:
            fields["enabled"] = spec.enabled
        if top or "min_messages" in given:
            fields["min_messages"] = spec.min_messages
        if top or "after_rollback_s" in given:
            fields["after_rollback_s"] = spec.after_rollback_s
        if "rules" in given:
            fields["rules"] = tuple(
                rule.value(self.line((*path, "rules", i))) for i, rule in enumerate(spec.rules)
            )
        return fields
