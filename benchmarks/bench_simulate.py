"""How long `node-holder simulate` takes, and how much memory, on days of 500 to 10,000 nodes.

    .venv/bin/python benchmarks/bench_simulate.py [--baseline /path/to/other/checkout]

Each row is one whole command (`python -m reconcile simulate ...` in a fresh process, so
interpreter start-up, reading the timeline and printing the report are included), run
`--repeat` times: the table shows the best and the median wall time, the largest peak
memory (the child's maximum resident set size) and, from the report's last line, the runs
the replay decided and the runs it skipped because nothing could change. With `--baseline`,
the same commands also run once from another checkout (e.g. `git archive` of main), each
row right under this checkout's. Two kinds of day:
- batch days: `scripts/generate_day.py` at a scale (the bundled day's pools,
  bursts and jobs, N times the nodes), written as JSON;
- kubectl days: `kubectl get nodes -o json` of a busy EKS cluster (EKS-shaped nodes from
  tests/kubeapi/nodegen.py): three quarters days to weeks old, a quarter that came up
  during the last day in scale-ups of 1 to 12 nodes, 10 being deleted; `--last 24h`.
Each kind of day is replayed as it is and with the chart's default cap (`--max-hold 2h`,
hold triggered by nodes with a `karpenter.sh/nodepool` label: `max 2h` rows), where a
window's hold depends on where its last stretch started, not only on its youngest node.
Targets (issue 23): a 2,000-node day with five configurations within 5 s, a 10,000-node
day with one configuration within 60 s, on the project's 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts import generate_day  # noqa: E402
from tests.kubeapi.nodegen import ip_name, make_eks_node  # noqa: E402

KUBECTL_AT = datetime(2024, 5, 15, tzinfo=UTC)  # when `kubectl get nodes -o json` ran
POOL = "karpenter.sh/nodepool"
COMPARE = ["--compare", "10m,40m,20m/group,20m/node"]
CAPPED = ["--max-hold", "2h", "--trigger-selector", POOL]  # the chart's default
SCALES = {500: 5, 2000: 17, 10000: 99}  # generate_day scales that give about that many nodes


def cluster_nodes(count: int, seed: int = 13) -> dict:
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


def batch_day(scale: int) -> dict:
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    nodes = [
        {
            **n,
            "created": n["created"].strftime(stamp),
            "deleted": n["deleted"] and n["deleted"].strftime(stamp),
        }  # type: ignore[union-attr]
        for n in generate_day.nodes(scale)
    ]
    day = generate_day.DAY
    return {
        "start": day.strftime(stamp),
        "end": (day + timedelta(days=1)).strftime(stamp),
        "nodes": nodes,
    }


def cases(workdir: Path) -> list[tuple[str, list[str]]]:
    """(what, simulate arguments) for each row; write_inputs() writes the files they read."""
    day = str(ROOT / "reconcile/examples/batch-day.yaml")
    rows = [("bundled day, 5 configurations", [day, *COMPARE])]
    for cap in ([], CAPPED):
        suffix = ", max 2h" if cap else ""
        for size in SCALES:
            for compare in (COMPARE, []) if size == 10000 else (COMPARE,):
                what = f"batch day ~{size:,}, {'5 configurations' if compare else 'primary'}"
                rows.append((what + suffix, [str(workdir / f"batch-{size}.json"), *compare, *cap]))
        for size in SCALES:
            compare = [] if size == 10000 else COMPARE
            what = f"kubectl day {size:,}, {'5 configurations' if compare else 'primary'}"
            path = str(workdir / f"kubectl-{size}.json")
            rows.append((what + suffix, [path, "--last", "24h", *compare, *cap]))
    return rows


def write_inputs(workdir: Path, only: str) -> None:
    """The days the chosen rows read, as files (written in a child process: the parent
    stays small, so the peak memory a child reports, which counts what it was forked from,
    is its own)."""
    wanted = {args[0] for what, args in cases(workdir) if only in what}
    for size, scale in SCALES.items():
        if str(workdir / f"batch-{size}.json") in wanted:
            (workdir / f"batch-{size}.json").write_text(json.dumps(batch_day(scale)))
        if str(workdir / f"kubectl-{size}.json") in wanted:
            (workdir / f"kubectl-{size}.json").write_text(json.dumps(cluster_nodes(size)))


def timed(checkout: Path, args: list[str], timeout: float) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, first and last line of its report) for one command."""
    began = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reconcile", "simulate", *args],
            cwd=checkout,
            stdout=out,
            stderr=err,
            env={**os.environ, "PYTHONPATH": str(checkout)},
        )
        while (waited := os.wait4(proc.pid, os.WNOHANG))[0] == 0:
            if time.perf_counter() - began > timeout:
                proc.kill()
                return timeout, float("nan"), f"exit: timed out after {timeout:.0f}s"
            time.sleep(0.02)
        wall = time.perf_counter() - began
        proc.returncode = os.waitstatus_to_exitcode(waited[1])
        rss = waited[2].ru_maxrss / 1024
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            return wall, rss, f"exit {proc.returncode}: {err.read().strip().splitlines()[-1:]}"
        lines = out.read().strip().splitlines()
        return wall, rss, f"{lines[0]}\n{lines[-1]}"


def figures(report: str) -> tuple[str, str, str]:
    """(nodes, runs decided, runs skipped) from the report's first and last lines."""
    nodes = re.search(r"\(([\d,]+) nodes\)", report)
    found = re.search(r"\(([\d,]+) runs decided, ([\d,]+) skipped", report)
    decided, skipped = found.groups() if found else ("-", "-")
    return (f"{int(nodes.group(1)):,}" if nodes else "-"), decided, skipped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per row (default 3)")
    parser.add_argument("--baseline", type=Path, help="another checkout to time once per row")
    parser.add_argument("--baseline-timeout", type=float, default=900, help="seconds per command")
    parser.add_argument("--only", default="", help="run only rows whose description has this")
    parser.add_argument("--write-inputs", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_inputs:
        write_inputs(args.write_inputs, args.only)
        return 0
    checkouts = [ROOT, *([args.baseline.resolve()] if args.baseline else [])]
    print(
        f"node-holder simulate: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; wall = whole command, best (median) of "
        f"{args.repeat}; memory = peak RSS; runs = decided / skipped, all configurations"
    )
    with tempfile.TemporaryDirectory(prefix="bench-simulate-") as tmp:
        subprocess.run(
            [sys.executable, __file__, "--write-inputs", tmp, "--only", args.only], check=True
        )
        rows = [c for c in cases(Path(tmp)) if args.only in c[0]]
        head = (
            f"{'replay':<44} {'nodes':>6}  {'checkout':<9} {'wall s':>15} {'memory':>8} "
            f"{'runs decided':>13} {'skipped':>8}"
        )
        print(head)
        print("-" * len(head))
        for what, sim_args in rows:
            for checkout in checkouts:
                repeat = args.repeat if checkout == ROOT else 1
                timeout = 600 if checkout == ROOT else args.baseline_timeout
                results = [timed(checkout, sim_args, timeout) for _ in range(repeat)]
                walls = sorted(r[0] for r in results)
                wall = f"{walls[0]:.2f} ({statistics.median(walls):.2f})"
                memory = f"{max(r[1] for r in results):.0f} MB"
                nodes, decided, skipped = figures(results[0][2])
                label = "this" if checkout == ROOT else "baseline"
                print(
                    f"{what:<44} {nodes:>6}  {label:<9} {wall:>15} {memory:>8} "
                    f"{decided:>13} {skipped:>8}",
                    flush=True,
                )
                if results[0][2].startswith("exit"):
                    print(f"  {results[0][2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
