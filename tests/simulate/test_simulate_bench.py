"""The simulate benchmark runs and prints its table (one row, once); no timing checks."""

from __future__ import annotations

import pytest

from tests.helpers import run_python


@pytest.mark.slow
def test_the_simulate_benchmark_prints_its_table() -> None:
    done = run_python("benchmarks/bench_simulate.py", "--repeat", "1", "--only", "bundled")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].split()[:4] == ["replay", "nodes", "checkout", "wall"]
    (row,) = [line for line in lines if line.startswith("bundled day, 5 configurations")]
    cells = row.split()
    assert cells[4:6] == ["105", "this"]  # nodes, checkout
    decided, skipped = (int(c.replace(",", "")) for c in cells[-2:])
    assert decided + skipped == 5 * 1440  # every run of every configuration, one way or the other
    assert "exit" not in done.stdout
