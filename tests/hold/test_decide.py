"""The pure decision, example by example: each test names the rule it protects."""

from __future__ import annotations

from datetime import timedelta

import pytest

from reconcile.rule.decide import KeyState, Mode, decide
from reconcile.rule.nodes import NodeView
from reconcile.rule.selectors import parse_selector
from reconcile.rule.settings import FREE_UNTIL, OWNERSHIP_MARKER, HoldSettings, Scope
from tests.support import T0, apply_plan, held, merge, minutes, node

KEY = "karpenter.sh/do-not-disrupt"
CA_KEY = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
HOLD = HoldSettings()


def test_young_node_holds_every_node_with_one_patch_each() -> None:
    nodes = [node("old-a"), node("old-b"), node("young", minutes(5))]
    plan = decide(nodes, T0, HOLD)
    assert held(plan)
    assert plan.windows[0].youngest == "young"
    assert plan.windows[0].hold_until == T0 + minutes(15)
    assert {p.node for p in plan.patches} == {"old-a", "old-b", "young"}
    for patch in plan.patches:
        assert patch.body() == {
            "metadata": {
                "resourceVersion": "1",
                "annotations": {KEY: "true", OWNERSHIP_MARKER: KEY},
            }
        }


def test_hold_ends_exactly_at_youngest_plus_duration() -> None:
    nodes = [node("a", minutes(20))]
    assert not held(decide(nodes, T0, HOLD))  # now == created + 20m: released
    assert held(decide(nodes, T0 - timedelta(seconds=1), HOLD))


def test_release_removes_only_what_we_own() -> None:
    ours = {KEY: "true", OWNERSHIP_MARKER: KEY, "team": "x"}
    theirs = {KEY: "true", "team": "y"}
    nodes = [node("ours", annotations=ours), node("theirs", annotations=theirs)]
    plan = decide(nodes, T0, HOLD)
    assert not held(plan)
    assert [p.node for p in plan.patches] == ["ours"]
    assert merge(ours, plan.patches[0]) == {"team": "x"}


@pytest.mark.parametrize("value", ["true", "false", "", "yes"])
def test_foreign_hold_annotation_is_never_touched(value: str) -> None:
    nodes = [node("n", annotations={KEY: value}), node("young", minutes(1))]
    held = decide(nodes, T0, HOLD)
    assert all(p.node != "n" for p in held.patches)
    released = decide(nodes, T0 + minutes(30), HOLD)
    assert all(p.node != "n" for p in released.patches)
    expected = KeyState.FOREIGN if value == "true" else KeyState.EXEMPT
    assert dict(held.decisions[0].keys)[KEY] is expected


def test_value_changed_by_someone_is_disowned_not_removed() -> None:
    annotations = {KEY: "false", OWNERSHIP_MARKER: KEY}
    plan = decide([node("n", annotations=annotations)], T0, HOLD)
    (patch,) = plan.patches
    assert merge(annotations, patch) == {KEY: "false"}
    assert patch.action == "disown"


def test_deleting_nodes_neither_trigger_nor_get_patched() -> None:
    nodes = [node("old"), node("dying", minutes(1), deleting=True)]
    plan = decide(nodes, T0, HOLD)
    assert not held(plan)
    assert plan.patches == ()
    dying_with_ours = node("dying", deleting=True, annotations={KEY: "true", OWNERSHIP_MARKER: KEY})
    assert decide([dying_with_ours], T0, HOLD).patches == ()


def test_steady_state_makes_no_patch_and_new_node_costs_one() -> None:
    nodes = [node("a"), node("b", minutes(3))]
    nodes = apply_plan(nodes, decide(nodes, T0, HOLD).patches)
    assert decide(nodes, T0 + minutes(1), HOLD).patches == ()
    nodes.append(node("c", minutes(0), now=T0 + minutes(2)))
    assert [p.node for p in decide(nodes, T0 + minutes(2), HOLD).patches] == ["c"]


def test_full_cycle_restores_every_annotation_exactly() -> None:
    before = {
        "a": {"team": "x", "note": "keep"},
        "b": {},
        "c": {KEY: "false"},
        "d": {CA_KEY: "true"},
    }
    hold = HoldSettings(annotations=(KEY, CA_KEY))
    nodes = [node(name, annotations=a) for name, a in before.items()] + [node("new", minutes(2))]
    nodes = apply_plan(nodes, decide(nodes, T0, hold).patches)
    assert nodes[0].annotations[KEY] == "true"
    assert nodes[2].annotations[KEY] == "false"  # foreign value kept during the hold
    nodes = apply_plan(nodes, decide(nodes, T0 + minutes(30), hold).patches)
    assert {n.name: dict(n.annotations) for n in nodes} == {**before, "new": {}}


def test_ownership_is_per_key() -> None:
    hold = HoldSettings(annotations=(KEY, CA_KEY))
    nodes = [node("n", annotations={CA_KEY: "true"}), node("young", minutes(1))]
    plan = decide(nodes, T0, hold)
    patch = next(p for p in plan.patches if p.node == "n")
    assert dict(patch.changes) == {KEY: "true", OWNERSHIP_MARKER: KEY}


def test_keys_we_own_but_no_longer_configure_are_removed() -> None:
    """Switching --annotation from do-not-consolidate to do-not-disrupt cleans up the old key."""
    old = "karpenter.sh/do-not-consolidate"
    annotations = {old: "true", OWNERSHIP_MARKER: old}
    nodes = [node("n", annotations=annotations), node("young", minutes(1))]
    (patch,) = [p for p in decide(nodes, T0, HOLD).patches if p.node == "n"]
    assert merge(annotations, patch) == {KEY: "true", OWNERSHIP_MARKER: KEY}


def test_release_mode_removes_every_owned_hold_even_during_a_hold() -> None:
    ours = {KEY: "true", OWNERSHIP_MARKER: KEY}
    nodes = [node("a", annotations=ours), node("young", minutes(1), annotations=ours)]
    plan = decide(nodes, T0, HOLD, Mode.RELEASE)
    assert not held(plan)
    assert sorted(p.node for p in plan.patches) == ["a", "young"]
    assert all(merge(ours, p) == {} for p in plan.patches)


def test_group_scope_holds_only_the_group_of_the_new_node() -> None:
    hold = HoldSettings(scope=Scope.GROUP)
    pool = "karpenter.sh/nodepool"
    nodes = [
        node("batch-old", labels={pool: "batch"}),
        node("batch-new", minutes(2), labels={pool: "batch"}),
        node("web-old", labels={pool: "web"}),
        node("unlabelled"),
    ]
    plan = decide(nodes, T0, hold)
    assert sorted(p.node for p in plan.patches) == ["batch-new", "batch-old"]
    assert {w.name: w.held for w in plan.windows} == {
        "!karpenter.sh/nodepool": False,
        "karpenter.sh/nodepool=batch": True,
        "karpenter.sh/nodepool=web": False,
    }


def test_unlabelled_nodes_form_their_own_group() -> None:
    hold = HoldSettings(scope=Scope.GROUP)
    nodes = [node("a"), node("b", minutes(1)), node("c", labels={"karpenter.sh/nodepool": "x"})]
    assert sorted(p.node for p in decide(nodes, T0, hold).patches) == ["a", "b"]


def test_node_scope_holds_each_node_until_it_is_old_enough() -> None:
    hold = HoldSettings(scope=Scope.NODE)
    nodes = [node("old"), node("young", minutes(19)), node("newest", minutes(1))]
    assert sorted(p.node for p in decide(nodes, T0, hold).patches) == ["newest", "young"]


def test_trigger_selector_limits_who_starts_a_hold() -> None:
    hold = HoldSettings(trigger_selector=parse_selector("karpenter.sh/nodepool"))
    unmanaged_young = [node("old"), node("static", minutes(1))]
    assert not held(decide(unmanaged_young, T0, hold))
    managed = [*unmanaged_young, node("kp", minutes(1), labels={"karpenter.sh/nodepool": "a"})]
    plan = decide(managed, T0, hold)
    assert held(plan) and len(plan.patches) == 3


def test_node_selector_limits_who_is_held_and_releases_leavers() -> None:
    hold = HoldSettings(node_selector=parse_selector("karpenter.sh/nodepool"))
    ours = {KEY: "true", OWNERSHIP_MARKER: KEY}
    nodes = [
        node("kp", labels={"karpenter.sh/nodepool": "a"}),
        node("static", minutes(1)),
        node("left-the-pool", annotations=ours),
    ]
    plan = decide(nodes, T0, hold)
    assert held(plan)
    patches = {p.node: p for p in plan.patches}
    assert set(patches) == {"kp", "left-the-pool"}
    assert merge(ours, patches["left-the-pool"]) == {}


def test_max_hold_caps_a_stretch_and_then_stays_free_for_one_hold_duration() -> None:
    hold = HoldSettings(hold_duration=minutes(20), max_hold=minutes(60))
    start = T0 - minutes(70)
    # A node every 10 minutes for 70 minutes: without a cap, held the whole time.
    nodes = [node(f"n{i}", now=start + minutes(10 * i), age=timedelta(0)) for i in range(8)]
    plan = decide(nodes, T0, hold)
    window = plan.windows[0]
    assert window.capped
    assert window.hold_until == start + minutes(60)
    assert not held(plan)
    assert held(decide(nodes, T0, HoldSettings(hold_duration=minutes(20))))  # uncapped: held
    # Nodes created in the gap (60..80) start no hold; one created after it does.
    later = [*nodes, node("after-gap", now=start + minutes(81), age=timedelta(0))]
    assert held(decide(later, start + minutes(82), hold))


def test_the_free_period_outlives_the_nodes_the_cap_released() -> None:
    """Consolidation may remove every released node during the free period (that is what
    it is for); the nodes that came in meanwhile carry the stamp, so no hold starts early."""
    hold = HoldSettings(hold_duration=minutes(20), max_hold=minutes(60))
    start = T0 - minutes(70)
    nodes: list[NodeView] = []
    for minute in range(71):  # a run every minute, a node every 10 minutes
        now = start + minutes(minute)
        if minute % 10 == 0:
            nodes.append(node(f"n{minute}", now=now, age=timedelta(0)))
        nodes = apply_plan(nodes, decide(nodes, now, hold).patches)
    free_until = {n.annotations.get(FREE_UNTIL) for n in nodes}
    assert len(free_until) == 1 and None not in free_until  # released by the cap at 60
    free = T0 + minutes(10)  # one hold duration after the release at start + 60

    newcomer = node("newcomer", now=T0 + minutes(1), age=timedelta(0))
    plan = decide([*nodes, newcomer], T0 + minutes(1), hold)
    (stamp,) = plan.patches
    assert stamp.node == "newcomer" and stamp.action == "tidy"  # no hold, only the stamp
    assert dict(stamp.changes) == {FREE_UNTIL: free.strftime("%Y-%m-%dT%H:%M:%SZ")}
    assert not held(plan)

    survivors = apply_plan([newcomer], plan.patches)  # every released node consolidated away
    later = T0 + minutes(5)
    assert not held(decide(survivors, later, hold))  # still free: the newcomer says so
    after = decide(survivors, free, hold)
    assert held(after)  # the free period is over: the young newcomer holds again
    assert merge(survivors[0].annotations, after.patches[0]).get(FREE_UNTIL) is None


def test_empty_cluster_is_released_with_no_patches() -> None:
    plan = decide([], T0, HOLD)
    assert not held(plan) and plan.patches == () and plan.windows[0].youngest is None


def test_transitions_name_the_youngest_node_and_count_the_changed_ones() -> None:
    nodes = [node("a"), node("young", minutes(5))]
    start = decide(nodes, T0, HOLD)
    (started,) = start.transitions
    assert (started.reason, started.node, started.node_uid) == ("HoldStarted", "young", "uid-young")
    assert (started.window, started.nodes) == (start.windows[0], 2)
    held = apply_plan(nodes, start.patches)
    grown = [*held, node("newer", minutes(1))]
    (extended,) = decide(grown, T0, HOLD).transitions
    assert (extended.reason, extended.node, extended.nodes) == ("HoldExtended", "newer", 1)
    end = decide(held, T0 + minutes(20), HOLD)
    (ended,) = end.transitions
    assert (ended.reason, ended.node, ended.nodes) == ("HoldEnded", "young", 2)
    assert ended.window == end.windows[0] and not ended.window.held
    assert decide(held, T0, HOLD).transitions == ()


def test_the_last_stretch_of_overlapping_holds_begins_at_its_oldest_node_however_long() -> None:
    """Nodes 15 minutes apart, each holding 20, in any order: one stretch since the first,
    however many nodes it goes back; a hold that ended before it is not part of it."""
    chain = [node(f"n{i}", minutes(15 * i)) for i in range(12)]  # 0 to 165 minutes old
    ended = node("ended", minutes(165 + 30))  # its hold ended 10 minutes before n11 arrived
    for nodes, oldest in ((chain[:3], 30), (chain, 165), ([ended, *chain], 165)):
        window = decide(nodes[::-1], T0, HOLD).windows[0]
        assert window.stretch_start == T0 - minutes(oldest)
        assert (window.youngest, window.hold_until) == ("n0", T0 + minutes(20))
        assert window.triggers == len(nodes)
