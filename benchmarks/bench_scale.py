"""Benchmark: what one hold start or end asks of a large control plane, for both mechanisms.

For 5,000, 50,000 and 100,000 nodes it prints, for the annotation mechanism (every node
patched) and the NodePool-budget mechanism (`--mechanism budget`: one patch per NodePool,
estimated here): the writes per hold edge (a hold start or a hold end) and per extension (a new
node during a hold), the write rate, the time to cover the cluster and how many CronJob
runs that takes, the watch events the writes cause, and the write rate over a hold start.

The annotation rows come from a model: the real rate limiter and end-of-run margin
(reconcile/cluster/pace.py, `RateLimiter` and `Pace.margin`: `--qps 200`, a hold end at half
the rate) on a fake clock, WORKERS workers whose patches take LATENCY each, a run started every
INTERVAL that starts up, lists the nodes and writes until a write cannot start before the
margin. The model has no back-off in it: a healthy control plane. The
5,000-node rows are then measured: the real CLI (`python -m reconcile reconcile` with its
defaults), run on the same one-minute schedule against the API test server (EKS-shaped nodes,
5 ms per stored write), next to the model fed with the start-up and list times measured.

Watch events: every write to a Node is sent, as the whole object, to each client that watches
all Nodes: kube-scheduler, kube-controller-manager, Karpenter and its standby,
kube-state-metrics, Prometheus, Argo CD, Calico Typha or the Cilium operator, add-ons:
typically 10 to 30 (kubelets, kube-proxy and the CNI agents watch only their own node). The
estimate counts WATCHERS of them, and as many for NodePools (fewer watch those: an upper bound).

    python benchmarks/bench_scale.py                # the table and the measured rows (2 minutes)
    python benchmarks/bench_scale.py --model-only   # the model alone (a few seconds)

A table to read, never a timed test: the measured rows depend on the machine.
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

from measure import REPO, child_env, python_cmd

sys.path.insert(0, str(REPO))  # the API test server is tests.kubeapi

from reconcile.cluster.pace import Backoff, Deadline, Deferred, Pace, RateLimiter
from reconcile.simulate.report import level_line
from tests.kubeapi.apiserver import ApiServer

SIZES = (5_000, 50_000, 100_000)
WATCHERS = 20  # clients that watch every Node (or NodePool) and get each write whole
NODEPOOLS = 20  # budget mechanism: one patch per NodePool per hold edge
KARPENTER_PASS = 10  # seconds: Karpenter reads the budgets at its next disruption pass
BUCKET = 10  # seconds per value of the rate series
WIDTH = 40  # characters of the rate series at most
HOLD = timedelta(minutes=20)


@dataclass(frozen=True)
class Model:
    """A CronJob run every INTERVAL s: start-up, the list, then writes until TIMEOUT s."""

    workers: int = 8  # --workers
    latency: float = 0.02  # seconds per node patch: 10 to 30 ms on a real API server
    startup: float = 0.5  # process start and kubeconfig, before the first request
    list_per_node: float = 0.0001  # seconds: about 5 s for 50,000 nodes (docs/performance.md)
    timeout: float = 45.0  # --timeout
    request_timeout: float = 10.0  # --request-timeout
    qps: float = 200.0  # --qps
    interval: float = 60.0  # the schedule: every minute


@dataclass(frozen=True)
class Edge:
    """One hold start or end: when each write went out, in seconds from its first run's start."""

    sent: list[float]
    runs: int

    @property
    def seconds(self) -> float:
        return max(self.sent, default=0.0)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Waits(threading.Event):
    """The limiter's waits move the fake clock instead of sleeping."""

    def __init__(self, clock: _Clock) -> None:
        super().__init__()
        self.clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        self.clock.now += timeout or 0.0
        return False


def modelled(nodes: int, ending: bool, model: Model) -> Edge:
    """The annotation mechanism's hold start (or end, at half the rate) on a fake clock; each
    run sends until a write cannot start before the end-of-run margin (RateLimiter.acquire
    raises Deferred, as in reconcile/cluster/apply.py), and leaves the rest to the next run."""
    clock, sent, run = _Clock(), [], 0
    cost = 2 if ending else 1
    while len(sent) < nodes:
        clock.now = run * model.interval
        limiter = RateLimiter(model.qps, model.workers, clock)  # each run starts at the ceiling
        waits = _Waits(clock)
        deadline = Deadline(model.timeout, clock)
        pace = Pace(model.workers, limiter, Backoff(), deadline, waits, model.request_timeout)
        clock.now += model.startup + nodes * model.list_per_node
        free = [clock.now] * model.workers  # when each worker can take the next patch
        while len(sent) < nodes:
            clock.now = max(clock.now, heapq.heappop(free))
            try:
                limiter.acquire(deadline, waits, cost, pace.margin)
            except Deferred:
                break
            sent.append(clock.now)
            limiter.observe()  # a healthy control plane: no 429, no 5xx
            heapq.heappush(free, clock.now + model.latency)
        run += 1
    return Edge(sent, run)


def series(edge: Edge) -> str:
    """Writes a second over the edge, one value per BUCKET seconds, as a sparkline."""
    counts = [0] * (math.floor(edge.seconds / BUCKET) + 1)
    for moment in edge.sent:
        counts[math.floor(moment / BUCKET)] += 1
    per = math.ceil(len(counts) / WIDTH)
    line, _ = level_line(counts, per)
    peak = max(sum(counts[i : i + per]) / per for i in range(0, len(counts), per)) / BUCKET
    return f"`{line.rstrip()}` ({per * BUCKET} s a character, peak {peak:,.0f}/s)"


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


def annotation_row(label: str, nodes: int, start: Edge, end: Edge, model: Model) -> str:
    return (
        f"| {label} | annotation | {nodes:,} | 1 a new node "
        f"| {model.qps:,.0f} / {model.qps / 2:,.0f} "
        f"| {duration(start.seconds)} / {duration(end.seconds)} | {start.runs} / {end.runs} "
        f"| {nodes * WATCHERS:,} | {series(start)} |"
    )


def budget_row(nodes: int, model: Model) -> str:
    """One run: start-up, the node list (the hold is still decided from the nodes), the
    NodePool list, then NODEPOOLS patches one after the other (reconcile/cluster/nodepools.py);
    Karpenter acts on them at its next disruption pass. In cluster scope an extension rewrites
    every NodePool's entry (a longer duration), once a run that sees a new node."""
    seconds = model.startup + nodes * model.list_per_node + (1 + NODEPOOLS) * model.latency
    return (
        f"| {nodes:,} | budget ({NODEPOOLS} NodePools) | {NODEPOOLS} | {NODEPOOLS} a run with "
        "a new node (cluster scope; 1 in group scope) | one run "
        f"| {duration(seconds)} + Karpenter's next pass (~{KARPENTER_PASS} s) | 1 / 1 "
        f"| {NODEPOOLS * WATCHERS:,} | {NODEPOOLS} writes, one after the other |"
    )


HEAD = [
    "| nodes | mechanism | writes per hold edge | writes per extension | writes/s (start / end) "
    "| time to cover (start / end) | runs (start / end) | watch events per edge | writes a "
    "second over a hold start |",
    "|---:|---|---:|---|---|---|---|---:|---|",
]


# --- the measured rows: the real CLI against the API test server -------------------------------


@dataclass(frozen=True)
class Measured:
    edge: Edge
    startup: float  # from the first run's start to its first request
    listing: float  # the first run's list, first request to last answer


def measure_edge(
    api: ApiServer, kubeconfig: Path, writes_expected: int, interval: float, *args: str
) -> Measured:
    """Runs on the schedule until one leaves nothing to the next (each exits 0); the stored
    writes (node or NodePool PATCHes) from the request log."""
    api.reset_log()
    began, runs, left = time.perf_counter(), 0, True
    while left:
        time.sleep(max(0.0, began + runs * interval - time.perf_counter()))
        cmd = [
            *python_cmd(),
            "-m",
            "reconcile",
            "reconcile",
            "--kubeconfig",
            str(kubeconfig),
            *args,
        ]
        done = subprocess.run(
            cmd, env=child_env(), cwd=REPO, capture_output=True, text=True, check=False
        )
        left = "continues next run: " in done.stdout
        runs += 1
        last = done.stdout.splitlines()[-1] if left else ""
        print(f"  run {runs}: exit {done.returncode} {last}", file=sys.stderr, flush=True)
        if done.returncode:
            raise SystemExit(f"run {runs} failed: {done.stderr.strip()}")
        if runs > 10:
            raise SystemExit("the measured hold edge did not finish in 10 runs")
    log = api.requests
    writes = [r.started - began for r in log if r.method == "PATCH" and r.stored]
    assert len(writes) == writes_expected, (len(writes), writes_expected)
    lists = [r for r in log if r.method == "GET" and r.path == "/api/v1/nodes"]
    first_run = [r for r in lists if r.started - began < interval]
    listing = max(r.started + r.duration for r in first_run) - min(r.started for r in first_run)
    return Measured(Edge(sorted(writes), runs), min(r.started for r in log) - began, listing)


def measured_rows(nodes: int, model: Model) -> list[str]:
    with ApiServer(write_latency=0.005) as api, tempfile.TemporaryDirectory() as tmp:
        api.add_nodes(nodes - 1, created=api.now() - timedelta(days=3), eks=True)
        api.add_node("young", created=api.now(), eks=True)
        kubeconfig = api.write_kubeconfig(Path(tmp) / "kc.yaml")
        print(f"N={nodes}: a hold start", file=sys.stderr, flush=True)
        start = measure_edge(api, kubeconfig, nodes, model.interval)
        api.advance_clock(HOLD + timedelta(minutes=1))
        print(f"N={nodes}: a hold end", file=sys.stderr, flush=True)
        end = measure_edge(api, kubeconfig, nodes, model.interval)
    fed = replace(model, latency=0.005, startup=start.startup, list_per_node=start.listing / nodes)
    return [
        annotation_row(f"{nodes:,} measured", nodes, start.edge, end.edge, model),
        annotation_row(
            f"{nodes:,} model, fed the measured start-up ({start.startup:.1f} s) and list "
            f"({start.listing:.1f} s)",
            nodes,
            modelled(nodes, False, fed),
            modelled(nodes, True, fed),
            fed,
        ),
    ]


def measured_budget_row(nodes: int, model: Model) -> str:
    """The real CLI with `--mechanism budget` against NODEPOOLS NodePools of nodes/NODEPOOLS
    nodes each: the NodePool writes of a hold start and end, and the runs they take."""
    with ApiServer(write_latency=0.005) as api, tempfile.TemporaryDirectory() as tmp:
        for pool in range(NODEPOOLS):
            api.add_nodepool(f"pool-{pool}")
            labels = {"karpenter.sh/nodepool": f"pool-{pool}"}
            old = api.now() - timedelta(days=3)
            api.add_nodes(nodes // NODEPOOLS, prefix=f"ip-10-{pool}-", created=old, labels=labels)
        api.add_node("young", created=api.now(), labels={"karpenter.sh/nodepool": "pool-0"})
        kubeconfig = api.write_kubeconfig(Path(tmp) / "kc.yaml")
        print(f"N={nodes}: a budget hold start", file=sys.stderr, flush=True)
        start = measure_edge(api, kubeconfig, NODEPOOLS, model.interval, "--mechanism", "budget")
        api.advance_clock(HOLD + timedelta(minutes=1))
        print(f"N={nodes}: a budget hold end", file=sys.stderr, flush=True)
        end = measure_edge(api, kubeconfig, NODEPOOLS, model.interval, "--mechanism", "budget")
        assert not [r for r in api.requests if r.path.startswith("/api/v1/nodes/")]
    return (
        f"| {nodes:,} measured | budget ({NODEPOOLS} NodePools) | {NODEPOOLS} | - | one run "
        f"| {duration(start.edge.seconds)} / {duration(end.edge.seconds)} "
        f"+ Karpenter's next pass | {start.edge.runs} / {end.edge.runs} "
        f"| {NODEPOOLS * WATCHERS:,} | {NODEPOOLS} writes, one after the other |"
    )


def one_run_covers(nodes: int) -> str:
    """The real CLI, every default, against the API test server (5 ms per stored write): how
    many nodes the first run of a hold start, then of a hold end, writes, with the machine's
    load average (1 minute) before each run: the back-off as shipped, under whatever load."""
    with ApiServer(write_latency=0.005) as api, tempfile.TemporaryDirectory() as tmp:
        api.add_nodes(nodes - 1, created=api.now() - timedelta(days=3), eks=True)
        api.add_node("young", created=api.now(), eks=True)
        kubeconfig = api.write_kubeconfig(Path(tmp) / "kc.yaml")
        cmd = [*python_cmd(), "-m", "reconcile", "reconcile", "--kubeconfig", str(kubeconfig)]
        covered = []
        for edge in ("start", "end"):
            if edge == "end":
                api.advance_clock(HOLD + timedelta(minutes=1))
            load = os.getloadavg()[0]
            api.reset_log()
            out = subprocess.run(
                [*cmd, "-v"], env=child_env(), cwd=REPO, capture_output=True, text=True, check=False
            )
            writes = sum(1 for r in api.requests if r.method == "PATCH" and r.stored)
            halved = out.stderr.count("node writes slowed")
            covered.append(f"hold {edge}: {writes:,} nodes (load {load:.1f}, {halved} halvings)")
    return f"one run of {nodes:,} nodes covers: " + "; ".join(covered)


#: Cluster sizes for the table of hold edges that take more than one run.
RUN_SIZES = (2_000, 5_000, 8_000, 10_000, 20_000, 50_000, 100_000)


def one_run(ending: bool, model: Model) -> int:
    """The largest cluster whose hold start (`ending`: end) one run covers, by bisection."""
    low, high = 1, 200_000
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if modelled(mid, ending, model).runs == 1 else (low, mid - 1)
    return low


def runs_table(model: Model) -> list[str]:
    """Hold starts and ends over runs: how many runs, and when the last node is held (the
    start) or released (the end), from the first run's start. The first run itself starts up
    to a minute after the node that starts the hold appears, or after the hold ends."""
    rows = [
        f"One run covers a hold start on up to {one_run(False, model):,} nodes and a hold end "
        f"on up to {one_run(True, model):,}.",
        "",
        "| nodes | runs (start / end) | last node held after the start | last node released "
        "after the end |",
        "|---:|---|---|---|",
    ]
    for nodes in RUN_SIZES:
        start, end = modelled(nodes, False, model), modelled(nodes, True, model)
        rows.append(
            f"| {nodes:,} | {start.runs} / {end.runs} | {duration(start.seconds)} "
            f"| {duration(end.seconds)} |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-only", action="store_true", help="skip the measured rows")
    parser.add_argument(
        "--covers", type=int, metavar="N", help="only: how many of N nodes one run writes"
    )
    args = parser.parse_args(argv)
    if args.covers:
        print(one_run_covers(args.covers))
        return 0
    model = Model()
    rows = []
    for nodes in SIZES:
        start, end = modelled(nodes, False, model), modelled(nodes, True, model)
        rows += [annotation_row(f"{nodes:,}", nodes, start, end, model), budget_row(nodes, model)]
    if not args.model_only:
        rows += [*measured_rows(SIZES[0], model), measured_budget_row(SIZES[0], model)]
    print(
        f"Model: {model.workers} workers, {model.qps:.0f} writes a second, "
        f"{model.latency * 1000:.0f} ms a patch, start-up {model.startup} s, list "
        f"{model.list_per_node * 1000:.1f} ms a node, --timeout {model.timeout:.0f} s, "
        f"--request-timeout {model.request_timeout:.0f} s, a run every {model.interval:.0f} s; "
        f"{WATCHERS} watchers of every Node (and NodePool); {NODEPOOLS} NodePools.\n"
    )
    print("\n".join([*HEAD, *rows]))
    print("\nHold edges over runs, the same model, at the default settings:\n")
    print("\n".join(runs_table(model)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
