"""Reading a policy from YAML, with errors that point at the file and line.

The format (``policies/default.yaml`` is the commented reference)::

    enabled: true            # master switch for automatic retrieval (the header still works)
    budget_tokens: 600       # max tokens of injected memory text (>= 1)
    max_fragments: 8         # max fragments retrieved (>= 1)
    cooldown:                # after a retrieval, suppress rule-triggered retrievals
      turns: 0               #   for this many following user turns (>= 0)
      seconds: 0             #   and/or for this many seconds (>= 0)
    rules:                   # in order; the first that matches triggers retrieval
      - type: first_turn                 # exactly one user message in the request
      - type: pattern                    # case-insensitive regex search, latest user message
        patterns: ["\\bremember\\b", "last time"]
      - type: mentions_entity            # latest user message names something memory knows
      - type: every_n_turns              # user_turns % n == 0
        n: 3
      - type: topic_shift                # latest message shares few words with recent ones
        threshold: 0.2                   #   fires below this share, 0 < threshold <= 1
        window: 3                        #   compared with this many earlier user turns
        min_words: 3                     #   shorter messages never fire
      - type: always
    overrides:
      models:                # fnmatch glob on the model name, case-insensitive; first wins
        "gpt-4o-mini*": {budget_tokens: 300}
      tenants:               # exact tenant name; applied after the model override
        alice: {enabled: false}

Any rule may carry ``name:`` (shown in decision reasons instead of its type), and a rule
with no parameters may be written as a bare string (``- always``). An override may set
any top-level key except ``overrides``; a key it sets replaces the value below entirely.

Absent keys take their defaults (enabled, 600 tokens, 8 fragments, no cooldown, and the
rules first_turn, pattern with `DEFAULT_PATTERNS`, mentions_entity); an empty document is
the default policy. A key written with no value is an empty section for ``cooldown`` and
``overrides`` (and their children) and an error elsewhere; ``rules: []`` means no rule.

Validation is strict: unknown keys, duplicate keys, wrong types, negative or zero counts,
unknown rule types, bad or empty-matching regexes and broken YAML all raise `PolicyError`
with the file, the 1-based line of the offending node and the path of the key (list items
counted from 1, like rules in decision reasons). The document is composed, not loaded,
so every node keeps its position; that is why this module walks YAML nodes by hand.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import NoReturn, TypedDict, TypeGuard

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from policies.errors import PolicyError
from policies.policy import Cooldown, Override, Policy, Settings
from policies.rules import (
    RULE_TYPES,
    AlwaysRule,
    EveryNTurnsRule,
    FirstTurnRule,
    MentionsEntityRule,
    PatternRule,
    Rule,
    TopicShiftRule,
)

__all__ = ["load_policy", "parse_policy"]

_SETTING_KEYS = ("enabled", "budget_tokens", "max_fragments", "cooldown", "rules")
_TOP_KEYS = (*_SETTING_KEYS, "overrides")
_RULE_PARAMS: dict[str, tuple[str, ...]] = {
    "pattern": ("patterns",),
    "every_n_turns": ("n",),
    "topic_shift": ("threshold", "window", "min_words"),
}
_TAG = "tag:yaml.org,2002:"


def parse_policy(text: str, source: str = "<inline>", *, root_key: str | None = None) -> Policy:
    """Parse policy YAML `text`; `source` names it in errors and in `Policy.source`.

    With `root_key`, the policy is the value of that top-level key of a larger document
    (the proxy's config.yaml); line numbers stay those of the whole file, and a missing
    or empty key gives the default policy.
    """
    return _Parser(source).document(text, root_key)


def load_policy(path: str, *, root_key: str | None = None) -> Policy:
    """Read and parse the policy file at `path` (UTF-8); unreadable files are PolicyErrors."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(path, None, f"cannot read policy file: {exc}") from exc
    return parse_policy(text, path, root_key=root_key)


class _SettingFields(TypedDict, total=False):
    """The setting keys one mapping sets (the policy's top level or one override)."""

    enabled: bool
    budget_tokens: int
    max_fragments: int
    cooldown: Cooldown
    rules: tuple[Rule, ...]


class _Parser:
    """Walks composed YAML nodes into policy values; raises PolicyError at the first problem."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._constructor = SafeConstructor()

    def document(self, text: str, root_key: str | None) -> Policy:
        root = self._compose(text)
        if root is not None and root_key is not None:
            root = self._child(root, root_key)
        if root is None or _is_null(root):
            return Policy(source=self.source)
        return self._policy(root, root_key or "")

    def _compose(self, text: str) -> Node | None:
        try:
            return yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else None
            problem = "; ".join(p for p in (exc.context, exc.problem) if p)
            raise PolicyError(self.source, line, f"invalid YAML: {problem}") from exc
        except yaml.YAMLError as exc:
            raise PolicyError(self.source, None, f"invalid YAML: {exc}") from exc

    def _child(self, root: Node, key: str) -> Node | None:
        """The value of `key` in the enclosing document; other keys are not ours to check."""
        if _is_null(root):
            return None
        if not isinstance(root, MappingNode):
            self._fail(root, f"expected a mapping with key {key!r}, got {self._describe(root)}")
        pairs: list[tuple[Node, Node]] = root.value
        for key_node, value in pairs:
            if isinstance(key_node, ScalarNode) and key_node.value == key:
                return value
        return None

    # -- sections -------------------------------------------------------------------

    def _policy(self, node: Node, path: str) -> Policy:
        fields, overrides = self._settings(node, path, allowed=_TOP_KEYS)
        models, tenants = self._overrides(overrides, _join(path, "overrides"))
        return Policy(source=self.source, base=Settings(**fields), models=models, tenants=tenants)

    def _settings(
        self, node: Node, path: str, allowed: tuple[str, ...]
    ) -> tuple[_SettingFields, Node | None]:
        """Parse the setting keys of a mapping; also return its ``overrides`` node, if any."""
        fields: _SettingFields = {}
        overrides: Node | None = None
        for name, _key_node, value in self._items(node, path, allowed):
            sub = _join(path, name)
            if name == "enabled":
                fields["enabled"] = self._bool(value, sub)
            elif name == "budget_tokens":
                fields["budget_tokens"] = self._int(value, sub, minimum=1)
            elif name == "max_fragments":
                fields["max_fragments"] = self._int(value, sub, minimum=1)
            elif name == "cooldown":
                fields["cooldown"] = self._cooldown(value, sub)
            elif name == "rules":
                fields["rules"] = self._rules(value, sub)
            else:
                overrides = value
        return fields, overrides

    def _overrides(
        self, node: Node | None, path: str
    ) -> tuple[tuple[Override, ...], tuple[Override, ...]]:
        models: list[Override] = []
        tenants: list[Override] = []
        if node is None:
            return (), ()
        for name, _key_node, value in self._items(node, path, allowed=("models", "tenants")):
            kind, target = ("model", models) if name == "models" else ("tenant", tenants)
            section = _join(path, name)
            for key, key_node, body in self._items(value, section, allowed=None):
                fields, _ = self._settings(body, f"{section}['{key}']", allowed=_SETTING_KEYS)
                label = f"{kind} '{key}'"
                target.append(Override(key=key, label=label, line=_line(key_node), **fields))
        return tuple(models), tuple(tenants)

    def _cooldown(self, node: Node, path: str) -> Cooldown:
        turns, seconds = 0, 0.0
        for name, _key_node, value in self._items(node, path, allowed=("turns", "seconds")):
            if name == "turns":
                turns = self._int(value, _join(path, name), minimum=0)
            else:
                seconds = self._number(value, _join(path, name), minimum=0)
        return Cooldown(turns=turns, seconds=seconds)

    # -- rules ----------------------------------------------------------------------

    def _rules(self, node: Node, path: str) -> tuple[Rule, ...]:
        if not isinstance(node, SequenceNode):
            self._fail(
                node,
                f"{path}: expected a list of rules (use [] for none), got {self._describe(node)}",
            )
        return tuple(
            self._rule(item, f"{path}[{index}]") for index, item in enumerate(node.value, start=1)
        )

    def _rule(self, node: Node, path: str) -> Rule:
        if _has_tag(node, "str"):
            return self._make_rule(str(node.value), {}, node, path)
        if not isinstance(node, MappingNode):
            self._fail(
                node,
                f"{path}: expected a rule (a mapping with 'type'), got {self._describe(node)}",
            )
        fields = {name: value for name, _key_node, value in self._items(node, path, None)}
        if "type" not in fields:
            self._fail(node, f"{path}: missing key 'type' (one of: {', '.join(RULE_TYPES)})")
        rule_type = self._str(fields.pop("type"), _join(path, "type"))
        return self._make_rule(rule_type, fields, node, path)

    def _make_rule(self, rule_type: str, fields: dict[str, Node], node: Node, path: str) -> Rule:
        if rule_type not in RULE_TYPES:
            self._fail(
                node,
                f"{path}: unknown rule type {rule_type!r}{_suggest(rule_type, RULE_TYPES)} "
                f"(one of: {', '.join(RULE_TYPES)})",
            )
        path = f"{path} ({rule_type})"
        allowed = ("name", *_RULE_PARAMS.get(rule_type, ()))
        for key, value in fields.items():
            if key not in allowed:
                self._fail(
                    value,
                    f"{path}: unknown key {key!r}{_suggest(key, allowed)} "
                    f"(allowed: type, {', '.join(allowed)})",
                )
        name = self._str(fields["name"], _join(path, "name")) if "name" in fields else None
        line = _line(node)
        if rule_type == "pattern":
            patterns = self._patterns(self._required(fields, "patterns", node, path), path)
            return PatternRule(name=name, line=line, patterns=patterns)
        if rule_type == "every_n_turns":
            n = self._int(self._required(fields, "n", node, path), _join(path, "n"), minimum=1)
            return EveryNTurnsRule(name=name, line=line, n=n)
        if rule_type == "topic_shift":
            return self._topic_shift(fields, path, name, line)
        if rule_type == "first_turn":
            return FirstTurnRule(name=name, line=line)
        if rule_type == "mentions_entity":
            return MentionsEntityRule(name=name, line=line)
        return AlwaysRule(name=name, line=line)

    def _topic_shift(
        self, fields: dict[str, Node], path: str, name: str | None, line: int
    ) -> TopicShiftRule:
        rule = TopicShiftRule(name=name, line=line)
        if "threshold" in fields:
            node = fields["threshold"]
            threshold = self._number(node, _join(path, "threshold"), minimum=0)
            if threshold == 0 or threshold > 1:
                self._fail(node, f"{path}.threshold: must be > 0 and <= 1, got {threshold:g}")
            rule = replace(rule, threshold=threshold)
        if "window" in fields:
            rule = replace(rule, window=self._int(fields["window"], f"{path}.window", minimum=1))
        if "min_words" in fields:
            min_words = self._int(fields["min_words"], f"{path}.min_words", minimum=1)
            rule = replace(rule, min_words=min_words)
        return rule

    def _required(self, fields: dict[str, Node], key: str, node: Node, path: str) -> Node:
        if key not in fields:
            self._fail(node, f"{path}: missing key {key!r}")
        return fields[key]

    def _patterns(self, node: Node, path: str) -> tuple[re.Pattern[str], ...]:
        path = _join(path, "patterns")
        if not isinstance(node, SequenceNode) or not node.value:
            self._fail(
                node,
                f"{path}: expected a non-empty list of regular expressions, "
                f"got {self._describe(node)}",
            )
        return tuple(
            self._regex(item, f"{path}[{index}]") for index, item in enumerate(node.value, start=1)
        )

    def _regex(self, node: Node, path: str) -> re.Pattern[str]:
        text = self._str(node, path)
        try:
            pattern = re.compile(text, re.IGNORECASE)
        except re.error as exc:
            self._fail(node, f"{path}: invalid regular expression {text!r}: {exc}")
        if pattern.search(""):
            self._fail(
                node,
                f"{path}: regular expression {text!r} matches empty text, "
                "so it would match every message",
            )
        return pattern

    # -- scalars and mappings -------------------------------------------------------

    def _items(
        self, node: Node, path: str, allowed: tuple[str, ...] | None
    ) -> Iterator[tuple[str, Node, Node]]:
        """Yield (key, key node, value node) of a mapping; null counts as an empty mapping."""
        if _is_null(node):
            return
        if not isinstance(node, MappingNode):
            what = f"{path}: expected a mapping" if path else "the policy must be a mapping"
            self._fail(node, f"{what}, got {self._describe(node)}")
        seen: set[str] = set()
        for key_node, value in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.value == "":
                self._fail(key_node, f"{path or 'policy'}: keys must be non-empty names")
            key = key_node.value
            where = f"{path}: " if path else ""
            if key in seen:
                self._fail(key_node, f"{where}duplicate key {key!r}")
            if allowed is not None and key not in allowed:
                self._fail(
                    key_node,
                    f"{where}unknown key {key!r}{_suggest(key, allowed)} "
                    f"(allowed: {', '.join(allowed)})",
                )
            seen.add(key)
            yield key, key_node, value

    def _bool(self, node: Node, path: str) -> bool:
        if not _has_tag(node, "bool"):
            self._fail(node, f"{path}: expected true or false, got {self._describe(node)}")
        return bool(self._constructor.construct_yaml_bool(node))

    def _int(self, node: Node, path: str, *, minimum: int) -> int:
        if not _has_tag(node, "int"):
            self._fail(node, f"{path}: expected an integer, got {self._describe(node)}")
        value = self._construct_int(node, path)
        if value < minimum:
            self._fail(node, f"{path}: must be >= {minimum}, got {value}")
        return value

    def _number(self, node: Node, path: str, *, minimum: float) -> float:
        if _has_tag(node, "int"):
            value = float(self._construct_int(node, path))
        elif _has_tag(node, "float"):
            value = float(self._constructor.construct_yaml_float(node))
        else:
            self._fail(node, f"{path}: expected a number, got {self._describe(node)}")
        if not math.isfinite(value) or value < minimum:
            self._fail(node, f"{path}: must be a finite number >= {minimum:g}, got {value:g}")
        return value

    def _str(self, node: Node, path: str) -> str:
        if not _has_tag(node, "str") or not node.value:
            self._fail(node, f"{path}: expected a non-empty string, got {self._describe(node)}")
        return str(node.value)

    def _construct_int(self, node: ScalarNode, path: str) -> int:
        try:
            return int(self._constructor.construct_yaml_int(node))
        except ValueError:
            self._fail(node, f"{path}: expected an integer, got {node.value!r}")

    def _describe(self, node: Node) -> str:
        if isinstance(node, MappingNode):
            return "a mapping"
        if isinstance(node, SequenceNode):
            return "a list"
        kinds = {
            "null": "null",
            "bool": "boolean",
            "int": "integer",
            "float": "number",
            "str": "string",
        }
        kind = kinds.get(str(node.tag).removeprefix(_TAG), f"value tagged {node.tag}")
        return "null (no value)" if kind == "null" else f"{kind} {node.value!r}"

    def _fail(self, node: Node, message: str) -> NoReturn:
        raise PolicyError(self.source, _line(node), message)


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


def _has_tag(node: Node, kind: str) -> TypeGuard[ScalarNode]:
    return isinstance(node, ScalarNode) and node.tag == _TAG + kind


def _is_null(node: Node) -> bool:
    return _has_tag(node, "null")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _suggest(word: str, choices: Iterable[str]) -> str:
    """``; did you mean 'x'?`` for a close known name, else the empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
