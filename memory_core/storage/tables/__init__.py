"""The SQL of each family of tables, as functions that take a connection and take or return
typed rows (see :mod:`memory_core.storage`)."""
