"""`as=Table` responses (what `kubectl get` asks for), built like the server-side printers.

Columns and cells follow pkg/printers/internalversion/printers.go (read via the search tool):
nodes are NAME, STATUS (Ready/NotReady/Unknown + SchedulingDisabled), ROLES (from
`node-role.kubernetes.io/*` and `kubernetes.io/role`), AGE, VERSION, and the priority-1 wide
columns; events are LAST SEEN, TYPE, REASON, OBJECT, MESSAGE (+ wide). The server always sends
every column; kubectl hides priority > 0 unless `-o wide`. Ages use the server clock, so a
shifted clock shows in `kubectl get`. Row objects are PartialObjectMetadata by default
(`includeObject=Metadata`), the full object for `Object`, absent for `None`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from tests.kubeapi.statuses import bad_request, not_supported_field
from tests.kubeapi.store import dumps

INCLUDE_OBJECT_VALUES = ["None", "Metadata", "Object"]
_CREATED = (
    "CreationTimestamp is a timestamp representing the server time when this object was created."
)


def human_duration(seconds: float) -> str:
    """apimachinery duration.HumanDuration."""
    secs = int(seconds)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 120:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        rest = secs % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = secs // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def since(timestamp: str | None, now: datetime) -> str:
    """translateTimestampSince: `<unknown>` for a zero time."""
    if not timestamp:
        return "<unknown>"
    return human_duration((now - datetime.fromisoformat(timestamp)).total_seconds())


def _col(
    name: str, description: str, *, fmt: str = "", priority: int = 0, kind: str = "string"
) -> dict[str, Any]:
    return {
        "name": name,
        "type": kind,
        "format": fmt,
        "description": description,
        "priority": priority,
    }


NODE_COLUMNS = [
    _col("Name", "Name must be unique within a namespace.", fmt="name"),
    _col("Status", "The status of the node"),
    _col("Roles", "The roles of the node"),
    _col(
        "Age",
        _CREATED,
    ),
    _col("Version", "Kubelet Version reported by the node."),
    _col("Internal-IP", "List of addresses reachable to the node.", priority=1),
    _col("External-IP", "List of addresses reachable to the node.", priority=1),
    _col(
        "OS-Image",
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        priority=1,
    ),
    _col(
        "Kernel-Version",
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        priority=1,
    ),
    _col(
        "Container-Runtime",
        "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        priority=1,
    ),
]
EVENT_COLUMNS = [
    _col("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
    _col("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
    _col(
        "Reason",
        "This should be a short, machine understandable string that gives the reason for the "
        "transition into the object's current status.",
    ),
    _col("Object", "The object that this event is about."),
    _col(
        "Subobject",
        "If referring to a piece of an object instead of an entire object, this string should "
        "contain a valid JSON/Go field access statement.",
        priority=1,
    ),
    _col(
        "Source",
        "The component reporting this event. Should be a short machine understandable string.",
        priority=1,
    ),
    _col("Message", "A human-readable description of the status of this operation."),
    _col(
        "First Seen",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
        priority=1,
    ),
    _col("Count", "The number of times this event has occurred.", priority=1),
    _col("Name", "Name must be unique within a namespace.", fmt="name", priority=1),
]
NAMESPACE_COLUMNS = [
    _col("Name", "Name must be unique within a namespace.", fmt="name"),
    _col("Status", "The status of the namespace"),
    _col(
        "Age",
        _CREATED,
    ),
]
DEFAULT_COLUMNS = [
    _col("Name", "Name must be unique within a namespace.", fmt="name"),
    _col(
        "Created At",
        _CREATED,
        kind="date",
    ),
]


def node_cells(node: dict[str, Any], now: datetime) -> list[Any]:
    """printNode (wide)."""
    status_part = node.get("status") or {}
    ready = next((c for c in status_part.get("conditions") or [] if c.get("type") == "Ready"), None)
    states = (
        ["Unknown"] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
    )
    if (node.get("spec") or {}).get("unschedulable"):
        states.append("SchedulingDisabled")
    roles = set()
    for key, value in ((node.get("metadata") or {}).get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/") :]:
            roles.add(key[len("node-role.kubernetes.io/") :])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    info = status_part.get("nodeInfo") or {}
    addresses = status_part.get("addresses") or []

    def address(kind: str) -> str:
        return next((a.get("address", "") for a in addresses if a.get("type") == kind), "<none>")

    return [
        node["metadata"]["name"],
        ",".join(states),
        ",".join(sorted(roles)) or "<none>",
        since(node["metadata"].get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def event_cells(event: dict[str, Any], now: datetime) -> list[Any]:
    """printEvent (wide), on the core/v1 form of the event."""
    first = (
        since(event.get("firstTimestamp"), now)
        if event.get("firstTimestamp")
        else since(event.get("eventTime"), now)
    )
    last = since(event.get("lastTimestamp"), now) if event.get("lastTimestamp") else first
    count = event.get("count") or 0
    series = event.get("series")
    if series:
        last = since(series.get("lastObservedTime"), now)
        count = series.get("count") or 0
    elif count == 0:
        count = 1
    involved = event.get("involvedObject") or {}
    kind = (involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    source_text = f"{component}, {host}" if host else component
    return [
        last,
        event.get("type", ""),
        event.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        source_text,
        (event.get("message") or "").strip(),
        first,
        int(count),
        event["metadata"]["name"],
    ]


def namespace_cells(ns: dict[str, Any], now: datetime) -> list[Any]:
    """printNamespace."""
    return [
        ns["metadata"]["name"],
        (ns.get("status") or {}).get("phase", "Active"),
        since(ns["metadata"].get("creationTimestamp"), now),
    ]


def default_cells(obj: dict[str, Any], now: datetime) -> list[Any]:
    """The default table convertor: name and creation time."""
    return [obj["metadata"]["name"], obj["metadata"].get("creationTimestamp")]


def check_include_object(value: str | None) -> str:
    """ValidateTableOptions: 400 for an unknown includeObject."""
    value = value or "Metadata"
    if value not in INCLUDE_OBJECT_VALUES:
        err = not_supported_field("includeObject", value, INCLUDE_OBJECT_VALUES)
        raise bad_request(f"Unable to convert to Table as requested: {err}")
    return value


def table(
    columns: list[dict[str, Any]],
    rows: Iterable[tuple[list[Any], bytes, bytes]],
    *,
    include_object: str,
    group_version: str,
    list_meta: dict[str, Any],
) -> bytes:
    """A meta.k8s.io Table; rows are (cells, full object JSON, metadata JSON)."""
    partial_head = (
        b'{"kind":"PartialObjectMetadata","apiVersion":' + dumps(group_version) + b',"metadata":'
    )
    parts = []
    for cells, full, meta in rows:
        row = b'{"cells":' + dumps(cells)
        if include_object == "Object":
            row += b',"object":' + full
        elif include_object == "Metadata":
            row += b',"object":' + partial_head + meta + b"}"
        parts.append(row + b"}")
    head = {
        "kind": "Table",
        "apiVersion": group_version,
        "metadata": list_meta,
        "columnDefinitions": columns,
    }
    return dumps(head)[:-1] + b',"rows":[' + b",".join(parts) + b"]}"
