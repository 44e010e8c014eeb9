"""The words of each Event: the decision says what changed (a Transition), the report says it.

Every reason and every cause of a hold's end, word for word: these lines are what people
read in `kubectl describe node` and in the run's report.
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from reconcile.cli.report import event_message
from reconcile.rule.decide import HoldWindow, Plan, Reason, Transition, decide, recorded_events
from reconcile.rule.selectors import parse_selector
from reconcile.rule.settings import HoldSettings, Mode, Scope
from tests.support import T0, apply_plan, minutes, node

KEY = "karpenter.sh/do-not-disrupt"
OURS = {KEY: "true", "node-holder.dev/owned-annotations": KEY}
HOLD = HoldSettings()


def words(plan: Plan) -> list[str]:
    return [f"{t.reason} on {t.node}: {event_message(t, plan)}" for t in plan.transitions]


def test_a_hold_starts_grows_and_ends_with_its_youngest_node_named() -> None:
    nodes = [node("a"), node("young", minutes(5))]
    start = decide(nodes, T0, HOLD)
    assert words(start) == [
        "HoldStarted on young: Hold started for cluster until 2026-11-22T12:15:00Z: youngest "
        "node young created 2026-11-22T11:55:00Z; hold annotation added to 2 node(s)"
    ]
    held = apply_plan(nodes, start.patches)
    assert words(decide([*held, node("newer", minutes(1))], T0, HOLD)) == [
        "HoldExtended on newer: Hold extended for cluster until 2026-11-22T12:19:00Z: youngest "
        "node newer created 2026-11-22T11:59:00Z; hold annotation added to 1 node(s)"
    ]
    assert words(decide(held, T0 + minutes(20), HOLD)) == [
        "HoldEnded on young: Hold ended for cluster: the trigger nodes' holds ended at "
        "2026-11-22T12:15:00Z; hold annotation removed from 2 node(s)"
    ]
    assert words(decide(held, T0, HOLD, Mode.RELEASE)) == [
        "HoldEnded on young: Hold ended for cluster: released by node-holder release; "
        "hold annotation removed from 2 node(s)"
    ]


def test_a_hold_ended_by_the_cap_or_by_no_trigger_says_so() -> None:
    # Holds of 20m chained from 12:40 ago; a 30m cap ends the stretch at 11:50.
    chained = [node(f"n{i}", minutes(age), annotations=OURS) for i, age in enumerate((40, 25, 10))]
    capped = HoldSettings(max_hold=timedelta(minutes=30))
    assert words(decide(chained, T0, capped)) == [
        "HoldEnded on n2: Hold ended for cluster: max-hold reached at 2026-11-22T11:50:00Z; "
        "hold annotation removed from 3 node(s)"
    ]
    nobody = HoldSettings(trigger_selector=parse_selector("karpenter.sh/nodepool"))
    assert words(decide(chained, T0, nobody)) == [
        "HoldEnded on n0: Hold ended for cluster: no node triggers a hold any more; "
        "hold annotation removed from 3 node(s)"
    ]


def test_past_ten_events_the_rest_are_summed_up_in_one() -> None:
    nodes = [node(f"n{i:02}", annotations=OURS) for i in range(12)]
    plan = decide(nodes, T0, HoldSettings(scope=Scope.NODE))
    events = recorded_events(plan.transitions)
    assert len(events) == 10
    assert event_message(events[-1], plan) == (
        "Hold ended for 3 more windows, 3 node(s) in all (one run records at most 10 Events)"
    )
    assert events[-1].node == "n09" and events[-1].more == 3


@given(
    st.lists(
        st.tuples(st.sampled_from(list(Reason)), st.sampled_from(["Node", "NodePool"])),
        max_size=30,
    ),
    st.integers(0, 50),
)
def test_node_and_nodepool_events_share_one_bound_and_the_summary_counts_the_rest(
    kinds: list[tuple[Reason, str]], nodes: int
) -> None:
    """However many node and NodePool Events a run has, it records at most ten; each one past
    them is in a summary of its reason, and so are its nodes."""
    transitions = [
        Transition(
            r, HoldWindow(f"w{i}", held=True), f"o{i}", "", 0 if k == "NodePool" else nodes, kind=k
        )
        for i, (r, k) in enumerate(kinds)
    ]
    events = recorded_events(transitions)
    assert len(events) <= 10 and (len(transitions) > 10 or list(events) == transitions)
    shown = [e for e in events if e.window is not None]
    assert shown == transitions[: len(shown)]
    for reason in Reason:
        mine = [t for t in transitions if t.reason is reason]
        told = [e for e in events if e.reason is reason]
        assert sum(e.more or 1 for e in told) == len(mine)
        assert sum(e.nodes for e in told) == sum(t.nodes for t in mine)
