"""Stop the CronJob before a release: suspend it, then wait out a run in flight.

`release` removes every hold this tool owns. If the CronJob's run were still going (or
started right after), it would put the holds back a moment later and they would outlive the
uninstall. So `release --suspend-cronjob NAMESPACE/NAME` (the Helm chart's pre-delete hook)
first sets `spec.suspend: true` (no new run starts), then waits until none of the CronJob's
Jobs is still running. The wait is bounded by the run's own deadline: a Job started just
before the suspend ends within its `activeDeadlineSeconds` plus the pod's grace period.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from reconcile.rule.settings import CronJobRef

log = logging.getLogger("reconcile")

MERGE_PATCH = "application/merge-patch+json"
#: Beyond the run's deadline: the Job controller notices, the kubelet stops the pod.
DEADLINE_SLACK_SECONDS = 10.0
#: When the CronJob says nothing (a Job template without activeDeadlineSeconds).
FALLBACK_WAIT_SECONDS = 120.0
POLL_SECONDS = 1.0
REQUEST_RETRY_SECONDS = 30.0  # one request, its retries included
CLEAN_LOOKS = 2  # looks a poll apart that must find no running Job
#: What a 403 tells people to grant.
GRANT = "the uninstall hook's Role in charts/karpenter-node-holder (cronjobs get, patch; jobs list)"


class HandoverFailed(Exception):
    """The CronJob could not be suspended, or a run was still going at the deadline: exit 1."""


def _path(ref: CronJobRef) -> str:
    return (
        f"/apis/batch/v1/namespaces/{quote(ref.namespace, safe='')}"
        f"/cronjobs/{quote(ref.name, safe='')}"
    )


@dataclass(frozen=True)
class Handover:
    """What the suspend step did, for the report."""

    cronjob: CronJobRef
    found: bool  # False: no such CronJob (already deleted), nothing to wait for
    was_suspended: bool
    waited_for: tuple[str, ...]  # Jobs that were running when we looked first
    seconds: float


@dataclass(frozen=True)
class _Pacing:
    """How the wait looks and sleeps (tests pass a fake clock)."""

    clock: Callable[[], float]
    sleep: Callable[[float], None]
    poll: float


def suspend_and_wait(
    kube: Any,
    ref: CronJobRef,
    *,
    dry_run: bool = False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll: float = POLL_SECONDS,
) -> Handover:
    """Suspend the CronJob and return once none of its Jobs is running.

    Raises HandoverFailed when a Job is still running after the run's deadline, so the
    caller releases nothing that a live run could put back.
    """
    pacing = _Pacing(clock, sleep, poll)
    start = clock()
    call = _caller(kube)
    cronjob = _suspend(call, ref, dry_run)
    if cronjob is None:
        return Handover(ref, False, False, (), 0.0)
    was_suspended = bool((cronjob.get("spec") or {}).get("suspend"))
    if dry_run:
        log.warning("dry run: would suspend cronjob %s and wait for its jobs", ref)
        first = _look(call, ref, cronjob)
    else:
        log.info("cronjob %s suspended (was suspended already: %s)", ref, was_suspended)
        first = _wait(call, ref, cronjob, start + _run_bound(cronjob), pacing)
    return Handover(ref, True, was_suspended, first, clock() - start)


def _caller(kube: Any) -> Callable[..., Any]:
    """One request as JSON, retried by the runs' own policy (`retry.retrying`: 429 after
    its Retry-After, 5xx and lost connections, with capped jittered backoff)."""
    # The client is slow to import: only here, not for --help.
    from reconcile.cluster.client import Action  # noqa: PLC0415
    from reconcile.cluster.retry import Backoff, Deadline, retrying  # noqa: PLC0415

    def call(method: str, path: str, *, verb: str, what: str, **kwargs: Any) -> Any:
        action = Action(verb, what, GRANT)
        answer = retrying(
            lambda timeout: kube.request(method, path, action=action, timeout=timeout, **kwargs),
            what=f"{verb} {what}",
            backoff=Backoff(),
            deadline=Deadline(REQUEST_RETRY_SECONDS),
            stop=threading.Event(),
            request_timeout=kube.request_timeout,
        )
        return json.loads(answer.body)

    return call


def _suspend(call: Callable[..., Any], ref: CronJobRef, dry_run: bool) -> dict[str, Any] | None:
    """The CronJob after `suspend: true` (as it is, for a dry run); None if there is none."""
    from reconcile.cluster.client import ApiError, NotFound, TransportError  # noqa: PLC0415
    from reconcile.cluster.retry import DeadlineExceeded  # noqa: PLC0415

    try:
        if dry_run:
            return call("GET", _path(ref), verb="get", what=f"cronjob {ref}")
        return call(
            "PATCH",
            _path(ref),
            body={"spec": {"suspend": True}},
            headers={"Content-Type": MERGE_PATCH},
            verb="patch",
            what=f"cronjob {ref}",
        )
    except NotFound:
        log.warning("cronjob %s not found: nothing to suspend or wait for", ref)
        return None
    except (TransportError, DeadlineExceeded) as exc:
        raise HandoverFailed(f"could not suspend cronjob {ref}: {exc}") from None
    except ApiError as exc:
        raise HandoverFailed(f"could not suspend cronjob {ref}: {exc.explain()}") from None


def _look(call: Callable[..., Any], ref: CronJobRef, cronjob: dict[str, Any]) -> tuple[str, ...]:
    from reconcile.cluster.client import ApiError, TransportError  # noqa: PLC0415
    from reconcile.cluster.retry import DeadlineExceeded  # noqa: PLC0415

    uid = (cronjob.get("metadata") or {}).get("uid")
    try:
        return _running_jobs(call, ref, uid)
    except (ApiError, TransportError, DeadlineExceeded) as exc:
        explain = exc.explain() if isinstance(exc, ApiError) else str(exc)
        raise HandoverFailed(f"could not list the jobs of cronjob {ref}: {explain}") from None


def _wait(
    call: Callable[..., Any],
    ref: CronJobRef,
    cronjob: dict[str, Any],
    deadline: float,
    pacing: _Pacing,
) -> tuple[str, ...]:
    """Look until two clean looks a poll apart; the Jobs seen running at the first look.

    A Job the controller created just before it saw the suspend shows up in the second.
    """
    start = pacing.clock()
    first: tuple[str, ...] | None = None
    clean = 0
    while True:
        running = _look(call, ref, cronjob)
        first = running if first is None else first
        clean = clean + 1 if not running else 0
        if clean >= CLEAN_LOOKS or (not running and pacing.clock() >= deadline):
            return first
        if pacing.clock() >= deadline:
            raise HandoverFailed(
                f"cronjob {ref}: job(s) {', '.join(running)} still running after "
                f"{pacing.clock() - start:.0f}s; nothing was released, run release again once "
                "they end"
            )
        log.info("waiting for %s of cronjob %s to finish", ", ".join(running) or "a look", ref)
        pacing.sleep(min(pacing.poll, max(deadline - pacing.clock(), 0.0)))


def _run_bound(cronjob: dict[str, Any]) -> float:
    """How long a run that already started may still take: its deadline plus grace."""
    job = ((cronjob.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}
    deadline = job.get("activeDeadlineSeconds")
    if not isinstance(deadline, int):
        return FALLBACK_WAIT_SECONDS
    grace = ((job.get("template") or {}).get("spec") or {}).get("terminationGracePeriodSeconds")
    return deadline + (grace if isinstance(grace, int) else 30) + DEADLINE_SLACK_SECONDS


def _running_jobs(call: Callable[..., Any], ref: CronJobRef, uid: str | None) -> tuple[str, ...]:
    """Names of the CronJob's Jobs (scheduled or created from it by hand) not finished yet."""
    path = f"/apis/batch/v1/namespaces/{quote(ref.namespace, safe='')}/jobs"
    items = call("GET", path, verb="list", what=f"jobs in {ref.namespace}")
    running = []
    for job in items.get("items") or []:
        owners = (job.get("metadata") or {}).get("ownerReferences") or []
        if not any(
            o.get("kind") == "CronJob" and (o.get("uid") == uid or o.get("name") == ref.name)
            for o in owners
        ):
            continue
        if not _finished(job):
            running.append(job["metadata"]["name"])
    return tuple(sorted(running))


def _finished(job: dict[str, Any]) -> bool:
    """A Job is done when it has a Complete or Failed condition (its pods are then gone)."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return True
    return False
