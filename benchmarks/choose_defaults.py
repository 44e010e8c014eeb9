"""The figures behind the chart's defaults (README, "Why these defaults"): `simulate` on two days.

    .venv/bin/python benchmarks/choose_defaults.py [--write-day DIR]

Days replayed (each configuration through `node-holder simulate --output json`, in a fresh
process, as a user would run it):

- the bundled day (reconcile/examples/batch-day.yaml): 105 nodes, every one a Karpenter node;
- a generated day of about 2,000 nodes in an EKS cluster where Karpenter runs beside managed
  node groups (`day_2000()` below, deterministic): 3 system nodes and a 60-node managed node
  group (labelled `eks.amazonaws.com/nodegroup`, rolled to a new AMI in the afternoon), a
  Fargate profile whose CronJob gets a new Fargate node every 5 minutes, 600 long-lived
  `general` NodePool nodes with a few replacements an hour, bursts of 20 to 140 `batch` nodes
  (the bundled day's rhythm, twenty times the size) and a few `gpu` training nodes;
- the same day as cluster-autoscaler sees it: every node pool a managed node group (the
  NodePool label becomes `eks.amazonaws.com/nodegroup`).

For each cluster it prints one row per configuration: holds started, share of the day held,
the longest continuous hold, share of node-minutes held, nodes removed while held (the
churn a hold prevents) and node writes. Figures are counts from the replay: they do not
depend on the machine, only the replay time does.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "reconcile" / "examples" / "batch-day.yaml"
DAY = datetime(2024, 5, 14, tzinfo=UTC)
POOL = "karpenter.sh/nodepool"
GROUP = "eks.amazonaws.com/nodegroup"
FARGATE = "eks.amazonaws.com/compute-type"


def _stamp(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else "null"


class _Nodes:
    """The day's nodes, with EKS-style names never reused within the day."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.items: list[tuple[str, datetime, datetime | None, dict[str, str]]] = []
        self._seq = 0

    def add(self, labels: dict[str, str], created: datetime, deleted: datetime | None) -> None:
        self._seq += 1
        prefix = "fargate-ip" if FARGATE in labels else "ip"
        name = f"{prefix}-10-{self._seq // 65025 % 255}-{self._seq // 255 % 255}-{self._seq % 255}"
        self.items.append((f"{name}.ec2.internal", created, deleted, labels))


def _bursts(rng: random.Random) -> Iterator[tuple[datetime, int]]:
    """The bundled day's batch rhythm (waves in working hours, a nightly ETL), 20 times the
    nodes per burst."""
    yield DAY + timedelta(hours=1, minutes=30), 140
    yield DAY + timedelta(hours=3, minutes=5), 60
    moment = DAY + timedelta(hours=7, minutes=20)
    while moment < DAY + timedelta(hours=19):
        yield moment, 20 * rng.randint(1, 5)
        gap = rng.randint(8, 30) if rng.random() < 0.6 else rng.randint(45, 110)
        moment += timedelta(minutes=gap)
    yield DAY + timedelta(hours=22, minutes=10), 80


def day_2000(seed: int = 2000) -> _Nodes:
    nodes = _Nodes(seed)
    rng = nodes.rng
    for i in range(3):  # where Karpenter and node-holder run
        nodes.add({GROUP: "system"}, DAY - timedelta(days=20, hours=i), None)
    # A managed node group of 60, rolled to a new AMI from 14:00 (one node every 2 minutes).
    for i in range(60):
        replaced = DAY + timedelta(hours=14, minutes=2 * i)
        nodes.add({GROUP: "apps"}, DAY - timedelta(days=9, minutes=7 * i), replaced)
        nodes.add({GROUP: "apps"}, replaced - timedelta(minutes=3), None)
    # A Fargate profile: a CronJob every 5 minutes, each pod on a Fargate node of its own.
    for minute in range(0, 24 * 60, 5):
        start = DAY + timedelta(minutes=minute, seconds=rng.randint(20, 50))
        nodes.add({FARGATE: "fargate"}, start, start + timedelta(seconds=rng.randint(90, 200)))
    # The general NodePool: 600 nodes for days; consolidation replaces about 4 an hour.
    for _ in range(600):
        created = DAY - timedelta(hours=rng.uniform(30, 24 * 20))
        deleted = DAY + timedelta(hours=rng.uniform(0, 24)) if rng.random() < 0.16 else None
        nodes.add({POOL: "general"}, created, deleted)
        if deleted is not None:
            nodes.add({POOL: "general"}, deleted - timedelta(minutes=2), None)
    for start, count in _bursts(rng):
        for _ in range(count):
            created = start + timedelta(seconds=rng.randint(20, 240))
            job = timedelta(minutes=rng.randint(10, 30), seconds=rng.randint(30, 150))
            nodes.add({POOL: "batch"}, created, created + job)
    for hour, minute, hours in ((10, 12, 4.3), (15, 41, 2.5), (20, 55, 3.2)):
        for _ in range(8):
            created = DAY + timedelta(hours=hour, minutes=minute, seconds=rng.randint(0, 120))
            nodes.add({POOL: "gpu"}, created, created + timedelta(hours=hours))
    return nodes


def as_cluster_autoscaler(nodes: _Nodes) -> _Nodes:
    """The same day with managed node groups only: the NodePool label becomes the node group."""
    out = _Nodes(0)
    for name, created, deleted, labels in nodes.items:
        relabelled = {GROUP if k == POOL else k: v for k, v in labels.items()}
        out.items.append((name, created, deleted, relabelled))
    return out


def write(nodes: _Nodes, path: Path) -> Path:
    lines = [f"start: {_stamp(DAY)}", f"end: {_stamp(DAY + timedelta(days=1))}", "nodes:"]
    for name, created, deleted, labels in sorted(nodes.items, key=lambda n: (n[1], n[0])):
        pairs = ", ".join(f"{k}: {v}" for k, v in labels.items())
        lines += [
            f"  - name: {name}",
            f"    created: {_stamp(created)}",
            f"    deleted: {_stamp(deleted)}",
            f"    labels: {{{pairs}}}",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass(frozen=True)
class Config:
    label: str
    args: tuple[str, ...]


KARPENTER = "karpenter.sh/nodepool"
SELECTED = ("--trigger-selector", KARPENTER)
CA_KEY = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
OLD = Config("every node triggers, no cap (the CLI's defaults)", ())
DEFAULTS = Config(
    "nodepool triggers, max 2h (the chart's defaults)", (*SELECTED, "--max-hold", "2h")
)


def caps() -> list[Config]:
    """The chart's trigger selector with no cap and with caps from 1h to 4h."""
    rows = [Config("nodepool triggers, no cap", SELECTED)]
    for cap in ("1h", "2h", "3h", "4h"):
        rows.append(Config(f"nodepool triggers, max {cap}", (*SELECTED, "--max-hold", cap)))
    longer = (*SELECTED, "--max-hold", "2h", "--hold-duration", "45m")
    rows.append(Config("  max 2h, hold 45m (a longer free period after a capped stretch)", longer))
    return rows


def replay(timeline: Path, config: Config) -> dict:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "reconcile",
            "simulate",
            str(timeline),
            "--output",
            "json",
            *config.args,
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return json.loads(proc.stdout)


def _minutes(seconds: float) -> str:
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours}h{minutes:02d}" if hours else f"{minutes}m"


def row(config: Config, result: dict) -> str:
    primary = next(c for c in result["configurations"] if c["primary"])
    longest = max((p["durationSeconds"] for p in primary["periods"]), default=0)
    return (
        f"  {config.label:<66} {primary['holdsStarted']:>5} {primary['heldShare']:>6.0%}"
        f" {_minutes(longest):>8} {primary['nodeMinutesHeldShare']:>6.0%}"
        f" {primary['nodesRemovedWhileHeld']:>7,} {primary['writes']['total']:>7,}"
    )


HEADER = (
    f"  {'configuration (hold 20m)':<66} {'holds':>5} {'held':>6} {'longest':>8}"
    f" {'node-m':>6} {'removed':>7} {'writes':>7}"
)


def table(title: str, rows: list[tuple[Path, Config]]) -> None:
    print(f"\n{title}")
    print(HEADER)
    for timeline, config in rows:
        print(row(config, replay(timeline, config)), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-day", type=Path, help="also keep the generated days here")
    args = parser.parse_args()
    print(
        f"node-holder simulate: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; hold 20m, one run a minute, 1,440 runs a day"
    )
    print(
        "  held: share of the day some node carries the hold; longest: the longest continuous"
        " hold;\n  node-m: share of node-minutes held; removed: nodes deleted while held (the"
        " churn a hold\n  prevents); writes: node PATCHes"
    )
    with tempfile.TemporaryDirectory(prefix="choose-defaults-") as tmp:
        where = args.write_day or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        big = day_2000()
        day = write(big, where / "day-2000.yaml")
        ca_day = write(as_cluster_autoscaler(big), where / "day-2000-cluster-autoscaler.yaml")
        print(f"\ngenerated day: {len(big.items):,} nodes ({day.name})")
        table("Choosing the cap: the generated day", [(day, c) for c in [OLD, *caps()]])
        table(
            "The bundled day (105 nodes, every one a Karpenter node)",
            [(BUNDLED, OLD), (BUNDLED, DEFAULTS)],
        )
        group = ("--hold-scope", "group")
        ca = ("--annotation", CA_KEY, "--group-label", GROUP, *group)
        table(
            "Which settings for which cluster (hold 20m, max 2h)",
            [
                (BUNDLED, Config("Karpenter only (bundled day): the defaults", DEFAULTS.args)),
                (day, Config("Karpenter + managed node groups: the defaults", DEFAULTS.args)),
                (
                    day,
                    Config(
                        "  ... and holdNodeSelector=karpenter.sh/nodepool",
                        (*DEFAULTS.args, "--node-selector", KARPENTER),
                    ),
                ),
                (day, Config("many NodePools: holdScope=group", (*DEFAULTS.args, *group))),
                (
                    day,
                    Config(
                        "  ... and only the batch and gpu pools trigger",
                        (
                            "--trigger-selector",
                            f"{KARPENTER} in (batch,gpu)",
                            "--max-hold",
                            "2h",
                            *group,
                        ),
                    ),
                ),
                (ca_day, Config("cluster-autoscaler: every node triggers, group", ca)),
                (
                    ca_day,
                    Config(
                        "cluster-autoscaler: node groups trigger, group, max 2h",
                        (*ca, "--trigger-selector", GROUP, "--max-hold", "2h"),
                    ),
                ),
            ],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
