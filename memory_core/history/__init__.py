"""Memory's history: snapshots of derived memory, rollback to any of them, diffs between
them, and the typed views people read of it."""
