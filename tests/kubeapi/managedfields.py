"""A small model of server-side field ownership (`metadata.managedFields`) for Update operations.

The real field manager (apimachinery/pkg/util/managedfields) gives the fields an Update changes
to the writing manager and takes them away from every other manager; a no-op write changes no
managedFields (and so stores nothing). Here lists are owned atomically (no `k:`/`v:` entries for
new writes) and the manager name comes from `?fieldManager=` or the User-Agent prefix, like the
real `managerOrUserAgent`. Good enough for payload realism and "who touched this" assertions.
"""

from __future__ import annotations

from typing import Any

FieldSet = dict[str, Any]
# Metadata the server owns: never tracked in managedFields.
_SYSTEM_META = {
    "managedFields",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "name",
    "namespace",
}


def manager_name(field_manager: str | None, user_agent: str) -> str:
    """managerOrUserAgent: the explicit manager, else the User-Agent up to the first `/`."""
    if field_manager:
        return field_manager
    return (user_agent.split("/", 1)[0] or "unknown")[:128]


def _full(value: Any) -> FieldSet:
    if isinstance(value, dict) and value:
        return {".": {}, **{f"f:{k}": _full(v) for k, v in value.items()}}
    return {}


def diff(old: Any, new: Any) -> tuple[FieldSet, FieldSet]:
    """(set or changed, removed) field sets between two object trees (lists are atomic)."""
    changed: FieldSet = {}
    removed: FieldSet = {}
    if not isinstance(old, dict) or not isinstance(new, dict):
        return changed, removed
    for key, value in new.items():
        if key not in old:
            changed[f"f:{key}"] = _full(value)
        elif old[key] != value:
            if isinstance(value, dict) and isinstance(old[key], dict):
                sub_changed, sub_removed = diff(old[key], value)
                if sub_changed:
                    changed[f"f:{key}"] = sub_changed
                if sub_removed:
                    removed[f"f:{key}"] = sub_removed
            else:
                changed[f"f:{key}"] = {}
    for key in old:
        if key not in new:
            removed[f"f:{key}"] = {}
    return changed, removed


def object_diff(
    old: dict[str, Any], new: dict[str, Any], *, status: bool
) -> tuple[FieldSet, FieldSet]:
    """diff() over the user-owned parts: metadata (minus system fields) and spec, or status."""
    keys = (
        ("status",)
        if status
        else tuple(
            k
            for k in new.keys() | old.keys()
            if k not in ("kind", "apiVersion", "status", "metadata")
        )
    )
    old_part: dict[str, Any] = {k: old[k] for k in keys if k in old}
    new_part: dict[str, Any] = {k: new[k] for k in keys if k in new}
    if not status:
        old_part["metadata"] = {
            k: v for k, v in (old.get("metadata") or {}).items() if k not in _SYSTEM_META
        }
        new_part["metadata"] = {
            k: v for k, v in (new.get("metadata") or {}).items() if k not in _SYSTEM_META
        }
    return diff(old_part, new_part)


def union(a: FieldSet, b: FieldSet) -> FieldSet:
    """Fields in either set."""
    out = dict(a)
    for key, value in b.items():
        out[key] = (
            union(out[key], value) if key in out and out[key] and value else (out.get(key) or value)
        )
    return out


def subtract(a: FieldSet, b: FieldSet) -> FieldSet:
    """Fields of `a` not covered by `b` (a leaf in `b` covers the whole subtree in `a`)."""
    out: FieldSet = {}
    for key, value in a.items():
        if key not in b:
            out[key] = value
        elif b[key] and value:
            rest = subtract(value, b[key])
            if rest:
                out[key] = rest
    return out


def record_update(
    managed: list[dict[str, Any]] | None,
    manager: str,
    changed: FieldSet,
    removed: FieldSet,
    now: str,
    *,
    subresource: str = "",
    api_version: str = "v1",
) -> list[dict[str, Any]]:
    """New managedFields after `manager` changed/removed fields with an Update operation."""
    taken = union(changed, removed)
    out: list[dict[str, Any]] = []
    mine: dict[str, Any] | None = None
    for entry in managed or []:
        same = (
            entry.get("manager") == manager
            and entry.get("operation") == "Update"
            and entry.get("subresource", "") == subresource
        )
        if same:
            mine = entry
            continue
        fields = subtract(entry.get("fieldsV1") or {}, taken)
        if fields:
            out.append(entry if fields == entry.get("fieldsV1") else {**entry, "fieldsV1": fields})
    owned = subtract(union((mine or {}).get("fieldsV1") or {}, changed), removed)
    if owned:
        entry = {
            "manager": manager,
            "operation": "Update",
            "apiVersion": api_version,
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": owned,
        }
        if subresource:
            entry["subresource"] = subresource
        out.append(entry)
    return out
