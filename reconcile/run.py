"""One pass: read the whole node list, decide, apply, record Events. No loop.

Used by every command (`reconcile`, `status`, `release`) and by `simulate`,
so the replay goes through exactly the code a CronJob runs.
"""

from __future__ import annotations

import logging
import socket
import threading
from dataclasses import dataclass, field

from reconcile.apply import ApplyResult, Outcome, Pool, apply_plan
from reconcile.client import ApiError, Client, TransportError, node_event
from reconcile.decide import Mode, Plan, Transition, decide
from reconcile.nodes import NodeView
from reconcile.read import Keys, ListFailed, Listing, read_node, read_nodes
from reconcile.retry import Backoff, Deadline, DeadlineExceeded, Interrupted, RateLimiter
from reconcile.settings import HoldSettings, RunSettings

__all__ = ["ListFailed", "Listing", "RunResult", "make_pool", "run_once"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunResult:
    plan: Plan
    listing: Listing
    dry_run: bool
    applied: ApplyResult | None = None
    events: tuple[Transition, ...] = ()
    event_errors: tuple[str, ...] = ()
    requests: int = 0
    warnings: tuple[str, ...] = field(default=())

    @property
    def errors(self) -> tuple[str, ...]:
        if self.applied is None:
            return ()
        errors = [f"node/{r.node}: {r.error or r.outcome}" for r in self.applied.failed]
        return tuple(errors)

    @property
    def ok(self) -> bool:
        return self.applied is None or not self.applied.failed


def make_pool(
    run: RunSettings,
    stop: threading.Event,
    request_timeout: float,
    backoff: Backoff | None = None,
) -> Pool:
    return Pool(
        workers=run.workers,
        limiter=RateLimiter(run.qps, burst=run.workers),
        backoff=backoff or Backoff(),
        deadline=Deadline(run.timeout.total_seconds()),
        stop=stop,
        request_timeout=request_timeout,
    )


def run_once(
    kube: Client,
    hold: HoldSettings,
    run: RunSettings,
    *,
    mode: Mode = Mode.RECONCILE,
    write: bool = True,
    stop: threading.Event | None = None,
    backoff: Backoff | None = None,
) -> RunResult:
    """List, decide and (unless dry-run or `write=False`) patch and record Events.

    Raises ListFailed when the node list is incomplete or a node cannot be
    decided on; Interrupted on SIGTERM before anything was written. `backoff`
    is for tests that inject many faults and must not wait the real pauses.
    """
    stop = stop or threading.Event()
    pool = make_pool(run, stop, kube.request_timeout, backoff)
    listing = read_nodes(kube, hold, run, pool)
    plan = decide(listing.nodes, listing.now, hold, mode)
    del listing.nodes[:]  # the plan keeps what it needs; let the views go
    if run.dry_run or not write:
        return RunResult(plan, listing, dry_run=True, requests=kube.requests)

    keys = Keys.of(hold)

    def reread(name: str, timeout: float) -> NodeView | None:
        return read_node(kube, name, keys, timeout)

    applied = apply_plan(plan, kube, pool, reread)
    events, event_errors = _record_events(kube, plan, applied, run, pool)
    return RunResult(
        plan,
        listing,
        dry_run=False,
        applied=applied,
        events=events,
        event_errors=event_errors,
        requests=kube.requests,
    )


def _record_events(
    kube: Client, plan: Plan, applied: ApplyResult, run: RunSettings, pool: Pool
) -> tuple[tuple[Transition, ...], tuple[str, ...]]:
    """An Event per hold that started, grew or ended, if any of its patches landed.

    Events are best effort: a failure is logged and reported, but does not
    fail the run, because the hold itself is in place.
    """
    if not run.events or not plan.transitions:
        return (), ()
    landed = {r.patch.window for r in applied.results if r.outcome is Outcome.PATCHED}
    instance = socket.gethostname()
    sent, errors = [], []
    for transition in plan.transitions:
        if transition.window not in landed:
            continue
        try:
            event = node_event(
                node=transition.node,
                node_uid=transition.node_uid or transition.node,
                reason=transition.reason,
                message=transition.message,
                at=plan.now,
                instance=instance,
            )
            pool.retry(
                lambda timeout, e=event: kube.create_event(e, timeout=timeout),
                f"event {transition.reason} on node/{transition.node}",
            )
            sent.append(transition)
        except (ApiError, TransportError, DeadlineExceeded, Interrupted) as exc:
            text = exc.explain() if isinstance(exc, ApiError) else str(exc) or type(exc).__name__
            log.warning("could not record event %s: %s", transition.reason, text)
            errors.append(f"event {transition.reason} on node/{transition.node}: {text}")
    return tuple(sent), tuple(errors)
