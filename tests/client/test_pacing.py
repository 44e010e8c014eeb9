"""Pacing is not failure: a run sends what fits its deadline at its rate and leaves
the rest to the next run by design, exit 0 with `continues next run: N nodes left (about M
runs)`; it exits 1 only when something failed, or when patches were due and none was done.

Counts only, from the API test server's state and request log, never a clock: a loaded machine
makes a run do less, and the next run finds exactly what the last one said it left.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path
from threading import Event

import pytest

from reconcile.cluster.apply import Outcome, apply_plan
from reconcile.cluster.pace import Backoff, Deadline, Pace, RateLimiter
from reconcile.cluster.read import read_nodes
from reconcile.rule.decide import decide
from reconcile.rule.settings import HoldSettings, RunSettings
from tests.client.test_retry import FakeClock, FakeStop
from tests.clusters import CliResult, run_cli
from tests.helpers import NODES, OURS, error_lines, kube_for
from tests.kubeapi.apiserver import ApiServer, Fault

#: A rate and a deadline that spread 5,000 nodes over two to four runs of 6 s each, with time
#: to list them on a loaded machine (where a run does less, never nothing).
FAST = ("--qps", "800", "--timeout", "6s", "--no-events", "--output", "json")


def reconcile(kubeconfig: Path, *args: str) -> CliResult:
    return run_cli("reconcile", "--kubeconfig", str(kubeconfig), *args)


def patches(api: ApiServer, since: int) -> int:
    """PATCH requests to nodes logged after the first `since`."""
    return len(api.writes()[since:])


@pytest.mark.parametrize("edge", ["hold start", "hold end"])
def test_5000_nodes_continue_over_runs_each_finding_what_the_last_one_left(
    api: ApiServer, kubeconfig: Path, edge: str
) -> None:
    """Each run exits 0 and announces N nodes left; the cluster then has exactly N nodes to
    patch, and the next run sends or leaves exactly N; no node is written twice; the runs
    taken are about those the first run announced (twice as many allowed: load)."""
    start = edge == "hold start"
    now = api.now()
    created = now - (timedelta(minutes=1) if start else timedelta(hours=3))
    names = api.add_nodes(5_000, created=created, eks=False, annotations=None if start else OURS)
    done = OURS if start else {}

    def undone() -> int:
        return sum(1 for n in names if api.annotations(n) != done)

    due, runs = 5_000, []
    while due and len(runs) < 20:
        before = len(api.writes())
        run = reconcile(kubeconfig, *FAST)
        runs.append(run)
        summary, continues = run.json["summary"], run.json["continues"]
        assert run.code == 0 and not error_lines(run.stderr), run.stderr
        assert summary["failed"] == 0 and summary["writes"] == patches(api, before)
        left = continues["nodesLeft"] if continues else 0
        assert summary["writes"] + left == due  # sent what it planned, left the rest
        assert summary["left"] == left == undone()  # what it announced is what is left
        assert run.json["stillHeld"] == (0 if start else left)  # a paced end says how many
        due = left

    assert due == 0 and len(runs) >= 2, [r.json["continues"] for r in runs]
    assert len(runs) - 1 <= 2 * runs[0].json["continues"]["runs"]
    assert runs[-1].json["continues"] is None
    assert set(Counter(r.path for r in api.writes() if r.stored).values()) == {1}


def test_a_run_that_starts_late_sends_fewer_writes_and_no_patch_it_cannot_finish(
    api: ApiServer, kubeconfig: Path
) -> None:
    """Two runs at the same rate and deadline over the same hold start; the second's node list
    is answered 3 s late (of 6 s): it sends fewer patches, and every patch it sent was answered
    (none cut by the deadline); it says what it left."""
    api.add_nodes(2_000, created=api.now() - timedelta(minutes=1), eks=False)
    args = ("--qps", "200", "--timeout", "6s", "--no-events", "--output", "json")

    on_time = reconcile(kubeconfig, *args)
    sent_on_time = patches(api, 0)
    api.inject(Fault(method="GET", path=NODES + "$", delay=3.0, times=1))
    late = reconcile(kubeconfig, *args)
    sent_late = patches(api, sent_on_time)

    assert on_time.code == late.code == 0, late.stderr
    assert 0 < sent_late < sent_on_time, (sent_late, sent_on_time)
    assert all(r.status == 200 and not r.hung_up for r in api.writes())
    left = 2_000 - sent_on_time - sent_late
    assert late.json["continues"]["nodesLeft"] == late.json["summary"]["left"] == left


@pytest.mark.parametrize(("request_timeout", "sent"), [(20, 31), (5, 36)])
def test_the_first_patch_that_cannot_start_before_the_margin_leaves_it_and_the_rest(
    api: ApiServer, kubeconfig: Path, request_timeout: float, sent: int
) -> None:
    """A hold start on 50 nodes, one worker, 1 write a second on a fake clock that only waits
    move, a 40.5 s deadline: the margin is a quarter of it (10.125 s; --request-timeout 20s) or
    --request-timeout (5s), so patches start at 0, 1, ..., 30 s (or 35 s). The first that cannot
    start before the margin is left, and so is every patch after it: the nodes left are the
    oldest, none of them was sent, and the counts add up."""
    now = api.now()
    names = api.add_nodes(50, created=lambda i: now - timedelta(minutes=1, seconds=i), eks=False)
    clock, asked = FakeClock(), []

    class Counted(RateLimiter):
        def acquire(self, deadline: Deadline, stop: Event, cost: float = 1, reserve: float = 0):
            asked.append(clock.now)
            super().acquire(deadline, stop, cost, reserve)

    limiter = Counted(1, burst=1, clock=clock)
    pace = Pace(1, limiter, Backoff(), Deadline(40.5, clock), FakeStop(clock), request_timeout)
    kube, hold = kube_for(kubeconfig, request_timeout=30), HoldSettings()
    listing = read_nodes(kube, hold, RunSettings(), pace, {})

    applied = apply_plan(decide(listing.nodes, listing.now, hold), kube, pace)

    outcomes = {r.node: r.outcome for r in applied.results}
    assert [outcomes[n] for n in names] == [Outcome.PATCHED] * sent + [Outcome.LEFT] * (50 - sent)
    assert [r.path.rsplit("/", 1)[1] for r in api.writes()] == names[:sent]  # youngest first
    assert (applied.writes, applied.left, applied.failed) == (sent, 50 - sent, ())
    assert clock.now == pytest.approx(sent - 1)  # no wait into the margin
    assert len(asked) == sent + 1  # the patches after the one left never asked for the rate


def test_the_text_and_the_event_say_what_was_done_and_what_continues_next_run(
    api: ApiServer, kubeconfig: Path
) -> None:
    """One line after the counts; the counts name the nodes left; the hold's Event counts the
    nodes patched, not those planned."""
    api.add_nodes(1_000, created=api.now() - timedelta(minutes=1), eks=False)

    run = reconcile(kubeconfig, "--qps", "100", "--timeout", "2s")

    sent = patches(api, 0)
    assert run.code == 0 and not error_lines(run.stderr), run.stderr
    runs = -(-(1_000 - sent) // sent)
    assert run.lines[-1] == f"continues next run: {1_000 - sent} nodes left (about {runs} runs)"
    assert f"{sent} added, 0 removed, {1_000 - sent} left, 0 unchanged" in run.lines[-2]
    (event,) = api.events
    assert event["reason"] == "HoldStarted"
    assert event["message"].endswith(f"; hold annotation added to {sent} node(s)")


def test_a_paced_hold_end_says_how_many_are_still_held_and_that_the_next_run_goes_on(
    api: ApiServer, kubeconfig: Path
) -> None:
    """The hold ended, but only some nodes lost it in this run: the line says `ending`, never
    `released`, with the count still held; the JSON says the same."""
    api.add_nodes(1_000, created=api.now() - timedelta(hours=3), eks=False, annotations=OURS)

    run = reconcile(kubeconfig, "--qps", "100", "--timeout", "2s", "--no-events")
    sent = patches(api, 0)
    as_json = reconcile(
        kubeconfig, "--qps", "100", "--timeout", "2s", "--no-events", "--output", "json"
    )
    again = patches(api, sent)

    assert run.code == as_json.code == 0 and not error_lines(run.stderr), run.stderr
    assert run.lines[-2].startswith("ending: youngest node "), run.lines[-2]
    assert (
        f"; {1_000 - sent} node(s) still held: the next run removes the hold from them; "
        f"1000 nodes: 0 added, {sent} removed, {1_000 - sent} left"
    ) in run.lines[-2]
    assert "released" not in run.stdout and run.lines[-1].startswith("continues next run: ")
    assert as_json.json["stillHeld"] == as_json.json["summary"]["left"] == 1_000 - sent - again
    assert as_json.json["windows"][0]["stillHeld"] == 1_000 - sent - again


def test_a_refused_run_says_what_failed_and_what_it_did_not_try_never_continues(
    api: ApiServer, kubeconfig: Path
) -> None:
    """Every patch refused (422, as a webhook or the schema refuses): exit 1, the error line
    counts the nodes not patched and those not tried, and no line says the run continues."""
    api.add_nodes(1_000, created=api.now() - timedelta(minutes=1), eks=False)
    api.inject(Fault(method="PATCH", status=422, times=None))

    run = reconcile(kubeconfig, "--qps", "100", "--timeout", "2s", "--no-events")

    assert run.code == 1
    (line,) = error_lines(run.stderr)
    tried = patches(api, 0)
    assert f"{tried} node(s) not patched: " in line, line
    # A patch refused is re-read before the next try: the nodes tried are those refused.
    assert f"; {1_000 - tried} node(s) not tried (the next run tries them)" in line, line
    assert "continues" not in run.stdout + run.stderr


def test_a_refusal_still_fails_the_run_that_leaves_nodes(api: ApiServer, kubeconfig: Path):
    """403 on PATCH: the run stops writing and exits 1 with the refusal, not with pacing."""
    api.add_nodes(1_000, created=api.now() - timedelta(minutes=1), eks=False)
    api.inject(Fault(method="PATCH", status=403, times=None))

    run = reconcile(kubeconfig, "--qps", "100", "--timeout", "2s", "--no-events")

    assert run.code == 1
    (line,) = error_lines(run.stderr)
    assert "403" in line or "forbidden" in line.lower(), line
    assert patches(api, 0) >= 1 and all(r.status == 403 for r in api.writes())
    assert "continues" not in run.stdout


def test_a_run_that_patches_nothing_fails(api: ApiServer, kubeconfig: Path) -> None:
    """The list answered with less time left than a write's answer needs: patches were due and
    none was sent, so the run exits 1 (every run like it would leave the holds as they are)."""
    api.add_nodes(20, created=api.now() - timedelta(minutes=1), eks=False)
    api.inject(Fault(method="GET", path=NODES + "$", delay=2.6, times=1))

    run = reconcile(kubeconfig, "--qps", "100", "--timeout", "3s", "--no-events")

    assert run.code == 1 and api.writes() == []
    (line,) = error_lines(run.stderr)
    assert "20 node(s) left at the run timeout and none patched in time" in line
    # A failed run says what failed, never pacing's "continues".
    assert "20 left" in run.lines[-1] and "continues" not in run.stdout


def test_the_uninstall_hook_s_release_fails_when_it_leaves_nodes(
    api: ApiServer, kubeconfig: Path
) -> None:
    """`release` paces like a run and leaves nodes to the next (exit 0); the uninstall hook's
    (`--suspend-cronjob`) has no next run after it: leaving nodes is a failure (exit 1), so
    `helm uninstall` does not report success with holds left."""
    names = api.add_nodes(
        1_000, created=api.now() - timedelta(minutes=1), eks=False, annotations=OURS
    )
    api.add_batch(
        "cronjobs",
        {
            "metadata": {"name": "node-holder", "namespace": "kube-system"},
            "spec": {"schedule": "* * * * *", "suspend": False, "jobTemplate": {"spec": {}}},
        },
    )
    args = ("--kubeconfig", str(kubeconfig), "--qps", "100", "--timeout", "2s", "--no-events")

    manual = run_cli("release", *args)
    sent = patches(api, 0)
    hook = run_cli("release", *args, "--suspend-cronjob", "kube-system/node-holder")
    sent_by_hook = patches(api, sent)

    # What happened and what comes next, never "released" while nodes are still held.
    assert manual.code == 0 and manual.lines[-1].startswith(
        f"{sent} removed, {1_000 - sent} still held: run release again (it continues where it "
        "stopped); "
    )
    assert "released" not in manual.stdout
    assert hook.code == 1 and "released" not in hook.stdout
    assert f"{1_000 - sent - sent_by_hook} still held: run release again;" in hook.lines[-1]
    (line,) = error_lines(hook.stderr)
    left = 1_000 - sent - sent_by_hook
    assert f"{left} node(s) left at the run timeout and no next run follows" in line
    assert sum(1 for n in names if api.annotations(n)) == left


@pytest.mark.parametrize("command", ["reconcile", "release"])
def test_a_paced_end_records_hold_ended_once_in_the_run_that_removes_the_last_of_it(
    api: ApiServer, kubeconfig: Path, command: str
) -> None:
    """A hold that is over (or released by hand) on 300 nodes, at a rate that removes it over
    two runs or more: the runs before the last record no Event and list none in their JSON;
    the last one records one HoldEnded, counting the nodes it removed."""
    names = api.add_nodes(300, created=api.now() - timedelta(days=1), eks=False, annotations=OURS)
    args = ("--kubeconfig", str(kubeconfig), "--qps", "100", "--timeout", "2s", "--output", "json")
    runs: list[CliResult] = []
    removed: list[int] = []  # nodes each run removed the hold from
    while any(api.annotations(n) for n in names) and len(runs) < 20:
        runs.append(run_cli(command, *args))
        assert runs[-1].code == 0, runs[-1].stderr
        removed.append(patches(api, sum(removed)))
    assert len(runs) >= 2 and not any(api.annotations(n) for n in names)
    assert [r.json["events"] for r in runs[:-1]] == [[]] * (len(runs) - 1)
    (event,) = api.events
    assert event["reason"] == "HoldEnded"
    assert event["message"].endswith(f"; hold annotation removed from {removed[-1]} node(s)")
    assert [e["reason"] for e in runs[-1].json["events"]] == ["HoldEnded"]


def test_an_end_with_a_failed_removal_records_hold_ended_in_the_run_that_finishes_it(
    api: ApiServer, kubeconfig: Path
) -> None:
    """One node's removal is refused: that run fails and records no HoldEnded; the next run
    removes the last of the hold and records it, counting that one node."""
    names = api.add_nodes(5, created=api.now() - timedelta(days=1), eks=False, annotations=OURS)
    api.inject(Fault(method="PATCH", path=f"{NODES}/{names[2]}$", status=400, times=None))
    failed = run_cli("reconcile", "--kubeconfig", str(kubeconfig), "--output", "json")
    assert failed.code == 1 and failed.json["events"] == [] and api.events == []
    assert [n for n in names if api.annotations(n)] == [names[2]]
    api.clear_faults()
    ended = run_cli("reconcile", "--kubeconfig", str(kubeconfig), "--output", "json")
    assert ended.code == 0 and not any(api.annotations(n) for n in names)
    (event,) = api.events
    assert event["reason"] == "HoldEnded" and [e["reason"] for e in ended.json["events"]] == [
        "HoldEnded"
    ]
    assert event["message"].endswith("; hold annotation removed from 1 node(s)")


def test_a_paced_release_s_json_counts_the_nodes_still_held(
    api: ApiServer, kubeconfig: Path
) -> None:
    """`release --output json` that leaves nodes: `stillHeld` is the count the cluster still
    holds, as the text says."""
    names = api.add_nodes(
        1_000, created=api.now() - timedelta(minutes=1), eks=False, annotations=OURS
    )

    run = run_cli(
        "release",
        "--kubeconfig",
        str(kubeconfig),
        "--qps",
        "100",
        "--timeout",
        "2s",
        "--no-events",
        "--output",
        "json",
    )

    held = sum(1 for n in names if api.annotations(n))
    assert run.code == 0 and held > 0, run.stderr
    assert run.json["stillHeld"] == run.json["summary"]["left"] == held


def test_a_paced_hold_end_in_node_scope_counts_the_nodes_still_held(
    api: ApiServer, kubeconfig: Path
) -> None:
    """Node scope lists the held nodes only: the last line counts those whose hold ended and
    that still carry it."""
    names = api.add_nodes(
        1_000, created=api.now() - timedelta(hours=3), eks=False, annotations=OURS
    )

    run = reconcile(kubeconfig, "--hold-scope", "node", "--qps", "100", "--timeout", "2s")

    held = sum(1 for n in names if api.annotations(n))
    assert run.code == 0 and held > 0, run.stderr
    assert run.lines[-2].startswith(
        f"0 of 1000 nodes held (node scope, {held} still held until the next run); "
    ), run.lines[-2]
