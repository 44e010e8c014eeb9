"""Crashes. A real `node-holder reconcile` process against the API test
server, killed (SIGKILL) or stopped (SIGTERM) while its patches are in flight.

The server's request hook holds patches on the server side until the test has
delivered the signal: no sleeps decide what happens first. No clock is read either: a run
that must stop promptly gets a --timeout beyond the test's patience, so only the signal can
end it in time, and answers the server holds back until the client hangs up (`Fault.hold`)
show in the request log which side gave up first.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest

from tests.clusters import run_cli
from tests.helpers import (
    KEY,
    MARKER,
    NODES,
    OURS,
    Arrivals,
    assert_one_clear_line,
    error_lines,
    old,
    spawn,
    wait_until,
    young,
)
from tests.kubeapi.apiserver import ApiServer, Fault, RequestInfo

HOLD = timedelta(minutes=20)
ACTIVE_DEADLINE = 55.0  # the CronJob's activeDeadlineSeconds (cronjob/)
BEYOND = "10m"  # a --timeout the test's patience ends long before
RETRY_AFTER = 30  # seconds, the most the client heeds (Backoff.retry_after_cap)
NAMES = [f"n{i:02}" for i in range(40)]


@dataclass
class PatchGate:
    """Lets the first `open_for` PATCHes through; later ones wait at the server until `release`.

    Records, for every PATCH, whether it arrived after `signalled` was set.
    """

    open_for: int
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    signalled: bool = False
    arrivals: list[tuple[str, bool]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, req: RequestInfo) -> None:
        if req.method != "PATCH":
            return
        with self.lock:
            self.arrivals.append((req.path.rsplit("/", 1)[1], self.signalled))
            count = len(self.arrivals)
        if count > self.open_for:
            self.reached.set()
            assert self.release.wait(30), "the test never released the gate"


def state(api: ApiServer, names: list[str]) -> dict[str, dict[str, str]]:
    return {n: api.annotations(n) for n in names}


def assert_each_node_whole(api: ApiServer, allowed: tuple[dict[str, str], ...]) -> None:
    """Every node is untouched or fully changed: never a marker without its annotation."""
    for name, found in state(api, NAMES).items():
        assert found in allowed, (name, found)
        assert (KEY in found) == (MARKER in found), (name, found)


@pytest.mark.parametrize("phase", ["hold", "release"])
def test_a_run_killed_mid_way_leaves_every_node_whole_and_the_next_run_converges(
    api: ApiServer, kubeconfig: Path, phase: str
) -> None:
    old(api, *NAMES[:-1])
    young(api, NAMES[-1])
    if phase == "release":  # the hold is in place everywhere; now it ends
        assert run_cli("reconcile", "--kubeconfig", str(kubeconfig)).code == 0
        api.advance_clock(HOLD)
    before, after = ({}, OURS) if phase == "hold" else (OURS, {})
    api.reset_log()
    arrivals = Arrivals(api)
    gate = PatchGate(open_for=12)
    api.on_request(gate)

    proc = spawn(kubeconfig, "--workers", "4")
    try:
        assert gate.reached.wait(30), proc.communicate()
        proc.kill()  # SIGKILL: no handler, no cleanup
        proc.communicate(timeout=30)
    finally:
        gate.release.set()
    assert proc.returncode == -signal.SIGKILL

    assert_each_node_whole(api, (before, after))
    arrivals.quiesce()  # the patches the dead process had sent are answered now
    assert_each_node_whole(api, (before, after))
    done = {n for n, a in state(api, NAMES).items() if a == after}
    assert 12 <= len(done) < len(NAMES)  # killed part-way, after the first twelve

    api.remove_hook(gate)
    api.reset_log()
    result = run_cli("reconcile", "--kubeconfig", str(kubeconfig))
    assert result.code == 0, result.stderr
    assert state(api, NAMES) == dict.fromkeys(NAMES, after)
    # The next run writes exactly the nodes the killed one did not get to, once each.
    written = sorted(r.path.rsplit("/", 1)[1] for r in api.writes())
    assert written == sorted(set(NAMES) - done)
    assert {r.status for r in api.writes()} == {200}


def read_lines(stream: subprocess.Popen, into: queue.Queue[str]) -> threading.Thread:
    def pump() -> None:
        assert stream.stderr is not None
        for line in stream.stderr:
            into.put(line)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def wait_for_line(lines: queue.Queue[str], seen: list[str], text: str) -> None:
    while True:
        line = lines.get(timeout=30)
        seen.append(line)
        if text in line:
            return


def test_sigterm_lets_patches_in_flight_finish_and_starts_no_new_ones(
    api: ApiServer, kubeconfig: Path
) -> None:
    """Promptly: the run's --timeout is beyond activeDeadlineSeconds, the test's patience, so
    a run that lingered after its patches in flight (until its deadline) would fail here."""
    old(api, *NAMES[:-1])
    young(api, NAMES[-1])
    gate = PatchGate(open_for=0)  # every patch waits at the server until the signal is in
    api.on_request(gate)
    workers = 4

    proc = spawn(kubeconfig, "--workers", str(workers), "--timeout", BEYOND)
    lines: queue.Queue[str] = queue.Queue()
    pump = read_lines(proc, lines)
    seen: list[str] = []
    try:
        wait_until(lambda: len(gate.arrivals) >= workers)  # they wait at the gate
        proc.send_signal(signal.SIGTERM)
        wait_for_line(lines, seen, "received SIGTERM")  # the run has its stop flag now
        with gate.lock:
            gate.signalled = True
    finally:
        gate.release.set()
    proc.wait(timeout=ACTIVE_DEADLINE)  # not communicate(): the pump owns stderr
    assert proc.stdout is not None
    stdout = proc.stdout.read()
    pump.join(timeout=10)
    while not lines.empty():
        seen.append(lines.get())

    assert proc.returncode == 1
    assert [late for _, late in gate.arrivals] == [False] * workers  # nothing new after it
    in_flight = sorted(name for name, _ in gate.arrivals)
    # The patches in flight finished and were stored; every other node is untouched.
    assert [r.status for r in api.writes()] == [200] * workers
    assert {n: a for n, a in state(api, NAMES).items() if a} == dict.fromkeys(in_flight, OURS)
    (error,) = error_lines("".join(seen))
    assert error.startswith(
        f"node-holder: error: {len(NAMES) - workers} node(s) not patched (stopped by a signal)"
    )
    assert "Traceback" not in "".join(seen)
    assert f"node/{in_flight[0]}: added {KEY}" in stdout


def test_sigterm_during_a_long_retry_after_stops_at_once_and_changes_nothing(
    api: ApiServer, kubeconfig: Path
) -> None:
    """Not the 30 s the server asked for: the test's patience is half of them, and a run
    that waited them out would list again and hold the node."""
    young(api, "n")
    throttled = api.inject(
        Fault(method="GET", path=NODES + "$", status=429, retry_after=RETRY_AFTER)
    )
    arrivals = Arrivals(api)

    proc = spawn(kubeconfig, "--timeout", BEYOND)
    try:
        wait_until(lambda: throttled.spent)  # the first list was answered 429, Retry-After 30s
        arrivals.quiesce()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=RETRY_AFTER / 2)
    finally:
        if proc.poll() is None:
            proc.kill()

    assert proc.returncode == 1
    assert error_lines(stderr) == [
        "node-holder: error: stopped by a signal while listing nodes; nothing was changed"
    ]
    assert [(r.method, r.status) for r in api.requests if r.path == NODES] == [("GET", 429)]
    assert api.writes() == []
    assert api.annotations("n") == {}


def test_a_run_never_outlives_its_timeout_under_persistent_failures(
    api: ApiServer, kubeconfig: Path
) -> None:
    """A slow list, a 429 with a 30 s Retry-After and patches the server never answers: the
    run gives up on each at its deadline. The server holds each patch for 30 s or until the
    client hangs up; every one was hung up on, none retried. (That a request's timeout shrinks
    to the time left is shown on a fake clock: test_retry.py.)"""
    old(api, *NAMES[:-1])
    young(api, NAMES[-1])
    # A slow list: two pages (a first page of FIRST_PAGE nodes, then the rest), 1 s each.
    api.inject(Fault(method="GET", path=NODES + "$", delay=1.0, times=None))
    api.inject(Fault(method="PATCH", path="n00$", status=429, retry_after=30, times=None))
    api.inject(Fault(method="PATCH", hold=30, status=503, times=None))  # hangs, then 503

    proc = spawn(kubeconfig, "--timeout", "4s", "--workers", "4")
    _, stderr = proc.communicate(timeout=ACTIVE_DEADLINE)

    assert proc.returncode == 1
    line = assert_one_clear_line(stderr)
    assert "node(s) not patched (run timeout reached)" in line
    assert all(a == {} for a in state(api, NAMES).values())
    patches = api.writes()
    assert [r.status for r in patches if r.path.endswith("/n00")] in ([], [429])  # not retried
    held = [r for r in patches if not r.path.endswith("/n00")]
    wait_until(lambda: all(r.hung_up for r in held))  # the server looks every 50 ms
    assert held and len({r.path for r in held}) == len(held)  # each cut once, none retried


def test_a_slow_paged_list_never_outlives_the_timeout(api: ApiServer, kubeconfig: Path) -> None:
    """The second page is asked for 2 s in, with 1 s left: the client hangs up on it (the
    server would hold it 30 s) and asks for nothing more."""
    old(api, *NAMES)
    api.inject(Fault(method="GET", path=NODES + "$", delay=2.0, times=1))  # the first page
    api.inject(Fault(method="GET", path=NODES + "$", hold=30, times=None))  # the rest hang

    proc = spawn(kubeconfig, "--timeout", "3s", "--page-size", "10")
    _, stderr = proc.communicate(timeout=ACTIVE_DEADLINE)

    assert proc.returncode == 1
    line = assert_one_clear_line(stderr)
    assert "cannot list nodes" in line and "nothing was changed" in line
    assert api.writes() == []
    pages = [r for r in api.requests if r.path == NODES]
    wait_until(lambda: pages[-1].hung_up)  # the server looks every 50 ms
    assert [(r.status, r.hung_up) for r in pages] == [(200, False), (0, True)]


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_killed_run_leaves_in_its_log_the_patches_it_did_send(
    api: ApiServer, kubeconfig: Path, output: str
) -> None:
    """Each node's line is printed as its patch lands, not at the end: an OOM kill or
    activeDeadlineSeconds after the first patch still leaves that patch in the log."""
    young(api, "a")
    old(api, "b")
    api.inject(Fault(method="PATCH", path=r"/nodes/b$", delay=60, times=None))
    patching_b = threading.Event()
    api.on_request(
        lambda req: patching_b.set() if req.method == "PATCH" and req.path.endswith("/b") else None
    )
    proc = spawn(kubeconfig, "--workers", "1", "--timeout", "50s", "--output", output)
    try:
        wait_until(lambda: api.annotations("a").get(KEY) == "true", timeout=30)
        wait_until(patching_b.is_set, timeout=30)  # a's patch is done: b's is on its way
    finally:
        proc.kill()  # SIGKILL: no handler runs, nothing more is printed
    out, _ = proc.communicate(timeout=10)
    lines = out.splitlines()
    assert lines, "the landed patch was printed before the kill"
    if output == "text":
        assert lines == [f"node/a: added {KEY}"]
    else:
        (entry,) = (json.loads(line) for line in lines)
        assert entry["node"] == "a" and entry["result"] == "patched"
