"""Small helpers shared by tests: a model of merge-patching annotations, node builders."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from reconcile.rule.decide import NodePatch, Plan
from reconcile.rule.nodes import NodeView
from reconcile.rule.settings import Mode

T0 = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def node(
    name: str,
    age: timedelta = timedelta(hours=2),
    *,
    now: datetime = T0,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    deleting: bool = False,
    rv: str = "1",
) -> NodeView:
    return NodeView(
        name=name,
        created=now - age,
        resource_version=rv,
        uid=f"uid-{name}",
        deleting=deleting,
        labels=dict(labels or {}),
        annotations=dict(annotations or {}),
    )


def held(plan: Plan) -> bool:
    """Whether a reconcile plan holds any window (the nodes carry the hold after it)."""
    return any(w.held for w in plan.windows) and plan.mode is Mode.RECONCILE


def merge(annotations: Mapping[str, str], patch: NodePatch) -> dict[str, str]:
    """RFC 7386 on the annotations map, as the API server applies our patch."""
    result = dict(annotations)
    for key, value in patch.changes:
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def with_annotations(view: NodeView, annotations: Mapping[str, str]) -> NodeView:
    rv = str(int(view.resource_version or "0") + 1)
    return view._replace(resource_version=rv, annotations=dict(annotations))


def apply_plan(nodes: list[NodeView], patches: tuple[NodePatch, ...]) -> list[NodeView]:
    by_name = {p.node: p for p in patches}
    return [
        with_annotations(n, merge(n.annotations, by_name[n.name])) if n.name in by_name else n
        for n in nodes
    ]
