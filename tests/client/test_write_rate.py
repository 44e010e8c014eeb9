"""Node writes a large control plane tolerates (every patched Node goes to every watcher): the
default rate, the youngest nodes first, a hold's end at half the rate, backing off on 429 and on
slow answers, and a warning when one hold start or end is too large.

Rates come from the API test server's request log. Every assertion is an upper bound: a busy
machine makes a run slower, never faster. A run cannot send a patch before it has listed
every node, so the time a run's patches had is counted from its last list request's arrival
to its last patch's; in that time a token bucket lets through at most its burst (--workers)
plus the rate times the seconds.
"""

from __future__ import annotations

import itertools
import json
import random
import signal
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from reconcile.cluster.pace import RECOVERY
from reconcile.rule.settings import RunSettings
from tests.clusters import run_cli
from tests.helpers import NODES, OURS, error_lines, spawn
from tests.kubeapi.apiserver import ApiServer, Fault, RequestInfo, RequestRecord

WORKERS = 8  # --workers, and the token bucket's burst
QPS = RunSettings().qps  # --qps: 200 writes a second
STOP_AT = 600  # the patch at which the server stops a long run: 3 s at the default rate


def patches_and_seconds(api: ApiServer) -> tuple[list[RequestRecord], float]:
    """Every PATCH request of the run (429s too: they load the server), and the seconds its
    patches had: from the arrival of its last list request to that of its last PATCH."""
    log = api.requests
    listed = max(r.started for r in log if r.method == "GET" and r.path == NODES)
    patches = [r for r in log if r.method == "PATCH"]
    assert patches, "the run sent no patch"
    return patches, max(r.started for r in patches) - listed


def reconcile(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    """Exit code, stderr, and the last line of stdout."""
    result = run_cli("reconcile", "--kubeconfig", str(kubeconfig), "--no-events", *args)
    return result.code, result.stderr, result.lines[-1]


def left_to_next_run(line: str, patches: list[RequestRecord], nodes: int) -> bool:
    """The run's last line leaves to the next run the nodes it did not patch (pacing is not
    failure: test_pacing.py)."""
    return line.startswith(f"continues next run: {nodes - len(patches)} nodes left (about ")


@pytest.mark.slow
def test_a_hold_start_on_15000_nodes_patches_the_youngest_first_at_the_default_rate(
    api: ApiServer, kubeconfig: Path
) -> None:
    """The default 200 patches a second; the youngest node first, each patch at
    most WORKERS - 1 places later than its rank (the other workers' patches in flight). The
    server ends the run with SIGTERM at its STOP_AT-th patch, however long the list took: the
    whole hold would take 75 s at that rate."""
    ages = list(range(15_000))
    random.Random(24).shuffle(ages)  # the list's order is not the age order
    now = api.now()
    names = api.add_nodes(
        15_000, created=lambda i: now - timedelta(minutes=1, seconds=ages[i]), eks=False
    )
    rank = dict(zip(names, ages, strict=True))  # 0: the youngest
    run: list[subprocess.Popen[str]] = []
    patches = itertools.count(1)

    def stop_at(req: RequestInfo) -> None:
        if req.method == "PATCH" and next(patches) == STOP_AT:
            run[0].send_signal(signal.SIGTERM)

    api.on_request(stop_at)
    run.append(spawn(kubeconfig, "--no-events", "--timeout", "10m", "--output", "json"))
    _, stderr = run[0].communicate(timeout=120)

    sent, seconds = patches_and_seconds(api)
    assert STOP_AT <= len(sent) <= WORKERS + QPS * seconds, (len(sent), seconds)
    landed = [rank[r.path.rsplit("/", 1)[1]] for r in sent if r.stored]
    assert landed and all(age <= place + WORKERS - 1 for place, age in enumerate(landed)), landed
    # Stopped part-way; the next run sends the rest (test_bounds.py: without redoing any).
    assert run[0].returncode == 1
    (line,) = error_lines(stderr)
    assert "node(s) not patched (stopped by a signal)" in line and "the next run" in line


def test_a_hold_ends_at_half_the_rate_it_started_at(api: ApiServer, kubeconfig: Path) -> None:
    api.add_nodes(1_000, created=api.now() - timedelta(hours=3), eks=False, annotations=OURS)

    code, stderr, last = reconcile(kubeconfig, "--timeout", "3s")

    patches, seconds = patches_and_seconds(api)
    assert all(r.status == 200 for r in patches) and code == 0, stderr  # 1,000 do not fit
    assert left_to_next_run(last, patches, 1_000), last
    assert len(patches) <= WORKERS + QPS / 2 * seconds, (len(patches), seconds)


def after_pressure(patches: list[RequestRecord], moment: float) -> tuple[int, float]:
    """The PATCH requests that arrived from a second after `moment`, when the server answered
    what made the client slow down (a second is ample to read one answer), and the seconds
    they spread over."""
    later = [r.started for r in patches if r.started >= moment + 1]
    return len(later), max(later, default=moment + 1) - (moment + 1)


def backed_off(seconds: float, workers: int) -> float:
    """The most a run lets through in `seconds` once its rate has been halved: the patches in
    flight and the bucket's burst (--workers each), and a rate from half of QPS growing
    back by RECOVERY of QPS a second (counted from a second before the window)."""
    grown = QPS * RECOVERY * ((seconds + 1) ** 2 - 1) / 2
    return 2 * workers + QPS / 2 * seconds + grown


def test_429s_slow_the_writes_to_half_the_rate(api: ApiServer, kubeconfig: Path) -> None:
    """One write in 50 answered 429 with Retry-After: 1, as API Priority and Fairness answers
    when its queues are full: the rate is halved (at most once a second), for every worker."""
    api.add_nodes(1_500, created=api.now() - timedelta(minutes=2), eks=False)
    counted = itertools.count(1)

    def overloaded(req: RequestInfo) -> None:
        if req.method == "PATCH" and next(counted) % 50 == 0:
            api.inject(Fault(method="PATCH", status=429, retry_after=1, plain_text=True))

    api.on_request(overloaded)
    code, stderr, last = reconcile(kubeconfig, "--timeout", "5s", "-v")

    patches, _ = patches_and_seconds(api)
    first = min(r.started + r.duration for r in patches if r.status == 429)
    sent, seconds = after_pressure(patches, first)
    assert sent <= backed_off(seconds, WORKERS), (sent, seconds)
    assert code == 0 and "node writes slowed to 100/s (429 Too Many Requests)" in stderr
    stored = [r for r in patches if r.status == 200]  # a 429'd patch is retried, or left
    assert left_to_next_run(last, stored, 1_500), last


def test_slow_answers_do_not_slow_the_writes(api: ApiServer, kubeconfig: Path) -> None:
    """One write in 10 answered after more than a second, the server otherwise fine: the
    client cannot tell that from its own slowness, so only a 429 or a 5xx slows it down."""
    api.add_nodes(1_500, created=api.now() - timedelta(minutes=2), eks=False)
    counted = itertools.count(1)

    def sluggish(req: RequestInfo) -> None:
        if req.method == "PATCH" and next(counted) % 10 == 0:
            api.inject(Fault(method="PATCH", delay=1.2))

    api.on_request(sluggish)
    code, stderr, last = reconcile(kubeconfig, "--timeout", "5s", "--workers", "32", "-v")

    patches, _ = patches_and_seconds(api)
    assert len([r for r in patches if r.duration > 1.0]) >= 2
    assert "node writes slowed" not in stderr, stderr
    assert code == 0 and left_to_next_run(last, patches, 1_500), last


def test_a_run_s_warnings_are_warnings_in_text_and_json_logs(
    api: ApiServer, kubeconfig: Path
) -> None:
    """Every warning of a run takes one path to stderr:
    shown here with a dry run's warning about the holds it leaves."""
    api.add_nodes(2, created=api.now() - timedelta(hours=3), eks=False, annotations=OURS)
    warning = "dry run: 2 nodes carry hold annotations of node-holder"
    args = ("reconcile", "--kubeconfig", str(kubeconfig), "--dry-run")

    text = run_cli(*args)
    as_json = run_cli(*args, "--output", "json", "--log-format", "json")

    assert text.code == as_json.code == 0
    (said,) = [line for line in text.stderr.splitlines() if warning in line]
    assert " WARNING " in said
    logs = [json.loads(line) for line in as_json.stderr.splitlines()]
    assert [e["level"] for e in logs if warning in e["message"]] == ["warning"]
    assert api.writes() == []
