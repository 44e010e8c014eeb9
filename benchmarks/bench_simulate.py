"""How `node-holder simulate` grows with the day: time per configuration against the floor
of loading the file, on days of several shapes from 1,000 to 16,000 nodes, and the targets.

    .venv/bin/python benchmarks/bench_simulate.py [--sizes 1000,2000] [--repeat 3]
        [--shapes leavers,trickle] [--no-targets] [--baseline /path/to/other/checkout]

Day shapes (one day each, written as JSON timelines; only `batch` comes from
scripts/generate_day.py, whose bursts the fast replay was first tuned on):
- leavers: half the nodes came up hours to days ago and leave during the day, in the middle
  of stretches; the other half come in small scale-ups every few minutes and live 1 to 8
  hours; three NodePools, one of which holds 45m (its own hold-duration annotation, in a
  NodePool list beside the timeline);
- trickle: one node at a time all day long (a quarter there from the start), living 30 minutes
  to 6 hours, so a 20m hold never ends: one stretch the whole day;
- bursts: six big scale-ups of a sixth of the nodes each, within three minutes, living 20
  minutes to 3 hours;
- pools: 40 NodePools, each with its own small scale-ups, every fifth holding 45m and every
  seventh capped at 2h of its own;
- batch: `scripts/generate_day.py` at the scale that gives about that many nodes.

Each day is replayed with five configurations, in cluster, group and node scope, with and
without a cap: 20m and `--compare 10m/max=30m,20m/group,20m/node,20m/group/max=1h`. The
first table times them in this process, in CPU seconds (steadier than the wall clock on a
shared machine): loading the file (the floor: reading and checking the JSON), then each
configuration's replay, median of `--repeat`; `ratio` is the mean
configuration's time over the floor, which stays flat where the replay grows as the file
does. The second table times the two targets as whole commands (`python -m
reconcile simulate ...` in a fresh process: start-up, loading, the report), median of
`--repeat`: a 2,000-node day with five configurations within 5 s, a 10,000-node day with one
configuration within 30 s, on an idle 2-core machine. Tables to read; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reconcile.rule.settings import NODE_HOLD, NODE_MAX_HOLD, HoldSettings  # noqa: E402
from reconcile.simulate.replay import parse_compare, replay, replay_span  # noqa: E402
from reconcile.simulate.timeline import Timeline, load_timeline  # noqa: E402
from scripts import generate_day  # noqa: E402

DAY = generate_day.DAY
POOL = "karpenter.sh/nodepool"
COMPARE = "10m/max=30m,20m/group,20m/node,20m/group/max=1h"
SIZES = (1000, 2000, 4000, 8000, 16000)
TARGETS = ((2000, ["--compare", COMPARE], 5.0), (10000, [], 30.0))  # nodes, options, seconds
#: created, deleted, NodePool, that NodePool's own settings (its metadata.annotations)
Node = tuple[datetime, datetime | None, str, dict[str, str]]


def leavers(count: int, rng: random.Random) -> list[Node]:
    own = {"c": {NODE_HOLD: "45m"}}
    nodes = []
    for i in range(count):
        pool = rng.choice("abc")
        if i % 2:  # long-lived: leaves in the middle of whatever stretch is going on
            created = DAY - timedelta(minutes=rng.uniform(60, 7200))
            nodes.append((created, DAY + timedelta(minutes=rng.uniform(0, 1440)), pool, {}))
        else:
            created = DAY + timedelta(
                minutes=rng.randrange(0, 1400, 7), seconds=rng.uniform(0, 120)
            )
            nodes.append((created, created + timedelta(hours=rng.uniform(1, 8)), pool, {}))
    return [(c, d, p, own.get(p, {})) for c, d, p, _ in nodes]


def trickle(count: int, rng: random.Random) -> list[Node]:
    nodes = []
    for i in range(count):
        start = DAY - timedelta(hours=6) if i % 4 == 0 else DAY
        created = start + timedelta(minutes=rng.uniform(0, 1440 if i % 4 else 360))
        life = timedelta(minutes=rng.uniform(30, 360))
        nodes.append((created, created + life, rng.choice("ab"), {}))
    return nodes


def bursts(count: int, rng: random.Random) -> list[Node]:
    nodes = []
    for i in range(count):
        created = DAY + timedelta(hours=2 + 3.5 * (i % 6), seconds=rng.uniform(0, 180))
        nodes.append((created, created + timedelta(minutes=rng.uniform(20, 180)), "ab"[i % 2], {}))
    return nodes


def pools(count: int, rng: random.Random) -> list[Node]:
    nodes: list[Node] = []
    while len(nodes) < count:
        pool = rng.randrange(40)
        own = {NODE_HOLD: "45m"} if pool % 5 == 0 else {}
        own |= {NODE_MAX_HOLD: "2h"} if pool % 7 == 0 else {}
        start = DAY + timedelta(minutes=rng.uniform(0, 1400))
        for _ in range(min(rng.randint(1, 8), count - len(nodes))):
            created = start + timedelta(seconds=rng.uniform(0, 150))
            life = timedelta(minutes=rng.uniform(10, 240))
            nodes.append((created, created + life, f"pool-{pool:02}", own))
    return nodes


def batch(count: int, rng: random.Random) -> list[Node]:
    scale = max(1, round(count / 101))  # generate_day's scale 1 has about 101 nodes
    return [(n["created"], n["deleted"], n["labels"][POOL], {}) for n in generate_day.nodes(scale)]  # type: ignore[index, misc]


SHAPES: dict[str, Callable[[int, random.Random], list[Node]]] = {
    "leavers": leavers,
    "trickle": trickle,
    "bursts": bursts,
    "pools": pools,
    "batch": batch,
}


def write_day(folder: str, shape: str, count: int) -> list[str]:
    """One day of this shape as `node-holder simulate` reads it: a timeline and, beside it, a
    NodePool list with the NodePools' own settings. Returns the two paths."""
    timeline, nodepools = day(shape, count)
    paths = [Path(folder, f"{shape}-{count}.json"), Path(folder, f"{shape}-{count}-pools.json")]
    for path, data in zip(paths, (timeline, nodepools), strict=True):
        path.write_text(json.dumps(data))
    return [str(p) for p in paths]


def day(shape: str, count: int) -> tuple[dict, dict]:
    """A timeline of one day of this shape, and its NodePool list."""
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    made = sorted(SHAPES[shape](count, random.Random(31)), key=lambda n: n[0])
    nodes = [
        {
            "name": f"{shape}-{i}",
            "created": created.strftime(stamp),
            "deleted": deleted and deleted.strftime(stamp),
            "labels": {POOL: pool},
        }
        for i, (created, deleted, pool, _) in enumerate(made)
    ]
    end = DAY + timedelta(days=1)
    own = {pool: settings for _, _, pool, settings in made}
    items = [
        {"kind": "NodePool", "metadata": {"name": pool, "annotations": settings}}
        for pool, settings in sorted(own.items())
    ]
    timeline = {"start": DAY.strftime(stamp), "end": end.strftime(stamp), "nodes": nodes}
    return timeline, {"apiVersion": "v1", "kind": "List", "items": items}


def cpu(work: Callable[[], object], repeat: int) -> tuple[float, object]:
    """The median CPU seconds of `work` (this process's: steadier than the wall clock on a
    shared machine), and what it gave."""
    seconds = []
    for _ in range(repeat):
        began = time.process_time()
        done = work()
        seconds.append(time.process_time() - began)
    return statistics.median(seconds), done


def scaling(paths: list[str], repeat: int) -> tuple[int, float, list[float]]:
    """(nodes, seconds to load the files, seconds each configuration's replay takes)."""
    load, timeline = cpu(lambda: load_timeline(paths), repeat)
    assert isinstance(timeline, Timeline)
    base = HoldSettings(hold_duration=timedelta(minutes=20))
    holds = [base, *parse_compare(COMPARE, base)]
    span = replay_span(timeline, holds, timedelta(minutes=1))
    replays = [cpu(lambda h=h: replay(timeline, span, h), repeat)[0] for h in holds]
    return len(timeline.nodes), load, replays


def whole(checkout: Path, args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one `python -m reconcile simulate ...`, start to exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "reconcile", "simulate", *args],
        check=False,
        cwd=checkout,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(checkout)},
    )
    if done.returncode != 0:
        raise SystemExit(f"simulate {' '.join(args)}: exit {done.returncode}: {done.stderr[-300:]}")
    wall, after = time.perf_counter() - began, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="nodes per day")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="day shapes")
    parser.add_argument("--repeat", type=int, default=3, help="times per figure (median)")
    parser.add_argument("--no-targets", action="store_true", help="skip the whole commands")
    parser.add_argument("--baseline", type=Path, help="another checkout: the targets' commands too")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    shapes = args.shapes.split(",")
    labels = ["20m", *COMPARE.split(",")]  # the primary configuration, then the columns
    print(
        f"node-holder simulate: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load average {os.getloadavg()[0]:.1f}; "
        f"CPU seconds in this process, median of {args.repeat}; ratio: per config / load"
    )
    head = f"{'shape':<8} {'nodes':>6} {'load':>6}  " + " ".join(f"{c:>16}" for c in labels)
    head += f"  {'per config':>10} {'ratio':>6}"
    print(head)
    print("-" * len(head))
    with tempfile.TemporaryDirectory(prefix="bench-simulate-") as tmp:
        for shape in shapes:
            for size in sizes:
                nodes, load, replays = scaling(write_day(tmp, shape, size), args.repeat)
                mean = statistics.mean(replays)
                cells = " ".join(f"{s:>16.2f}" for s in replays)
                ratio = mean / load
                print(f"{shape:<8} {nodes:>6,} {load:>6.2f}  {cells}  {mean:>10.2f} {ratio:>6.1f}")
        if args.no_targets:
            return 0
        print(f"\nTargets: whole commands, median of {args.repeat}")
        checkouts = {
            "this": ROOT,
            **({"baseline": args.baseline.resolve()} if args.baseline else {}),
        }
        for size, options, goal in TARGETS:
            configurations = 5 if options else 1
            for shape in shapes:
                paths = write_day(tmp, shape, size)
                for label, checkout in checkouts.items():
                    runs = [whole(checkout, [*paths, *options]) for _ in range(args.repeat)]
                    wall, used = (statistics.median(r[k] for r in runs) for k in (0, 1))
                    print(
                        f"  {shape:<8} {size:>6,} nodes x {configurations} configuration(s) "
                        f"{label:<8} wall {wall:>6.2f} s, CPU {used:>6.2f} s (goal {goal:.0f} s)"
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
