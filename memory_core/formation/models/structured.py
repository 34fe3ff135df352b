"""Structured output from a language model: ask, parse, validate, retry once, or fail.

Small local models often answer with malformed JSON, prose around it, or values that
break the schema. :func:`structured_call` therefore never trusts an answer: it extracts
one JSON object, validates it as the caller's pydantic model (an :class:`Answer`: strict
types, no unknown fields), then runs the caller's semantic check; on failure it asks once
more, showing the model its answer and the exact error (``$.boundaries[1]: 7 is greater
than the maximum 2``). A second failure raises :class:`BackendError` carrying the raw
output, so the pipeline can record it and store nothing unvalidated.

The JSON schema the model sees (in the prompt, and for constrained decoding where the
backend supports it) is the answer model's own (:func:`schema_of`): the contract is
written once, as the model.

A generator that fails (endpoint unreachable, model missing) is not retried here: the
retry exists to correct the model's answer, and a dead endpoint will not recover within
milliseconds; formation retries the whole input later from its durable queue.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, overload

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from ..interfaces import BackendError

__all__ = ["Answer", "TextGenerator", "extract_json", "schema_of", "structured_call"]

A = TypeVar("A", bound="Answer")
T = TypeVar("T")
Json = dict[str, Any]

Messages = Sequence[Mapping[str, str]]

_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.DOTALL)
_SCHEMA_INSTRUCTION = (
    "Answer with one JSON object and nothing else (no prose, no code fence). "
    "It must satisfy this JSON schema:\n{schema}"
)
_RETRY_INSTRUCTION = (
    "Your answer was rejected: {error}\n"
    "Answer again with one corrected JSON object that satisfies the schema, and nothing else."
)
_JSON_TYPES = {
    "array": "array",
    "object": "object",
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
}


class Answer(BaseModel):
    """Base of what a model is asked to answer: JSON types taken strictly (``"1"`` is no
    integer, ``1.5`` no integer, ``"yes"`` no boolean), unknown fields refused."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class TextGenerator(Protocol):
    """A chat model that returns raw text; ``schema`` may be used to constrain decoding.

    Implementations raise :class:`BackendError` when they cannot answer at all. The
    schema is also in the prompt (:func:`structured_call` puts it there), so a backend
    that cannot constrain its output may ignore the argument.
    """

    name: str

    def generate(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> str: ...


@overload
def structured_call(generator: TextGenerator, messages: Messages, answer: type[A]) -> A: ...


@overload
def structured_call(
    generator: TextGenerator,
    messages: Messages,
    answer: type[A],
    *,
    validate: Callable[[A], T],
) -> T: ...


def structured_call(
    generator: TextGenerator,
    messages: Messages,
    answer: type[A],
    *,
    validate: Callable[[A], Any] | None = None,
) -> Any:
    """The model's answer as a validated ``answer``, after at most one corrective retry.

    ``validate`` turns the valid answer into the caller's type and raises ``ValueError``
    to reject it (the message is shown to the model on the retry). Raises
    :class:`BackendError` when the generator fails or both answers are invalid.
    """
    schema = schema_of(answer)
    conversation = _with_schema(messages, schema)
    raw = _generate(generator, conversation, schema)
    try:
        return _accept(raw, answer, schema, validate)
    except ValueError as exc:
        error = str(exc)
    conversation += [
        {"role": "assistant", "content": raw or "(empty answer)"},
        {"role": "user", "content": _RETRY_INSTRUCTION.format(error=error)},
    ]
    raw = _generate(generator, conversation, schema)
    try:
        return _accept(raw, answer, schema, validate)
    except ValueError as exc:
        raise BackendError(
            f"{generator.name}: invalid structured output after one retry: {exc}", raw=raw
        ) from exc


def schema_of(answer: type[BaseModel]) -> Json:
    """``answer``'s JSON schema as a model reads it: nested models written in place (no
    ``$ref``), titles left out but the answer's own (it names a constrained-decoding
    request; a small model follows a short, flat schema better)."""
    schema = answer.model_json_schema()
    definitions = schema.pop("$defs", {})
    inlined = _inline(schema, definitions)
    assert isinstance(inlined, dict)
    return {"title": schema["title"], **inlined} if "title" in schema else inlined


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


def _inline(node: Any, definitions: Mapping[str, Any]) -> Any:
    if isinstance(node, list):
        return [_inline(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        return _inline(definitions[ref.rsplit("/", 1)[-1]], definitions)
    return {k: _inline(v, definitions) for k, v in node.items() if k != "title"}


def _with_schema(messages: Messages, schema: Json) -> list[dict[str, str]]:
    """``messages`` with the schema instruction merged into the (first) system message."""
    instruction = _SCHEMA_INSTRUCTION.format(schema=json.dumps(schema, ensure_ascii=False))
    copied = [dict(message) for message in messages]
    if copied and copied[0].get("role") == "system":
        copied[0]["content"] = f"{copied[0].get('content', '')}\n\n{instruction}"
        return copied
    return [{"role": "system", "content": instruction}, *copied]


def _generate(generator: TextGenerator, messages: list[dict[str, str]], schema: Json) -> str:
    try:
        return generator.generate(list(messages), schema)
    except BackendError:
        raise
    except Exception as exc:
        raise BackendError(
            f"{generator.name}: generation failed: {type(exc).__name__}: {exc}"
        ) from exc


def _accept(
    raw: str, answer: type[A], schema: Json, validate: Callable[[A], Any] | None
) -> Any:
    value = extract_json(raw)
    if not isinstance(value, dict):
        raise ValueError(f"$: expected object, got {_show(value)}")
    try:
        parsed = answer.model_validate(value)
    except ValidationError as exc:
        raise ValueError(_first_problem(exc.errors(include_url=False), schema)) from None
    return parsed if validate is None else validate(parsed)


# -- what the model is told is wrong ----------------------------------------------------


def _first_problem(errors: list[ErrorDetails], schema: Json) -> str:
    """The problem a reader meets first, said plainly: an object's missing fields, then
    its unknown ones, then its values' own problems, shallowest first."""
    ranked = sorted(
        range(len(errors)),
        key=lambda i: (len(errors[i]["loc"]) - 1, _RANK.get(errors[i]["type"], 2), i),
    )
    first = errors[ranked[0]]
    loc, kind = first["loc"], first["type"]
    if kind in ("missing", "extra_forbidden"):
        parent = loc[:-1]
        names = [str(e["loc"][-1]) for e in errors if e["type"] == kind and e["loc"][:-1] == parent]
        said = "missing required" if kind == "missing" else "unexpected"
        return f"{_path(parent)}: {said} field(s) {', '.join(names)}"
    return f"{_path(loc)}: {_reason(first, _schema_at(schema, loc))}"


_RANK = {"missing": 0, "extra_forbidden": 1}


def _reason(error: ErrorDetails, node: Json) -> str:
    kind, ctx, value = error["type"], error.get("ctx", {}), error.get("input")
    if kind in ("greater_than_equal", "greater_than"):
        return f"{_show(value)} is less than the minimum {_number(ctx.get('ge', ctx.get('gt')))}"
    if kind in ("less_than_equal", "less_than"):
        return f"{_show(value)} is greater than the maximum {_number(ctx.get('le', ctx.get('lt')))}"
    if kind == "string_too_short":
        return f"needs at least {ctx['min_length']} character(s)"
    if kind == "string_pattern_mismatch":
        return f"{_show(value)} does not match {ctx['pattern']}"
    if kind == "too_short":
        return f"needs at least {ctx['min_length']} item(s)"
    if kind == "too_long":
        return f"allows at most {ctx['max_length']} item(s)"
    if kind == "literal_error":
        return f"{_show(value)} is not one of {_show(node.get('enum'))}"
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    expected = _expected(node)
    if expected:
        return f"expected {expected}, got {_show(value)}"
    return str(error["msg"])


def _expected(node: Json) -> str:
    """The JSON type(s) ``node`` allows, as ``string or null``."""
    options = node.get("anyOf") or [node]
    names = [
        _JSON_TYPES[o["type"]]
        for o in options
        if isinstance(o, dict) and o.get("type") in _JSON_TYPES
    ]
    return " or ".join(dict.fromkeys(names))


def _schema_at(schema: Json, loc: tuple[int | str, ...]) -> Json:
    """The schema of the value at ``loc`` (empty when the walk leaves the schema)."""
    node: Any = schema
    for part in loc:
        if not isinstance(node, dict):
            return {}
        if isinstance(part, int):
            node = node.get("items", {})
        else:
            node = node.get("properties", {}).get(part, {})
    return node if isinstance(node, dict) else {}


def _path(loc: Sequence[int | str]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _show(value: Any) -> str:
    shown = json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= 80 else shown[:77] + "..."
