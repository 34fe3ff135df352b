"""The one exception root of the policies package.

Every failure the package reports about a policy (bad YAML, a wrong type, an unknown
rule, an unreadable file) is a `PolicyError`, so the proxy needs a single ``except``
to log a rejected edit with its file and line and keep the previous policy.
"""

from __future__ import annotations

__all__ = ["PolicyError"]


class PolicyError(Exception):
    """A policy could not be read or is invalid; says where (file, 1-based line) and what.

    Invariant: `str(error)` is ``"<file>:<line>: <message>"``, with the parts that are
    unknown left out (``"<file>: <message>"`` when there is no line, just the message when
    there is no file).
    """

    def __init__(self, file: str | None, line: int | None, message: str) -> None:
        super().__init__(file, line, message)
        self.file = file
        self.line = line
        self.message = message

    def __str__(self) -> str:
        where = [part for part in (self.file, self.line) if part is not None]
        if not where:
            return self.message
        return ":".join(str(part) for part in where) + ": " + self.message
