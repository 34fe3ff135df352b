"""The warm-up compiles every retrieval kernel for the argument types a real lookup uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_core import LogMessage, MemoryStore
from memory_core.formation import Backends
from memory_core.graph import activation
from memory_core.graph.compiled import field, growth, induced, push, region_terms
from memory_core.index import lexical
from memory_core.index import nearest as nearest_module
from memory_core.retrieval import area as area_retrieval
from memory_core.retrieval.kernels import compile_kernels

# numba dispatchers (``signatures`` lists what each compiled), typed as the functions
_KERNELS: list[Any] = [
    push.push_rounds,
    growth.grow_all,
    region_terms.candidate_terms,
    field.local_arrays,
    nearest_module.shortlist,
    lexical._bm25,
    activation.sorted_union,
    induced.base_positions_within,
    activation._totals_and_peaks,
    area_retrieval.reached_foci,
    nearest_module.rescored,
]


def _signatures() -> list[int]:
    return [len(kernel.signatures) for kernel in _KERNELS]


def test_a_lookup_after_the_warm_up_compiles_nothing(
    tmp_path: Path, backends: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    compile_kernels()
    before = _signatures()
    assert all(before)
    monkeypatch.setattr(nearest_module, "EXACT_ROWS", 2)  # reach the shortlist too
    store = MemoryStore(tmp_path / "t.db", backends=backends)
    turns = [
        "Caroline went to the LGBTQ support group on 7 May.",
        "Melanie painted a sunrise over the lake with her kids.",
        "Caroline is researching adoption agencies.",
        "Melanie ran a charity race for mental health.",
    ]
    store.append(
        [
            LogMessage({"role": "user", "content": t}, 1_700_000_000.0 + i)
            for i, t in enumerate(turns)
        ],
        conversation="c1",
    )
    store.form_all()
    store.warm_graph()
    recall = store.recall_area(
        "When did Caroline go to the support group?", limit=4, budget_tokens=300
    )
    assert recall.hits  # a real lookup ran: BM25, pulse, area and shortlist
    assert _signatures() == before
    store.close()


def test_compiling_twice_is_free() -> None:
    compile_kernels()
    before = _signatures()
    compile_kernels()
    assert _signatures() == before
    assert np.all(np.asarray(before) >= 1)
