"""Fragment scoring for area retrieval: a pure function from term arrays to scores.

Retrieval is fetch, score, render. Fetching (``area_retrieval``) gathers the candidate
fragments and, for each, every score term as a share in [0, 1]; this module weighs and
ranks them; reconstruction renders the winners. Nothing here reads SQLite, the graph or
a clock, so the ranking can be tested, explained and tuned on arrays alone, and every
term of every fragment is reported as it was used (receipts, ``GET /memory/area``).

The score of a fragment is the weighted sum of its terms (weights: :class:`ScoringConfig`,
``retrieval.scoring`` in config.yaml), times what the fragment does::

    score = factor * (w_bm25 * bm25 + w_activation * activation
                      + w_convergence * convergence + w_similarity * similarity + w_area * area
                      + w_date * date)

where ``factor`` is 1 for a fragment that states something, ``asked`` (0.1) for one that
only asks and ``restated`` (0.2) for an answer that restated the memory it was shown
(:mod:`memory_core.text.acts`): a question is short and made of the very words asked
again, so at full scale it outranks the statement that answers it (live use: the eight
best hits for a cousin's name were earlier questions and answers, the fact ninth).

* ``bm25``: its BM25 score over the best BM25 score of the question;
* ``activation``: its total activation over the largest total among fragments;
* ``convergence``: the share of the question's foci that bring it at least
  ``convergence_share`` of their own peak (foci meeting on one fragment);
* ``similarity``: where the cosine of its embedding to the question's stands between the
  ``candidates``-th nearest fragment's (0) and the nearest's (1) (``relative_similarity``;
  else the cosine floored at 0). An encoder's cosines need not spread over [0, 1]: e5's
  lie within a few hundredths of 0.8 for a question's candidates, where MiniLM's spread
  over 0.1-0.6, so an absolute cosine told e5's candidates apart by almost nothing;
* ``area``: the chosen area's own ranking of its fragments over the best one (pulse:
  activation times evenness across foci; wave: interference); 0 outside the area;
* ``date``: 1 when the question names a time ("in May 2023", "last week", "em maio":
  :attr:`~memory_core.text.question.Question.times`) and the fragment was said within it
  or speaks of a day within it (its "yesterday" resolved, :mod:`memory_core.text.dates`);
  else 0, so a question that names no time ranks as before.

The lexical and graph terms (``bm25``, ``activation``, ``convergence``, ``area``) come from
the question's words that memory knows; when memory knows few of them (an English question
about a Portuguese conversation: only the names match, and every fragment that names them
looks like a perfect match), their weights are multiplied by the share of the question's
words memory's lexical index holds, to the power ``lexical_coverage`` (0: never), and the
embedding term decides more. A question in memory's own words keeps its weights.

A fragment formed after the graph version the query pinned has no graph or vector terms
yet: they are *imputed* as equal to its BM25 share, so it competes at full scale on BM25
alone (and the report says so). Ranking keeps fragments with a positive score, best
first, ties broken by the smaller fragment id, so a ranking is reproducible.

Two adjustments come from the conversation the fragment was said in (both in
:mod:`.area`, which reads the graph): when the question names one speaker of memory's
conversations, the turns of the other speakers take ``other_speaker`` as a further factor
(what Caroline does is in what Caroline says); and the ``context_pool`` best fragments are
ranked again with ``context`` times the scores of the turns said just before and after
each (times the fragment's own factor), because the turn that answers is often the one
beside the turn that names the question's words. LoCoMo dev recall@10 with e5: 0.703 ->
0.731 with the context, 0.756 with both, higher on each of the five conversations
(``context`` 0.3-0.5 and ``other_speaker`` 0.4-0.7 are within 0.006 of each other).

A stated turn none of whose sentences tells anything (:func:`~memory_core.text.acts.tells`:
"Cool! What did it look like?", "Thanks, Mel!"; a question between named people is stored
``stated``, see :func:`~memory_core.formation.pipeline.kind_of`) takes ``untold`` as a
further factor: such a turn is short and made of the conversation's words, so its BM25 and
cosine (e5 puts a question near a question) outrank the turns that tell what a question
asks after, a list question ("What activities does Melanie partake in?") most. It still
lends its whole score to the turns beside it as their context (it names what the next turn
answers). LoCoMo dev recall@10 with e5 0.805 -> 0.806, multi-hop 0.508 -> 0.514 (0.2-0.6
give the same figures, 0.8 0.804/0.511; on no conversation lower for multi-hop).

Why these default weights (LoCoMo dev, recall@10, ``docs/evaluation.md``): without the
convergence term recall fell from 0.696 to 0.655, without the graph terms to 0.640; area
weights above 0.1 lowered it (0.692 at 0.2, 0.682 at 0.5).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pydantic import Field, model_validator

from ..configuration import ConfigModel

__all__ = ["TERMS", "Candidates", "ScoringConfig", "rank", "rank_computing", "score"]

TERMS = ("bm25", "activation", "convergence", "similarity", "area", "date")
"""The score terms, in the column order of :attr:`Candidates.terms`."""

_IMPUTED = ("activation", "convergence", "similarity")
"""The terms a fragment newer than the pinned graph version takes from its BM25 share."""

Floats = npt.NDArray[np.float64]
Int64s = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


class ScoringConfig(ConfigModel):
    """Weights of the per-fragment score terms (``retrieval.scoring`` in config.yaml)."""

    bm25: float = Field(1.0, ge=0, description="weight of the BM25 share (score / best score)")
    activation: float = Field(0.5, ge=0, description="weight of the total activation share")
    convergence: float = Field(
        1.0, ge=0, description="weight of the share of foci that reach the fragment"
    )
    similarity: float = Field(
        0.5, ge=0, description="weight of the embedding cosine to the question (floored at 0)"
    )
    area: float = Field(0.1, ge=0, description="weight of the chosen area's own ranking")
    date: float = Field(
        0.5,
        ge=0,
        description="weight of a fragment said within the time the question names, or "
        "speaking of it (1 or 0; 0 for every fragment when the question names no time)",
    )
    convergence_share: float = Field(
        0.05, gt=0, le=1, description="a focus reaches a fragment with >= this share of its peak"
    )
    seeds: int = Field(
        20, ge=1, le=1000, description="fragments seeding the BM25 and the dense focus"
    )
    candidates: int = Field(
        50, ge=1, le=10_000, description="BM25 and nearest-by-embedding fragments scored"
    )
    asked: float = Field(
        0.1,
        ge=0,
        le=1,
        description="multiplier of the score of a fragment that only asks (a question: short "
        "and made of the words asked again, it would outrank the statement that answers it)",
    )
    restated: float = Field(
        0.2,
        ge=0,
        le=1,
        description="multiplier of the score of an answer that restated the memory it was "
        "shown (it ranks below its sources, which are what gets cited)",
    )

    other_speaker: float = Field(
        0.6,
        ge=0,
        le=1,
        description="multiplier of the score of a turn said by another speaker when the "
        "question names one speaker of memory's conversations (what Caroline does is in "
        "what Caroline says); 1: off",
    )
    untold: float = Field(
        0.6,
        gt=0,
        le=1,
        description="multiplier of the score of a stated turn none of whose sentences tells "
        "anything (it asks, greets or thanks only: 'Cool! What did it look like?'; "
        ":func:`memory_core.text.acts.tells`); 1: off",
    )
    pool_questions: bool = Field(
        False,
        description="let stored questions into the nearest-by-embedding candidates and "
        "the BM25 seeds; off (the default), a question asked again no longer finds its own "
        "earlier askings first, by words and by vector, crowding out what answers it (they "
        "stay BM25 candidates, scored by ``asked``)",
    )
    context: float = Field(
        0.4,
        ge=0,
        le=4,
        description="weight of the scores of the turns said just before and after a "
        "fragment (the answer is often the turn beside the one that names the question's "
        "words); 0: off",
    )
    context_pool: int = Field(
        40, ge=1, le=1000, description="the best fragments ranked again with their context"
    )

    relative_similarity: bool = Field(
        True,
        description="similarity as the cosine's place between the candidates-th nearest "
        "fragment's (0) and the nearest's (1), not the cosine itself",
    )
    lexical_coverage: float = Field(
        1.0,
        ge=0,
        le=4,
        description="the lexical and graph weights times (share of the question's words "
        "memory knows) to this power (0: never scaled)",
    )

    def covering(self, share: float) -> ScoringConfig:
        """These weights for a question ``share`` of whose words memory knows (see the
        module docstring): the lexical and graph weights scaled, the rest as it is."""
        if self.lexical_coverage == 0 or share >= 1.0:
            return self
        scale = max(0.0, share) ** self.lexical_coverage
        return self.model_copy(
            update={
                "bm25": self.bm25 * scale,
                "activation": self.activation * scale,
                "convergence": self.convergence * scale,
                "area": self.area * scale,
            }
        )

    def factor(self, kind: str) -> float:
        """The multiplier of a fragment's score by its kind (``stated``: 1)."""
        return {"asked": self.asked, "restated": self.restated}.get(kind, 1.0)

    @model_validator(mode="after")
    def _some_weight(self) -> ScoringConfig:
        if not any(getattr(self, term) > 0 for term in TERMS):
            raise ValueError("at least one term weight must be positive (else nothing ranks)")
        return self

    def weights(self) -> Floats:
        """The weights in :data:`TERMS` order."""
        return np.array([getattr(self, term) for term in TERMS], dtype=np.float64)


@dataclass(frozen=True, eq=False)
class Candidates:
    """The fragments a query scores, one row each, and every term of each.

    Invariants: ``terms`` has shape ``(len(fragment_ids), len(TERMS))`` with every value
    in [0, 1]; fragment ids are distinct; ``imputed[i]`` is True when row ``i`` is a
    fragment the pinned graph version does not hold (its graph and vector terms are then
    its BM25 share, filled in by :meth:`of`).
    """

    fragment_ids: Int64s
    terms: Floats
    imputed: Bools
    factor: Floats | None = None
    """Each row's score multiplier in [0, 1] by what the fragment does (see
    :meth:`ScoringConfig.factor`); None: 1 for every row."""

    @classmethod
    def of(
        cls,
        fragment_ids: npt.ArrayLike,
        *,
        bm25: npt.ArrayLike,
        activation: npt.ArrayLike,
        convergence: npt.ArrayLike,
        similarity: npt.ArrayLike,
        area: npt.ArrayLike,
        imputed: npt.ArrayLike,
        date: npt.ArrayLike | None = None,
    ) -> Candidates:
        """Columns to rows, each value clipped into [0, 1] (NaN counts as 0); imputed rows
        take their BM25 share for the graph terms."""
        ids = np.asarray(fragment_ids, dtype=np.int64)
        columns = {
            "bm25": bm25,
            "activation": activation,
            "convergence": convergence,
            "similarity": similarity,
            "area": area,
            "date": np.zeros(ids.shape[0]) if date is None else date,
        }
        terms = np.empty((ids.shape[0], len(TERMS)))
        for j, term in enumerate(TERMS):
            terms[:, j] = columns[term]
        np.nan_to_num(terms, copy=False, nan=0.0, posinf=1.0, neginf=0.0)
        np.clip(terms, 0.0, 1.0, out=terms)  # one pass over the table, not one per term
        newer = np.asarray(imputed, dtype=bool)
        for term in _IMPUTED:
            terms[newer, TERMS.index(term)] = terms[newer, 0]
        return cls(ids, terms, newer)

    def __len__(self) -> int:
        return int(self.fragment_ids.shape[0])

    def row(self, i: int) -> dict[str, float]:
        """Row ``i``'s terms by name."""
        return {term: float(v) for term, v in zip(TERMS, self.terms[i], strict=True)}

    def with_term(self, term: str, values: npt.ArrayLike) -> Candidates:
        """These candidates with column ``term`` replaced by ``values`` (clipped into
        [0, 1], NaN as 0)."""
        terms = self.terms.copy()
        column = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0, posinf=1.0)
        terms[:, TERMS.index(term)] = np.clip(column, 0, 1)
        return Candidates(self.fragment_ids, terms, self.imputed, self.factor)

    def factored(self, factor: npt.ArrayLike) -> Candidates:
        """These candidates with ``factor`` as their score multipliers (clipped into
        [0, 1])."""
        values = np.clip(np.nan_to_num(np.asarray(factor, dtype=np.float64), nan=1.0), 0, 1)
        return Candidates(self.fragment_ids, self.terms, self.imputed, values)

    def multipliers(self) -> Floats:
        """:attr:`factor`, or ones."""
        return np.ones(len(self)) if self.factor is None else self.factor


def score(candidates: Candidates, config: ScoringConfig) -> Floats:
    """Each candidate's weighted sum of terms times its factor (see the module
    docstring)."""
    raw = candidates.terms @ config.weights()
    return raw if candidates.factor is None else raw * candidates.factor


def rank(candidates: Candidates, config: ScoringConfig, limit: int) -> tuple[Int64s, Floats]:
    """The row indices of the ``limit`` best candidates with a positive score, best
    first (ties: smaller fragment id first), and every candidate's score."""
    scores = score(candidates, config)
    positive = _best_rows(scores, np.flatnonzero(scores > 0), max(limit, 0))
    order = np.lexsort((candidates.fragment_ids[positive], -scores[positive]))
    return positive[order[: max(limit, 0)]], scores


def _best_rows(values: Floats, rows: Int64s, k: int) -> Int64s:
    """Those of ``rows`` whose value is at least the ``k``-th largest among them (ties
    at the bar all kept, so sorting them finds the same ``k`` best as sorting all), in
    row order; a partition instead of a sort of every candidate (thousands at 100k
    fragments, for the ten best)."""
    if k <= 0:
        return rows[:0]
    if rows.shape[0] <= k:
        return rows
    bar = np.partition(values[rows], rows.shape[0] - k)[rows.shape[0] - k]
    kept: Int64s = rows[values[rows] >= bar]
    return kept


def rank_computing(
    candidates: Candidates,
    config: ScoringConfig,
    limit: int,
    term: str,
    compute: Callable[[Int64s], Floats],
) -> tuple[Candidates, Int64s, Floats]:
    """:func:`rank` when one term is costly (a cosine needs the fragment's vector): the
    term is computed, by ``compute(rows)``, only for the rows that could still reach the
    top ``limit``, and the candidates are returned with it filled in.

    Exact: every term is at most 1, every weight at least 0 and every factor in [0, 1],
    so a row whose score without the term plus the term's weight (both times its factor)
    stays below the ``limit``-th best score of rows already complete can never rank; it
    keeps 0 for the term and is never among those returned. Imputed rows keep their
    imputed value (it is already complete). The returned rows always have the term
    computed, also when its weight is 0 (a report shows every term as it was).
    """
    j = TERMS.index(term)
    weight = float(config.weights()[j])
    terms = candidates.terms.copy()
    done = candidates.imputed.copy()
    factor = candidates.multipliers()
    if weight > 0.0 and limit > 0:
        terms[~done, j] = 0.0
        without = (terms @ config.weights()) * factor
        open_rows = np.flatnonzero(~done)
        best = _best_rows(without, open_rows, limit)
        first = best[np.argsort(-without[best], kind="stable")[:limit]]
        _fill(terms, done, first, j, compute)
        complete = np.sort(((terms @ config.weights()) * factor)[done])[::-1]
        bar = complete[limit - 1] if complete.shape[0] >= limit else -np.inf
        reach = without + weight * factor
        _fill(terms, done, np.flatnonzero(~done & (reach >= bar)), j, compute)
    filled = Candidates(candidates.fragment_ids, terms, candidates.imputed, candidates.factor)
    order, scores = rank(filled, config, limit)
    _fill(terms, done, order[~done[order]], j, compute)  # reported as used, even at weight 0
    return filled, order, scores


def _fill(
    terms: Floats, done: Bools, rows: Int64s, j: int, compute: Callable[[Int64s], Floats]
) -> None:
    if rows.shape[0]:
        value = np.nan_to_num(compute(rows), nan=0.0, posinf=1.0, neginf=0.0)
        terms[rows, j] = np.clip(value, 0.0, 1.0)  # as Candidates.of clips every term
        done[rows] = True
