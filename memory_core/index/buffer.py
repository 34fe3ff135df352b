"""An append-only array whose published prefixes never change.

Memory-graph versions (and the lexical index beside them) are immutable snapshots of
data that only grows: each holds read-only views of the first ``n`` rows of buffers like
this one. Growing copies the rows into a larger array and keeps writing there; a reader
that holds a view of the old array keeps a valid, unchanged prefix.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["AppendBuffer"]


class AppendBuffer:
    """An append-only array whose published prefixes never change (amortised doubling)."""

    def __init__(self, dtype: type[np.generic], width: int = 0) -> None:
        self._shape: tuple[int, ...] = (64, width) if width else (64,)
        self._data = np.zeros(self._shape, dtype)
        self.size = 0

    def extend(self, rows: npt.ArrayLike) -> None:
        values = np.asarray(rows, self._data.dtype)
        if values.shape[0] == 0:
            return
        needed = self.size + values.shape[0]
        if needed > self._data.shape[0]:
            grown = np.zeros(
                (max(needed, 2 * self._data.shape[0]), *self._shape[1:]), self._data.dtype
            )
            grown[: self.size] = self._data[: self.size]
            self._data = grown  # readers keep views of the old array, which stays valid
        self._data[self.size : needed] = values
        self.size = needed

    def view(self) -> npt.NDArray[Any]:
        prefix = self._data[: self.size]
        prefix.flags.writeable = False
        return prefix
