"""Node objects that look like EKS worker nodes launched by Karpenter v1, and minimal ones.

Shape checked against Karpenter's nodeclaim registration (kubernetes-sigs/karpenter
pkg/controllers/nodeclaim/lifecycle/registration.go, read via the search tool): Karpenter adds the
`karpenter.sh/termination` finalizer, an ownerReference to its `karpenter.sh/v1` NodeClaim with
blockOwnerDeletion, copies the NodeClaim's labels and annotations (nodepool / ec2nodeclass hashes)
and sets `karpenter.sh/registered`. The rest (labels, addresses, nodeInfo, images, managedFields
from kubelet, the cloud controller, karpenter and kube-controller-manager) follows what
`kubectl get node -o json` shows on an EKS 1.32 cluster. An EKS node is about 10 KB of JSON.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

KUBELET_VERSION = "v1.32.3-eks-473151a"

# (instance type, vCPU, memory MiB, max pods, arch, family category, network bandwidth Mbps)
_INSTANCE_TYPES = [
    ("m5.large", 2, 8192, 29, "amd64", "m", 750),
    ("m5.xlarge", 4, 16384, 58, "amd64", "m", 1250),
    ("m6i.2xlarge", 8, 32768, 58, "amd64", "m", 3125),
    ("c6i.xlarge", 4, 8192, 58, "amd64", "c", 1562),
    ("r6i.large", 2, 16384, 29, "amd64", "r", 781),
    ("c7g.xlarge", 4, 8192, 58, "arm64", "c", 1876),
    ("m7g.large", 2, 8192, 29, "arm64", "m", 937),
]
_ZONES = [("us-east-1a", "use1-az1"), ("us-east-1b", "use1-az2"), ("us-east-1c", "use1-az4")]
_NODEPOOLS = ["default", "default", "default", "batch", "system"]
_ECR = "602401143452.dkr.ecr.us-east-1.amazonaws.com"
_APP_ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"


def _image_pool() -> list[dict[str, Any]]:
    """A fixed pool of realistic image entries; nodes sample from it (shared, never mutated)."""
    rng = random.Random(20250101)
    system = [
        (f"{_ECR}/amazon-k8s-cni", "v1.19.2-eksbuild.1"),
        (f"{_ECR}/amazon-k8s-cni-init", "v1.19.2-eksbuild.1"),
        (f"{_ECR}/amazon/aws-network-policy-agent", "v1.1.6-eksbuild.1"),
        (f"{_ECR}/eks/kube-proxy", "v1.32.0-minimal-eksbuild.2"),
        (f"{_ECR}/eks/pause", "3.10"),
        (f"{_ECR}/eks/aws-ebs-csi-driver", "v1.41.0"),
        (f"{_ECR}/eks/csi-node-driver-registrar", "v2.13.0-eks-1-32-4"),
        (f"{_ECR}/eks/livenessprobe", "v2.14.0-eks-1-32-4"),
        (f"{_ECR}/eks/eks-pod-identity-agent", "0.1.17"),
        ("public.ecr.aws/aws-observability/aws-for-fluent-bit", "2.32.5.20250327"),
        ("quay.io/prometheus/node-exporter", "v1.9.1"),
        ("registry.k8s.io/kube-state-metrics/kube-state-metrics", "v2.15.0"),
    ]
    services = [
        "checkout",
        "payments",
        "search-api",
        "catalog",
        "orders-worker",
        "recommendations",
        "notifications",
        "auth-gateway",
        "inventory",
        "pricing",
        "reporting-batch",
        "media-transcoder",
        "feature-flags",
        "session-store",
        "graphql-edge",
        "ledger",
        "shipping",
        "fraud-scoring",
    ]
    pool = []
    for repo, tag in system:
        digest = hashlib.sha256(f"{repo}:{tag}".encode()).hexdigest()
        names = [f"{repo}@sha256:{digest}", f"{repo}:{tag}"]
        pool.append({"names": names, "sizeBytes": rng.randint(300_000, 90_000_000)})
    for svc in services:
        for _ in range(rng.randint(2, 4)):
            # Application images pulled by digest only carry their digest name.
            digest = hashlib.sha256(f"{svc}{rng.random()}".encode()).hexdigest()
            names = [f"{_APP_ECR}/{svc}@sha256:{digest}"]
            pool.append({"names": names, "sizeBytes": rng.randint(20_000_000, 900_000_000)})
    return pool


_IMAGES = _image_pool()
_SYSTEM_IMAGES = _IMAGES[:12]
_APP_IMAGES = _IMAGES[12:]


def rfc3339(when: datetime) -> str:
    """Kubernetes metav1.Time: RFC 3339, UTC, second precision."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_ip(name: str, rng: random.Random) -> str:
    """The private IP encoded in an EC2 host name (`ip-10-0-12-34...`), or a random one."""
    head = name.split(".", 1)[0]
    parts = head.split("-")
    if len(parts) == 5 and parts[0] == "ip" and all(p.isdigit() for p in parts[1:]):
        return ".".join(parts[1:])
    return f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _keys(mapping: dict[str, Any]) -> dict[str, Any]:
    return {".": {}, **{f"f:{k}": {} for k in mapping}}


def make_eks_node(
    name: str,
    created: datetime,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    rng: random.Random | None = None,
) -> dict[str, Any]:
    """A full EKS/Karpenter-shaped Node (about 10 KB of JSON), without a resourceVersion."""
    rng = rng or random.Random(name)
    itype, cpu, mem_mib, max_pods, arch, category, bandwidth = rng.choice(_INSTANCE_TYPES)
    zone, zone_id = rng.choice(_ZONES)
    nodepool = rng.choice(_NODEPOOLS)
    capacity_type = rng.choice(["spot", "on-demand", "on-demand"])
    family, size = itype.split(".")
    ip = node_ip(name, rng)
    instance_id = "i-0" + "".join(rng.choices("0123456789abcdef", k=16))
    claim = f"{nodepool}-" + "".join(rng.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=5))
    kernel = "6.1.134-152.225.amzn2023." + ("x86_64" if arch == "amd64" else "aarch64")
    node_labels = {
        "beta.kubernetes.io/arch": arch,
        "beta.kubernetes.io/instance-type": itype,
        "beta.kubernetes.io/os": "linux",
        "failure-domain.beta.kubernetes.io/region": "us-east-1",
        "failure-domain.beta.kubernetes.io/zone": zone,
        "k8s.io/cloud-provider-aws": "8f6d9b0e1c2a4f35b7e9d01c3a5b7e92",
        "karpenter.k8s.aws/ec2nodeclass": "default",
        "karpenter.k8s.aws/instance-category": category,
        "karpenter.k8s.aws/instance-cpu": str(cpu),
        "karpenter.k8s.aws/instance-cpu-manufacturer": "aws" if arch == "arm64" else "intel",
        "karpenter.k8s.aws/instance-ebs-bandwidth": str(bandwidth * 4),
        "karpenter.k8s.aws/instance-encryption-in-transit-supported": "true",
        "karpenter.k8s.aws/instance-family": family,
        "karpenter.k8s.aws/instance-generation": family[1],
        "karpenter.k8s.aws/instance-hypervisor": "nitro",
        "karpenter.k8s.aws/instance-memory": str(mem_mib),
        "karpenter.k8s.aws/instance-network-bandwidth": str(bandwidth),
        "karpenter.k8s.aws/instance-size": size,
        "karpenter.sh/capacity-type": capacity_type,
        "karpenter.sh/initialized": "true",
        "karpenter.sh/nodepool": nodepool,
        "karpenter.sh/registered": "true",
        "kubernetes.io/arch": arch,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": itype,
        "topology.ebs.csi.aws.com/zone": zone,
        "topology.k8s.aws/zone-id": zone_id,
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": zone,
    }
    node_annotations = {
        "alpha.kubernetes.io/provided-node-ip": ip,
        "compatibility.karpenter.k8s.aws/cluster-name-tagged": "true",
        "karpenter.k8s.aws/ec2nodeclass-hash": "7216540964137395453",
        "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4",
        "karpenter.sh/nodepool-hash": str(
            int(hashlib.sha256(nodepool.encode()).hexdigest()[:15], 16)
        ),
        "karpenter.sh/nodepool-hash-version": "v3",
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    }
    for src, dst in ((labels, node_labels), (annotations, node_annotations)):
        for key, value in (src or {}).items():
            if value is None:
                dst.pop(key, None)
            else:
                dst[key] = value
    taints = []
    if nodepool == "batch":
        taints.append({"key": "workload", "value": "batch", "effect": "NoSchedule"})
    mem_ki = mem_mib * 1024 - rng.randint(300_000, 600_000)
    created_s = rfc3339(created)
    registered = rfc3339(created + timedelta(seconds=rng.randint(20, 40)))
    ready_at = rfc3339(created + timedelta(seconds=rng.randint(45, 70)))
    heartbeat = rfc3339(created + timedelta(seconds=rng.randint(60, 600)))
    karpenter_fields: dict[str, Any] = {
        "f:metadata": {
            "f:annotations": {
                f"f:{k}": {}
                for k in node_annotations
                if k.startswith(("karpenter.", "compatibility.karpenter"))
            },
            "f:finalizers": {".": {}, 'v:"karpenter.sh/termination"': {}},
            "f:labels": {f"f:{k}": {} for k in node_labels if k.startswith("karpenter.")},
            "f:ownerReferences": {".": {}, f'k:{{"uid":"{_uid(rng)}"}}': {}},
        }
    }
    if taints:
        karpenter_fields["f:spec"] = {"f:taints": {}}
    images = rng.sample(_SYSTEM_IMAGES, 8) + rng.sample(_APP_IMAGES, 22)
    conditions = [
        (
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        (
            "NetworkingReady",
            "True",
            "NetworkingIsReady",
            "Monitoring for the Networking system is active",
        ),
    ]
    node: dict[str, Any] = {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": _uid(rng),
            "creationTimestamp": created_s,
            "labels": node_labels,
            "annotations": node_annotations,
            "ownerReferences": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodeClaim",
                    "name": claim,
                    "uid": _uid(rng),
                    "blockOwnerDeletion": True,
                }
            ],
            "finalizers": ["karpenter.sh/termination"],
            "managedFields": [
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": created_s,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {
                            "f:annotations": {
                                ".": {},
                                "f:alpha.kubernetes.io/provided-node-ip": {},
                                "f:volumes.kubernetes.io/controller-managed-attach-detach": {},
                            },
                            "f:labels": _keys(
                                {
                                    k: 1
                                    for k in node_labels
                                    if not k.startswith(("karpenter.", "topology.k8s"))
                                }
                            ),
                        },
                        "f:spec": {"f:providerID": {}},
                    },
                },
                {
                    "manager": "karpenter",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": registered,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": karpenter_fields,
                },
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": registered,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {"f:annotations": {"f:node.alpha.kubernetes.io/ttl": {}}}
                    },
                },
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": heartbeat,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:status": {
                            "f:allocatable": {
                                "f:cpu": {},
                                "f:ephemeral-storage": {},
                                "f:memory": {},
                            },
                            "f:capacity": {"f:cpu": {}, "f:ephemeral-storage": {}, "f:memory": {}},
                            "f:conditions": {
                                f'k:{{"type":"{c[0]}"}}': {
                                    "f:lastHeartbeatTime": {},
                                    "f:status": {},
                                }
                                for c in conditions[:4]
                            },
                            "f:images": {},
                            "f:nodeInfo": {"f:bootID": {}},
                        }
                    },
                    "subresource": "status",
                },
            ],
        },
        "spec": {"providerID": f"aws:///{zone}/{instance_id}"},
        "status": {
            "capacity": {
                "cpu": str(cpu),
                "ephemeral-storage": "83873772Ki",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "memory": f"{mem_mib * 1024 - 200_000}Ki",
                "pods": str(max_pods),
            },
            "allocatable": {
                "cpu": f"{cpu * 1000 - 80 - 10 * cpu}m",
                "ephemeral-storage": "76224326324",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "memory": f"{mem_ki}Ki",
                "pods": str(max_pods),
            },
            "conditions": [
                {
                    "type": ctype,
                    "status": status,
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": ready_at,
                    "reason": reason,
                    "message": message,
                }
                for ctype, status, reason, message in conditions
            ],
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "InternalDNS", "address": name},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "ec2" + "".join(rng.choices("0123456789abcdef", k=29)),
                "systemUUID": "ec2"
                + "".join(rng.choices("0123456789abcdef", k=5))
                + "-1c2d-3e4f-5a6b-7c8d9e0f1a2b",
                "bootID": _uid(rng),
                "kernelVersion": kernel,
                "osImage": "Amazon Linux 2023.7.20250512",
                "containerRuntimeVersion": "containerd://1.7.27",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": arch,
            },
            "images": images,
        },
    }
    if taints:
        node["spec"]["taints"] = taints
    return node


def make_minimal_node(
    name: str,
    created: datetime,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    rng: random.Random | None = None,
) -> dict[str, Any]:
    """A small Node: metadata, an empty spec and a Ready condition (for unit-ish tests)."""
    rng = rng or random.Random(name)
    meta: dict[str, Any] = {
        "name": name,
        "uid": _uid(rng),
        "creationTimestamp": rfc3339(created),
        "labels": {"kubernetes.io/hostname": name, **(labels or {})},
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": meta,
        "spec": {},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastHeartbeatTime": rfc3339(created),
                    "lastTransitionTime": rfc3339(created),
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": "",
                "osImage": "",
                "containerRuntimeVersion": "",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def mark_deleting(node: dict[str, Any], when: datetime, *, eks: bool = True) -> dict[str, Any]:
    """A copy of `node` being drained: deletionTimestamp set, finalizer (and disrupted taint)."""
    meta = dict(node["metadata"])
    meta["deletionTimestamp"] = rfc3339(when)
    meta["deletionGracePeriodSeconds"] = 0
    finalizers = list(meta.get("finalizers") or [])
    if "karpenter.sh/termination" not in finalizers:
        finalizers.append("karpenter.sh/termination")
    meta["finalizers"] = finalizers
    out = {**node, "metadata": meta}
    if eks:
        spec = dict(out.get("spec") or {})
        taints = [t for t in spec.get("taints") or [] if t.get("key") != "karpenter.sh/disrupted"]
        taints.append({"key": "karpenter.sh/disrupted", "effect": "NoSchedule"})
        spec["taints"] = taints
        out["spec"] = spec
    return out


def ip_name(seq: int, prefix: str = "ip-10-0-") -> str:
    """The seq-th EC2-style host name under `prefix` (ip-10-0-0-1.ec2.internal, ...)."""
    third, fourth = divmod(seq, 254)
    if third < 256:
        return f"{prefix}{third}-{fourth + 1}.ec2.internal"
    high, third = divmod(third, 256)
    return f"{prefix}{third}-{fourth + 1}-{high}.ec2.internal"


BIG_ANNOTATION = "example.com/last-applied-configuration"


def big_annotation(size: int) -> tuple[str, bytes]:
    """A short placeholder to store and the `size` bytes the server sends in its place.

    Thousands of nodes with 200 KB annotations would cost the server gigabytes (each stored
    version keeps its JSON twice); the server swaps the placeholder for the bytes only as an
    answer goes out (ApiServer.expand), so the client sees the real size. The bytes are a
    JSON-safe text that gzip shrinks about as much as a real applied configuration.
    """
    rng = random.Random(size)
    words = ["container", "image", "resources", "limits", "env", "value", "name", "port"]
    chunk = " ".join(f"{rng.choice(words)}-{rng.randrange(10**6)}" for _ in range(400))
    text = (chunk * (size // len(chunk) + 1))[:size]
    return f"@@big-annotation-{size}@@", text.encode()
