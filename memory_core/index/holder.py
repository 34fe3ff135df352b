"""The one mutable cell of the graph engine: which :class:`GraphVersion` is current.

It lives beside the engine, not in it: :mod:`.graph` is pure numerics over immutable
versions (no locks, no threads, no SQLite), and publication is the one place that needs
a lock.

Readers call :meth:`GraphHolder.current` and keep the version they got for the whole query
(it is immutable, so nothing they read can change under them). Writers serialise on a lock
and publish by replacing one reference, which is atomic: a reader sees either the old
version or the new one, never a mixture. Rebuilds merge the delta *outside* the lock, then
replay onto the merged base whatever was appended while they ran, so appends are never
blocked for the length of a rebuild and never lost by one.
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import numpy.typing as npt

from ..graph import DEFAULT_MAX_DELTA_EDGES, EdgeList, GraphError, GraphVersion

__all__ = ["GraphHolder"]


class GraphHolder:
    """Thread-safe publication of immutable graph versions with numbered, increasing versions."""

    def __init__(
        self, initial: GraphVersion, *, max_delta_edges: int = DEFAULT_MAX_DELTA_EDGES
    ) -> None:
        if max_delta_edges < 0:
            raise GraphError("max_delta_edges must be >= 0")
        self._current = initial
        self._max_delta = max_delta_edges
        self._write = threading.Lock()
        self._rebuilding = threading.Lock()

    def current(self) -> GraphVersion:
        """Pin the current version (one atomic reference read, no lock)."""
        return self._current

    def append(self, edges: EdgeList, new_kinds: npt.ArrayLike = ()) -> GraphVersion:
        """Publish a version with ``edges`` appended; rebuild once the delta passes the limit.

        ``new_kinds`` adds nodes numbered from the current ``n_nodes`` on, in order.
        """
        with self._write:
            published = self._current.with_delta(edges, new_kinds)
            self._current = published
        if published.n_delta > self._max_delta:
            return self.rebuild()
        return published

    def rebuild(self) -> GraphVersion:
        """Merge the delta into a new base and publish it (a no-op when the delta is empty)."""
        with self._rebuilding:
            snapshot = self._current
            if snapshot.n_delta == 0:
                return snapshot
            merged = snapshot.rebuild(version=snapshot.version)
            with self._write:
                now = self._current
                if now.base_version != snapshot.base_version:
                    return now
                self._current = _replay(merged, snapshot, now)
                return self._current

    def replace(self, kinds: npt.ArrayLike, edges: EdgeList) -> GraphVersion:
        """Publish a version built from scratch (after a rollback, or a fresh read of SQLite).

        Edges appended to the previous version while this one was built are not carried over:
        the caller's full read is the truth.
        """
        built = GraphVersion.build(kinds, edges)
        with self._write:
            nxt = self._current.version + 1
            self._current = dataclasses.replace(built, version=nxt, base_version=nxt)
            return self._current


def _replay(merged: GraphVersion, snapshot: GraphVersion, now: GraphVersion) -> GraphVersion:
    """``merged`` renumbered after ``now``, plus what ``now`` appended since ``snapshot``."""
    nxt = now.version + 1
    result = dataclasses.replace(merged, version=nxt, base_version=nxt)
    suffix = now.delta.take(np.arange(snapshot.n_delta, now.n_delta))
    new_kinds = now.kinds[snapshot.n_nodes :]
    if len(suffix) or new_kinds.shape[0]:
        result = result.with_delta(suffix, new_kinds, version=nxt)
    return result
