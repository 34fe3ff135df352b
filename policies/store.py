"""Hot reload: the current policy, replaced when its file changes and the change is valid.

`check` compares the file's (mtime_ns, size, inode) with those of the last attempt, so an
unchanged file costs one ``stat``. A changed file is re-read and re-parsed; if that fails,
the previous policy stays current, the error is kept in `last_error` and passed to
`on_error` once per change (a broken file is not reported again every poll). Editors that
save by renaming a new file over the old one change the inode, so they are seen too.

A file longer than :data:`MAX_POLICY_CHARS` is refused unread, and `watch` runs `check` on
a worker thread: YAML is parsed in pure Python (seconds for a few megabytes), and the
proxy's event loop must not wait for it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from policies.errors import PolicyError
from policies.policy import Policy
from policies.schema import parse_policy

__all__ = ["MAX_POLICY_CHARS", "PolicyStore"]

_Signature = tuple[int, int, int]

MAX_POLICY_CHARS = 1 << 20
"""The longest policy file read, in characters (it may be the whole config.yaml: tens of
kilobytes)."""


class PolicyStore:
    """Holds the current Policy and reloads it when its file changes (hot reload).

    Invariant: `current` is always a successfully parsed policy; the constructor raises
    PolicyError when the first load fails, so there is never a store without one.
    """

    def __init__(
        self,
        path: str,
        *,
        root_key: str | None = None,
        on_error: Callable[[PolicyError], None] | None = None,
        on_reload: Callable[[Policy], None] | None = None,
    ) -> None:
        self.path = path
        self._root_key = root_key
        self._on_error = on_error
        self._on_reload = on_reload
        self._last_error: PolicyError | None = None
        self._signature: _Signature | None
        self._signature, self._policy = self._load()

    @property
    def current(self) -> Policy:
        """The policy in force: the last one that parsed."""
        return self._policy

    @property
    def last_error(self) -> PolicyError | None:
        """The error of the latest reload attempt, None once a reload succeeds."""
        return self._last_error

    def check(self) -> bool:
        """Reload if the file changed; True only when a new policy was swapped in."""
        if self._stat() == self._signature:
            return False
        try:
            self._signature, policy = self._load()
        except PolicyError as exc:
            self._signature = self._stat()
            self._last_error = exc
            if self._on_error is not None:
                self._on_error(exc)
            return False
        self._policy = policy
        self._last_error = None
        if self._on_reload is not None:
            self._on_reload(policy)
        return True

    async def watch(self, interval_s: float = 1.0) -> None:
        """Call `check` on a worker thread every `interval_s` seconds until the task is
        cancelled (one check at a time: the next waits for the one before)."""
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        while True:
            await asyncio.to_thread(self.check)
            await asyncio.sleep(interval_s)

    def _load(self) -> tuple[_Signature, Policy]:
        """Read the file and parse it; the signature is taken from the handle that was read."""
        try:
            with open(self.path, encoding="utf-8") as handle:
                signature = _signature(os.fstat(handle.fileno()))
                text = handle.read(MAX_POLICY_CHARS + 1)
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyError(self.path, None, f"cannot read policy file: {exc}") from exc
        if len(text) > MAX_POLICY_CHARS:
            raise PolicyError(
                self.path, None, f"the policy file holds more than the {MAX_POLICY_CHARS}"
                " characters a policy may hold"
            )  # fmt: skip
        return signature, parse_policy(text, self.path, root_key=self._root_key)

    def _stat(self) -> _Signature | None:
        try:
            return _signature(os.stat(self.path))
        except OSError:
            return None


def _signature(st: os.stat_result) -> _Signature:
    return (st.st_mtime_ns, st.st_size, st.st_ino)
