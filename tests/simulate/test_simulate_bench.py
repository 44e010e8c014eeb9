"""The simulate benchmark runs and prints its table (every day shape, 200 nodes, once, no
whole commands); no timing checks."""

from __future__ import annotations

import pytest

from tests.helpers import run_python

SHAPES = ["leavers", "trickle", "bursts", "pools", "batch"]


@pytest.mark.slow
def test_the_simulate_benchmark_prints_a_row_per_day_shape() -> None:
    done = run_python(
        "benchmarks/bench_simulate.py", "--sizes", "200", "--repeat", "1", "--no-targets"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].split() == [
        *("shape", "nodes", "load", "20m", "10m/max=30m", "20m/group", "20m/node"),
        *("20m/group/max=1h", "per", "config", "ratio"),
    ]
    rows = [line.split() for line in lines[3:]]
    assert [row[0] for row in rows] == SHAPES
    assert all(len(row) == 10 and float(row[-1]) > 0 for row in rows)  # a ratio for every shape
    assert [int(row[1]) for row in rows[:4]] == [200] * 4  # nodes (batch: generate_day's scale)
