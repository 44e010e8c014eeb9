"""Property-based tests of the decision over arbitrary clusters and sequences of runs.

The model applies each plan's merge patches the way the API server does, then
checks the contract: held means every selected node carries the annotation;
released means none carries one of ours; annotations set by others never
change; a second run with nothing new makes no patch; a hold-and-release cycle
restores every annotation exactly.
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from reconcile.decide import KeyState, Mode, decide, key_state
from reconcile.nodes import NodeView, claimed_keys
from reconcile.selectors import parse_selector
from reconcile.settings import (
    HOLD_VALUE,
    OWN_ANNOTATIONS,
    OWNERSHIP_MARKER,
    HoldSettings,
    Scope,
)
from tests.support import T0, apply_plan

KEY = "karpenter.sh/do-not-disrupt"
CA_KEY = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
OLD_KEY = "karpenter.sh/do-not-consolidate"
POOL = "karpenter.sh/nodepool"
HOLD_KEYS = (KEY, CA_KEY, OLD_KEY)

values = st.sampled_from(["true", "false", "", "True", "1"])
marker_values = st.lists(st.sampled_from(HOLD_KEYS), max_size=3).map(",".join)
annotation_maps = st.dictionaries(
    st.sampled_from([*HOLD_KEYS, "team", "example.com/note", OWNERSHIP_MARKER]),
    values,
    max_size=4,
).flatmap(
    lambda a: (
        marker_values.map(lambda m: {**a, OWNERSHIP_MARKER: m})
        if OWNERSHIP_MARKER in a
        else st.just(a)
    )
)
label_maps = st.dictionaries(st.just(POOL), st.sampled_from(["a", "b", ""]), max_size=1)
ages = st.integers(min_value=-60, max_value=4 * 3600).map(lambda s: timedelta(seconds=s))

hold_settings = st.builds(
    HoldSettings,
    hold_duration=st.sampled_from([timedelta(minutes=m) for m in (1, 10, 20, 45)]),
    annotations=st.lists(st.sampled_from(HOLD_KEYS), min_size=1, max_size=2, unique=True).map(
        tuple
    ),
    scope=st.sampled_from(list(Scope)),
    trigger_selector=st.sampled_from(["", POOL, f"{POOL} in (a)"]).map(parse_selector),
    node_selector=st.sampled_from(["", POOL, f"{POOL}!=b"]).map(parse_selector),
    max_hold=st.sampled_from([None, timedelta(hours=1), timedelta(hours=2)]),
)


@st.composite
def clusters(draw: st.DrawFn) -> list[NodeView]:
    count = draw(st.integers(min_value=0, max_value=12))
    return [
        NodeView(
            name=f"node-{i}",
            created=T0 - draw(ages),
            resource_version=str(i + 1),
            uid=f"uid-{i}",
            deleting=draw(st.booleans().map(lambda b: b and draw(st.integers(0, 4)) == 0)),
            labels=draw(label_maps),
            annotations=draw(annotation_maps),
        )
        for i in range(count)
    ]


def foreign(view: NodeView) -> dict[str, str]:
    """Everything on the node that is not ours: must survive every run untouched."""
    claimed = claimed_keys(view.annotations)
    return {
        k: v
        for k, v in view.annotations.items()
        if k != OWNERSHIP_MARKER and key_state(view.annotations, k, claimed) is not KeyState.OURS
    }


def held_as_expected(
    view: NodeView, plan_held_windows: set[str], hold: HoldSettings, name: str
) -> bool:
    return (
        name in plan_held_windows and not view.deleting and hold.node_selector.matches(view.labels)
    )


@settings(max_examples=300, deadline=None)
@given(nodes=clusters(), hold=hold_settings, later=ages)
def test_one_run_reaches_the_desired_state_and_keeps_foreign_annotations(
    nodes: list[NodeView], hold: HoldSettings, later: timedelta
) -> None:
    now = T0 + abs(later)
    plan = decide(nodes, now, hold)
    after = apply_plan(nodes, plan.patches)
    held_windows = {w.name for w in plan.windows if w.held}
    for before, view, decision in zip(nodes, after, plan.decisions, strict=True):
        # Annotations set by others never change.
        assert all(view.annotations.get(k) == v for k, v in foreign(before).items())
        if before.deleting:
            assert view.annotations == before.annotations  # never patched
            continue
        # ...and are never claimed; every claim left is backed by our value.
        claimed = claimed_keys(view.annotations)
        assert not (claimed & set(foreign(before)))
        assert all(view.annotations.get(key) == HOLD_VALUE for key in claimed)
        if held_as_expected(view, held_windows, hold, decision.window):
            assert all(key in view.annotations for key in hold.annotations)
        else:
            assert claimed == set()
            assert OWNERSHIP_MARKER not in view.annotations
    # Idempotent: the next run at the same moment has nothing to do.
    assert decide(after, now, hold).patches == ()


@settings(max_examples=300, deadline=None)
@given(nodes=clusters(), hold=hold_settings)
def test_patches_are_minimal_and_touch_only_our_keys(
    nodes: list[NodeView], hold: HoldSettings
) -> None:
    plan = decide(nodes, T0, hold)
    by_name = {n.name: n for n in nodes}
    for patch in plan.patches:
        before = by_name[patch.node].annotations
        assert not by_name[patch.node].deleting
        for key, value in patch.changes:
            assert key in (*hold.annotations, *OWN_ANNOTATIONS) or key in claimed_keys(before)
            assert before.get(key) != value  # every change changes something
        assert patch.resource_version == by_name[patch.node].resource_version


@settings(max_examples=200, deadline=None)
@given(nodes=clusters(), hold=hold_settings)
def test_hold_then_release_restores_annotations_exactly(
    nodes: list[NodeView], hold: HoldSettings
) -> None:
    # Start from a cluster the tool has never touched.
    clean = [
        NodeView(
            n.name,
            n.created,
            n.resource_version,
            n.uid,
            n.deleting,
            n.labels,
            {k: v for k, v in n.annotations.items() if k not in OWN_ANNOTATIONS},
        )
        for n in nodes
    ]
    held = apply_plan(clean, decide(clean, T0, hold).patches)
    released = apply_plan(held, decide(held, T0, hold, Mode.RELEASE).patches)
    assert [dict(n.annotations) for n in released] == [dict(n.annotations) for n in clean]
    # ...and the same through time: far in the future every hold has ended.
    aged = apply_plan(held, decide(held, T0 + timedelta(days=30), hold).patches)
    assert [dict(n.annotations) for n in aged] == [dict(n.annotations) for n in clean]


@settings(max_examples=300, deadline=None)
@given(nodes=clusters(), hold=hold_settings)
def test_never_released_while_a_young_trigger_node_exists(
    nodes: list[NodeView], hold: HoldSettings
) -> None:
    """Without --max-hold: held exactly while a live trigger node is younger than the hold."""
    hold = HoldSettings(**{**hold.__dict__, "max_hold": None})
    plan = decide(nodes, T0, hold)
    for window in plan.windows:
        members = [n for n, d in zip(nodes, plan.decisions, strict=True) if d.window == window.name]
        young = [
            n
            for n in members
            if not n.deleting
            and hold.trigger_selector.matches(n.labels)
            and n.created + hold.hold_duration > T0
        ]
        assert window.held == bool(young)


@settings(max_examples=200, deadline=None)
@given(nodes=clusters(), hold=hold_settings, steps=st.lists(st.integers(0, 3600), max_size=6))
def test_a_sequence_of_runs_never_writes_when_nothing_changed(
    nodes: list[NodeView], hold: HoldSettings, steps: list[int]
) -> None:
    now = T0
    state = apply_plan(nodes, decide(nodes, now, hold).patches)
    for step in steps:
        now += timedelta(seconds=step)
        first = decide(state, now, hold)
        state = apply_plan(state, first.patches)
        assert decide(state, now, hold).patches == ()


@settings(max_examples=200, deadline=None)
@given(nodes=clusters(), hold=hold_settings)
def test_a_new_node_during_a_hold_costs_exactly_one_write(
    nodes: list[NodeView], hold: HoldSettings
) -> None:
    hold = HoldSettings(
        **{**hold.__dict__, "scope": Scope.CLUSTER, "trigger_selector": parse_selector("")}
    )
    first = decide(nodes, T0, hold)
    assume(first.held and (hold.max_hold is None or not first.windows[0].capped))
    state = apply_plan(nodes, first.patches)
    newcomer = NodeView("newcomer", T0, "999", "uid-new", labels={POOL: "a"})
    plan = decide([*state, newcomer], T0, hold)
    selected = hold.node_selector.matches(newcomer.labels)
    assert plan.held
    assert [p.node for p in plan.patches] == (["newcomer"] if selected else [])
