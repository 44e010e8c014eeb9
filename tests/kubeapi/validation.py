"""Object validation the way kube-apiserver words it, for the fields this project writes.

Sources (read via the search tool): apimachinery util/validation (qualified names, DNS-1123,
label values; the 1.32 wording "must be no more than 63 characters"), api/validation/objectmeta.go
(annotation size limit 256 KiB counted as len(key)+len(value), `Too long: must have at most 262144
bytes`), the events registry strategy (legacy event namespace rule, strict events.k8s.io/v1 rules),
and handlers/rest.go (decode errors: 400 for create/update, 422 "patch: Invalid value" for patch).
"""

from __future__ import annotations

import re
from typing import Any

from tests.kubeapi.statuses import (
    FieldError,
    invalid_field,
    required_field,
    too_long_field,
)

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_RE = re.compile("^" + _LABEL_KEY_FMT + "$")
_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_LABEL_VALUE_RE = re.compile("^" + _LABEL_VALUE_FMT + "$")
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_RE = re.compile("^" + _DNS1123_SUBDOMAIN_FMT + "$")
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character"
)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """validation.RegexError."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def is_dns1123_subdomain(value: str) -> list[str]:
    """validation.IsDNS1123Subdomain."""
    errs = []
    if len(value) > 253:
        errs.append(_max_len_error(253))
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """validation.IsQualifiedName: optional DNS-subdomain prefix, `/`, and a 63-char name."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + _max_len_error(63))
    if not _LABEL_KEY_RE.match(name):
        errs.append(
            "name part "
            + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def is_label_value(value: str) -> list[str]:
    """validation.IsValidLabelValue."""
    errs = []
    if len(value) > 63:
        errs.append(_max_len_error(63))
    if not _LABEL_VALUE_RE.match(value):
        errs.append(
            _regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return errs


_GO_JSON_KIND = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "bool",
    int: "number",
    float: "number",
}


def _json_kind(value: Any) -> str:
    return _GO_JSON_KIND.get(type(value), "value")


def decode_error(obj: Any, kind: str) -> str | None:
    """The Go unmarshal error the real decoder would report for the common type mistakes.

    None when the object decodes. Only the fields this project (and kubectl) write are checked.
    """
    if not isinstance(obj, dict):
        return f"json: cannot unmarshal {_json_kind(obj)} into Go value of type v1.{kind}"
    meta = obj.get("metadata")
    if meta is None:
        return None
    if not isinstance(meta, dict):
        return (
            f"json: cannot unmarshal {_json_kind(meta)} into Go struct field {kind}.metadata "
            "of type v1.ObjectMeta"
        )
    for key in ("name", "generateName", "namespace", "uid", "resourceVersion", "creationTimestamp"):
        value = meta.get(key)
        if value is not None and not isinstance(value, str):
            return (
                f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
                f"ObjectMeta.metadata.{key} of type string"
            )
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            return (
                f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
                f"ObjectMeta.metadata.{key} of type map[string]string"
            )
        for item in value.values():
            if item is not None and not isinstance(item, str):
                return (
                    f"json: cannot unmarshal {_json_kind(item)} into Go struct field "
                    f"ObjectMeta.metadata.{key} of type string"
                )
    finalizers = meta.get("finalizers")
    if finalizers is not None and not (
        isinstance(finalizers, list) and all(isinstance(f, str) for f in finalizers)
    ):
        return (
            "json: cannot unmarshal "
            f"{_json_kind(finalizers) if not isinstance(finalizers, list) else 'number'} into Go "
            "struct field ObjectMeta.metadata.finalizers of type string"
        )
    spec = obj.get("spec")
    if isinstance(spec, dict):
        if "unschedulable" in spec and not isinstance(spec["unschedulable"], bool | None):
            return (
                f"json: cannot unmarshal {_json_kind(spec['unschedulable'])} into Go struct field "
                f"{kind}Spec.spec.unschedulable of type bool"
            )
        taints = spec.get("taints")
        if taints is not None and not isinstance(taints, list):
            return (
                f"json: cannot unmarshal {_json_kind(taints)} into Go struct field "
                f"{kind}Spec.spec.taints of type []v1.Taint"
            )
    return None


def is_path_segment_name(value: str) -> list[str]:
    """path.IsValidPathSegmentName: what namespaced objects such as events need."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def validate_object_meta(
    meta: dict[str, Any], *, namespaced: bool, dns_name: bool = True
) -> list[FieldError]:
    """ValidateObjectMetaAccessor for the parts that matter here."""
    errs: list[FieldError] = []
    name = meta.get("name") or ""
    if not name:
        errs.append(required_field("metadata.name", "name or generateName is required"))
    else:
        check = is_dns1123_subdomain if dns_name else is_path_segment_name
        errs.extend(invalid_field("metadata.name", name, m) for m in check(name))
    if not namespaced and meta.get("namespace"):
        errs.append(
            FieldError("FieldValueForbidden", "metadata.namespace", "", "not allowed on this type")
        )
    for key, value in (meta.get("labels") or {}).items():
        errs.extend(invalid_field("metadata.labels", key, m) for m in is_qualified_name(key))
        errs.extend(invalid_field("metadata.labels", value, m) for m in is_label_value(value or ""))
    annotations = meta.get("annotations") or {}
    for key in annotations:
        errs.extend(
            invalid_field("metadata.annotations", key, m) for m in is_qualified_name(key.lower())
        )
    total = sum(len(k.encode()) + len((v or "").encode()) for k, v in annotations.items())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(too_long_field("metadata.annotations", TOTAL_ANNOTATION_SIZE_LIMIT))
    for fin in meta.get("finalizers") or []:
        errs.extend(invalid_field("metadata.finalizers", fin, m) for m in is_qualified_name(fin))
    for ref in meta.get("ownerReferences") or []:
        if not isinstance(ref, dict):
            continue
        for key, label in (
            ("apiVersion", "version must not be empty"),
            ("kind", "must not be empty"),
        ):
            if not ref.get(key):
                errs.append(
                    invalid_field(f"metadata.ownerReferences.{key}", ref.get(key, ""), label)
                )
        for key in ("name", "uid"):
            if not ref.get(key):
                errs.append(
                    invalid_field(f"metadata.ownerReferences.{key}", "", "must not be empty")
                )
    return errs


def validate_update_meta(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """ValidateObjectMetaAccessorUpdate: no new finalizers while deleting; immutable uid."""
    errs: list[FieldError] = []
    if old.get("deletionTimestamp"):
        added = sorted(set(new.get("finalizers") or []) - set(old.get("finalizers") or []))
        if added:
            errs.append(
                FieldError(
                    "FieldValueForbidden",
                    "metadata.finalizers",
                    "",
                    "no new finalizers can be added if the object is being deleted, found new "
                    "finalizers []string{" + ", ".join(f'"{a}"' for a in added) + "}",
                )
            )
    if new.get("uid") != old.get("uid"):
        errs.append(invalid_field("metadata.uid", new.get("uid") or "", "field is immutable"))
    return errs


def validate_event(event: dict[str, Any], *, strict_v1: bool) -> list[FieldError]:
    """legacyValidateEvent, plus the events.k8s.io/v1 create rules when `strict_v1`."""
    errs: list[FieldError] = []
    ns = (event.get("metadata") or {}).get("namespace") or ""
    involved = event.get("involvedObject") or {}
    involved_ns = involved.get("namespace") or ""
    controller_field = "reportingController" if strict_v1 else "reportingComponent"
    if not event.get("eventTime"):
        if not involved_ns:
            if ns not in ("", "default"):
                errs.append(
                    invalid_field(
                        "involvedObject.namespace", involved_ns, "does not match event.namespace"
                    )
                )
        elif ns != involved_ns:
            errs.append(
                invalid_field(
                    "involvedObject.namespace", involved_ns, "does not match event.namespace"
                )
            )
    else:
        if not involved_ns and ns not in ("default", "kube-system"):
            errs.append(
                invalid_field(
                    "involvedObject.namespace", involved_ns, "does not match event.namespace"
                )
            )
        controller = event.get("reportingComponent") or ""
        if not controller:
            errs.append(required_field(controller_field))
        errs.extend(
            invalid_field(controller_field, controller, m) for m in is_qualified_name(controller)
        )
        instance = event.get("reportingInstance") or ""
        if not instance:
            errs.append(required_field("reportingInstance"))
        if len(instance) > 128:
            errs.append(invalid_field("reportingInstance", "", "can have at most 128 characters"))
        if not event.get("action"):
            errs.append(required_field("action"))
        if len(event.get("action") or "") > 128:
            errs.append(invalid_field("action", "", "can have at most 128 characters"))
        if not event.get("reason"):
            errs.append(required_field("reason"))
        if len(event.get("reason") or "") > 128:
            errs.append(invalid_field("reason", "", "can have at most 128 characters"))
        if len(event.get("message") or "") > 1024:
            errs.append(invalid_field("message", "", "can have at most 1024 characters"))
    errs.extend(invalid_field("namespace", ns, m) for m in is_dns1123_subdomain(ns))
    if strict_v1:
        if not event.get("eventTime"):
            errs.append(required_field("eventTime"))
        if event.get("type") not in ("Normal", "Warning"):
            errs.append(invalid_field("type", "", f"has invalid value: {event.get('type') or ''}"))
        for key in ("firstTimestamp", "lastTimestamp"):
            if event.get(key):
                errs.append(invalid_field(key, "", "needs to be unset"))
        if event.get("count"):
            errs.append(invalid_field("count", "", "needs to be unset"))
        source = event.get("source") or {}
        if source.get("component") or source.get("host"):
            errs.append(invalid_field("source", "", "needs to be unset"))
    return errs
