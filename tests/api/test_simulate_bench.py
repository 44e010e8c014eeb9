"""The simulate benchmark runs and prints its table (one row, once); no timing checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_simulate_benchmark_prints_its_table() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_simulate.py", "--repeat", "1", "--only", "bundled"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].split()[:3] == ["replay", "checkout", "wall"]
    (row,) = [line for line in lines if line.startswith("bundled day, 5 configurations")]
    assert "new (in memory)" in row
    assert "exit" not in done.stdout
