"""Retrieval: a question (:mod:`memory_core.text.question`) turned into ranked fragments by a named
strategy (:mod:`.strategies`): BM25 (:mod:`.bm25`) or the area of the memory graph (:mod:`.area`),
scored by :mod:`.scoring`; :mod:`.recall` runs fetch, score, gather and render."""
