"""Client-side label selectors behave like k8s.io/apimachinery/pkg/labels."""

from __future__ import annotations

import pytest

from reconcile.rule.selectors import Requirement, SelectorError, parse_selector

LABELS = {"karpenter.sh/nodepool": "batch", "zone": "a", "size": "10"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),
        ("karpenter.sh/nodepool", True),
        ("!karpenter.sh/nodepool", False),
        ("!missing", True),
        ("zone=a", True),
        ("zone==a", True),
        ("zone!=a", False),
        ("missing!=a", True),  # != matches nodes without the label
        ("zone in (a,b)", True),
        ("zone in (b)", False),
        ("zone notin (b, c)", True),
        ("missing notin (b)", True),
        ("missing in (b)", False),
        ("zone=a,karpenter.sh/nodepool=batch", True),
        ("zone=a,karpenter.sh/nodepool=web", False),
        ("size>5", True),
        ("size<5", False),
        ("zone>5", False),
        ("zone=", False),
        ("empty=", False),
    ],
)
def test_matching(selector: str, matches: bool) -> None:
    assert parse_selector(selector).matches(LABELS) is matches


def test_empty_value_matches_an_empty_label() -> None:
    assert parse_selector("role=").matches({"role": ""})


@pytest.mark.parametrize(
    "selector",
    [
        "a in (",
        "a in ()",
        "=x",
        "a=b=c",
        "a b",
        "a,,b",
        "Bad Key=x",
        "a>x",
        "!a in (x)",
        "a=" + "v" * 64,
    ],
)
def test_invalid_selectors_are_refused(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(selector)


def test_requirements_keys_and_text() -> None:
    sel = parse_selector(" zone in (b,a), !x, size>3, team!=ops ")
    assert sel.requirements == (
        Requirement("zone", "in", ("a", "b")),
        Requirement("x", "!exists"),
        Requirement("size", "gt", ("3",)),
        Requirement("team", "!=", ("ops",)),
    )
    assert sel.keys == {"zone", "x", "size", "team"}
    assert sel.text == "zone in (b,a), !x, size>3, team!=ops"  # as given, for messages
