"""The three patch types kube-apiserver accepts for built-in resources (apply is not served).

Behaviour checked against handlers/patch.go (read via the search tool):
- JSON patch (RFC 6902) body that is not an array -> 400 with the Go decode text
  (`json: cannot unmarshal object into Go value of type jsonpatch.Patch`); any op that fails to
  apply, a failed `test` included -> 422 Invalid "the server rejected our request due to an error
  in our request" with empty details (NewGenericServerResponse(422, ...)).
- JSON merge patch (RFC 7386) that is not JSON or a bare scalar -> 400 "Invalid JSON Patch"
  (evanphx ErrBadJSONPatch); an array replaces the document and then fails to decode (422).
- Strategic merge patch: maps merge as in a merge patch, lists follow the Go struct tags
  (`patchStrategy:"merge"` with `patchMergeKey`), everything else is replaced; `$patch`,
  `$retainKeys`, `$setElementOrder/...` and `$deleteFromPrimitiveList/...` directives.
  Node.spec.taints has no patch strategy in core/v1, so it is replaced wholesale.

None of these functions mutates its inputs: unchanged subtrees are shared with the original,
which is how the store keeps snapshots copy-on-write.
"""

from __future__ import annotations

import json
from typing import Any

from tests.kubeapi.statuses import ApiError, bad_request, generic

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = [JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH]

# Lists with a strategic patch strategy, per path from the object root (Go struct tags in
# k8s.io/api/core/v1/types.go and meta/v1/types.go). Value: merge key, or "" for a primitive set.
NODE_LIST_STRATEGIES: dict[tuple[str, ...], str] = {
    ("metadata", "finalizers"): "",
    ("metadata", "ownerReferences"): "uid",
    ("spec", "podCIDRs"): "",
    ("status", "conditions"): "type",
    ("status", "addresses"): "type",
}
EVENT_LIST_STRATEGIES: dict[tuple[str, ...], str] = {
    ("metadata", "finalizers"): "",
    ("metadata", "ownerReferences"): "uid",
}

_DELETE = object()


class PatchFailed(ApiError):
    """An op that could not be applied: 422 with the generic wording, reason kept for logs."""

    def __init__(self, why: str) -> None:
        err = generic(422)
        super().__init__(err.code, err.reason, err.message, {})
        self.why = why


def decode_json(body: bytes) -> Any:
    """Parse a request body, turning syntax errors into Go-like text (raised as ValueError)."""
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        text = body.decode("utf-8", "replace")
        pos = getattr(exc, "pos", 0) or 0
        stripped = text[pos:].lstrip()
        if not stripped:
            raise ValueError("unexpected end of JSON input") from None
        raise ValueError(
            f"invalid character '{stripped[0]}' looking for beginning of value"
        ) from None


# --------------------------------------------------------------------------- merge patch


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 apply; returns a new value, sharing untouched subtrees with `target`."""
    if not isinstance(patch, dict):
        return _prune_nulls(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _prune_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune_nulls(v) for v in value]
    return value


def apply_merge_patch(doc: dict[str, Any], body: bytes) -> Any:
    """The handler's merge-patch step: bad JSON or a bare scalar -> 400 Invalid JSON Patch."""
    try:
        patch = decode_json(body)
    except ValueError:
        raise bad_request("Invalid JSON Patch") from None
    if patch is None or not isinstance(patch, dict | list):
        raise bad_request("Invalid JSON Patch")
    return merge_patch(doc, patch)


# --------------------------------------------------------------------------- JSON patch


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split_pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchFailed(f"add operation does not apply: doc is missing path: {path!r}")
    return [_unescape(p) for p in path[1:].split("/")]


def _container(doc: Any, tokens: list[str], op: str, path: str) -> tuple[Any, str]:
    node = doc
    for tok in tokens[:-1]:
        if isinstance(node, dict) and tok in node:
            node = node[tok]
        elif isinstance(node, list) and tok.isdigit() and int(tok) < len(node):
            node = node[int(tok)]
        else:
            raise PatchFailed(f"{op} operation does not apply: doc is missing path: {path}")
    return node, tokens[-1]


def _index(container: list[Any], tok: str, path: str, *, allow_end: bool) -> int:
    if tok == "-" and allow_end:
        return len(container)
    if not tok.lstrip("-").isdigit():
        raise PatchFailed(f"Unable to access invalid index: {tok}")
    idx = int(tok)
    if idx < 0:
        idx += len(container)
    limit = len(container) if allow_end else len(container) - 1
    if idx < 0 or idx > limit:
        raise PatchFailed(f"Unable to access invalid index: {tok} (path {path})")
    return idx


def _get(doc: Any, path: str, op: str) -> Any:
    tokens = _split_pointer(path)
    if not tokens:
        return doc
    parent, last = _container(doc, tokens, op, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchFailed(f"{op} operation does not apply: doc is missing key: {path}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, allow_end=False)]
    raise PatchFailed(f"{op} operation does not apply: doc is missing path: {path}")


def _add(doc: Any, path: str, value: Any, op: str = "add") -> Any:
    tokens = _split_pointer(path)
    if not tokens:
        return value
    parent, last = _container(doc, tokens, op, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, allow_end=True), value)
    else:
        raise PatchFailed(f"{op} operation does not apply: doc is missing path: {path}")
    return doc


def _remove(doc: Any, path: str, op: str = "remove") -> tuple[Any, Any]:
    tokens = _split_pointer(path)
    if not tokens:
        raise PatchFailed(f"{op} operation does not apply: cannot remove the whole document")
    parent, last = _container(doc, tokens, op, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchFailed(f"Unable to remove nonexistent key: {last}: missing value")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, path, allow_end=False))
    raise PatchFailed(f"{op} operation does not apply: doc is missing path: {path}")


def apply_json_patch(doc: Any, body: bytes) -> Any:
    """RFC 6902 on a private copy of `doc` (all ops, `~0`/`~1` pointers, `-` index)."""
    try:
        ops = decode_json(body)
    except ValueError as exc:
        raise bad_request(str(exc)) from None
    if not isinstance(ops, list):
        kind = {dict: "object", str: "string", bool: "bool"}.get(type(ops), "number")
        raise bad_request(f"json: cannot unmarshal {kind} into Go value of type jsonpatch.Patch")
    for op in ops:
        if not isinstance(op, dict):
            raise bad_request(
                "json: cannot unmarshal non-object into Go value of type jsonpatch.Operation"
            )
    if len(ops) > 10000:
        raise ApiError(
            413,
            "RequestEntityTooLarge",
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, "
            f"got {len(ops)}",
        )
    doc = json.loads(json.dumps(doc))
    for op in ops:
        kind = op.get("op")
        path = op.get("path")
        if not isinstance(path, str):
            raise PatchFailed("operation missing path field")
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchFailed(f"{kind} operation missing value field")
        if kind == "add":
            doc = _add(doc, path, op["value"])
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path, "replace")
            doc, _ = _remove(doc, path, "replace")
            doc = _add(doc, path, op["value"], "replace")
        elif kind in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str):
                raise PatchFailed(f"{kind} operation missing from field")
            if kind == "move":
                doc, value = _remove(doc, source, "move")
            else:
                value = json.loads(json.dumps(_get(doc, source, "copy")))
            doc = _add(doc, path, value, kind)
        elif kind == "test":
            try:
                current = _get(doc, path, "test")
            except PatchFailed:
                current = None
                if op["value"] is not None:
                    raise PatchFailed(f"testing value {path} failed: test failed") from None
            if current != op["value"] or type(current) is not type(op["value"]):
                raise PatchFailed(f"testing value {path} failed: test failed")
        else:
            raise PatchFailed(f"Unexpected kind: {kind}")
    return doc


# --------------------------------------------------------------------------- strategic merge patch


def apply_strategic_patch(
    doc: dict[str, Any], body: bytes, strategies: dict[tuple[str, ...], str]
) -> dict[str, Any]:
    """strategicpatch.StrategicMergeMapPatch for the list strategies given."""
    try:
        patch = decode_json(body)
    except ValueError as exc:
        raise bad_request(str(exc)) from None
    if not isinstance(patch, dict):
        kind = {list: "array", str: "string", bool: "bool"}.get(type(patch), "number")
        if patch is None:
            return doc
        raise bad_request(
            f"json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
        )
    result = _smp_map(doc, patch, (), strategies)
    return {} if result is _DELETE else result


def _smp_map(
    original: Any,
    patch: dict[str, Any],
    path: tuple[str, ...],
    strategies: dict[tuple[str, ...], str],
) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _strip_directives(patch)
    if directive not in (None, "merge"):
        raise bad_request(f"Unknown patch type: {directive}")
    result = dict(original) if isinstance(original, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            if isinstance(result.get(name), list) and isinstance(value, list):
                result[name] = [v for v in result[name] if v not in value]
            continue
        child_path = (*path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = _smp_map(result.get(key), value, child_path, strategies)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and child_path in strategies:
            result[key] = _smp_list(
                result.get(key), value, strategies[child_path], child_path, strategies
            )
        else:
            result[key] = _strip_directives(value)
    if isinstance(retain, list):
        keep = set(retain)
        result = {k: v for k, v in result.items() if k in keep}
    return result


def _smp_list(
    original: Any,
    patch: list[Any],
    merge_key: str,
    path: tuple[str, ...],
    strategies: dict[tuple[str, ...], str],
) -> list[Any]:
    base = list(original) if isinstance(original, list) else []
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [_strip_directives(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    if not merge_key:
        return base + [p for p in patch if p not in base]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise bad_request(f"map: {item} does not contain declared merge key: {merge_key}")
        key_value = item[merge_key]
        idx = next(
            (
                i
                for i, cur in enumerate(base)
                if isinstance(cur, dict) and cur.get(merge_key) == key_value
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if idx is not None:
                base.pop(idx)
            continue
        if idx is None:
            base.append(_strip_directives(item))
        else:
            base[idx] = _smp_map(base[idx], item, path, strategies)
    return base


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value
