"""The budget mechanism's pure rule (reconcile/rule/budget.py), by property: whatever other
entries a NodePool has (people's, and entries of node-holder's shape it does not own), a hold
adds exactly one entry, extends it in place, and its end restores the list exactly; the entry
is active for the hold as Karpenter reads a budget (a schedule hit in (now - duration, now]);
the JSON Patch is applied the way the API test server applies it (tests/kubeapi/patching.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from reconcile.rule.budget import ENTRY_KEY, budget_entry, decide_pool, pool_view
from reconcile.rule.decide import decide
from reconcile.rule.nodes import NodeView
from reconcile.rule.settings import HoldSettings, Mechanism, Mode
from tests.kubeapi.patching import apply_json_patch

T0 = datetime(2026, 11, 22, 20, tzinfo=UTC)
HOLD = HoldSettings(mechanism=Mechanism.BUDGET)

people = st.lists(
    st.one_of(
        st.builds(lambda n: {"nodes": f"{n}%"}, st.integers(0, 100)),
        st.builds(
            lambda m, d: {
                "nodes": "0",
                "reasons": ["Empty", "Underutilized"],
                "schedule": f"{m} 9 1 1 *",
                "duration": f"{d}m",
            },
            st.integers(0, 59),
            st.integers(1, 90),
        ),
    ),
    max_size=6,
)


def nodepool(budgets: list[dict], annotations: dict | None = None) -> dict:
    meta = {"name": "batch", "uid": "u", "resourceVersion": "1", "annotations": annotations or {}}
    return {"metadata": meta, "spec": {"disruption": {"budgets": budgets}}}


def run(pool: dict, nodes: list[NodeView], now: datetime, mode: Mode = Mode.RECONCILE) -> dict:
    """One run's decision for the NodePool, its patch applied (a new resourceVersion)."""
    plan = decide(nodes, now, HOLD, mode)
    if patch := decide_pool(pool_view(pool), plan):
        pool = apply_json_patch(pool, json.dumps(patch.body()).encode())
        pool["metadata"]["resourceVersion"] = str(int(pool["metadata"]["resourceVersion"]) + 1)
    return pool


@settings(max_examples=60, deadline=None)
@given(
    others=people,
    annotated=st.booleans(),
    ages=st.lists(st.integers(0, 19 * 60), min_size=1, max_size=4),
    later=st.integers(1, 15 * 60),
)
def test_a_hold_adds_one_entry_extends_it_and_its_end_restores_the_list(
    others, annotated, ages, later
):
    assume(later < 20 * 60 - min(ages))  # the new node comes while the hold lasts
    start = nodepool(list(others), {"team": "a"} if annotated else None)
    nodes = [
        NodeView(f"n{i}", T0 - timedelta(seconds=a), labels={"karpenter.sh/nodepool": "batch"})
        for i, a in enumerate(ages)
    ]
    held = run(start, nodes, T0)
    budgets = held["spec"]["disruption"]["budgets"]
    assert budgets[:-1] == others, "every other entry kept, in order"
    assert json.loads(held["metadata"]["annotations"][ENTRY_KEY]) == budgets[-1]
    assert run(held, nodes, T0) == held, "a second run changes nothing"
    newer = [
        *nodes,
        NodeView("new", T0 + timedelta(seconds=later), labels={"karpenter.sh/nodepool": "batch"}),
    ]
    extended = run(held, newer, T0 + timedelta(seconds=later))
    grown = extended["spec"]["disruption"]["budgets"]
    assert grown[:-1] == others and grown[-1]["schedule"] == budgets[-1]["schedule"]
    assert grown[-1]["duration"] != budgets[-1]["duration"] or later < 60
    ended = run(extended, newer, T0 + timedelta(hours=1))
    released = run(extended, newer, T0 + timedelta(seconds=later), Mode.RELEASE)
    for done in (ended, released):
        assert done["spec"]["disruption"]["budgets"] == others
        assert done["metadata"]["annotations"] == start["metadata"]["annotations"]


@settings(max_examples=200, deadline=None)
@given(start=st.integers(0, 10**8), length=st.integers(1, 7 * 86400))
def test_the_entry_is_active_exactly_for_the_hold_to_the_minute(start, length):
    begin = T0 + timedelta(seconds=start)
    until = begin + timedelta(seconds=length)
    entry = budget_entry(begin, until)
    minute, hour, day, month, any_weekday = entry["schedule"].split()
    hit = begin.replace(second=0, microsecond=0)
    assert (int(minute), int(hour), int(day), int(month), any_weekday) == (
        hit.minute,
        hit.hour,
        hit.day,
        hit.month,
        "*",
    )
    hours, _, minutes = entry["duration"].rpartition("h")
    duration = timedelta(hours=int(hours or 0), minutes=int(minutes.rstrip("m") or 0))
    # Karpenter: active while a schedule hit lies in (now - duration, now].
    assert hit <= begin and hit + duration >= until > hit + duration - timedelta(minutes=1)
    assert entry["nodes"] == "0" and entry["reasons"] == ["Empty", "Underutilized"]


def strip(pool: dict) -> dict:
    """The NodePool as Karpenter v0.34 to v0.37 store it: every budget without `reasons`."""
    out = json.loads(json.dumps(pool))
    budgets = out["spec"]["disruption"]["budgets"]
    out["spec"]["disruption"]["budgets"] = [
        {k: v for k, v in b.items() if k != "reasons"} for b in budgets
    ]
    return out


@settings(max_examples=60, deadline=None)
@given(others=people, equal=st.integers(0, 2), mode=st.sampled_from([Mode.RECONCILE, Mode.RELEASE]))
def test_the_stripped_copy_goes_and_nothing_else_when_the_hold_is_over(others, equal, mode):
    """A conversion stripped the entry, which follows `equal` people's entries of the same
    value: the end of the hold and release remove the one copy node-holder appended and the
    record, and no other entry."""
    nodes = [NodeView("n", T0 - timedelta(minutes=5), labels={"karpenter.sh/nodepool": "batch"})]
    held = run(nodepool(list(others)), nodes, T0)
    [entry] = [b for b in held["spec"]["disruption"]["budgets"] if b not in others]
    theirs = [*others, *[entry] * equal]
    held["spec"]["disruption"]["budgets"] = [*theirs, entry]
    lossy = strip(held)
    done = run(lossy, nodes, T0 + timedelta(hours=1), mode)
    assert (
        done["spec"]["disruption"]["budgets"]
        == strip(nodepool(theirs))["spec"]["disruption"]["budgets"]
    )
    assert ENTRY_KEY not in done["metadata"]["annotations"]
