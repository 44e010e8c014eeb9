"""How long `node-holder simulate` takes: the bundled day and a 2,000-node `kubectl get nodes`.

    .venv/bin/python benchmarks/bench_simulate.py [--baseline /path/to/other/checkout]

Each row is one whole command (`python -m reconcile simulate ...` in a fresh process, so
interpreter start-up, reading the timeline and printing the report are included), run
`--repeat` times; the table shows the best and the median wall time. With `--baseline`, the
same commands also run from another checkout (e.g. a worktree of the commit before the
in-memory replay) and the table shows both side by side. Targets (issue 13): the bundled
day with five configurations under 2 s, the 2,000-node day under 10 s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.kubeapi.nodegen import ip_name, make_eks_node  # noqa: E402

KUBECTL_AT = datetime(2024, 5, 15, tzinfo=UTC)  # when `kubectl get nodes -o json` ran
POOL = "karpenter.sh/nodepool"
COMPARE = "10m,40m,20m/group,20m/node"


def cluster_nodes(count: int = 2000, seed: int = 13) -> dict:
    """`kubectl get nodes -o json` of a busy EKS cluster: what is left of its last 24 h.

    A quarter of the nodes came up during the last day in scale-ups of 1 to 12 nodes
    (busier in working hours), the rest are days to weeks old; a few are being deleted.
    """
    rng = random.Random(seed)
    recent = count // 4
    created: list[tuple[datetime, str]] = []
    while len(created) < recent:
        hour = rng.choice([*range(24), *range(7, 19), *range(8, 18)])
        start = KUBECTL_AT - timedelta(days=1) + timedelta(hours=hour, minutes=rng.uniform(0, 60))
        pool = rng.choice(["batch", "batch", "default", "gpu"])
        for _ in range(min(rng.randint(1, 12), recent - len(created))):
            created.append((start + timedelta(seconds=rng.uniform(0, 180)), pool))
    for _ in range(count - recent):
        age = timedelta(days=rng.uniform(1.5, 60))
        created.append((KUBECTL_AT - age, rng.choice(["default", "default", "system"])))
    items = []
    for seq, (moment, pool) in enumerate(sorted(created)):
        when = min(moment, KUBECTL_AT - timedelta(seconds=30)).replace(microsecond=0)
        node = make_eks_node(ip_name(seq), when, labels={POOL: pool}, rng=random.Random(seq))
        items.append(node)
    for node in rng.sample(items, 10):  # drained by Karpenter right now
        node["metadata"]["deletionTimestamp"] = (KUBECTL_AT - timedelta(minutes=2)).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}}


def cases(workdir: Path) -> list[tuple[str, list[str], bool]]:
    """(what, simulate arguments, whether to time the baseline too) for each row."""
    nodes = workdir / "nodes-2000.json"
    if not nodes.exists():
        nodes.write_text(json.dumps(cluster_nodes(), indent=2))
    day = str(ROOT / "reconcile" / "examples" / "batch-day.yaml")
    big = [str(nodes), "--last", "24h"]
    return [
        ("bundled day, 5 configurations (make demo)", [day, "--compare", COMPARE], True),
        ("2,000-node kubectl day, primary (20m)", big, True),
        # The old replay needs about five times the row above here: not worth the wait.
        ("2,000-node kubectl day, 5 configurations", [*big, "--compare", COMPARE], False),
    ]


def timed(checkout: Path, args: list[str], timeout: float) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child, last line of its report) for one command."""
    before = os.times()
    began = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "reconcile", "simulate", *args],
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "PYTHONPATH": str(checkout)},
        )
    except subprocess.TimeoutExpired:
        return timeout, float("nan"), f"exit: timed out after {timeout:.0f}s"
    wall = time.perf_counter() - began
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    if done.returncode != 0:
        return wall, cpu, f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"
    return wall, cpu, done.stdout.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per row (default 3)")
    parser.add_argument(
        "--baseline", type=Path, help="another checkout to time the same commands from"
    )
    parser.add_argument(
        "--baseline-timeout", type=float, default=900, help="seconds per baseline command"
    )
    parser.add_argument("--only", default="", help="run only rows whose description has this")
    args = parser.parse_args()
    checkouts = [ROOT, *([args.baseline.resolve()] if args.baseline else [])]
    print(
        f"node-holder simulate: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; wall = whole command, best of "
        f"{args.repeat} (median), CPU = the command's user+system time"
    )
    with tempfile.TemporaryDirectory(prefix="bench-simulate-") as tmp:
        rows = [c for c in cases(Path(tmp)) if args.only in c[0]]
        head = f"{'replay':<44} {'checkout':<16} {'wall s':>14} {'CPU s':>7}"
        print(head)
        print("-" * len(head))
        for what, sim_args, with_baseline in rows:
            for checkout in checkouts if with_baseline else checkouts[:1]:
                repeat = args.repeat if checkout == ROOT else 1
                timeout = 600 if checkout == ROOT else args.baseline_timeout
                runs = [timed(checkout, sim_args, timeout) for _ in range(repeat)]
                walls = sorted(r[0] for r in runs)
                wall = f"{walls[0]:.2f} ({statistics.median(walls):.2f})"
                cpu = min(r[1] for r in runs)
                label = "new (in memory)" if checkout == ROOT else "baseline"
                print(f"{what:<44} {label:<16} {wall:>14} {cpu:>7.2f}", flush=True)
                if runs[0][2].startswith("exit"):
                    print(f"  {runs[0][2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
