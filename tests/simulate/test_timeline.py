"""Timeline files for `node-holder simulate`: every format, and malformed files answered with
one line naming the file and the record at fault."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconcile.rule.nodes import NodePoolOwn
from reconcile.simulate.timeline import Timeline, TimelineError, load_timeline
from tests.clusters import run_cli
from tests.kubeapi.apiserver import ApiServer

T0 = datetime(2024, 5, 14, tzinfo=UTC)
POOL = "karpenter.sh/nodepool"
KUBECTL = shutil.which("kubectl")


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def load(tmp_path: Path, name: str, text: str) -> Timeline:
    return load_timeline([write(tmp_path, name, text)])


def error(tmp_path: Path, name: str, text: str) -> str:
    path = write(tmp_path, name, text)
    with pytest.raises(TimelineError) as info:
        load_timeline([path])
    message = str(info.value)
    assert "\n" not in message
    return message.removeprefix(path)


def lives(timeline: Timeline) -> dict[str, tuple[datetime | None, datetime | None, dict]]:
    return {n.name: (n.created, n.deleted, dict(n.labels)) for n in timeline.nodes}


YAML = """\
# a comment
start: 2024-05-14T00:00:00Z
end: 2024-05-14T02:00:00+00:00
nodes:
  - name: sys-1
    created: 2024-05-01T00:00:00Z
    labels: {karpenter.sh/nodepool: system}
  - name: batch-1
    created: "2024-05-14T00:30:00.5Z"
    deleted: 2024-05-14T04:30:00+02:00
    labels:
      karpenter.sh/nodepool: batch
"""


# --- each format ----------------------------------------------------------------------


def test_yaml_with_start_end_offsets_and_fractions(tmp_path: Path) -> None:
    timeline = load(tmp_path, "t.yaml", YAML)
    assert timeline.start == T0
    assert timeline.end == T0 + timedelta(hours=2)
    assert lives(timeline) == {
        "sys-1": (datetime(2024, 5, 1, tzinfo=UTC), None, {POOL: "system"}),
        "batch-1": (
            T0 + timedelta(minutes=30, milliseconds=500),
            T0 + timedelta(hours=2, minutes=30),  # 04:30+02:00 is 02:30Z
            {POOL: "batch"},
        ),
    }


def test_json_same_as_yaml(tmp_path: Path) -> None:
    data = {
        "start": "2024-05-14T00:00:00Z",
        "nodes": [
            {"name": "a", "created": "2024-05-14T00:00:00Z", "deleted": None},
            {"name": "b", "created": "2024-05-14T00:10:00Z", "labels": {POOL: "batch"}},
        ],
    }
    timeline = load(tmp_path, "t.json", json.dumps(data, indent=2))
    assert timeline.start == T0
    assert lives(timeline) == {
        "a": (T0, None, {}),
        "b": (T0 + timedelta(minutes=10), None, {POOL: "batch"}),
    }


def test_format_is_sniffed_without_a_known_extension(tmp_path: Path) -> None:
    text = '{"nodes": [{"name": "a", "created": "2024-05-14T00:00:00Z"}]}'
    assert lives(load(tmp_path, "t2", text)) == {"a": (T0, None, {})}
    assert lives(load(tmp_path, "t3", YAML))["sys-1"][2] == {POOL: "system"}


def test_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("- {name: a, created: 2024-05-14T00:00:00Z}\n"))
    timeline = load_timeline(["-"])
    assert timeline.sources == ("<stdin>",)
    assert lives(timeline) == {"a": (T0, None, {})}


def node_object(name: str, created: str, labels: dict[str, str], deleting: str = "") -> dict:
    meta = {"name": name, "creationTimestamp": created, "labels": labels, "uid": "x"}
    if deleting:
        meta["deletionTimestamp"] = deleting
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": {}, "status": {}}


def test_kubectl_node_list_and_list_of_nodes(tmp_path: Path) -> None:
    items = [
        node_object("a", "2024-05-14T00:00:00Z", {POOL: "batch"}),
        node_object("b", "2024-05-14T00:05:00Z", {}, deleting="2024-05-14T00:25:00Z"),
    ]
    for kind in ("NodeList", "List"):
        data = {"apiVersion": "v1", "kind": kind, "items": items, "metadata": {}}
        assert lives(load(tmp_path, f"{kind}.json", json.dumps(data, indent=4))) == {
            "a": (T0, None, {POOL: "batch"}),
            "b": (T0 + timedelta(minutes=5), T0 + timedelta(minutes=25), {}),
        }


def test_kubectl_nodes_and_nodeclaims_keep_no_annotations(tmp_path: Path) -> None:
    """Today's annotations are not those a node had when it appeared, and a NodePool's hold
    settings that Karpenter copied from its template are not read on nodes: the
    replay reads them from a NodePool list only."""
    pool = {"node-holder.dev/hold-duration": "45m", "node-holder.dev/max-hold": "3h"}
    today = {
        "karpenter.sh/do-not-disrupt": "true",
        "node-holder.dev/owned-annotations": "karpenter.sh/do-not-disrupt",
        "karpenter.sh/nodepool-hash": "6821555240594823858",
    }
    node = node_object("a", "2024-05-14T00:00:00Z", {POOL: "batch"})
    node["metadata"]["annotations"] = {**pool, **today}
    claim = node_object("batch-x", "2024-05-14T00:00:00Z", {POOL: "batch"})
    claim.update(kind="NodeClaim", apiVersion="karpenter.sh/v1", status={"nodeName": "b"})
    claim["metadata"]["annotations"] = {**pool, "karpenter.sh/nodepool-hash": "1"}
    other = node_object("c", "2024-05-14T00:00:00Z", {})
    other["metadata"]["annotations"] = today
    data = {"apiVersion": "v1", "kind": "List", "items": [node, claim, other]}
    timeline = load(tmp_path, "nodes.json", json.dumps(data))
    assert {n.name: dict(n.annotations) for n in timeline.nodes} == {"a": {}, "b": {}, "c": {}}


def test_karpenter_nodeclaims_use_the_node_name_and_registration_time(tmp_path: Path) -> None:
    def claim(name: str, node: str | None, registered: str | None) -> dict:
        status: dict = {"conditions": []}
        if node:
            status["nodeName"] = node
        if registered:
            status["conditions"].append(
                {"type": "Registered", "status": "True", "lastTransitionTime": registered}
            )
        meta = {"name": name, "creationTimestamp": "2024-05-14T00:00:00Z", "labels": {POOL: "b"}}
        return {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": meta,
            "status": status,
        }

    data = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            claim("batch-x1", "ip-10-0-1-1.ec2.internal", "2024-05-14T00:01:10Z"),
            claim("batch-x2", "ip-10-0-1-2.ec2.internal", None),
            claim("batch-x3", None, None),  # still launching: no node yet
        ],
    }
    timeline = load(tmp_path, "claims.json", json.dumps(data))
    assert lives(timeline) == {
        "ip-10-0-1-1.ec2.internal": (T0 + timedelta(minutes=1, seconds=10), None, {POOL: "b"}),
        "ip-10-0-1-2.ec2.internal": (T0, None, {POOL: "b"}),
    }
    assert any("1 NodeClaim(s) without status.nodeName" in n for n in timeline.notes)


def test_files_merge_current_nodes_with_a_history(tmp_path: Path) -> None:
    """The live node from kubectl (with its labels) and its entry in a history file are one
    node; an earlier node of that name stays a life of its own."""
    nodes = {"kind": "NodeList", "items": [node_object("a", "2024-05-14T00:40:00Z", {POOL: "b"})]}
    history = (
        "nodes:\n"
        "  - {name: a, created: 2024-05-14T00:00:00Z, deleted: 2024-05-14T00:20:00Z}\n"
        "  - {name: a, created: 2024-05-14T00:40:02Z, deleted: 2024-05-14T01:00:00Z}\n"
    )
    timeline = load_timeline(
        [write(tmp_path, "nodes.json", json.dumps(nodes)), write(tmp_path, "h.yaml", history)]
    )
    got = sorted((n.created, n.deleted, dict(n.labels)) for n in timeline.nodes)
    assert got == [
        (T0, T0 + timedelta(minutes=20), {}),
        (T0 + timedelta(minutes=40), T0 + timedelta(hours=1), {POOL: "b"}),
    ]


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_real_kubectl_get_nodes_output_needs_no_conversion(tmp_path: Path) -> None:
    with ApiServer() as api:
        api.add_node("ip-10-0-1-1.ec2.internal", created=T0, labels={POOL: "batch"}, eks=False)
        api.add_node("ip-10-0-1-2.ec2.internal", created=T0 + timedelta(minutes=3), eks=False)
        kubeconfig = api.write_kubeconfig(tmp_path / "kc")
        proc = subprocess.run(
            [KUBECTL or "kubectl", "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )
    timeline = load(tmp_path, "nodes.json", proc.stdout)
    got = {n.name: (n.created, n.deleted, n.labels.get(POOL)) for n in timeline.nodes}
    assert got == {
        "ip-10-0-1-1.ec2.internal": (T0, None, "batch"),
        "ip-10-0-1-2.ec2.internal": (T0 + timedelta(minutes=3), None, None),
    }


# --- malformed files: one line naming the file and the record at fault ----------------------


def test_yaml_syntax_error_names_its_line(tmp_path: Path) -> None:
    text = "nodes:\n  - name: a\n    created: 2024-05-14T00:00:00Z\n   labels: {x: y}\n"
    message = error(tmp_path, "t.yaml", text)
    assert message.startswith(":4: not valid YAML"), message


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ("{name: b, created: yesterday}", "(name b): created 'yesterday' is not an RFC 3339 time"),
        ("{name: b, created: 2024-05-14}", "(name b): created '2024-05-14' is not an RFC 3339"),
        ("{name: b, created: 2024-05-14T00:00:00}", "(name b): created '2024-05-14T00:00:00' has"),
        ("{name: b}", "(name b): no `created` time; add `created: 2024-05-14T08:30:00Z`"),
        ("{created: 2024-05-14T00:00:00Z}", ": no name; add `name: <node name>`"),
        ("{name: B_1, created: 2024-05-14T00:00:00Z}", "(name B_1): 'B_1' is not a valid node"),
        (
            "{name: b, created: 2024-05-14T01:00:00Z, deleted: 2024-05-14T00:00:00Z}",
            "(name b): deleted 2024-05-14T00:00:00Z is before created 2024-05-14T01:00:00Z",
        ),
        ("{name: b, created: 2024-05-14T00:00:00Z, zone: x}", "(name b): unknown key 'zone'"),
        (
            "{name: b, created: 2024-05-14T00:00:00Z, labels: {pool: 3}}",
            "(name b): label pool has value 3, which is not text; quote it",
        ),
        ("{name: b, created: 2024-05-14T00:00:00Z, labels: {pool: 'a b'}}", "label pool='a b'"),
        (
            "{name: a, created: 2024-05-14T00:10:00Z}",
            "(name a): node 'a' is listed twice with overlapping lifetimes (first at nodes[0] "
            "(name a))",
        ),
    ],
)
def test_yaml_bad_entry_names_the_entry(tmp_path: Path, entry: str, words: str) -> None:
    """The record is named by its place and its name, whatever the file's layout."""
    text = "start: 2024-05-14T00:00:00Z\nnodes:\n  - {name: a, created: 2024-05-13T00:00:00Z}\n"
    message = error(tmp_path, "t.yaml", text + f"  - {entry}\n")
    assert message.startswith(": nodes[1]"), message
    assert words in message, message


def test_a_name_may_come_back_after_its_node_was_deleted(tmp_path: Path) -> None:
    text = (
        "nodes:\n"
        "  - {name: a, created: 2024-05-14T00:00:00Z, deleted: 2024-05-14T00:30:00Z}\n"
        "  - {name: a, created: 2024-05-14T00:30:00Z}\n"
    )
    assert len(load(tmp_path, "t.yaml", text).nodes) == 2


def test_json_syntax_error_names_its_line(tmp_path: Path) -> None:
    text = (
        '{\n  "nodes": [\n    {"name": "a", "created": "2024-05-14T00:00:00Z"}\n'
        '    {"name": "b"}\n  ]\n}\n'
    )
    message = error(tmp_path, "t.json", text)
    assert message.startswith(":4: not valid JSON: Expecting ',' delimiter"), message


def test_json_bad_value_names_the_record(tmp_path: Path) -> None:
    data = [
        {"name": "a", "created": "2024-05-14T00:00:00Z"},
        {"name": "ip-10-0-1-2", "created": "2024-05-14T00:00:00Z", "deleted": "soon"},
    ]
    message = error(tmp_path, "t.json", json.dumps(data, indent=2))
    assert message == (
        ": [1] (name ip-10-0-1-2): deleted 'soon' is not an RFC 3339 time; write an RFC 3339 "
        "time such as 2024-05-14T08:30:00Z"
    )


def test_kubectl_node_with_bad_timestamp_names_the_object(tmp_path: Path) -> None:
    items = [node_object("a", "2024-05-14T00:00:00Z", {}), node_object("b", "nope", {})]
    message = error(tmp_path, "nodes.json", json.dumps({"kind": "NodeList", "items": items}))
    assert message.startswith(": items[1] (Node b): creationTimestamp 'nope'"), message


@pytest.mark.parametrize("kind", ["Pod", "Event"])
def test_kubectl_list_of_something_else(tmp_path: Path, kind: str) -> None:
    """Node Events are no timeline any more: they live an hour (Prometheus keeps history)."""
    item = {"kind": kind, "metadata": {"name": "x"}}
    message = error(tmp_path, "l.json", json.dumps({"kind": "List", "items": [item]}))
    assert message.startswith(
        f": items[0] ({kind} x): kind {kind} is not Node, NodeClaim or NodePool"
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("just text\n", ": not a timeline"),
        ("machines: []\n", ": not a timeline: no `nodes:` list"),
        ("nodes: []\nstat: 2024-05-14T00:00:00Z\n", ": unknown key 'stat'"),
        ("nodes: {a: 1}\n", ": `nodes` must be a list"),
        ("start: soon\nnodes: []\n", ": start 'soon' is not an RFC 3339 time"),
        (
            "start: 2024-05-14T01:00:00Z\nend: 2024-05-14T00:00:00Z\nnodes: []\n",
            ": end 2024-05-14T00:00:00Z is not after start",
        ),
        ("- 3\n", ": [0]: each node entry must be a mapping"),
    ],
)
def test_not_a_timeline(tmp_path: Path, text: str, words: str) -> None:
    assert error(tmp_path, "t.yaml", text).startswith(words)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    assert "no nodes in the timeline" in error(tmp_path, "t.yaml", "nodes: []\n")
    with pytest.raises(TimelineError, match="no such file"):
        load_timeline([str(tmp_path / "absent.yaml")])


def test_cli_malformed_timeline_is_one_line_exit_2(tmp_path: Path) -> None:
    path = write(tmp_path, "t.yaml", "nodes:\n  - name: a\n    created: noon\n")
    result = run_cli("simulate", path)
    assert result.code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"node-holder: error: {path}: nodes[0] (name a): created 'noon' is not an RFC 3339 "
        "time; write an RFC 3339 time such as 2024-05-14T08:30:00Z\n"
    )


def test_entries_may_carry_the_annotations_a_node_appears_with(tmp_path: Path) -> None:
    timeline = load(
        tmp_path,
        "t.yaml",
        "nodes:\n"
        "  - name: a\n"
        "    created: 2024-05-14T00:00:00Z\n"
        "    annotations: {karpenter.sh/do-not-disrupt: 'false', team: x}\n"
        "  - {name: b, created: 2024-05-14T00:00:00Z}\n",
    )
    got = {n.name: dict(n.annotations) for n in timeline.nodes}
    assert got == {"a": {"karpenter.sh/do-not-disrupt": "false", "team": "x"}, "b": {}}


@pytest.mark.parametrize(
    ("annotations", "words"),
    [
        ("[x]", "annotations must be a mapping"),
        ("{karpenter.sh/do-not-disrupt: false}", "annotation karpenter.sh/do-not-disrupt has"),
        ("{'bad key!': x}", "annotation key 'bad key!' is not valid"),
    ],
)
def test_bad_annotations_name_the_entry(tmp_path: Path, annotations: str, words: str) -> None:
    text = (
        f"nodes:\n  - name: a\n    created: 2024-05-14T00:00:00Z\n    annotations: {annotations}\n"
    )
    message = error(tmp_path, "t.yaml", text)
    assert message.startswith(f": nodes[0] (name a): {words}"), message


NODEPOOLS = {
    "kind": "NodePoolList",
    "apiVersion": "karpenter.sh/v1",
    "items": [
        {
            "kind": "NodePool",
            "metadata": {
                "name": "batch",
                "annotations": {"node-holder.dev/hold-duration": "45m", "other": "x"},
            },
            "spec": {"template": {"spec": {}}},
        },
        {"kind": "NodePool", "metadata": {"name": "web"}},
    ],
}


def test_a_nodepool_list_gives_each_pool_its_own_settings_in_the_replay(tmp_path: Path) -> None:
    """`kubectl get nodepools -o json` beside the nodes: batch's NodePool says 45m. One new
    batch node holds the old nodes 45 one-minute runs; a web node the default 20m. The same
    through one NodePool alone. The batch node's own annotation (10m) is not read, as in a
    run: without the NodePools, 20m."""
    nodes = write(
        tmp_path,
        "nodes.yaml",
        "nodes:\n"
        "- {name: old, created: 2024-05-13T00:00:00Z}\n"
        "- {name: b1, created: 2024-05-14T00:00:00Z, labels: {karpenter.sh/nodepool: batch},"
        " annotations: {node-holder.dev/hold-duration: 10m}}\n"
        "- {name: w1, created: 2024-05-14T02:00:00Z, labels: {karpenter.sh/nodepool: web}}\n",
    )
    pools = write(tmp_path, "nodepools.json", json.dumps(NODEPOOLS))
    timeline = load_timeline([nodes, pools])
    assert timeline.nodepool_settings == {"batch": NodePoolOwn("batch", "45m", None), "web": None}
    one = write(tmp_path, "batch.json", json.dumps(NODEPOOLS["items"][0]))
    window = ("--start", "2024-05-14T00:00:00Z", "--end", "2024-05-14T03:00:00Z")
    for given in ([nodes], [nodes, pools], [nodes, one]):
        result = run_cli("simulate", *given, *window, "--output", "json")
        assert result.code == 0, result.stderr
        (column,) = json.loads(result.stdout)["configurations"]
        held = 20 + 20 if given == [nodes] else 45 + 20
        assert column["heldRuns"] == held, given


def test_a_nodepool_without_a_name_names_the_record(tmp_path: Path) -> None:
    message = error(tmp_path, "pools.json", json.dumps({"kind": "NodePool", "metadata": {}}))
    assert message.startswith(": items[0]: no metadata.name"), message
