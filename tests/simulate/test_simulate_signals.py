"""Ctrl-C during a long replay: exit 130 before the configuration in progress finishes,
nothing left running. Shown by what the replay says on stderr, not by a clock: the next
configuration takes many seconds, so a replay that ran on after the signal would say so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2024, 5, 14, tzinfo=UTC)
NODE_SCOPE = ("--hold-scope", "node", "--max-hold", "1h", "--compare", "10m,40m")


def big_timeline(path: Path) -> None:
    """2,000 old nodes and a new one every 30 seconds for a week, each its own hold window:
    several seconds per configuration."""
    old = [{"name": f"old-{i}", "created": "2024-05-01T00:00:00Z"} for i in range(2000)]
    new = [
        {
            "name": f"new-{i}",
            "created": (T0 + timedelta(seconds=30 * i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        for i in range(2 * 60 * 24 * 7)
    ]
    path.write_text(json.dumps({"start": "2024-05-14T00:00:00Z", "nodes": old + new}))


@pytest.mark.slow
def test_ctrl_c_stops_a_long_replay_mid_configuration_with_exit_130(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    big_timeline(path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconcile", "simulate", str(path), *NODE_SCOPE],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: anything it started is found below
    )
    try:
        # The first configuration's line: the second one is mid-replay now.
        first = proc.stderr.readline()  # type: ignore[union-attr]
        assert first == "simulate: 20m/node/max=1h done (1 of 3)\n", first
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=300)  # a hang guard only
        rest = proc.stderr.read()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 130, rest
    assert "done (2 of 3)" not in rest and "done (3 of 3)" not in rest, rest
    assert rest.rstrip().splitlines()[-1] == "node-holder: interrupted"
    assert "Traceback" not in rest
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # no process of its group is left
