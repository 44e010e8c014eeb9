"""Karpenter v1 NodePools (`nodepools.karpenter.sh`), served the way a cluster with the CRD does.

The schema below is the part of Karpenter's CRD (kubernetes-sigs/karpenter v1.14.1,
pkg/apis/crds/karpenter.sh_nodepools.yaml; read via the fetch tool) that budgets depend on,
re-typed, not copied: every keyword of `spec.disruption` (budgets: `nodes` pattern and default
"10%", `schedule` and `duration` patterns, `reasons` enum Underutilized/Empty/Drifted with
maxItems 50 and list-type set, maxItems 50, the rule tying `schedule` and `duration`;
consolidateAfter and consolidationPolicy with their defaults; the disruption default itself),
the required `spec.template.spec.nodeClassRef`/`requirements`, and the `expireAfter` default.
Everything else is kept as sent (modelled as preserve-unknown-fields): a real cluster would also
check it. The budgets schema is the same since v1.1 except that `reasons` got maxItems in v1.8
and set semantics (duplicates refused) in v1.13.

Discovery (apiextensions-apiserver customresource_discovery_controller.go, v0.32.9): verbs in the
CRD handler's order, the CRD's categories `[karpenter]`, no shortNames (Karpenter declares none),
the status subresource; the scale subresource (alpha `spec.replicas`, since v1.6) is not served.
Table columns: Name, then the CRD's additionalPrinterColumns (tableconvertor.go: a column
without a description is described by its JSONPath; `date` cells are human ages).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tests.kubeapi.crd import Rule, Schema, apply_defaults
from tests.kubeapi.tables import since

GROUP = "karpenter.sh"
API_VERSION = "karpenter.sh/v1"
# What a NodePool without any budget gets from the CRD defaults.
DEFAULT_BUDGETS = [{"nodes": "10%"}]

#: Karpenter releases that serve karpenter.sh/v1 NodePools through their conversion webhook and
#: store v1beta1 (the v1 migration guide's v0.33.6+, v0.34.7+, ..., v0.37.1+): what a v1 NodePool
#: keeps of its budgets through v1 -> v1beta1 -> v1. pkg/apis/v1/nodepool_conversion.go (read
#: via the search tool) copies nodes, schedule and duration of each budget, not `reasons`;
#: v0.33's v1beta1 has no budgets at all. An empty list is omitted in v1beta1 (omitempty).
DROPS_REASONS = "v0.34-v0.37"
DROPS_BUDGETS = "v0.33"

_DURATION = "^([0-9]+(s|m|h))+$"
_BUDGET = Schema(
    type="object",
    properties={
        "duration": Schema(type="string", pattern="^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"),
        "nodes": Schema(type="string", pattern="^((100|[0-9]{1,2})%|[0-9]+)$", default="10%"),
        "reasons": Schema(
            type="array",
            items=Schema(type="string", enum=("Underutilized", "Empty", "Drifted")),
            max_items=50,
            list_set=True,
        ),
        "schedule": Schema(
            type="string",
            pattern=(
                r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|"
                r"((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
            ),
        ),
    },
    required=("nodes",),
)
_DISRUPTION = Schema(
    type="object",
    properties={
        "budgets": Schema(
            type="array",
            items=_BUDGET,
            max_items=50,
            default=DEFAULT_BUDGETS,
            rules=(
                Rule(
                    "self.all(x, has(x.schedule) == has(x.duration))",
                    "'schedule' must be set with 'duration'",
                    lambda budgets: all(("schedule" in b) == ("duration" in b) for b in budgets),
                ),
            ),
        ),
        "consolidateAfter": Schema(
            type="string", pattern="^(([0-9]+(s|m|h))+|Never)$", default="0s"
        ),
        "consolidationPolicy": Schema(
            type="string",
            enum=("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"),
            default="WhenEmptyOrUnderutilized",
        ),
    },
    required=("consolidateAfter",),
    default={"consolidateAfter": "0s"},
)
_KEPT = Schema(preserve=True)
NODEPOOL_SCHEMA = Schema(
    type="object",
    properties={
        "apiVersion": Schema(type="string"),
        "kind": Schema(type="string"),
        "metadata": Schema(type="object", preserve=True),
        "spec": Schema(
            type="object",
            properties={
                "disruption": _DISRUPTION,
                "limits": Schema(type="object", preserve=True),
                "replicas": Schema(type="integer"),
                "template": Schema(
                    type="object",
                    preserve=True,
                    properties={
                        "metadata": Schema(type="object", preserve=True),
                        "spec": Schema(
                            type="object",
                            preserve=True,
                            properties={
                                "expireAfter": Schema(
                                    type="string",
                                    pattern="^(([0-9]+(s|m|h))+|Never)$",
                                    default="720h",
                                ),
                                "nodeClassRef": Schema(
                                    type="object",
                                    preserve=True,
                                    required=("group", "kind", "name"),
                                ),
                                "requirements": Schema(type="array", items=_KEPT),
                                "terminationGracePeriod": Schema(type="string", pattern=_DURATION),
                            },
                            required=("nodeClassRef", "requirements"),
                        ),
                    },
                    required=("spec",),
                ),
                "weight": Schema(type="integer"),
            },
            required=("template",),
        ),
        "status": Schema(type="object", preserve=True),
    },
    required=("spec",),
)


def round_trip(obj: dict[str, Any], conversion: str | None) -> dict[str, Any]:
    """`obj` as kube-apiserver stores it through the conversion webhook of `conversion` (one of
    DROPS_REASONS, DROPS_BUDGETS; None: Karpenter v1, stored as sent) and reads it back: the
    budgets as converted, then the v1 CRD defaults again (a list gone becomes
    DEFAULT_BUDGETS). The answer to a write is this object."""
    disruption = (obj.get("spec") or {}).get("disruption")
    if conversion is None or not isinstance(disruption, dict) or "budgets" not in disruption:
        return obj
    kept = [{k: v for k, v in b.items() if k != "reasons"} for b in disruption["budgets"]]
    spec = {**obj["spec"], "disruption": {k: v for k, v in disruption.items() if k != "budgets"}}
    if conversion == DROPS_REASONS and kept:
        spec["disruption"]["budgets"] = kept
    out = {**obj, "spec": spec}
    apply_defaults(out, NODEPOOL_SCHEMA)
    return out


def make_nodepool(
    name: str,
    *,
    budgets: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node_class: str = "default",
) -> dict[str, Any]:
    """A NodePool as people write it for EKS (defaults not yet applied; `budgets=None` leaves
    the list out, so the CRD default gives `[{nodes: "10%"}]`)."""
    disruption: dict[str, Any] = {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "1m",
    }
    if budgets is not None:
        disruption["budgets"] = budgets
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": API_VERSION,
        "kind": "NodePool",
        "metadata": meta,
        "spec": {
            "disruption": disruption,
            "limits": {"cpu": "1000"},
            "template": {
                "spec": {
                    "expireAfter": "720h",
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": node_class,
                    },
                    "requirements": [
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["on-demand", "spot"],
                        },
                        {
                            "key": "kubernetes.io/arch",
                            "operator": "In",
                            "values": ["amd64"],
                        },
                    ],
                }
            },
        },
    }


def _column(name: str, path: str, kind: str = "string", priority: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "type": kind,
        "format": "",
        "description": f"Custom resource definition column (in JSONPath format): {path}",
        "priority": priority,
    }


NODEPOOL_COLUMNS = [
    {
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": (
            "Name must be unique within a namespace. Is required when creating resources, "
            "although some resources may allow a client to request the generation of an "
            "appropriate name automatically. Name is primarily intended for creation idempotence "
            "and configuration definition. Cannot be updated. More info: "
            "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
        ),
        "priority": 0,
    },
    _column("NodeClass", ".spec.template.spec.nodeClassRef.name"),
    _column("Nodes", ".status.nodes"),
    _column("Ready", '.status.conditions[?(@.type=="Ready")].status'),
    _column("Age", ".metadata.creationTimestamp", "date"),
    _column("Weight", ".spec.weight", "integer", 1),
    _column("CPU", ".status.resources.cpu", priority=1),
    _column("Memory", ".status.resources.memory", priority=1),
]


def nodepool_cells(pool: dict[str, Any], now: datetime) -> list[Any]:
    """The row the CRD's printer columns give (a missing value is null, shown as <none>)."""
    spec = pool.get("spec") or {}
    status = pool.get("status") or {}
    node_class = ((spec.get("template") or {}).get("spec") or {}).get("nodeClassRef") or {}
    ready = next(
        (c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"),
        None,
    )
    resources = status.get("resources") or {}

    def text(value: Any) -> str | None:
        return None if value is None else str(value)

    weight = spec.get("weight")
    return [
        pool["metadata"]["name"],
        text(node_class.get("name")),
        text(status.get("nodes")),
        text(ready),
        since(pool["metadata"].get("creationTimestamp"), now),
        weight if isinstance(weight, int) else None,
        text(resources.get("cpu")),
        text(resources.get("memory")),
    ]
