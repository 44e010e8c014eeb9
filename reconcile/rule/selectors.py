"""Kubernetes label selectors, parsed and matched on the client as k8s.io/apimachinery/pkg/labels
does: the grammar and why it is not the server's, docs/design.md "Scopes, selectors and a cap".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from reconcile.rule.names import label_value_problem, qualified_name_problem


class SelectorError(ValueError):
    """A selector that Kubernetes would refuse; the message says where."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # exists, !exists, =, !=, in, notin, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        match self.op:
            case "exists" | "!exists":
                return (value is not None) is (self.op == "exists")
            case "=" | "in":
                return value is not None and value in self.values
            case "!=" | "notin":
                return value is None or value not in self.values
            case "gt" | "lt":  # the label must be a whole number on the right side
                try:
                    number, bound = int(value), int(self.values[0])  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    return False
                return number > bound if self.op == "gt" else number < bound
        raise AssertionError(self.op)


@dataclass(frozen=True)
class Selector:
    """A conjunction of requirements; the empty selector matches every node."""

    requirements: tuple[Requirement, ...] = ()
    text: str = field(default="", compare=False)  # as given, for messages

    def matches(self, labels: Mapping[str, str]) -> bool:
        # The empty selector (the default) first: it is asked about every node, twice a run.
        return not self.requirements or all(r.matches(labels) for r in self.requirements)

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(r.key for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)


EVERYTHING = Selector()

_SET_RE = re.compile(r"^\s*(!?)\s*([^\s!=<>,()]+)\s+(in|notin)\s*\(([^()]*)\)\s*$")
_OP_RE = re.compile(r"^\s*([^\s!=<>,()]+)\s*(==|=|!=|>|<)\s*([^\s!=<>,()]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([^\s!=<>,()]+)\s*$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside `( ... )`."""
    depth, parts = 0, [""]
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            raise SelectorError("unbalanced ')'")
        if ch == "," and depth == 0:
            parts.append("")
        else:
            parts[-1] += ch
    if depth:
        raise SelectorError("unbalanced '('")
    return parts


def _check(what: str, text: str) -> None:
    problem = qualified_name_problem(text) if what == "key" else label_value_problem(text)
    if problem:
        raise SelectorError(f"invalid label {what} {text!r}: {problem}")


def _parse_requirement(text: str) -> Requirement:
    if m := _SET_RE.match(text):
        if m.group(1):
            raise SelectorError(f"'!' cannot be combined with {m.group(3)!r} in {text.strip()!r}")
        key, op = m.group(2), m.group(3)
        _check("key", key)
        values = tuple(v.strip() for v in m.group(4).split(","))
        if values == ("",):
            raise SelectorError(f"{key} {op} (...) needs at least one value")
        for v in values:
            _check("value", v)
        return Requirement(key, op, tuple(sorted(set(values))))
    if m := _OP_RE.match(text):
        key, op, value = m.groups()
        _check("key", key)
        if op in (">", "<"):
            if not re.fullmatch(r"-?\d+", value):
                raise SelectorError(f"{key}{op}{value}: '{op}' needs an integer value")
            return Requirement(key, "gt" if op == ">" else "lt", (value,))
        _check("value", value)
        return Requirement(key, "!=" if op == "!=" else "=", (value,))
    if m := _EXISTS_RE.match(text):
        key = m.group(2)
        _check("key", key)
        return Requirement(key, "!exists" if m.group(1) else "exists")
    raise SelectorError(f"cannot parse requirement {text.strip()!r}")


def parse_selector(text: str | None) -> Selector:
    """Parse a label selector string; '' or None selects everything."""
    if text is None or not text.strip():
        return EVERYTHING
    requirements = []
    for part in _split_top_level(text):
        if not part.strip():
            raise SelectorError(f"empty requirement in {text!r}")
        requirements.append(_parse_requirement(part))
    return Selector(tuple(requirements), text.strip())
