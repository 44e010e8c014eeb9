"""Kubernetes name rules for annotation and label keys and label values, the same as
k8s.io/apimachinery/pkg/util/validation's (IsQualifiedName, IsDNS1123Subdomain,
IsValidLabelValue): a key the API server would refuse with 422 is refused here first, before
any API call, with a readable reason.
"""

from __future__ import annotations

import re

_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = rf"{DNS_LABEL}(?:\.{DNS_LABEL})*"
NAME_MAX = 63
PREFIX_MAX = 253
_CHARACTERS = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a valid annotation/label key (the first rule it breaks, in the order
    the API server checks them), or None if it is."""
    prefix, slash, name = key.rpartition("/")
    rules = (
        (not key, "must not be empty"),
        (slash and not prefix, "prefix part must not be empty"),
        (len(prefix) > PREFIX_MAX, f"prefix part must be no more than {PREFIX_MAX} characters"),
        (
            prefix and not re.fullmatch(DNS_SUBDOMAIN, prefix),
            "prefix part must be a lowercase DNS subdomain "
            "(for example 'karpenter.sh' or 'example.com')",
        ),
        (not name, "name part must not be empty"),
        (len(name) > NAME_MAX, f"name part must be no more than {NAME_MAX} characters"),
        (not _NAME_RE.match(name), f"name part {_CHARACTERS}"),
    )
    return next((problem for broken, problem in rules if broken), None)


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a valid label value, or None ('' is valid)."""
    if len(value) > NAME_MAX:
        return f"must be no more than {NAME_MAX} characters"
    return _CHARACTERS if value and not _NAME_RE.match(value) else None
