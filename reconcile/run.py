"""One pass against the cluster for every command but simulate: read, decide, apply, record
Events. No loop. simulate replays the same `decide()` in memory
(tests/simulate/test_simulate_crosscheck.py).
"""

from __future__ import annotations

import gc
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from reconcile.cluster.apply import ApplyResult, NodeResult, Outcome, apply_plan, record_events
from reconcile.cluster.client import Client
from reconcile.cluster.nodepools import PoolResult, Pools, apply_pools, read_pools
from reconcile.cluster.pace import Backoff, Pace
from reconcile.cluster.read import Listing, read_nodes
from reconcile.rule import budget
from reconcile.rule.decide import (
    Observed,
    Plan,
    Reason,
    Transition,
    decide,
    recorded_events,
)
from reconcile.rule.settings import HoldSettings, RunSettings


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
    pools: Pools = field(default_factory=Pools)  # NodePools: their settings, budgets, release

    @property
    def errors(self) -> tuple[str, ...]:
        errors = [f"node/{name}: not found" for name in self.missing]
        errors += [f"node/{name}: not pinned: {why}" for name, why in self.plan.refused]
        errors += [f"nodepool/{r.patch.pool.name}: {r.error}" for r in self.pools.failed]
        if self.applied is not None:
            errors += [f"node/{r.node}: {r.error or r.outcome}" for r in self.applied.failed]
        return tuple(errors)


def run_once(
    kube: Client,
    hold: HoldSettings,
    run: RunSettings,
    *,
    describe: Callable[[Transition, Plan], str],
    stop: threading.Event | None = None,
    backoff: Backoff | None = None,
    on_result: Callable[[NodeResult | PoolResult], None] | None = None,
) -> RunResult:
    """Read, decide (as `run.mode` says) and, unless `run.dry_run` (the one way to say "do not
    write"), patch and record Events; with `run.only` (pin, unpin), on those nodes alone. Raises
    ListFailed when a node cannot be read or decided on, Interrupted on SIGTERM before any write.
    `describe` words each Event (the rule never words); `backoff` lets fault tests skip the real
    pauses; `on_result` sees each result as its patch lands (see apply_plan).
    """
    pace = Pace.start(
        run.timeout.total_seconds(),
        kube.request_timeout,
        workers=run.workers,
        qps=run.qps,
        stop=stop,
        backoff=backoff,
    )
    kube.stop_on(pace.stop)
    with _gc_paused():
        # NodePools first: each node view is built with its NodePool's own settings.
        pools = read_pools(kube, hold, run, pace)
        listing = read_nodes(kube, hold, run, pace, pools.nodepool_settings or {})
        budgeted = budget.budgeted(pools.views, listing.nodes, hold)
        observed = Observed(pools.nodepool_settings, budgeted)
        plan = decide(listing.nodes, listing.now, hold, run.mode, observed)
        patches = tuple(filter(None, (budget.decide_pool(p, plan) for p in pools.views)))
        pools = replace(pools, patches=patches)
    found = {d.node for d in plan.decisions} if run.only else set()  # pin, unpin: a few nodes
    missing = tuple(sorted(set(run.only) - found))
    if not run.dry_run:
        # NodePools first: a budget entry that takes over from annotations lands before they go.
        pools = apply_pools(pools, plan, kube, pace, on_result or (lambda _: None))
    if fallen := frozenset(r.patch.pool.name for r in pools.fallbacks):
        # auto: a NodePool that cannot take its entry has its nodes held by annotation, now.
        with _gc_paused():
            observed = replace(observed, budgeted=observed.budgeted - fallen)
            plan = decide(listing.nodes, listing.now, hold, run.mode, observed)
    del listing.nodes[:]  # the plan keeps what it needs; let the views go
    result = RunResult(plan, listing, run.dry_run, requests=kube.requests, missing=missing)
    if run.dry_run:
        return replace(result, pools=pools)
    applied = apply_plan(plan, kube, pace, on_result)
    done = [r.patch.transition for r in pools.results if r.outcome is Outcome.PATCHED]
    transitions = recorded_events([*filter(None, done), *_as_landed(plan.transitions, applied)])
    events, errors = record_events(kube, plan, transitions, run, pace, describe)
    return replace(
        result,
        applied=applied,
        events=events,
        event_errors=errors,
        pools=pools,
        requests=kube.requests,
    )


def _as_landed(transitions: tuple[Transition, ...], applied: ApplyResult) -> list[Transition]:
    """Each node transition whose window had a patch land, with the nodes whose patch landed,
    not those planned: a run that leaves nodes to the next one says in its Event what it
    changed. A hold ends in the run that removes the last of it: while removals are left
    (paced, or failed), an end records nothing."""
    landed = [r.patch for r in applied.results if r.outcome is Outcome.PATCHED]
    over = (Outcome.PATCHED, Outcome.SETTLED, Outcome.GONE)  # the node carries no hold of ours
    left = {r.patch.window for r in applied.results if r.patch.removed and r.outcome not in over}
    windows = {p.window for p in landed}
    added = Counter(p.window for p in landed if p.added)
    removed = Counter(p.window for p in landed if p.removed)
    ended = Reason.ENDED
    return [
        replace(t, nodes=(removed if t.reason is ended else added)[t.window.name])
        for t in transitions
        if t.window is not None
        and t.window.name in windows
        and not (t.reason is ended and t.window.name in left)
    ]


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
