"""One pass against the cluster: read the nodes, decide, apply, record Events. No loop.

Used by every command that talks to the cluster (`reconcile`, `status`, `release`, `pin`,
`unpin`). `simulate` never comes here: it replays the same pure `decide()` in memory
(reconcile.simulate); tests/api/test_simulate_crosscheck.py compares the two.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from reconcile.cluster.apply import ApplyResult, NodeResult, apply_plan, record_events
from reconcile.cluster.client import Client
from reconcile.cluster.pool import Backoff, Pool
from reconcile.cluster.read import ListFailed, Listing, read_nodes
from reconcile.rule.decide import Plan, Transition, decide
from reconcile.rule.settings import HoldSettings, RunSettings

__all__ = ["ListFailed", "Listing", "RunResult", "run_once"]


@dataclass(frozen=True)
class RunResult:
    plan: Plan
    listing: Listing
    dry_run: bool
    applied: ApplyResult | None = None
    events: tuple[Transition, ...] = ()
    event_errors: tuple[str, ...] = ()
    requests: int = 0
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


def run_once(
    kube: Client,
    hold: HoldSettings,
    run: RunSettings,
    *,
    describe: Callable[[Transition, Plan], str],
    stop: threading.Event | None = None,
    backoff: Backoff | None = None,
    on_result: Callable[[NodeResult], None] | None = None,
) -> RunResult:
    """Read, decide (as `run.mode` says) and, unless `run.dry_run` (the one way to say "do
    not write"), patch and record Events. With `run.only` (pin, unpin), read and decide on
    those nodes alone.

    Raises ListFailed when a node to decide on cannot be read or decided on; Interrupted
    on SIGTERM before anything was written. `describe` words each Event (the CLI's report:
    the decision says what changed, never in words). `backoff` is for tests that inject
    many faults and must not wait the real pauses; `on_result` sees each node's result as
    its patch lands (see apply_plan).
    """
    pool = Pool.start(
        run.timeout.total_seconds(),
        kube.request_timeout,
        workers=run.workers,
        qps=run.qps,
        stop=stop,
        backoff=backoff,
    )
    kube.stop_on(pool.stop)
    with _gc_paused():
        listing = read_nodes(kube, hold, run, pool)
        plan = decide(listing.nodes, listing.now, hold, run.mode)
    missing = tuple(sorted(set(run.only) - {d.node for d in plan.decisions}))
    del listing.nodes[:]  # the plan keeps what it needs; let the views go
    if run.dry_run:
        return RunResult(plan, listing, dry_run=True, requests=kube.requests, missing=missing)
    applied = apply_plan(plan, kube, pool, on_result)
    events, event_errors = record_events(kube, plan, applied, run, pool, describe)
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


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Reading and deciding make tens of thousands of small objects that live to the end of
    the run: nothing for the cyclic GC to collect, and each collection would walk them all."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
