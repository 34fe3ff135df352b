"""What a lookup reads in memory: one immutable version of formed memory, as a graph
(:mod:`.memory_graph`), its in-memory BM25 (:mod:`.lexical`) and its vectors
(:mod:`.nearest`), published by :mod:`.holder` and grown in place (:mod:`.buffer`)."""
