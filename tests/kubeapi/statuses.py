"""`Status` error bodies shaped like kube-apiserver's, and the exception that carries them.

Message formats follow k8s.io/apimachinery/pkg/api/errors/errors.go (NewNotFound, NewConflict,
NewInvalid, NewGenericServerResponse, ...) and field/errors.go (field error bodies), read via the
search tool. Field order in the JSON matches the Go structs (kind, apiVersion, metadata, status,
message, reason, details, code) so byte-level comparisons with a real server stay close.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

OPTIMISTIC_LOCK_MSG = (
    "the object has been modified; please apply your changes to the latest version and try again"
)
# storage/etcd3/store.go: the 410 for a continue token older than the compaction.
CONTINUE_EXPIRED_MSG = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this response "
    "to retrieve the remainder of the results. Continuing with the provided token results in an "
    "inconsistent list - objects that were created, modified, or deleted between the time the "
    "first chunk was returned and now may show up in the list."
)
ACCEPTED_MEDIA_TYPES = (
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
)

_TYPE_WORDS = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "FieldValueTypeInvalid": "Invalid value",
    "InternalError": "Internal error",
}
_NO_VALUE_TYPES = {
    "FieldValueRequired",
    "FieldValueForbidden",
    "FieldValueTooLong",
    "InternalError",
}


def go_quote(value: str) -> str:
    """Go's %q for a string (close enough: JSON escaping keeps printable unicode)."""
    return json.dumps(value, ensure_ascii=False)


class GoLiteral(str):
    """A bad value already printed the Go way (say `0x0`, a uint64 through %#v)."""


def go_repr(value: Any) -> str:
    """How field.Error prints a bad value (%q for strings, %v for scalars, %#v otherwise)."""
    if isinstance(value, GoLiteral):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "[]string{" + ", ".join(go_quote(v) for v in value) + "}"
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        inner = ", ".join(f"{go_quote(k)}:{go_quote(v)}" for k, v in value.items())
        return "map[string]string{" + inner + "}"
    return json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True)
class FieldError:
    """One field.Error: its `type` becomes the cause's `reason`."""

    type: str
    field: str
    value: Any = ""
    detail: str = ""

    def body(self) -> str:
        """field.Error.ErrorBody(): the message without the field path."""
        text = _TYPE_WORDS.get(self.type, self.type)
        if self.type not in _NO_VALUE_TYPES:
            text = f"{text}: {go_repr(self.value)}"
        if self.detail:
            text = f"{text}: {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def invalid_field(path: str, value: Any, detail: str) -> FieldError:
    """field.Invalid."""
    return FieldError("FieldValueInvalid", path, value, detail)


def required_field(path: str, detail: str = "") -> FieldError:
    """field.Required."""
    return FieldError("FieldValueRequired", path, "", detail)


def not_supported_field(path: str, value: Any, valid: list[str]) -> FieldError:
    """field.NotSupported."""
    detail = "supported values: " + ", ".join(go_quote(v) for v in valid) if valid else ""
    return FieldError("FieldValueNotSupported", path, value, detail)


def too_long_field(path: str, max_bytes: int) -> FieldError:
    """field.TooLong as used for the total annotation size."""
    return FieldError("FieldValueTooLong", path, "", f"must have at most {max_bytes} bytes")


@dataclass
class ApiError(Exception):
    """An error answered as a `Status` body (or plain text when `plain` is set)."""

    code: int
    reason: str
    message: str
    details: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    list_meta: dict[str, Any] = field(default_factory=dict)
    plain: bool = False

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> dict[str, Any]:
        """The `Status` object in the real server's field order."""
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.list_meta),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            out["details"] = self.details
        out["code"] = self.code
        return out


def _details(name: str = "", group: str = "", kind: str = "", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if name:
        out["name"] = name
    if group:
        out["group"] = group
    if kind:
        out["kind"] = kind
    out.update({k: v for k, v in extra.items() if v})
    return out


def qualified(resource: str, group: str = "") -> str:
    """schema.GroupResource.String(): `nodes` or `events.events.k8s.io`."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    """errors.NewNotFound."""
    return ApiError(
        404,
        "NotFound",
        f"{qualified(resource, group)} {go_quote(name)} not found",
        _details(name, group, resource),
    )


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    """errors.NewAlreadyExists."""
    return ApiError(
        409,
        "AlreadyExists",
        f"{qualified(resource, group)} {go_quote(name)} already exists",
        _details(name, group, resource),
    )


def conflict(resource: str, name: str, why: str = OPTIMISTIC_LOCK_MSG, group: str = "") -> ApiError:
    """errors.NewConflict."""
    return ApiError(
        409,
        "Conflict",
        f"Operation cannot be fulfilled on {qualified(resource, group)} {go_quote(name)}: {why}",
        _details(name, group, resource),
    )


def invalid(kind: str, name: str, errors: list[FieldError], group: str = "") -> ApiError:
    """errors.NewInvalid: 422 with one cause per field error."""
    unique: list[str] = []
    for err in errors:
        if str(err) not in unique:
            unique.append(str(err))
    aggregate = unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
    qualified_kind = f"{kind}.{group}" if group else kind
    causes = [{"reason": e.type, "message": e.body(), "field": e.field} for e in errors]
    details = _details(name, group, kind)
    details["causes"] = causes
    message = f"{qualified_kind} {go_quote(name)} is invalid"
    if unique:
        message += f": {aggregate}"
    return ApiError(422, "Invalid", message, details)


def bad_request(message: str) -> ApiError:
    """errors.NewBadRequest (no details)."""
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    """What the authentication filter answers for a missing or unknown token."""
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(
    user: str,
    verb: str,
    resource: str,
    *,
    name: str = "",
    group: str = "",
    namespace: str = "",
    subresource: str = "",
) -> ApiError:
    """errors.NewForbidden with the RBAC authorizer's reason text."""
    res = f"{resource}/{subresource}" if subresource else resource
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    why = f'User "{user}" cannot {verb} resource "{res}" in API group "{group}" {scope}'
    subject = qualified(resource, group)
    message = (
        f"{subject} {go_quote(name)} is forbidden: {why}"
        if name
        else f"{subject} is forbidden: {why}"
    )
    return ApiError(403, "Forbidden", message, _details(name, group, resource))


def forbidden_path(user: str, verb: str, path: str) -> ApiError:
    """Forbidden for a non-resource URL."""
    return ApiError(
        403, "Forbidden", f'forbidden: User "{user}" cannot {verb} path "{path}"', _details()
    )


def expired(message: str, continue_token: str = "") -> ApiError:
    """errors.NewResourceExpired (410 Gone, reason Expired)."""
    meta = {"continue": continue_token} if continue_token else {}
    return ApiError(410, "Expired", message, list_meta=meta)


def not_acceptable(message: str = "") -> ApiError:
    """406 from negotiation or from a transform that cannot apply."""
    text = message or "only the following media types are accepted: " + ", ".join(
        ACCEPTED_MEDIA_TYPES
    )
    return ApiError(406, "NotAcceptable", text)


def unsupported_media_type(accepted: list[str]) -> ApiError:
    """negotiation.NewUnsupportedMediaTypeError."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def method_not_allowed(resource: str, action: str, group: str = "") -> ApiError:
    """errors.NewMethodNotSupported."""
    return ApiError(
        405,
        "MethodNotAllowed",
        f"{action} is not supported on resources of kind {go_quote(qualified(resource, group))}",
        _details("", group, resource),
    )


def path_not_found() -> ApiError:
    """The apiserver's answer for a path no handler serves."""
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def internal(message: str) -> ApiError:
    """errors.NewInternalError."""
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def generic(
    code: int,
    name: str = "",
    resource: str = "",
    retry_after: int | None = None,
    group: str = "",
) -> ApiError:
    """A status-coded failure with the wording of NewGenericServerResponse / the real filters."""
    retry = {"retryAfterSeconds": retry_after} if retry_after else {}
    if code == 409:
        err = (
            conflict(resource or "nodes", name, group=group)
            if name
            else ApiError(409, "Conflict", "the server reported a conflict", {})
        )
        if retry:
            err.details = {**(err.details or {}), **retry}
        return err
    table = {
        429: ("TooManyRequests", "Too many requests, please try again later."),
        500: ("InternalError", "Internal error occurred: injected fault"),
        502: (
            "InternalError",
            'an error on the server ("Bad Gateway") has prevented the request from succeeding',
        ),
        503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
        504: ("Timeout", "Timeout: request did not complete within the allotted timeout"),
        404: ("NotFound", "the server could not find the requested resource"),
        400: ("BadRequest", "the server rejected our request for an unknown reason"),
        403: ("Forbidden", "forbidden"),
        410: ("Expired", "The resourceVersion for the provided list is too old."),
        422: ("Invalid", "the server rejected our request due to an error in our request"),
    }
    reason, message = table.get(
        code, ("Unknown", f"the server responded with the status code {code}")
    )
    return ApiError(code, reason, message, {**retry} if retry or code >= 500 else None)
