"""The one exception root of the policies package.

Every failure the package reports about a policy (bad YAML, a wrong type, an unknown
rule, an unreadable file) is a `PolicyError`, so the proxy needs a single ``except``
to log a rejected edit with its file and line and keep the previous policy.
"""

from __future__ import annotations

from memory_core.configuration import ConfigurationError

__all__ = ["PolicyError"]


class PolicyError(ConfigurationError):
    """A policy could not be read or is invalid; says where (file, 1-based line) and what.

    One kind of the project's :class:`ConfigurationError`. Invariant: `str(error)` is
    ``"<file>:<line>: <message>"``, with the parts that are unknown left out
    (``"<file>: <message>"`` when there is no line, just the message when there is no
    file); `message` is ``"<key>: <reason>"`` when the error names a key.
    """

    def __init__(self, file: str | None, line: int | None, message: str, *, key: str = "") -> None:
        super().__init__(file, line, key, message)
