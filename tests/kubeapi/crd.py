"""Custom resources as apiextensions-apiserver 1.32 handles them: pruning, defaulting, validation.

A CRD's structural schema is modelled here only as far as a test needs it (see karpenter.py):
a `Schema` node with `preserve=True` stands for x-kubernetes-preserve-unknown-fields, which is
how the parts this model leaves out are kept as they come. Checked against the source (tag
v0.32.9 of k8s.io/apiextensions-apiserver, its kube-openapi pin 32ad38e42d3f, apimachinery
v0.32.9; read via the fetch tool):

- pruning (schema/pruning/algorithm.go): a field the schema does not know is dropped and its
  path recorded as `spec.a[0].b`; the request handlers then (fieldValidation, handlers/rest.go:
  empty means Warn) answer a `Warning: 299 - "unknown field \\"<path>\\""` header (Warn), a 400
  (create/update, `strict decoding error: unknown field "<path>"`) or a 422 `patch` field
  error (patch.go) for Strict, or say nothing (Ignore).
- defaulting (schema/defaulting/algorithm.go): after pruning, a missing field, or a null one
  that is not nullable, takes the schema default, recursively (so a defaulted object gets its
  own fields' defaults); a non-nullable null without a default is dropped (prunenulls.go).
- validation (apiserver/validation/validation.go kubeOpenAPIResultToFieldErrors and
  kube-openapi errors/schema.go): paths like `spec.a[0].b`; pattern ->
  `Invalid value: "x": <path> in body should match '<pattern>'`; enum -> `Unsupported value`;
  maxItems -> `Too many: 51: must have at most 50 items`; type ->
  `Invalid value: "integer": <path> in body must be of type string: "integer"`; required ->
  `Required value`. Then list-type=set duplicates (schema/listtype: `Duplicate value`, once per
  value at its second index), then the x-kubernetes-validations rules (schema/cel:
  `Invalid value: "<type>": <message>` at the rule's node) unless an earlier error blocks them
  (registry/customresource/strategy.go hasBlockingErr: NotSupported, Required, TooMany,
  TypeInvalid), which adds `<nil>: Invalid value: "null": some validation rules were not
  checked because the object was invalid; correct the existing errors to complete validation`.

Not modelled: validation ratcheting (CRDValidationRatcheting: unchanged invalid values pass on
update; the store here only ever holds valid objects), nullable fields, numbers' bounds.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.kubeapi.statuses import (
    FieldError,
    go_quote,
    invalid_field,
    not_supported_field,
    required_field,
)

_BLOCKING_TYPE = "FieldValueTypeInvalid"
_BLOCKING = {
    "FieldValueNotSupported",
    "FieldValueRequired",
    "FieldValueTooLong",
    "FieldValueTooMany",
    _BLOCKING_TYPE,
}
UNCHECKED_RULES = (
    "some validation rules were not checked because the object was invalid; correct the existing "
    "errors to complete validation"
)


@dataclass(frozen=True)
class Rule:
    """One x-kubernetes-validations entry: `cel` for the reader, `check` what it computes."""

    cel: str
    message: str
    check: Callable[[Any], bool]


@dataclass(frozen=True)
class Schema:
    """A node of a structural schema (only the keywords the modelled CRDs use)."""

    type: str = ""  # object | array | string | integer; "" accepts anything
    properties: dict[str, Schema] = field(default_factory=dict)
    items: Schema | None = None
    required: tuple[str, ...] = ()
    preserve: bool = False  # x-kubernetes-preserve-unknown-fields: keep what is not modelled
    pattern: str = ""
    enum: tuple[str, ...] = ()
    max_items: int | None = None
    default: Any = None
    list_set: bool = False  # x-kubernetes-list-type: set
    rules: tuple[Rule, ...] = ()


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return {str: "string", dict: "object", list: "array"}.get(type(value), "null")


def _go_regex(pattern: str) -> re.Pattern[str]:
    """Go's RE2 `$` is the end of the text; Python's also matches before a final newline."""
    return re.compile(pattern.replace("$", r"\Z"))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def prune(obj: dict[str, Any], schema: Schema) -> list[str]:
    """Drop unknown fields in place; return their paths, as the strict decoder names them."""
    unknown: list[str] = []

    def walk(value: Any, node: Schema | None, path: str) -> None:
        if node is None or (node.preserve and not node.properties):
            return
        if isinstance(value, dict) and node.type == "object":
            for key in list(value):
                if key in node.properties:
                    walk(value[key], node.properties[key], _join(path, key))
                elif not node.preserve:
                    unknown.append(_join(path, key))
                    del value[key]
        elif isinstance(value, list) and node.items is not None:
            for i, item in enumerate(value):
                walk(item, node.items, f"{path}[{i}]")

    walk(obj, schema, "")
    return unknown


def apply_defaults(value: Any, schema: Schema) -> None:
    """Fill schema defaults in place (and drop non-nullable nulls that have none)."""
    if isinstance(value, dict) and schema.properties:
        for key, prop in schema.properties.items():
            if key in value and value[key] is None and prop.default is None:
                del value[key]
            elif (key not in value or value[key] is None) and prop.default is not None:
                value[key] = copy.deepcopy(prop.default)
        for key, item in value.items():
            if key in schema.properties:
                apply_defaults(item, schema.properties[key])
    elif isinstance(value, list) and schema.items is not None:
        for item in value:
            apply_defaults(item, schema.items)


def _check_node(value: Any, node: Schema, path: str, errs: list[FieldError]) -> bool:
    """The kube-openapi checks of one node; False when its type is wrong (nothing below runs)."""
    kind = _json_type(value)
    if node.type and kind != node.type:
        detail = f"{path} in body must be of type {node.type}: {go_quote(kind)}"
        errs.append(FieldError(_BLOCKING_TYPE, path, kind, detail))
        return False
    if node.pattern and isinstance(value, str) and not _go_regex(node.pattern).search(value):
        errs.append(invalid_field(path, value, f"{path} in body should match '{node.pattern}'"))
    if node.enum and value not in node.enum:
        errs.append(not_supported_field(path, value, list(node.enum)))
    if node.max_items is not None and isinstance(value, list) and len(value) > node.max_items:
        errs.append(
            FieldError(
                "FieldValueTooMany", path, len(value), f"must have at most {node.max_items} items"
            )
        )
    return True


def _has_rules(node: Schema | None) -> bool:
    if node is None:
        return False
    return (
        bool(node.rules) or _has_rules(node.items) or any(map(_has_rules, node.properties.values()))
    )


def validate(obj: dict[str, Any], schema: Schema) -> list[FieldError]:
    """Schema errors, then list-set duplicates, then the rules (or the `<nil>` note)."""
    errs: list[FieldError] = []
    sets: list[tuple[str, list[Any]]] = []
    rules: list[tuple[str, Any, Schema]] = []

    def walk(value: Any, node: Schema, path: str) -> None:
        if not _check_node(value, node, path, errs):
            return
        if node.rules:
            rules.append((path, value, node))
        if isinstance(value, dict):
            for key, prop in node.properties.items():
                if key in value:
                    walk(value[key], prop, _join(path, key))
            errs.extend(required_field(_join(path, k)) for k in node.required if k not in value)
        elif isinstance(value, list) and node.items is not None:
            if node.list_set:
                sets.append((path, value))
            for i, item in enumerate(value):
                walk(item, node.items, f"{path}[{i}]")

    walk(obj, schema, "")
    for path, values in sets:
        seen: list[Any] = []
        reported: list[Any] = []
        for i, item in enumerate(values):
            if item in seen and item not in reported:
                errs.append(FieldError("FieldValueDuplicate", f"{path}[{i}]", item))
                reported.append(item)
            seen.append(item)
    if any(e.type in _BLOCKING for e in errs):
        if _has_rules(schema):  # only a CRD with rules has a CEL validator to hold back
            errs.append(invalid_field("<nil>", "null", UNCHECKED_RULES))
        return errs
    for path, value, node in rules:
        errs.extend(
            invalid_field(path, node.type, rule.message)
            for rule in node.rules
            if not rule.check(value)
        )
    return errs
