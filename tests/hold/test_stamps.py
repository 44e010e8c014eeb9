"""The --max-hold stamps are the tool's alone, and time in reports never runs backwards.

A node created through an API server whose clock runs ahead must not start a stretch in
the future (ages and times in reports are never negative or in the future), and a stamp
the tool could not have written (a free period longer than one hold duration, a start in
the future, something that is not a time) is ignored, removed and reported. Every case
runs the real CLI against the API test server.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.clusters import CliResult, run_cli
from tests.kubeapi.apiserver import ApiServer

KEY = "karpenter.sh/do-not-disrupt"
MARKER = "node-holder.dev/owned-annotations"
STARTED = "node-holder.dev/hold-started"
FREE = "node-holder.dev/free-until"
OURS = {KEY: "true", MARKER: KEY}
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
CAP = ("--hold-duration", "20m", "--max-hold", "1h")


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def run(kubeconfig: Path, command: str, *args: str) -> CliResult:
    quiet = ("--no-events",) if command == "reconcile" else ()
    return run_cli(command, "--kubeconfig", str(kubeconfig), *quiet, *args)


def times_in(text: str) -> list[datetime]:
    found = re.findall(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", text)
    return [datetime.fromisoformat(t.replace("Z", "+00:00")) for t in found]


def test_a_node_created_ahead_of_the_servers_clock_is_capped_and_never_shown_in_the_future(
    api: ApiServer, kubeconfig: Path
) -> None:
    """3 hours of skew, --max-hold 1h: the stretch starts at the first run that sees the
    node, so the cap ends it an hour later; no report shows a negative age or a hold that
    ended in the future."""
    api.set_clock(T0)
    api.add_node("old", created=T0 - timedelta(hours=5), eks=False)
    api.add_node("skewed", created=T0 + timedelta(hours=3), eks=False)  # a fast server's clock
    held_at = []
    for minute in range(0, 91, 10):
        now = T0 + timedelta(minutes=minute)
        api.set_clock(now)
        result = run(kubeconfig, "reconcile", *CAP)
        status = run(kubeconfig, "status", *CAP, "--nodes", "--output", "json")
        assert result.code == status.code == 0, result.stderr + status.stderr
        if api.annotations("skewed").get(KEY) == "true":
            held_at.append(minute)
        # Never a negative age, never a time after now, in text or JSON.
        report = result.stdout + run(kubeconfig, "status", *CAP).stdout
        assert not re.search(r" -\d", report), report
        data = status.json
        rows = [json.loads(line) for line in status.lines[:-1]]  # --nodes: a line per node
        assert all(not row["age"].startswith("-") for row in rows), rows
        assert all(not (w["youngestAge"] or "").startswith("-") for w in data["windows"])
        assert data["youngestCreated"] is None or data["youngestCreated"] <= iso(now)
        for line in report.splitlines():
            if "ended" in line:
                assert all(t <= now for t in times_in(line.split("ended", 1)[1].split(";")[0]))
    # Held from the first run that saw it; the cap ended the stretch an hour later (at most
    # one run interval past it), then the window was free for one hold duration (20m).
    assert held_at[0] == 0
    first_free = next(m for m in range(0, 91, 10) if m not in held_at)
    assert first_free <= 60 + 10, held_at
    assert first_free + 10 not in held_at, held_at


# Each case: a stamp on a node, the words of its report, and what the node carries after.
FORGED = {
    "free-until a month ahead switches holding off": (
        {FREE: iso(T0 + timedelta(days=30))},
        f"{FREE}={iso(T0 + timedelta(days=30))} is later than now plus 20m",
    ),
    "hold-started in the future": (
        {**OURS, STARTED: iso(T0 + timedelta(hours=2))},
        f"{STARTED}={iso(T0 + timedelta(hours=2))} is in the future",
    ),
    "hold-started that is not a time": (
        {**OURS, STARTED: "yesterday"},
        f"{STARTED}='yesterday' is not a time node-holder writes",
    ),
}


@pytest.mark.parametrize("case", list(FORGED))
def test_a_stamp_the_tool_could_not_have_written_is_ignored_removed_and_reported(
    api: ApiServer, kubeconfig: Path, case: str
) -> None:
    stamp, words = FORGED[case]
    api.set_clock(T0)
    api.add_node("stamped", created=T0 - timedelta(hours=5), eks=False, annotations=stamp)
    api.add_node("young", created=T0 - timedelta(minutes=2), eks=False)

    dry = run(kubeconfig, "reconcile", *CAP, "--dry-run")
    status = run(kubeconfig, "status", *CAP)
    real = run(kubeconfig, "reconcile", *CAP, "--output", "json")

    assert dry.code == status.code == real.code == 0, real.stderr
    # The stamp changed nothing: the young node holds the cluster, from its own creation.
    expected = {**OURS, STARTED: iso(T0 - timedelta(minutes=2))}
    assert api.annotations("stamped") == expected
    assert api.annotations("young") == expected
    # Said in the dry run, in status, and in the real run's JSON line for that node.
    assert f"ignored {words}" in dry.stdout
    assert f"node/stamped: ignored {words}" in status.stdout
    (line,) = [json.loads(x) for x in real.lines[:-1] if '"stamped"' in x]
    assert line["ignored"] == [words] and line["result"] == "patched"
    assert real.json["summary"]["ignoredStamps"] == 1
    assert "held" in run(kubeconfig, "status", *CAP).lines[0]
