"""Name -> factory tables: how configuration names choose an implementation.

A :class:`Registry` replaces an ``if name == ...`` chain: implementations register under a
name (with a one-line description), configuration validates a chosen name (an unknown name
is refused with the known ones and a did-you-mean), and the builder calls
:meth:`Registry.get`. A leaf module: stdlib only.

Where configuration must check a name without importing what the factories build (they
import the configuration: a cycle), the names are declared in a leaf as :class:`Names`
(with their descriptions), configuration checks against them, and the implementing
module builds its registry on them (``Registry(names)``): registering an undeclared
name is refused, and :meth:`Registry.undeclared_or_missing` tells whether both sides
agree (a test checks every such registry).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Generic, Protocol, TypeVar

__all__ = ["NameTable", "Names", "Registry", "UnknownNameError"]

T = TypeVar("T")


class UnknownNameError(KeyError, ValueError):
    """A name no implementation is registered under; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


class NameTable(Protocol):
    """What validation needs of a registry: its names, and a check of one name."""

    def names(self) -> tuple[str, ...]: ...

    def check(self, name: str) -> str: ...


class Names:
    """The names a setting may choose, each with a one-line description, declared in a
    leaf so that configuration can check a name without importing the implementations.

    Invariant: fixed once built; names are unique and in declaration order.
    """

    def __init__(self, kind: str, described: Mapping[str, str]) -> None:
        self.kind = kind
        self._described = dict(described)

    def names(self) -> tuple[str, ...]:
        """Declared names, in declaration order."""
        return tuple(self._described)

    def describe(self, name: str) -> str:
        """The one-line description ``name`` was declared with."""
        self.check(name)
        return self._described[name]

    def check(self, name: str) -> str:
        """``name`` if declared, else :class:`UnknownNameError` (a ValueError, so a
        pydantic validator can call it and the message becomes the error's reason)."""
        if name not in self._described:
            raise UnknownNameError(_unknown(self.kind, name, self.names()))
        return name

    def __contains__(self, name: object) -> bool:
        return name in self._described

    def __repr__(self) -> str:
        return f"Names({self.kind!r}, {list(self._described)})"


class Registry(Generic[T]):
    """An ordered table of named entries of one kind (``kind`` names it in errors), open
    (each registration declares its name) or on declared :class:`Names`.

    Invariant: names are unique; registering a taken name, or on declared names one they
    do not hold, is a programming error.
    """

    def __init__(self, kind: str | Names) -> None:
        self.declared = kind if isinstance(kind, Names) else None
        self.kind = kind.kind if isinstance(kind, Names) else kind
        self._entries: dict[str, T] = {}
        self._descriptions: dict[str, str] = {}

    def register(self, name: str, entry: T, description: str = "") -> T:
        """Add ``entry`` under ``name``; returns it, so a factory can be registered inline.
        On declared names the description is the declared one (none may be given)."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        if self.declared is not None:
            if description:
                raise ValueError(f"{self.kind} {name!r}: its description is declared")
            if name not in self.declared:
                raise ValueError(f"{self.kind} {name!r} is not declared in {self.declared!r}")
            description = self.declared.describe(name)
        self._entries[name] = entry
        self._descriptions[name] = description
        return entry

    def undeclared_or_missing(self) -> tuple[set[str], set[str]]:
        """Registered names that are not declared, and declared names that have no entry
        (both empty when the registry is open or agrees with its declaration)."""
        if self.declared is None:
            return set(), set()
        registered, declared = set(self._entries), set(self.declared.names())
        return registered - declared, declared - registered

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
        return _unknown(self.kind, name, self.names())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"


def _unknown(kind: str, name: str, names: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {kind} {name!r}{hint} (one of: {', '.join(names)})"
