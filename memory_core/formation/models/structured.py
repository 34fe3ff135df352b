"""Structured output from a language model: ask, parse, validate, retry once, or fail.

Small local models often answer with malformed JSON, prose around it, or values that
break the schema. :func:`structured_call` therefore never trusts an answer: it extracts
one JSON object, checks it against the JSON schema (:func:`validate_schema`, a small
validator for the subset our schemas use), then against the caller's semantic check;
on failure it asks once more, showing the model its answer and the exact error. A second
failure raises :class:`BackendError` carrying the raw output, so the pipeline can
record it and store nothing unvalidated.

A generator that fails (endpoint unreachable, model missing) is not retried here: the
retry exists to correct the model's answer, and a dead endpoint will not recover within
milliseconds; formation retries the whole input later from its durable queue.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, overload

from ..interfaces import BackendError

__all__ = ["TextGenerator", "extract_json", "structured_call", "validate_schema"]

T = TypeVar("T")

Messages = Sequence[Mapping[str, str]]

_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.DOTALL)
_ANNOTATIONS = frozenset({"title", "description", "$schema", "$comment", "default", "examples"})
_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
_SCHEMA_INSTRUCTION = (
    "Answer with one JSON object and nothing else (no prose, no code fence). "
    "It must satisfy this JSON schema:\n{schema}"
)
_RETRY_INSTRUCTION = (
    "Your answer was rejected: {error}\n"
    "Answer again with one corrected JSON object that satisfies the schema, and nothing else."
)


class TextGenerator(Protocol):
    """A chat model that returns raw text; ``schema`` may be used to constrain decoding.

    Implementations raise :class:`BackendError` when they cannot answer at all. The
    schema is also in the prompt (:func:`structured_call` puts it there), so a backend
    that cannot constrain its output may ignore the argument.
    """

    name: str

    def generate(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> str: ...


@overload
def structured_call(
    generator: TextGenerator, messages: Messages, schema: dict[str, Any]
) -> Any: ...


@overload
def structured_call(
    generator: TextGenerator,
    messages: Messages,
    schema: dict[str, Any],
    *,
    validate: Callable[[Any], T],
) -> T: ...


def structured_call(
    generator: TextGenerator,
    messages: Messages,
    schema: dict[str, Any],
    *,
    validate: Callable[[Any], Any] | None = None,
) -> Any:
    """The model's answer as validated data, after at most one corrective retry.

    ``validate`` turns the schema-valid JSON into the caller's type and raises
    ``ValueError`` to reject it (the message is shown to the model on the retry).
    Raises :class:`BackendError` when the generator fails or both answers are invalid.
    """
    conversation = _with_schema(messages, schema)
    raw = _generate(generator, conversation, schema)
    try:
        return _accept(raw, schema, validate)
    except ValueError as exc:
        error = str(exc)
    conversation += [
        {"role": "assistant", "content": raw or "(empty answer)"},
        {"role": "user", "content": _RETRY_INSTRUCTION.format(error=error)},
    ]
    raw = _generate(generator, conversation, schema)
    try:
        return _accept(raw, schema, validate)
    except ValueError as exc:
        raise BackendError(
            f"{generator.name}: invalid structured output after one retry: {exc}", raw=raw
        ) from exc


def extract_json(text: str) -> Any:
    """The JSON object in ``text``: the whole text, a fenced block, or one object in prose.

    Raises ``ValueError`` naming the JSON syntax error when no object can be read.
    """
    body = text.strip()
    fence = _FENCE.search(body)
    if fence is not None:
        body = fence.group(1).strip()
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        first_error = exc
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", body):
        try:
            return decoder.raw_decode(body, match.start())[0]
        except json.JSONDecodeError:
            continue
    raise ValueError(f"the answer is not a JSON object ({first_error})")


def validate_schema(value: Any, schema: Mapping[str, Any], path: str = "$") -> None:
    """Raise ``ValueError`` (with the JSON path) when ``value`` breaks ``schema``.

    Supports ``type`` (a name or a list of names), ``enum``, ``properties``,
    ``required``, ``additionalProperties: false``, ``items``, ``minItems``,
    ``maxItems``, ``minimum``, ``maximum``, ``minLength`` and ``pattern``; any other
    validation keyword is a programming error (``TypeError``), so a schema can never
    be silently under-checked.
    """
    unknown = set(schema) - _ANNOTATIONS - set(_CHECKS)
    if unknown:
        raise TypeError(f"unsupported JSON schema keywords: {sorted(unknown)}")
    for keyword, check in _CHECKS.items():
        if keyword in schema:
            check(value, schema, path)


def _with_schema(messages: Messages, schema: dict[str, Any]) -> list[dict[str, str]]:
    """``messages`` with the schema instruction merged into the (first) system message."""
    instruction = _SCHEMA_INSTRUCTION.format(schema=json.dumps(schema, ensure_ascii=False))
    copied = [dict(message) for message in messages]
    if copied and copied[0].get("role") == "system":
        copied[0]["content"] = f"{copied[0].get('content', '')}\n\n{instruction}"
        return copied
    return [{"role": "system", "content": instruction}, *copied]


def _generate(
    generator: TextGenerator, messages: list[dict[str, str]], schema: dict[str, Any]
) -> str:
    try:
        return generator.generate(list(messages), schema)
    except BackendError:
        raise
    except Exception as exc:
        raise BackendError(
            f"{generator.name}: generation failed: {type(exc).__name__}: {exc}"
        ) from exc


def _accept(raw: str, schema: Mapping[str, Any], validate: Callable[[Any], Any] | None) -> Any:
    value = extract_json(raw)
    validate_schema(value, schema)
    return value if validate is None else validate(value)


def _show(value: Any) -> str:
    shown = json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _check_type(value: Any, schema: Mapping[str, Any], path: str) -> None:
    names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if not any(_TYPES[name](value) for name in names):
        expected = " or ".join(names)
        raise ValueError(f"{path}: expected {expected}, got {_show(value)}")


def _check_enum(value: Any, schema: Mapping[str, Any], path: str) -> None:
    if value not in schema["enum"]:
        raise ValueError(f"{path}: {_show(value)} is not one of {_show(schema['enum'])}")


def _check_properties(value: Any, schema: Mapping[str, Any], path: str) -> None:
    if isinstance(value, dict):
        for key, sub in schema["properties"].items():
            if key in value:
                validate_schema(value[key], sub, f"{path}.{key}")


def _check_required(value: Any, schema: Mapping[str, Any], path: str) -> None:
    if isinstance(value, dict):
        missing = [key for key in schema["required"] if key not in value]
        if missing:
            raise ValueError(f"{path}: missing required field(s) {', '.join(missing)}")


def _check_additional(value: Any, schema: Mapping[str, Any], path: str) -> None:
    if schema["additionalProperties"] is not False:
        raise TypeError("additionalProperties is supported only as false")
    if isinstance(value, dict):
        extra = sorted(set(value) - set(schema.get("properties", {})))
        if extra:
            raise ValueError(f"{path}: unexpected field(s) {', '.join(extra)}")


def _check_items(value: Any, schema: Mapping[str, Any], path: str) -> None:
    if isinstance(value, list):
        for index, item in enumerate(value):
            validate_schema(item, schema["items"], f"{path}[{index}]")


def _check_min_items(value: Any, schema: Mapping[str, Any], path: str) -> None:
    if isinstance(value, list) and len(value) < schema["minItems"]:
        raise ValueError(f"{path}: needs at least {schema['minItems']} item(s)")


def _check_max_items(value: Any, schema: Mapping[str, Any], path: str) -> None:
    if isinstance(value, list) and len(value) > schema["maxItems"]:
        raise ValueError(f"{path}: allows at most {schema['maxItems']} item(s)")


def _is_number(value: Any) -> bool:
    return _TYPES["number"](value)


def _check_minimum(value: Any, schema: Mapping[str, Any], path: str) -> None:
    if _is_number(value) and value < schema["minimum"]:
        raise ValueError(f"{path}: {_show(value)} is less than the minimum {schema['minimum']}")


def _check_maximum(value: Any, schema: Mapping[str, Any], path: str) -> None:
    if _is_number(value) and value > schema["maximum"]:
        raise ValueError(f"{path}: {_show(value)} is greater than the maximum {schema['maximum']}")


def _check_min_length(value: Any, schema: Mapping[str, Any], path: str) -> None:
    if isinstance(value, str) and len(value) < schema["minLength"]:
        raise ValueError(f"{path}: needs at least {schema['minLength']} character(s)")


def _check_pattern(value: Any, schema: Mapping[str, Any], path: str) -> None:
    if isinstance(value, str) and re.search(schema["pattern"], value) is None:
        raise ValueError(f"{path}: {_show(value)} does not match {schema['pattern']}")


_CHECKS: dict[str, Callable[[Any, Mapping[str, Any], str], None]] = {
    "type": _check_type,
    "enum": _check_enum,
    "required": _check_required,
    "additionalProperties": _check_additional,
    "properties": _check_properties,
    "items": _check_items,
    "minItems": _check_min_items,
    "maxItems": _check_max_items,
    "minimum": _check_minimum,
    "maximum": _check_maximum,
    "minLength": _check_min_length,
    "pattern": _check_pattern,
}
