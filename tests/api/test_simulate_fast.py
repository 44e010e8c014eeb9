"""The replay skips runs where nothing can change and decides alike nodes once: every figure
must be the one the run-by-run replay gives (`exact=True`: every window decided with every
node at every run), on the bundled day, on generated days, and on random timelines."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconcile.rule.selectors import parse_selector
from reconcile.rule.settings import HoldSettings, Scope
from reconcile.simulate.replay import ReplayOptions, Result, Simulation, replay_window, simulate
from reconcile.simulate.timeline import Timeline, TimelineNode, load_timeline
from scripts import generate_day

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2024, 5, 14, tzinfo=UTC)
POOL = "karpenter.sh/nodepool"
KEY = "karpenter.sh/do-not-disrupt"


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
    window = replay_window(timeline, holds, timedelta(minutes=1), last=last)
    fast = simulate(Simulation(timeline, window, holds))
    exact = simulate(Simulation(timeline, window, holds), ReplayOptions(exact=True))
    for quick, slow in zip(fast.results, exact.results, strict=True):
        assert figures(quick) == figures(slow), quick.label
        assert slow.replayed == window.runs
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
    assert [r.requests for r in fast.results][:4] == [1836, 2026, 1652, 1752]
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


def test_a_run_records_at_most_ten_events_in_both_replays() -> None:
    """15 nodes in one minute, node scope: 15 holds start in one run and end in another;
    each run records 9 Events and one that sums up the rest, as a real run does."""
    burst = [TimelineNode(f"n{i}", T0 + timedelta(seconds=1 + 3 * i)) for i in range(15)]
    timeline = Timeline(tuple(burst), ("burst",), start=T0, end=T0 + timedelta(hours=1))
    (result,) = both(timeline, [hold(scope=Scope.NODE)]).results
    assert (len(result.periods), result.events) == (15, 10 + 10)
