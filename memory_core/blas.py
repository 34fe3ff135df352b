"""One BLAS thread per process: the matrix products of a lookup are small.

NumPy's OpenBLAS starts a thread per core and hands even a 2,760 x 384 matrix-vector
product to them; on two cores shared with the event loop, the question's encoding and the
pulse, waking and spinning those threads cost more than the product itself (sampled in
the proxy over five LoCoMo conversations, back to back: the dense product was 35% of a
lookup's time). Every product on the request path is small enough for one thread.

:func:`limit_blas_threads` is called by the processes that answer or form (``areamem
serve``, the formation worker), never at import: a library must not change a process's
thread pools by being imported.
"""

from __future__ import annotations

__all__ = ["limit_blas_threads"]


def limit_blas_threads() -> None:
    """Limit every BLAS library loaded in this process to one thread, for good."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")
