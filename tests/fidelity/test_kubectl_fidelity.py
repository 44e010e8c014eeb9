"""The real kubectl against the API test server: if kubectl is happy, the server is close enough."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import urllib3

from tests.kubeapi.apiserver import ApiServer

KUBECTL = shutil.which("kubectl")
pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH"),
]
HOLD = "karpenter.sh/do-not-disrupt"
NODE = "ip-10-0-3-7.ec2.internal"
# What kubectl may print on stderr without anything being wrong.
EXPECTED_STDERR = ("No resources found",)


class Kubectl:
    """Runs kubectl with a private HOME / cache dir so nothing leaks between tests."""

    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.kubeconfig = kubeconfig
        self.env = {
            **os.environ,
            "HOME": str(home),
            "KUBECACHEDIR": str(home / "cache"),
            "KUBECONFIG": str(kubeconfig),
        }

    def run(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [KUBECTL or "kubectl", "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
            check=False,
        )
        if ok:
            assert proc.returncode == 0, proc.stderr
            unexpected = [
                line
                for line in proc.stderr.splitlines()
                if line.strip() and not line.startswith(EXPECTED_STDERR)
            ]
            assert unexpected == [], proc.stderr
        return proc


@pytest.fixture
def kubectl(kubeconfig: Path, tmp_path: Path) -> Kubectl:
    return Kubectl(kubeconfig, tmp_path)


@pytest.fixture
def node(api: ApiServer) -> str:
    return api.add_node(NODE, annotations={"owner": "team-a"})["metadata"]["name"]


def test_get_nodes_table_with_server_side_ages(api, kubectl):
    now = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    api.set_clock(now)
    api.add_node("ip-10-0-0-10.ec2.internal", created=now - timedelta(days=3, hours=4))
    api.add_node("ip-10-0-0-11.ec2.internal", created=now - timedelta(seconds=90), eks=False)
    api.mark_deleting("ip-10-0-0-11.ec2.internal")
    out = kubectl.run("get", "nodes").stdout.splitlines()
    assert out[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    rows = {line.split()[0]: line.split() for line in out[1:]}
    assert rows["ip-10-0-0-10.ec2.internal"][1:4] == ["Ready", "<none>", "3d4h"]
    assert rows["ip-10-0-0-11.ec2.internal"][3] == "90s"
    wide = kubectl.run("get", "nodes", "-o", "wide").stdout
    assert "INTERNAL-IP" in wide and "10.0.0.10" in wide
    listed = [r for r in api.requests if r.path == "/api/v1/nodes"]
    assert listed[-1].accept.startswith("application/json;as=Table;v=v1;g=meta.k8s.io")


def test_get_nodes_with_label_selector(api, kubectl):
    api.add_node("a", eks=False, labels={"tier": "web"})
    api.add_node("b", eks=False, labels={"tier": "db"})
    out = kubectl.run("get", "nodes", "-l", "tier=web", "-o", "name").stdout.split()
    assert out == ["node/a"]
    out = kubectl.run("get", "nodes", "-l", "tier notin (web)", "-o", "name").stdout.split()
    assert out == ["node/b"]
    bad = kubectl.run("get", "nodes", "-l", "tier in web", ok=False)
    assert bad.returncode != 0
    assert "unable to parse requirement" in bad.stderr


def test_get_node_json_matches_the_store(api, kubectl, node):
    stored = api.get_node(node)
    full = kubectl.run("get", "node", node, "-o", "json", "--show-managed-fields")
    assert json.loads(full.stdout) == stored
    shown = json.loads(kubectl.run("get", "node", node, "-o", "json").stdout)
    del stored["metadata"]["managedFields"]  # kubectl hides them by default
    assert shown == stored


def test_annotate_overwrite_and_remove(api, kubectl, node):
    kubectl.run("annotate", "node", node, f"{HOLD}=true")
    assert api.annotations(node)[HOLD] == "true"
    refused = kubectl.run("annotate", "node", node, f"{HOLD}=false", ok=False)
    assert refused.returncode != 0 and "already has a value" in refused.stderr
    assert api.annotations(node)[HOLD] == "true"
    kubectl.run("annotate", "node", node, f"{HOLD}=false", "--overwrite")
    assert api.annotations(node)[HOLD] == "false"
    kubectl.run("annotate", "node", node, f"{HOLD}-")
    assert HOLD not in api.annotations(node)
    assert api.annotations(node)["owner"] == "team-a"
    patches = [w for w in api.writes() if w.method == "PATCH"]
    assert {w.content_type for w in patches} == {"application/merge-patch+json"}
    assert all(w.query.get("fieldManager") == "kubectl-annotate" for w in patches)
    managers = {m["manager"] for m in api.get_node(node)["metadata"]["managedFields"]}
    assert "kubectl-annotate" not in managers  # it owns nothing once its annotation is gone


def test_label(api, kubectl, node):
    kubectl.run("label", "node", node, "team=platform")
    assert api.get_node(node)["metadata"]["labels"]["team"] == "platform"
    bad = kubectl.run("label", "node", node, "team=not valid", ok=False)
    assert bad.returncode != 0


@pytest.mark.parametrize(
    "case",
    [
        ("merge", '{"metadata":{"annotations":{"x.io/m":"1"}}}', {"x.io/m": "1"}),
        (
            "json",
            '[{"op":"add","path":"/metadata/annotations/x.io~1j","value":"2"}]',
            {"x.io/j": "2"},
        ),
        ("strategic", '{"metadata":{"annotations":{"x.io/s":"3"}}}', {"x.io/s": "3"}),
    ],
)
def test_patch_types(api, kubectl, node, case):
    kind, patch, expect = case
    kubectl.run("patch", "node", node, "--type", kind, "-p", patch)
    annotations = api.annotations(node)
    assert {k: annotations.get(k) for k in expect} == expect
    assert annotations["owner"] == "team-a"


def test_failed_json_patch_test_op(api, kubectl, node):
    patch = '[{"op":"test","path":"/metadata/annotations/owner","value":"nobody"}]'
    proc = kubectl.run("patch", "node", node, "--type", "json", "-p", patch, ok=False)
    assert proc.returncode != 0
    assert "the server rejected our request due to an error in our request" in proc.stderr


def _post_event(api: ApiServer, node: str) -> None:
    event = {
        "metadata": {"name": f"{node}.hold", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": node, "uid": node, "apiVersion": "v1"},
        "reason": "Held",
        "message": "holding node for 10m after scale-up",
        "type": "Normal",
        "source": {"component": "node-holder"},
        "firstTimestamp": (api.now() - timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "lastTimestamp": (api.now() - timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "count": 1,
    }
    reply = urllib3.PoolManager().request(
        "POST",
        api.url + "/api/v1/namespaces/default/events",
        body=json.dumps(event).encode(),
        headers={
            "Authorization": f"Bearer {api.token('admin')}",
            "Content-Type": "application/json",
        },
    )
    assert reply.status == 201


def test_get_events_and_describe_node(api, kubectl, node):
    empty = kubectl.run("get", "events", "-A")
    assert "No resources found" in empty.stderr
    _post_event(api, node)
    out = kubectl.run("get", "events", "-A").stdout.splitlines()
    assert out[0].split()[:4] == ["NAMESPACE", "LAST", "SEEN", "TYPE"]
    assert "Held" in out[1] and f"node/{node}" in out[1] and "2m" in out[1]
    described = kubectl.run("describe", "node", node).stdout
    assert f"Name:               {node}" in described
    assert f"{HOLD}" not in described
    assert "holding node for 10m after scale-up" in described
    assert f"HolderIdentity:  {node}" in described
    assert "Non-terminated Pods:          (0 in total)" in described


def test_readonly_identity_is_forbidden_to_write(api, tmp_path, node):
    readonly = Kubectl(api.write_kubeconfig(tmp_path / "ro.yaml", identity="readonly"), tmp_path)
    assert readonly.run("get", "node", node, "-o", "name").stdout.strip() == f"node/{node}"
    proc = readonly.run("annotate", "node", node, f"{HOLD}=true", ok=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f'Error from server (Forbidden): nodes "{node}" is forbidden: User '
        '"system:serviceaccount:kube-system:node-viewer" cannot patch resource "nodes" in API '
        'group "" at the cluster scope'
    )
    assert HOLD not in api.annotations(node)
