"""What the server knows per resource: kinds, field selector labels, events conversion.

Both event APIs share one storage in core/v1 form, as in kube-apiserver (pkg/apis/events/v1
conversion.go: regarding <-> involvedObject, note <-> message, reportingController <->
reportingComponent, deprecatedSource/FirstTimestamp/LastTimestamp/Count <-> source/
firstTimestamp/lastTimestamp/count). Field selector labels follow the core/v1 conversion funcs
(nodes: metadata.name, spec.unschedulable; events: involvedObject.*, reason, reportingComponent,
source, type, metadata.*); for events.k8s.io the `regarding.*`/`reportingController` spellings
are accepted as aliases.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.kubeapi import karpenter, tables
from tests.kubeapi.crd import Schema
from tests.kubeapi.patching import EVENT_LIST_STRATEGIES, NODE_LIST_STRATEGIES

Obj = dict[str, Any]


def _same(obj: Obj) -> Obj:
    return obj


@dataclass(frozen=True)
class ResourceKind:
    """One served resource (a group/version view of one storage collection)."""

    resource: str
    kind: str
    group: str
    namespaced: bool
    storage: str
    field_label: Callable[[str], str | None]
    field_values: Callable[[Obj], dict[str, str]]
    columns: list[dict[str, Any]]
    cells: Callable[[Obj, Any], list[Any]]
    list_strategies: dict[tuple[str, ...], str] = field(default_factory=dict)
    to_external: Callable[[Obj], Obj] = _same
    to_internal: Callable[[Obj], Obj] = _same
    defaults: Callable[[Obj], Obj] = _same
    create_on_update: bool = False
    version: str = "v1"
    status_subresource: bool = False
    schema: Schema | None = None  # a custom resource (a CRD's structural schema, see crd.py)

    @property
    def api_version(self) -> str:
        """`v1` or `group/v1`."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def internal_type(self) -> str:
        """The Go type name the real server reports in transform errors."""
        return "*unstructured.Unstructured" if self.schema else f"*core.{self.kind}"


NODE_INFO_FIELDS = (
    "machineID",
    "systemUUID",
    "bootID",
    "kernelVersion",
    "osImage",
    "containerRuntimeVersion",
    "kubeletVersion",
    "kubeProxyVersion",
    "operatingSystem",
    "architecture",
)


def node_defaults(node: Obj) -> Obj:
    """The zero values a Go-serialized Node always carries (fields without omitempty).

    Clients with strict models (the pydantic-based python client) require them.
    """
    status = dict(node.get("status") or {})
    status.setdefault("daemonEndpoints", {"kubeletEndpoint": {"Port": 0}})
    info = status.get("nodeInfo") or {}
    if any(k not in info for k in NODE_INFO_FIELDS):
        status["nodeInfo"] = {k: info.get(k, "") for k in NODE_INFO_FIELDS} | info
    out = {**node, "status": status}
    if not isinstance(out.get("spec"), dict):
        out["spec"] = {}
    return {
        k: out[k] for k in ("kind", "apiVersion", "metadata", "spec", "status") if k in out
    } | out


def _node_label(label: str) -> str | None:
    return label if label in ("metadata.name", "spec.unschedulable") else None


def _node_fields(node: Obj) -> dict[str, str]:
    unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
    return {
        "metadata.name": node["metadata"]["name"],
        "spec.unschedulable": str(unschedulable).lower(),
    }


_CORE_EVENT_LABELS = {
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
    "metadata.namespace",
    "metadata.name",
}


def _core_event_label(label: str) -> str | None:
    return label if label in _CORE_EVENT_LABELS else None


def _v1_event_label(label: str) -> str | None:
    if label.startswith("regarding."):
        label = "involvedObject." + label[len("regarding.") :]
    label = {"reportingController": "reportingComponent", "deprecatedSource": "source"}.get(
        label, label
    )
    return _core_event_label(label)


def _event_fields(event: Obj) -> dict[str, str]:
    involved = event.get("involvedObject") or {}
    source = (event.get("source") or {}).get("component") or event.get("reportingComponent") or ""
    meta = event.get("metadata") or {}
    out = {
        f"involvedObject.{k}": str(involved.get(k) or "")
        for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    }
    out.update(
        {
            "reason": event.get("reason") or "",
            "reportingComponent": event.get("reportingComponent") or "",
            "source": source,
            "type": event.get("type") or "",
            "metadata.namespace": meta.get("namespace") or "",
            "metadata.name": meta.get("name") or "",
        }
    )
    return out


def normalize_core_event(event: Obj) -> Obj:
    """Fill the fields a core/v1 Event always serializes (Go structs without omitempty)."""
    out = {
        "kind": "Event",
        "apiVersion": "v1",
        **{k: v for k, v in event.items() if k not in ("kind", "apiVersion")},
    }
    out.setdefault("involvedObject", {})
    out.setdefault("source", {})
    out.setdefault("firstTimestamp", None)
    out.setdefault("lastTimestamp", None)
    out.setdefault("eventTime", None)
    out.setdefault("reportingComponent", "")
    out.setdefault("reportingInstance", "")
    return out


def event_to_v1(event: Obj) -> Obj:
    """core/v1 Event -> events.k8s.io/v1 Event."""
    out: Obj = {
        "kind": "Event",
        "apiVersion": "events.k8s.io/v1",
        "metadata": event.get("metadata") or {},
    }
    out["eventTime"] = event.get("eventTime")
    if event.get("series"):
        out["series"] = event["series"]
    for src, dst in (
        ("reportingComponent", "reportingController"),
        ("reportingInstance", "reportingInstance"),
        ("action", "action"),
        ("reason", "reason"),
        ("involvedObject", "regarding"),
        ("related", "related"),
        ("message", "note"),
        ("type", "type"),
    ):
        if event.get(src) not in (None, "", {}):
            out[dst] = event[src]
    out.setdefault("regarding", event.get("involvedObject") or {})
    if event.get("source"):
        out["deprecatedSource"] = event["source"]
    for src, dst in (
        ("firstTimestamp", "deprecatedFirstTimestamp"),
        ("lastTimestamp", "deprecatedLastTimestamp"),
        ("count", "deprecatedCount"),
    ):
        if event.get(src):
            out[dst] = event[src]
    return out


def event_from_v1(event: Obj) -> Obj:
    """events.k8s.io/v1 Event -> core/v1 Event (what storage keeps)."""
    out: Obj = {"kind": "Event", "apiVersion": "v1", "metadata": event.get("metadata") or {}}
    for src, dst in (
        ("regarding", "involvedObject"),
        ("reason", "reason"),
        ("note", "message"),
        ("deprecatedSource", "source"),
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
        ("type", "type"),
        ("eventTime", "eventTime"),
        ("series", "series"),
        ("action", "action"),
        ("related", "related"),
        ("reportingController", "reportingComponent"),
        ("reportingInstance", "reportingInstance"),
    ):
        if src in event and event[src] is not None:
            out[dst] = event[src]
    return normalize_core_event(out)


NODES = ResourceKind(
    resource="nodes",
    kind="Node",
    group="",
    namespaced=False,
    storage="nodes",
    field_label=_node_label,
    field_values=_node_fields,
    columns=tables.NODE_COLUMNS,
    cells=tables.node_cells,
    list_strategies=NODE_LIST_STRATEGIES,
    defaults=node_defaults,
    status_subresource=True,
)
CORE_EVENTS = ResourceKind(
    resource="events",
    kind="Event",
    group="",
    namespaced=True,
    storage="events",
    field_label=_core_event_label,
    field_values=_event_fields,
    columns=tables.EVENT_COLUMNS,
    cells=tables.event_cells,
    list_strategies=EVENT_LIST_STRATEGIES,
    to_internal=normalize_core_event,
    create_on_update=True,
)
V1_EVENTS = ResourceKind(
    resource="events",
    kind="Event",
    group="events.k8s.io",
    namespaced=True,
    storage="events",
    field_label=_v1_event_label,
    field_values=_event_fields,
    columns=tables.EVENT_COLUMNS,
    cells=tables.event_cells,
    list_strategies=EVENT_LIST_STRATEGIES,
    to_external=event_to_v1,
    to_internal=event_from_v1,
    create_on_update=True,
)

POD_FIELD_LABELS = {
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
}
NAMESPACE_FIELD_LABELS = {"metadata.name", "status.phase"}


# --- batch/v1: CronJobs and Jobs, enough for `release --suspend-cronjob` (get, list, patch,
# status.active). The test server runs no controllers: tests set a Job's status themselves
# (ApiServer.add_job / finish_job), as the Job controller would.


def _name_namespace_label(label: str) -> str | None:
    return label if label in ("metadata.name", "metadata.namespace") else None


def _name_namespace_fields(obj: Obj) -> dict[str, str]:
    meta = obj.get("metadata") or {}
    return {"metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", "")}


def _default_cells(obj: Obj, now: Any) -> list[Any]:
    meta = obj.get("metadata") or {}
    return [meta.get("name", ""), meta.get("creationTimestamp")]


def _with_status(obj: Obj) -> Obj:
    """Like the Go types: `spec` and `status` always serialize."""
    return {**obj, "spec": obj.get("spec") or {}, "status": obj.get("status") or {}}


CRONJOBS = ResourceKind(
    resource="cronjobs",
    kind="CronJob",
    group="batch",
    namespaced=True,
    storage="cronjobs",
    field_label=_name_namespace_label,
    field_values=_name_namespace_fields,
    columns=tables.DEFAULT_COLUMNS,
    cells=_default_cells,
    list_strategies=EVENT_LIST_STRATEGIES,
    defaults=_with_status,
)
JOBS = ResourceKind(
    resource="jobs",
    kind="Job",
    group="batch",
    namespaced=True,
    storage="jobs",
    field_label=_name_namespace_label,
    field_values=_name_namespace_fields,
    columns=tables.DEFAULT_COLUMNS,
    cells=_default_cells,
    list_strategies=EVENT_LIST_STRATEGIES,
    defaults=_with_status,
)
BATCH_KINDS = {"cronjobs": CRONJOBS, "jobs": JOBS}

# core/v1 ConfigMaps, enough for `--settings-from` (get; a 404 as kube-apiserver words it).
CONFIGMAPS = ResourceKind(
    resource="configmaps",
    kind="ConfigMap",
    group="",
    namespaced=True,
    storage="configmaps",
    field_label=_name_namespace_label,
    field_values=_name_namespace_fields,
    columns=tables.DEFAULT_COLUMNS,
    cells=_default_cells,
    list_strategies=EVENT_LIST_STRATEGIES,
)

# karpenter.sh/v1 NodePools: a custom resource (karpenter.py). Custom resources take the field
# selectors metadata.name and metadata.namespace only (Karpenter declares no selectableFields).
NODEPOOLS = ResourceKind(
    resource="nodepools",
    kind="NodePool",
    group=karpenter.GROUP,
    namespaced=False,
    storage="nodepools",
    field_label=_name_namespace_label,
    field_values=_name_namespace_fields,
    columns=karpenter.NODEPOOL_COLUMNS,
    cells=karpenter.nodepool_cells,
    status_subresource=True,
    schema=karpenter.NODEPOOL_SCHEMA,
)
