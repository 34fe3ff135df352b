"""Rule types of the trigger policy: what each one checks and how it explains a match.

A rule is a frozen value; `match` is pure (it reads the turn, and for two rule types the
injected entity index or similarity function) and returns a short explanation when the
rule fires, None otherwise. The engine turns that explanation into the decision's reason,
so every explanation reads as the end of "rule 2 'pattern' ...".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from policies.context import EntityIndex, TurnContext

__all__ = [
    "DEFAULT_PATTERNS",
    "RULE_TYPES",
    "AlwaysRule",
    "EveryNTurnsRule",
    "FirstTurnRule",
    "MentionsEntityRule",
    "PatternRule",
    "Rule",
    "Similarity",
    "TopicShiftRule",
    "default_rules",
    "lexical_similarity",
]

Similarity = Callable[[str, str], float]
"""similarity(latest, recent) in [0, 1]; 0 means the latest message shares nothing."""

DEFAULT_PATTERNS: tuple[str, ...] = (
    r"\bremember\b",
    r"last time",
    r"we decided",
    r"recuerdas",
    r"lembra",
    r"te acuerdas",
    r"souviens",
)
"""Phrases that ask for something said before (English, Spanish, Portuguese, French)."""

_WORD = re.compile(r"\w{3,}")
_SHOWN_CHARS = 40


@dataclass(frozen=True, kw_only=True)
class _RuleBase:
    """Fields every rule shares. `line` (1-based, None for built-ins) is not compared."""

    type: ClassVar[str]
    name: str | None = None
    line: int | None = field(default=None, compare=False)

    @property
    def label(self) -> str:
        """The rule's name when it has one, else its type; used in reasons."""
        return self.name or self.type


@dataclass(frozen=True, kw_only=True)
class FirstTurnRule(_RuleBase):
    """Fires when the request holds exactly one user message. Cooldown never suppresses it."""

    type: ClassVar[str] = "first_turn"

    def match(
        self, ctx: TurnContext, entities: EntityIndex | None, similarity: Similarity
    ) -> str | None:
        return "matched: first turn of the conversation" if ctx.user_turns == 1 else None


@dataclass(frozen=True, kw_only=True)
class PatternRule(_RuleBase):
    """Fires when any pattern (compiled with re.IGNORECASE) is found in the latest message.

    Invariant: `patterns` is non-empty and no pattern matches the empty string.
    """

    type: ClassVar[str] = "pattern"
    patterns: tuple[re.Pattern[str], ...]

    def match(
        self, ctx: TurnContext, entities: EntityIndex | None, similarity: Similarity
    ) -> str | None:
        for pattern in self.patterns:
            found = pattern.search(ctx.latest_user_text)
            if found:
                return f"matched {_quote(found.group(0))}"
        return None


@dataclass(frozen=True, kw_only=True)
class MentionsEntityRule(_RuleBase):
    """Fires when the latest message names something memory knows; never without an index.

    What counts as named is the index's to say (:class:`~policies.context.EntityIndex`):
    memory's index answers with its entities' names, written as names ("Here we go" does
    not name an entity called "Here"), and with the phrases of the user's relations it
    holds ("my sister", "a minha irmã", "mi hermana" once it holds the user's sister).
    """

    type: ClassVar[str] = "mentions_entity"

    def match(
        self, ctx: TurnContext, entities: EntityIndex | None, similarity: Similarity
    ) -> str | None:
        if entities is None:
            return None
        names = entities.mentioned(ctx.latest_user_text)
        if not names:
            return None
        shown = ", ".join(_quote(name) for name in names[:3])
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        return f"matched entity {shown}{more}"


@dataclass(frozen=True, kw_only=True)
class EveryNTurnsRule(_RuleBase):
    """Fires on every n-th user turn (user_turns % n == 0). Invariant: n >= 1."""

    type: ClassVar[str] = "every_n_turns"
    n: int

    def match(
        self, ctx: TurnContext, entities: EntityIndex | None, similarity: Similarity
    ) -> str | None:
        if ctx.user_turns < 1 or ctx.user_turns % self.n:
            return None
        return f"matched: user turn {ctx.user_turns} is a multiple of {self.n}"


@dataclass(frozen=True, kw_only=True)
class TopicShiftRule(_RuleBase):
    """Fires when the latest message has little in common with the recent user turns.

    Compares the latest message with the last `window` earlier user messages by the
    injected similarity; fires when it is below `threshold`. Messages with fewer than
    `min_words` words (of 3+ letters) are too short to judge ("ok, thanks") and never fire,
    nor does a turn with no earlier user message. Invariants: 0 < threshold <= 1,
    window >= 1, min_words >= 1.
    """

    type: ClassVar[str] = "topic_shift"
    threshold: float = 0.2
    window: int = 3
    min_words: int = 3

    def match(
        self, ctx: TurnContext, entities: EntityIndex | None, similarity: Similarity
    ) -> str | None:
        recent = ctx.recent_user_texts[-self.window :]
        if not recent or len(_WORD.findall(ctx.latest_user_text)) < self.min_words:
            return None
        score = similarity(ctx.latest_user_text, "\n".join(recent))
        if score >= self.threshold:
            return None
        return (
            f"matched: similarity {score:.2f} to the last {len(recent)} user turn(s) "
            f"is below {self.threshold:g}"
        )


@dataclass(frozen=True, kw_only=True)
class AlwaysRule(_RuleBase):
    """Always fires; put it last to make retrieval the default (still subject to cooldown)."""

    type: ClassVar[str] = "always"

    def match(
        self, ctx: TurnContext, entities: EntityIndex | None, similarity: Similarity
    ) -> str | None:
        return "matched: always"


Rule = (
    FirstTurnRule | PatternRule | MentionsEntityRule | EveryNTurnsRule | TopicShiftRule | AlwaysRule
)

RULE_TYPES: dict[str, type[Rule]] = {
    cls.type: cls
    for cls in (
        FirstTurnRule,
        PatternRule,
        MentionsEntityRule,
        EveryNTurnsRule,
        TopicShiftRule,
        AlwaysRule,
    )
}


def default_rules() -> tuple[Rule, ...]:
    """The rules used when a policy names none: first turn, recall phrases, known names."""
    patterns = tuple(re.compile(p, re.IGNORECASE) for p in DEFAULT_PATTERNS)
    return (FirstTurnRule(), PatternRule(patterns=patterns), MentionsEntityRule())


def lexical_similarity(latest: str, recent: str) -> float:
    """Share of the latest message's words (3+ letters, case-folded) found in `recent`.

    Asymmetric on purpose: a short follow-up that reuses a few words of a long exchange
    stays on topic. Returns 1.0 when `latest` has no such words (nothing to judge).
    """
    words = {w.casefold() for w in _WORD.findall(latest)}
    if not words:
        return 1.0
    seen = {w.casefold() for w in _WORD.findall(recent)}
    return len(words & seen) / len(words)


def _quote(text: str) -> str:
    """Quote user text for a reason, shortened so that log lines stay readable."""
    text = " ".join(text.split())
    if len(text) > _SHOWN_CHARS:
        text = text[: _SHOWN_CHARS - 1] + "…"
    return f"'{text}'"
