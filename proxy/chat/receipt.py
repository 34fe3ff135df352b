"""The receipt of a chat turn that consulted memory: its decision, what was found and
injected, and how long each stage took, as :class:`~proxy.api.schemas.Receipt` says.

Built from a snapshot of the turn on the tenant's writer thread (see the chat handler's
``_queue_receipt``), validated against its contract as it is built.
"""

from __future__ import annotations

from collections.abc import Mapping

from memory_core import STRATEGIES, Recall
from memory_core.views import AreaSummary
from policies import Decision

from ..api.schemas import (
    Receipt,
    ReceiptArea,
    ReceiptCitation,
    ReceiptCoverage,
    ReceiptDecision,
    ReceiptFocus,
    ReceiptFragment,
    ReceiptStatement,
)
from .turn import MemoryTurn

__all__ = ["RECEIPT_TEXT_CHARS", "receipt_of"]

RECEIPT_TEXT_CHARS = 2_000
"""A receipt keeps this much of each fragment's text (its length beside it): a receipt
is written per request, a stored message may be megabytes."""


def receipt_of(
    turn: MemoryTurn,
    receipt_id: str,
    created_at: float,
    *,
    upstream_status: int,
    timings_ms: Mapping[str, float],
) -> Receipt:
    """The receipt of ``turn`` (a snapshot of it: its decision is made)."""
    assert turn.decision is not None
    recall = turn.recall
    area = recall.area if recall else None
    return Receipt(
        id=receipt_id,
        created_at=created_at,
        tenant=turn.tenant,
        model=turn.chat.model,
        conversation_id=turn.conversation,
        decision=_decision(turn.decision),
        memory_error=turn.memory_error,
        area=ReceiptArea(
            kind=STRATEGIES.get(turn.services.settings.retrieval).label,
            fragments=_fragments(recall) if recall else [],
        ),
        injected_text=recall.context.text if recall else "",
        tokens=recall.context.tokens if recall else 0,
        timings_ms=dict(timings_ms),
        upstream_status=upstream_status,
        graph_version=area.get("graph_version") if area else None,
        graph_area=AreaSummary.model_validate(area) if area else None,
        statements=[
            ReceiptStatement(
                kind=s.kind,
                text=s.text,
                relation_ids=list(s.relation_ids),
                fragment_ids=list(s.fragment_ids),
            )
            for s in recall.context.statements
        ]
        if recall
        else [],
        citations=[ReceiptCitation(number=n, fragment_id=f) for n, f in recall.context.citations]
        if recall
        else [],
        coverage=_coverage(recall) if recall else None,
        tokenizer=recall.tokenizer if recall else "",
        as_of=turn.as_of,
    )


def _coverage(recall: Recall) -> ReceiptCoverage:
    coverage = recall.context.coverage
    return ReceiptCoverage(
        foci=[
            ReceiptFocus(focus=v.focus, covered=v.covered, where=v.where) for v in coverage.verdicts
        ],
        nothing_found=coverage.nothing_found,
    )


def _fragments(recall: Recall) -> list[ReceiptFragment]:
    """Every fragment retrieval found, best first, with whether the block shows it and
    its number when the block cites it (see :class:`memory_core.Reconstruction`)."""
    shown = set(recall.context.shown)
    numbers = {fragment: number for number, fragment in recall.context.citations}
    return [
        ReceiptFragment(
            id=h.fragment_id,
            score=round(h.score, 4),
            conversation_id=h.conversation_id,
            ts=h.ts,
            role=h.role,
            speaker=h.speaker,
            text=h.text[:RECEIPT_TEXT_CHARS],
            text_chars=len(h.text),
            kind=h.kind,
            ext_id=h.ext_id,
            shown=h.fragment_id in shown,
            cited=h.fragment_id in numbers,
            number=numbers.get(h.fragment_id),
        )
        for h in recall.hits
    ]


def _decision(decision: Decision) -> ReceiptDecision:
    return ReceiptDecision(
        retrieve=decision.retrieve,
        reason=decision.reason,
        rule=decision.rule,
        budget_tokens=decision.budget_tokens,
        max_fragments=decision.max_fragments,
    )
