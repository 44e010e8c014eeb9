"""The budget mechanism against Karpenter v0.33.6 to v0.37.x: the API test server serves
karpenter.sh/v1 NodePools through their conversion webhook and stores v1beta1
(tests/kubeapi/karpenter.py round_trip: v0.34 to v0.37 drop `reasons`, v0.33 the budget list; then
the CRD default `[{nodes: "10%"}]`). Every run checks that what was stored is what it sent; a
NodePool that cannot take the entry fails in `budget` and falls back to annotations, in the same
run, in `auto`; what a lossy write left is the tool's to remove, a person's never. Also: `auto`
falls back on a 422, 403 or 404, and lost answers and re-adds are reported truthfully.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from tests.clusters import CliResult, run_cli
from tests.kubeapi.apiserver import ApiServer, Fault, RequestInfo
from tests.kubeapi.karpenter import DEFAULT_BUDGETS, DROPS_BUDGETS, DROPS_REASONS
from tests.kubeapi.patching import apply_json_patch

KEY = "karpenter.sh/do-not-disrupt"
OURS = {KEY: "true", "node-holder.dev/owned-annotations": KEY}
ENTRY_KEY = "node-holder.dev/budget"
POOL = "karpenter.sh/nodepool"
T0 = datetime(2026, 11, 22, 20, 0, 30, tzinfo=UTC)
PEOPLES = [{"nodes": "10%"}, {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}]
#: A person's entry that looks like a stripped copy of node-holder's, but for its schedule.
LOOKALIKE = {"nodes": "0", "schedule": "58 19 22 11 *", "duration": "1h"}
OLD = timedelta(days=2)
ENTRY = {
    "duration": "21m",
    "nodes": "0",
    "reasons": ["Empty", "Underutilized"],
    "schedule": "59 19 22 11 *",
}
STRIPPED = {k: v for k, v in ENTRY.items() if k != "reasons"}
# What each conversion leaves of the people's list (v0.33's v1beta1 has no budgets).
KEPT = {DROPS_REASONS: PEOPLES, DROPS_BUDGETS: DEFAULT_BUDGETS}


def run(kubeconfig: str, *args: str, **env: str) -> CliResult:
    return run_cli(*args, "--kubeconfig", kubeconfig, env={"NODE_HOLDER_OUTPUT": "text", **env})


def node(api: ApiServer, name: str, age: timedelta, pool: str) -> None:
    api.add_node(name, created=api.now() - age, labels={POOL: pool}, eks=False)


def budgets(api: ApiServer, pool: str) -> list[dict]:
    return api.get_nodepool(pool)["spec"]["disruption"]["budgets"]


def owned(api: ApiServer, pool: str) -> dict | None:
    value = (api.get_nodepool(pool)["metadata"].get("annotations") or {}).get(ENTRY_KEY)
    return json.loads(value) if value else None


def pool_writes(api: ApiServer, pool: str) -> list[int]:
    return [w.status for w in api.writes("nodepools") if w.path.endswith(f"/nodepools/{pool}")]


def fail_patch(
    api: ApiServer, nth: int, status: int, pool: str = "batch"
) -> Callable[[RequestInfo], None]:
    """Answer the `nth` PATCH of `pool` (and every one after) with `status`."""
    seen: list[RequestInfo] = []

    def hook(info: RequestInfo) -> None:
        if info.method == "PATCH" and info.path.endswith(f"/nodepools/{pool}"):
            seen.append(info)
            if len(seen) == nth:
                api.inject(
                    Fault(method="PATCH", path=f"/nodepools/{pool}$", status=status, times=None)
                )

    return api.on_request(hook)


@pytest.fixture(params=[DROPS_REASONS, DROPS_BUDGETS])
def lossy(request, api: ApiServer, kubeconfig) -> tuple[ApiServer, str, str]:
    """A Karpenter that stores v1beta1; NodePool batch with people's budgets (as converted),
    an old node and a new one (a hold from 19:59:30 to 20:20:30)."""
    api.set_clock(T0)
    api.karpenter_conversion = request.param
    api.add_nodepool("batch", budgets=[dict(b) for b in PEOPLES])
    node(api, "batch-old", OLD, "batch")
    node(api, "batch-new", timedelta(minutes=1), "batch")
    return api, str(kubeconfig), request.param


def test_budget_removes_a_lost_entry_again_says_why_in_one_line_and_exits_1(lossy):
    api, kubeconfig, conversion = lossy
    before = budgets(api, "batch")
    assert before == KEPT[conversion]
    for _ in range(2):  # every run the same: nothing piles up
        result = run(kubeconfig, "reconcile", "--mechanism", "budget")
        assert result.code == 1
        assert budgets(api, "batch") == before and owned(api, "batch") is None
        said = [x for x in result.stderr.splitlines() if "not patched" in x]
        assert len(said) == 1 and "1 NodePool(s) not patched: batch" in said[0]
        assert "v0.33.6 to v0.37.x" in said[0] and "--mechanism annotation" in said[0]
        dropped = "reasons (v0.34 to v0.37)" if conversion == DROPS_REASONS else "list (v0.33)"
        assert "conversion webhook dropped the" in said[0] and dropped in said[0]
        assert "the entry was removed again" in said[0]
    assert pool_writes(api, "batch") == [200, 200] * 2  # the add, its removal; each run
    assert api.writes() == [] and api.events == []


def test_auto_holds_the_nodes_by_annotation_in_the_same_run_and_leaves_no_entry(lossy):
    api, kubeconfig, _ = lossy
    before = budgets(api, "batch")
    auto = ("reconcile", "--mechanism", "auto")
    result = run(kubeconfig, *auto)
    assert result.code == 0, result.stderr
    assert budgets(api, "batch") == before and owned(api, "batch") is None
    assert api.annotations("batch-old") == OURS and api.annotations("batch-new") == OURS
    said = [x for x in result.stderr.splitlines() if "no budget entry" in x]
    assert len(said) == 1 and "nodepool/batch: no budget entry (" in said[0]
    assert said[0].endswith("held by annotation until the hold ends")
    assert [(e["reason"], e["involvedObject"]["kind"]) for e in api.events] == [
        ("HoldStarted", "Node")
    ]
    # The hold goes on by annotation, no NodePool write, and every run says so and why...
    api.reset_log()
    again = run(kubeconfig, *auto)
    assert again.code == 0 and api.writes("nodepools") == []
    assert api.annotations("batch-old") == OURS
    (line,) = [x for x in again.stderr.splitlines() if "no budget entry" in x]
    assert "nodepool/batch: no budget entry (its nodes carry node-holder's hold annotations" in line
    assert line.endswith("held by annotation until the hold ends")
    listed = run(kubeconfig, *auto, "--output", "json").json["nodePoolsByAnnotation"]
    assert [p["nodePool"] for p in listed] == ["batch"] and "annotations" in listed[0]["why"]
    # ... and ends as one, naming it no more.
    api.advance_clock(timedelta(minutes=25))
    ended = run(kubeconfig, *auto, "--output", "json")
    assert ended.code == 0 and ended.json["nodePoolsByAnnotation"] == []
    assert "no budget entry" not in ended.stderr
    assert api.annotations("batch-old") == {} and budgets(api, "batch") == before


@pytest.mark.parametrize(
    "command",
    [
        ("release",),
        ("reconcile", "--mechanism", "budget"),
        ("reconcile", "--mechanism", "auto"),
    ],
)
def test_release_and_the_end_of_a_hold_remove_a_stripped_copy_never_a_persons(
    api: ApiServer, kubeconfig, command
):
    """A stripped copy of node-holder's entry, named by the record (a removal that failed),
    after a person's entry equal to it: only the one copy this tool appended goes. A
    person's entry of the same shape and minute but another duration stays too."""
    api.set_clock(T0 + timedelta(hours=1))  # the hold is over
    api.karpenter_conversion = DROPS_REASONS
    people = [dict(STRIPPED), *PEOPLES, LOOKALIKE]
    api.add_nodepool(
        "batch",
        budgets=[*people, dict(ENTRY)],
        annotations={ENTRY_KEY: json.dumps(ENTRY, separators=(",", ":"), sort_keys=True)},
    )
    node(api, "batch-old", OLD, "batch")
    assert budgets(api, "batch") == [*people, STRIPPED]
    result = run(str(kubeconfig), *command)
    assert result.code == 0, result.stderr
    assert budgets(api, "batch") == people and owned(api, "batch") is None
    said = "nodepool/batch: removed 1 stripped copy(ies) of its entry, dropped " + ENTRY_KEY
    assert said in result.stdout
    assert run(str(kubeconfig), *command).code == 0 and len(api.writes("nodepools")) == 1


@pytest.mark.parametrize("mechanism", ["budget", "auto"])
def test_a_persons_entry_equal_to_the_stripped_one_survives_a_lossy_write(
    api: ApiServer, kubeconfig, mechanism
):
    """Karpenter v0.34 to v0.37: NodePool batch holds a person's entry identical to this
    run's entry as stored without reasons. The run appends its entry, which comes back
    stripped, and removes that one copy again: the person's stays, `[P, 10%, Q]` as before."""
    api.set_clock(T0)
    api.karpenter_conversion = DROPS_REASONS
    before = [dict(STRIPPED), *PEOPLES]
    api.add_nodepool("batch", budgets=[dict(b) for b in before])
    node(api, "batch-new", timedelta(minutes=1), "batch")
    result = run(str(kubeconfig), "reconcile", "--mechanism", mechanism)
    assert result.code == (mechanism == "budget"), result.stderr
    assert budgets(api, "batch") == before and owned(api, "batch") is None
    assert pool_writes(api, "batch") == [200, 200]  # the add, its removal


def test_a_persons_stripped_lookalike_beside_our_entry_stays(api: ApiServer, kubeconfig):
    """Karpenter v1 keeps `reasons`: the list holds node-holder's entry as written, so an
    entry equal to its stripped copy is a person's (it blocks drift too) and stays."""
    api.set_clock(T0 + timedelta(hours=1))
    api.add_nodepool(
        "batch",
        budgets=[*PEOPLES, dict(STRIPPED), dict(ENTRY)],
        annotations={ENTRY_KEY: json.dumps(ENTRY, separators=(",", ":"), sort_keys=True)},
    )
    node(api, "batch-old", OLD, "batch")
    result = run(str(kubeconfig), "reconcile", "--mechanism", "budget")
    assert result.code == 0, result.stderr
    assert budgets(api, "batch") == [*PEOPLES, STRIPPED] and owned(api, "batch") is None
    assert [e["reason"] for e in api.events] == ["HoldEnded"]


@pytest.mark.parametrize("closing", ["release", "the end of the hold"])
def test_a_failed_removal_is_said_and_the_record_lets_release_or_the_end_remove_it(lossy, closing):
    """The removal of the lost entry is refused (say, the admission policy of an older
    install): the run says so, and the record still names what is left (a stripped copy;
    on v0.33, nothing); release, or the end of the hold, removes it and the record."""
    api, kubeconfig, conversion = lossy
    hook = fail_patch(api, 2, 403)
    result = run(kubeconfig, "reconcile", "--mechanism", "budget")
    assert result.code == 1
    assert "removing it again failed" in result.stderr and "release will" in result.stderr
    left = [STRIPPED] if conversion == DROPS_REASONS else []
    assert budgets(api, "batch") == [*KEPT[conversion], *left] and owned(api, "batch") == ENTRY
    api.clear_faults()
    api.remove_hook(hook)
    if closing == "release":
        assert run(kubeconfig, "release").code == 0
    else:
        api.advance_clock(timedelta(minutes=25))
        assert run(kubeconfig, "reconcile", "--mechanism", "budget").code == 0
    assert budgets(api, "batch") == KEPT[conversion] and owned(api, "batch") is None
    assert api.events == []  # no hold was ever made by a budget: nothing started or ended


@pytest.fixture
def full(api: ApiServer, kubeconfig) -> tuple[ApiServer, str]:
    """Karpenter v1; NodePool batch with 50 budgets (the CRD's maximum), gpu with none."""
    api.set_clock(T0)
    api.add_nodepool("batch", budgets=[{"nodes": f"{n}"} for n in range(50)])
    api.add_nodepool("gpu", budgets=[])
    for pool in ("batch", "gpu"):
        node(api, f"{pool}-old", OLD, pool)
        node(api, f"{pool}-new", timedelta(minutes=1), pool)
    return api, str(kubeconfig)


@pytest.mark.parametrize(
    ("refusal", "why"),
    [
        (None, "must have at most 50 items"),  # the CRD's own 422
        (Fault(method="PATCH", path="/nodepools/batch$", status=403, times=None), "forbidden"),
        (Fault(method="PATCH", path="/nodepools/batch$", status=404, times=None), "404"),
    ],
)
def test_auto_holds_by_annotation_every_nodepool_that_refuses_its_entry(full, refusal, why):
    api, kubeconfig = full
    if refusal:
        api.inject(refusal)
    result = run(kubeconfig, "reconcile", "--mechanism", "auto")
    assert result.code == 0, result.stderr
    assert api.annotations("batch-old") == OURS and api.annotations("batch-new") == OURS
    assert api.annotations("gpu-old") == {} and owned(api, "gpu") == ENTRY
    said = [x for x in result.stderr.splitlines() if "no budget entry" in x]
    assert len(said) == 1 and "nodepool/batch: no budget entry (" in said[0]
    assert why in said[0].lower()
    # budget has no fallback: after a release, the same refusal fails the run (a 404: the
    # NodePool is gone, nothing to hold).
    assert run(kubeconfig, "release").code == 0 and api.annotations("batch-old") == {}
    assert run(kubeconfig, "reconcile", "--mechanism", "budget").code == (why != "404")
    assert api.annotations("batch-old") == {}


def answer_lost(api: ApiServer) -> None:
    """The next NodePool PATCH lands, then its answer is a 504 (a proxy timed out)."""
    lost: list[bool] = []

    def write_then_504(info: RequestInfo) -> None:
        if info.method == "PATCH" and "/nodepools/" in info.path and not lost:
            lost.append(True)
            api.edit_nodepool("batch", lambda p: p.update(apply_json_patch(p, info.body)))
            api.inject(Fault(method="PATCH", status=504))

    api.on_request(write_then_504)


@pytest.mark.parametrize("edge", ["start", "end"])
def test_a_write_whose_answer_is_lost_is_reported_landed_with_its_event(
    api: ApiServer, kubeconfig, edge
):
    """A 504 after the write: the retry's `test` fails (422), the re-read shows the write
    landed: it is reported as landed, not as changed by someone else, and its Event is
    recorded (HoldStarted, HoldEnded)."""
    api.set_clock(T0)
    api.add_nodepool("batch", budgets=[dict(b) for b in PEOPLES])
    node(api, "batch-new", timedelta(minutes=1), "batch")
    budget = ("reconcile", "--mechanism", "budget")
    if edge == "end":
        assert run(str(kubeconfig), *budget).code == 0
        api.advance_clock(timedelta(minutes=25))
        api.reset_log()
    answer_lost(api)
    result = run(str(kubeconfig), *budget)
    assert result.code == 0, result.stderr
    if edge == "start":
        assert budgets(api, "batch") == [*PEOPLES, ENTRY] and owned(api, "batch") == ENTRY
        assert "nodepool/batch: added budget entry 59 19 22 11 * for 21m" in result.lines
    else:
        assert budgets(api, "batch") == PEOPLES and owned(api, "batch") is None
        assert "nodepool/batch: removed budget entry 59 19 22 11 * for 21m" in result.lines
    assert "someone else" not in result.stdout + result.stderr
    assert pool_writes(api, "batch") == [504, 422]
    reason = {"start": "HoldStarted", "end": "HoldEnded"}[edge]
    assert [(e["reason"], e["involvedObject"]["name"]) for e in api.events][-1:] == [
        (reason, "batch")
    ]


def test_an_entry_added_again_after_a_revert_is_hold_restored(api: ApiServer, kubeconfig):
    """Argo CD's self-heal removes the entry during the hold; the run adds it again and
    records HoldRestored, not a second HoldStarted; the end records HoldEnded."""
    api.set_clock(T0)
    api.add_nodepool("batch", budgets=[dict(b) for b in PEOPLES])
    node(api, "batch-new", timedelta(minutes=1), "batch")
    budget = ("reconcile", "--mechanism", "budget")
    assert run(str(kubeconfig), *budget).code == 0
    api.edit_nodepool(
        "batch", lambda p: p["spec"]["disruption"].update(budgets=[dict(b) for b in PEOPLES])
    )
    api.advance_clock(timedelta(minutes=1))
    assert run(str(kubeconfig), *budget).code == 0
    assert budgets(api, "batch") == [*PEOPLES, ENTRY]
    api.advance_clock(timedelta(minutes=25))
    assert run(str(kubeconfig), *budget).code == 0
    assert [e["reason"] for e in api.events] == ["HoldStarted", "HoldRestored", "HoldEnded"]
    assert api.events[1]["message"].startswith("Hold restored for cluster until ")
