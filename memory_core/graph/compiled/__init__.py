"""The graph engine's inner loops, compiled by numba: pure functions of arrays."""
