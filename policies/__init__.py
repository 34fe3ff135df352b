"""The trigger policy: when the proxy consults memory, and why.

A YAML policy (see `policies.schema` for the format and ``default.yaml`` for the
commented default) is parsed into immutable values; `PolicyEngine.decide` turns one
request's `TurnContext` into a `Decision` with a human-readable reason; `PolicyStore`
hot-reloads the file, keeping the previous policy when an edit is invalid. The file's
``dream:`` section becomes `Policy.dream`, a `DreamPolicy` whose `decide` says when an
automatic consolidation cycle runs for a tenant. No network, no SQL, no side effects at
import.
"""

from pathlib import Path

from policies.context import EntityIndex, TurnContext
from policies.dream import (
    DreamDecision,
    DreamOverride,
    DreamPolicy,
    DreamRule,
    DreamSettings,
    DreamState,
    IdleRule,
    IntervalRule,
    MaterialRule,
    ScheduleRule,
)
from policies.engine import HEADER_NAME, Decision, PolicyEngine
from policies.errors import PolicyError
from policies.policy import Cooldown, Override, Policy, Settings
from policies.rules import (
    DEFAULT_PATTERNS,
    AlwaysRule,
    EveryNTurnsRule,
    FirstTurnRule,
    MentionsEntityRule,
    PatternRule,
    Rule,
    Similarity,
    TopicShiftRule,
    lexical_similarity,
)
from policies.schema import load_policy, parse_policy
from policies.store import PolicyStore

__all__ = [
    "DEFAULT_PATTERNS",
    "DEFAULT_POLICY_PATH",
    "HEADER_NAME",
    "AlwaysRule",
    "Cooldown",
    "Decision",
    "DreamDecision",
    "DreamOverride",
    "DreamPolicy",
    "DreamRule",
    "DreamSettings",
    "DreamState",
    "EntityIndex",
    "EveryNTurnsRule",
    "FirstTurnRule",
    "IdleRule",
    "IntervalRule",
    "MaterialRule",
    "MentionsEntityRule",
    "Override",
    "PatternRule",
    "Policy",
    "PolicyEngine",
    "PolicyError",
    "PolicyStore",
    "Rule",
    "ScheduleRule",
    "Settings",
    "Similarity",
    "TopicShiftRule",
    "TurnContext",
    "lexical_similarity",
    "load_policy",
    "parse_policy",
]

DEFAULT_POLICY_PATH = str(Path(__file__).with_name("default.yaml"))
"""The shipped, commented default policy; parsing it gives the same policy as no file."""
