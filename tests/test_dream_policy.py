"""Tests for the dream policy: the ``dream:`` section parsed from real YAML, every rule
firing and not, the precedence of the checks, tenant overrides, schedules across midnight
and missed ones, validation errors with their lines, and hot reload from a real file."""

from __future__ import annotations

import calendar
import math
import os
import textwrap
from pathlib import Path

import pytest

import policies
from policies import (
    DEFAULT_POLICY_PATH,
    DreamDecision,
    DreamPolicy,
    DreamSettings,
    DreamState,
    IdleRule,
    IntervalRule,
    MaterialRule,
    Policy,
    PolicyError,
    PolicyStore,
    ScheduleRule,
    load_policy,
    parse_policy,
)

# -- helpers --------------------------------------------------------------------------


def utc(day: int, hour: int = 0, minute: int = 0, *, month: int = 5) -> float:
    """Epoch seconds of a UTC time in May 2024 (day 31 + 1 is June 1)."""
    return float(calendar.timegm((2024, month, day, hour, minute, 0)))


NOW = utc(1, 12, 0)


def dream(yaml_text: str) -> DreamPolicy:
    return parse_policy(textwrap.dedent(yaml_text), "policy.yaml").dream


def state(
    *,
    now: float = NOW,
    idle_s: float = 0.0,
    new_messages: int = 10,
    last_cycle_at: float | None = None,
    first_new_at: float | None = None,
    last_rollback_at: float | None = None,
    running: bool = False,
) -> DreamState:
    return DreamState(
        now=now,
        idle_s=idle_s,
        new_messages=new_messages,
        last_cycle_at=last_cycle_at,
        first_new_at=first_new_at,
        last_rollback_at=last_rollback_at,
        running=running,
    )


def write(path: Path, text: str, *, bump: int = 0) -> None:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    if bump:
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + bump * 1_000_000_000))


# -- parsing and defaults -------------------------------------------------------------


def test_no_section_an_empty_one_and_an_empty_document_are_the_default() -> None:
    default = DreamPolicy()
    for text in ("", "budget_tokens: 600\n", "dream:\n", "dream: {}\n", "dream:\n  tenants:\n"):
        assert parse_policy(text, "p.yaml").dream == default, text
    base = default.base
    assert (base.enabled, base.min_messages, base.after_rollback_s) == (True, 1, 3600)
    assert base.rules == (IdleRule(seconds=600), MaterialRule(messages=500))
    assert default.tenants == ()
    assert parse_policy("dream:\n", "p.yaml") == Policy(source="p.yaml")


def test_shipped_default_yaml_holds_exactly_the_default_dream_policy() -> None:
    shipped = load_policy(DEFAULT_POLICY_PATH)
    assert shipped.dream == DreamPolicy()
    assert shipped == Policy(source=DEFAULT_POLICY_PATH)
    assert "dream:" in Path(DEFAULT_POLICY_PATH).read_text(encoding="utf-8")


def test_full_section_parses_into_typed_values_with_lines() -> None:
    policy = dream(
        """\
        budget_tokens: 300
        dream:
          enabled: true
          min_messages: 20
          after_rollback_s: 90.5
          rules:
            - type: idle
              seconds: 120
            - type: material
              name: bulk
              messages: 1000
            - type: schedule
              at: ["03:30", "15:00"]
            - type: interval
              hours: 1.5
          tenants:
            alice: {enabled: false}
            bob:
              min_messages: 5
              rules: []
        """
    )
    base = policy.base
    assert (base.enabled, base.min_messages, base.after_rollback_s) == (True, 20, 90.5)
    assert base.rules == (
        IdleRule(seconds=120),
        MaterialRule(name="bulk", messages=1000),
        ScheduleRule(at=("03:30", "15:00")),
        IntervalRule(hours=1.5),
    )
    assert [rule.line for rule in base.rules] == [7, 9, 12, 14]
    assert [rule.label for rule in base.rules] == ["idle", "bulk", "schedule", "interval"]
    assert [(o.key, o.enabled, o.min_messages, o.rules, o.line) for o in policy.tenants] == [
        ("alice", False, None, None, 17),
        ("bob", None, 5, (), 18),
    ]


def test_rules_take_their_default_parameters_and_may_be_bare_names() -> None:
    policy = dream(
        """\
        dream:
          rules:
            - {type: idle}
            - {type: material}
            - type: interval
            - idle
        """
    )
    assert policy.base.rules == (
        IdleRule(seconds=600),
        MaterialRule(messages=500),
        IntervalRule(hours=24),
        IdleRule(seconds=600),
    )


def test_equal_texts_give_equal_policies_whatever_their_lines() -> None:
    text = "dream:\n  rules:\n    - {type: schedule, at: ['03:30']}\n"
    assert parse_policy(text, "a.yaml") == parse_policy(text, "a.yaml")
    assert parse_policy("\n\n" + text, "a.yaml").dream == parse_policy(text, "b.yaml").dream
    assert parse_policy(text, "a.yaml").dream != DreamPolicy()


# -- rules ----------------------------------------------------------------------------


def test_idle_fires_after_the_quiet_period_and_says_so() -> None:
    policy = dream("dream:\n  rules: [{type: idle}]\n")
    decision = policy.decide("t1", state(idle_s=612.4, new_messages=34))
    assert decision == DreamDecision(
        run=True,
        reason="rule 1 'idle': no request for 612 s (>= 600 s) with 34 new messages",
        rule="idle",
    )
    assert policy.decide("t1", state(idle_s=599.9)) == DreamDecision(False, "no rule matched")
    since_start = policy.decide("t1", state(idle_s=math.inf, new_messages=1))
    assert since_start.run
    assert since_start.reason == (
        "rule 1 'idle': no request since start (>= 600 s) with 1 new message"
    )


def test_material_fires_on_enough_new_messages_even_while_busy() -> None:
    policy = dream("dream:\n  rules: [{type: material, messages: 50, name: bulk}]\n")
    decision = policy.decide("t1", state(idle_s=0.0, new_messages=50))
    assert decision == DreamDecision(True, "rule 1 'bulk': 50 new messages (>= 50)", "bulk")
    assert not policy.decide("t1", state(new_messages=49)).run
    assert policy.decide("t1", state(new_messages=49)).reason == "no rule matched"


def test_rules_are_tried_in_order_and_the_first_match_decides() -> None:
    policy = dream("dream:\n  rules: [{type: material, messages: 5}, {type: idle}]\n")
    both = policy.decide("t1", state(idle_s=900, new_messages=8))
    assert (both.rule, both.reason) == ("material", "rule 1 'material': 8 new messages (>= 5)")
    idle_only = policy.decide("t1", state(idle_s=900, new_messages=3))
    assert idle_only.rule == "idle"
    assert idle_only.reason.startswith("rule 2 'idle': ")


def test_default_rules_need_idleness_or_much_material() -> None:
    policy = DreamPolicy()
    assert policy.decide("t1", state(idle_s=30, new_messages=499)).reason == "no rule matched"
    assert policy.decide("t1", state(idle_s=30, new_messages=500)).rule == "material"
    assert policy.decide("t1", state(idle_s=600, new_messages=1)).rule == "idle"


def test_no_rules_means_no_automatic_cycle() -> None:
    policy = dream("dream:\n  rules: []\n")
    decision = policy.decide("t1", state(idle_s=math.inf, new_messages=10**6))
    assert decision == DreamDecision(False, "no rules configured", None)


def test_schedule_fires_once_per_scheduled_time() -> None:
    policy = dream("dream:\n  rules: [{type: schedule, at: ['03:30', '15:00']}]\n")
    at_0400 = utc(1, 4, 0)
    decision = policy.decide("t1", state(now=at_0400, last_cycle_at=utc(1, 3, 0)))
    assert decision == DreamDecision(
        True, "rule 1 'schedule': scheduled 2024-05-01 03:30 UTC, after the last cycle", "schedule"
    )
    after_it = state(now=at_0400, last_cycle_at=utc(1, 3, 31))
    assert policy.decide("t1", after_it).reason == "no rule matched"
    before_next = state(now=utc(1, 14, 59), last_cycle_at=utc(1, 3, 31))
    assert not policy.decide("t1", before_next).run
    at_next = state(now=utc(1, 15, 0), last_cycle_at=utc(1, 3, 31))
    assert policy.decide("t1", at_next).reason.startswith(
        "rule 1 'schedule': scheduled 2024-05-01 15:00"
    )


def test_schedule_without_a_last_cycle_fires_at_once() -> None:
    policy = dream("dream:\n  rules: [{type: schedule, at: ['23:00']}]\n")
    decision = policy.decide("t1", state(now=utc(1, 8, 0)))
    assert decision.run
    assert decision.reason == "rule 1 'schedule': scheduled 2024-04-30 23:00 UTC, no cycle yet"


def test_schedule_across_midnight_uses_the_previous_day() -> None:
    policy = dream("dream:\n  rules: [{type: schedule, at: ['23:30']}]\n")
    just_after_midnight = utc(2, 0, 10)
    ran_yesterday = state(now=just_after_midnight, last_cycle_at=utc(1, 23, 31))
    assert policy.decide("t1", ran_yesterday).reason == "no rule matched"
    missed = policy.decide("t1", state(now=just_after_midnight, last_cycle_at=utc(1, 22, 0)))
    assert missed.run
    assert "scheduled 2024-05-01 23:30 UTC" in missed.reason
    month_end = ScheduleRule(at=("23:30",)).latest(utc(1, 0, 5, month=6))
    assert month_end == utc(31, 23, 30)


def test_a_missed_schedule_runs_once_after_downtime() -> None:
    policy = dream("dream:\n  rules: [{type: schedule, at: ['03:30']}]\n")
    last = utc(1, 3, 40)
    back_up = utc(4, 10, 0)  # down from May 1 to May 4: three 03:30s missed
    first = policy.decide("t1", state(now=back_up, last_cycle_at=last))
    assert first.run
    assert "scheduled 2024-05-04 03:30 UTC" in first.reason
    after_catch_up = state(now=back_up + 60, last_cycle_at=back_up + 30)
    assert policy.decide("t1", after_catch_up).reason == "no rule matched"


def test_interval_counts_from_the_last_cycle() -> None:
    policy = dream("dream:\n  rules: [{type: interval, hours: 24}]\n")
    decision = policy.decide("t1", state(now=NOW, last_cycle_at=NOW - 25 * 3600))
    assert decision == DreamDecision(
        True, "rule 1 'interval': last cycle 25.0 h ago (>= 24 h)", "interval"
    )
    recent = state(now=NOW, last_cycle_at=NOW - 23 * 3600, first_new_at=NOW - 30 * 3600)
    assert policy.decide("t1", recent).reason == "no rule matched"


def test_interval_without_a_cycle_counts_from_the_first_new_message() -> None:
    policy = dream("dream:\n  rules: [{type: interval, hours: 1.5}]\n")
    old = policy.decide("t1", state(first_new_at=NOW - 2 * 3600))
    assert old.reason == "rule 1 'interval': first new message 2.0 h ago (>= 1.5 h)"
    assert not policy.decide("t1", state(first_new_at=NOW - 3600)).run
    neither = policy.decide("t1", state(last_cycle_at=None, first_new_at=None))
    assert neither == DreamDecision(False, "no rule matched")


# -- precedence -----------------------------------------------------------------------

EAGER = """\
dream:
  after_rollback_s: 3600
  min_messages: 5
  rules: [{type: idle, seconds: 1}]
  tenants:
    alice: {enabled: false}
"""


def test_a_running_cycle_wins_over_everything() -> None:
    policy = dream(EAGER)
    busy = state(idle_s=math.inf, new_messages=0, last_rollback_at=NOW - 1, running=True)
    assert policy.decide("alice", busy) == DreamDecision(False, "a cycle is already running")
    assert policy.decide("bob", busy).reason == "a cycle is already running"


def test_disabled_wins_over_counts_and_says_who_disabled_it() -> None:
    quiet = state(idle_s=math.inf, new_messages=0, last_rollback_at=NOW - 1)
    assert dream(EAGER).decide("alice", quiet) == DreamDecision(
        False, "dream policy disabled by tenant 'alice'"
    )
    top = dream("dream:\n  enabled: false\n").decide("bob", state(idle_s=math.inf))
    assert top == DreamDecision(False, "dream policy disabled")


def test_too_few_messages_win_over_a_rollback_and_the_rules() -> None:
    policy = dream(EAGER)
    few = policy.decide("bob", state(idle_s=math.inf, new_messages=4, last_rollback_at=NOW - 1))
    assert few == DreamDecision(False, "only 4 new messages (min_messages 5)")
    none = DreamPolicy().decide("bob", state(idle_s=math.inf, new_messages=0))
    assert none.reason == "only 0 new messages (min_messages 1)"


def test_a_recent_rollback_holds_the_rules_back() -> None:
    policy = dream(EAGER)
    rolled = policy.decide("bob", state(idle_s=math.inf, last_rollback_at=NOW - 120))
    assert rolled == DreamDecision(False, "rollback 120 s ago (after_rollback_s 3600)")
    long_ago = policy.decide("bob", state(idle_s=math.inf, last_rollback_at=NOW - 3600))
    assert long_ago.run
    no_window = dream("dream:\n  after_rollback_s: 0\n")
    assert no_window.decide("bob", state(idle_s=math.inf, last_rollback_at=NOW)).run
    fortnight = dream("dream:\n  after_rollback_s: 1209600\n")
    held = fortnight.decide("bob", state(idle_s=math.inf, last_rollback_at=NOW - 86400))
    assert held.reason == "rollback 86400 s ago (after_rollback_s 1209600)"


# -- tenant overrides -----------------------------------------------------------------


def test_tenant_override_replaces_the_keys_it_sets_entirely() -> None:
    policy = dream(
        """\
        dream:
          min_messages: 3
          rules: [{type: idle}, {type: material, messages: 100}]
          tenants:
            alice:
              rules: [{type: schedule, at: ["02:00"]}]
            carol: {enabled: false, min_messages: 7}
        """
    )
    alice = policy.effective("alice")
    assert alice.rules == (ScheduleRule(at=("02:00",)),)
    assert (alice.min_messages, alice.enabled, alice.applied) == (3, True, ("tenant 'alice'",))
    assert alice.enabled_by is None
    assert not policy.decide("alice", state(idle_s=math.inf, last_cycle_at=utc(1, 2, 5))).run
    assert policy.decide("bob", state(idle_s=math.inf)).rule == "idle"
    carol = policy.effective("carol")
    assert (carol.enabled, carol.min_messages, carol.enabled_by) == (False, 7, "tenant 'carol'")
    assert policy.effective("Alice") == policy.base


def test_tenant_names_in_the_dream_section_are_its_own() -> None:
    policy = parse_policy("overrides:\n  tenants:\n    alice: {enabled: false}\n", "p.yaml")
    assert policy.effective("m", "alice").enabled is False
    assert policy.dream.effective("alice") == DreamSettings()
    assert policy.dream.decide("alice", state(idle_s=math.inf)).run


# -- values built in code -------------------------------------------------------------


def test_schedule_rule_refuses_bad_times_when_built_in_code() -> None:
    with pytest.raises(ValueError, match="at least one time"):
        ScheduleRule(at=())
    with pytest.raises(ValueError, match=r'"HH:MM"'):
        ScheduleRule(at=("7:00",))
    assert ScheduleRule(at=("00:00", "23:59")).latest(utc(1, 23, 58)) == utc(1, 0, 0)


# -- validation errors ----------------------------------------------------------------

INVALID = [
    (
        "dream:\n  enabled: true\n  min_message: 3\n",
        3,
        "dream.min_message: unknown key 'min_message'; did you mean 'min_messages'?",
    ),
    (
        "dream:\n  sleep: true\n",
        2,
        "dream.sleep: unknown key 'sleep' (allowed: enabled, min_messages, after_rollback_s, "
        "rules, tenants)",
    ),
    ("dream: 3\n", 1, "dream: must be a mapping, got integer 3"),
    ("dream:\n  enabled: sometimes\n", 2, "dream.enabled: must be true or false, got string"),
    ("dream:\n  min_messages: 0\n", 2, "dream.min_messages: must be >= 1, got 0"),
    ("dream:\n  min_messages: 2.5\n", 2, "dream.min_messages: must be an integer, got number 2.5"),
    ("dream:\n  after_rollback_s: -1\n", 2, "dream.after_rollback_s: must be >= 0, got -1"),
    (
        "dream:\n  after_rollback_s: '1h'\n",
        2,
        "dream.after_rollback_s: must be a number, got string '1h'",
    ),
    ("dream:\n  rules:\n", 2, "dream.rules: must be a list, got null (no value)"),
    ("dream:\n  rules: idle\n", 2, "dream.rules: must be a list, got string 'idle'"),
    (
        "dream:\n  rules:\n    - type: idle\n      seconds: -5\n",
        4,
        "dream.rules[1] (idle).seconds: must be > 0, got -5",
    ),
    (
        "dream:\n  rules:\n    - type: idle\n      seconds: 0\n",
        4,
        "dream.rules[1] (idle).seconds: must be > 0, got 0",
    ),
    (
        "dream:\n  rules:\n    - type: material\n      messages: 0\n",
        4,
        "dream.rules[1] (material).messages: must be >= 1, got 0",
    ),
    (
        "dream:\n  rules:\n    - type: interval\n      hours: 0\n",
        4,
        "dream.rules[1] (interval).hours: must be > 0, got 0",
    ),
    (
        "dream:\n  rules:\n    - {type: idle}\n    - {type: nap}\n",
        4,
        "dream.rules[2].type: unknown type 'nap' (one of: idle, material, schedule, interval)",
    ),
    (
        "dream:\n  rules:\n    - {seconds: 3}\n",
        3,
        "dream.rules[1]: missing key 'type' (one of: idle, material, schedule, interval)",
    ),
    (
        "dream:\n  rules:\n    - type: idle\n      hours: 2\n",
        4,
        "dream.rules[1] (idle).hours: unknown key 'hours' (allowed: name, type, seconds)",
    ),
    (
        "dream:\n  rules:\n    - {type: idle}\n"
        "    - type: schedule\n      at: ['03:30', '25:00']\n",
        5,
        'dream.rules[2] (schedule).at[2]: must be a time of day "HH:MM" (00:00 to 23:59), '
        "got '25:00'",
    ),
    (
        "dream:\n  rules:\n    - type: schedule\n      at:\n        - '03:30'\n        - '3:30'\n",
        6,
        'dream.rules[1] (schedule).at[2]: must be a time of day "HH:MM"',
    ),
    (
        "dream:\n  rules:\n    - type: schedule\n      at: ['03:60']\n",
        4,
        "dream.rules[1] (schedule).at[1]: must be a time of day",
    ),
    (
        "dream:\n  rules:\n    - type: schedule\n      at: [12:00]\n",
        4,
        'dream.rules[1] (schedule).at[1]: must be a time of day "HH:MM" in quotes, got '
        "integer 720 (YAML reads an unquoted 12:00 as a number)",
    ),
    (
        "dream:\n  rules:\n    - type: schedule\n      at: []\n",
        4,
        "dream.rules[1] (schedule).at: must be a non-empty list",
    ),
    (
        "dream:\n  rules:\n    - type: schedule\n      at: '03:30'\n",
        4,
        "dream.rules[1] (schedule).at: must be a list, got string '03:30'",
    ),
    (
        "dream:\n  rules:\n    - type: schedule\n      name: nightly\n",
        3,
        "dream.rules[1] (schedule).at: missing required key 'at'",
    ),
    (
        "dream:\n  rules:\n    - {type: idle, name: ''}\n",
        3,
        "dream.rules[1] (idle).name: must be a non-empty string",
    ),
    (
        "dream:\n  tenants:\n    alice:\n      tenants: {}\n",
        4,
        "dream.tenants.alice.tenants: unknown key 'tenants' (allowed: enabled, min_messages, "
        "after_rollback_s, rules)",
    ),
    (
        "dream:\n  tenants:\n    alice: {min_messages: -2}\n",
        3,
        "dream.tenants.alice.min_messages: must be >= 1, got -2",
    ),
    ("dream:\n  tenants: [alice]\n", 2, "dream.tenants: must be a mapping, got a list"),
    (
        "overrides:\n  tenants:\n    alice:\n      dream: {enabled: false}\n",
        4,
        "overrides.tenants.alice.dream: unknown key 'dream' (allowed: enabled,",
    ),
    ("dreams: {}\n", 1, "dreams: unknown key 'dreams'; did you mean 'dream'?"),
    ("dream:\n  enabled: true\n  enabled: false\n", 3, "dream.enabled: duplicate key 'enabled'"),
]


@pytest.mark.parametrize(("text", "line", "message"), INVALID)
def test_invalid_dream_section_names_file_line_and_key(text: str, line: int, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "policy.yaml")
    error = caught.value
    assert (error.file, error.line) == ("policy.yaml", line)
    assert message in error.message
    assert str(error) == f"policy.yaml:{line}: {error.message}"


def test_errors_inside_a_larger_document_keep_its_lines_and_root_key() -> None:
    config = "server:\n  port: 8080\npolicy:\n  dream:\n    rules:\n      - type: idle\n"
    assert parse_policy(config, "config.yaml", root_key="policy").dream.base.rules[0].line == 6
    broken = config + "        seconds: -1\n"
    with pytest.raises(PolicyError) as caught:
        parse_policy(broken, "config.yaml", root_key="policy")
    assert caught.value.line == 7
    assert caught.value.message == "policy.dream.rules[1] (idle).seconds: must be > 0, got -1"


# -- hot reload -----------------------------------------------------------------------


def test_store_reloads_an_edited_dream_section_and_keeps_it_on_a_broken_edit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.yaml"
    write(path, "budget_tokens: 100\ndream:\n  min_messages: 5\n")
    errors: list[PolicyError] = []
    store = PolicyStore(str(path), on_error=errors.append)
    assert store.current.dream.base.min_messages == 5
    assert store.current.dream.base.rules == (IdleRule(), MaterialRule())

    write(
        path,
        """\
        budget_tokens: 100
        dream:
          min_messages: 50
          rules: [{type: schedule, at: ["03:30"]}]
          tenants:
            alice: {enabled: false}
        """,
        bump=5,
    )
    assert store.check() is True
    edited = store.current
    assert edited.dream.base.min_messages == 50
    assert edited.dream.base.rules == (ScheduleRule(at=("03:30",)),)
    assert edited.dream.decide("alice", state(idle_s=math.inf)).reason == (
        "dream policy disabled by tenant 'alice'"
    )

    write(path, "budget_tokens: 100\ndream:\n  rules: [{type: schedule, at: ['3:30']}]\n", bump=10)
    assert store.check() is False
    assert store.current is edited
    assert [(e.file, e.line) for e in errors] == [(str(path), 3)]
    assert "dream.rules[1] (schedule).at[1]" in errors[0].message
    assert store.last_error is errors[0]


# -- public surface -------------------------------------------------------------------


def test_dream_names_are_exported() -> None:
    names = {
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
    }
    assert names <= set(policies.__all__)
    assert all(hasattr(policies, name) for name in names)
    assert Policy().dream == DreamPolicy()
