"""Formation in worker processes: the loop a worker runs (:mod:`.loop`) and the CPU priority
it runs at (:mod:`.priority`). A supervisor (the proxy's) speaks to a worker in the
messages named here."""

from .loop import Failed, Form, Formed, Idle, Ready, Stop, Took, WorkerSettings, run

__all__ = ["Failed", "Form", "Formed", "Idle", "Ready", "Stop", "Took", "WorkerSettings", "run"]
