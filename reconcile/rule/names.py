"""Kubernetes name rules for annotation and label keys and label values.

Same rules as k8s.io/apimachinery/pkg/util/validation (IsQualifiedName,
IsDNS1123Subdomain, IsValidLabelValue), so a key the API server would refuse
with 422 is refused here first, before any API call, with a readable reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_RE = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
NAME_MAX = 63
PREFIX_MAX = 253


def qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a valid annotation/label key, or None if it is."""
    return next(_key_problems(key), None)


def _key_problems(key: str) -> Iterator[str]:
    """Every rule `key` breaks, in the order the API server checks them."""
    if not key:
        yield "must not be empty"
        return
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            yield "prefix part must not be empty"
        elif len(prefix) > PREFIX_MAX:
            yield f"prefix part must be no more than {PREFIX_MAX} characters"
        elif not _DNS1123_SUBDOMAIN_RE.match(prefix):
            yield (
                "prefix part must be a lowercase DNS subdomain "
                "(for example 'karpenter.sh' or 'example.com')"
            )
    if not name:
        yield "name part must not be empty"
    elif len(name) > NAME_MAX:
        yield f"name part must be no more than {NAME_MAX} characters"
    elif not _NAME_RE.match(name):
        yield (
            "name part must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a valid label value, or None ('' is valid)."""
    if value == "":
        return None
    if len(value) > NAME_MAX:
        return f"must be no more than {NAME_MAX} characters"
    if not _NAME_RE.match(value):
        return (
            "must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None
