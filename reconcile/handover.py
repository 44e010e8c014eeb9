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
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from reconcile.settings import ConfigError

log = logging.getLogger("reconcile")

MERGE_PATCH = "application/merge-patch+json"
#: Beyond the run's deadline: the Job controller notices, the kubelet stops the pod.
DEADLINE_SLACK_SECONDS = 10.0
#: When the CronJob says nothing (a Job template without activeDeadlineSeconds).
FALLBACK_WAIT_SECONDS = 120.0
POLL_SECONDS = 1.0
#: What a 403 tells people to grant.
GRANT = "the uninstall hook's Role in charts/karpenter-node-holder (cronjobs get, patch; jobs list)"


class HandoverFailed(Exception):
    """The CronJob could not be suspended, or a run was still going at the deadline: exit 1."""


@dataclass(frozen=True)
class CronJobRef:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def path(self) -> str:
        return (
            f"/apis/batch/v1/namespaces/{quote(self.namespace, safe='')}"
            f"/cronjobs/{quote(self.name, safe='')}"
        )


def parse_cronjob_ref(text: str, flag: str, env: str) -> CronJobRef:
    """`namespace/name` -> CronJobRef, or one ConfigError line (exit 2, before any request)."""
    namespace, sep, name = text.strip().partition("/")
    fix = "use NAMESPACE/NAME of the CronJob, e.g. node-holder/node-holder"
    if not sep or not namespace or not name or "/" in name:
        raise ConfigError(f"{flag} ({env}): {text!r} is not NAMESPACE/NAME; {fix}")
    if not _DNS_LABEL.fullmatch(namespace) or len(namespace) > 63:
        raise ConfigError(f"{flag} ({env}): {namespace!r} is not a namespace name; {fix}")
    if not _DNS_SUBDOMAIN.fullmatch(name) or len(name) > 52:  # CronJob names: 52 at most
        raise ConfigError(f"{flag} ({env}): {name!r} is not a CronJob name; {fix}")
    return CronJobRef(namespace, name)


_DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL.pattern}(?:\.{_DNS_LABEL.pattern})*")


@dataclass(frozen=True)
class Handover:
    """What the suspend step did, for the report."""

    cronjob: CronJobRef
    found: bool  # False: no such CronJob (already deleted), nothing to wait for
    was_suspended: bool
    waited_for: tuple[str, ...]  # Jobs that were running when we looked first
    seconds: float


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
    # The client is slow to import: only here, not for --help.
    from reconcile.client import (  # noqa: PLC0415
        ApiError,
        NotFound,
        ServerError,
        TooManyRequests,
        TransportError,
    )

    start = clock()

    def call(*args: Any, **kwargs: Any) -> Any:
        """One request; throttling, 5xx and lost connections are retried for a while."""
        for attempt in range(6):
            try:
                return json.loads(kube.request(*args, grant=GRANT, **kwargs).body)
            except (ApiError, TransportError) as exc:
                transient = isinstance(exc, TransportError | TooManyRequests | ServerError)
                if not transient or attempt == 5:
                    raise
                log.info("retrying %s %s: %s", args[0], args[1], exc)
                sleep(min(2.0**attempt * 0.2, 5.0))
        raise AssertionError("unreachable")

    try:
        if dry_run:
            cronjob = call("GET", ref.path, verb="get", what=f"cronjob {ref}")
        else:
            cronjob = call(
                "PATCH",
                ref.path,
                body={"spec": {"suspend": True}},
                headers={"Content-Type": MERGE_PATCH},
                verb="patch",
                what=f"cronjob {ref}",
            )
    except TransportError as exc:
        raise HandoverFailed(f"could not suspend cronjob {ref}: {exc}") from None
    except ApiError as exc:
        if isinstance(exc, NotFound):
            log.warning("cronjob %s not found: nothing to suspend or wait for", ref)
            return Handover(ref, False, False, (), 0.0)
        raise HandoverFailed(f"could not suspend cronjob {ref}: {exc.explain()}") from None
    was_suspended = bool((cronjob.get("spec") or {}).get("suspend"))
    if dry_run:
        log.warning("dry run: would suspend cronjob %s and wait for its jobs", ref)
    else:
        log.info("cronjob %s suspended (was suspended already: %s)", ref, was_suspended)
    deadline = start + _run_bound(cronjob)
    uid = (cronjob.get("metadata") or {}).get("uid")
    first: tuple[str, ...] | None = None
    clean = 0
    while True:
        try:
            running = _running_jobs(call, ref, uid)
        except (ApiError, TransportError) as exc:
            explain = exc.explain() if isinstance(exc, ApiError) else str(exc)
            raise HandoverFailed(f"could not list the jobs of cronjob {ref}: {explain}") from None
        if first is None:
            first = running
        if dry_run:
            break
        # Two clean looks a poll apart: a Job the controller created just before it saw
        # the suspend shows up in the second.
        clean = clean + 1 if not running else 0
        if clean >= 2 or (not running and clock() >= deadline):
            break
        if clock() >= deadline:
            raise HandoverFailed(
                f"cronjob {ref}: job(s) {', '.join(running)} still running after "
                f"{clock() - start:.0f}s; nothing was released, run release again once they end"
            )
        log.info("waiting for %s of cronjob %s to finish", ", ".join(running) or "a look", ref)
        sleep(min(poll, max(deadline - clock(), 0.0)))
    return Handover(ref, True, was_suspended, first or (), clock() - start)


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
