"""Discovery documents and `/version`, as a 1.32 EKS control plane answers them.

Served as legacy (unaggregated) discovery with `Content-Type: application/json`: kubectl 1.32
and client-go ask for `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,...`
first and fall back by the response Content-Type (client-go discovery_client.go), so answering
legacy documents is correct and costs one request per group version.
"""

from __future__ import annotations

import base64
import hashlib
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


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """endpoints/discovery StorageVersionHash: base64 of the first 8 bytes of sha256(g/v/k)."""
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


API_GROUPS: dict[str, Any] = {
    "kind": "APIGroupList",
    "apiVersion": "v1",
    # Built-in groups first, then the CRDs' (as the aggregator orders them).
    "groups": [_group("events.k8s.io"), _group("coordination.k8s.io"), _group("karpenter.sh")],
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
    # A CRD's resources (apiextensions-apiserver customresource_discovery_controller.go, v0.32.9):
    # the CRD handler's verb order, the CRD's categories, no shortNames when the CRD declares
    # none, and `<plural>/status` for the status subresource.
    "karpenter.sh/v1": {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "karpenter.sh/v1",
        "resources": [
            {
                "name": "nodepools",
                "singularName": "nodepool",
                "namespaced": False,
                "kind": "NodePool",
                "verbs": [
                    "delete",
                    "deletecollection",
                    "get",
                    "list",
                    "patch",
                    "create",
                    "update",
                    "watch",
                ],
                "categories": ["karpenter"],
                "storageVersionHash": storage_version_hash("karpenter.sh", "v1", "NodePool"),
            },
            {
                "name": "nodepools/status",
                "singularName": "",
                "namespaced": False,
                "kind": "NodePool",
                "verbs": ["get", "patch", "update"],
            },
        ],
    },
}

# OpenAPI v3, for the CRD only: enough for kubectl create/apply to see that the server validates
# fields itself (cli-runtime query_param_verifier_v3.go: a PATCH operation with the GVK and a
# `fieldValidation` query parameter) and that the type takes no strategic merge patch
# (kubectl apply/patcher.go: no application/strategic-merge-patch+json request body, so it sends
# a JSON merge patch). Built-in groups are not described: kubectl keeps its old behaviour there.
_OPENAPI_GV = "apis/karpenter.sh/v1"
OPENAPI_V3_INDEX: dict[str, Any] = {
    "paths": {_OPENAPI_GV: {"serverRelativeURL": f"/openapi/v3/{_OPENAPI_GV}?hash=0"}}
}
OPENAPI_V3_DOCS: dict[str, dict[str, Any]] = {
    _OPENAPI_GV: {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": {
            "/apis/karpenter.sh/v1/nodepools/{name}": {
                "patch": {
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": {
                        "group": "karpenter.sh",
                        "version": "v1",
                        "kind": "NodePool",
                    },
                    "requestBody": {
                        "content": {
                            "application/apply-patch+yaml": {"schema": {"type": "object"}},
                            "application/json-patch+json": {"schema": {"type": "object"}},
                            "application/merge-patch+json": {"schema": {"type": "object"}},
                        }
                    },
                    "parameters": [
                        {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
                        {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
                        {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
                    ],
                    "responses": {"200": {"description": "OK"}},
                }
            }
        },
    }
}

NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")
