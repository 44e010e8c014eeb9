"""Benchmark: the steady run (nothing to write) against the floor, side by side.

For each size N it starts the API test server with N EKS-shaped nodes, all days old, and runs
the floors (benchmarks/floor_list.py: the node list alone, and the NodePool list then the node
list, as node-holder's run reads them), node-holder from this checkout and, with `--against DIR`,
node-holder from another copy of the package (say main's: `git archive main reconcile | tar -x
-C DIR`), one after the other, `--repeat` times, against the same server in the same minutes:
a shared machine's load moves them alike. It prints the medians of wall and CPU time and the
ratios to the two-list floor (what a run that lists NodePools and nodes cannot go below), and
the load average.

    python benchmarks/bench_steady.py --sizes 5000,15000 --repeat 3 --against /tmp/main-src

A table to read, never a timed test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measure import REPO, TestServer, Usage, byte_compile, child_env, python_cmd

HERE = Path(__file__).resolve().parent
#: The floors: node-holder lists the NodePools (one page, metadata only) before the nodes.
FLOOR_NODES, FLOOR = "floor: nodes", "floor: NodePools + nodes"


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> Usage:
    """One run to completion; CPU time and peak RSS of that child alone (os.wait4)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    return Usage(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, code)


def bench_size(nodes: int, args: argparse.Namespace, workdir: Path) -> list[str]:
    server = TestServer(nodes, 0.0, workdir)
    tool = [*python_cmd(), "-m", "reconcile", "reconcile", "--kubeconfig", str(server.kubeconfig)]
    tool += ["--timeout", args.timeout]
    env = child_env()
    # (command, environment, working directory: `-m` looks there first)
    floor = [*python_cmd(), str(HERE / "floor_list.py"), server.url, server.token]
    runs = {FLOOR_NODES: (floor, env, REPO),
            FLOOR: ([*floor, "--nodepools"], env, REPO),
            "node-holder": (tool, env, REPO)}  # fmt: skip
    if args.against:
        runs["node-holder at --against"] = (tool, {**env, "PYTHONPATH": args.against}, workdir)
    got: dict[str, list[Usage]] = {name: [] for name in runs}
    try:
        for _ in range(args.repeat):
            for name, (cmd, run_env, cwd) in runs.items():
                got[name].append(run(cmd, run_env, cwd))
    finally:
        server.stop()
    floor_wall, floor_cpu = (statistics.median(getattr(u, f) for u in got[FLOOR])
                             for f in ("wall", "cpu"))  # fmt: skip
    lines = []
    for name, usages in got.items():
        wall = statistics.median(u.wall for u in usages)
        cpu = statistics.median(u.cpu for u in usages)
        lines.append(
            f"| {nodes:,} | {name} | {wall:.2f} | {cpu:.2f} | {max(u.rss_mb for u in usages):.0f} "
            f"| {wall / floor_wall:.2f}x / {cpu / floor_cpu:.2f}x "
            f"| {', '.join(str(u.code) for u in usages)} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="5000,15000,50000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", default=None, help="a directory holding another `reconcile`")
    parser.add_argument("--timeout", default="45s", help="node-holder's --timeout")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="node-holder-steady-"))
    for source in (REPO, *([Path(args.against)] if args.against else [])):
        byte_compile(source / "reconcile")
    out = [
        f"load average before: {os.getloadavg()[0]:.1f}",
        "",
        "| nodes | run | wall s | CPU s | peak RSS MB | vs the two-list floor (wall / CPU) "
        "| exit codes |",
        "|---:|---|---:|---:|---:|---|---|",
    ]
    for nodes in (int(s) for s in args.sizes.split(",") if s.strip()):
        rows = bench_size(nodes, args, workdir)
        out += rows
        print("\n".join(rows), file=sys.stderr, flush=True)  # progress
    out += ["", f"load average after: {os.getloadavg()[0]:.1f}; medians of {args.repeat} runs"]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
