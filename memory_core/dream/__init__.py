"""The Dreamer: consolidation cycles that reorganise memory and end in snapshots.

A cycle (:class:`Dreamer`) examines what was formed since the last one, merges duplicate
entities and topics, links related topics, strengthens restated claims, reinforces
co-occurrences seen again (the others decay), records the changes and conflicts it finds
without choosing a truth, and ends in a snapshot of memory (:mod:`memory_core.history.snapshots`)
that can be rolled back. Who decides a candidate is a backend (:data:`JUDGES`: rules
offline, or a served model); how is ``dream:`` in config.yaml (:class:`DreamConfig`);
when is the policy's ``dream:`` section (:mod:`policies.dream`).
"""

from .config import (
    DEFAULT_CONSOLIDATION_MODEL,
    DreamConfig,
    DreamConfigError,
    parse_dream,
)
from .cycle import Dreamer, Plan, Step
from .judges import (
    JUDGES,
    ContextPair,
    EntityPair,
    Judge,
    LLMJudge,
    RuleJudge,
    Verdict,
    build_judge,
)
from .report import DECISION_KINDS, Decision, DreamReport
from .weights import relation_weight

__all__ = [
    "DECISION_KINDS",
    "DEFAULT_CONSOLIDATION_MODEL",
    "JUDGES",
    "ContextPair",
    "Decision",
    "DreamConfig",
    "DreamConfigError",
    "DreamReport",
    "Dreamer",
    "EntityPair",
    "Judge",
    "LLMJudge",
    "Plan",
    "RuleJudge",
    "Step",
    "Verdict",
    "build_judge",
    "parse_dream",
    "relation_weight",
]
