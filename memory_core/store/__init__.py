"""One tenant's memory behind one facade (:class:`.memory_store.MemoryStore`): its
connections and locks, its history half (snapshots, cycles, rollback), the controls a
person uses (forget, switches) and read-only inspection."""
