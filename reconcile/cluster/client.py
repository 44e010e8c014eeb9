"""The calls: Node, NodePool, Event, CronJob, Job and ConfigMap requests, which know Kubernetes,
not holds.

Plain values in and out; nodes as metadata only. An answer that is not what was asked for is an
`UnreadableAnswer` (docs/operations-notes.md, "Answers that are not what was asked for"). Each
call names what it does and which shipped Role grants it, for its error lines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from reconcile.cluster.errors import Action, Unconfirmed, UnreadableAnswer
from reconcile.cluster.transport import USER_AGENT, Response, Transport

ACCEPT_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
EVENT_NAMESPACE = "default"  # where kubelet puts node events; `kubectl describe node` finds them
#: What a 403 asks to grant: the shipped RBAC (cronjob/base/rbac.yaml, the chart's hook Role).
NODES_GRANT = 'the ClusterRole "node-holder" in cronjob/base/rbac.yaml'
EVENTS_GRANT = (
    f'the Role "node-holder-events" in namespace "{EVENT_NAMESPACE}" (cronjob/base/rbac.yaml)'
)
NODEPOOLS_GRANT = (
    'the ClusterRole "node-holder" with cronjob/components/budget-mechanism (chart: mechanism)'
)
HANDOVER_GRANT = (
    "the uninstall hook's Role in charts/karpenter-node-holder (cronjobs get, patch; jobs list)"
)


@dataclass(frozen=True)
class Page:
    """Nodes' metadata as the server sent it: a list page, or one node got by name."""

    items: list[dict[str, Any]]
    continue_token: str | None
    date: datetime | None  # the response's Date header: the API server's clock
    size: int = 0  # bytes of the (decoded) body: what the next page's size is judged by


class Client(Transport):
    """The calls over one connection pool (reconcile.cluster.transport)."""

    def list_nodes(
        self,
        *,
        limit: int,
        continue_token: str | None = None,
        timeout: float | None = None,
    ) -> Page:
        """One page of the metadata-only node list."""
        query = {"limit": str(limit)}
        if continue_token:
            query["continue"] = continue_token
        action = Action("list", 'resource "nodes"', NODES_GRANT)
        headers = {"Accept": ACCEPT_METADATA_LIST}
        response = self.request(
            "GET", "/api/v1/nodes", action, query=query, headers=headers, timeout=timeout
        )
        size, date = len(response.body), response.date
        page = _json(response, action)
        del response  # the raw body goes as soon as it is parsed
        items, token = _list_page(page, first=not continue_token)
        return Page(items, token, date, size)

    def get_node(self, name: str, *, timeout: float | None = None) -> Page:
        """One node's metadata, as a page of one with the server's clock; NotFound if gone."""
        meta, response = self._node("GET", name, timeout)
        return Page([meta], None, response.date, len(response.body))

    def patch_node(
        self, name: str, body: Mapping[str, Any], *, timeout: float | None = None
    ) -> str:
        """A merge patch; returns the node's new resourceVersion.

        A resourceVersion in the body makes it a precondition: Conflict if the node changed.
        """
        try:
            meta, _ = self._node("PATCH", name, timeout, body)
        except UnreadableAnswer as exc:
            raise Unconfirmed(f"{exc}; unknown whether the patch landed") from None
        return str(meta.get("resourceVersion", ""))

    def _node(
        self, method: str, name: str, timeout: float | None, patch: Any = None
    ) -> tuple[dict[str, Any], Response]:
        """A node's metadata, read or merge-patched, and the answer it came in."""
        action = Action(method.lower(), f'node "{name}"', NODES_GRANT)
        headers = {"Accept": ACCEPT_METADATA}
        if patch is not None:
            headers["Content-Type"] = MERGE_PATCH
        path = f"/api/v1/nodes/{quote(name, safe='')}"
        response = self.request(method, path, action, body=patch, headers=headers, timeout=timeout)
        found = _json(response, action)
        meta = found.get("metadata") if isinstance(found, dict) else None
        if not isinstance(meta, dict):
            raise UnreadableAnswer(
                f"the answer to {method.lower()} {action.what} has no object metadata "
                f"({_glimpse(json.dumps(found)[:200])})"
            )
        return meta, response

    # --- Karpenter v1 NodePools (the budget mechanism) ---

    def list_nodepools(
        self, *, metadata_only: bool = False, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """Every NodePool: whole (the budget mechanism reads their spec), or with
        `metadata_only` their metadata (the hold settings are annotations). NotFound: the
        cluster serves no karpenter.sh/v1 NodePools (no CRD)."""
        action = Action("list", 'resource "nodepools" in API group "karpenter.sh"', NODES_GRANT)
        headers = {"Accept": ACCEPT_METADATA_LIST} if metadata_only else {}
        return self._items(NODEPOOLS, action, "NodePools", timeout, headers)

    def nodepool(
        self, name: str, ops: list[dict[str, Any]] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """A NodePool, read or changed by a JSON Patch (RFC 6902: a failed `test` is 422
        Invalid, and nothing changed); NotFound if there is none. An unreadable answer to a
        patch is retried like any fault: its `test` of the resourceVersion fails if it landed."""
        action = Action("patch" if ops else "get", f'nodepool "{name}"', NODEPOOLS_GRANT)
        path = f"{NODEPOOLS}/{quote(name, safe='')}"
        return self._object("PATCH" if ops else "GET", path, action, timeout, ops)

    def create_event(self, event: Mapping[str, Any], *, timeout: float | None = None) -> None:
        """Create a core/v1 Event in its metadata.namespace (see `make_event`)."""
        namespace = quote(str(event["metadata"]["namespace"]), safe="")
        self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/events",
            Action("create", f'resource "events" in namespace "{namespace}"', EVENTS_GRANT),
            body=event,
            headers={"Content-Type": "application/json", "Accept": ACCEPT_METADATA},
            timeout=timeout,
        )

    # --- the uninstall hook's hand-over (reconcile.cluster.handover) ---

    def cronjob(
        self, namespace: str, name: str, *, suspend: bool = False, timeout: float | None = None
    ) -> dict[str, Any]:
        """A batch/v1 CronJob, after a merge patch `spec.suspend: true` if `suspend`; NotFound
        if there is none."""
        action = Action(
            "patch" if suspend else "get", f"cronjob {namespace}/{name}", HANDOVER_GRANT
        )
        path = f"{_batch(namespace)}/cronjobs/{quote(name, safe='')}"
        patch = {"spec": {"suspend": True}} if suspend else None
        return self._object("PATCH" if suspend else "GET", path, action, timeout, patch)

    def configmap_data(self, namespace: str, name: str) -> dict[str, str]:
        """A core/v1 ConfigMap's `data` (--settings-from: with the caller's own credentials);
        NotFound if there is none."""
        grant = f'yourself a Role with get on configmaps in namespace "{namespace}"'
        action = Action("get", f"configmap {namespace}/{name}", grant)
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps/{quote(name, safe='')}"
        data = self._object("GET", path, action, None).get("data") or {}
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise UnreadableAnswer(f"the answer to get {action.what} has no string data")
        return data

    def list_jobs(self, namespace: str, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """Every batch/v1 Job in the namespace (a CronJob keeps a short history)."""
        action = Action("list", f"jobs in {namespace}", HANDOVER_GRANT)
        return self._items(f"{_batch(namespace)}/jobs", action, "jobs", timeout)

    def _items(
        self,
        path: str,
        action: Action,
        kind: str,
        timeout: float | None,
        headers: dict[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        """A list's items, whole and in one page: there are a few (NodePools, a CronJob's Jobs)."""
        items = self._object("GET", path, action, timeout, headers=headers).get("items") or []
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise UnreadableAnswer(f"the answer to list {action.what} is not a list of {kind}")
        return items

    def _object(
        self,
        method: str,
        path: str,
        action: Action,
        timeout: float | None,
        patch: Any = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A whole object (the hand-over reads specs, status and owners), or a patch: a merge
        patch (a dict), or a JSON Patch (a list of operations)."""
        kind = MERGE_PATCH if isinstance(patch, dict) else JSON_PATCH
        headers = {"Content-Type": kind} if patch is not None else (headers or {})
        response = self.request(method, path, action, body=patch, headers=headers, timeout=timeout)
        found = _json(response, action)
        if not isinstance(found, dict):
            raise UnreadableAnswer(f"the answer to {action.verb} {action.what} is not an object")
        return found


def _batch(namespace: str) -> str:
    return f"/apis/batch/v1/namespaces/{quote(namespace, safe='')}"


#: The apiVersion of each kind an Event can be about.
EVENT_KINDS = {"Node": "v1", "NodePool": "karpenter.sh/v1"}


def make_event(
    *, kind: str, name: str, uid: str, reason: str, message: str, at: str, instance: str
) -> dict[str, Any]:
    """A Normal core/v1 Event about a Node or NodePool, in the namespace where node events
    live; `at` is its time as the rule's `format_time` writes it (RFC 3339, to the second)."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            # Unique without a clock: two runs in the same second must not collide.
            "generateName": f"{name}.",
            "namespace": EVENT_NAMESPACE,
        },
        "involvedObject": {"apiVersion": EVENT_KINDS[kind], "kind": kind, "name": name, "uid": uid},
        "reason": reason,
        "message": message,
        "type": "Normal",
        "source": {"component": USER_AGENT},
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
        "reportingComponent": USER_AGENT,
        "reportingInstance": instance,
    }


# --- reading answers -------------------------------------------------------------


def _json(response: Response, action: Action) -> Any:
    try:
        return json.loads(response.body)
    except ValueError:
        raise UnreadableAnswer(
            f"the answer to {action.verb} {action.what} is not JSON ({_glimpse(response.body)})"
        ) from None


def _list_page(page: Any, *, first: bool) -> tuple[list[dict[str, Any]], str | None]:
    """A `...List` page's item metadata and continue token; `"items": null` is no nodes only as
    the whole list (kube-apiserver writes it for an empty metadata-only list)."""
    kind = page.get("kind") if isinstance(page, dict) else None
    meta = page.get("metadata") if isinstance(page, dict) else None
    items = page.get("items", ...) if isinstance(page, dict) else ...
    token = meta.get("continue") if isinstance(meta, dict) else None
    if items is None and first and not token:
        items = []
    if not (
        isinstance(kind, str)
        and kind.endswith("List")
        and isinstance(items, list)
        and all(isinstance(i, dict) and isinstance(i.get("metadata"), dict) for i in items)
        and (token is None or isinstance(token, str))
    ):
        raise UnreadableAnswer(
            f"the answer to list nodes is not a list page ({_glimpse(json.dumps(page)[:200])})"
        )
    return [i["metadata"] for i in items], token or None


def _glimpse(body: bytes | str, size: int = 60) -> str:
    """The start of an unexpected answer, on one line, for the error message."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = " ".join(text.split())
    if not text:
        return "an empty body"
    return repr(text[:size] + ("..." if len(text) > size else ""))
