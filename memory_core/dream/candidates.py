"""A cycle's reading: what was formed since the last cycle, and the pairs worth judging.

Everything here reads inside one read transaction of the cycle (:mod:`.cycle`), up to
the row ids read at its start (``upto``): rows formed while the cycle runs wait for the
next one. Candidates are found cheaply and in bounded number (``max_pairs``):

- entities: two entities that share a normalised name, one of them touched since the
  last cycle (founded, named or mentioned), found through the index on names;
- contexts: a context touched since the last cycle and another whose centroid is at
  least ``context_link`` similar, the two spanning more than one conversation (within
  one conversation segmentation already decided), not linked yet, at most
  ``max_links_per_context`` per context, most similar first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..storage import Connection
from ..storage.tables import dream as rows
from ..storage.tables.dream import EntityProfile, NewRelation
from .config import DreamConfig
from .judges import ContextPair, EntityPair, context_similarity

__all__ = ["Material", "read_material"]

_DECLARING = {"alias-statement": "an alias statement", "translation": "a translation"}


@dataclass(frozen=True)
class Material:
    """What a cycle works on, read at one instant."""

    state: Mapping[str, float]
    upto: Mapping[str, int]
    generation: int
    messages: int
    entity_pairs: Sequence[EntityPair]
    context_pairs: Sequence[ContextPair]
    relations: Sequence[NewRelation]
    mutations: Sequence[rows.MutationRow]
    touched_entities: int
    touched_contexts: int

    def counts(self) -> dict[str, int]:
        """What is new since the last cycle, for the report."""
        new = {k: self.upto[k] - int(self.state[k]) for k in ("fragments", "entities", "contexts")}
        cooccurrences = sum(r.predicate == "co_occurs_with" for r in self.relations)
        return {
            "messages": self.messages,
            **new,
            "relations": len(self.relations) - cooccurrences,
            "cooccurrences": cooccurrences,
            "entities_touched": self.touched_entities,
            "contexts_touched": self.touched_contexts,
        }


def read_material(conn: Connection, config: DreamConfig, generation: int) -> Material:
    """Read the new material and its candidate pairs (caller holds a read transaction)."""
    state = rows.state(conn)
    upto = rows.maxima(conn)
    messages, _ = rows.new_log(conn, int(state["log"]))
    touched = rows.touched_entities(conn, state, upto)
    contexts = rows.touched_contexts(conn, state, upto)
    return Material(
        state=state,
        upto=upto,
        generation=generation,
        messages=messages,
        entity_pairs=_entity_pairs(conn, touched, config),
        context_pairs=_context_pairs(conn, contexts, config),
        relations=rows.new_relations(conn, int(state["relations"]), upto["relations"]),
        mutations=rows.new_mutations(conn, int(state["relations"]), upto["relations"]),
        touched_entities=len(touched),
        touched_contexts=len(contexts),
    )


def _entity_pairs(
    conn: Connection, touched: Sequence[int], config: DreamConfig
) -> list[EntityPair]:
    shares = rows.alias_shares(conn, touched, limit=4 * config.max_pairs)
    seen: dict[tuple[int, int], str] = {}
    for share in shares:
        seen.setdefault((share.a, share.b), share.normalized)
    pairs = sorted(seen.items())[: config.max_pairs]
    profiles = rows.entity_profiles(conn, {e for pair, _ in pairs for e in pair})
    return [
        EntityPair(
            profiles[a],
            profiles[b],
            shared,
            context_similarity(profiles[a].vector_sum, profiles[b].vector_sum),
            _declared(profiles[a], profiles[b], shared)
            or _declared(profiles[b], profiles[a], shared),
        )
        for (a, b), shared in pairs
        if a in profiles and b in profiles
    ]


def _declared(named: EntityProfile, other: EntityProfile, shared: str) -> str | None:
    """Why memory holds that ``named`` is also called ``shared`` (the other's name), when
    it learned that name from a statement or a translation rather than a mention."""
    for alias, source, fragment, normalized in named.aliases:
        if normalized == shared and source in _DECLARING:
            where = f" in fragment {fragment}" if fragment is not None else ""
            return (
                f"{_DECLARING[source]}{where} names {named.name} '{alias}',"
                f" as {other.name} is named"
            )
    return None


def _context_pairs(
    conn: Connection, touched: Sequence[int], config: DreamConfig
) -> list[ContextPair]:
    if not touched or config.max_links_per_context == 0:
        return []
    centroids = rows.context_centroids(conn)
    ids = np.array([cid for cid, _, _ in centroids], np.int64)
    if ids.size < 2:
        return []
    matrix = np.stack([_unit(np.frombuffer(blob, "<f4")) for _, blob, _ in centroids])
    position = {int(cid): i for i, cid in enumerate(ids)}
    ranked = _ranked(matrix, ids, position, touched, config.context_link)
    return _chosen(conn, ranked, config)


def _ranked(
    matrix: np.ndarray,
    ids: np.ndarray,
    position: Mapping[int, int],
    touched: Sequence[int],
    floor: float,
) -> list[tuple[float, int, int]]:
    """``(similarity, a, b)`` with ``a < b`` above ``floor``, most similar first."""
    found: dict[tuple[int, int], float] = {}
    for cid in touched:
        row = position.get(cid)
        if row is None:
            continue
        sims = matrix @ matrix[row]
        for other in np.nonzero(sims >= floor)[0]:
            if int(other) != row:
                a, b = sorted((cid, int(ids[other])))
                found[(a, b)] = float(sims[other])
    return sorted(((s, a, b) for (a, b), s in found.items()), reverse=True)


def _chosen(
    conn: Connection, ranked: Sequence[tuple[float, int, int]], config: DreamConfig
) -> list[ContextPair]:
    """The most similar pairs that span conversations, are not linked yet, and keep each
    context within its link allowance."""
    involved = {c for _, a, b in ranked for c in (a, b)}
    linked = rows.linked_contexts(conn, involved)
    profiles = rows.context_profiles(conn, involved)
    per_context: dict[int, int] = {}
    pairs: list[ContextPair] = []
    for similarity, a, b in ranked:
        if len(pairs) >= config.max_pairs:
            break
        if (a, b) in linked or a not in profiles or b not in profiles:
            continue
        if len(set(profiles[a].conversations) | set(profiles[b].conversations)) < 2:
            continue
        if max(per_context.get(a, 0), per_context.get(b, 0)) >= config.max_links_per_context:
            continue
        per_context[a] = per_context.get(a, 0) + 1
        per_context[b] = per_context.get(b, 0) + 1
        pairs.append(ContextPair(profiles[a], profiles[b], similarity))
    return pairs


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return (vector / norm).astype(np.float32) if norm > 1e-9 else vector.astype(np.float32)

