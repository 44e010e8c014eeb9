"""Bounds: deadlines and signals end a run whatever the network does; memory follows the list
page size in bytes, not the cluster; a hold too big for one run converges over the next runs.

A proxy between the tool and the API server may send an answer a byte at a time: every
socket read is quick, so a per-read timeout never fires. These runs are real processes
against the API test server. No clock is read here: the server drips an answer that would
take an hour and counts the bytes that went out before the client hung up, so a deadline or
a signal shows as a cut answer, a few seconds' worth of bytes, whatever the machine's load.
"""

from __future__ import annotations

import signal
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from reconcile.cli.report import event_message
from reconcile.cluster.apply import NodeResult, Outcome, write_order
from reconcile.cluster.read import FIRST_PAGE, PAGE_BYTES
from reconcile.rule.settings import HoldSettings, RunSettings
from reconcile.run import run_once
from tests.clusters import CliResult, run_cli
from tests.helpers import (
    NODES,
    OURS,
    assert_one_clear_line,
    error_lines,
    kube_for,
    old,
    spawn,
    wait_until,
    young,
)
from tests.kubeapi.apiserver import ApiServer, Fault, RequestInfo, RequestRecord

NAMES = [f"n{i:02}" for i in range(6)]
DRIP = (1, 0.5)  # one byte every half second: an answer of a few KB takes an hour
#: The bytes a drip sends in 10 s: more than the 3 s --timeout or the 1.5 s grace after a
#: signal let through, with room for a busy machine; far fewer than 28 s (the bug) send.
FEW_SECONDS = 20 * DRIP[0]


def dripped_now(api: ApiServer, verb: str) -> list[RequestRecord]:
    """The requests whose answers the server drips (the node path's), so far."""
    return [r for r in api.requests if r.method == verb and r.path.startswith(NODES)]


def dripped(api: ApiServer, verb: str) -> list[RequestRecord]:
    """The requests whose answers were dripped, once the server has seen each client go."""
    answers = dripped_now(api, verb)
    wait_until(lambda: all(r.hung_up for r in answers))  # it looks every 50 ms
    return answers


@pytest.mark.parametrize("verb", ["GET", "PATCH"])
def test_an_answer_that_trickles_in_never_outlives_the_timeout(
    api: ApiServer, kubeconfig: Path, verb: str
) -> None:
    """Before: 28 s on a list, 42 s on patches with --timeout 5s. Now the client hangs up on
    every dripping answer after a few seconds' worth of bytes, not the hour's."""
    old(api, *NAMES[:-1])
    young(api, NAMES[-1])
    api.inject(Fault(method=verb, path=NODES, drip=DRIP, times=None))

    proc = spawn(kubeconfig, "--timeout", "3s")
    _, stderr = proc.communicate(timeout=60)

    assert proc.returncode == 1
    answers = dripped(api, verb)
    assert answers and all(0 < r.bytes_sent < FEW_SECONDS for r in answers), answers
    line = assert_one_clear_line(stderr)
    if verb == "GET":
        assert "cannot list nodes" in line and "nothing was changed" in line
        assert api.writes() == []
    else:
        assert "node(s) not patched" in line and "the next run retries them" in line


@pytest.mark.parametrize("verb", ["GET", "PATCH"])
def test_sigterm_stops_a_run_within_seconds_while_an_answer_trickles_in(
    api: ApiServer, kubeconfig: Path, verb: str
) -> None:
    """Ten minutes for the run and for each request: only the signal can end the run within
    the test's patience. Requests in flight get a grace, then they are cut: a few seconds'
    worth of bytes after the signal."""
    old(api, *NAMES[:-1])
    young(api, NAMES[-1])
    api.inject(Fault(method=verb, path=NODES, drip=DRIP, times=None))

    proc = spawn(kubeconfig, "--timeout", "10m", "--request-timeout", "10m")
    try:
        # A dripping answer of the node path has begun (the NodePool list comes first).
        wait_until(lambda: any(r.bytes_sent for r in dripped_now(api, verb)))
        at_signal = {id(r): r.bytes_sent for r in api.requests}
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()

    assert proc.returncode == 1
    answers = dripped(api, verb)
    after = [r.bytes_sent - at_signal.get(id(r), 0) for r in answers]
    assert answers and max(after) < FEW_SECONDS, after
    (line,) = error_lines(stderr)
    assert "stopped by a signal" in line
    assert "Traceback" not in stderr
    if verb == "GET":
        assert api.writes() == []


def test_a_patch_whose_answer_is_lost_is_not_written_twice(
    api: ApiServer, kubeconfig: Path
) -> None:
    """The patch landed but its answer was cut: the retry's precondition fails (409), the
    node is read again and found done."""
    old(api, *NAMES[:-1])
    young(api, NAMES[-1])
    api.inject(Fault(method="PATCH", path=f"{NODES}/n00$", cut="reset"))

    proc = spawn(kubeconfig)
    _, stderr = proc.communicate(timeout=60)

    assert proc.returncode == 0, stderr
    assert all(api.annotations(n) == OURS for n in NAMES)
    stored = [r for r in api.writes() if r.path == f"{NODES}/n00" and r.stored]
    assert len(stored) == 1


def test_each_result_is_reported_as_its_patch_lands(api: ApiServer, kubeconfig: Path) -> None:
    old(api, *NAMES[:-1])
    young(api, NAMES[-1])
    others_reported = threading.Event()
    released_by_report: list[bool] = []

    def hold_n00(req: RequestInfo) -> None:
        """n00's patch lands only once another node's result has been reported."""
        if req.method == "PATCH" and req.path == f"{NODES}/n00":
            released_by_report.append(others_reported.wait(20))

    api.on_request(hold_n00)
    seen: list[str] = []

    def on_result(result: NodeResult) -> None:
        seen.append(result.node)
        if result.node != "n00":
            others_reported.set()

    hold = HoldSettings(hold_duration=timedelta(minutes=20))
    run = RunSettings(workers=2, events=False)
    result = run_once(kube_for(kubeconfig), hold, run, describe=event_message, on_result=on_result)

    assert released_by_report == [True]  # reported while apply_plan was still running
    assert seen[0] != "n00" and sorted(seen) == NAMES  # completion order, once per node
    assert result.applied is not None
    assert [r.node for r in result.applied.results] == [  # the result keeps write order
        p.node for p in write_order(result.plan)
    ]
    assert {r.outcome for r in result.applied.results} == {Outcome.PATCHED}


# --- memory: bytes held at once, and work spread over runs -------------------------------


def test_list_pages_are_sized_to_about_4_mb_whatever_the_annotations(
    api: ApiServer, kubeconfig: Path
) -> None:
    """2,000 nodes with 200 KB annotations at page size 500 peaked at 424 MB; now a page
    holds about PAGE_BYTES, judged by the bytes per node of the page before."""
    blob = {"example.com/blob": "x" * 200_000}
    old(api, *(f"n{i:03}" for i in range(59)), annotations=blob)
    young(api, "n059", annotations=blob)

    result = run_cli("reconcile", "--kubeconfig", str(kubeconfig), "--page-size", "500")

    assert result.code == 0, result.stderr
    limits = [int(r.query["limit"]) for r in api.requests if r.path == "/api/v1/nodes"]
    assert limits[0] == FIRST_PAGE
    assert all(limit * 200_000 <= PAGE_BYTES for limit in limits[1:])  # not 500
    assert len(limits) >= 60 * 200_000 // PAGE_BYTES
    assert all(api.annotations(f"n{i:03}") == {**blob, **OURS} for i in range(60))


def test_a_hold_too_big_for_one_run_converges_over_the_next_runs_without_redoing_work(
    api: ApiServer, kubeconfig: Path
) -> None:
    """Patches that do not fit the deadline are left for the next run by design (exit 0, no
    patch cut by the deadline); the next run finds exactly the nodes the last one said it left,
    and sends only those."""
    names = [f"n{i:02}" for i in range(40)]
    old(api, *names[:-1])
    young(api, names[-1])
    api.write_latency = 0.1  # a slow API server: 2 workers patch about 20 nodes a second

    def run() -> CliResult:
        args = ("--timeout", "2s", "--workers", "2", "--no-events")
        return run_cli("reconcile", "--kubeconfig", str(kubeconfig), *args)

    runs = [run()]
    while runs[-1].lines[-1].startswith("continues next run: ") and len(runs) < 8:
        unpatched = [n for n in names if api.annotations(n) != OURS]
        assert runs[-1].code == 0 and not error_lines(runs[-1].stderr), runs[-1].stderr
        assert runs[-1].lines[-1].startswith(f"continues next run: {len(unpatched)} nodes left")
        runs.append(run())

    assert runs[-1].code == 0 and not error_lines(runs[-1].stderr), runs[-1].stderr
    assert 2 <= len(runs) <= 7
    assert all(api.annotations(n) == OURS for n in names)
    assert all(r.status == 200 and not r.hung_up for r in api.writes())  # none cut
    stored = Counter(r.path for r in api.writes() if r.stored)
    assert set(stored.values()) == {1}  # no node was written twice across the runs


LINE_LIMIT = 16 * 1024  # container runtimes split longer lines, log pipelines drop them


@pytest.mark.parametrize("output", ["text", "json"])
def test_no_line_is_longer_than_16_kib_at_1500_nodes(
    api: ApiServer, kubeconfig: Path, output: str
) -> None:
    """A dry run (every node its own held window), a hold start, a release whose every patch
    fails with a long message, and a release: per-node detail is in the per-node lines, the
    last line sums up, messages are cut."""
    now = api.now()
    api.add_nodes(1_500, created=lambda i: now - timedelta(minutes=5, seconds=i % 60), eks=False)
    long = "metadata.annotations: Invalid value: " + "x" * 20_000  # a server's long message
    fails = Fault(method="PATCH", path=f"^{NODES}/", status=422, message=long, times=None)
    formats = ("--kubeconfig", str(kubeconfig), "--output", output, "--log-format", output)
    formats += ("--qps", "0")  # lines, not rates: no need to spread 1,500 writes over seconds

    runs = {"dry run": run_cli("reconcile", "--dry-run", "--hold-scope", "node", *formats)}
    runs["hold start"] = run_cli("reconcile", *formats)
    # The `helm test` pod's command (`status`, text: `--output json` is one document, for
    # scripts) while every node is held.
    status = run_cli("status", "--kubeconfig", str(kubeconfig), "--log-format", output)
    assert status.code == 0 and "1500" in status.stdout, status.stderr
    status_lines = status.stdout.splitlines() + status.stderr.splitlines()
    assert max(len(line.encode()) for line in status_lines) <= LINE_LIMIT
    api.inject(fails)
    runs["failing release"] = run_cli("release", *formats)
    api.clear_faults()
    runs["release"] = run_cli("release", *formats)

    for name, result in runs.items():
        assert result.code == (1 if name == "failing release" else 0), (name, result.stderr)
        lines = result.stdout.splitlines() + result.stderr.splitlines()
        longest = max(len(line.encode()) for line in lines)
        assert longest <= LINE_LIMIT, (name, longest)
        assert len(result.lines) >= 1_500, name  # a line per node, and the summing up
    assert all(api.annotations(n) == {} for n in api.node_names())
    if output == "json":
        dry, failed = runs["dry run"].json, runs["failing release"].json
        assert dry["windows"] and len(dry["windows"]) + dry["windowsNotListed"] == 1_500
        assert dry["summary"]["added"] == 1_500
        assert failed["errors"] and len(failed["errors"]) + failed["errorsNotListed"] == 1_500
        assert failed["summary"]["failed"] == 1_500
        assert runs["hold start"].json["summary"]["added"] == 1_500
    assert "1500 node(s) not patched" in runs["failing release"].stderr.splitlines()[-1]
