"""Scopes, selectors, several annotation keys, --max-hold and Events, via the API test server."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.clusters import CliResult, run_cli
from tests.kubeapi.apiserver import ApiServer

KEY = "karpenter.sh/do-not-disrupt"
CA_KEY = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
MARKER = "node-holder.dev/owned-annotations"
OURS = {KEY: "true", MARKER: KEY}
POOL = "karpenter.sh/nodepool"


def run(kubeconfig: str, command: str, *args: str, env: dict[str, str] | None = None) -> CliResult:
    return run_cli(command, "--kubeconfig", kubeconfig, *args, env=env)


def add(api: ApiServer, name: str, age: timedelta, pool: str | None = None, **kw: object) -> None:
    labels = {POOL: pool} if pool else {}
    api.add_node(name, created=api.now() - age, labels=labels, eks=False, **kw)  # type: ignore[arg-type]


OLD = timedelta(hours=5)
NEW = timedelta(minutes=3)


def test_group_scope_holds_only_the_new_nodes_group(api: ApiServer, kubeconfig: str) -> None:
    add(api, "batch-old", OLD, "batch")
    add(api, "batch-new", NEW, "batch")
    add(api, "web-old", OLD, "web")
    add(api, "system", OLD)
    result = run(kubeconfig, "reconcile", env={"HOLD_SCOPE": "group"})
    assert result.code == 0, result.stderr
    assert api.annotations("batch-old") == OURS and api.annotations("batch-new") == OURS
    assert api.annotations("web-old") == {} and api.annotations("system") == {}
    assert "1 of 3 groups held (group scope)" in result.lines[-1]
    # A new node without the label holds the unlabelled group only.
    add(api, "system-new", NEW)
    run(kubeconfig, "reconcile", "--hold-scope", "group")
    assert api.annotations("system") == OURS and api.annotations("web-old") == {}


def test_a_karpenter_node_before_its_nodepool_label_holds_no_group_until_it_has_one(
    api: ApiServer, kubeconfig: str
) -> None:
    """Its ownerReference names a karpenter.sh NodeClaim; registration copies the NodePool
    label later. Until then it must not hold the unlabelled (system) nodes."""
    add(api, "system", OLD)
    add(api, "batch-old", OLD, "batch")
    # An EKS-shaped Karpenter node (NodeClaim ownerReference) whose label has not arrived.
    api.add_node("arriving", created=api.now() - NEW, labels={POOL: None}, eks=True)
    owners = api.get_node("arriving")["metadata"]["ownerReferences"]  # type: ignore[index]
    assert owners[0]["kind"] == "NodeClaim" and owners[0]["apiVersion"] == "karpenter.sh/v1"

    before = run(kubeconfig, "reconcile", "--hold-scope", "group")
    assert before.code == 0, before.stderr
    assert api.annotations("system").get(KEY) is None
    assert api.annotations("arriving").get(KEY) is None
    assert "0 of 2 groups held" in before.lines[-1]

    api.edit_node("arriving", lambda obj: obj["metadata"]["labels"].__setitem__(POOL, "batch"))
    after = run(kubeconfig, "reconcile", "--hold-scope", "group")
    assert after.code == 0, after.stderr
    assert api.annotations("arriving").get(KEY) == "true"
    assert api.annotations("batch-old") == OURS
    assert api.annotations("system") == {}
    # A new node that no NodeClaim owns (a node group's) still holds the unlabelled group.
    add(api, "system-new", NEW)
    assert run(kubeconfig, "reconcile", "--hold-scope", "group").code == 0
    assert api.annotations("system") == OURS


def test_group_label_is_configurable(api: ApiServer, kubeconfig: str) -> None:
    api.add_node("a", created=api.now() - OLD, labels={"team": "x"}, eks=False)
    api.add_node("b", created=api.now() - NEW, labels={"team": "x"}, eks=False)
    api.add_node("c", created=api.now() - OLD, labels={"team": "y"}, eks=False)
    result = run(kubeconfig, "reconcile", "--hold-scope", "group", "--group-label", "team")
    assert result.code == 0
    assert [bool(api.annotations(n)) for n in "abc"] == [True, True, False]


def test_node_scope_holds_each_node_for_its_own_first_hold_duration(
    api: ApiServer, kubeconfig: str
) -> None:
    add(api, "old", OLD)
    add(api, "young", timedelta(minutes=15))
    add(api, "newest", timedelta(minutes=1))
    assert run(kubeconfig, "reconcile", "--hold-scope", "node").code == 0
    assert [api.annotations(n) for n in ("old", "young", "newest")] == [{}, OURS, OURS]
    api.advance_clock(timedelta(minutes=6))
    assert run(kubeconfig, "reconcile", "--hold-scope", "node").code == 0
    assert [api.annotations(n) for n in ("old", "young", "newest")] == [{}, {}, OURS]


def test_trigger_selector_decides_who_starts_a_hold(api: ApiServer, kubeconfig: str) -> None:
    add(api, "kp-old", OLD, "batch")
    add(api, "static-new", NEW)  # not provisioned by Karpenter: no hold
    env = {"HOLD_TRIGGER_SELECTOR": POOL}
    result = run(kubeconfig, "reconcile", env=env)
    assert result.code == 0
    assert api.writes() == []
    add(api, "kp-new", NEW, "batch")
    assert run(kubeconfig, "reconcile", env=env).code == 0
    assert all(api.annotations(n) == OURS for n in ("kp-old", "static-new", "kp-new"))


def test_node_selector_decides_who_is_held_and_releases_leavers(
    api: ApiServer, kubeconfig: str
) -> None:
    add(api, "kp", OLD, "batch")
    add(api, "static", NEW)
    env = {"HOLD_NODE_SELECTOR": f"{POOL}=batch"}
    assert run(kubeconfig, "reconcile", env=env).code == 0
    assert api.annotations("kp") == OURS and api.annotations("static") == {}
    # kp leaves the selected set: a node this tool holds that no longer matches is released.
    api.edit_node("kp", lambda n: n["metadata"]["labels"].update({POOL: "other"}))
    assert run(kubeconfig, "reconcile", env=env).code == 0
    assert api.annotations("kp") == {}


def test_several_annotation_keys_with_ownership_per_key(api: ApiServer, kubeconfig: str) -> None:
    add(api, "a", OLD)
    add(api, "b", OLD, annotations={CA_KEY: "true"})  # set by someone else
    add(api, "new", NEW)
    env = {"HOLD_ANNOTATION": f"{KEY},{CA_KEY}"}
    assert run(kubeconfig, "reconcile", env=env).code == 0
    both = f"{CA_KEY},{KEY}"
    assert api.annotations("a") == {KEY: "true", CA_KEY: "true", MARKER: both}
    assert api.annotations("b") == {KEY: "true", CA_KEY: "true", MARKER: KEY}
    api.advance_clock(timedelta(minutes=20))
    assert run(kubeconfig, "reconcile", env=env).code == 0
    assert api.annotations("a") == {}
    assert api.annotations("b") == {CA_KEY: "true"}


def test_repeated_annotation_flags_work_like_the_env_var(api: ApiServer, kubeconfig: str) -> None:
    add(api, "new", NEW)
    result = run(kubeconfig, "reconcile", "--annotation", KEY, "--annotation", CA_KEY)
    assert result.code == 0
    assert api.annotations("new")[MARKER] == f"{CA_KEY},{KEY}"


def test_max_hold_caps_a_stretch_even_while_nodes_keep_arriving(
    api: ApiServer, kubeconfig: str
) -> None:
    start = api.now()
    api.set_clock(start)
    add(api, "base", OLD)
    args = ("--hold-duration", "20m", "--max-hold", "1h")
    held_at = []
    for minute in range(0, 100, 10):  # a node every 10 minutes for 100 minutes
        api.set_clock(start + timedelta(minutes=minute))
        add(api, f"n{minute}", timedelta(0))
        assert run(kubeconfig, "reconcile", *args).code == 0
        held_at.append(api.annotations("base").get(KEY) == "true")
    # Held from 0 to 60 (cap), free for one hold duration (60-80), then a new stretch.
    assert held_at == [True] * 6 + [False, False] + [True, True]


def test_max_hold_is_a_hard_bound_when_the_first_nodes_of_a_stretch_go_away(
    api: ApiServer, kubeconfig: str
) -> None:
    """One batch node every 10 minutes, each living 25 minutes, --max-hold 1h: before, the
    cap never fired (the stretch was recomputed from the nodes that still existed)."""
    start = api.now()
    add(api, "base", OLD)
    args = ("--hold-duration", "20m", "--max-hold", "1h")
    created: dict[str, datetime] = {}
    held_minutes = []
    for minute in range(0, 240):
        now = start + timedelta(minutes=minute)
        api.set_clock(now)
        if minute % 10 == 0 and minute < 200:  # then the batch work stops
            add(api, f"batch{minute}", timedelta(0))
            created[f"batch{minute}"] = now
        for name, born in list(created.items()):
            if now - born >= timedelta(minutes=25):
                api.delete_node(name)
                del created[name]
        assert run(kubeconfig, "reconcile", *args).code == 0
        if api.annotations("base").get(KEY) == "true":
            held_minutes.append(minute)
    stretches = _runs(held_minutes)
    assert stretches, "a hold starts at all"
    for first, last in stretches:
        assert last - first + 1 <= 60 + 1, stretches  # the cap, plus at most one run interval
    for (_, end), (begin, _) in itertools.pairwise(stretches):
        assert begin - end - 1 >= 20, stretches  # free for at least one hold duration
    assert api.annotations("base") == {}  # nothing of ours left once free


def _runs(minutes: list[int]) -> list[tuple[int, int]]:
    """Consecutive minutes as (first, last) stretches."""
    runs: list[tuple[int, int]] = []
    for minute in minutes:
        if runs and runs[-1][1] == minute - 1:
            runs[-1] = (runs[-1][0], minute)
        else:
            runs.append((minute, minute))
    return runs


def test_events_mark_start_extension_and_end_of_a_hold(api: ApiServer, kubeconfig: str) -> None:
    add(api, "old", OLD)
    add(api, "new", NEW)
    uid = api.get_node("new")["metadata"]["uid"]  # type: ignore[index]
    assert run(kubeconfig, "reconcile").code == 0
    add(api, "newer", timedelta(minutes=1))
    assert run(kubeconfig, "reconcile").code == 0
    assert run(kubeconfig, "reconcile").code == 0  # steady: no event
    api.advance_clock(timedelta(minutes=20))
    assert run(kubeconfig, "reconcile").code == 0
    events = api.events
    assert [(e["reason"], e["involvedObject"]["name"]) for e in events] == [
        ("HoldStarted", "new"),
        ("HoldExtended", "newer"),
        ("HoldEnded", "newer"),
    ]
    first = events[0]
    assert first["metadata"]["namespace"] == "default"
    assert first["involvedObject"]["kind"] == "Node"
    assert first["involvedObject"]["uid"] == uid
    assert first["type"] == "Normal" and first["source"]["component"] == "node-holder"
    assert "youngest node new" in first["message"] and "until" in first["message"]


def test_no_events_flag_and_dry_run_record_nothing(api: ApiServer, kubeconfig: str) -> None:
    add(api, "new", NEW)
    assert run(kubeconfig, "reconcile", "--dry-run").code == 0
    assert run(kubeconfig, "reconcile", env={"NODE_HOLDER_EVENTS": "false"}).code == 0
    assert api.annotations("new") == OURS
    assert api.events == []


def test_a_refused_event_does_not_fail_the_run(api: ApiServer, kubeconfig: str) -> None:
    from tests.kubeapi.apiserver import Fault  # noqa: PLC0415

    add(api, "new", NEW)
    api.inject(Fault(method="POST", path="/events$", status=403, times=None))
    result = run(kubeconfig, "reconcile")
    assert result.code == 0
    assert api.annotations("new") == OURS
    assert "could not record event HoldStarted" in result.stderr


def test_status_shows_each_group(api: ApiServer, kubeconfig: str) -> None:
    add(api, "batch-old", OLD, "batch")
    add(api, "batch-new", NEW, "batch")
    add(api, "web-old", OLD, "web")
    text = run(kubeconfig, "status", "--hold-scope", "group")
    assert text.code == 0
    rows = {line.split()[0]: line.split()[1] for line in text.lines if line.startswith(POOL)}
    assert rows == {f"{POOL}=batch": "held", f"{POOL}=web": "released"}
    status = run(kubeconfig, "status", "--hold-scope", "group", "--nodes", "--output", "json")
    *nodes, data = map(json.loads, status.lines)  # --nodes: a line per node, then the summary
    windows = {w["name"]: w for w in data["windows"]}
    assert windows[f"{POOL}=batch"]["held"] is True
    assert windows[f"{POOL}=batch"]["youngestNode"] == "batch-new"
    assert windows[f"{POOL}=web"]["held"] is False
    assert {n["node"]: n["next"] for n in nodes} == {
        "batch-old": "add",
        "batch-new": "add",
        "web-old": "-",
    }
    assert api.writes() == []


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_events_show_in_kubectl_get_events_and_describe_node(
    api: ApiServer, kubeconfig: str, tmp_path: Path
) -> None:
    add(api, "old", OLD)
    add(api, "new", NEW)
    assert run(kubeconfig, "reconcile").code == 0
    env = {**os.environ, "HOME": str(tmp_path), "KUBECACHEDIR": str(tmp_path / "cache")}

    def kubectl(*args: str) -> str:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", kubeconfig, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    listed = kubectl("get", "events", "-A", "--field-selector", "reason=HoldStarted")
    assert "HoldStarted" in listed and "node/new" in listed
    described = kubectl("describe", "node", "new")
    assert "HoldStarted" in described and "Hold started for cluster" in described
