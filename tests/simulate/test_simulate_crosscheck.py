"""The in-memory replay against the real thing: the same timelines, run by run, both
through `simulate`'s replay (as the command runs it: runs where nothing can change are
skipped, alike nodes decided once) and through `run_once` against the API test server
(real HTTP, the client, merge patches, Events), and the same annotations on every node
after every run, the same writes, Events and API requests."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from reconcile.cli.summary import word_event
from reconcile.rule.decide import NodeView
from reconcile.rule.settings import HoldSettings, Mechanism, RunSettings, Scope
from reconcile.run import run_once
from reconcile.simulate.replay import ReplayOptions, replay, replay_span, schedule
from reconcile.simulate.timeline import load_timeline
from tests.helpers import kube_for
from tests.kubeapi.apiserver import ApiServer

POOL = "karpenter.sh/nodepool"
KEY = "karpenter.sh/do-not-disrupt"
OLD = "2024-05-01T00:00:00Z"

Annotations = dict[str, dict[str, str]]  # node -> its annotations


@dataclass(frozen=True)
class Run:
    annotations: Annotations  # after the run
    writes: int


@dataclass(frozen=True)
class Replayed:
    runs: list[Run]
    events: int
    requests: int
    nodepool_writes: int = 0  # --mechanism budget: NodePool patches that landed


def entry(name: str, created: str, deleted: str = "", pool: str = "", **annotations: str) -> str:
    text = f"{{name: {name}, created: '{created}'"
    if deleted:
        text += f", deleted: '{deleted}'"
    if pool:
        text += f", labels: {{{POOL}: {pool}}}"
    if annotations:
        pairs = ", ".join(f"'{k.replace('__', '/')}': '{v}'" for k, v in annotations.items())
        text += f", annotations: {{{pairs}}}"
    return text + "}"


def t(clock: str) -> str:
    return f"2024-05-14T{clock}Z"


CASES = {
    "deletions and hand-set annotations": (
        HoldSettings(),
        [
            entry("old-1", OLD),
            entry("pinned", OLD, **{"karpenter.sh__do-not-disrupt": "false", "team": "x"}),
            entry("kept", OLD, **{"karpenter.sh__do-not-disrupt": "true"}),
            entry("new", t("00:00:30.5")),  # fractions: the API keeps whole seconds
            entry("gone", t("00:02:00"), deleted=t("00:05:30")),  # deleted while held
            entry("newer", t("00:10:00")),
            entry("old-1-replaced", t("00:12:00"), deleted=t("00:40:00")),
        ],
    ),
    "group scope": (
        HoldSettings(scope=Scope.GROUP),
        [
            entry("a-old", OLD, pool="a"),
            entry("b-old", OLD, pool="b"),
            entry("plain", OLD),
            entry("b-new", t("00:03:00"), pool="b"),
            entry("a-new", t("00:15:00"), deleted=t("00:24:00"), pool="a"),
            entry("plain-new", t("00:30:00")),
        ],
    ),
    "max-hold": (
        HoldSettings(hold_duration=timedelta(minutes=10), max_hold=timedelta(minutes=25)),
        [
            entry("old", OLD, **{"example.com__note": "hi"}),
            *[entry(f"wave-{i}", t(f"00:{6 * i:02d}:00")) for i in range(9)],
        ],
    ),
    "node scope": (
        HoldSettings(scope=Scope.NODE, hold_duration=timedelta(minutes=5)),
        [
            entry("old", OLD),
            entry("n1", t("00:01:00"), deleted=t("00:03:00")),
            entry("n2", t("00:02:00"), **{"karpenter.sh__do-not-disrupt": "true"}),
            entry("n3", t("00:04:10")),
        ],
    ),
}


def in_memory(paths: list[str], hold: HoldSettings) -> Replayed:
    timeline = load_timeline(paths)
    span = replay_span(timeline, [hold], timedelta(minutes=1))
    seen: list[Annotations] = []

    def observe(_tick: datetime, views: list[NodeView]) -> None:
        seen.append({v.name: dict(v.annotations) for v in views})

    result = replay(timeline, span, hold, ReplayOptions(observe=observe))
    runs = [Run(a, w) for a, w in zip(seen, result.writes, strict=True)]
    return Replayed(runs, result.events, result.requests)


def through_the_api(
    api: ApiServer, kubeconfig: Path, paths: list[str], hold: HoldSettings
) -> Replayed:
    timeline = load_timeline(paths)
    span = replay_span(timeline, [hold], timedelta(minutes=1))
    plan = schedule(timeline, span)
    kube = kube_for(kubeconfig)
    run = RunSettings(qps=0)
    runs: list[Run] = []
    requests = events = nodepool_writes = 0
    for i in range(span.runs):
        api.set_clock(span.tick(i))
        for node in plan.departures.get(i, ()):
            api.delete_node(node.name)
        for node in plan.arrivals.get(i, ()):
            api.add_node(
                node.name,
                created=node.created,
                labels=dict(node.labels),
                annotations=dict(node.annotations) or None,
                eks=False,
            )
        api.reset_log()
        result = run_once(kube, hold, run, word_event=word_event)
        requests += len(api.requests)
        assert not result.errors and not result.event_errors, (result.errors, result.event_errors)
        assert result.applied is not None
        annotations = {n: api.annotations(n) for n in api.node_names()}
        runs.append(Run(annotations, result.applied.writes))
        events += len(result.events)
        nodepool_writes += sum(r.outcome == "patched" for r in result.pools.results)
    return Replayed(runs, events, requests, nodepool_writes)


@pytest.mark.parametrize("case", list(CASES))
def test_the_replay_gives_the_same_annotations_as_real_runs(
    case: str, api: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    hold, entries = CASES[case]
    path = tmp_path / "timeline.yaml"
    path.write_text(
        f"start: {t('00:00:00')}\nend: {t('01:00:00')}\nnodes:\n"
        + "".join(f"  - {e}\n" for e in entries)
    )
    compare(in_memory([str(path)], hold), through_the_api(api, kubeconfig, [str(path)], hold))


def compare(memory: Replayed, real: Replayed) -> None:
    """Run by run, the replay's annotations and writes are the real runs'; so are its Events
    and requests in all."""
    assert len(memory.runs) == len(real.runs) == 60
    for i, (mine, theirs) in enumerate(zip(memory.runs, real.runs, strict=True)):
        assert mine.annotations == theirs.annotations, f"after the run at minute {i}"
        assert mine.writes == theirs.writes, f"writes of the run at minute {i}"
    assert (memory.events, memory.requests) == (real.events, real.requests)
    assert real.events > 0 and sum(r.writes for r in real.runs) > 0  # holds happened


@pytest.mark.parametrize("scope", [Scope.CLUSTER, Scope.GROUP])
def test_the_replays_nodepool_writes_are_the_budget_mechanisms(
    scope: Scope, api: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    """`simulate`'s figure for the budget mechanism (one write per NodePool whenever its
    entry changes) against real runs of `--mechanism budget` over the same timeline: the
    NodePool patches stored, run by run, summed."""
    _, entries = CASES["group scope"]
    path = tmp_path / "timeline.yaml"
    path.write_text(
        f"start: {t('00:00:00')}\nend: {t('01:00:00')}\nnodes:\n"
        + "".join(f"  - {e}\n" for e in entries)
    )
    hold = HoldSettings(scope=scope)
    timeline = load_timeline([str(path)])
    span = replay_span(timeline, [hold], timedelta(minutes=1))
    figure = replay(timeline, span, hold, ReplayOptions()).budget_writes
    api.add_nodepool("a")
    api.add_nodepool("b")
    real = through_the_api(api, kubeconfig, [str(path)], replace(hold, mechanism=Mechanism.BUDGET))
    assert sum(r.writes for r in real.runs) == 0, "the budget mechanism writes no node"
    assert figure == real.nodepool_writes > 0


@pytest.mark.parametrize("scope", [Scope.CLUSTER, Scope.GROUP])
def test_the_nodepools_own_settings_replay_as_real_runs(
    scope: Scope, api: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    """A NodePool list beside the timeline gives batch 30m capped at 45m and gpu "0"; a batch
    node carries a copied 10m, which neither the runs nor the replay read. The
    replay run by run gives what real runs against the same NodePools give."""
    path = tmp_path / "timeline.yaml"
    entries = [
        entry("old", OLD),
        entry("b1", t("00:01:00"), pool="batch", **{"node-holder.dev__hold-duration": "10m"}),
        entry("g1", t("00:05:00"), pool="gpu"),
        entry("b2", t("00:20:00"), pool="batch"),
        entry("w1", t("00:38:00"), pool="web"),
        entry("b3", t("00:50:00"), pool="batch"),
    ]
    path.write_text(
        f"start: {t('00:00:00')}\nend: {t('01:00:00')}\nnodes:\n"
        + "".join(f"  - {e}\n" for e in entries)
    )
    own = {
        "batch": {"node-holder.dev/hold-duration": "30m", "node-holder.dev/max-hold": "45m"},
        "gpu": {"node-holder.dev/hold-duration": "0"},
        "web": {},
    }
    pools = tmp_path / "nodepools.json"
    items = []
    for name, settings in own.items():
        api.add_nodepool(name, annotations=settings)
        items.append({"kind": "NodePool", "metadata": {"name": name, "annotations": settings}})
    pools.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    hold = HoldSettings(scope=scope)
    paths = [str(path), str(pools)]
    memory = in_memory(paths, hold)
    compare(memory, through_the_api(api, kubeconfig, paths, hold))
    held = [r.annotations.get("b1", {}).get(KEY) for r in memory.runs]
    assert held[1:46] == ["true"] * 45 and held[46] is None  # batch's own cap, 45m from 00:01
