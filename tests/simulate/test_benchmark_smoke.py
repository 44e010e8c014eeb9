"""The benchmark runs end to end (quick mode: 200 nodes) and prints its table; no timing checks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import run_python

CONTENDERS = ("node-holder", "naive client", "kubectl annotate")


pytestmark = pytest.mark.slow


def test_quick_benchmark_prints_every_contender_in_every_run(tmp_path: Path) -> None:
    done = run_python("benchmarks/bench_runs.py", "--quick", "--workdir", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split("|") for line in done.stdout.splitlines() if line.startswith("| 200 |")]
    seen = {(cells[2].strip(), cells[3].strip()) for cells in rows}
    contenders = CONTENDERS if shutil.which("kubectl") else CONTENDERS[:2]
    expected = {(run, c) for run in ("steady", "apply", "release") for c in contenders}
    assert expected | {("steady", "floor")} == seen
    assert all(cells[-2].strip() == "ok" for cells in rows)  # each run did its job
    assert "node-holder --help" in done.stdout or "python -m reconcile --help" in done.stdout
    assert "Targets:" in done.stdout


def test_the_scale_benchmark_models_both_mechanisms_at_every_size() -> None:
    """The model alone (the measured rows take two minutes: `make bench`)."""
    done = run_python("benchmarks/bench_scale.py", "--model-only")
    assert done.returncode == 0, done.stdout + done.stderr
    table, _, over_runs = done.stdout.partition("Hold edges over runs")
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in table.splitlines()]
    found = {(row[0], row[1].split()[0]) for row in rows if row and row[0][:1].isdigit()}
    sizes = ("5,000", "50,000", "100,000")
    assert found == {(n, m) for n in sizes for m in ("annotation", "budget")}
    writes = {row[0]: row[2] for row in rows if row and row[1] == "annotation"}
    assert writes == {n: n for n in sizes}  # one write per node per hold edge
    # The sizes at which a hold start and end take more than one run (docs/performance.md): more
    # runs for more nodes, and an end (at half the rate) takes at least as many as a start.
    lines = [line.split("|")[1:3] for line in over_runs.splitlines() if line[2:3].isdigit()]
    sizes = [int(size.replace(",", "")) for size, _ in lines]
    starts, ends = zip(*(map(int, runs.split(" / ")) for _, runs in lines), strict=True)
    assert len(sizes) > 3 and sizes == sorted(sizes)
    assert list(starts) == sorted(starts) and list(ends) == sorted(ends)
    assert starts[0] == ends[0] == 1 and all(s <= e for s, e in zip(starts, ends, strict=True))
    assert ends[-1] > 1 and "One run covers a hold start on up to" in over_runs
