"""Tests for the trigger policy: parsing, every rule type, cooldown, overrides, header,
validation errors with their lines, and hot reload from a real file."""

from __future__ import annotations

import asyncio
import os
import re
import textwrap
import threading
from pathlib import Path

import pytest

import policies
from memory_core.text.names import NameIndex
from policies import (
    DEFAULT_PATTERNS,
    DEFAULT_POLICY_PATH,
    Cooldown,
    Decision,
    FirstTurnRule,
    MentionsEntityRule,
    PatternRule,
    Policy,
    PolicyEngine,
    PolicyError,
    PolicyStore,
    Similarity,
    TopicShiftRule,
    TurnContext,
    lexical_similarity,
    load_policy,
    parse_policy,
)
from policies.store import MAX_POLICY_CHARS

# -- helpers --------------------------------------------------------------------------


class FakeEntities:
    """An EntityIndex that knows a fixed list of names (case-insensitive substring)."""

    def __init__(self, *names: str) -> None:
        self.names = names
        self.calls: list[str] = []

    def mentioned(self, text: str) -> list[str]:
        self.calls.append(text)
        return [name for name in self.names if name.lower() in text.lower()]


def turn(
    text: str = "hello there",
    *,
    turns: int = 2,
    header: str | None = None,
    now: float = 1000.0,
    tenant: str = "t1",
    model: str = "gpt-4o",
    conversation: str = "c1",
    recent: tuple[str, ...] = (),
) -> TurnContext:
    return TurnContext(
        tenant=tenant,
        model=model,
        conversation_id=conversation,
        user_turns=turns,
        latest_user_text=text,
        header=header,
        now=now,
        recent_user_texts=recent,
    )


def engine(
    yaml_text: str = "",
    *,
    similarity: Similarity = lexical_similarity,
    max_conversations: int = 10_000,
) -> PolicyEngine:
    policy = parse_policy(textwrap.dedent(yaml_text), "policy.yaml")
    return PolicyEngine(lambda: policy, similarity=similarity, max_conversations=max_conversations)


def write(path: Path, text: str, *, bump: int = 0) -> None:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    if bump:
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + bump * 1_000_000_000))


# -- errors ---------------------------------------------------------------------------


def test_policy_error_renders_file_line_message() -> None:
    error = PolicyError("p.yaml", 3, "bad thing")
    assert (error.file, error.line, error.message) == ("p.yaml", 3, "bad thing")
    assert str(error) == "p.yaml:3: bad thing"
    assert str(PolicyError("p.yaml", None, "unreadable")) == "p.yaml: unreadable"
    assert str(PolicyError(None, None, "plain")) == "plain"
    assert isinstance(error, Exception)


# -- parsing and defaults -------------------------------------------------------------


def test_empty_document_is_the_default_policy() -> None:
    for text in ("", "# only a comment\n", "~\n"):
        base = parse_policy(text, "p.yaml").base
        assert base.enabled is True
        assert (base.budget_tokens, base.max_fragments) == (600, 8)
        assert base.cooldown == Cooldown(turns=0, seconds=0)
        assert [rule.type for rule in base.rules] == ["first_turn", "pattern", "mentions_entity"]
        pattern = base.rules[1]
        assert isinstance(pattern, PatternRule)
        assert tuple(p.pattern for p in pattern.patterns) == DEFAULT_PATTERNS
        assert all(p.flags & re.IGNORECASE for p in pattern.patterns)


def test_shipped_default_yaml_equals_the_builtin_defaults() -> None:
    shipped = load_policy(DEFAULT_POLICY_PATH)
    assert shipped.source == DEFAULT_POLICY_PATH
    assert shipped.base == Policy().base
    assert (shipped.models, shipped.tenants) == ((), ())


def test_full_example_parses_into_typed_values() -> None:
    policy = parse_policy(
        textwrap.dedent(
            r"""
            enabled: true
            budget_tokens: 500
            max_fragments: 5
            cooldown:
              turns: 2
              seconds: 30.5
            rules:
              - type: first_turn
              - type: pattern
                name: recall
                patterns: ["\\bremember\\b", "last time"]
              - type: mentions_entity
              - type: every_n_turns
                n: 3
              - type: topic_shift
                threshold: 0.3
                window: 2
                min_words: 4
              - always
            overrides:
              models:
                "gpt-4o-mini*": {budget_tokens: 300}
              tenants:
                alice: {enabled: false}
            """
        ),
        "p.yaml",
    )
    base = policy.base
    assert (base.budget_tokens, base.max_fragments) == (500, 5)
    assert base.cooldown == Cooldown(turns=2, seconds=30.5)
    assert [rule.label for rule in base.rules] == [
        "first_turn",
        "recall",
        "mentions_entity",
        "every_n_turns",
        "topic_shift",
        "always",
    ]
    assert base.rules[4] == TopicShiftRule(threshold=0.3, window=2, min_words=4)
    assert base.rules[1].line == 10
    assert [(o.key, o.budget_tokens, o.line) for o in policy.models] == [("gpt-4o-mini*", 300, 23)]
    assert [(o.key, o.enabled) for o in policy.tenants] == [("alice", False)]


def test_keys_without_value_are_empty_sections() -> None:
    policy = parse_policy("cooldown:\noverrides:\n  models:\n  tenants:\n", "p.yaml")
    assert policy.base.cooldown == Cooldown()
    assert (policy.models, policy.tenants) == ((), ())


def test_empty_rule_list_means_no_automatic_retrieval() -> None:
    e = engine("rules: []")
    decision = e.decide(turn("remember?", turns=1))
    assert not decision.retrieve
    assert decision.reason == "no rules configured"
    assert e.decide(turn(turns=1, header="force")).retrieve


# -- rules ----------------------------------------------------------------------------


def test_first_turn_fires_only_on_the_first_user_message() -> None:
    e = engine("rules: [first_turn]")
    first = e.decide(turn(turns=1))
    assert first == Decision(
        retrieve=True,
        reason="rule 1 'first_turn' matched: first turn of the conversation",
        rule="first_turn",
        budget_tokens=600,
        max_fragments=8,
    )
    later = e.decide(turn(turns=2, conversation="c2"))
    assert (later.retrieve, later.reason, later.rule) == (False, "no rule matched", None)


@pytest.mark.parametrize(
    ("text", "matched"),
    [
        ("Do you REMEMBER my dog?", "REMEMBER"),
        ("like last time, please", "last time"),
        ("We decided on Postgres, right?", "We decided"),
        ("¿Recuerdas mi nombre?", "Recuerdas"),
        ("Você lembra do projeto?", "lembra"),
        ("¿Te acuerdas de Ana?", "Te acuerdas"),
        ("Tu te souviens de moi ?", "souviens"),
    ],
)
def test_default_patterns_match_recall_phrases_in_several_languages(
    text: str, matched: str
) -> None:
    decision = engine().decide(turn(text))
    assert decision.retrieve
    assert decision.rule == "pattern"
    assert decision.reason == f"rule 2 'pattern' matched '{matched}'"


def test_pattern_respects_word_boundaries_and_misses_unrelated_text() -> None:
    e = engine()
    assert not e.decide(turn("I remembered to buy milk")).retrieve
    assert e.decide(turn("what is the capital of France?")).reason == "no rule matched"


def test_named_rule_is_shown_by_name() -> None:
    e = engine(
        r"""
        rules:
          - type: pattern
            name: recall-es
            patterns: ['\bacuerdas\b']
        """
    )
    decision = e.decide(turn("¿te ACUERDAS?"))
    assert decision.rule == "recall-es"
    assert decision.reason == "rule 1 'recall-es' matched 'ACUERDAS'"


def test_mentions_entity_uses_the_index_and_names_the_entities() -> None:
    e = engine("rules: [mentions_entity]")
    index = FakeEntities("Alice", "Berlin")
    decision = e.decide(turn("Is alice still in Berlin?"), index)
    assert decision.retrieve
    assert decision.reason == "rule 1 'mentions_entity' matched entity 'Alice', 'Berlin'"
    assert index.calls == ["Is alice still in Berlin?"]
    assert not e.decide(turn("Is Bob around?", conversation="c2"), index).retrieve


def test_mentions_entity_without_index_does_not_match() -> None:
    decision = engine("rules: [mentions_entity]").decide(turn("Is Alice around?"), None)
    assert (decision.retrieve, decision.reason) == (False, "no rule matched")


def _memory_names() -> NameIndex:
    """Memory's own index, as a store builds it: junk entities an older formation made
    ("Here", "Perfect", "user"), real ones, and the user's sister held as a relation."""
    index = NameIndex(["Here", "Perfect", "Becoming", "user", "assistant", "Marta", "Chess"])
    index.add_relations(["has_sister", "works_at"])
    return index


@pytest.mark.parametrize(
    "text",
    [
        "Here we go again",
        "Perfect, thanks!",
        "Becoming a baker is hard",
        "Ask the user or the assistant",
        "chess is hard",
        "Should I call my brother?",
        "Devo ligar ao meu irmão?",
        "¿Llamo a mi hermano?",
    ],
)
def test_mentions_entity_does_not_fire_on_junk_with_memorys_index(text: str) -> None:
    decision = engine().decide(turn(text), _memory_names())
    assert (decision.retrieve, decision.reason) == (False, "no rule matched")


@pytest.mark.parametrize(
    ("text", "matched"),
    [
        ("Should I visit my sister?", "my sister"),
        ("Devo visitar a minha irmã?", "minha irmã"),
        ("¿Debería visitar a mi hermana?", "mi hermana"),
        ("What would marta say?", "Marta"),
        ("I lost at Chess again", "Chess"),
    ],
)
def test_mentions_entity_fires_on_names_and_relations_memory_holds(text: str, matched: str) -> None:
    decision = engine().decide(turn(text), _memory_names())
    assert decision.retrieve
    assert decision.reason == f"rule 3 'mentions_entity' matched entity '{matched}'"


def test_every_n_turns_fires_on_multiples_of_n() -> None:
    e = engine("rules:\n  - type: every_n_turns\n    n: 3\n")
    fired = [t for t in range(1, 10) if e.decide(turn(turns=t, conversation=f"c{t}")).retrieve]
    assert fired == [3, 6, 9]
    reason = e.decide(turn(turns=6, conversation="x")).reason
    assert reason == "rule 1 'every_n_turns' matched: user turn 6 is a multiple of 3"


def test_always_fires_and_rules_are_tried_in_order() -> None:
    e = engine("rules: [first_turn, always]")
    assert e.decide(turn(turns=1)).rule == "first_turn"
    decision = e.decide(turn(turns=5, conversation="c2"))
    assert (decision.rule, decision.reason) == ("always", "rule 2 'always' matched: always")


def test_topic_shift_fires_when_the_latest_message_leaves_the_recent_topic() -> None:
    e = engine("rules:\n  - type: topic_shift\n    threshold: 0.2\n")
    recent = ("How long should pasta boil?", "Which pasta sauce goes with basil?")
    shift = e.decide(turn("Explain quantum entanglement experiments simply", recent=recent))
    assert shift.retrieve
    assert shift.reason.startswith("rule 1 'topic_shift' matched: similarity 0.00")
    same = e.decide(turn("Does basil pasta sauce need garlic?", recent=recent))
    assert (same.retrieve, same.reason) == (False, "no rule matched")
    assert not e.decide(turn("ok thanks", recent=recent)).retrieve
    assert not e.decide(turn("Explain quantum entanglement experiments simply")).retrieve


def test_topic_shift_uses_the_injected_similarity_and_window() -> None:
    seen: list[tuple[str, str]] = []

    def similarity(latest: str, recent: str) -> float:
        seen.append((latest, recent))
        return 0.1

    e = engine("rules:\n  - type: topic_shift\n    window: 2\n", similarity=similarity)
    decision = e.decide(turn("a brand new question here", recent=("one", "two", "three")))
    assert decision.retrieve
    assert seen == [("a brand new question here", "two\nthree")]


def test_lexical_similarity_is_the_share_of_latest_words_seen_recently() -> None:
    assert lexical_similarity("pasta with basil", "BASIL and tomato") == pytest.approx(1 / 3)
    assert lexical_similarity("pasta basil", "pasta basil sauce") == 1.0
    assert lexical_similarity("ok", "anything") == 1.0


# -- cooldown -------------------------------------------------------------------------


def test_cooldown_by_turns_suppresses_the_following_turns() -> None:
    e = engine("cooldown: {turns: 2}\nrules: [always]\n")
    assert e.decide(turn(turns=2)).retrieve
    third = e.decide(turn(turns=3))
    assert (third.retrieve, third.rule) == (False, None)
    assert third.reason == "cooldown: retrieved 1 turn(s) ago (cooldown 2 turns)"
    assert e.decide(turn(turns=4)).reason == "cooldown: retrieved 2 turn(s) ago (cooldown 2 turns)"
    assert e.decide(turn(turns=5)).retrieve
    assert not e.decide(turn(turns=6)).retrieve


def test_cooldown_by_seconds_uses_the_given_clock() -> None:
    e = engine("cooldown: {seconds: 60}\nrules: [always]\n")
    assert e.decide(turn(turns=2, now=1000.0)).retrieve
    suppressed = e.decide(turn(turns=3, now=1030.0))
    assert not suppressed.retrieve
    assert suppressed.reason == "cooldown: retrieved 30.0s ago (cooldown 60s)"
    assert e.decide(turn(turns=4, now=1060.0)).retrieve


def test_cooldown_is_per_tenant_and_conversation() -> None:
    e = engine("cooldown: {turns: 5}\nrules: [always]\n")
    assert e.decide(turn(turns=2)).retrieve
    assert not e.decide(turn(turns=3)).retrieve
    assert e.decide(turn(turns=3, conversation="c2")).retrieve
    assert e.decide(turn(turns=3, tenant="t2")).retrieve


def test_cooldown_never_suppresses_a_first_turn() -> None:
    e = engine("cooldown: {turns: 5, seconds: 600}\nrules: [first_turn, always]\n")
    assert e.decide(turn(turns=1, now=0.0)).rule == "first_turn"
    again = e.decide(turn(turns=1, now=10.0))
    assert (again.retrieve, again.rule) == (True, "first_turn")
    assert e.decide(turn(turns=2, now=20.0)).reason.startswith("cooldown:")


def test_cooldown_does_not_suppress_a_regenerated_turn() -> None:
    e = engine("cooldown: {turns: 3, seconds: 600}\nrules: [always]\n")
    assert e.decide(turn(turns=4, now=0.0)).retrieve
    assert e.decide(turn(turns=4, now=5.0)).retrieve
    assert not e.decide(turn(turns=5, now=6.0)).retrieve


def test_cooldown_ignores_rules_that_would_match_and_reports_it() -> None:
    e = engine("cooldown: {turns: 1}\n")
    assert e.decide(turn("remember the plan?", turns=2)).retrieve
    decision = e.decide(turn("remember the other plan?", turns=3))
    assert (decision.retrieve, decision.reason) == (
        False,
        "cooldown: retrieved 1 turn(s) ago (cooldown 1 turns)",
    )


def test_forced_retrieval_starts_a_cooldown_and_off_does_not() -> None:
    e = engine("cooldown: {turns: 1}\nrules: [always]\n")
    assert e.decide(turn(turns=2, header="force")).retrieve
    assert e.decide(turn(turns=3)).reason.startswith("cooldown:")
    assert not e.decide(turn(turns=2, conversation="c2", header="off")).retrieve
    assert e.decide(turn(turns=3, conversation="c2")).retrieve


def test_cooldown_memory_is_bounded_and_forgets_the_oldest() -> None:
    e = engine("cooldown: {turns: 5}\nrules: [always]\n", max_conversations=2)
    for conversation in ("c1", "c2", "c3"):
        assert e.decide(turn(turns=2, conversation=conversation)).retrieve
    assert e.decide(turn(turns=3, conversation="c1")).retrieve
    assert not e.decide(turn(turns=3, conversation="c3")).retrieve
    with pytest.raises(ValueError, match="max_conversations"):
        engine(max_conversations=0)


# -- header ---------------------------------------------------------------------------


def test_header_off_wins_over_every_rule() -> None:
    decision = engine("rules: [always]").decide(turn(turns=1, header="off"))
    assert (decision.retrieve, decision.reason, decision.rule) == (
        False,
        "header X-Memory: off",
        None,
    )


def test_header_force_retrieves_even_when_disabled() -> None:
    decision = engine("enabled: false\nbudget_tokens: 90\n").decide(turn(header="force"))
    assert (decision.retrieve, decision.reason, decision.budget_tokens) == (
        True,
        "header X-Memory: force",
        90,
    )


@pytest.mark.parametrize(("value", "expected"), [(" FORCE ", True), ("Off", False)])
def test_header_is_case_insensitive(value: str, expected: bool) -> None:
    assert engine("rules: []").decide(turn(header=value)).retrieve is expected


@pytest.mark.parametrize("value", ["auto", "AUTO", "", None])
def test_header_auto_or_absent_follows_the_policy(value: str | None) -> None:
    e = engine()
    assert e.decide(turn("remember?", header=value)).reason == "rule 2 'pattern' matched 'remember'"
    assert not e.decide(turn("hi", header=value, conversation="c2")).retrieve


def test_invalid_header_is_treated_as_auto_and_said_so() -> None:
    e = engine()
    hit = e.decide(turn(turns=1, header="sometimes"))
    assert hit.retrieve
    assert hit.reason == (
        "rule 1 'first_turn' matched: first turn of the conversation; "
        "invalid X-Memory header 'sometimes' (expected auto|force|off), treated as auto"
    )
    miss = e.decide(turn("hi", header="yes please", conversation="c2"))
    assert not miss.retrieve
    assert miss.reason.startswith("no rule matched; invalid X-Memory header 'yes please'")


# -- overrides ------------------------------------------------------------------------

OVERRIDES = """
budget_tokens: 600
overrides:
  models:
    "gpt-4o-mini*": {budget_tokens: 300}
    "gpt-4o*": {budget_tokens: 400, max_fragments: 4}
    "local-*": {enabled: false}
  tenants:
    alice: {enabled: false}
    bob: {budget_tokens: 100}
    carol: {enabled: true}
"""


@pytest.mark.parametrize(
    ("model", "budget", "fragments"),
    [
        ("gpt-4o-mini-2024-07-18", 300, 8),
        ("GPT-4o-Mini", 300, 8),
        ("gpt-4o", 400, 4),
        ("claude-3-5-sonnet", 600, 8),
    ],
)
def test_model_overrides_match_globs_first_match_wins(
    model: str, budget: int, fragments: int
) -> None:
    settings = parse_policy(OVERRIDES, "p.yaml").effective(model, "dave")
    assert (settings.budget_tokens, settings.max_fragments) == (budget, fragments)


def test_tenant_override_applies_after_the_model_override() -> None:
    policy = parse_policy(OVERRIDES, "p.yaml")
    bob = policy.effective("gpt-4o-mini", "bob")
    assert bob.budget_tokens == 100
    assert bob.applied == ("model 'gpt-4o-mini*'", "tenant 'bob'")
    assert policy.effective("local-llama", "carol").enabled is True
    assert policy.effective("gpt-4o", "Bob").budget_tokens == 400


def test_disabled_decisions_say_who_disabled_retrieval() -> None:
    e = engine(OVERRIDES)
    alice = e.decide(turn(turns=1, tenant="alice", model="gpt-4o-mini"))
    assert (alice.retrieve, alice.reason, alice.budget_tokens) == (
        False,
        "disabled for tenant 'alice'",
        300,
    )
    local = e.decide(turn(turns=1, model="local-llama"))
    assert local.reason == "disabled for model 'local-*'"
    assert engine("enabled: false").decide(turn(turns=1)).reason == "disabled by policy"


def test_override_replaces_rules_and_cooldown_entirely() -> None:
    policy = parse_policy(
        "cooldown: {turns: 1, seconds: 30}\n"
        "overrides:\n"
        "  tenants:\n"
        "    alice: {cooldown: {turns: 2}, rules: [always]}\n",
        "p.yaml",
    )
    alice = policy.effective("m", "alice")
    assert alice.cooldown == Cooldown(turns=2, seconds=0)
    assert [rule.type for rule in alice.rules] == ["always"]
    assert policy.effective("m", "bob").cooldown == Cooldown(turns=1, seconds=30)
    assert isinstance(policy.effective("m", "bob").rules[0], FirstTurnRule)


# -- validation errors ----------------------------------------------------------------

INVALID = [
    (
        "enabled: true\nbudget_token: 5\n",
        2,
        "budget_token: unknown key 'budget_token'; did you mean 'budget_tokens'?",
    ),
    ("enabled: maybe\n", 1, "enabled: must be true or false, got string 'maybe'"),
    ("\nbudget_tokens: -5\n", 2, "budget_tokens: must be >= 1, got -5"),
    ("max_fragments: 2.5\n", 1, "max_fragments: must be an integer, got number 2.5"),
    ("budget_tokens: '600'\n", 1, "budget_tokens: must be an integer, got string '600'"),
    ("cooldown:\n  turns: 1\n  seconds: -3\n", 3, "cooldown.seconds: must be >= 0, got -3"),
    ("cooldown:\n  turns: -1\n", 2, "cooldown.turns: must be >= 0, got -1"),
    ("cooldown:\n  turn: 2\n", 2, "cooldown.turn: unknown key 'turn'; did you mean 'turns'?"),
    ("cooldown: 5\n", 1, "cooldown: must be a mapping, got integer 5"),
    (
        "rules:\n  - type: first_turn\n  - type: sometimes\n",
        3,
        "rules[2].type: unknown type 'sometimes' (one of: first_turn, pattern,",
    ),
    ("rules:\n  - {name: x}\n", 2, "rules[1]: missing key 'type' (one of: first_turn,"),
    ("rules:\n  - 42\n", 2, "rules[1]: must be a mapping, got integer 42"),
    ("rules: first_turn\n", 1, "rules: must be a list, got string 'first_turn'"),
    ("rules:\n", 1, "rules: must be a list, got null (no value)"),
    (
        "rules:\n  - type: pattern\n    patterns:\n      - ok\n      - '(unclosed'\n",
        5,
        "rules[1] (pattern).patterns[2]: invalid regular expression '(unclosed'",
    ),
    (
        "rules:\n  - type: pattern\n    patterns: []\n",
        3,
        "rules[1] (pattern).patterns: must be a non-empty list",
    ),
    ("rules:\n  - type: pattern\n    patterns: ['.*']\n", 3, "matches empty text"),
    (
        "rules:\n  - type: pattern\n    patterns: [7]\n",
        3,
        "rules[1] (pattern).patterns[1]: must be a string, got integer 7",
    ),
    (
        "rules:\n  - type: pattern\n",
        2,
        "rules[1] (pattern).patterns: missing required key 'patterns'",
    ),
    (
        "rules:\n  - type: every_n_turns\n    n: 0\n",
        3,
        "rules[1] (every_n_turns).n: must be >= 1, got 0",
    ),
    (
        "rules:\n  - type: every_n_turns\n    n: two\n",
        3,
        "rules[1] (every_n_turns).n: must be an integer, got string 'two'",
    ),
    (
        "rules:\n  - type: always\n    n: 2\n",
        3,
        "rules[1] (always).n: unknown key 'n' (allowed: name, type)",
    ),
    (
        "rules:\n  - type: topic_shift\n    threshold: 1.5\n",
        3,
        "rules[1] (topic_shift).threshold: must be <= 1, got 1.5",
    ),
    (
        "rules:\n  - type: first_turn\n    name: ''\n",
        3,
        "rules[1] (first_turn).name: must be a non-empty string",
    ),
    (
        "overrides:\n  models:\n    'gpt-*':\n      overrides: {}\n",
        4,
        "overrides.models['gpt-*'].overrides: unknown key 'overrides' (allowed: enabled,",
    ),
    (
        "overrides:\n  tenants:\n    alice: {budget_tokens: 0}\n",
        3,
        "overrides.tenants.alice.budget_tokens: must be >= 1, got 0",
    ),
    (
        "overrides:\n  users: {}\n",
        2,
        "overrides.users: unknown key 'users' (allowed: models, tenants)",
    ),
    ("enabled: true\nenabled: false\n", 2, "duplicate key 'enabled'"),
    ("- enabled\n", 1, "must be a mapping, got a list"),
    ("enabled: true\nrules: [first_turn\n", 3, "invalid YAML"),
    ("enabled: true\n  budget_tokens: 5\n", 2, "invalid YAML: mapping values are not allowed here"),
    ("enabled: true\n---\nenabled: false\n", 2, "invalid YAML"),
]


@pytest.mark.parametrize(("text", "line", "message"), INVALID)
def test_invalid_policy_names_file_line_and_key(text: str, line: int, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "policy.yaml")
    error = caught.value
    assert (error.file, error.line) == ("policy.yaml", line)
    assert message in error.message
    assert str(error) == f"policy.yaml:{line}: {error.message}"


def test_load_policy_reports_unreadable_files(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.yaml")
    with pytest.raises(PolicyError) as caught:
        load_policy(missing)
    assert (caught.value.file, caught.value.line) == (missing, None)
    assert "cannot read policy file" in caught.value.message


# -- root_key -------------------------------------------------------------------------

CONFIG = """\
server:
  port: 8080
upstreams:
  gpt-4o: {provider: openai}
policy:
  budget_tokens: 250
  rules:
    - type: every_n_turns
      n: 4
"""


def test_root_key_reads_the_policy_inside_a_larger_document() -> None:
    policy = parse_policy(CONFIG, "config.yaml", root_key="policy")
    assert policy.source == "config.yaml"
    assert policy.base.budget_tokens == 250
    assert [rule.line for rule in policy.base.rules] == [8]


def test_root_key_errors_keep_the_line_numbers_of_the_whole_file() -> None:
    broken = CONFIG.replace("n: 4", "n: -4")
    with pytest.raises(PolicyError) as caught:
        parse_policy(broken, "config.yaml", root_key="policy")
    assert caught.value.line == 9
    assert caught.value.message.startswith("policy.rules[1] (every_n_turns).n: must be >= 1")


def test_root_key_absent_or_empty_gives_the_default_policy() -> None:
    assert parse_policy("server: {port: 1}\n", "c.yaml", root_key="policy").base == Policy().base
    assert parse_policy("policy:\n", "c.yaml", root_key="policy").base == Policy().base
    with pytest.raises(PolicyError) as caught:
        parse_policy("server: 1\npolicy: [1]\n", "c.yaml", root_key="policy")
    assert caught.value.line == 2


# -- hot reload -----------------------------------------------------------------------


def test_store_reloads_a_changed_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    write(path, "budget_tokens: 100\n")
    reloaded: list[Policy] = []
    store = PolicyStore(str(path), on_reload=reloaded.append)
    assert store.current.base.budget_tokens == 100
    assert store.current.source == str(path)
    assert store.check() is False
    write(path, "budget_tokens: 200\n", bump=5)
    assert store.check() is True
    assert store.current.base.budget_tokens == 200
    assert reloaded == [store.current]
    assert store.last_error is None
    assert store.check() is False


def test_store_keeps_the_previous_policy_when_an_edit_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    write(path, "budget_tokens: 100\n")
    errors: list[PolicyError] = []
    store = PolicyStore(str(path), on_error=errors.append)
    previous = store.current
    write(path, "budget_tokens: 100\nrules:\n  - type: pattern\n    patterns: ['[']\n", bump=5)
    assert store.check() is False
    assert store.current is previous
    assert [(e.file, e.line) for e in errors] == [(str(path), 4)]
    assert store.last_error is errors[0]
    assert store.check() is False
    assert len(errors) == 1
    write(path, "enabled: true\nbudget_tokens: [\n", bump=10)
    assert store.check() is False
    assert errors[-1].file == str(path)
    assert errors[-1].line is not None
    assert "invalid YAML" in errors[-1].message
    write(path, "budget_tokens: 300\n", bump=15)
    assert store.check() is True
    assert store.current.base.budget_tokens == 300
    assert store.last_error is None


def test_store_survives_the_file_disappearing(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    write(path, "budget_tokens: 100\n")
    errors: list[PolicyError] = []
    store = PolicyStore(str(path), on_error=errors.append)
    path.unlink()
    assert store.check() is False
    assert store.current.base.budget_tokens == 100
    assert [(e.file, e.line) for e in errors] == [(str(path), None)]
    write(path, "budget_tokens: 150\n")
    assert store.check() is True
    assert store.current.base.budget_tokens == 150


def test_store_initial_load_failure_raises(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    write(path, "enabled: true\nmax_fragments: -1\n")
    with pytest.raises(PolicyError) as caught:
        PolicyStore(str(path))
    assert (caught.value.file, caught.value.line) == (str(path), 2)
    with pytest.raises(PolicyError, match="cannot read policy file"):
        PolicyStore(str(tmp_path / "absent.yaml"))


def test_store_with_root_key_and_engine_see_reloads(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    write(path, "server: {port: 1}\npolicy:\n  rules: []\n")
    store = PolicyStore(str(path), root_key="policy")
    e = PolicyEngine(lambda: store.current)
    assert not e.decide(turn(turns=1)).retrieve
    write(path, "server: {port: 1}\npolicy:\n  rules: [first_turn]\n", bump=5)
    assert store.check()
    assert e.decide(turn(turns=1)).rule == "first_turn"


async def test_watch_reloads_until_cancelled(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    write(path, "budget_tokens: 100\n")
    store = PolicyStore(str(path))
    task = asyncio.create_task(store.watch(interval_s=0.01))
    write(path, "budget_tokens: 200\n", bump=5)
    for _ in range(500):
        if store.current.base.budget_tokens == 200:
            break
        await asyncio.sleep(0.01)
    assert store.current.base.budget_tokens == 200
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ValueError, match="interval_s"):
        await store.watch(interval_s=0)


def test_store_keeps_the_previous_policy_past_an_edit_nested_too_deeply_or_too_large(
    tmp_path: Path,
) -> None:
    """An edit nested past the YAML reader's recursion, or larger than a policy file may
    be, is a PolicyError naming the file: the previous policy stays and a later good edit
    is read (a RecursionError used to leave ``check``, killing the hot reload)."""
    path = tmp_path / "policy.yaml"
    write(path, "budget_tokens: 100\n")
    errors: list[PolicyError] = []
    store = PolicyStore(str(path), on_error=errors.append)
    write(path, "rules: " + "[" * 5000 + "]" * 5000 + "\n", bump=5)
    assert store.check() is False
    write(path, "budget_tokens: 200\n# " + "x" * MAX_POLICY_CHARS + "\n", bump=10)
    assert store.check() is False
    assert store.current.base.budget_tokens == 100
    assert [e.file for e in errors] == [str(path)] * 2
    assert "nested too deeply" in errors[0].message
    assert f"more than the {MAX_POLICY_CHARS} characters" in errors[1].message
    write(path, "budget_tokens: 300\n", bump=15)
    assert store.check() is True
    assert store.current.base.budget_tokens == 300


async def test_watch_reads_and_parses_an_edit_off_the_event_loop(tmp_path: Path) -> None:
    """A policy is read and parsed on a worker thread: a large edit (YAML is parsed in
    pure Python, seconds for megabytes) never stops the event loop, chat included."""
    path = tmp_path / "policy.yaml"
    write(path, "budget_tokens: 100\n")
    loop_thread = threading.get_ident()
    parsed_on: list[int] = []
    store = PolicyStore(str(path), on_reload=lambda _: parsed_on.append(threading.get_ident()))
    task = asyncio.create_task(store.watch(interval_s=0.01))
    write(path, "budget_tokens: 200\n", bump=5)
    for _ in range(500):
        if parsed_on:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert store.current.base.budget_tokens == 200
    assert parsed_on and loop_thread not in parsed_on


# -- public surface -------------------------------------------------------------------


def test_public_names_are_exported() -> None:
    for name in policies.__all__:
        assert hasattr(policies, name), name
    assert {"PolicyEngine", "PolicyStore", "TurnContext", "Decision", "parse_policy"} <= set(
        policies.__all__
    )
    assert MentionsEntityRule().label == "mentions_entity"
