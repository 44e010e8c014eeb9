"""Discovery documents and `/version`, as a 1.32 EKS control plane answers them.

Served as legacy (unaggregated) discovery with `Content-Type: application/json`: kubectl 1.32
and client-go ask for `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,...`
first and fall back by the response Content-Type (client-go discovery_client.go), so answering
legacy documents is correct and costs one request per group version.
"""

from __future__ import annotations

from typing import Any

_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

VERSION: dict[str, Any] = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.5-eks-5d4a308",
    "gitCommit": "0f3af1c1b7b1c6c4d6f0bd0d0b8a1d2c3e4f5a6b",
    "gitTreeState": "clean",
    "buildDate": "2025-05-20T18:52:11Z",
    "goVersion": "go1.23.8",
    "compiler": "gc",
    "platform": "linux/amd64",
}

API_VERSIONS: dict[str, Any] = {
    "kind": "APIVersions",
    "versions": ["v1"],
    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.10:443"}],
}


def _group(name: str) -> dict[str, Any]:
    gv = {"groupVersion": f"{name}/v1", "version": "v1"}
    return {"name": name, "versions": [gv], "preferredVersion": gv}


API_GROUPS: dict[str, Any] = {
    "kind": "APIGroupList",
    "apiVersion": "v1",
    "groups": [_group("events.k8s.io"), _group("coordination.k8s.io")],
}

CORE_RESOURCES: dict[str, Any] = {
    "kind": "APIResourceList",
    "groupVersion": "v1",
    "resources": [
        {
            "name": "events",
            "singularName": "event",
            "namespaced": True,
            "kind": "Event",
            "verbs": _ALL_VERBS,
            "shortNames": ["ev"],
            "storageVersionHash": "r2yiGXH7wu8=",
        },
        {
            "name": "namespaces",
            "singularName": "namespace",
            "namespaced": False,
            "kind": "Namespace",
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            "shortNames": ["ns"],
            "storageVersionHash": "Q3oi5N2YM8M=",
        },
        {
            "name": "nodes",
            "singularName": "node",
            "namespaced": False,
            "kind": "Node",
            "verbs": _ALL_VERBS,
            "shortNames": ["no"],
            "storageVersionHash": "XwShjMxG9Fs=",
        },
        {
            "name": "nodes/status",
            "singularName": "",
            "namespaced": False,
            "kind": "Node",
            "verbs": ["get", "patch", "update"],
        },
        {
            "name": "pods",
            "singularName": "pod",
            "namespaced": True,
            "kind": "Pod",
            "verbs": _ALL_VERBS,
            "shortNames": ["po"],
            "categories": ["all"],
            "storageVersionHash": "xPOwRZ+Yhw8=",
        },
    ],
}

GROUP_RESOURCES: dict[str, dict[str, Any]] = {
    "events.k8s.io/v1": {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "events.k8s.io/v1",
        "resources": [
            {
                "name": "events",
                "singularName": "event",
                "namespaced": True,
                "kind": "Event",
                "verbs": _ALL_VERBS,
                "shortNames": ["ev"],
                "storageVersionHash": "r2yiGXH7wu8=",
            }
        ],
    },
    "coordination.k8s.io/v1": {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "coordination.k8s.io/v1",
        "resources": [
            {
                "name": "leases",
                "singularName": "lease",
                "namespaced": True,
                "kind": "Lease",
                "verbs": _ALL_VERBS,
                "storageVersionHash": "gqkMMb/YqFM=",
            }
        ],
    },
}

NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")
