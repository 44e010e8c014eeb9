"""Benchmark: node-holder against kubectl, a naive client and a floor, at cluster scale.

For each size N it starts the API test server as a subprocess with N EKS-shaped nodes (about
12 KB each, 5 KB of metadata) and a per-write latency like a storage commit, and runs every
contender as a subprocess through three situations a CronJob meets every minute:

- steady:  every node is days old and nothing is held: nothing to change;
- apply:   one node was just created: every node gets the hold annotation;
- release: the clock moved past the hold: every hold comes off again.

Contenders: node-holder with the defaults it ships with but `--qps 1000` (`python -m reconcile
reconcile`; the rows measure what a run costs, and 1000 was the default when they were taken;
the default write rate, which is lower on purpose, is bench_scale.py's subject);
`kubectl annotate nodes --all --overwrite` (what a shell CronJob would run every minute; its
steady run is the same command when every node already has the value, and its release run
is `kubectl annotate nodes --all KEY-`); a naive client (`list_node()` typed models, then
`patch_node` one node at a time); and the floor (download and parse the same metadata-only
pages with urllib3 and json, nothing else; steady only). It prints one Markdown table (the
README's), the ratios, and the targets of the performance issue with PASS or FAIL.

    python benchmarks/bench_runs.py                 # N = 1,000, 5,000, 15,000 (see docs)
    python benchmarks/bench_runs.py --quick         # N = 200, a few seconds
    python benchmarks/bench_runs.py --sizes 5000 --skip-slow

A table to read, never a timed test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from measure import (
    REPO,
    ServerCost,
    TestServer,
    Usage,
    byte_compile,
    child_env,
    python_cmd,
    run_measured,
)

KEY = "karpenter.sh/do-not-disrupt"
HOLD_SECONDS = 20 * 60
PAGE_SIZE = 500
PHASES = ("steady", "apply", "release")
TOOL, FLOOR, NAIVE, KUBECTL = "node-holder", "floor", "naive client", "kubectl annotate"
CONTENDERS = (TOOL, FLOOR, NAIVE, KUBECTL)
HERE = Path(__file__).resolve().parent
#: node-holder's settings besides its defaults: the cost of a run, not the default write rate
#: (200 a second, lower on purpose: benchmarks/bench_scale.py).
TOOL_ARGS = ("--qps", "1000")


@dataclass(frozen=True)
class Row:
    nodes: int
    phase: str
    contender: str
    usage: Usage
    cost: ServerCost
    check: str  # "ok", or what the run failed to do


@dataclass(frozen=True)
class Options:
    sizes: tuple[int, ...]
    write_latency: float
    skip_slow: bool
    kubectl: str | None
    workdir: Path


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# --- one run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Contender:
    name: str
    cmd: tuple[str, ...]
    env: dict[str, str]


@dataclass(frozen=True)
class Expect:
    """What a run must leave behind, so a broken contender cannot look fast."""

    held: bool | None  # every node carries the hold, none does, or not checked
    no_writes: bool


def measured(
    server: TestServer, who: Contender, *, nodes: int, phase: str, expect: Expect, workdir: Path
) -> Row:
    """Run one contender once and check that it did its job."""
    server.reset_log()
    cpu_before = server.cpu()
    slug = who.name.split(maxsplit=1)[0]
    usage = run_measured(list(who.cmd), env=who.env, output=workdir / f"{slug}-{nodes}-{phase}.out")
    cost = server.cost(cpu_before)
    problems = []
    if usage.code != 0:
        problems.append(f"exit {usage.code}")
    if expect.no_writes and cost.writes:
        problems.append(f"{cost.writes} writes")
    if expect.held is not None:
        total, carrying = server.annotated(KEY)
        if expect.held and carrying != total:
            problems.append(f"{total - carrying} nodes not held")
        if not expect.held and carrying:
            problems.append(f"{carrying} nodes still held")
    row = Row(nodes, phase, who.name, usage, cost, "; ".join(problems) or "ok")
    progress(
        f"  N={nodes:>6} {phase:<7} {who.name:<16} {usage.wall:7.2f} s  "
        f"{usage.rss_mb:6.0f} MB  {cost.requests:6} requests  {row.check}"
    )
    return row


def cycle(server: TestServer, nodes: int, who: Contender, workdir: Path) -> list[Row]:
    """steady -> a node is created (apply) -> the hold runs out (release)."""
    young = f"young-{who.name.split(maxsplit=1)[0]}"

    def run(phase: str, held: bool) -> Row:
        expect = Expect(held=held, no_writes=phase == "steady")
        return measured(server, who, nodes=nodes, phase=phase, expect=expect, workdir=workdir)

    rows = [run("steady", held=False)]
    server.add_young_node(young)
    rows.append(run("apply", held=True))
    server.advance_clock(HOLD_SECONDS + 60)
    rows.append(run("release", held=False))
    server.delete_node(young)
    return rows


def kubectl_cycle(server: TestServer, nodes: int, kubectl: str, workdir: Path) -> list[Row]:
    """The shell CronJob: annotate every node (apply), again (steady), then remove it."""
    base = (kubectl, "--kubeconfig", str(server.kubeconfig), "annotate", "nodes", "--all")
    hold = (*base, "--overwrite", f"{KEY}=true")
    release = (*base, f"{KEY}-")

    def run(phase: str, cmd: tuple[str, ...], held: bool) -> Row:
        # A fresh discovery cache, like a CronJob pod's: every run starts cold.
        home = Path(tempfile.mkdtemp(prefix=f"kubectl-{phase}-", dir=workdir))
        env = {**os.environ, "HOME": str(home), "KUBECACHEDIR": str(home / "cache")}
        expect = Expect(held=held, no_writes=phase == "steady")
        return measured(
            server,
            Contender(KUBECTL, cmd, env),
            nodes=nodes,
            phase=phase,
            expect=expect,
            workdir=workdir,
        )

    return [run("apply", hold, True), run("steady", hold, True), run("release", release, False)]


def bench_size(nodes: int, opts: Options) -> list[Row]:
    progress(f"N={nodes}: starting the API test server")
    server = TestServer(nodes, opts.write_latency, opts.workdir)
    kubeconfig = str(server.kubeconfig)
    env = child_env()
    try:
        floor = Contender(
            FLOOR, (*python_cmd(), str(HERE / "floor_list.py"), server.url, server.token), env
        )
        only_list = Expect(held=None, no_writes=True)
        rows = [
            measured(
                server, floor, nodes=nodes, phase="steady", expect=only_list, workdir=opts.workdir
            )
        ]
        tool = (*python_cmd(), "-m", "reconcile", "reconcile", "--kubeconfig", kubeconfig)
        tool += TOOL_ARGS
        rows += cycle(server, nodes, Contender(TOOL, tool, env), opts.workdir)
        if not (opts.skip_slow and nodes > 5000):
            naive = (*python_cmd(), str(HERE / "naive_client.py"), kubeconfig)
            rows += cycle(server, nodes, Contender(NAIVE, naive, env), opts.workdir)
            if opts.kubectl:
                rows += kubectl_cycle(server, nodes, opts.kubectl, opts.workdir)
    finally:
        server.stop()
    return rows


# --- --help --------------------------------------------------------------------------------


def help_seconds(cmd: list[str], runs: int = 5) -> float:
    """Median wall time of `cmd --help` (the first run warms the file cache)."""
    times = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True, env=child_env(), cwd=REPO)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def help_commands() -> list[tuple[str, list[str]]]:
    found = [("python -m reconcile --help", [*python_cmd(), "-m", "reconcile", "--help"])]
    script = Path(sys.executable).parent / "node-holder"
    if script.exists():
        found.insert(0, ("node-holder --help", [str(script), "--help"]))
    return found


# --- report ----------------------------------------------------------------------------------


def machine() -> list[str]:
    model = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = "?"
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kib = int(meminfo.read_text().split("MemTotal:", 1)[1].split()[0])
        memory = f"{kib / 1024 / 1024:.0f} GiB"
    kubectl = shutil.which("kubectl")
    kubectl_version = "not found"
    if kubectl:
        out = subprocess.run(
            [kubectl, "version", "--client"], capture_output=True, text=True, check=False
        ).stdout
        kubectl_version = out.splitlines()[0].split(":", 1)[-1].strip() if out else "?"
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        f"- machine: {model}, {cpus} CPUs (nproc), {memory} RAM, "
        f"{platform.system()} {platform.release()}",
        f"- Python {platform.python_version()}, kubernetes "
        f"{importlib.metadata.version('kubernetes')}, urllib3 "
        f"{importlib.metadata.version('urllib3')}, kubectl {kubectl_version}",
    ]


def table(rows: list[Row]) -> list[str]:
    head = (
        "| nodes | run | contender | wall s | CPU s | peak RSS MB | requests | writes "
        "| MB received | API server CPU s | check |"
    )
    lines = [head, "|---:|---|---|" + "---:|" * 7 + "---|"]
    order = {(p, c): i for i, (p, c) in enumerate((p, c) for p in PHASES for c in CONTENDERS)}
    for r in sorted(rows, key=lambda r: (r.nodes, order[(r.phase, r.contender)])):
        lines.append(
            f"| {r.nodes:,} | {r.phase} | {r.contender} | {r.usage.wall:.2f} | {r.usage.cpu:.2f} "
            f"| {r.usage.rss_mb:.0f} | {r.cost.requests:,} | {r.cost.writes:,} "
            f"| {r.cost.bytes_out / 1e6:.1f} | {r.cost.cpu:.2f} | {r.check} |"
        )
    return lines


def find(rows: list[Row], nodes: int, phase: str, contender: str) -> Row | None:
    for r in rows:
        if (r.nodes, r.phase, r.contender) == (nodes, phase, contender):
            return r
    return None


def ratios(rows: list[Row]) -> list[str]:
    lines = []
    for nodes in sorted({r.nodes for r in rows}):
        parts = []
        for phase in PHASES:
            tool = find(rows, nodes, phase, TOOL)
            if tool is None:
                continue
            for other in (KUBECTL, NAIVE):
                row = find(rows, nodes, phase, other)
                if row is not None:
                    times = row.usage.wall / tool.usage.wall
                    parts.append(f"{phase}: {other} / node-holder {times:.1f}x")
            floor = find(rows, nodes, phase, FLOOR)
            if floor is not None:
                times = tool.usage.wall / floor.usage.wall
                parts.append(f"{phase}: node-holder / floor {times:.2f}x")
        kubectl_apply = find(rows, nodes, "apply", KUBECTL)
        tool_steady = find(rows, nodes, "steady", TOOL)
        if kubectl_apply and tool_steady:
            parts.append(
                "kubectl annotate's hold run / node-holder steady "
                f"{kubectl_apply.usage.wall / tool_steady.usage.wall:.1f}x"
            )
        lines.append(f"- N={nodes:,}: " + "; ".join(parts))
    return lines


@dataclass(frozen=True)
class Target:
    text: str
    ok: bool | None  # None: not measured in this run
    measured: str


def targets(rows: list[Row], help_time: float) -> list[Target]:
    found: list[Target] = []

    def ratio(a: Row | None, b: Row | None) -> float | None:
        return a.usage.wall / b.usage.wall if a and b else None

    def add(text: str, value: float | None, ok: Callable[[float], bool], unit: str) -> None:
        if value is None:
            found.append(Target(text, None, "not measured"))
        else:
            found.append(Target(text, ok(value), f"{value:.2f}{unit}"))

    n = 5000
    steady = find(rows, n, "steady", TOOL)
    if steady is None:
        found.append(Target("targets at N=5,000", None, "N=5,000 not in --sizes"))
    else:
        verbs = steady.cost.verbs
        pages = math.ceil(n / PAGE_SIZE)
        lists = verbs.get("list", 0)
        others = sum(v for k, v in verbs.items() if k != "list")
        found.append(
            Target(
                f"steady: zero writes, at most {pages} list requests and no other request",
                steady.cost.writes == 0 and lists <= pages and others == 0,
                f"{steady.cost.writes} writes, {lists} lists, {others} other requests",
            )
        )
        add(
            "steady: >= 100x faster than kubectl annotate (same situation: nothing to change)",
            ratio(find(rows, n, "steady", KUBECTL), steady),
            lambda v: v >= 100,
            "x",
        )
        add(
            "steady: >= 100x faster than kubectl annotate's run that holds every node",
            ratio(find(rows, n, "apply", KUBECTL), steady),
            lambda v: v >= 100,
            "x",
        )
        add(
            "steady: within 2x the floor's wall time",
            ratio(steady, find(rows, n, "steady", FLOOR)),
            lambda v: v <= 2,
            "x",
        )
        add(
            "apply: >= 5x faster than kubectl annotate",
            ratio(find(rows, n, "apply", KUBECTL), find(rows, n, "apply", TOOL)),
            lambda v: v >= 5,
            "x",
        )
    for size, limit in ((5000, 100), (15000, 150)):
        peak = [r.usage.rss_mb for r in rows if r.nodes == size and r.contender == TOOL]
        add(
            f"peak RSS at N={size:,}: <= {limit} MB",
            max(peak) if peak else None,
            lambda v, limit=limit: v <= limit,
            " MB",
        )
    add("node-holder --help: <= 0.3 s", help_time, lambda v: v <= 0.3, " s")
    return found


# --- main ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="1000,5000,15000",
        help="node counts, comma-separated (default: %(default)s)",
    )
    parser.add_argument(
        "--write-latency",
        type=float,
        default=0.005,
        help="seconds the API test server sleeps per stored write (default: %(default)s)",
    )
    parser.add_argument("--quick", action="store_true", help="N=200 only: checks that it all runs")
    parser.add_argument(
        "--skip-slow",
        action="store_true",
        help="skip kubectl and the naive client above 5,000 nodes (they take minutes there)",
    )
    parser.add_argument("--workdir", default=None, help="keep outputs here (default: a temp dir)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = (200,) if args.quick else tuple(int(s) for s in args.sizes.split(",") if s.strip())
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="node-holder-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    opts = Options(sizes, args.write_latency, args.skip_slow, shutil.which("kubectl"), workdir)
    started = time.perf_counter()
    byte_compile()
    runs = 2 if args.quick else 5
    helps = [(label, help_seconds(cmd, runs)) for label, cmd in help_commands()]
    rows: list[Row] = []
    for nodes in opts.sizes:
        rows += bench_size(nodes, opts)
    elapsed = time.perf_counter() - started

    command = " ".join(
        ["python benchmarks/bench_runs.py", *(argv if argv is not None else sys.argv[1:])]
    )
    out = [
        f"`{command}` (write latency {opts.write_latency * 1000:g} ms; "
        f"took {elapsed / 60:.1f} min)",
        "",
        *machine(),
        "",
        *table(rows),
        "",
        "Wall-time ratios (other / node-holder: how many times faster node-holder is; "
        "node-holder / floor: its overhead over the floor):",
        "",
        *ratios(rows),
        "",
        f"--help (median of {runs}): " + ", ".join(f"`{label}` {t:.3f} s" for label, t in helps),
        "",
        "Targets:",
        "",
    ]
    for t in targets(rows, helps[0][1]):
        mark = "n/a " if t.ok is None else ("PASS" if t.ok else "FAIL")
        out.append(f"- {mark} {t.text}: {t.measured}")
    print("\n".join(out))
    if not opts.kubectl:
        progress("kubectl is not on PATH: its rows are missing")
    failed = [r for r in rows if r.check != "ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
