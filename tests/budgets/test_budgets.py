"""The NodePool-budget mechanism (`--mechanism budget|auto`) through the API test
server, which serves karpenter.sh/v1 NodePools as kube-apiserver serves Karpenter's CRD
(defaults, pruning, validation, JSON Patch `test` answered 422).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.clusters import CliResult, run_cli
from tests.kubeapi.apiserver import ApiServer, Fault, RequestInfo

KEY = "karpenter.sh/do-not-disrupt"
MARKER = "node-holder.dev/owned-annotations"
OURS = {KEY: "true", MARKER: KEY}
ENTRY_KEY = "node-holder.dev/budget"
POOL = "karpenter.sh/nodepool"
T0 = datetime(2026, 11, 22, 20, 0, 30, tzinfo=UTC)
PEOPLES = [{"nodes": "10%"}, {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}]
OLD = timedelta(days=2)


def entry(schedule: str, duration: str) -> dict:
    return {
        "duration": duration,
        "nodes": "0",
        "reasons": ["Empty", "Underutilized"],
        "schedule": schedule,
    }


def run(kubeconfig: str, *args: str, **env: str) -> CliResult:
    return run_cli(*args, "--kubeconfig", kubeconfig, env={"NODE_HOLDER_OUTPUT": "text", **env})


def node(api: ApiServer, name: str, age: timedelta, pool: str | None = None) -> None:
    labels = {POOL: pool} if pool else {"eks.amazonaws.com/nodegroup": "system"}
    api.add_node(name, created=api.now() - age, labels=labels, eks=False)


def budgets(api: ApiServer, pool: str) -> list[dict]:
    return api.get_nodepool(pool)["spec"]["disruption"]["budgets"]


def owned(api: ApiServer, pool: str) -> dict | None:
    value = (api.get_nodepool(pool)["metadata"].get("annotations") or {}).get(ENTRY_KEY)
    return json.loads(value) if value else None


@pytest.fixture
def cluster(api: ApiServer, kubeconfig) -> tuple[ApiServer, str]:
    """Two NodePools (one with people's budgets, one with an empty list), a node each, and a
    managed-node-group node."""
    api.set_clock(T0)
    api.add_nodepool("batch", budgets=[dict(b) for b in PEOPLES])
    api.add_nodepool("gpu", budgets=[])
    node(api, "batch-old", OLD, "batch")
    node(api, "gpu-old", OLD, "gpu")
    node(api, "system-1", OLD)
    return api, str(kubeconfig)


def test_budget_add_extend_release_keeps_every_other_entry_and_the_empty_list(cluster):
    api, kubeconfig = cluster
    node(api, "batch-new", timedelta(minutes=2), "batch")  # created 19:58:30
    api.reset_log()
    result = run(kubeconfig, "reconcile", "--mechanism", "budget")
    assert result.code == 0, result.stderr
    added = entry("58 19 22 11 *", "21m")  # to 20:18:30, rounded up to the minute
    assert budgets(api, "batch") == [*PEOPLES, added] and owned(api, "batch") == added
    assert budgets(api, "gpu") == [added] and owned(api, "gpu") == added
    assert api.writes() == [], "no node is written"
    assert len(api.writes("nodepools")) == 2
    assert "nodepool/batch: added budget entry 58 19 22 11 * for 21m" in result.lines
    assert (
        "2 NodePools (mechanism budget), 0 with node-holder's budget entry before this run; "
        "entries: 2 added" in result.lines
    )
    events = api.events
    assert {(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in events} == {
        ("NodePool", "batch"),
        ("NodePool", "gpu"),
    }
    started = next(e for e in events if e["involvedObject"]["name"] == "batch")
    assert started["metadata"]["namespace"] == "default" and started["reason"] == "HoldStarted"
    assert started["involvedObject"]["apiVersion"] == "karpenter.sh/v1"
    assert started["involvedObject"]["uid"] == api.get_nodepool("batch")["metadata"]["uid"]
    assert started["message"].endswith("; budget entry added to NodePool batch")

    # A node arrives 10 minutes later: the same schedule, a longer duration, one patch each.
    api.advance_clock(timedelta(minutes=10))
    node(api, "batch-newer", timedelta(0), "batch")
    api.reset_log()
    assert run(kubeconfig, "reconcile", "--mechanism", "budget").code == 0
    extended = entry("58 19 22 11 *", "33m")  # to 20:30:30
    assert budgets(api, "batch") == [*PEOPLES, extended] and budgets(api, "gpu") == [extended]
    assert len(api.writes("nodepools")) == 2 and api.writes() == []
    assert {e["reason"] for e in api.events[len(events) :]} == {"HoldExtended"}
    again = run(kubeconfig, "reconcile", "--mechanism", "budget")
    assert "entries: unchanged" in again.stdout and len(api.writes("nodepools")) == 2

    # The hold ends: every list exactly as it was, the annotation gone.
    api.advance_clock(timedelta(minutes=21))
    result = run(kubeconfig, "reconcile", "--mechanism", "budget")
    assert result.code == 0, result.stderr
    assert budgets(api, "batch") == PEOPLES and budgets(api, "gpu") == []
    assert owned(api, "batch") is None and owned(api, "gpu") is None
    assert "nodepool/gpu: removed budget entry 58 19 22 11 * for 33m" in result.lines
    assert api.events[-1]["reason"] == "HoldEnded"


def test_dry_run_says_the_same_words_and_sends_nothing(cluster):
    api, kubeconfig = cluster
    node(api, "gpu-new", timedelta(minutes=1), "gpu")
    dry = run(kubeconfig, "reconcile", "--mechanism", "budget", "--dry-run")
    assert dry.code == 0 and api.writes("nodepools") == []
    line = next(x for x in dry.lines if x.startswith("nodepool/gpu:"))
    assert line.startswith("nodepool/gpu: would add budget entry 59 19 22 11 * for 21m [")
    ops = json.loads(line.split(" for 21m ", 1)[1])
    assert ops[:2] == [
        {
            "op": "test",
            "path": "/metadata/resourceVersion",
            "value": api.get_nodepool("gpu")["metadata"]["resourceVersion"],
        },
        {"op": "test", "path": "/spec/disruption/budgets", "value": []},
    ]
    real = run(kubeconfig, "reconcile", "--mechanism", "budget")
    assert "nodepool/gpu: added budget entry 59 19 22 11 * for 21m" in real.lines
    assert dry.lines[-2].replace("would be added", "added") == real.lines[-2]


def test_release_and_the_uninstall_hook_remove_every_entry_whatever_the_mechanism(cluster):
    """Entries from a budget run and holds from an annotation run: `release` (which takes no
    mechanism) removes both, and a switch of mechanism strands nothing."""
    api, kubeconfig = cluster
    node(api, "batch-new", timedelta(minutes=1), "batch")
    assert run(kubeconfig, "reconcile").code == 0  # annotations
    assert api.annotations("gpu-old") == OURS
    assert run(kubeconfig, "reconcile", "--mechanism", "budget").code == 0
    assert api.annotations("gpu-old") == {}, "the budget took over: the annotations went"
    assert [e["reason"] for e in api.events].count("HoldEnded") == 0, "no end: a budget holds"
    assert run(kubeconfig, "reconcile", "--mechanism", "annotation").code == 0
    assert owned(api, "gpu") is not None, "annotation mode does not read NodePools"
    result = run(kubeconfig, "release", "--no-events")
    assert result.code == 0, result.stderr
    assert budgets(api, "batch") == PEOPLES and budgets(api, "gpu") == []
    assert owned(api, "batch") is None and owned(api, "gpu") is None
    assert all(api.annotations(n) == {} for n in api.node_names())
    assert (
        "2 NodePools, 2 with node-holder's budget entry before this run; entries: 2 removed"
        in result.lines
    )


def test_a_revert_by_someone_else_is_said_once_and_added_again(cluster):
    """Argo CD's self-heal restores the NodePool between two runs: the run says so once,
    adds the entry again while the hold lasts, and the JSON names the NodePool."""
    api, kubeconfig = cluster
    node(api, "batch-new", timedelta(minutes=1), "batch")
    assert run(kubeconfig, "reconcile", "--mechanism", "budget").code == 0
    api.edit_nodepool(
        "batch", lambda p: p["spec"]["disruption"].update(budgets=[dict(b) for b in PEOPLES])
    )
    result = run(kubeconfig, "reconcile", "--mechanism", "budget", NODE_HOLDER_OUTPUT="json")
    assert result.code == 0, result.stderr
    said = [x for x in result.stderr.splitlines() if "removed or changed by someone else" in x]
    assert len(said) == 1 and "nodepool/batch:" in said[0] and "added again" in said[0]
    assert json.loads(result.lines[-1])["revertedNodePools"] == ["batch"]
    assert budgets(api, "batch")[-1] == owned(api, "batch") == entry("59 19 22 11 *", "21m")
    quiet = run(kubeconfig, "reconcile", "--mechanism", "budget")
    assert "someone else" not in quiet.stderr


def test_auto_falls_back_to_annotations_for_a_reverted_nodepool_until_the_hold_ends(cluster):
    api, kubeconfig = cluster
    node(api, "batch-new", timedelta(minutes=1), "batch")
    auto = ("reconcile", "--mechanism", "auto")
    assert run(kubeconfig, *auto).code == 0
    assert api.annotations("batch-old") == {} and owned(api, "batch") is not None
    api.edit_nodepool(
        "batch", lambda p: p["spec"]["disruption"].update(budgets=[dict(b) for b in PEOPLES])
    )
    result = run(kubeconfig, *auto)
    assert result.code == 0, result.stderr
    assert result.stderr.count("removed or changed by someone else") == 1
    assert "its nodes get hold annotations until the hold ends" in result.stderr
    assert owned(api, "batch") is None and budgets(api, "batch") == PEOPLES
    assert api.annotations("batch-old") == OURS and api.annotations("batch-new") == OURS
    assert owned(api, "gpu") is not None and api.annotations("gpu-old") == {}
    # The next runs: nothing said, the fallback stays for the rest of the hold...
    api.advance_clock(timedelta(minutes=5))
    quiet = run(kubeconfig, *auto)
    assert "someone else" not in quiet.stderr and owned(api, "batch") is None
    assert api.annotations("batch-old") == OURS
    # ... and ends with it; the next hold is a budget again.
    api.advance_clock(timedelta(minutes=20))
    assert run(kubeconfig, *auto).code == 0
    assert api.annotations("batch-old") == {} and owned(api, "gpu") is None
    node(api, "batch-next", timedelta(0), "batch")
    assert run(kubeconfig, *auto).code == 0
    assert owned(api, "batch") is not None and api.annotations("batch-old") == {}


def test_auto_holds_nodepools_with_budgets_and_every_other_node_with_annotations(cluster):
    """Managed-node-group nodes, and nodes of a NodePool that no longer exists, have no
    NodePool to hold them: they get annotations; the NodePools' nodes do not."""
    api, kubeconfig = cluster
    node(api, "gone-1", OLD, "deleted-pool")
    node(api, "batch-new", timedelta(minutes=1), "batch")
    result = run(kubeconfig, "reconcile", "--mechanism", "auto")
    assert result.code == 0, result.stderr
    assert api.annotations("system-1") == OURS and api.annotations("gone-1") == OURS
    assert all(api.annotations(n) == {} for n in ("batch-old", "batch-new", "gpu-old"))
    assert owned(api, "batch") and owned(api, "gpu")
    assert len(api.writes()) == 2 and len(api.writes("nodepools")) == 2


def test_auto_switch_from_annotations_keeps_them_until_the_hold_ends(cluster):
    """A switch to auto during a hold: nodes already held by annotations stay so (no second
    write for them), their NodePool gets no entry until that hold ends."""
    api, kubeconfig = cluster
    node(api, "batch-new", timedelta(minutes=1), "batch")
    assert run(kubeconfig, "reconcile").code == 0
    api.reset_log()
    result = run(kubeconfig, "reconcile", "--mechanism", "auto", "--output", "json")
    assert result.code == 0, result.stderr
    assert api.writes() == [] and api.writes("nodepools") == []
    # Named, with why, in every run while it lasts.
    listed = result.json["nodePoolsByAnnotation"]
    assert [p["nodePool"] for p in listed] == ["batch", "gpu"]
    (line,) = [x for x in result.stderr.splitlines() if "no budget entry" in x]
    assert "nodepool/batch, gpu: no budget entry (its nodes carry node-holder's hold" in line


def test_group_scope_holds_only_the_held_groups_nodepool(cluster):
    api, kubeconfig = cluster
    node(api, "gpu-new", timedelta(minutes=1), "gpu")
    result = run(kubeconfig, "reconcile", "--mechanism", "budget", "--hold-scope", "group")
    assert result.code == 0, result.stderr
    assert owned(api, "gpu") == entry("59 19 22 11 *", "21m") and owned(api, "batch") is None


def test_a_cluster_without_the_nodepool_crd(cluster):
    """404 on the NodePool list means no NodePools: auto holds every node by annotations;
    budget holds nothing and says so."""
    api, kubeconfig = cluster
    api.nodepools_served = False
    node(api, "batch-new", timedelta(minutes=1), "batch")
    budget = run(kubeconfig, "reconcile", "--mechanism", "budget")
    assert budget.code == 0, budget.stderr
    assert "no NodePools (mechanism budget): no node is held" in budget.lines
    assert api.writes() == []
    auto = run(kubeconfig, "reconcile", "--mechanism", "auto")
    assert auto.code == 0, auto.stderr
    assert all(api.annotations(n) == OURS for n in api.node_names())
    assert "no NodePools (mechanism auto): every node is held by annotations" in auto.lines
    release = run(kubeconfig, "release")
    assert release.code == 0 and all(api.annotations(n) == {} for n in api.node_names())


def test_a_changed_nodepool_is_read_again_and_decided_again(cluster):
    """Someone adds an entry between our list and our patch: the `test` fails (422), the run
    reads the NodePool again and adds its entry after theirs."""
    api, kubeconfig = cluster
    node(api, "gpu-new", timedelta(minutes=1), "gpu")
    theirs = {"nodes": "1", "reasons": ["Drifted"]}

    def edit_first(info: RequestInfo) -> None:
        if info.method == "PATCH" and info.path.endswith("/nodepools/gpu") and not edited:
            edited.append(True)
            api.edit_nodepool("gpu", lambda p: p["spec"]["disruption"]["budgets"].append(theirs))

    edited: list[bool] = []
    api.on_request(edit_first)
    result = run(kubeconfig, "reconcile", "--mechanism", "budget")
    assert result.code == 0, result.stderr
    assert budgets(api, "gpu") == [theirs, entry("59 19 22 11 *", "21m")]
    assert [w.status for w in api.writes("nodepools") if "gpu" in w.path] == [422, 200]


def test_a_nodepool_edited_before_every_patch_gives_up_as_a_node_does(cluster):
    """The conflict loop nodes use: six tries, five re-reads, then the NodePool is reported
    failed; every one of the person's entries is there, and ours never landed."""
    api, kubeconfig = cluster
    node(api, "gpu-new", timedelta(minutes=1), "gpu")
    theirs: list[dict] = []

    def person_keeps_editing(info: RequestInfo) -> None:
        if info.method == "PATCH" and info.path.endswith("/nodepools/gpu"):
            theirs.append({"nodes": str(len(theirs) + 1), "reasons": ["Drifted"]})
            api.edit_nodepool(
                "gpu", lambda p: p["spec"]["disruption"]["budgets"].append(theirs[-1])
            )

    api.on_request(person_keeps_editing)
    result = run(kubeconfig, "reconcile", "--mechanism", "budget")
    assert result.code == 1
    assert "nodepool/gpu: failed to add budget entry" in result.stdout
    assert "still changing after 5 re-reads" in result.stdout
    assert budgets(api, "gpu") == theirs
    gpu = [r for r in api.requests if r.path.endswith("/nodepools/gpu")]
    assert [(r.method, r.status) for r in gpu] == [("PATCH", 422), ("GET", 200)] * 5 + [
        ("PATCH", 422)
    ]


def test_a_422_that_is_not_a_failed_test_fails_the_nodepool_once(cluster):
    api, kubeconfig = cluster
    node(api, "batch-new", timedelta(minutes=1), "batch")
    api.inject(
        Fault(
            method="PATCH",
            path=r"/nodepools/gpu$",
            status=422,
            message="denied by a policy",
            times=None,
        )
    )
    result = run(kubeconfig, "reconcile", "--mechanism", "budget")
    assert result.code == 1
    assert "nodepool/gpu: failed to add budget entry" in result.stdout
    assert (
        "1 NodePool(s) not patched: gpu" in result.stderr and "denied by a policy" in result.stderr
    )
    assert budgets(api, "gpu") == [] and owned(api, "batch") is not None
    assert len([w for w in api.writes("nodepools") if "gpu" in w.path]) == 1


def test_a_run_that_may_not_read_nodepools_changes_nothing(cluster):
    api, kubeconfig = cluster
    node(api, "batch-new", timedelta(minutes=1), "batch")
    api.inject(Fault(method="GET", path=r"/nodepools$", status=403, times=None))
    result = run(kubeconfig, "reconcile", "--mechanism", "auto")
    assert result.code == 1
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("node-holder: error: cannot list NodePools: 403 Forbidden")
    )
    assert "nothing was changed" in result.stderr and api.writes() == []


def test_status_names_the_mechanism_and_which_nodepools_carry_the_entry(cluster):
    api, kubeconfig = cluster
    node(api, "gpu-new", timedelta(minutes=1), "gpu")
    assert run(kubeconfig, "reconcile", "--mechanism", "budget", "--hold-scope", "group").code == 0
    text = run(kubeconfig, "status", "--mechanism", "budget", "--hold-scope", "group")
    assert text.code == 0, text.stderr
    assert text.lines[0].startswith(
        "2 NodePools (mechanism budget), 1 with node-holder's budget entry"
    )
    header = next(x for x in text.lines if x.startswith("WINDOW"))
    assert header.endswith("NODEPOOLS WITH ENTRY")
    row = next(x for x in text.lines if x.startswith("karpenter.sh/nodepool=gpu"))
    assert row.endswith("1 of 1")
    data = json.loads(
        run(
            kubeconfig,
            "status",
            "--mechanism",
            "budget",
            "--hold-scope",
            "group",
            "--output",
            "json",
        ).stdout
    )
    assert data["mechanism"] == "budget"
    assert data["nodePools"] == {"listed": 2, "withEntry": 1}
    gpu = next(w for w in data["windows"] if w["name"] == "karpenter.sh/nodepool=gpu")
    assert (gpu["nodePools"], gpu["nodePoolsWithEntry"]) == (1, 1)


def test_no_line_grows_past_16_kib_with_fifty_budgets(api, kubeconfig):
    """The CRD allows 50 budgets; the dry-run line shows the whole list it tests."""
    api.set_clock(T0)
    many = [
        {"nodes": str(i), "schedule": f"{i} 1 * * *", "duration": "1h", "reasons": ["Drifted"]}
        for i in range(49)
    ]
    for name in (f"pool-{'x' * 55}-{i}" for i in range(3)):
        api.add_nodepool(name, budgets=many)
    node(api, "new", timedelta(0), f"pool-{'x' * 55}-0")
    result = run(str(kubeconfig), "reconcile", "--mechanism", "budget", "--dry-run")
    assert result.code == 0, result.stderr
    lines = [*result.lines, *result.stderr.splitlines()]
    assert len(lines) == 3 + 2 and all(len(line.encode()) <= 16 * 1024 for line in lines)


def test_auto_records_at_most_ten_events_in_all_with_a_summary_of_the_rest(api, kubeconfig):
    """Six NodePools take their entry (an Event each) and six groups of nodes of NodePools that
    do not exist are held by annotation (an Event each): one bound for both, ten Events, the
    last of which sums up the other three."""
    api.set_clock(T0)
    for i in range(6):
        api.add_nodepool(f"pool{i}", budgets=[])
        node(api, f"pool{i}-new", timedelta(minutes=1), f"pool{i}")
        node(api, f"gone{i}-new", timedelta(minutes=1), f"gone{i}")
    auto = ("reconcile", "--mechanism", "auto", "--hold-scope", "group")
    result = run(str(kubeconfig), *auto, "--output", "json")
    assert result.code == 0, result.stderr
    assert all(owned(api, f"pool{i}") for i in range(6))
    assert all(api.annotations(f"gone{i}-new") == OURS for i in range(6))
    events = api.events
    assert len(events) == 10 and {e["reason"] for e in events} == {"HoldStarted"}
    kinds = [e["involvedObject"]["kind"] for e in events]
    assert kinds == ["NodePool"] * 6 + ["Node"] * 4
    assert events[-1]["message"] == (
        "Hold started for 3 more windows, 3 node(s) in all (one run records at most 10 Events)"
    )
    assert len(json.loads(result.stdout.splitlines()[-1])["events"]) == 10
