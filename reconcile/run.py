"""One pass: read the whole node list, decide, apply, record Events. No loop.

Only the orchestration of one run lives here; applying (patches and Events) is apply.py.

Used by every command (`reconcile`, `status`, `release`) and by `simulate`,
so the replay goes through exactly the code a CronJob runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from reconcile.cluster.apply import ApplyResult, NodeResult, Pool, apply_plan, record_events
from reconcile.cluster.client import Client, gc_paused
from reconcile.cluster.read import Keys, ListFailed, Listing, read_node, read_nodes
from reconcile.cluster.retry import Backoff, Deadline, RateLimiter
from reconcile.rule.decide import Mode, Plan, Transition, decide
from reconcile.rule.nodes import NodeView
from reconcile.rule.settings import HoldSettings, RunSettings

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
    missing: tuple[str, ...] = ()  # named nodes (pin, unpin) that do not exist

    @property
    def errors(self) -> tuple[str, ...]:
        errors = [f"node/{name}: not found" for name in self.missing]
        if self.applied is not None:
            errors += [f"node/{r.node}: {r.error or r.outcome}" for r in self.applied.failed]
        return tuple(errors)

    @property
    def ok(self) -> bool:
        return not self.missing and (self.applied is None or not self.applied.failed)


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
    stop: threading.Event | None = None,
    backoff: Backoff | None = None,
    on_result: Callable[[NodeResult], None] | None = None,
) -> RunResult:
    """List, decide and (unless `run.dry_run`: the one way to say "do not write") patch
    and record Events. With `run.only` (pin, unpin), decide on those nodes alone.

    Raises ListFailed when the node list is incomplete or a node cannot be
    decided on; Interrupted on SIGTERM before anything was written. `backoff`
    is for tests that inject many faults and must not wait the real pauses;
    `on_result` sees each node's result as its patch lands (see apply_plan).
    """
    stop = stop or threading.Event()
    kube.stop_on(stop)
    pool = make_pool(run, stop, kube.request_timeout, backoff)
    # Tens of thousands of records that live to the end of the run: nothing to collect, and
    # each collection would also walk the Kubernetes client's objects.
    with gc_paused():
        listing = read_nodes(kube, hold, run, pool)
        only = set(run.only)
        nodes = [n for n in listing.nodes if n.name in only] if only else listing.nodes
        plan = decide(nodes, listing.now, hold, mode)
    missing = tuple(sorted(only - {d.node for d in plan.decisions}))
    del listing.nodes[:], nodes  # the plan keeps what it needs; let the views go
    if run.dry_run:
        return RunResult(plan, listing, dry_run=True, requests=kube.requests, missing=missing)

    keys = Keys.of(hold)

    def reread(name: str, timeout: float) -> NodeView | None:
        return read_node(kube, name, keys, timeout)

    applied = apply_plan(plan, kube, pool, reread, on_result)
    events, event_errors = record_events(kube, plan, applied, run, pool)
    return RunResult(
        plan,
        listing,
        dry_run=False,
        applied=applied,
        events=events,
        event_errors=event_errors,
        requests=kube.requests,
        missing=missing,
    )
