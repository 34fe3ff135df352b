"""Compile the retrieval kernels before a question needs them.

The pulse (:mod:`memory_core.graph.compiled.push`), region growth and scoring
(:mod:`memory_core.graph.compiled.growth`, :mod:`memory_core.graph.compiled.region_terms`), the code
shortlist (:mod:`memory_core.index.nearest`), BM25 (:mod:`memory_core.index.lexical`), the
activation merge and the induced edges (:mod:`.graph`) are compiled by numba at their first call:
about 15 s on two cores with an empty cache, under a second once the compiled code is cached on disk
(numba's cache, beside the sources or in the user's cache folder). A lookup that compiled would run
far past its budget and hold a reader thread meanwhile, and a store with few fragments never reaches
the shortlist or an area at warm-up, so :func:`compile_kernels` runs each kernel once on tiny inputs
of the same array types as a real lookup (numba compiles per argument type;
``tests/test_kernels.py`` checks that a real lookup after it compiles nothing more). Idempotent and
thread-safe; the first call pays, later ones are free.
"""

from __future__ import annotations

import threading

import numpy as np

from ..graph import DEFAULT_TRAVERSAL, EdgeList, GraphVersion, combine, pulse, select_area
from ..index.lexical import LexicalIndex
from ..index.nearest import codes, prefixes, rescored, shortlist
from .area import reached_foci

__all__ = ["compile_kernels"]

_lock = threading.Lock()
_compiled = False


def compile_kernels() -> None:
    """Run every compiled kernel once (see the module docstring)."""
    global _compiled
    if _compiled:
        return
    with _lock:
        if _compiled:
            return
        base = GraphVersion.build([0, 0, 0], EdgeList.from_arrays([0, 1], [1, 2]))
        for version in (base, base.with_delta(EdgeList.from_arrays([2], [0]))):
            activation = pulse(
                version, [{0: 1.0}, {1: 1.0}], DEFAULT_TRAVERSAL, closed=np.empty(0, np.int64)
            )
            select_area(version, activation, DEFAULT_TRAVERSAL)
            combine([activation, activation])
        vectors = np.eye(2, 384, dtype=np.float32)
        stored = codes(vectors)
        first = prefixes(stored)
        stored.flags.writeable = first.flags.writeable = False  # as the graph publishes them
        shortlist(stored, first, codes(vectors[:1])[0], 1, 1)
        vectors.flags.writeable = False  # as the graph publishes them
        rescored(vectors, np.zeros(1, np.int64), vectors[0].copy())
        reached_foci(np.zeros((1, 1)), np.ones(1, np.bool_), 0.5)
        index = LexicalIndex()
        index.add(1, ["compile", "kernel"])
        index.view().search([["kernel"]], 1)
        _compiled = True
