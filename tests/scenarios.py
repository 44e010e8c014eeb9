"""Scenarios of the hold contract, written once, run against the test server and a real cluster.

Each scenario drives the real CLI (`reconcile`, `status`, `release`) and asserts
the stored node annotations afterwards. Assertions on request counts apply only
where the cluster keeps a request log (the test server).
"""

from __future__ import annotations

import json

from tests.clusters import ServerCluster

KEY = "karpenter.sh/do-not-disrupt"
MARKER = "node-holder.dev/owned-annotations"
OURS = {KEY: "true", MARKER: KEY}


def hold_and_release_restores_annotations(c: ServerCluster) -> None:
    c.add_node("e2e-a", annotations={"team": "batch"})
    c.add_node("e2e-b")
    first = c.reconcile()
    assert first.code == 0, first.stderr
    assert c.annotations("e2e-a") == {"team": "batch", **OURS}
    assert c.annotations("e2e-b") == OURS
    assert "held: youngest node" in first.lines[-1]

    c.pass_hold()
    second = c.reconcile()
    assert second.code == 0, second.stderr
    assert c.annotations("e2e-a") == {"team": "batch"}
    assert c.annotations("e2e-b") == {}
    assert second.lines[-1].startswith("released: youngest node")


def foreign_hold_annotations_are_never_touched(c: ServerCluster) -> None:
    c.add_node("e2e-mine")
    c.add_node("e2e-false", annotations={KEY: "false"})
    c.add_node("e2e-true", annotations={KEY: "true"})
    assert c.reconcile().code == 0
    assert c.annotations("e2e-false") == {KEY: "false"}
    assert c.annotations("e2e-true") == {KEY: "true"}
    assert c.annotations("e2e-mine") == OURS
    c.pass_hold()
    assert c.reconcile().code == 0
    assert c.annotations("e2e-false") == {KEY: "false"}
    assert c.annotations("e2e-true") == {KEY: "true"}
    assert c.annotations("e2e-mine") == {}


def steady_runs_write_nothing_and_a_new_node_costs_one_write(c: ServerCluster) -> None:
    c.add_node("e2e-1")
    c.add_node("e2e-2")
    assert c.reconcile().code == 0
    before = c.writes()
    steady = c.reconcile()
    assert steady.code == 0
    assert [line for line in steady.lines if line.startswith("node/")] == []
    if before is not None:
        assert c.writes() == before
    c.add_node("e2e-3")
    grown = c.reconcile()
    assert [line for line in grown.lines if line.startswith("node/")] == [
        f"node/e2e-3: added {KEY}"
    ]
    if before is not None:
        assert c.writes() == before + 1


def dry_run_prints_patches_and_changes_nothing(c: ServerCluster) -> None:
    c.add_node("e2e-dry", annotations={"keep": "me"})
    result = c.reconcile("--dry-run")
    assert result.code == 0
    (line,) = [line for line in result.lines if line.startswith("node/")]
    prefix = f"node/e2e-dry: would add {KEY} "
    assert line.startswith(prefix)
    body = json.loads(line[len(prefix) :])
    assert body["metadata"]["annotations"] == OURS
    assert body["metadata"]["resourceVersion"]
    assert c.annotations("e2e-dry") == {"keep": "me"}
    if c.writes() is not None:
        assert c.writes() == 0


def release_removes_only_our_holds_even_during_a_hold(c: ServerCluster) -> None:
    c.add_node("e2e-r1")
    c.add_node("e2e-r2", annotations={KEY: "true"})
    assert c.reconcile().code == 0
    assert c.annotations("e2e-r1") == OURS
    result = c.run("release")
    assert result.code == 0, result.stderr
    assert c.annotations("e2e-r1") == {}
    assert c.annotations("e2e-r2") == {KEY: "true"}


def status_reports_who_holds_what(c: ServerCluster) -> None:
    c.add_node("e2e-s1")
    c.add_node("e2e-s2", annotations={KEY: "true"})
    assert c.reconcile().code == 0
    c.add_node("e2e-s3")
    result = c.run("status", "--nodes", "--output", "json")
    assert result.code == 0, result.stderr
    data = result.json
    rows = [json.loads(line) for line in result.lines[:-1]]  # a line per node, then the summary
    states = {row["node"]: (row["state"], row["next"]) for row in rows}
    assert states["e2e-s1"] == ("held by us", "-")
    assert states["e2e-s2"] == ("held by others", "-")
    assert states["e2e-s3"] == ("free", "add")
    assert data["held"] is True
    assert c.annotations("e2e-s3") == {}  # status is read-only


def deleting_nodes_are_not_patched_and_start_no_hold(c: ServerCluster) -> None:
    c.add_node("e2e-old")
    c.pass_hold()
    c.add_node("e2e-dying")
    c.mark_deleting("e2e-dying")
    result = c.reconcile()
    assert result.code == 0, result.stderr
    assert result.lines[-1].startswith("released")
    assert c.annotations("e2e-old") == {}
    assert c.annotations("e2e-dying") == {}


def group_scope_holds_only_the_new_nodes_pool(c: ServerCluster) -> None:
    pool = "karpenter.sh/nodepool"
    c.add_node("e2e-pool-a", labels={pool: "a"})
    c.pass_hold()
    c.add_node("e2e-pool-b", labels={pool: "b"})
    result = c.reconcile("--hold-scope", "group")
    assert result.code == 0, result.stderr
    assert c.annotations("e2e-pool-b") == OURS
    assert c.annotations("e2e-pool-a") == {}


def several_keys_are_owned_and_released_per_key(c: ServerCluster) -> None:
    ca_key = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
    c.add_node("e2e-k1")
    c.add_node("e2e-k2", annotations={ca_key: "true"})
    env = {"HOLD_ANNOTATION": f"{KEY},{ca_key}"}
    assert c.reconcile(env=env).code == 0
    assert c.annotations("e2e-k1") == {KEY: "true", ca_key: "true", MARKER: f"{ca_key},{KEY}"}
    assert c.annotations("e2e-k2") == {KEY: "true", ca_key: "true", MARKER: KEY}
    c.pass_hold()
    assert c.reconcile(env=env).code == 0
    assert c.annotations("e2e-k1") == {}
    assert c.annotations("e2e-k2") == {ca_key: "true"}


SCENARIOS = [
    hold_and_release_restores_annotations,
    foreign_hold_annotations_are_never_touched,
    steady_runs_write_nothing_and_a_new_node_costs_one_write,
    dry_run_prints_patches_and_changes_nothing,
    release_removes_only_our_holds_even_during_a_hold,
    status_reports_who_holds_what,
    deleting_nodes_are_not_patched_and_start_no_hold,
    group_scope_holds_only_the_new_nodes_pool,
    several_keys_are_owned_and_released_per_key,
]
