"""What `node-holder simulate --prometheus` costs on a week of a big cluster: queries,
samples returned, names refined, and simulate's peak memory, at 2,000 and 20,000 node lives.

    .venv/bin/python benchmarks/bench_prometheus.py [--lives 2000,20000] [--keep DIR]

Each week is backfilled with `promtool tsdb create-blocks-from openmetrics` into Debian's
`prometheus`, run with its default limits (`--query.max-samples` 50,000,000, lookback-delta
5m), one sample of each series every 5 minutes. Of the lives, 5% are there all week (from
before it); the others come at random times and live 1 to 30 hours, so about 15% of them
are there at any time (about 3,000 of 20,000); one in 50 names comes back 10 minutes after its
node left. Then `python -m reconcile simulate --prometheus URL --last 7d --sweep` runs in a
fresh process, its peak resident memory from getrusage. `recipe samples` is what the saved
answer of docs/simulate.md's range query (a week at 60s) would hold: Prometheus refuses it
above 50,000,000. Tables to read; nothing is asserted.
"""

from __future__ import annotations

import argparse
import heapq
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

START = datetime(2024, 5, 13, tzinfo=UTC)
END = START + timedelta(days=7)
SAMPLE = 300  # seconds between two samples of a series
POOLS = ("batch", "gpu", "system")
#: `node-holder simulate` in this process, its peak resident memory (KiB) on stderr at exit
PEAK = (
    "import atexit, resource, sys; atexit.register(lambda: print('peak', "
    "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)); "
    "from reconcile.cli import main; main(sys.argv[1:])"
)


def week(lives: int, seed: int = 38) -> list[tuple[str, float, float | None, str]]:
    """(name, created, deleted or None, NodePool) of `lives` node lives."""
    rng = random.Random(seed)
    start, end = START.timestamp(), END.timestamp()
    nodes = []
    for i in range(lives):
        if i < lives // 20:
            nodes.append((f"ip-10-0-{i}.ec2.internal", start - 86400 * (1 + i % 9), None, "system"))
            continue
        born = start + rng.random() * (end - start)
        gone = born + rng.uniform(3600, 30 * 3600)
        name = f"ip-10-1-{i}.ec2.internal"
        if i % 50 == 0 and nodes[-1][2] is not None:  # the previous name, 10 minutes later
            name, born = nodes[-1][0], nodes[-1][2] + 600
        nodes.append((name, round(born), None if gone >= end else round(gone), rng.choice(POOLS)))
    return nodes


def openmetrics(nodes: list[tuple[str, float, float | None, str]], path: Path) -> int:
    """Write the week as OpenMetrics, each family in time order; how many samples."""
    first = START.timestamp() - SAMPLE / 2
    steps = [first + SAMPLE * k for k in range(int((END - START).total_seconds() // SAMPLE) + 1)]
    count = 0
    with path.open("w") as out:
        for family in ("kube_node_created", "kube_node_labels"):
            out.write(f"# TYPE {family} gauge\n")
            order = sorted(nodes, key=lambda n: n[1])
            i, present, leaving = 0, {}, []  # present: index -> line
            for t in steps:
                while i < len(order) and order[i][1] <= t:
                    name, born, gone, pool = order[i]
                    if family == "kube_node_created":
                        present[i] = f'{family}{{node="{name}"}} {born:.0f}'
                    else:
                        present[i] = (
                            f'{family}{{node="{name}",label_karpenter_sh_nodepool="{pool}"}} 1'
                        )
                    if gone is not None:
                        heapq.heappush(leaving, (gone, i))
                    i += 1
                while leaving and leaving[0][0] <= t:
                    present.pop(heapq.heappop(leaving)[1], None)
                out.writelines(f"{line} {t:.0f}\n" for line in present.values())
                count += len(present)
        out.write("# EOF\n")
    return count


def recipe_samples(nodes: list[tuple[str, float, float | None, str]]) -> int:
    """Points of the week's 60s range query of both metrics (lookback 5m: 5 more each)."""
    start, end = START.timestamp(), END.timestamp()
    total = 0
    for _, born, gone, _ in nodes:
        first, last = max(born, start), min(end, (gone or end) + 300)
        total += max(0, int((last - first) // 60) + 1)
    return 2 * total


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(work: Path) -> tuple[subprocess.Popen, str]:
    url = f"http://127.0.0.1:{free_port()}"
    (work / "prometheus.yml").write_text("global: {}\n")
    proc = subprocess.Popen(
        [
            shutil.which("prometheus") or "/usr/bin/prometheus",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address={url.removeprefix('http://')}",
            f"--config.file={work / 'prometheus.yml'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as answer:
                if answer.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("prometheus did not become ready")


def measure(lives: int, work: Path) -> dict[str, object]:
    nodes = week(lives)
    began = time.monotonic()
    samples = openmetrics(nodes, work / "week.om")
    subprocess.run(
        [
            shutil.which("promtool") or "/usr/bin/promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "week.om",
            "data",
        ],
        cwd=work,
        check=True,
        capture_output=True,
    )
    (work / "week.om").unlink()
    backfill = time.monotonic() - began
    proc, url = serve(work)
    try:
        began = time.monotonic()
        run = subprocess.run(
            [
                sys.executable,
                "-c",
                PEAK,
                "simulate",
                "--prometheus",
                url,
                "--end",
                END.isoformat(),
                "--last",
                "7d",
                "--sweep",
                "--output",
                "json",
                "-v",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        proc.terminate()
        proc.wait()
    if run.returncode:
        raise SystemExit(run.stderr)
    got = re.search(r"(\d+) queries, (\d+) samples, (\d+) names refined", run.stderr)
    peak = re.search(r"^peak (\d+)$", run.stderr, re.M)
    assert got and peak, run.stderr
    queries, returned, refined = map(int, got.groups())
    return {
        "lives": lives,
        "at once": _at_noon(nodes),
        "backfilled": samples,
        "recipe samples": recipe_samples(nodes),
        "queries": queries,
        "samples returned": returned,
        "names refined": refined,
        "simulate s": round(time.monotonic() - began, 1),
        "peak MB": round(int(peak.group(1)) / 1024),
        "backfill s": round(backfill, 1),
    }


def _at_noon(nodes: list[tuple[str, float, float | None, str]]) -> int:
    """Nodes there in the middle of the week."""
    t = (START + (END - START) / 2).timestamp()
    return sum(1 for _, born, gone, _ in nodes if born <= t and (gone is None or gone > t))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lives", default="2000,20000")
    parser.add_argument("--keep", help="work in this folder and keep it")
    args = parser.parse_args()
    rows = []
    for lives in map(int, args.lives.split(",")):
        if args.keep:
            work = Path(args.keep) / str(lives)
            work.mkdir(parents=True, exist_ok=True)
            rows.append(measure(lives, work))
        else:
            with tempfile.TemporaryDirectory() as folder:
                rows.append(measure(lives, Path(folder)))
        print(
            " | ".join(
                f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in rows[-1].items()
            ),
            flush=True,
        )
    print()
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + " --- |" * len(keys))
    for row in rows:
        print(
            "| "
            + " | ".join(f"{row[k]:,}" if isinstance(row[k], int) else str(row[k]) for k in keys)
            + " |"
        )


if __name__ == "__main__":
    main()
