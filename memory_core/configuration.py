"""One configuration dialect: YAML read with line numbers, typed by pydantic models, and
every mistake reported as ``<file>:<line>: <dotted.key>: <reason>``.

Three pieces, used by the proxy's ``config.yaml``, formation, the graph settings and the
trigger policy alike:

- :func:`read_yaml` composes the document (``yaml.compose`` with the safe loader, so every
  node keeps its position) into plain Python values plus a :class:`Document` map from each
  key path to its 1-based line; duplicate keys are errors, not silently overwritten.
- :class:`ConfigModel` is the base of every settings model: frozen, unknown keys
  forbidden, strict types (an integer is accepted for a float, a boolean or a string is
  never a number). A ``null`` section counts as an empty one.
- :func:`validate` runs a model over a value and turns the first pydantic error into one
  :class:`ConfigurationError` naming the file, the line of the offending key (of the
  enclosing mapping for a missing key), the dotted key (``upstreams[0].provider``) and a
  reason in the project's words, with ``did you mean 'x'?`` for a near-miss key.

Why pydantic rather than hand-written checks, attrs/cattrs or msgspec: it is already
installed (litellm depends on it), its v2 core validates in Rust, its strict mode is the
typing we want without writing a type check per field, and a model is also a JSON Schema
for free (the OpenAPI description reuses it). Four hand-written validators had drifted
into four error styles; cattrs would need its own error-path plumbing, and msgspec has
no line-aware error translation either and would be a new dependency.

A leaf module: it imports only the standard library, yaml and pydantic, so ``policies``
can use it without pulling in storage or numerics.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar, Union

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = [
    "ConfigModel",
    "ConfigurationError",
    "Document",
    "KeyPath",
    "ListOf",
    "Name",
    "describe",
    "read_yaml",
    "read_yaml_file",
    "reason_of",
    "render_key",
    "suggest",
    "validate",
]

KeyPath = tuple[str | int, ...]
"""A key's place in a document: mapping keys and 0-based list indices from the root."""

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class ConfigurationError(Exception):
    """A configuration value is invalid: where it is (file, 1-based line, dotted key) and why.

    Invariant: ``str(error)`` is ``"<file>:<line>: <key>: <reason>"``; the parts that are
    unknown (no file, no line, no key) are left out.
    """

    def __init__(self, file: str | None, line: int | None, key: str, reason: str) -> None:
        super().__init__(file, line, key, reason)
        self.file, self.line, self.key, self.reason = file, line, key, reason

    @property
    def message(self) -> str:
        """``<key>: <reason>``, without the file and line."""
        return f"{self.key}: {self.reason}" if self.key else self.reason

    def __str__(self) -> str:
        where = ":".join(str(part) for part in (self.file, self.line) if part is not None)
        return f"{where}: {self.message}" if where else self.message


@dataclass(frozen=True)
class Document:
    """A parsed YAML document: its plain value and the line of every key path in it."""

    source: str | None
    value: object
    lines: Mapping[KeyPath, int] = field(default_factory=dict)

    @classmethod
    def of(cls, value: object, source: str | None = None) -> Document:
        """A document built in code (no lines known)."""
        return cls(source, value)

    def line(self, path: KeyPath) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None

    def at(self, path: KeyPath) -> object:
        """The value at ``path`` (None where the path does not exist)."""
        value = self.value
        for part in path:
            value = _step(value, part)
        return value

    def error(self, path: KeyPath, reason: str, *, first_index: int = 0) -> ConfigurationError:
        """A :class:`ConfigurationError` at ``path`` of this document."""
        return ConfigurationError(
            self.source, self.line(path), render_key(path, first_index), reason
        )


class ConfigModel(BaseModel):
    """Base of every settings model: frozen, unknown keys refused, strict types.

    Strict mode refuses ``"8"`` and ``true`` where a number is expected (and accepts an
    integer for a float); no number may be ``.inf`` or ``.nan`` (a weight or a timeout
    that is not finite breaks arithmetic far from the file); a ``null`` section
    (``server:`` with every key commented out) is an empty one.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        return {} if value is None else value


def _to_tuple(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must be a non-empty string")
    return value


ListOf = Annotated[tuple[T, ...], BeforeValidator(_to_tuple)]
"""A YAML list held as an immutable tuple (strict mode alone would refuse a list)."""

Name = Annotated[str, AfterValidator(_non_blank)]
"""A string with something other than spaces in it."""


# -- reading ------------------------------------------------------------------------


def read_yaml_file(path: str) -> Document:
    """Read and compose the UTF-8 file at ``path``; unreadable files are errors too."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(path, None, "", f"cannot read: {exc}") from exc
    return read_yaml(text, path)


def read_yaml(text: str, source: str | None = None) -> Document:
    """Compose ``text`` into a :class:`Document`; YAML errors carry their line. Both
    PyYAML's composer and ours recurse once per level of nesting: a document nested past
    the interpreter's recursion limit (thousands of brackets or indents) is refused as
    such, never a RecursionError."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        if root is None:
            return Document(source, None)
        return _Composer(source).document(root)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = "; ".join(p for p in (exc.context, exc.problem) if p)
        raise ConfigurationError(source, line, "", f"invalid YAML: {problem}") from exc
    except yaml.YAMLError as exc:
        raise ConfigurationError(source, None, "", f"invalid YAML: {exc}") from exc
    except RecursionError:
        raise ConfigurationError(source, None, "", "invalid YAML: nested too deeply") from None


class _Composer:
    """Turns composed nodes into plain values, recording the line of every key path.

    An alias (``*name``) is the very node its anchor composed, so each node is turned into
    a value once and shared, as ``yaml.safe_load`` does: a "billion laughs" document of
    nested aliases stays as small as its text instead of expanding exponentially, and a
    node that contains itself is an error. Lines are recorded where a node first appears.
    """

    def __init__(self, source: str | None) -> None:
        self.source = source
        self.lines: dict[KeyPath, int] = {}
        self._constructor = SafeConstructor()
        self._done: dict[int, object] = {}
        self._open: set[int] = set()

    def document(self, root: Node) -> Document:
        value = self.value(root, ())
        return Document(self.source, value, self.lines)

    def value(self, node: Node, path: KeyPath) -> object:
        self.lines.setdefault(path, _line(node))
        if id(node) in self._done:
            return self._done[id(node)]
        if id(node) in self._open:
            raise ConfigurationError(
                self.source, _line(node), render_key(path) or "(top level)", "recursive alias"
            )
        self._open.add(id(node))
        value: object
        if isinstance(node, MappingNode):
            value = self.mapping(node, path)
        elif isinstance(node, SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                self.lines.setdefault((*path, index), _line(item))
                items.append(self.value(item, (*path, index)))
            value = items
        else:
            value = self._constructor.construct_object(node, deep=True)
        self._open.discard(id(node))
        self._done[id(node)] = value
        return value

    def mapping(self, node: MappingNode, path: KeyPath) -> dict[str, object]:
        result: dict[str, object] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.value == "":
                where = render_key(path) or "(top level)"
                raise ConfigurationError(
                    self.source, _line(key_node), where, "keys must be non-empty names"
                )
            key = str(key_node.value)
            if key in result:
                raise ConfigurationError(
                    self.source, _line(key_node), render_key((*path, key)), f"duplicate key {key!r}"
                )
            self.lines.setdefault((*path, key), _line(key_node))
            result[key] = self.value(value_node, (*path, key))
        return result


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


def _step(value: object, part: str | int) -> object:
    if isinstance(value, Mapping) and isinstance(part, str):
        return value.get(part)
    if isinstance(value, list | tuple) and isinstance(part, int) and 0 <= part < len(value):
        return value[part]
    return None


# -- validating ---------------------------------------------------------------------


def validate(
    model_type: type[M],
    value: object,
    document: Document,
    path_prefix: KeyPath = (),
    *,
    first_index: int = 0,
    context: Mapping[str, object] | None = None,
) -> M:
    """``value`` (found at ``path_prefix`` of ``document``) as a ``model_type``.

    The first problem pydantic finds becomes a :class:`ConfigurationError`; list items are
    numbered from ``first_index`` in the key (the policy counts its rules from 1).
    ``context`` reaches the models' validators (the config file's folder, say).
    """
    try:
        return model_type.model_validate(value, context=dict(context or {}))
    except ValidationError as exc:
        raise _translate(
            model_type, exc.errors(), value, document, path_prefix, first_index
        ) from None


def _translate(
    model_type: type[BaseModel],
    errors: list[ErrorDetails],
    value: object,
    document: Document,
    prefix: KeyPath,
    first_index: int,
) -> ConfigurationError:
    error = errors[0]
    path, tail, found_labels = _locate(error, value)
    labels = {position + len(prefix): label for position, label in found_labels.items()}
    key = render_key((*prefix, *path, *tail), first_index, labels)
    line = document.line((*prefix, *path))
    kind = error["type"]
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tag = str(error.get("ctx", {}).get("discriminator", "")).strip("'")
        choices = _tags(model_type, path)
        if kind == "union_tag_not_found":
            reason = f"missing key {tag!r} (one of: {', '.join(choices)})"
        else:
            found = str(error.get("ctx", {}).get("tag", ""))
            key = render_key((*prefix, *path, tag), first_index, labels)
            line = document.line((*prefix, *path, tag))
            reason = (
                f"unknown {tag} {found!r}{suggest(found, choices)} (one of: {', '.join(choices)})"
            )
        return ConfigurationError(document.source, line, key, reason)
    if kind == "extra_forbidden":
        allowed = _allowed(model_type, tuple(error["loc"][:-1]))
        name = str(path[-1]) if path else ""
        hint = suggest(name, allowed) or f" (allowed: {', '.join(allowed)})"
        reason = f"unknown key {name!r}{hint}"
    elif kind == "missing":
        reason = f"missing required key {str(error['loc'][-1])!r}"
    else:
        reason = reason_of(error)
    return ConfigurationError(document.source, line, key, reason)


def _locate(error: ErrorDetails, value: object) -> tuple[KeyPath, KeyPath, dict[int, str]]:
    """The part of the error's location that exists in the document; the key it names
    past that (a missing key, or a default that failed a cross-field check); and the
    union tags met on the way (``rules[1] (pattern)``), by the position they follow."""
    path: list[str | int] = []
    labels: dict[int, str] = {}
    current = value
    loc = [part for part in error["loc"] if not (isinstance(part, str) and part.startswith("["))]
    tail: KeyPath = ()
    if loc and (error["type"] == "missing" or not _has(_value_at(value, loc[:-1]), loc[-1])):
        tail = (loc.pop(),) if isinstance(loc[-1], str) else ()
    for part in loc:
        if isinstance(part, str) and isinstance(current, Mapping) and part in current:
            path.append(part)
            current = current[part]
        elif isinstance(part, int) and isinstance(current, list | tuple):
            path.append(part)
            current = _step(current, part)
        elif isinstance(part, str):
            labels[len(path)] = part
    return tuple(path), tail, labels


def _value_at(value: object, loc: list[str | int]) -> object:
    """The document value at a pydantic location, skipping union tags."""
    for part in loc:
        if _has(value, part):
            value = _step(value, part)
    return value


def _has(value: object, part: str | int) -> bool:
    if isinstance(value, Mapping):
        return part in value
    return isinstance(value, list | tuple) and isinstance(part, int) and 0 <= part < len(value)


def render_key(
    path: Iterable[str | int], first_index: int = 0, labels: Mapping[int, str] | None = None
) -> str:
    """``upstreams[0].provider``; keys that are not plain names are quoted:
    ``overrides.models['gpt-*']``; ``labels`` (by position) add ``rules[1] (pattern)``."""
    parts = tuple(path)
    labels = labels or {}
    text = ""
    for position, part in enumerate(parts):
        if position in labels:
            text += f" ({labels[position]})"
        if isinstance(part, int):
            text += f"[{part + first_index}]"
        elif part.isidentifier():
            text += f".{part}" if text else part
        else:
            text += f"[{part!r}]"
    if len(parts) in labels:
        text += f" ({labels[len(parts)]})"
    return text


def suggest(word: str, choices: Iterable[str]) -> str:
    """``; did you mean 'x'?`` for a close known name, else the empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def describe(value: object) -> str:
    """A value as an error message shows it: ``string 'eighty'``, ``a list``."""
    if value is None:
        return "null (no value)"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"number {value:g}"
    if isinstance(value, str):
        return f"string {value[:80]!r}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


_EXPECTED = {
    "bool_type": "true or false",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dataclass_type": "a mapping",
    "list_type": "a list",
    "tuple_type": "a list",
}
_BOUNDS = {
    "greater_than": (">", "gt"),
    "greater_than_equal": (">=", "ge"),
    "less_than": ("<", "lt"),
    "less_than_equal": ("<=", "le"),
}


def reason_of(error: ErrorDetails) -> str:
    """One validation error said as the configuration says it (``must be > 0, got -1``)."""
    kind, ctx, given = error["type"], error.get("ctx", {}), error.get("input")
    if kind in _EXPECTED:
        return f"must be {_EXPECTED[kind]}, got {describe(given)}"
    if kind in _BOUNDS:
        sign, name = _BOUNDS[kind]
        return f"must be {sign} {_number(ctx[name])}, got {_number(given)}"
    if kind == "literal_error":
        expected = str(ctx.get("expected", ""))
        names = [part.strip(" '") for part in expected.replace(" or ", ",").split(",")]
        return f"must be {expected}, got {given!r}{suggest(str(given), names)}"
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    if kind == "finite_number":
        return f"must be a finite number, got {given!r}"
    if kind == "string_too_short":
        return "must be a non-empty string"
    if kind == "too_short":
        least = int(ctx.get("min_length", 1))
        return "must be a non-empty list" if least == 1 else f"needs at least {least} items"
    return str(error["msg"])


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else repr(value)


# -- model introspection (for the allowed keys and union tags of an error) ------------


def _allowed(model_type: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    target = _resolve(model_type, loc)
    if isinstance(target, type) and issubclass(target, BaseModel):
        return [info.alias or name for name, info in target.model_fields.items()]
    return []


def _field(model: type[BaseModel], key: str) -> FieldInfo | None:
    """The field ``key`` names in a document: its name, or its alias where it has one."""
    for name, info in model.model_fields.items():
        if (info.alias or name) == key:
            return info
    return None


def _tags(model_type: type[BaseModel], path: KeyPath) -> list[str]:
    target = _resolve(model_type, path)
    members = _union_members(target)
    tags: list[str] = []
    for member in members:
        for info in member.model_fields.values():
            if typing.get_origin(info.annotation) is typing.Literal:
                tags.extend(str(arg) for arg in typing.get_args(info.annotation))
                break
    return tags


def _resolve(annotation: Any, loc: tuple[str | int, ...]) -> Any:
    """The type at ``loc`` inside ``annotation``, following fields, items and unions."""
    current = annotation
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            info = _field(current, str(part))
            if info is None:
                return None
            current = info.annotation
            continue
        members = _union_members(current)
        if members and isinstance(part, str):
            current = next((m for m in members if part in _tags_of(m)), members[0])
            continue
        args = typing.get_args(current)
        if not args:
            return None
        current = args[-1] if typing.get_origin(current) in (dict, Mapping) else args[0]
    return _unwrap(current)


def _unwrap(annotation: Any) -> Any:
    while typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if _is_union(annotation):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _unwrap(members[0])
    return annotation


def _is_union(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return origin is Union or origin is types.UnionType


def _union_members(annotation: Any) -> list[type[BaseModel]]:
    annotation = _unwrap(annotation)
    if typing.get_origin(annotation) is tuple:
        return []
    if not _is_union(annotation):
        return []
    return [
        m
        for m in (_unwrap(a) for a in typing.get_args(annotation))
        if isinstance(m, type) and issubclass(m, BaseModel)
    ]


def _tags_of(member: type[BaseModel]) -> list[str]:
    return [
        str(arg)
        for info in member.model_fields.values()
        if typing.get_origin(info.annotation) is typing.Literal
        for arg in typing.get_args(info.annotation)
    ]
