"""Who decides a cycle's candidates: two entities that may be one, two topics that may be
one or related. A backend like formation's: rules by default (offline), or a served model.

A :class:`Judge` gets candidate pairs found by the cycle (cheap, bounded: shared names,
similar centroids) and returns one :class:`Verdict` per pair, each with its reason. The
model's answers are validated (an answer model, then every pair answered exactly once) and
asked again once with the error; a model that still fails leaves its pairs as they are,
and the failure is reported by the cycle. Nothing a model says is applied unvalidated.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

import numpy as np
from pydantic import Field, create_model

from ..formation.interfaces import BackendError
from ..formation.models.llm import LiteLLMGenerator
from ..formation.models.structured import Answer, TextGenerator, structured_call
from ..registry import Registry
from ..storage.tables.dream import ContextProfile, EntityProfile
from .config import JUDGE_CHOICES, DreamConfig

__all__ = [
    "JUDGES",
    "ContextPair",
    "EntityPair",
    "Judge",
    "JudgeFailure",
    "LLMJudge",
    "RuleJudge",
    "Verdict",
    "build_judge",
]

Action = Literal["merge", "link", "keep"]
_PEOPLE = {"PER", "PERSON"}
_REASON_CHARS = 400
_VAGUE = {"", "MISC", "UNK", "O"}


@dataclass(frozen=True)
class EntityPair:
    """Two entities with a name in common; ``declared`` says why memory already holds
    that one is the other (an alias statement, a translation), None when nothing does."""

    a: EntityProfile
    b: EntityProfile
    shared: str
    similarity: float | None
    declared: str | None


@dataclass(frozen=True)
class ContextPair:
    """Two contexts of different conversations with similar centroids."""

    a: ContextProfile
    b: ContextProfile
    similarity: float


@dataclass(frozen=True)
class Verdict:
    """What to do with a pair, and why."""

    action: Action
    reason: str


class JudgeFailure(Exception):
    """A judge could not decide a batch (its pairs stay as they are)."""


class Judge(Protocol):
    """Decides candidate pairs; ``label`` names it in reports (``rules@1``, the model)."""

    label: str

    def entities(self, pairs: Sequence[EntityPair]) -> list[Verdict]: ...

    def contexts(self, pairs: Sequence[ContextPair]) -> list[Verdict]: ...


class RuleJudge:
    """Offline decisions from what memory holds.

    Entities: one when memory says so (``declared``), or when their kinds agree and their
    mention contexts agree (cosine of the context vector sums >= ``entity_similarity``);
    otherwise homonyms, kept apart. Contexts: one topic at ``context_merge`` similarity,
    related at ``context_link``, otherwise unrelated.
    """

    label = "rules@1"

    def __init__(self, config: DreamConfig) -> None:
        self._config = config

    def entities(self, pairs: Sequence[EntityPair]) -> list[Verdict]:
        return [self._entity(pair) for pair in pairs]

    def _entity(self, pair: EntityPair) -> Verdict:
        a, b = pair.a, pair.b
        if not _kinds_agree(a, b):
            return Verdict("keep", f"'{pair.shared}' names a {a.label} and a {b.label}")
        if a.is_speaker and b.is_speaker:
            return Verdict("keep", "two speakers: each speaks as themself")
        if pair.declared:
            return Verdict("merge", f"memory says so: {pair.declared}")
        threshold = self._config.entity_similarity
        if pair.similarity is None:
            return Verdict("keep", f"share the name '{pair.shared}'; too few contexts to tell")
        if pair.similarity >= threshold:
            return Verdict(
                "merge",
                f"share the name '{pair.shared}' and their contexts agree"
                f" (cosine {pair.similarity:.2f} >= {threshold:g})",
            )
        return Verdict(
            "keep",
            f"share the name '{pair.shared}' but their contexts differ"
            f" (cosine {pair.similarity:.2f} < {threshold:g}): homonyms",
        )

    def contexts(self, pairs: Sequence[ContextPair]) -> list[Verdict]:
        merge, link = self._config.context_merge, self._config.context_link
        verdicts = []
        for pair in pairs:
            sim = pair.similarity
            if sim >= merge:
                verdicts.append(Verdict("merge", f"one topic: centroids {sim:.2f} >= {merge:g}"))
            elif sim >= link:
                verdicts.append(Verdict("link", f"related topics: centroids {sim:.2f} >= {link:g}"))
            else:
                verdicts.append(Verdict("keep", f"centroids {sim:.2f} < {link:g}"))
        return verdicts


class LLMJudge:
    """A served model decides each pair (batches of ``batch_size``), after the rules have
    found them; see the module docstring for validation."""

    def __init__(self, generator: TextGenerator, batch_size: int) -> None:
        self._generator = generator
        self._batch = batch_size
        self.label = f"llm:{generator.name}"

    def entities(self, pairs: Sequence[EntityPair]) -> list[Verdict]:
        return self._decide(pairs, _ENTITY_TASK, ("merge", "keep"), _describe_entities)

    def contexts(self, pairs: Sequence[ContextPair]) -> list[Verdict]:
        return self._decide(pairs, _CONTEXT_TASK, ("merge", "link", "keep"), _describe_contexts)

    def _decide(
        self,
        pairs: Sequence[Any],
        task: str,
        actions: tuple[Action, ...],
        describe: Callable[[Sequence[Any]], str],
    ) -> list[Verdict]:
        verdicts: list[Verdict] = []
        for start in range(0, len(pairs), self._batch):
            batch = pairs[start : start + self._batch]
            messages = [
                {"role": "system", "content": task},
                {"role": "user", "content": describe(batch)},
            ]
            check = functools.partial(_verdicts, count=len(batch))
            try:
                verdicts += structured_call(
                    self._generator, messages, _answer(actions), validate=check
                )
            except BackendError as exc:
                raise JudgeFailure(str(exc)) from exc
        return verdicts


def _kinds_agree(a: EntityProfile, b: EntityProfile) -> bool:
    la, lb = a.label.upper(), b.label.upper()
    if la == lb or la in _VAGUE or lb in _VAGUE:
        return True
    return (a.is_speaker or b.is_speaker) and {la, lb} <= _PEOPLE | _VAGUE


def context_similarity(a: bytes | None, b: bytes | None) -> float | None:
    """Cosine of two float32 vector sums (None when either is missing or zero)."""
    if not a or not b or len(a) != len(b):
        return None
    va, vb = np.frombuffer(a, "<f4"), np.frombuffer(b, "<f4")
    na, nb = float(np.linalg.norm(va)), float(np.linalg.norm(vb))
    if na < 1e-9 or nb < 1e-9:
        return None
    return float(va @ vb) / (na * nb)


_ENTITY_TASK = (
    "You consolidate a long-term memory of conversations. Each numbered pair below is two"
    " entities memory keeps apart although they share a name. Decide for each pair whether"
    " they are the same real-world person, place or thing (merge) or different ones that"
    " happen to share a name (keep). Use only the names and example sentences given."
    " Give a short reason."
)
_CONTEXT_TASK = (
    "You consolidate a long-term memory of conversations. Each numbered pair below is two"
    " topics from different conversations. Decide for each pair whether they are one topic"
    " (merge), related topics worth connecting (link), or unrelated (keep). Use only the"
    " labels and example sentences given. Give a short reason."
)


class _Verdict(Answer):
    pair: int = Field(ge=1)
    decision: str
    reason: str = Field(min_length=1)


class _Verdicts(Answer):
    verdicts: list[_Verdict]


@functools.lru_cache(maxsize=8)
def _answer(actions: tuple[Action, ...]) -> type[_Verdicts]:
    """The verdicts answer whose decisions are ``actions``."""
    decision: Any = Literal[actions]  # a Literal of the given names, built at run time
    verdict = create_model("consolidation_verdict", __base__=_Verdict, decision=(decision, ...))
    model: type[_Verdicts] = create_model(
        "consolidation_verdicts", __base__=_Verdicts, verdicts=(list[verdict], ...)
    )
    return model


def _verdicts(value: _Verdicts, count: int) -> list[Verdict]:
    """Valid answer -> one verdict per pair, in pair order; ValueError otherwise."""
    by_pair: dict[int, Verdict] = {}
    for item in value.verdicts:
        pair = item.pair
        if not 1 <= pair <= count:
            raise ValueError(f"pair {pair} does not exist (pairs are 1..{count})")
        if pair in by_pair:
            raise ValueError(f"pair {pair} is answered twice")
        decision = cast(Action, item.decision)
        by_pair[pair] = Verdict(decision, item.reason.strip()[:_REASON_CHARS])
    missing = [str(p) for p in range(1, count + 1) if p not in by_pair]
    if missing:
        raise ValueError(f"no verdict for pair(s) {', '.join(missing)}")
    return [by_pair[p] for p in range(1, count + 1)]


def _entity_lines(profile: EntityProfile) -> list[str]:
    names = ", ".join(dict.fromkeys(alias for alias, *_ in profile.aliases)) or profile.name
    lines = [f"  {profile.name} ({profile.label}; names: {names}; {profile.mentions} mentions)"]
    lines += [f"    - {text!r}" for _, text in profile.examples]
    return lines


def _describe_entities(pairs: Sequence[EntityPair]) -> str:
    lines = []
    for number, pair in enumerate(pairs, 1):
        lines.append(f"Pair {number}: both are called '{pair.shared}'.")
        lines += ["  First:", *_entity_lines(pair.a), "  Second:", *_entity_lines(pair.b)]
    return "\n".join(lines)


def _context_lines(profile: ContextProfile) -> list[str]:
    lines = [f"  '{profile.label}' ({profile.size} turns, in {', '.join(profile.conversations)})"]
    lines += [f"    - {text!r}" for _, text in profile.examples]
    return lines


def _describe_contexts(pairs: Sequence[ContextPair]) -> str:
    lines = []
    for number, pair in enumerate(pairs, 1):
        lines.append(f"Pair {number} (similarity {pair.similarity:.2f}):")
        lines += ["  First:", *_context_lines(pair.a), "  Second:", *_context_lines(pair.b)]
    return "\n".join(lines)


JUDGES: Registry[Callable[[DreamConfig], Judge]] = Registry(JUDGE_CHOICES)
JUDGES.register("rules", RuleJudge)


@JUDGES.factory("llm")
def _llm_judge(config: DreamConfig) -> Judge:
    llm = config.llm
    key = os.environ.get(llm.api_key_env) if llm.api_key_env else None
    generator = LiteLLMGenerator(
        provider=llm.provider,
        model=llm.model,
        api_base=llm.api_base,
        api_key=key,
        timeout_s=llm.timeout_s,
    )
    return LLMJudge(generator, config.batch_size)


def build_judge(config: DreamConfig) -> Judge:
    """The judge ``config.backend`` names."""
    return JUDGES.get(config.backend)(config)
