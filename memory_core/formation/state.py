"""Loading and saving the in-memory state formation works with (entities, contexts).

Vectors are stored as raw little-endian float32 BLOBs.
"""

from __future__ import annotations

import numpy as np

from ..storage import Connection
from ..storage.tables import contexts as context_rows
from ..storage.tables import entities as entity_rows
from .interfaces import Vectors
from .stages.addressing import VOCATIVE
from .stages.contexts import ContextCache, ContextState
from .stages.linking import EntityCache, EntityState

__all__ = ["blob", "load_contexts", "load_entities", "save_contexts", "save_entities", "vector"]


def blob(vector: Vectors) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def vector(data: bytes | None) -> Vectors | None:
    return None if data is None else np.frombuffer(data, dtype="<f4").copy()


def load_entities(conn: Connection) -> EntityCache:
    cache = EntityCache()
    for eid, name, label, vsum, count, mentions, speaker in entity_rows.all_entities(conn):
        cache.entities[eid] = EntityState(eid, name, label, vector(vsum), count, mentions)
        if speaker:
            cache.speakers.add(eid)
    for eid, alias, source in entity_rows.all_aliases(conn):
        if source == VOCATIVE:
            cache.add_addressed(eid, alias)
        else:
            cache.add_alias(eid, alias)
    return cache


def save_entities(conn: Connection, cache: EntityCache, now: float) -> None:
    for entity in cache.entities.values():
        if entity.dirty:
            entity_rows.update(
                conn,
                entity.id,
                vector_sum=None if entity.vector_sum is None else blob(entity.vector_sum),
                vectors=entity.vectors,
                mentions=entity.mentions,
                seen=now,
            )
            entity.dirty = False


def load_contexts(conn: Connection) -> ContextCache:
    cache = ContextCache()
    for cid, label, centroid, size, first, last in context_rows.all_contexts(conn):
        vec = vector(centroid)
        assert vec is not None
        cache.contexts[cid] = ContextState(cid, label, vec, size, first, last)
    return cache


def save_contexts(conn: Connection, cache: ContextCache) -> None:
    for context in cache.contexts.values():
        if context.dirty:
            context_rows.update(
                conn,
                context.id,
                blob(context.vector_sum),
                context.size,
                context.first_ts,
                context.last_ts,
            )
            context.dirty = False
