"""Property-based tests of the decision over arbitrary clusters and sequences of runs.

The model applies each plan's merge patches the way the API server does, then
checks the contract: held means every selected node carries the annotation;
released means none carries one of ours; annotations set by others never
change; a second run with nothing new makes no patch; a hold-and-release cycle
restores every annotation exactly; a person's pins are never touched; a claim whose
key is still "true" is never dropped; nothing is dated after now (nodes from a
skewed server, forged stamps). Nodes carry their NodePool's hold settings, good and bad:
each trigger node holds for its own duration, and a new node never shortens a hold (without
a cap) nor lengthens a window's cap.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from unittest import mock

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from reconcile.rule import decide as rule
from reconcile.rule.decide import KeyState, Mode, decide, key_state
from reconcile.rule.nodes import NodePoolOwn, NodeView, claimed_keys, pinned_keys
from reconcile.rule.selectors import parse_selector
from reconcile.rule.settings import (
    FREE_UNTIL,
    HOLD_STARTED,
    HOLD_VALUE,
    KNOWN_HOLD_KEYS,
    NODE_HOLD,
    NODE_MAX_HOLD,
    OWN_ANNOTATIONS,
    OWNERSHIP_MARKER,
    PINNED,
    HoldSettings,
    Scope,
)
from tests.support import T0, apply_plan, held

KEY = "karpenter.sh/do-not-disrupt"
CA_KEY = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
OLD_KEY = "karpenter.sh/do-not-consolidate"
CUSTOM = "example.com/hold"  # configured only sometimes: claims on it may outlive a run
POOL = "karpenter.sh/nodepool"
HOLD_KEYS = (KEY, CA_KEY, OLD_KEY, CUSTOM)

values = st.sampled_from(["true", "false", "", "True", "1"])
key_lists = st.lists(st.sampled_from(HOLD_KEYS), max_size=3).map(",".join)
#: Our stamps as a run writes them, and as a skewed server, a forger or a typo leaves them.
stamps = st.one_of(
    st.integers(-6 * 3600, 40 * 24 * 3600).map(
        lambda s: (T0 + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%SZ")
    ),
    st.sampled_from(["", "yesterday", "2026-11-22T12:00:00+00:00"]),
)
#: A NodePool's own hold durations, as people write them; anything else is bad input.
POOL_HOLDS = {
    "0": timedelta(0),
    "5": timedelta(minutes=5),
    "45m": timedelta(minutes=45),
    "2h": timedelta(hours=2),
}
pool_holds = st.sampled_from([*POOL_HOLDS, "45 minutes", "-5m", "9999h"])
pool_caps = st.sampled_from(["", "30m", "1h", "3h", "90"])
OWN_VALUES = {
    OWNERSHIP_MARKER: key_lists,
    PINNED: key_lists,
    HOLD_STARTED: stamps,
    FREE_UNTIL: stamps,
    NODE_HOLD: pool_holds,
    NODE_MAX_HOLD: pool_caps,
}
annotation_maps = st.dictionaries(
    st.sampled_from([*HOLD_KEYS, "team", "example.com/note", *OWN_VALUES]),
    values,
    max_size=5,
).flatmap(
    lambda a: st.fixed_dictionaries(
        {k: OWN_VALUES[k] if k in OWN_VALUES else st.just(v) for k, v in a.items()}
    )
)
label_maps = st.dictionaries(st.just(POOL), st.sampled_from(["a", "b", ""]), max_size=1)
#: Negative: created ahead of now, as through an API server whose clock runs ahead.
ages = st.integers(min_value=-3 * 3600, max_value=4 * 3600).map(lambda s: timedelta(seconds=s))

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


def parsed(view: NodeView) -> NodeView:
    """The view with its NodePool's own settings, as node_view gives them: drawn here as the
    node's NODE_HOLD and NODE_MAX_HOLD annotations (which the decision does not read)."""
    hold, cap = view.annotations.get(NODE_HOLD), view.annotations.get(NODE_MAX_HOLD)
    pool = view.labels.get(POOL, "")
    return view._replace(own=None if hold is None and cap is None else NodePoolOwn(pool, hold, cap))


@st.composite
def clusters(draw: st.DrawFn) -> list[NodeView]:
    count = draw(st.integers(min_value=0, max_value=12))
    nodes = []
    for i in range(count):
        labels = draw(label_maps)
        nodes.append(
            parsed(
                NodeView(
                    name=f"node-{i}",
                    created=T0 - draw(ages),
                    resource_version=str(i + 1),
                    uid=f"uid-{i}",
                    deleting=draw(st.booleans().map(lambda b: b and draw(st.integers(0, 4)) == 0)),
                    labels=labels,
                    annotations=draw(annotation_maps),
                    # A Karpenter NodeClaim's node before its NodePool label arrives.
                    registering=POOL not in labels and draw(st.integers(0, 3)) == 0,
                )
            )
        )
    return nodes


#: Nodes of a few NodePools, young enough for their own holds and caps to matter.
young = st.integers(min_value=-300, max_value=3 * 3600).map(lambda s: timedelta(seconds=s))
pool_settings = st.fixed_dictionaries(
    {}, optional={NODE_HOLD: pool_holds, NODE_MAX_HOLD: pool_caps}
)
pool_nodes = st.lists(st.tuples(young, label_maps, pool_settings), max_size=8).map(
    lambda rows: [
        parsed(NodeView(f"node-{i}", T0 - age, str(i + 1), f"uid-{i}", False, labels, own))
        for i, (age, labels, own) in enumerate(rows)
    ]
)
newcomers = st.builds(
    lambda age, labels, own: parsed(
        NodeView("newcomer", T0 - age, "999", "uid-new", False, labels, own)
    ),
    young,
    label_maps,
    pool_settings,
)


def foreign(view: NodeView) -> dict[str, str]:
    """Everything on the node that is not ours: must survive every run untouched, and never
    be claimed. A pinned key whose claim says node-holder wrote its "true" is ours, pinned."""
    claimed, pinned = claimed_keys(view.annotations), pinned_keys(view.annotations)
    return {
        k: v
        for k, v in view.annotations.items()
        if k not in (OWNERSHIP_MARKER, HOLD_STARTED, FREE_UNTIL)
        and key_state(view.annotations, k, claimed, pinned) is not KeyState.OURS
        and not (k in claimed and k in pinned and v == HOLD_VALUE)
    }


def known(key: str, hold: HoldSettings) -> bool:
    return key in hold.annotations or key in KNOWN_HOLD_KEYS


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
        claimed, pinned = claimed_keys(view.annotations), pinned_keys(view.annotations)
        assert not (claimed & set(foreign(before)))
        # A pin keeps the claim it had (unpin hands that key back), never gains one.
        assert claimed & pinned <= claimed_keys(before.annotations)
        assert pinned == pinned_keys(before.annotations)
        assert all(view.annotations.get(key) == HOLD_VALUE for key in claimed)
        if held_as_expected(view, held_windows, hold, decision.window):
            assert all(key in view.annotations or key in pinned for key in hold.annotations)
        else:  # released: what stays claimed is a key this run may not remove, or pinned
            assert all(not known(key, hold) or key in pinned for key in claimed)
            assert claimed or OWNERSHIP_MARKER not in view.annotations
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
            assert key != PINNED  # a person's, never written by reconcile or release
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
@given(nodes=st.one_of(clusters(), pool_nodes), hold=hold_settings)
def test_never_released_while_a_young_trigger_node_exists(
    nodes: list[NodeView], hold: HoldSettings
) -> None:
    """Without a cap: held exactly while a live trigger node is younger than its own hold."""
    hold = HoldSettings(**{**hold.__dict__, "max_hold": None})
    nodes = uncapped(nodes)
    plan = decide(nodes, T0, hold)
    for window in plan.windows:
        members = [n for n, d in zip(nodes, plan.decisions, strict=True) if d.window == window.name]
        own = {
            n.name: POOL_HOLDS.get(n.annotations.get(NODE_HOLD, ""), hold.hold_duration)
            for n in members
        }
        young = [
            n
            for n in members
            if not n.deleting
            and own[n.name]  # "0": its NodePool's nodes never start a hold
            and hold.trigger_selector.matches(n.labels)
            and n.created + own[n.name] > T0
            # a Karpenter node before its NodePool label never holds the unlabelled group
            and not (hold.scope is Scope.GROUP and n.registering)
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


@settings(max_examples=300, deadline=None)
@given(nodes=clusters(), hold=hold_settings, step=st.integers(0, 3600), extra=annotation_maps)
def test_the_shortcuts_of_decide_node_decide_as_the_whole_rule(
    nodes: list[NodeView], hold: HoldSettings, step: int, extra: dict[str, str]
) -> None:
    """decide_node's shortcuts for a node that carries our hold and stays held (`_keeps_hold`)
    and for one that carries none of the annotations it reads (`_unmarked`) give what the
    rest of decide_node gives, with and without: a run after one that held, also once someone
    added annotations (a pin, a stamp, a claim, a NodePool's settings) to every node."""
    state = apply_plan(nodes, decide(nodes, T0, hold).patches)
    edited = [parsed(n._replace(annotations={**n.annotations, **extra})) for n in state]
    now = T0 + timedelta(seconds=step)
    for views in (nodes, state, edited):
        with (
            mock.patch.object(rule, "_keeps_hold", return_value=False),
            mock.patch.object(rule, "_unmarked", return_value=False),
        ):
            whole = decide(views, now, hold)
        assert decide(views, now, hold) == whole


@settings(max_examples=200, deadline=None)
@given(nodes=clusters(), hold=hold_settings)
def test_a_new_node_during_a_hold_costs_exactly_one_write(
    nodes: list[NodeView], hold: HoldSettings
) -> None:
    hold = HoldSettings(
        **{**hold.__dict__, "scope": Scope.CLUSTER, "trigger_selector": parse_selector("")}
    )
    nodes = uncapped(nodes)  # a node's own cap would let the newcomer's change the window's
    first = decide(nodes, T0, hold)
    assume(held(first) and not first.windows[0].capped)
    state = apply_plan(nodes, first.patches)
    newcomer = NodeView("newcomer", T0, "999", "uid-new", labels={POOL: "a"})
    plan = decide([*state, newcomer], T0, hold)
    selected = hold.node_selector.matches(newcomer.labels)
    assert held(plan)
    assert [p.node for p in plan.patches] == (["newcomer"] if selected else [])


def uncapped(nodes: list[NodeView]) -> list[NodeView]:
    """The nodes without their NodePools' caps."""
    return [
        parsed(
            n._replace(annotations={k: v for k, v in n.annotations.items() if k != NODE_MAX_HOLD})
        )
        for n in nodes
    ]


@settings(max_examples=200, deadline=None)
@given(nodes=pool_nodes, hold=hold_settings, newcomer=newcomers)
def test_a_new_node_never_shortens_a_hold_whatever_its_own_duration(
    nodes: list[NodeView], hold: HoldSettings, newcomer: NodeView
) -> None:
    """Without caps: a node whose own hold is shorter than the others' (or than the
    default, or "0") may extend a hold, never end or shorten one."""
    hold, nodes = replace(hold, max_hold=None), uncapped([*nodes, newcomer])
    before = {w.name: w for w in decide(nodes[:-1], T0, hold).windows}
    after = {w.name: w for w in decide(nodes, T0, hold).windows}
    for name, window in before.items():
        assert after[name].held or not window.held, (window, after[name])
        if window.hold_until is not None:
            assert after[name].hold_until is not None
            assert after[name].hold_until >= window.hold_until


@settings(max_examples=200, deadline=None)
@given(nodes=st.one_of(clusters(), pool_nodes), hold=hold_settings, newcomer=newcomers)
def test_a_new_node_never_lengthens_the_cap_of_a_window_with_trigger_nodes(
    nodes: list[NodeView], hold: HoldSettings, newcomer: NodeView
) -> None:
    never = timedelta.max
    before = {w.name: w for w in decide(nodes, T0, hold).windows if w.triggers}
    after = {w.name: w for w in decide([*nodes, newcomer], T0, hold).windows}
    for name, window in before.items():
        assert (after[name].max_hold or never) <= (window.max_hold or never)


@settings(max_examples=200, deadline=None)
@given(nodes=clusters(), hold=hold_settings, mode=st.sampled_from([Mode.RECONCILE, Mode.RELEASE]))
def test_pinned_keys_and_their_annotation_are_never_changed(
    nodes: list[NodeView], hold: HoldSettings, mode: Mode
) -> None:
    by_name = {n.name: n for n in nodes}
    plan = decide(nodes, T0, hold, mode)
    for patch in plan.patches:
        before = by_name[patch.node].annotations
        changed = {key for key, _ in patch.changes}
        assert PINNED not in changed
        assert not (changed & pinned_keys(before)), (patch, before)
    for before, view in zip(nodes, apply_plan(nodes, plan.patches), strict=True):
        # A claim on a pinned key stays while the key is "true" (unpin hands it back); a run
        # never adds one, and drops one whose value someone changed.
        pinned_claims = claimed_keys(view.annotations) & pinned_keys(view.annotations)
        assert pinned_claims <= claimed_keys(before.annotations)
        if not view.deleting:  # never patched: whatever it carries stays
            assert all(view.annotations.get(k) == "true" for k in pinned_claims)


@settings(max_examples=200, deadline=None)
@given(
    nodes=clusters(),
    hold=hold_settings,
    mode=st.sampled_from([Mode.RECONCILE, Mode.RELEASE]),
    later=ages,
)
def test_a_claim_still_true_is_never_dropped(
    nodes: list[NodeView], hold: HoldSettings, mode: Mode, later: timedelta
) -> None:
    """Kept, or removed together with its key; and never removed when this run may not."""
    after = apply_plan(nodes, decide(nodes, T0 + abs(later), hold, mode).patches)
    for before, view in zip(nodes, after, strict=True):
        pinned = pinned_keys(before.annotations)
        for key in claimed_keys(before.annotations) - pinned:
            if before.annotations.get(key) != HOLD_VALUE:
                continue
            assert key in claimed_keys(view.annotations) or key not in view.annotations
            if not known(key, hold):
                assert view.annotations.get(key) == HOLD_VALUE
                assert key in claimed_keys(view.annotations)


@settings(max_examples=200, deadline=None)
@given(nodes=clusters(), hold=hold_settings, later=ages)
def test_nothing_is_dated_after_now(
    nodes: list[NodeView], hold: HoldSettings, later: timedelta
) -> None:
    """No node's age, no window's youngest node or stretch starts after now, and a hold
    that is not on has not ended in the future: whatever the clocks and stamps say."""
    now = T0 + abs(later)
    plan = decide(nodes, now, hold)
    assert all(d.created <= now for d in plan.decisions)
    for window in plan.windows:
        assert window.youngest_created is None or window.youngest_created <= now
        assert window.stretch_start is None or window.stretch_start <= now
        if not window.held and window.hold_until is not None:
            assert window.hold_until <= now, window


def _stretches_from_the_oldest(
    holds: list[tuple[int, int]], cap: int | None
) -> tuple[list[tuple[int, int]], int, bool]:
    """docs/design.md's stretches, walked from the oldest node on over all of them in order."""
    holds, i = sorted(holds), 0
    while True:
        start, until = holds[i]
        end, j = (None if cap is None else start + cap), i + 1
        while j < len(holds) and holds[j][0] < until and (end is None or holds[j][0] < end):
            until, j = max(until, holds[j][1]), j + 1
        stretch, capped = holds[i:j], end is not None and until > end
        if end is not None and capped:
            until, free = end, max(e - s for s, e in stretch)
            while j < len(holds) and holds[j][0] < until + free:
                j += 1
        if j >= len(holds):
            return stretch, until, capped
        i = j


@settings(max_examples=300, deadline=None)
@given(
    holds=st.lists(
        st.tuples(st.integers(0, 600), st.sampled_from([5, 20, 45, 90])), min_size=1, max_size=40
    ),
    cap=st.none() | st.sampled_from([20, 60, 120]),
)
def test_the_last_stretch_from_the_youngest_is_the_last_of_those_from_the_oldest(
    holds: list[tuple[int, int]], cap: int | None
) -> None:
    """_last_stretch takes the nodes youngest first back to a gap no hold or free period
    crosses: the same last stretch as walking all of them from the oldest (minutes)."""
    own = rule.Own(timedelta(0), None)
    triggers = [
        rule._Trigger(T0 + timedelta(minutes=s), f"n{i}", T0 + timedelta(minutes=s),
                      T0 + timedelta(minutes=s + d), own)
        for i, (s, d) in enumerate(holds)
    ]  # fmt: skip
    limit = None if cap is None else timedelta(minutes=cap)
    stretch, until, capped = rule._last_stretch(triggers, limit, timedelta(minutes=90))
    want, want_until, want_capped = _stretches_from_the_oldest([(s, s + d) for s, d in holds], cap)
    got = sorted(((t.start - T0) // timedelta(minutes=1), (t.end - T0) // timedelta(minutes=1))
                 for t in stretch)  # fmt: skip
    assert (got, until, capped) == (want, T0 + timedelta(minutes=want_until), want_capped)
