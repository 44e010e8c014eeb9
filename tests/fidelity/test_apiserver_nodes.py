"""Generated nodes, the Python-side API, and the standalone entry point."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import urllib3

from tests.kubeapi.apiserver import make_eks_node


def test_eks_node_looks_like_a_karpenter_node_of_about_10_kb():
    created = datetime(2025, 5, 1, tzinfo=UTC)
    sizes = []
    for i in range(50):
        node = make_eks_node(f"ip-10-0-1-{i}.ec2.internal", created, rng=random.Random(i))
        sizes.append(len(json.dumps(node, separators=(",", ":"))))
    assert min(sizes) >= 9_000 and max(sizes) <= 16_000
    meta = node["metadata"]
    labels = meta["labels"]
    for key in (
        "karpenter.sh/nodepool",
        "karpenter.sh/capacity-type",
        "karpenter.sh/initialized",
        "karpenter.sh/registered",
        "karpenter.k8s.aws/instance-family",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
        "beta.kubernetes.io/arch",
    ):
        assert labels[key]
    assert meta["annotations"]["alpha.kubernetes.io/provided-node-ip"] == "10.0.1.49"
    assert "karpenter.sh/nodepool-hash" in meta["annotations"]
    assert meta["finalizers"] == ["karpenter.sh/termination"]
    owner = meta["ownerReferences"][0]
    assert (owner["apiVersion"], owner["kind"], owner["blockOwnerDeletion"]) == (
        "karpenter.sh/v1",
        "NodeClaim",
        True,
    )
    assert {m["manager"] for m in meta["managedFields"]} >= {
        "kubelet",
        "karpenter",
        "kube-controller-manager",
    }
    assert meta["creationTimestamp"] == "2025-05-01T00:00:00Z"
    status = node["status"]
    assert len(status["conditions"]) == 5 and len(status["images"]) >= 30
    assert all(img["names"][0].split("@sha256:")[1] for img in status["images"])
    assert node["spec"]["providerID"].startswith("aws:///us-east-1")


def test_make_eks_node_overrides_labels_and_annotations():
    node = make_eks_node(
        "x",
        datetime.now(UTC),
        labels={"team": "a", "karpenter.sh/nodepool": None},
        annotations={"k": "v"},
    )
    assert node["metadata"]["labels"]["team"] == "a"
    assert "karpenter.sh/nodepool" not in node["metadata"]["labels"]
    assert node["metadata"]["annotations"]["k"] == "v"


def test_add_nodes_in_bulk_with_created_times(api):
    now = datetime(2025, 1, 1, tzinfo=UTC)
    names = api.add_nodes(1000, created=lambda i: now - timedelta(minutes=i))
    assert len(set(names)) == 1000 and api.node_names() == sorted(names)
    assert names[0] == "ip-10-0-0-1.ec2.internal"
    assert api.get_node(names[10])["metadata"]["creationTimestamp"] == "2024-12-31T23:50:00Z"
    more = api.add_nodes(2, eks=False)
    assert not set(more) & set(names)


def test_copies_handed_out_do_not_change_the_store(api):
    node = api.add_node("n1", eks=False)
    node["metadata"]["labels"]["mutated"] = "yes"
    fetched = api.get_node("n1")
    assert "mutated" not in fetched["metadata"]["labels"]
    fetched["metadata"]["labels"]["mutated"] = "yes"
    assert "mutated" not in api.get_node("n1")["metadata"]["labels"]
    rv = api.resource_version
    edited = api.edit_node("n1", lambda obj: obj["metadata"]["labels"].update(edited="1"))
    assert edited["metadata"]["labels"]["edited"] == "1"
    assert api.resource_version == rv + 1
    api.edit_node("n1", lambda obj: None)  # a person's save always stores
    assert api.resource_version == rv + 2


def test_kubeconfig_files(api, tmp_path):
    for identity in ("admin", "readonly", "noauth"):
        path = api.write_kubeconfig(tmp_path / f"{identity}.yaml", identity=identity, context="ctx")
        text = path.read_text()
        assert "current-context: ctx" in text
        if identity == "noauth":
            assert "token" not in text and api.token(identity) == ""
        else:
            assert api.token(identity) in text


def test_standalone_server_prints_a_parsable_line_and_stops_on_sigterm(tmp_path: Path):
    kc = tmp_path / "kc.yaml"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.kubeapi.apiserver",
            "--nodes",
            "7",
            "--young",
            "2",
            "--kubeconfig-out",
            str(kc),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline()
        words = line.split()
        assert words[:2] == ["listening", "on"]
        url = words[2]
        assert url.startswith("http://127.0.0.1:")
        assert words[3] == f"kubeconfig={kc}"
        assert kc.exists()
        token = next(t for t in kc.read_text().split() if t.startswith("admin-"))
        reply = urllib3.PoolManager().request(
            "GET", url + "/api/v1/nodes", headers={"Authorization": f"Bearer {token}"}
        )
        items = json.loads(reply.data)["items"]
        assert len(items) == 7
        now = datetime.now(UTC)
        ages = sorted(
            now - datetime.fromisoformat(i["metadata"]["creationTimestamp"]) for i in items
        )
        assert ages[1] < timedelta(minutes=5) < timedelta(hours=12) < ages[2]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
