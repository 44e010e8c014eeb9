"""Benchmark: peak memory of node-holder runs, whatever the cluster size and the node size.

For each case it starts the API test server as a subprocess (EKS-shaped nodes, optionally
each with one big annotation, served cheaply: see tests/kubeapi/nodegen.py) and runs
`node-holder reconcile` with its shipped defaults (but `--qps 1000`, as bench_runs.py) through
steady -> apply -> release (see bench_runs.py). A run that reaches --timeout before every
patch is sent exits 1; the next run (the CronJob's next minute) completes the work, so an
apply or release is repeated until a run exits 0, and the table shows how many runs it took
and the highest peak of them. The floor (benchmarks/floor_list.py) lists the same cluster
once, for the steady-run ratio.

    python benchmarks/bench_memory.py        # the four cases of docs/maintainers/benchmarks.md
    python benchmarks/bench_memory.py --cases eks:2000,big:500

A table to read, never a timed test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench_runs import (
    FLOOR,
    HERE,
    HOLD_SECONDS,
    KEY,
    TOOL,
    TOOL_ARGS,
    Contender,
    Expect,
    Row,
    machine,
    measured,
)
from measure import TestServer, byte_compile, child_env, python_cmd

BIG = 200 * 1024  # bytes of the big annotation: legal (the object limit is 256 KB)
RSS_TARGET_MB = 128.0
FLOOR_RATIO = 1.5
MAX_RUNS = 5


@dataclass(frozen=True)
class Case:
    kind: str  # "eks" or "big"
    nodes: int

    @property
    def label(self) -> str:
        shape = "EKS-shaped" if self.kind == "eks" else "EKS + 200 KB annotation"
        return f"{self.nodes:,} {shape}"


@dataclass(frozen=True)
class Result:
    case: Case
    phase: str
    rows: tuple[Row, ...]  # one per run until a run exited 0
    check: str = "ok"  # or what the runs failed to leave behind

    @property
    def peak(self) -> float:
        return max(r.usage.rss_mb for r in self.rows)

    @property
    def wall(self) -> float:
        return sum(r.usage.wall for r in self.rows)

    @property
    def converged(self) -> bool:
        return self.rows[-1].usage.code == 0


def until_done(
    server: TestServer, case: Case, tool: Contender, phase: str, workdir: Path
) -> Result:
    """Run as the CronJob would, minute after minute, until a run completes."""
    held = None if phase == "steady" else phase == "apply"
    rows = []
    for _ in range(MAX_RUNS):
        expect = Expect(held=None, no_writes=phase == "steady")
        row = measured(server, tool, nodes=case.nodes, phase=phase, expect=expect, workdir=workdir)
        rows.append(row)
        output = workdir / f"{tool.name.split(maxsplit=1)[0]}-{case.nodes}-{phase}.out"
        if row.usage.code != 0 or "continues next run: " not in output.read_text():
            break  # failed, or nothing left to the next run (pacing is not failure)
    check = "ok"
    if held is not None:
        total, carrying = server.annotated(KEY)
        if carrying != (total if held else 0):
            check = f"{carrying} of {total} nodes held"
    return Result(case, phase, tuple(rows), check)


def bench_case(
    case: Case, workdir: Path, write_latency: float, *, repeat: int, steady_only: bool
) -> tuple[list[Result], str, float]:
    started = time.perf_counter()
    big = BIG if case.kind == "big" else 0
    server = TestServer(case.nodes, write_latency, workdir, annotation_bytes=big)
    kubeconfig = str(server.kubeconfig)
    env = child_env()
    tool_cmd = (*python_cmd(), "-m", "reconcile", "reconcile", "--kubeconfig", kubeconfig)
    tool = Contender(TOOL, (*tool_cmd, *TOOL_ARGS), env)
    floor = Contender(
        FLOOR, (*python_cmd(), str(HERE / "floor_list.py"), server.url, server.token), env
    )
    try:
        results = [until_done(server, case, tool, "steady", workdir)]
        ratio, wall_ratio = steady_ratio(server, case, tool, floor, workdir, repeat=repeat)
        if not steady_only:
            server.add_young_node("young-bench")
            results.append(until_done(server, case, tool, "apply", workdir))
            server.advance_clock(HOLD_SECONDS + 60)
            results.append(until_done(server, case, tool, "release", workdir))
        note = (
            f"{case.label}: {ratio}; the API test server took {server.startup:.0f} s to start, "
            f"peaked at {server.peak_rss_mb():.0f} MB; the case took "
            f"{time.perf_counter() - started:.0f} s"
        )
    finally:
        server.stop()
    return results, note, wall_ratio


def steady_ratio(
    server: TestServer, case: Case, tool: Contender, floor: Contender, workdir: Path, *, repeat: int
) -> tuple[str, float]:
    """Steady run against the floor, alternated `repeat` times: medians, wall and CPU."""
    nothing = Expect(held=None, no_writes=True)
    pairs = []
    for _ in range(repeat):
        pair = [
            measured(server, who, nodes=case.nodes, phase="steady", expect=nothing, workdir=workdir)
            for who in (floor, tool)
        ]
        pairs.append(pair)
    fw, tw = (statistics.median(p[i].usage.wall for p in pairs) for i in (0, 1))
    fc, tc = (statistics.median(p[i].usage.cpu for p in pairs) for i in (0, 1))
    text = (
        f"steady / floor {tw / fw:.2f}x wall ({tw:.2f} / {fw:.2f} s), {tc / fc:.2f}x CPU "
        f"({tc:.2f} / {fc:.2f} s), medians of {repeat}"
    )
    return text, tw / fw


def table(results: list[Result]) -> list[str]:
    out = [
        "| nodes | run | runs to converge | wall (all runs) | CPU | peak RSS | requests | check |",
        "|---|---|--:|--:|--:|--:|--:|---|",
    ]
    for r in results:
        cpu = sum(row.usage.cpu for row in r.rows)
        requests = sum(row.cost.requests for row in r.rows)
        runs = f"{len(r.rows)}" if r.converged else f"not in {len(r.rows)}"
        out.append(
            f"| {r.case.label} | {r.phase} | {runs} | {r.wall:.1f} s | {cpu:.1f} s | "
            f"{r.peak:.0f} MB | {requests:,} | {r.check} |"
        )
    return out


def parse_cases(text: str) -> list[Case]:
    cases = []
    for item in text.split(","):
        kind, _, nodes = item.strip().partition(":")
        if kind not in ("eks", "big") or not nodes.isdigit():
            raise SystemExit(f"--cases: {item!r} is not eks:N or big:N")
        cases.append(Case(kind, int(nodes)))
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="eks:15000,eks:50000,big:2000,big:5000")
    parser.add_argument("--write-latency", type=float, default=0.0)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--repeat", type=int, default=3, help="steady/floor pairs for the ratio")
    parser.add_argument("--steady-only", action="store_true", help="no apply and release runs")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="node-holder-mem-"))
    workdir.mkdir(parents=True, exist_ok=True)
    byte_compile()
    started = time.perf_counter()
    results: list[Result] = []
    notes: list[str] = []
    ratios: dict[Case, float] = {}
    for case in parse_cases(args.cases):
        got, note, ratios[case] = bench_case(
            case, workdir, args.write_latency, repeat=args.repeat, steady_only=args.steady_only
        )
        results += got
        notes.append(note)
    command = " ".join(["python benchmarks/bench_memory.py", *(argv or sys.argv[1:])])
    print(f"`{command}` (took {(time.perf_counter() - started) / 60:.1f} min)\n")
    print("\n".join([*machine(), "", *table(results), ""]))
    for note in notes:
        print(f"- {note}")
    print("\nTargets:\n")
    ok = True
    for r in results:
        passed = r.peak <= RSS_TARGET_MB and r.converged and r.check == "ok"
        ok &= passed
        mark = "PASS" if passed else "FAIL"
        what = f"{r.case.label} {r.phase}"
        print(f"- {mark} peak RSS <= {RSS_TARGET_MB:.0f} MB, {what}: {r.peak:.0f} MB")
    for case in sorted((c for c in ratios if c.kind == "eks"), key=lambda c: c.nodes):
        passed = ratios[case] <= FLOOR_RATIO
        ok &= passed
        mark = "PASS" if passed else "FAIL"
        print(
            f"- {mark} steady run within {FLOOR_RATIO}x the floor's wall time, "
            f"{case.label}: {ratios[case]:.2f}x"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
