"""Stop the CronJob before a release (`release --suspend-cronjob`, the chart's uninstall hook):
suspend it, then wait out a run in flight, which would put the holds back (docs/install.md,
"Uninstall": why, and how long at most).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from reconcile.cluster.client import Client
from reconcile.cluster.errors import ApiError, NotFound, TransportError
from reconcile.cluster.pace import DeadlineExceeded, Pace, explain
from reconcile.rule.settings import ObjectRef

log = logging.getLogger("reconcile")
T = TypeVar("T")

#: Beyond the run's deadline: the Job controller notices, the kubelet stops the pod.
DEADLINE_SLACK_SECONDS = 10.0
#: When the CronJob says nothing (a Job template without activeDeadlineSeconds).
FALLBACK_WAIT_SECONDS = 120.0
POLL_SECONDS = 1.0
REQUEST_RETRY_SECONDS = 30.0  # one request, its retries included
CLEAN_LOOKS = 2  # looks a poll apart that must find no running Job


class HandoverFailed(Exception):
    """The CronJob could not be suspended, or a run was still going at the deadline: exit 1."""


def suspend_and_wait(
    kube: Client,
    ref: ObjectRef,
    *,
    dry_run: bool = False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Suspend the CronJob and return once none of its Jobs is running, two looks a poll
    apart (a Job the controller created just before it saw the suspend shows up in the
    second); HandoverFailed if one still runs after the run's deadline. `clock` and `sleep`
    pace the wait (tests pass a fake clock)."""
    start = clock()
    cronjob = _suspend(kube, ref, dry_run)
    if cronjob is None:
        return
    uid = (cronjob.get("metadata") or {}).get("uid")
    if dry_run:
        log.warning("dry run: would suspend cronjob %s and wait for its jobs", ref)
        _running(kube, ref, uid)  # the look the real hand-over makes, with the same access
        return
    log.info("cronjob %s suspended", ref)
    deadline = start + _run_bound(cronjob)
    clean = 0
    while True:
        running = _running(kube, ref, uid)
        clean = 0 if running else clean + 1
        if clean >= CLEAN_LOOKS or (not running and clock() >= deadline):
            return
        if clock() >= deadline:
            raise HandoverFailed(
                f"cronjob {ref}: job(s) {', '.join(running)} still running after "
                f"{clock() - start:.0f}s; nothing was released, run release again once they end"
            )
        log.info("waiting for %s of cronjob %s to finish", ", ".join(running) or "a look", ref)
        sleep(min(POLL_SECONDS, max(deadline - clock(), 0.0)))


def _retried(kube: Client, call: Callable[[float], T], what: str) -> T:
    """One request on the runs' own request path (reconcile.cluster.pace: 429 after its
    Retry-After, 5xx and lost connections, with capped jittered backoff), within its own
    REQUEST_RETRY_SECONDS: the run's deadline starts after the hand-over."""
    return Pace.start(REQUEST_RETRY_SECONDS, kube.request_timeout).retry(call, what)


def _suspend(kube: Client, ref: ObjectRef, dry_run: bool) -> dict[str, Any] | None:
    """The CronJob after `suspend: true` (as it is, for a dry run); None if there is none."""

    def ask(timeout: float) -> dict[str, Any]:
        return kube.cronjob(ref.namespace, ref.name, suspend=not dry_run, timeout=timeout)

    try:
        return _retried(kube, ask, f"{'get' if dry_run else 'patch'} cronjob {ref}")
    except NotFound:
        log.warning("cronjob %s not found: nothing to suspend or wait for", ref)
        return None
    except (ApiError, TransportError, DeadlineExceeded) as exc:
        raise HandoverFailed(f"could not suspend cronjob {ref}: {explain(exc)}") from None


def _running(kube: Client, ref: ObjectRef, uid: str | None) -> tuple[str, ...]:
    """Names of the CronJob's Jobs (scheduled or created from it by hand) not finished yet."""
    try:
        jobs = _retried(
            kube, lambda t: kube.list_jobs(ref.namespace, timeout=t), f"list jobs in {ref}"
        )
    except (ApiError, TransportError, DeadlineExceeded) as exc:
        raise HandoverFailed(f"could not list the jobs of cronjob {ref}: {explain(exc)}") from None
    names = (j["metadata"]["name"] for j in jobs if _of(j, ref, uid) and not _finished(j))
    return tuple(sorted(names))


def _of(job: dict[str, Any], ref: ObjectRef, uid: str | None) -> bool:
    """Created by the CronJob: scheduled, or by hand from it (`kubectl create job --from`)."""
    owners = (job.get("metadata") or {}).get("ownerReferences") or []
    return any(
        o.get("kind") == "CronJob" and (o.get("uid") == uid or o.get("name") == ref.name)
        for o in owners
    )


def _run_bound(cronjob: dict[str, Any]) -> float:
    """How long a run that already started may still take: its deadline plus grace."""
    job = ((cronjob.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}
    deadline = job.get("activeDeadlineSeconds")
    if not isinstance(deadline, int):
        return FALLBACK_WAIT_SECONDS
    grace = ((job.get("template") or {}).get("spec") or {}).get("terminationGracePeriodSeconds")
    return deadline + (grace if isinstance(grace, int) else 30) + DEADLINE_SLACK_SECONDS


def _finished(job: dict[str, Any]) -> bool:
    """A Job is done when it has a Complete or Failed condition (its pods are then gone)."""
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions
    )
