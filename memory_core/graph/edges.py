"""Columnar edge lists: the unit in which edges enter, leave and are appended to the graph.

One row per stored edge, in its SQLite direction. The pair ``(edge_type, edge_id)``
identifies an edge; two edges between the same nodes with different types, ids or sources
are two rows and are never summed. ``source`` is the node id of the fragment that supports
the edge (a relation's fragment), or -1 when the edge has no separate source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from .errors import GraphError
from .kinds import MAX_EDGE_TYPES

__all__ = ["EdgeList"]

ArrayLike = npt.ArrayLike
_T = TypeVar("_T", bound=np.generic)


@dataclass(frozen=True, eq=False)
class EdgeList:
    """Parallel read-only columns, one entry per edge; build with :meth:`from_arrays`."""

    src: npt.NDArray[np.int64]
    dst: npt.NDArray[np.int64]
    weight: npt.NDArray[np.float32]
    edge_id: npt.NDArray[np.int64]
    edge_type: npt.NDArray[np.int16]
    source: npt.NDArray[np.int64]

    @classmethod
    def from_arrays(
        cls,
        src: ArrayLike,
        dst: ArrayLike,
        *,
        weight: ArrayLike | None = None,
        edge_id: ArrayLike | None = None,
        edge_type: ArrayLike | None = None,
        source: ArrayLike | None = None,
    ) -> EdgeList:
        """Validate and copy columns; defaults: weight 1, ids 0..m-1, type 0, no source."""
        s = _column(src, np.int64, "src")
        m = s.shape[0]
        edges = cls(
            src=s,
            dst=_column(dst, np.int64, "dst"),
            weight=_column(np.ones(m) if weight is None else weight, np.float32, "weight"),
            edge_id=_column(np.arange(m) if edge_id is None else edge_id, np.int64, "edge_id"),
            edge_type=_column(np.zeros(m) if edge_type is None else edge_type, np.int16, "type"),
            source=_column(np.full(m, -1) if source is None else source, np.int64, "source"),
        )
        edges._validate()
        return edges

    @classmethod
    def empty(cls) -> EdgeList:
        """No edges."""
        return cls.from_arrays(np.empty(0, np.int64), np.empty(0, np.int64))

    @classmethod
    def concat(cls, parts: Sequence[EdgeList]) -> EdgeList:
        """Rows of ``parts`` one after the other (already validated, so not re-checked)."""
        if not parts:
            return cls.empty()
        columns = zip(*map(_columns, parts), strict=True)
        return cls(*(_frozen(np.concatenate(cols)) for cols in columns))

    def __len__(self) -> int:
        return int(self.src.shape[0])

    def take(self, rows: npt.NDArray[np.integer]) -> EdgeList:
        """The edges at positions ``rows``, in that order."""
        return EdgeList(*(_frozen(col[rows]) for col in _columns(self)))

    def max_node(self) -> int:
        """The largest node id an edge (or its source) refers to; -1 for no edges."""
        if len(self) == 0:
            return -1
        return int(max(self.src.max(), self.dst.max(), self.source.max()))

    def _validate(self) -> None:
        m = len(self)
        if any(col.shape != (m,) for col in _columns(self)):
            raise GraphError("edge columns must be one-dimensional and of equal length")
        if m == 0:
            return
        if self.src.min() < 0 or self.dst.min() < 0 or self.source.min() < -1:
            raise GraphError("node ids must be >= 0 (source: >= 0 or -1)")
        if not np.all(np.isfinite(self.weight)) or self.weight.min() < 0:
            raise GraphError("edge weights must be finite and >= 0")
        if self.edge_type.min() < 0 or self.edge_type.max() >= MAX_EDGE_TYPES:
            raise GraphError(f"edge types must lie in [0, {MAX_EDGE_TYPES})")


def _columns(edges: EdgeList) -> tuple[npt.NDArray[np.generic], ...]:
    return (edges.src, edges.dst, edges.weight, edges.edge_id, edges.edge_type, edges.source)


def _column(values: ArrayLike, dtype: type[_T], name: str) -> npt.NDArray[_T]:
    raw = np.asarray(values)
    if raw.ndim != 1:
        raise GraphError(f"edge column {name!r} must be one-dimensional")
    if np.issubdtype(dtype, np.integer) and raw.size:
        _check_integers(raw, np.dtype(dtype).name, name)
    return _frozen(raw.astype(dtype, copy=True))


def _check_integers(raw: npt.NDArray[Any], dtype: str, name: str) -> None:
    if not np.issubdtype(raw.dtype, np.integer) and (
        not np.all(np.isfinite(raw)) or np.any(raw != np.round(raw))
    ):
        raise GraphError(f"edge column {name!r} must hold integers")
    info = np.iinfo(dtype)
    if raw.min() < info.min or raw.max() > info.max:
        raise GraphError(f"edge column {name!r} overflows {dtype}")


def _frozen(array: npt.NDArray[_T]) -> npt.NDArray[_T]:
    array.flags.writeable = False
    return array
