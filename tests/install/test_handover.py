"""`node-holder release --suspend-cronjob NAMESPACE/NAME`: the Helm chart's uninstall hook.

Through the API test server over real HTTP: the CronJob is suspended with a merge patch,
a Job in flight is waited out before any hold comes off, and the wait is bounded.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from reconcile.cluster.access import connection_for
from reconcile.cluster.client import Client
from reconcile.cluster.handover import HandoverFailed, ObjectRef, suspend_and_wait
from reconcile.rule.settings import ClusterAccess
from tests.clusters import CliResult, run_cli
from tests.kubeapi.apiserver import ApiServer, Fault, RequestInfo

KEY = "karpenter.sh/do-not-disrupt"
MARKER = "node-holder.dev/owned-annotations"
OURS = {KEY: "true", MARKER: KEY}
NS, NAME = "kube-system", "node-holder"
CRONJOB_PATH = f"/apis/batch/v1/namespaces/{NS}/cronjobs/{NAME}"
JOBS_PATH = f"/apis/batch/v1/namespaces/{NS}/jobs"


def add_cronjob(api: ApiServer, deadline: int = 55) -> dict:
    return api.add_batch(
        "cronjobs",
        {
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {
                "schedule": "* * * * *",
                "suspend": False,
                "jobTemplate": {
                    "spec": {
                        "activeDeadlineSeconds": deadline,
                        "template": {"spec": {"terminationGracePeriodSeconds": 5}},
                    }
                },
            },
        },
    )


def add_job(api: ApiServer, cronjob: dict, name: str, *, done: bool) -> None:
    owner = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "name": cronjob["metadata"]["name"],
        "uid": cronjob["metadata"]["uid"],
        "controller": True,
    }
    status = (
        {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}
        if done
        else {"active": 1}
    )
    api.add_batch(
        "jobs",
        {"metadata": {"name": name, "namespace": NS, "ownerReferences": [owner]}, "status": status},
    )


def release(kubeconfig: str | Path, *args: str, env: dict[str, str] | None = None) -> CliResult:
    return run_cli("release", "--kubeconfig", str(kubeconfig), *args, env=env)


def held_node(api: ApiServer, name: str) -> None:
    api.add_node(name, created=api.now() - timedelta(minutes=2), eks=False, annotations=OURS)


def annotations(api: ApiServer, name: str) -> dict[str, str]:
    return api.get_node(name)["metadata"].get("annotations") or {}


def test_suspends_waits_for_the_run_in_flight_then_releases(api: ApiServer, kubeconfig: Path):
    """The run in flight ends when the hand-over looks at the Jobs for the second time (the
    server finishes it on that look, before answering), whatever the machine's speed: so the
    first look finds it running, and two clean looks must follow before any hold comes off."""
    cronjob = add_cronjob(api)
    add_job(api, cronjob, "node-holder-29000000", done=True)  # an old run: not waited for
    add_job(api, cronjob, "node-holder-29000001", done=False)  # the run in flight
    held_node(api, "a")
    held_node(api, "b")
    looks: list[int] = []

    def finish_the_run_on_the_second_look(request: RequestInfo) -> None:
        if request.method == "GET" and request.path == JOBS_PATH:
            looks.append(len(api.requests))
            if len(looks) == 2:
                add_job(api, cronjob, "node-holder-29000001", done=True)

    api.on_request(finish_the_run_on_the_second_look)
    result = release(kubeconfig, "--suspend-cronjob", f"{NS}/{NAME}")
    assert result.code == 0, result.stderr

    assert api.get_batch("cronjobs", NS, NAME)["spec"]["suspend"] is True
    assert annotations(api, "a") == {} and annotations(api, "b") == {}
    log = api.requests
    patch = next(i for i, r in enumerate(log) if r.method == "PATCH" and r.path == CRONJOB_PATH)
    assert log[patch].content_type.startswith("application/merge-patch+json")
    node_writes = [i for i, r in enumerate(log) if r.path.startswith("/api/v1/nodes/")]
    job_looks = [i for i, r in enumerate(log) if r.path == JOBS_PATH]
    assert len(node_writes) == 2
    # One look that found the run going, then the two clean looks; no hold came off before.
    assert len(job_looks) == len(looks) == 3
    assert patch < job_looks[0] < job_looks[-1] < min(node_writes)


def test_no_run_in_flight_releases_after_two_looks(api: ApiServer, kubeconfig: Path):
    cronjob = add_cronjob(api)
    add_job(api, cronjob, "node-holder-1", done=True)
    held_node(api, "a")
    result = release(kubeconfig, "--suspend-cronjob", f"{NS}/{NAME}")
    assert result.code == 0, result.stderr
    assert annotations(api, "a") == {}
    assert [r.path for r in api.requests if r.path.startswith("/apis/")] == [
        CRONJOB_PATH,
        JOBS_PATH,
        JOBS_PATH,
        "/apis/karpenter.sh/v1/nodepools",  # release: entries of the budget mechanism, if any
    ]


@pytest.mark.parametrize(
    "fault",
    [
        Fault(method="PATCH", path=CRONJOB_PATH + "$", status=503),
        Fault(method="GET", path=JOBS_PATH + "$", status=429, retry_after=1),
        Fault(method="GET", path=JOBS_PATH + "$", drop_connection=True),
    ],
    ids=["503 on the suspend", "429 on a look", "reset on a look"],
)
def test_transient_faults_during_the_hand_over_are_retried(
    api: ApiServer, kubeconfig: Path, fault: Fault
):
    """The run's own retry policy serves the hand-over too (Retry-After honoured)."""
    add_cronjob(api)
    held_node(api, "a")
    api.inject(fault)
    result = release(kubeconfig, "--suspend-cronjob", f"{NS}/{NAME}")
    assert result.code == 0, result.stderr
    assert fault.hits == 1
    assert api.get_batch("cronjobs", NS, NAME)["spec"]["suspend"] is True
    assert annotations(api, "a") == {}


def test_a_job_of_another_cronjob_is_not_waited_for(api: ApiServer, kubeconfig: Path):
    add_cronjob(api)
    other = {"metadata": {"name": "other", "uid": "u-other"}}
    add_job(api, other, "other-1", done=False)
    held_node(api, "a")
    assert release(kubeconfig, "--suspend-cronjob", f"{NS}/{NAME}").code == 0
    assert annotations(api, "a") == {}


def test_a_run_that_outlives_its_deadline_fails_and_releases_nothing(
    api: ApiServer, kubeconfig: Path
):
    """Bounded by the run's own deadline (activeDeadlineSeconds + grace + slack); a fake
    clock runs that time out, the requests are real."""
    cronjob = add_cronjob(api, deadline=30)
    add_job(api, cronjob, "stuck", done=False)
    held_node(api, "a")
    now = [0.0]
    kube = Client(connection_for(ClusterAccess(kubeconfig=str(kubeconfig))), pool_size=2)
    with pytest.raises(HandoverFailed, match=r"stuck still running after 45s"):
        suspend_and_wait(
            kube,
            ObjectRef(NS, NAME),
            clock=lambda: now[0],
            sleep=lambda s: now.__setitem__(0, now[0] + s),
        )
    assert annotations(api, "a") == OURS
    assert api.get_batch("cronjobs", NS, NAME)["spec"]["suspend"] is True
    looks = [r for r in api.requests if r.path == JOBS_PATH]
    assert 40 <= len(looks) <= 50, "one look a second until the deadline"


def test_cli_exits_1_and_keeps_holds_when_the_wait_fails(
    api: ApiServer, kubeconfig: Path, monkeypatch
):
    monkeypatch.setattr("reconcile.cluster.handover.DEADLINE_SLACK_SECONDS", 0.0)
    cronjob = add_cronjob(api, deadline=1)
    cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 0
    api.add_batch("cronjobs", cronjob)
    add_job(api, cronjob, "stuck", done=False)
    held_node(api, "a")
    result = release(kubeconfig, "--suspend-cronjob", f"{NS}/{NAME}")
    assert result.code == 1
    assert result.stderr.count("\n") == 1 and "stuck still running" in result.stderr
    assert annotations(api, "a") == OURS
    assert not [r for r in api.requests if r.path.startswith("/api/v1/nodes")]


def test_missing_cronjob_is_not_an_error(api: ApiServer, kubeconfig: Path):
    """A second `helm uninstall` after a failed one: the CronJob may be gone already."""
    held_node(api, "a")
    result = release(kubeconfig, "--suspend-cronjob", f"{NS}/{NAME}")
    assert result.code == 0, result.stderr
    assert annotations(api, "a") == {}


def test_dry_run_suspends_nothing(api: ApiServer, kubeconfig: Path):
    cronjob = add_cronjob(api)
    add_job(api, cronjob, "running", done=False)
    held_node(api, "a")
    result = release(kubeconfig, "--dry-run", env={"NODE_HOLDER_SUSPEND_CRONJOB": f"{NS}/{NAME}"})
    assert result.code == 0, result.stderr
    assert api.get_batch("cronjobs", NS, NAME)["spec"]["suspend"] is False
    assert annotations(api, "a") == OURS
    assert not [r for r in api.requests if r.method != "GET"]


@pytest.mark.parametrize("bad", ["node-holder", "/x", "ns/", "a/b/c", "Bad/x", "ns/x_y"])
def test_bad_reference_exits_2_before_any_request(api: ApiServer, kubeconfig: Path, bad: str):
    result = release(kubeconfig, "--suspend-cronjob", bad)
    assert result.code == 2
    assert "--suspend-cronjob (NODE_HOLDER_SUSPEND_CRONJOB)" in result.stderr
    assert "NAMESPACE/NAME" in result.stderr and result.stderr.count("\n") == 1
    assert api.requests == []


def test_release_without_the_cronjob_says_the_next_run_holds_again(
    api: ApiServer, kubeconfig: Path
):
    """1,524 holds removed, then all back a minute later with no word: now one line says
    why and what to do; with --suspend-cronjob, or with nothing released, it is not said."""
    add_cronjob(api)
    held_node(api, "a")
    advice = "a scheduled run (the CronJob) holds these nodes again at its next run"
    for args in (["--dry-run"], []):
        result = release(kubeconfig, *args)
        assert result.code == 0, result.stderr
        (line,) = [line for line in result.stderr.splitlines() if advice in line]
        assert "--suspend-cronjob NAMESPACE/NAME" in line
    assert annotations(api, "a") == {}
    nothing_left = release(kubeconfig)
    assert nothing_left.code == 0 and advice not in nothing_left.stderr
    held_node(api, "b")
    handed_over = release(kubeconfig, "--suspend-cronjob", f"{NS}/{NAME}")
    assert handed_over.code == 0 and advice not in handed_over.stderr
