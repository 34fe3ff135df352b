"""Name -> factory tables: how configuration names choose an implementation.

A :class:`Registry` replaces an ``if name == ...`` chain: implementations register under a
name (with a one-line description), configuration validates a chosen name against
:meth:`Registry.names` (an unknown name is refused with the registered ones and a
did-you-mean), and the builder calls :meth:`Registry.get`. A leaf module: stdlib only, so
validators anywhere can use it without importing what the factories build.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["NameTable", "Registry", "UnknownNameError"]

T = TypeVar("T")


class UnknownNameError(KeyError, ValueError):
    """A name no implementation is registered under; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


class NameTable(Protocol):
    """What validation needs of a registry: its names, and a check of one name."""

    def names(self) -> tuple[str, ...]: ...

    def check(self, name: str) -> str: ...


class Registry(Generic[T]):
    """An ordered table of named entries of one kind (``kind`` names it in errors).

    Invariant: names are unique; registering a taken name is a programming error.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._descriptions: dict[str, str] = {}

    def register(self, name: str, entry: T, description: str = "") -> T:
        """Add ``entry`` under ``name``; returns it, so a factory can be registered inline."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry
        self._descriptions[name] = description
        return entry

    def factory(self, name: str, description: str = "") -> Callable[[T], T]:
        """Decorator form of :meth:`register`."""
        return lambda entry: self.register(name, entry, description)

    def get(self, name: str) -> T:
        """The entry registered under ``name``; :class:`UnknownNameError` otherwise."""
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self._unknown(name)) from None

    def names(self) -> tuple[str, ...]:
        """Registered names, in registration order."""
        return tuple(self._entries)

    def describe(self, name: str) -> str:
        """The one-line description ``name`` was registered with."""
        self.get(name)
        return self._descriptions[name]

    def check(self, name: str) -> str:
        """``name`` if registered, else :class:`UnknownNameError` (a ValueError, so a
        pydantic validator can call it and the message becomes the error's reason)."""
        if name not in self._entries:
            raise UnknownNameError(self._unknown(name))
        return name

    def _unknown(self, name: str) -> str:
        close = difflib.get_close_matches(name, self.names(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown {self.kind} {name!r}{hint} (one of: {', '.join(self.names())})"

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"
