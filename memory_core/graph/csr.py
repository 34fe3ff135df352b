"""Immutable graph versions: CSR arrays over node ids 0..n-1 plus an append-only delta.

A :class:`GraphVersion` is what a query pins. It holds

- ``kinds``: one small integer per node (:class:`~.kinds.NodeKind` values);
- ``out``: the base edges in CSR form keyed by source (``indptr``, ``indices`` = targets,
  ``weight``, ``edge_id``, ``edge_type``, ``source``), one entry per stored edge, so parallel
  edges with different types, ids or sources stay distinct entries and are never summed;
  each row is sorted by target, so a hub's long row can be searched instead of scanned;
- ``inc``: the reverse index keyed by target (``indices`` = sources, ``pos`` = the entry of
  the same edge in ``out``), which is how reverse traversal finds the edges pointing at a
  node without storing their columns twice;
- ``delta``: edges appended since the base was built, kept in arrival order and indexed by
  sorted keys (no ``O(n)`` array per append). Every read merges base and delta.

Nothing is ever mutated: :meth:`GraphVersion.with_delta` and :meth:`GraphVersion.rebuild`
return new versions that share the arrays they did not change, so a query holding an old
version keeps reading exactly what it pinned. Publishing is the job of
:class:`memory_core.index.holder.GraphHolder`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from .compiled.beside import best_beside
from .compiled.induced import base_positions_within
from .edges import EdgeList
from .errors import GraphError
from .traversal import Traversal

__all__ = ["CSR", "Arcs", "GraphVersion", "ReverseIndex", "isin_sorted"]

DEFAULT_MAX_DELTA_EDGES = 8_192
"""Edges a version may hold in its delta before the holder merges them into a new base.

Every query pays for the delta (a binary search per touched node and direction, then
scattered reads), and a proxy under traffic sits anywhere between empty and full: over
100k fragments the same 200 questions took 5.83 ms with 60k delta edges against 4.93
after a merge, 5.10 against 4.77 with 16k and 4.91 against 4.81 with 8k. A merge at
that size takes ~90 ms on the formation thread (the GIL left to other threads for all
but ~4 ms stretches), about once per 400 exchanges."""

_T = TypeVar("_T", bound=np.generic)
_D = TypeVar("_D")
_MAX_NODES = int(np.iinfo(np.int32).max)
_SCAN_FACTOR = 8
Int64s = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class CSR:
    """Base edges grouped by source: row ``u`` is ``indptr[u]:indptr[u + 1]``."""

    indptr: Int64s
    indices: npt.NDArray[np.int32]
    weight: npt.NDArray[np.float32]
    edge_id: Int64s
    edge_type: npt.NDArray[np.int16]
    source: Int64s

    @classmethod
    def from_edges(cls, edges: EdgeList, n: int) -> CSR:
        """Group ``edges`` by source, rows sorted by target; parallel edges keep their order."""
        order = np.argsort(edges.src * np.int64(max(n, 1)) + edges.dst, kind="stable")
        return cls(
            indptr=_frozen(_indptr(edges.src, n)),
            indices=_frozen(edges.dst[order].astype(np.int32)),
            weight=_frozen(edges.weight[order]),
            edge_id=_frozen(edges.edge_id[order]),
            edge_type=_frozen(edges.edge_type[order]),
            source=_frozen(edges.source[order]),
        )

    @property
    def n_rows(self) -> int:
        return int(self.indptr.shape[0]) - 1

    def row(self, node: int) -> slice:
        """Positions of the edges leaving ``node`` (empty beyond the base's nodes)."""
        if node >= self.n_rows:
            return slice(0, 0)
        return slice(int(self.indptr[node]), int(self.indptr[node + 1]))

    def to_edges(self) -> EdgeList:
        """The stored edges as a list, in CSR order."""
        src = np.repeat(np.arange(self.n_rows, dtype=np.int64), np.diff(self.indptr))
        return EdgeList(
            _frozen(src),
            _frozen(self.indices.astype(np.int64)),
            self.weight,
            self.edge_id,
            self.edge_type,
            self.source,
        )


@dataclass(frozen=True, eq=False)
class ReverseIndex:
    """Base edges grouped by target: ``indices`` are sources, ``pos`` their entries in ``out``."""

    indptr: Int64s
    indices: npt.NDArray[np.int32]
    pos: Int64s

    @classmethod
    def from_csr(cls, out: CSR) -> ReverseIndex:
        order = np.argsort(out.indices, kind="stable")
        src = np.repeat(np.arange(out.n_rows, dtype=np.int32), np.diff(out.indptr))
        return cls(
            indptr=_frozen(_indptr(out.indices, out.n_rows)),
            indices=_frozen(src[order]),
            pos=_frozen(order.astype(np.int64)),
        )


@dataclass(frozen=True, eq=False)
class _SortedIndex:
    """Delta edges sorted by one endpoint: rows ``order[lo:hi]`` have ``keys == node``."""

    keys: Int64s
    order: Int64s

    @classmethod
    def of(cls, keys: Int64s) -> _SortedIndex:
        order = np.argsort(keys, kind="stable").astype(np.int64)
        return cls(_frozen(keys[order]), _frozen(order))

    def spans(self, nodes: Int64s) -> tuple[Int64s, Int64s]:
        lo = np.searchsorted(self.keys, nodes, side="left").astype(np.int64)
        hi = np.searchsorted(self.keys, nodes, side="right").astype(np.int64)
        return lo, hi - lo


@dataclass(frozen=True, eq=False)
class Arcs:
    """Traversal arcs leaving a set of nodes: ``owner`` indexes the nodes asked about.

    ``weight`` is the edge weight times the traversal multiplier of the direction taken;
    ``read`` counts the stored edge entries looked at (including closed directions).
    """

    owner: Int64s
    target: Int64s
    weight: npt.NDArray[np.float64]
    read: int


@dataclass(frozen=True, eq=False)
class GraphVersion:
    """One immutable version of the flattened graph; see the module docstring."""

    version: int
    base_version: int
    kinds: npt.NDArray[np.int8]
    out: CSR
    inc: ReverseIndex
    delta: EdgeList
    _delta_out: _SortedIndex
    _delta_in: _SortedIndex
    _derived: dict[Hashable, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, kinds: npt.ArrayLike, edges: EdgeList, *, version: int = 0) -> GraphVersion:
        """A version whose base holds ``edges`` and whose delta is empty."""
        kind_array = _kinds(kinds)
        _check_nodes(edges, kind_array.shape[0])
        out = CSR.from_edges(edges, kind_array.shape[0])
        empty = EdgeList.empty()
        index = _SortedIndex.of(empty.src)
        reverse = ReverseIndex.from_csr(out)
        return cls(version, version, kind_array, out, reverse, empty, index, index)

    @property
    def n_nodes(self) -> int:
        return int(self.kinds.shape[0])

    @property
    def n_edges(self) -> int:
        return int(self.out.indices.shape[0]) + len(self.delta)

    @property
    def n_delta(self) -> int:
        return len(self.delta)

    @property
    def delta_indexes(self) -> tuple[_SortedIndex, _SortedIndex]:
        """The delta's indexes by source and by target (for the compiled push)."""
        return self._delta_out, self._delta_in

    def derived(self, key: Hashable, build: Callable[[], _D]) -> _D:
        """What ``build()`` computes from this version, computed once and kept with it.

        Structures derived from one version (a pulse's normalised propagation matrix, say)
        live and die with that version: a new version starts with none, and the memory
        goes when the last query holding the version lets go of it. No lock: two queries
        that miss at the same moment both build, and one result is kept (``build`` must be
        a pure function of the version and ``key``, so either is right).
        """
        found = self._derived.get(key)
        if found is None:
            found = self._derived.setdefault(key, build())
        return found  # type: ignore[no-any-return]

    def with_delta(
        self, edges: EdgeList, new_kinds: npt.ArrayLike = (), *, version: int | None = None
    ) -> GraphVersion:
        """A new version with ``edges`` appended to the delta and ``new_kinds`` nodes added."""
        kinds = self.kinds
        added = _kinds(new_kinds)
        if added.shape[0]:
            kinds = _frozen(np.concatenate([self.kinds, added]))
        _check_nodes(edges, kinds.shape[0])
        delta = EdgeList.concat([self.delta, edges])
        return GraphVersion(
            self.version + 1 if version is None else version,
            self.base_version,
            kinds,
            self.out,
            self.inc,
            delta,
            _SortedIndex.of(delta.src),
            _SortedIndex.of(delta.dst),
        )

    def rebuild(self, *, version: int | None = None) -> GraphVersion:
        """A new version whose base holds every edge (base, then delta) and an empty delta."""
        nxt = self.version + 1 if version is None else version
        return GraphVersion.build(self.kinds, self.edges(), version=nxt)

    def edges(self) -> EdgeList:
        """Every stored edge: the base in CSR order, then the delta in arrival order."""
        return EdgeList.concat([self.out.to_edges(), self.delta])

    def degree(self, nodes: Int64s) -> Int64s:
        """Stored edge entries at each node, both directions, base and delta."""
        base = np.minimum(nodes, self.out.n_rows)
        fwd = self.out.indptr[np.minimum(base + 1, self.out.n_rows)] - self.out.indptr[base]
        rev = self.inc.indptr[np.minimum(base + 1, self.out.n_rows)] - self.inc.indptr[base]
        delta = self._delta_out.spans(nodes)[1] + self._delta_in.spans(nodes)[1]
        return np.asarray(fwd + rev + delta, dtype=np.int64)

    def arcs(self, nodes: Int64s, traversal: Traversal) -> Arcs:
        """The traversal arcs leaving ``nodes``: stored edges forward, and reversed."""
        parts = [
            self._base_forward(nodes, traversal),
            self._base_reverse(nodes, traversal),
            self._delta_arcs(nodes, traversal, reverse=False),
            self._delta_arcs(nodes, traversal, reverse=True),
        ]
        return Arcs(
            owner=np.concatenate([p[0] for p in parts]),
            target=np.concatenate([p[1] for p in parts]),
            weight=np.concatenate([p[2] for p in parts]),
            read=sum(int(p[0].shape[0]) for p in parts),
        )

    def best_beside(self, nodes: Int64s, members: Int64s, values: Floats) -> Floats:
        """For each of ``nodes``, the largest of ``values`` over the ``members`` (sorted,
        distinct; ``values`` aligned with them) it shares a stored edge with, in either
        direction, base or delta, of any type, the node itself aside; 0 for a node that
        shares none (``values`` are not negative)."""
        best = np.zeros(nodes.shape[0])
        values = np.ascontiguousarray(values, dtype=np.float64)
        best_beside(self.out.indptr, self.out.indices, nodes, members, values, best)
        best_beside(self.inc.indptr, self.inc.indices, nodes, members, values, best)
        delta = ((self._delta_out, self.delta.dst), (self._delta_in, self.delta.src))
        for index, ends in delta if len(self.delta) else ():
            lo, lengths = index.spans(nodes)
            if not int(lengths.sum()):
                continue
            owner = np.repeat(np.arange(nodes.shape[0], dtype=np.int64), lengths)
            other = ends[index.order[_spans(lo, lengths)]]
            at = np.searchsorted(members, other)
            found = at < members.shape[0]
            found[found] = members[at[found]] == other[found]
            found &= other != nodes[owner]
            np.maximum.at(best, owner[found], values[at[found]])
        return best

    def induced_edges(self, nodes: Int64s) -> EdgeList:
        """Every stored edge whose two endpoints are both in ``nodes`` (parallel edges kept).

        Short rows are scanned; in a long row (a hub's) the members are binary-searched,
        which rows sorted by target allow, so the cost does not grow with a hub's degree.
        """
        members = np.unique(nodes)
        idx, src = base_positions_within(
            self.out.indptr, self.out.indices, members, _SCAN_FACTOR
        )
        base_rows = EdgeList(
            _frozen(src),
            _frozen(self.out.indices[idx].astype(np.int64)),
            _frozen(self.out.weight[idx]),
            _frozen(self.out.edge_id[idx]),
            _frozen(self.out.edge_type[idx]),
            _frozen(self.out.source[idx]),
        )
        lo, lengths = self._delta_out.spans(members)
        rows = self._delta_out.order[_spans(lo, lengths)]
        rows = rows[isin_sorted(self.delta.dst[rows], members)]
        return EdgeList.concat([base_rows, self.delta.take(np.sort(rows))])

    def _base_rows(self, nodes: Int64s, indptr: Int64s) -> tuple[Int64s, Int64s]:
        n_rows = indptr.shape[0] - 1
        row = np.minimum(nodes, n_rows)
        starts = indptr[row]
        lengths = np.where(nodes < n_rows, indptr[np.minimum(row + 1, n_rows)] - starts, 0)
        owner = np.repeat(np.arange(nodes.shape[0], dtype=np.int64), lengths)
        return owner, _spans(starts, lengths)

    def _base_forward(self, nodes: Int64s, traversal: Traversal) -> _ArcParts:
        owner, idx = self._base_rows(nodes, self.out.indptr)
        mult = traversal.forward_table[self.out.edge_type[idx]]
        return owner, self.out.indices[idx].astype(np.int64), self.out.weight[idx] * mult

    def _base_reverse(self, nodes: Int64s, traversal: Traversal) -> _ArcParts:
        owner, idx = self._base_rows(nodes, self.inc.indptr)
        pos = self.inc.pos[idx]
        mult = traversal.reverse_table[self.out.edge_type[pos]]
        return owner, self.inc.indices[idx].astype(np.int64), self.out.weight[pos] * mult

    def _delta_arcs(self, nodes: Int64s, traversal: Traversal, *, reverse: bool) -> _ArcParts:
        index = self._delta_in if reverse else self._delta_out
        lo, lengths = index.spans(nodes)
        owner = np.repeat(np.arange(nodes.shape[0], dtype=np.int64), lengths)
        rows = index.order[_spans(lo, lengths)]
        table = traversal.reverse_table if reverse else traversal.forward_table
        target = self.delta.src[rows] if reverse else self.delta.dst[rows]
        return owner, target, self.delta.weight[rows] * table[self.delta.edge_type[rows]]


_ArcParts = tuple[Int64s, Int64s, npt.NDArray[np.float64]]


def _spans(starts: Int64s, lengths: Int64s) -> Int64s:
    """Concatenated ``arange(starts[i], starts[i] + lengths[i])`` without a Python loop."""
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, np.int64)
    offsets = np.cumsum(lengths) - lengths
    return (np.repeat(starts - offsets, lengths) + np.arange(total, dtype=np.int64)).astype(
        np.int64
    )


def isin_sorted(values: Int64s, sorted_set: Int64s) -> npt.NDArray[np.bool_]:
    """Whether each of ``values`` is in ``sorted_set`` (ascending), by binary search."""
    if sorted_set.shape[0] == 0:
        return np.zeros(values.shape[0], dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_set, values), sorted_set.shape[0] - 1)
    return np.asarray(sorted_set[pos] == values)


def _indptr(keys: npt.NDArray[np.integer], n: int) -> Int64s:
    counts = np.bincount(keys, minlength=n).astype(np.int64)
    return np.concatenate([np.zeros(1, np.int64), np.cumsum(counts)])


def _kinds(kinds: npt.ArrayLike) -> npt.NDArray[np.int8]:
    raw = np.asarray(kinds)
    if raw.ndim != 1 or (raw.size and not np.issubdtype(raw.dtype, np.integer)):
        raise GraphError("node kinds must be a one-dimensional integer array")
    if raw.size and (raw.min() < 0 or raw.max() > np.iinfo(np.int8).max):
        raise GraphError("node kinds must lie in [0, 127]")
    if raw.shape[0] > _MAX_NODES:
        raise GraphError(f"at most {_MAX_NODES} nodes")
    return _frozen(raw.astype(np.int8))


def _check_nodes(edges: EdgeList, n: int) -> None:
    if edges.max_node() >= n:
        raise GraphError(f"edge refers to node {edges.max_node()} but the graph has {n} nodes")


def _frozen(array: npt.NDArray[_T]) -> npt.NDArray[_T]:
    array.flags.writeable = False
    return array
