"""Timeline files for `node-holder simulate`: every format, and malformed files pointing at
the line at fault."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

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


def test_csv_with_comments_labels_and_empty_deleted(tmp_path: Path) -> None:
    text = (
        "# exported from our logs\n"
        "name,created,deleted,labels\n"
        "a,2024-05-14T00:00:00Z,,karpenter.sh/nodepool=system\n"
        "\n"
        'b,2024-05-14T00:10:00Z,2024-05-14T00:40:00Z,"karpenter.sh/nodepool=batch;'
        'node.kubernetes.io/instance-type=c6i.4xlarge"\n'
    )
    timeline = load(tmp_path, "t.csv", text)
    assert lives(timeline) == {
        "a": (T0, None, {POOL: "system"}),
        "b": (
            T0 + timedelta(minutes=10),
            T0 + timedelta(minutes=40),
            {POOL: "batch", "node.kubernetes.io/instance-type": "c6i.4xlarge"},
        ),
    }


def test_format_is_sniffed_without_a_known_extension(tmp_path: Path) -> None:
    assert lives(load(tmp_path, "t.txt", "name,created\na,2024-05-14T00:00:00Z\n")) == {
        "a": (T0, None, {})
    }
    assert lives(
        load(tmp_path, "t2", '{"nodes": [{"name": "a", "created": "2024-05-14T00:00:00Z"}]}')
    )
    assert lives(load(tmp_path, "t3", YAML))["sys-1"][2] == {POOL: "system"}


def test_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("name,created\na,2024-05-14T00:00:00Z\n"))
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


def test_kubectl_nodes_and_nodeclaims_keep_their_nodepools_hold_settings_only(
    tmp_path: Path,
) -> None:
    """Karpenter copies the NodePool template's annotations onto the NodeClaim and the node;
    of today's annotations, only those two are the node's since it appeared."""
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
    assert {n.name: dict(n.annotations) for n in timeline.nodes} == {"a": pool, "b": pool, "c": {}}


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


def event(reason: str, node: str, when: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{node}.{reason}", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": node},
        "reason": reason,
        "firstTimestamp": when,
        "lastTimestamp": when,
    }


def test_node_events_pair_registration_and_removal(tmp_path: Path) -> None:
    data = {
        "kind": "List",
        "items": [
            event("RegisteredNode", "a", "2024-05-14T00:00:00Z"),
            event("NodeReady", "a", "2024-05-14T00:00:30Z"),  # ignored
            event("RemovingNode", "a", "2024-05-14T00:20:00Z"),
            event("RegisteredNode", "a", "2024-05-14T00:40:00Z"),  # the name comes back
            event("RemovingNode", "old", "2024-05-14T00:10:00Z"),  # created before the events
        ],
    }
    timeline = load(tmp_path, "events.json", json.dumps(data))
    got = sorted((n.name, n.created, n.deleted) for n in timeline.nodes if n.name == "a")
    assert got == [
        ("a", T0, T0 + timedelta(minutes=20)),
        ("a", T0 + timedelta(minutes=40), None),
    ]
    old = next(n for n in timeline.nodes if n.name == "old")
    assert (old.created, old.deleted) == (None, T0 + timedelta(minutes=10))
    assert any("only have a removal Event" in n for n in timeline.notes)


def test_files_merge_current_nodes_with_event_history(tmp_path: Path) -> None:
    nodes = {
        "kind": "NodeList",
        "items": [node_object("a", "2024-05-14T00:40:00Z", {POOL: "batch"})],
    }
    events = {
        "kind": "List",
        "items": [
            event("RegisteredNode", "a", "2024-05-14T00:00:00Z"),
            event("RemovingNode", "a", "2024-05-14T00:20:00Z"),
            event("RegisteredNode", "a", "2024-05-14T00:40:02Z"),
        ],
    }
    timeline = load_timeline(
        [
            write(tmp_path, "nodes.json", json.dumps(nodes)),
            write(tmp_path, "events.json", json.dumps(events)),
        ]
    )
    got = sorted((n.created, n.deleted, dict(n.labels)) for n in timeline.nodes)
    assert got == [
        (T0, T0 + timedelta(minutes=20), {}),  # an earlier node of that name: history only
        (T0 + timedelta(minutes=40), None, {POOL: "batch"}),  # the live one, labels kept
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


# --- malformed files: one line, the file and the line at fault ------------------------


def test_yaml_syntax_error_names_its_line(tmp_path: Path) -> None:
    text = "nodes:\n  - name: a\n    created: 2024-05-14T00:00:00Z\n   labels: {x: y}\n"
    message = error(tmp_path, "t.yaml", text)
    assert message.startswith(":4: not valid YAML"), message


@pytest.mark.parametrize(
    ("entry", "line", "words"),
    [
        ("  - name: b\n    created: yesterday\n", 6, "created 'yesterday' is not an RFC 3339 time"),
        ("  - name: b\n    created: 2024-05-14\n", 6, "is not an RFC 3339 time"),
        ("  - name: b\n    created: 2024-05-14T00:00:00\n", 6, "has no time zone"),
        ("  - name: b\n", 5, "no `created` time"),
        ("  - created: 2024-05-14T00:00:00Z\n", 5, "has no name"),
        ("  - name: B_1\n    created: 2024-05-14T00:00:00Z\n", 5, "not a valid node name"),
        (
            "  - name: b\n    created: 2024-05-14T01:00:00Z\n    deleted: 2024-05-14T00:00:00Z\n",
            7,
            "deleted 2024-05-14T00:00:00Z is before created 2024-05-14T01:00:00Z",
        ),
        ("  - name: b\n    created: 2024-05-14T00:00:00Z\n    zone: x\n", 7, "unknown key 'zone'"),
        (
            "  - name: b\n    created: 2024-05-14T00:00:00Z\n    labels: {pool: 3}\n",
            7,
            "label pool has value 3, which is not text; quote it",
        ),
        (
            "  - name: b\n    created: 2024-05-14T00:00:00Z\n    labels: {pool: 'a b'}\n",
            7,
            "label pool='a b'",
        ),
        (
            "  - name: a\n    created: 2024-05-14T00:10:00Z\n",
            5,
            "node 'a' is listed twice with overlapping lifetimes (first at line 3)",
        ),
    ],
)
def test_yaml_bad_entry_names_the_line_of_the_entry(
    tmp_path: Path, entry: str, line: int, words: str
) -> None:
    text = "start: 2024-05-14T00:00:00Z\nnodes:\n  - name: a\n    created: 2024-05-13T00:00:00Z\n"
    message = error(tmp_path, "t.yaml", text + entry)
    assert message.startswith(f":{line}: "), message
    assert words in message


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


def test_json_bad_value_names_its_line(tmp_path: Path) -> None:
    data = {
        "nodes": [
            {"name": "a", "created": "2024-05-14T00:00:00Z"},
            {"name": "b", "created": "2024-05-14T00:00:00Z", "deleted": "soon"},
        ]
    }
    text = json.dumps(data, indent=2)
    line = next(i for i, text_line in enumerate(text.splitlines(), 1) if '"soon"' in text_line)
    message = error(tmp_path, "t.json", text)
    assert message.startswith(f":{line}: deleted 'soon' is not an RFC 3339 time"), message


def test_kubectl_node_with_bad_timestamp_names_its_line(tmp_path: Path) -> None:
    items = [node_object("a", "2024-05-14T00:00:00Z", {}), node_object("b", "nope", {})]
    text = json.dumps({"kind": "NodeList", "items": items}, indent=4)
    line = next(i for i, text_line in enumerate(text.splitlines(), 1) if '"nope"' in text_line)
    message = error(tmp_path, "nodes.json", text)
    assert message.startswith(f":{line}: creationTimestamp 'nope'"), message


def test_kubectl_list_of_something_else(tmp_path: Path) -> None:
    text = json.dumps({"kind": "List", "items": [{"kind": "Pod", "metadata": {}}]}, indent=2)
    message = error(tmp_path, "pods.json", text)
    assert message.startswith(":5: kind Pod is not Node, NodeClaim or Event"), message


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("just text\n", ":1: not a timeline"),
        ("machines: []\n", ":1: not a timeline: no `nodes:` list"),
        ("nodes: []\nstat: 2024-05-14T00:00:00Z\n", ":2: unknown key 'stat'"),
        ("nodes: {a: 1}\n", ":1: `nodes` must be a list"),
        (
            "start: 2024-05-14T01:00:00Z\nend: 2024-05-14T00:00:00Z\nnodes: []\n",
            ":2: end 2024-05-14T00:00:00Z is not after start",
        ),
    ],
)
def test_not_a_timeline(tmp_path: Path, text: str, words: str) -> None:
    assert error(tmp_path, "t.yaml", text).startswith(words)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("name,born\n", ":1: unknown column 'born'"),
        ("created,deleted\n", ":1: no 'name' column"),
        ("", ":1: empty CSV"),
        ("# c\n\nname,created\na,2024-05-14T00:00:00Z\nb,bad\n", ":5: created 'bad' is not"),
        ("name,created,labels\na,2024-05-14T00:00:00Z,pool\n", ":2: label 'pool' has no '='"),
        (
            "name,created,annotations\na,2024-05-14T00:00:00Z,node-holder.dev/hold-duration\n",
            ":2: annotation 'node-holder.dev/hold-duration' has no '='; write annotations as k=v",
        ),
        ("name,created\na,2024-05-14T00:00:00Z,x\n", ":2: 3 fields but the header has 2"),
        (
            "name,created,deleted\na,2024-05-14T01:00:00Z,2024-05-14T00:00:00Z\n",
            ":2: deleted 2024-05-14T00:00:00Z is before created",
        ),
        (
            "name,created\na,2024-05-14T00:00:00Z\na,2024-05-14T00:01:00Z\n",
            ":3: node 'a' is listed twice with overlapping lifetimes (first at line 2)",
        ),
    ],
)
def test_csv_errors_name_the_row(tmp_path: Path, text: str, words: str) -> None:
    message = error(tmp_path, "t.csv", text)
    assert message.startswith(words), message


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
        f"node-holder: error: {path}:3: created 'noon' is not an RFC 3339 time; "
        "write an RFC 3339 time such as 2024-05-14T08:30:00Z\n"
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
        ("[x]", ":4: annotations must be a mapping"),
        ("{karpenter.sh/do-not-disrupt: false}", ":4: annotation karpenter.sh/do-not-disrupt has"),
        ("{'bad key!': x}", ":4: annotation key 'bad key!' is not valid"),
    ],
)
def test_bad_annotations_name_the_line(tmp_path: Path, annotations: str, words: str) -> None:
    text = (
        f"nodes:\n  - name: a\n    created: 2024-05-14T00:00:00Z\n    annotations: {annotations}\n"
    )
    message = error(tmp_path, "t.yaml", text)
    assert message.startswith(words), message
