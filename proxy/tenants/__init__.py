"""Tenants: each one's memory behind async methods, its copies as of a snapshot, the
formation worker processes and the automatic consolidation cycles."""
