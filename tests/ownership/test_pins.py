"""A person's pin: `node-holder pin` and `unpin`, and a pin made with plain kubectl.

A pinned hold key survives the end of a hold, every reconcile and every release; unpin
hands back to the normal rule only what node-holder set, and a person's key stays theirs.
Every case runs the real CLI (and, for the kubectl pin, the real kubectl) against the API
test server.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from tests.clusters import CliResult, run_cli
from tests.kubeapi.apiserver import ApiServer, RequestInfo

KEY = "karpenter.sh/do-not-disrupt"
CA_KEY = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
MARKER = "node-holder.dev/owned-annotations"
PINNED = "node-holder.dev/pinned"
OURS = {KEY: "true", MARKER: KEY}
PINNED_KEY = {KEY: "true", PINNED: KEY}  # a person's "true", pinned
PINNED_OURS = {**OURS, PINNED: KEY}  # pinned over a value node-holder wrote: the claim stays
HOLD = timedelta(minutes=20)


def run(kubeconfig: Path, command: str, *args: str) -> CliResult:
    return run_cli(command, "--kubeconfig", str(kubeconfig), *args)


def cluster(api: ApiServer, **annotations: dict[str, str]) -> None:
    """Old nodes with the given annotations, and a young node that holds the cluster."""
    for name, found in annotations.items():
        api.add_node(name, created=api.now() - timedelta(hours=3), eks=False, annotations=found)
    api.add_node("young", created=api.now() - timedelta(minutes=2), eks=False)


def test_a_pin_survives_the_end_of_a_hold_reconcile_and_release(
    api: ApiServer, kubeconfig: Path
) -> None:
    cluster(api, a={}, b={})
    assert run(kubeconfig, "reconcile").code == 0
    assert api.annotations("a") == OURS  # held by us, as every node

    pinned = run(kubeconfig, "pin", "a")

    assert pinned.code == 0, pinned.stderr
    assert pinned.lines == [
        f"node/a: pinned {KEY}",
        f"pin {KEY}; 1 nodes: 1 pinned, 0 unchanged",
    ]
    assert api.annotations("a") == PINNED_OURS  # pinned; the marker still says who wrote it
    api.advance_clock(HOLD)
    ended = run(kubeconfig, "reconcile")
    assert ended.code == 0, ended.stderr
    assert api.annotations("b") == {} and api.annotations("young") == {}
    assert api.annotations("a") == PINNED_OURS
    assert "1 pinned" in ended.lines[-1]
    assert run(kubeconfig, "release").code == 0
    assert api.annotations("a") == PINNED_OURS
    # status shows it, in text and JSON.
    text = run(kubeconfig, "status", "--nodes")
    rows = {line.split()[0]: line for line in text.lines if line.startswith(("a ", "b "))}
    assert "pinned" in rows["a"].split() and "pinned" not in rows["b"]
    lines = run(kubeconfig, "status", "--nodes", "--output", "json").lines[:-1]
    nodes = {n["node"]: n for n in map(json.loads, lines)}
    assert nodes["a"]["state"] == "pinned" and nodes["a"]["annotations"] == {KEY: "pinned"}
    # Pinning again changes nothing, and says the node is already pinned (dry run too).
    for dry in (("--dry-run",), ()):
        again = run(kubeconfig, "pin", "a", *dry)
        assert again.lines == [
            f"pin {KEY}; 1 nodes: 0 {'would be ' * bool(dry)}pinned, 1 already pinned, 0 unchanged"
        ]
        assert (
            run(kubeconfig, "pin", "a", *dry, "--output", "json").json["summary"]["alreadyPinned"]
            == 1
        )


def test_unpin_hands_the_key_back_and_the_next_run_removes_it(
    api: ApiServer, kubeconfig: Path
) -> None:
    cluster(api, a={})
    assert run(kubeconfig, "pin", "a").code == 0
    api.advance_clock(HOLD)

    unpinned = run(kubeconfig, "unpin", "a")
    assert unpinned.code == 0, unpinned.stderr
    assert unpinned.lines[0] == f"node/a: unpinned {KEY}"
    assert api.annotations("a") == OURS  # claimed again: the normal rule applies

    result = run(kubeconfig, "reconcile")
    assert result.code == 0, result.stderr
    assert api.annotations("a") == {}  # no hold due: gone


def test_unpin_during_a_hold_keeps_it_while_the_hold_lasts(
    api: ApiServer, kubeconfig: Path
) -> None:
    cluster(api, a={})
    assert run(kubeconfig, "pin", "a", "--annotation", f"{KEY},{CA_KEY}").code == 0
    both = f"{CA_KEY},{KEY}"
    assert api.annotations("a") == {KEY: "true", CA_KEY: "true", PINNED: both, MARKER: both}
    assert run(kubeconfig, "unpin", "a").code == 0  # only the default key
    assert api.annotations("a") == {KEY: "true", CA_KEY: "true", PINNED: CA_KEY, MARKER: both}
    assert run(kubeconfig, "reconcile").code == 0
    assert api.annotations("a")[KEY] == "true"  # still held: the young node holds the cluster
    api.advance_clock(HOLD)
    assert run(kubeconfig, "reconcile", "--annotation", f"{KEY},{CA_KEY}").code == 0
    # The other pin stays, with the claim that hands it back once it is unpinned.
    assert api.annotations("a") == {CA_KEY: "true", PINNED: CA_KEY, MARKER: CA_KEY}
    assert run(kubeconfig, "unpin", "a", "--annotation", CA_KEY).code == 0
    assert run(kubeconfig, "reconcile", "--annotation", f"{KEY},{CA_KEY}").code == 0
    assert api.annotations("a") == {}  # as before the pins


def test_a_persons_true_survives_pin_unpin_and_the_end_of_a_hold(
    api: ApiServer, kubeconfig: Path
) -> None:
    """The person's key was theirs before the pin and is theirs after: unpin claims nothing,
    and no run removes it or records a HoldEnded for it."""
    cluster(api, a={KEY: "true", "team": "x"})
    assert run(kubeconfig, "pin", "a").code == 0
    assert api.annotations("a") == {**PINNED_KEY, "team": "x"}
    api.advance_clock(HOLD)
    unpinned = run(kubeconfig, "unpin", "a")
    assert unpinned.code == 0 and unpinned.lines[0] == f"node/a: unpinned {KEY}"
    assert api.annotations("a") == {KEY: "true", "team": "x"}  # not claimed: still theirs
    ended = run(kubeconfig, "reconcile")
    assert ended.code == 0, ended.stderr
    assert api.annotations("a") == {KEY: "true", "team": "x"}
    assert run(kubeconfig, "release").code == 0
    assert api.annotations("a") == {KEY: "true", "team": "x"}
    assert [e["reason"] for e in api.events if e["reason"] == "HoldEnded"] == []


def test_pin_refuses_a_persons_other_value_and_pins_the_rest(
    api: ApiServer, kubeconfig: Path
) -> None:
    """A person's "false" exempts the node from the hold: pin would overwrite it and unpin
    could not give it back, so pin leaves the node as it is and says why (exit 1)."""
    cluster(api, a={KEY: "false"}, b={})
    result = run(kubeconfig, "pin", "a", "b")
    assert result.code == 1
    why = f"{KEY} is 'false', someone else's value; to pin it, remove it first"
    assert f"node/a: not pinned: {why} (kubectl annotate node a {KEY}-)" in result.lines
    assert result.stderr.strip().startswith("node-holder: error: 1 node(s) not pinned: a (")
    assert api.annotations("a") == {KEY: "false"}
    assert api.annotations("b") == {**OURS, PINNED: KEY}
    assert [w.path for w in api.writes()] == ["/api/v1/nodes/b"]


def test_unpin_of_a_node_that_is_not_pinned_names_it(api: ApiServer, kubeconfig: Path) -> None:
    cluster(api, a={}, b={})
    assert run(kubeconfig, "pin", "b").code == 0
    result = run(kubeconfig, "unpin", "a", "b")
    assert result.code == 0, result.stderr
    assert "node/a: not pinned" in result.lines and "node/b: not pinned" not in result.lines
    assert api.annotations("a") == {}


@pytest.mark.parametrize("command", ["pin", "unpin"])
@pytest.mark.parametrize("name", ["", "Bad_Name", "a/b", "x" * 254])
def test_a_name_no_node_can_have_exits_2_before_any_request(
    api: ApiServer, kubeconfig: Path, command: str, name: str
) -> None:
    cluster(api, a={})
    result = run(kubeconfig, command, "a", name)
    assert result.code == 2 and result.stdout == ""
    fix = "give a name as `kubectl get nodes` prints it"
    assert result.stderr == f"node-holder: error: NODE: {name!r} is not a node name; {fix}\n"
    assert api.requests == []


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_a_pin_made_with_kubectl_survives_where_a_plain_annotate_does_not(
    api: ApiServer, kubeconfig: Path
) -> None:
    """During a hold the value is already "true": kubectl says "annotated", but without the
    pin the tool still owns the key and removes it when the hold ends."""
    cluster(api, pinned={}, plain={})
    assert run(kubeconfig, "reconcile").code == 0
    kubectl = ["kubectl", "--kubeconfig", str(kubeconfig), "annotate", "node", "--overwrite"]
    for args in (
        ["pinned", f"{PINNED}={KEY}", f"{KEY}=true"],
        ["plain", f"{KEY}=true"],
    ):
        done = subprocess.run([*kubectl, *args], capture_output=True, text=True, check=False)
        assert done.returncode == 0 and "annotated" in done.stdout, done.stderr

    during = run(kubeconfig, "reconcile")
    assert during.code == 0, during.stderr
    assert api.annotations("pinned") == PINNED_OURS  # the claim says node-holder wrote it
    assert "node/pinned" not in during.stdout  # nothing to change
    api.advance_clock(HOLD)
    assert run(kubeconfig, "reconcile").code == 0
    assert run(kubeconfig, "release").code == 0
    assert api.annotations("pinned") == PINNED_OURS
    assert api.annotations("plain") == {}  # kubectl's "annotated" changed nothing
    # The person takes the pin away with kubectl too: the key node-holder set is not
    # abandoned, the next run removes it.
    unpin = [*kubectl[:-1], "pinned", f"{PINNED}-"]
    assert subprocess.run(unpin, capture_output=True, text=True, check=False).returncode == 0
    api.add_node("younger", created=api.now(), eks=False)
    api.advance_clock(HOLD)
    assert run(kubeconfig, "reconcile").code == 0
    assert api.annotations("pinned") == {}


def test_pin_of_a_missing_node_exits_1_naming_it_and_pins_the_others(
    api: ApiServer, kubeconfig: Path
) -> None:
    cluster(api, a={})
    result = run(kubeconfig, "pin", "a", "ghost", "--output", "json")
    assert result.code == 1
    assert result.stderr.strip() == "node-holder: error: 1 node(s) not found: ghost"
    assert api.annotations("a") == PINNED_OURS
    first, last = json.loads(result.lines[0]), result.json
    assert first["node"] == "a" and first["action"] == "pin" and first["result"] == "patched"
    assert last["errors"] == ["node/ghost: not found"] and last["summary"]["pinned"] == 1
    text = run(kubeconfig, "unpin", "ghost")
    assert text.code == 1 and "node/ghost: not found" in text.lines


def test_pin_dry_run_prints_the_patch_and_writes_nothing(api: ApiServer, kubeconfig: Path) -> None:
    cluster(api, a=dict(OURS))
    result = run(kubeconfig, "pin", "a", "--dry-run")
    body = {"metadata": {"annotations": {PINNED: KEY}, "resourceVersion": "1"}}
    body["metadata"]["resourceVersion"] = api.get_node("a")["metadata"]["resourceVersion"]
    assert result.code == 0, result.stderr
    assert result.lines == [
        f"node/a: would pin {KEY} {json.dumps(body, separators=(',', ':'))}",
        f"pin {KEY}; 1 nodes: 1 would be pinned, 0 unchanged",
    ]
    assert api.writes() == []


def test_pin_reads_again_and_decides_again_after_a_conflict(
    api: ApiServer, kubeconfig: Path
) -> None:
    """A person's edit between the list and the pin's patch: 409, read again, pin what is
    there now, and keep the person's edit."""
    cluster(api, a={})
    edited: list[bool] = []

    def person(req: RequestInfo) -> None:
        if req.method == "PATCH" and req.path == "/api/v1/nodes/a" and not edited:
            edited.append(True)
            api.set_annotation("a", "team", "x")

    api.on_request(person)
    result = run(kubeconfig, "pin", "a")
    assert result.code == 0, result.stderr
    assert result.lines[0] == f"node/a: pinned {KEY} (after 1 conflict(s))"
    assert api.annotations("a") == {**PINNED_OURS, "team": "x"}
    assert [w.status for w in api.writes()] == [409, 200]


def test_pin_reads_the_named_nodes_alone_never_the_node_list(
    api: ApiServer, kubeconfig: Path
) -> None:
    """At 15,000 nodes the list is 30 pages; a person pinning one node costs one GET."""
    cluster(api, **{f"n{i:03}": {} for i in range(120)})
    result = run(kubeconfig, "pin", "n007", "ghost", "--output", "json")
    assert result.code == 1 and api.annotations("n007") == PINNED_OURS
    assert result.json["summary"]["listPages"] == 0
    assert [(r.method, r.path) for r in api.requests] == [
        ("GET", "/api/v1/nodes/n007"),
        ("GET", "/api/v1/nodes/ghost"),
        ("PATCH", "/api/v1/nodes/n007"),
    ]
