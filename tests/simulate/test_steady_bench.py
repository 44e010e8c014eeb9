"""The steady-run benchmark runs and prints its table (200 nodes, once): both floors and
node-holder at each size, every run exited 0; no timing checks."""

from __future__ import annotations

import pytest

from tests.helpers import run_python

RUNS = ["floor: nodes", "floor: NodePools + nodes", "node-holder"]


@pytest.mark.slow
def test_the_steady_benchmark_prints_both_floors_and_node_holder_at_each_size() -> None:
    done = run_python("benchmarks/bench_steady.py", "--sizes", "200,300", "--repeat", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [
        [cell.strip() for cell in line.split("|")[1:-1]]
        for line in done.stdout.splitlines()
        if line.startswith("| ") and line[2].isdigit()
    ]
    assert [(row[0], row[1]) for row in rows] == [(n, run) for n in ("200", "300") for run in RUNS]
    assert all(row[-1] == "0" for row in rows), rows  # every run's exit code
    assert all(row[-2] == "1.00x / 1.00x" for row in rows if row[1] == RUNS[1])  # the baseline
