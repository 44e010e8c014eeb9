"""The benchmark runs end to end (quick mode: 200 nodes) and prints its table; no timing checks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONTENDERS = ("node-holder", "naive client", "kubectl annotate")


pytestmark = pytest.mark.slow


def test_quick_benchmark_prints_every_contender_in_every_run(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_runs.py", "--quick", "--workdir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split("|") for line in done.stdout.splitlines() if line.startswith("| 200 |")]
    seen = {(cells[2].strip(), cells[3].strip()) for cells in rows}
    contenders = CONTENDERS if shutil.which("kubectl") else CONTENDERS[:2]
    expected = {(run, c) for run in ("steady", "apply", "release") for c in contenders}
    assert expected | {("steady", "floor")} == seen
    assert all(cells[-2].strip() == "ok" for cells in rows)  # each run did its job
    assert "node-holder --help" in done.stdout or "python -m reconcile --help" in done.stdout
    assert "Targets:" in done.stdout
