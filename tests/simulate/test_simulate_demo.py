"""`make demo`: both halves, as the Makefile runs them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import run_python

ROOT = Path(__file__).resolve().parents[2]


def test_the_makefile_demo_runs_the_comparison_then_the_real_runs() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\ndemo: ", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert [line.strip() for line in recipe] == [
        "$(PY) -m reconcile simulate $(DEMO_ARGS)",
        "$(PY) -m tests.kubeapi.demo",
    ]


@pytest.mark.slow
def test_the_demo_plays_a_scale_up_through_real_reconcile_runs() -> None:
    done = run_python("-m", "tests.kubeapi.demo")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    steps = [
        "-> no young node: nothing held, nothing written",
        "-> hold started on every node but the pinned one",
        "-> hold extended: one write, for the new node",
        "-> still held (batch-1 is 23m old, but batch-2 is not 20m yet)",
        "-> released; ip-10-0-0-1.ec2.internal still carries the hand-set annotation",
    ]
    positions = [out.index(step) for step in steps]
    assert positions == sorted(positions)
    assert re.search(r"event HoldStarted on node/batch-1: .* added to 3 node\(s\)", out)
    assert re.search(r"event HoldExtended on node/batch-2: .* added to 1 node\(s\)", out)
    assert "event HoldEnded on node/batch-2" in out
    assert re.search(r"^  ip-10-0-0-1\.ec2\.internal\s+\S+\s+cluster\s+held by others", out, re.M)
    events = out.split("Events recorded on the nodes")[1].splitlines()[1:4]
    assert [line.split()[0] for line in events] == ["HoldStarted", "HoldExtended", "HoldEnded"]
    assert out.rstrip().endswith("API test server stopped.")
