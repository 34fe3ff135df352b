"""Formation in worker processes: the loop a worker runs (:mod:`.loop`) and the CPU priority
it runs at (:mod:`.priority`)."""
