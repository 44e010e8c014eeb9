"""The replay skips runs where nothing can change, decides alike nodes once and, with a cap,
gives decide() only the nodes a window's hold depends on: every figure must be the one the
run-by-run replay gives (`exact=True`: every window decided with every node at every run), on
the bundled day, on generated days, and on random timelines, with and without --max-hold, and
with NodePools' own hold settings on their nodes or from --compare."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconcile.rule import decide as rules
from reconcile.rule.nodes import NodePoolOwn, NodeView
from reconcile.rule.selectors import parse_selector
from reconcile.rule.settings import HoldSettings, Scope
from reconcile.simulate.replay import (
    ReplayOptions,
    Result,
    Simulation,
    parse_compare,
    replay_span,
    simulate,
)
from reconcile.simulate.timeline import Timeline, TimelineNode, load_timeline
from scripts import generate_day

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2024, 5, 14, tzinfo=UTC)
POOL = "karpenter.sh/nodepool"
KEY = "karpenter.sh/do-not-disrupt"
OWN, OWN_MAX = "node-holder.dev/hold-duration", "node-holder.dev/max-hold"  # a NodePool's


def hold(
    minutes: int = 20, scope: Scope = Scope.CLUSTER, cap: int | None = None, **more: Any
) -> HoldSettings:
    return HoldSettings(
        hold_duration=timedelta(minutes=minutes),
        scope=scope,
        max_hold=timedelta(minutes=cap) if cap else None,
        **more,
    )


def figures(result: Result) -> dict[str, Any]:
    """Everything a person reads, in text or JSON; not how long it took or how it got there."""
    return {k: v for k, v in vars(result).items() if k not in ("seconds", "replayed")}


def both(
    timeline: Timeline, holds: list[HoldSettings], last: timedelta | None = None
) -> Simulation:
    """The fast replay, after checking that it gives the run-by-run replay's figures."""
    span = replay_span(timeline, holds, timedelta(minutes=1), last=last)
    fast = simulate(Simulation(timeline, span, holds))
    exact = simulate(Simulation(timeline, span, holds), ReplayOptions(exact=True))
    for quick, slow in zip(fast.results, exact.results, strict=True):
        assert figures(quick) == figures(slow), quick.label
        assert slow.replayed == span.runs
    return fast


def test_the_bundled_day_gives_the_same_figures_with_far_fewer_runs_decided() -> None:
    holds = [
        hold(),
        hold(10),
        hold(scope=Scope.GROUP),
        hold(scope=Scope.NODE),
        hold(cap=60),
        hold(scope=Scope.GROUP, cap=30),
    ]
    fast = both(load_timeline([str(ROOT / "reconcile/examples/batch-day.yaml")]), holds)
    # The figures the replay over HTTP (each run through run_once against the test server) gave.
    assert [len(r.periods) for r in fast.results][:4] == [15, 22, 16, 99]
    assert [sum(r.writes) for r in fast.results][:4] == [319, 502, 134, 156]
    assert [r.events for r in fast.results][:4] == [77, 84, 78, 156]
    assert [r.requests for r in fast.results][:4] == [3276, 3466, 3092, 3192]  # NodePool lists
    assert all(r.replayed < r.runs / 4 for r in fast.results)  # the other runs were skipped


def test_generated_days_with_selectors_give_the_same_figures(tmp_path: Path) -> None:
    path = tmp_path / "day.yaml"
    path.write_text(generate_day.render(2))
    batch = parse_selector(f"{POOL} in (batch,gpu)")
    not_system = parse_selector(f"{POOL} notin (system)")
    holds = [
        hold(15, trigger_selector=batch),
        hold(20, Scope.GROUP, node_selector=not_system),
        hold(30, cap=45, trigger_selector=batch, node_selector=not_system),
        hold(10, Scope.NODE, cap=30),
    ]
    fast = both(load_timeline([str(path)]), holds)
    assert all(r.periods for r in fast.results)
    assert sum(r.removed_while_held for r in fast.results) > 100


def test_a_kubectl_day_with_old_nodes_and_hand_set_annotations_gives_the_same_figures() -> None:
    """Old nodes of two pools (some exempt or held by hand, some deleted during the day) and
    young nodes in bursts: most old nodes share a class; with a cap, the old ones settle."""
    rng = random.Random(7)
    nodes = []
    for i in range(40):
        created = T0 - timedelta(days=rng.uniform(1.5, 30))
        deleted = T0 + timedelta(hours=rng.uniform(0, 12)) if i % 7 == 0 else None
        hand = [{}, {}, {}, {KEY: "false"}, {KEY: "true"}, {"team": "x"}][i % 6]
        pool = {POOL: ["default", "system"][i % 2]}
        nodes.append(TimelineNode(f"old-{i}", created, deleted, pool, hand))
    for burst in range(16):
        start = T0 + timedelta(minutes=rng.uniform(0, 700))
        for j in range(rng.randint(1, 8)):
            created = start + timedelta(seconds=rng.uniform(0, 180))
            life = timedelta(minutes=rng.uniform(5, 90)) if j % 3 else None
            pool = {POOL: rng.choice(["batch", "default"])}
            nodes.append(TimelineNode(f"new-{burst}-{j}", created, life and created + life, pool))
    ordered = tuple(sorted(nodes, key=lambda n: (n.created, n.name)))
    timeline = Timeline(ordered, ("day",), start=T0, end=T0 + timedelta(hours=12))
    holds = [hold(), hold(40), hold(scope=Scope.GROUP), hold(cap=60), hold(20, Scope.GROUP, cap=20)]
    fast = both(timeline, holds)
    assert all(r.removed_while_held and r.launches_avoided for r in fast.results[:3])


NODE = st.tuples(
    st.integers(-600, 110),  # created, minutes after the start (before it: there from the start)
    st.one_of(st.none(), st.integers(1, 150)),  # lifetime in minutes (None: to the end)
    st.sampled_from([None, "a", "b"]),  # NodePool
    st.sampled_from([{}, {}, {KEY: "false"}, {KEY: "true"}, {"team": "x"}]),  # set by hand
    st.integers(0, 59),  # seconds
)
HOLD = st.builds(
    hold,
    st.sampled_from([5, 10, 20]),
    st.sampled_from(list(Scope)),
    st.sampled_from([None, 20, 35, 60]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(NODE, min_size=1, max_size=14), st.lists(HOLD, min_size=1, max_size=3))
def test_random_timelines_give_the_same_figures(raw: list[Any], holds: list[HoldSettings]) -> None:
    nodes = []
    for i, (minute, life, pool, hand, second) in enumerate(raw):
        created = T0 + timedelta(minutes=minute, seconds=second)
        deleted = created + timedelta(minutes=life) if life else None
        nodes.append(TimelineNode(f"n{i}", created, deleted, {POOL: pool} if pool else {}, hand))
    holds = [h for h in holds if h.max_hold is None or h.max_hold >= h.hold_duration]
    timeline = Timeline(
        tuple(sorted(nodes, key=lambda n: (n.created, n.name))),
        ("random",),
        start=T0,
        end=T0 + timedelta(hours=2),
    )
    both(timeline, holds or [hold()])


def test_busy_days_with_the_charts_two_hour_cap_give_the_same_figures(tmp_path: Path) -> None:
    """The chart's default (`holdMaxDuration: 2h`, triggers from NodePools) on a day whose
    bursts never leave a quiet spell of a hold and a cap, and on a day of a kubectl-like
    cluster where new nodes come every few minutes and stay."""
    path = tmp_path / "day.yaml"
    path.write_text(generate_day.render(2))
    pools = parse_selector(POOL)
    holds = [
        hold(20, scope, cap=120, trigger_selector=pools) for scope in (Scope.CLUSTER, Scope.GROUP)
    ]
    fast = both(load_timeline([str(path)]), holds)
    assert all(r.periods and r.removed_while_held for r in fast.results)
    rng = random.Random(23)
    old = [
        TimelineNode(f"old-{i}", T0 - timedelta(days=2 + i), None, {POOL: "x"}) for i in range(30)
    ]
    new: list[TimelineNode] = []
    moment = T0
    while moment < T0 + timedelta(hours=8):
        moment += timedelta(minutes=rng.uniform(2, 15))
        gone = moment + timedelta(hours=2) if rng.random() < 0.1 else None
        new.append(TimelineNode(f"new-{len(new)}", moment, gone, {POOL: rng.choice("ab")}))
    timeline = Timeline(tuple(old + new), ("kubectl",), start=T0, end=T0 + timedelta(hours=9))
    fast = both(timeline, [hold(20, cap=120), hold(5, Scope.GROUP, cap=30)])
    capped = fast.results[0].periods
    assert len(capped) >= 3 and sum(p.extended for p in capped) > 10
    assert max(p.duration(T0 + timedelta(hours=9)) for p in capped) <= timedelta(hours=2, minutes=1)


def at(minute: int, second: int = 0) -> datetime:
    return T0 + timedelta(minutes=minute, seconds=second)


def hour(nodes: list[TimelineNode]) -> Timeline:
    ordered = tuple(sorted(nodes, key=lambda n: (n.created, n.name)))
    return Timeline(ordered, ("hour",), start=T0, end=T0 + timedelta(hours=1))


def periods(result: Result) -> list[tuple[str, str | None]]:
    return [(f"{p.start:%H:%M}", p.end and f"{p.end:%H:%M}") for p in result.periods]


def test_an_early_node_of_a_capped_stretch_leaving_moves_the_stretches_after_it() -> None:
    """10m holds capped at 20m: the stretch from 00:00 is capped at 00:20, the window is free
    until 00:30 and a stretch starts at 00:31. When a0 leaves at 00:33:30, the first stretch
    starts at 00:03:30, its free period ends at 00:33:30, and the nodes of 00:31 no longer
    start one: the hold ends at once. The replay must look at the nodes before 00:31 again."""
    first = [TimelineNode("a0", at(0), at(33, 30))]
    first += [TimelineNode(f"a{i}", at(4 * i - 1, 30)) for i in range(1, 7)]
    second = [TimelineNode(f"b{i}", at(31, 20 * i)) for i in range(4)]
    (result,) = both(hour(first + second), [hold(10, cap=20)]).results
    assert periods(result) == [("00:00", "00:20"), ("00:31", "00:34")]


def test_a_node_alone_in_its_class_before_the_stretch_that_holds_does_not_move_it() -> None:
    """x arrives in the free period after a capped stretch, with an annotation of its own: it
    is the only node of its class, so decide() sees it, but its creation must not start the
    stretch that begins at 00:31 (it would end at 00:45 instead of 00:51)."""
    first = [TimelineNode(f"a{i}", at(4 * i)) for i in range(5)]
    x = TimelineNode("x", at(25), None, {}, {"team": "x"})
    second = [TimelineNode(f"b{i}", at(31 + 3 * i)) for i in range(7)]
    (result,) = both(hour([*first, x, *second]), [hold(10, cap=20)]).results
    assert periods(result) == [("00:00", "00:20"), ("00:31", "00:51")]


BURST = st.tuples(
    st.integers(-200, 170),  # the minute it starts (before the replay: there from the start)
    st.integers(1, 6),  # nodes
    st.one_of(st.none(), st.integers(3, 90)),  # lifetime in minutes (None: to the end)
    st.sampled_from([None, "a", "b"]),  # NodePool
    st.sampled_from([{}, {}, {}, {KEY: "false"}, {KEY: "true"}, {"team": "x"}]),  # its first's
)
CAPPED = st.builds(
    hold,
    st.sampled_from([5, 10, 20]),
    st.sampled_from(list(Scope)),
    st.sampled_from([None, 20, 25, 40, 60]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(BURST, min_size=1, max_size=10), st.lists(CAPPED, min_size=1, max_size=2), st.randoms()
)
def test_random_bursts_with_caps_give_the_same_figures(
    bursts: list[Any], holds: list[HoldSettings], rng: random.Random
) -> None:
    """Bursts of up to six nodes a few seconds apart, some deleted, some with a hand-set
    annotation: windows with more nodes since their last quiet spell than decide() is
    given, and classes that have no node among those."""
    nodes = []
    for b, (minute, count, life, pool, hand) in enumerate(bursts):
        for j in range(count):
            created = T0 + timedelta(minutes=minute, seconds=rng.randint(0, 150))
            deleted = created + timedelta(minutes=life + j) if life else None
            labels = {POOL: pool} if pool else {}
            nodes.append(
                TimelineNode(f"n{b}-{j}", created, deleted, labels, hand if j == 0 else {})
            )
    holds = [h for h in holds if h.max_hold is None or h.max_hold >= h.hold_duration]
    timeline = Timeline(
        tuple(sorted(nodes, key=lambda n: (n.created, n.name))),
        ("bursts",),
        start=T0,
        end=T0 + timedelta(hours=3),
    )
    both(timeline, holds or [hold(cap=30)])


def with_pools(timeline: Timeline, pools: dict[str, dict[str, str]]) -> Timeline:
    """The timeline with a NodePool list beside it: each NodePool's own settings."""
    given = {p: NodePoolOwn(p, own.get(OWN), own.get(OWN_MAX)) for p, own in pools.items()}
    return replace(timeline, nodepool_settings=given)


def test_the_bundled_day_with_nodepools_own_settings_gives_the_same_figures() -> None:
    """batch holds 45m capped at 3h, gpu never starts a hold, general holds 10 minutes, in
    every scope and under a cap; and a --compare column that gives batch 45m replays what the
    NodePool's annotation replays."""
    day = load_timeline([str(ROOT / "reconcile/examples/batch-day.yaml")])
    pools = {"batch": {OWN: "45m", OWN_MAX: "3h"}, "gpu": {OWN: "0"}, "general": {OWN: "10"}}
    holds = [hold(), hold(scope=Scope.GROUP), hold(scope=Scope.NODE), hold(cap=60)]
    holds += [hold(scope=Scope.GROUP, cap=120), hold(scope=Scope.GROUP, cap=30)]  # 45m > 30m
    fast = both(with_pools(day, pools), holds)
    plain = both(day, holds[:2])
    assert all(
        figures(r) != figures(p) for r, p in zip(fast.results[:2], plain.results, strict=True)
    )
    columns = parse_compare(
        "20m/nodepool:batch=45m,20m/group/nodepool:gpu=0/nodepool:batch=45m", hold()
    )
    overridden = both(day, columns)
    batch = both(with_pools(day, {"batch": {OWN: "45m"}}), [hold()])
    assert figures(overridden.results[0]) == {**figures(batch.results[0]), "hold": columns[0]}
    assert overridden.results[1].label == "20m/group/nodepool:gpu=0/nodepool:batch=45m"


POOL_SETTINGS = st.sampled_from(
    [
        *({}, {OWN: "5"}, {OWN: "45m"}, {OWN: "0"}, {OWN: "15m", OWN_MAX: "25m"}),
        *({OWN_MAX: "40m"}, {OWN_MAX: ""}),  # a cap of its own; none at all
        *({OWN: "45 minutes"}, {OWN: "20m", OWN_MAX: "10m"}),  # bad values
    ]
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(BURST, min_size=1, max_size=10),
    st.fixed_dictionaries({"a": POOL_SETTINGS, "b": POOL_SETTINGS}),
    st.lists(CAPPED, min_size=1, max_size=2),
    st.randoms(),
)
def test_random_bursts_in_pools_with_their_own_settings_give_the_same_figures(
    bursts: list[Any], pools: dict[str, dict[str, str]], holds: list[HoldSettings], rng: Any
) -> None:
    """The bursts above, each NodePool with its own hold and cap (or a bad value)."""
    nodes = []
    for b, (minute, count, life, pool, hand) in enumerate(bursts):
        for j in range(count):
            created = T0 + timedelta(minutes=minute, seconds=rng.randint(0, 150))
            deleted = created + timedelta(minutes=life + j) if life else None
            own = hand if j == 0 else {}
            nodes.append(
                TimelineNode(f"n{b}-{j}", created, deleted, {POOL: pool} if pool else {}, own)
            )
    three_hours(nodes, "pools", holds, pools)


def three_hours(
    nodes: list[TimelineNode], name: str, holds: list[HoldSettings], pools: dict[str, dict]
) -> None:
    """Three hours of these nodes from T0, their NodePools with these settings of their own,
    fast and exact alike for each valid configuration (a cap shorter than its hold is refused
    before any replay)."""
    holds = [h for h in holds if h.max_hold is None or h.max_hold >= h.hold_duration]
    timeline = Timeline(
        tuple(sorted(nodes, key=lambda n: (n.created, n.name))),
        (name,),
        start=T0,
        end=T0 + timedelta(hours=3),
    )
    both(with_pools(timeline, pools), holds or [hold(cap=30)])


def test_a_run_records_at_most_ten_events_in_both_replays() -> None:
    """15 nodes in one minute, node scope: 15 holds start in one run and end in another;
    each run records 9 Events and one that sums up the rest, as a real run does."""
    burst = [TimelineNode(f"n{i}", T0 + timedelta(seconds=1 + 3 * i)) for i in range(15)]
    timeline = Timeline(tuple(burst), ("burst",), start=T0, end=T0 + timedelta(hours=1))
    (result,) = both(timeline, [hold(scope=Scope.NODE)]).results
    assert (len(result.periods), result.events) == (15, 10 + 10)


POOLS = st.sampled_from([None, "a", "b", "c"])
LONG_LIVED = st.tuples(
    st.integers(-3000, 150),  # created, minutes after the start: days before it, or during it
    st.one_of(st.none(), st.integers(1, 175)),  # leaves at this minute of the replay (None: stays)
    POOLS,
    st.integers(0, 59),  # seconds
)
TRICKLE = st.tuples(
    st.integers(-60, 150),  # the minute the first node comes
    st.integers(1, 9),  # minutes between two nodes
    st.integers(2, 14),  # nodes
    st.one_of(st.none(), st.integers(5, 150)),  # lifetime in minutes (None: to the end)
    POOLS,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(LONG_LIVED, max_size=14),
    st.lists(TRICKLE, max_size=3),
    st.lists(BURST, max_size=5),
    st.fixed_dictionaries({"a": POOL_SETTINGS, "c": POOL_SETTINGS}),
    st.lists(CAPPED, min_size=1, max_size=2),
    st.randoms(),
)
def test_days_of_every_shape_give_the_same_figures_run_by_run(
    long_lived: list[Any],
    trickles: list[Any],
    bursts: list[Any],
    pools: dict[str, dict[str, str]],
    holds: list[HoldSettings],
    rng: random.Random,
) -> None:
    """Long-lived trigger nodes (created days before the replay or during it) leaving in the
    middle of a stretch, steady trickles and bursts, across NodePools with their own hold
    settings, in every scope with and without a cap: windows far larger than decide() is
    given, whose stretches move when an old node leaves. Every figure of every run is the
    run-by-run replay's."""
    raw: list[tuple[str, datetime, datetime | None, str | None, dict[str, str]]] = []
    for i, (minute, leaves, pool, second) in enumerate(long_lived):
        created = T0 + timedelta(minutes=minute, seconds=second)
        gone = T0 + timedelta(minutes=leaves, seconds=second) if leaves else None
        raw.append((f"old{i}", created, gone if gone and gone > created else None, pool, {}))
    for t, (minute, gap, count, life, pool) in enumerate(trickles):
        for j in range(count):
            created = T0 + timedelta(minutes=minute + gap * j, seconds=rng.randint(0, 59))
            raw.append((f"t{t}-{j}", created, life and created + timedelta(minutes=life), pool, {}))
    for b, (minute, count, life, pool, hand) in enumerate(bursts):
        for j in range(count):
            created = T0 + timedelta(minutes=minute, seconds=rng.randint(0, 150))
            gone = created + timedelta(minutes=life + j) if life else None
            raw.append((f"b{b}-{j}", created, gone, pool, hand if j == 0 else {}))
    nodes = [
        TimelineNode(name, created, gone, {POOL: p} if p else {}, own)
        for name, created, gone, p, own in raw
    ]
    three_hours(nodes, "shapes", holds, pools)


def test_a_capped_stretchs_longest_own_hold_and_a_late_end_in_its_free_period_count() -> None:
    """5m holds capped at 30m, pools `a` and `b` holding 25m and 24m. The stretch from 00:00
    is carried by b's node and capped at 00:30; its free period is a's 25m, so x at 00:54:30
    starts nothing (with b's 24m it would). a's node at 00:50, in that free period, starts
    nothing either, though its own hold ends last (01:15): y at 00:56 holds until 01:01."""
    own = {"a": {OWN: "25m"}, "b": {OWN: "24m"}}
    nodes = [TimelineNode("f", at(0)), TimelineNode("m", at(27))]
    nodes += [TimelineNode(f"k{i}", at(10 + 2 * i)) for i in range(6)]  # hold nothing further
    nodes += [
        TimelineNode("l", at(1), None, {POOL: "a"}),
        TimelineNode("k", at(4), None, {POOL: "b"}),
    ]
    nodes += [TimelineNode("r", at(50), None, {POOL: "a"}), TimelineNode("x", at(54, 30))]
    nodes += [TimelineNode("y", at(56))]
    timeline = with_pools(hour(nodes), own)
    timeline = replace(timeline, end=T0 + timedelta(hours=2))
    (result,) = both(timeline, [hold(5, cap=30)]).results
    assert periods(result) == [("00:00", "00:30"), ("00:56", "01:01")]


def leavers_day(count: int, seed: int = 31) -> Timeline:
    """Half the nodes came up hours to days ago and leave during the day, the other half
    come in small scale-ups and live 1 to 8 hours, in three NodePools (c: 45m holds)."""
    rng = random.Random(seed)
    nodes = []
    for i in range(count):
        pool = rng.choice("abc")
        if i % 2:
            created = T0 - timedelta(minutes=rng.uniform(60, 7200))
            gone = T0 + timedelta(minutes=rng.uniform(0, 1440))
        else:
            created = T0 + timedelta(minutes=rng.uniform(0, 1400))
            gone = created + timedelta(hours=rng.uniform(1, 8))
        nodes.append(TimelineNode(f"n{i}", created, gone, {POOL: pool}))
    ordered = tuple(sorted(nodes, key=lambda n: (n.created, n.name)))
    timeline = Timeline(ordered, ("leavers",), start=T0, end=T0 + timedelta(days=1))
    return with_pools(timeline, {"c": {OWN: "45m"}})


def test_decide_is_given_a_few_nodes_per_event_on_a_day_of_long_lived_leavers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Long-lived trigger nodes leaving mid-stretch once made the replay give decide() every
    node of the window at each departure (on this day: 34 node views per event, growing with
    the day). Now a few per event (an arrival, a departure, a run decided), in every scope,
    capped or not."""
    given: list[int] = []
    real = rules.decide

    def counting(nodes: Sequence[NodeView], *args: Any, **kwargs: Any) -> rules.Plan:
        given.append(len(nodes))
        return real(nodes, *args, **kwargs)

    monkeypatch.setattr(rules, "decide", counting)
    holds = [hold(), hold(10, cap=30), hold(scope=Scope.GROUP), hold(scope=Scope.GROUP, cap=60)]
    timeline = leavers_day(600)
    span = replay_span(timeline, holds, timedelta(minutes=1))
    sim = simulate(Simulation(timeline, span, holds))
    events = sum(2 * len(timeline.nodes) + r.replayed for r in sim.results)
    assert sum(given) < 10 * events, (sum(given), events)
