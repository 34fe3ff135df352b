"""Loading and saving the in-memory state formation works with (entities, contexts).

Vectors are stored as raw little-endian float32 BLOBs.
"""

from __future__ import annotations

import apsw
import numpy as np

from .contexts import ContextCache, ContextState
from .interfaces import Vectors
from .linking import EntityCache, EntityState

__all__ = ["blob", "load_contexts", "load_entities", "save_contexts", "save_entities", "vector"]


def blob(vector: Vectors) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def vector(data: bytes | None) -> Vectors | None:
    return None if data is None else np.frombuffer(data, dtype="<f4").copy()


def load_entities(conn: apsw.Connection) -> EntityCache:
    cache = EntityCache()
    for eid, name, label, vsum, count, mentions, speaker in conn.execute(
        "SELECT id, name, label, vector_sum, vectors, mentions, is_speaker FROM entities"
    ):
        cache.entities[eid] = EntityState(eid, name, label, vector(vsum), count, mentions)
        if speaker:
            cache.speakers.add(eid)
    for eid, alias in conn.execute("SELECT entity_id, alias FROM aliases"):
        cache.add_alias(eid, alias)
    return cache


def save_entities(conn: apsw.Connection, cache: EntityCache, now: float) -> None:
    for entity in cache.entities.values():
        if entity.dirty:
            conn.execute(
                "UPDATE entities SET vector_sum = ?, vectors = ?, mentions = ?,"
                " last_seen = max(last_seen, ?) WHERE id = ?",
                (
                    None if entity.vector_sum is None else blob(entity.vector_sum),
                    entity.vectors,
                    entity.mentions,
                    now,
                    entity.id,
                ),
            )
            entity.dirty = False


def load_contexts(conn: apsw.Connection) -> ContextCache:
    cache = ContextCache()
    for cid, label, centroid, size, first, last in conn.execute(
        "SELECT id, label, centroid, size, first_ts, last_ts FROM contexts"
    ):
        vec = vector(centroid)
        assert vec is not None
        cache.contexts[cid] = ContextState(cid, label, vec, size, first, last)
    return cache


def save_contexts(conn: apsw.Connection, cache: ContextCache) -> None:
    for context in cache.contexts.values():
        if context.dirty:
            conn.execute(
                "UPDATE contexts SET centroid = ?, size = ?, first_ts = ?, last_ts = ?"
                " WHERE id = ?",
                (
                    blob(context.vector_sum),
                    context.size,
                    context.first_ts,
                    context.last_ts,
                    context.id,
                ),
            )
            context.dirty = False
