"""NodePools: read once a run for their own hold settings and the budget mechanism
(reconcile/rule/budget.py); send each budget change as one JSON Patch; a failed `test` (422)
reads it again and decides again, as a 409 on a node."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from reconcile.cluster.apply import (
    SENT_ERRORS,
    Ended,
    Outcome,
    Tried,
    outcome_of,
    patch_until_settled,
)
from reconcile.cluster.client import Client
from reconcile.cluster.errors import ApiError, Forbidden, NotFound, TransportError
from reconcile.cluster.pace import DeadlineExceeded, Pace, explain
from reconcile.cluster.read import ListFailed
from reconcile.rule import budget
from reconcile.rule.budget import PoolPatch, PoolView, decide_pool, pool_view
from reconcile.rule.decide import Plan
from reconcile.rule.nodes import NodePoolSettings, nodepool_settings
from reconcile.rule.settings import HoldSettings, Mechanism, Mode, RunSettings


@dataclass(frozen=True)
class PoolResult:
    patch: PoolPatch  # the one finally sent (after re-decisions), or planned
    outcome: Outcome
    error: str | None = None
    #: auto: the entry could not be made (why: `error`), so this run holds the NodePool's nodes
    #: by annotation instead; not a failure of the run.
    fallback: bool = False


@dataclass(frozen=True)
class Pools:
    """The NodePools one run read, the changes it plans on them, and how they landed."""

    views: tuple[PoolView, ...] = ()
    #: Every NodePool listed, with its own hold settings; None: not read
    nodepool_settings: NodePoolSettings | None = None
    unread: str | None = None  # not read (no CRD: 404; no RBAC: 403): why
    unreadable: str | None = None  # release without the rights to read them: why
    patches: tuple[PoolPatch, ...] = ()
    results: tuple[PoolResult, ...] = ()

    @property
    def failed(self) -> tuple[PoolResult, ...]:
        return tuple(
            r
            for r in self.results
            if r.outcome in (Outcome.FAILED, Outcome.NOT_SENT) and not r.fallback
        )

    @property
    def fallbacks(self) -> tuple[PoolResult, ...]:
        """auto: the NodePools whose entry could not be made, their nodes held by annotation."""
        return tuple(r for r in self.results if r.fallback)


def read_pools(kube: Client, hold: HoldSettings, run: RunSettings, pace: Pace) -> Pools:
    """Every NodePool, one list a run: their own hold settings, and for budgets and release
    their spec (else their metadata alone). Pin and unpin read none. No NodePool API (404) or
    no right to list them (403): the settings are the options', said once.
    Any other failure: the run changes nothing (ListFailed), as for the node list; going on
    with the options could end a NodePool's longer hold early."""
    if run.only:
        return Pools()  # pin, unpin: no hold settings, no mechanism
    whole = run.mode is Mode.RELEASE or hold.mechanism.budgets
    try:
        items = pace.retry(
            lambda timeout: kube.list_nodepools(metadata_only=not whole, timeout=timeout),
            "list nodepools",
        )
    except (ApiError, TransportError, DeadlineExceeded) as exc:
        refused = isinstance(exc, Forbidden)
        if run.mode is Mode.RELEASE and (refused or isinstance(exc, NotFound)):
            return Pools(unreadable=explain(exc) if refused else None)
        if isinstance(exc, NotFound) or (refused and not hold.mechanism.budgets):
            return Pools(unread=explain(exc))
        raise ListFailed(f"cannot list NodePools: {explain(exc)}; nothing was changed") from None
    views = tuple(pool_view(item) for item in items) if whole else ()
    return Pools(views, nodepool_settings(items))


def apply_pools(
    pools: Pools, plan: Plan, kube: Client, pace: Pace, on_result: Callable[[PoolResult], None]
) -> Pools:
    """Each NodePool's patch, one after the other (a few); `on_result` hears each as it lands."""
    results = []
    for patch in pools.patches:
        results.append(_send(patch, plan, kube, pace))
        on_result(results[-1])
    return replace(pools, results=tuple(results))


def _send(patch: PoolPatch, plan: Plan, kube: Client, pace: Pace) -> PoolResult:
    """One NodePool's patch, through the conflict loop nodes use: a failed `test` (422) or an
    unreadable answer reads it again and decides again; if it had not changed, the 422 was no
    failed `test` (the CRD's validation, an admission policy) and the patch failed; if it shows
    the patch landed (a 504 after the write), it landed. Then the entry as stored must be the
    entry as sent (see `_withdraw`). In auto, an entry that cannot be made is a fallback."""
    name = patch.pool.name
    stored: list[PoolView] = []  # the NodePool as the last answer or re-read showed it

    def send(change: PoolPatch) -> Tried:
        try:
            ops = change.body()
            answer = pace.retry(
                lambda t: kube.nodepool(name, ops, timeout=t), f"nodepool/{name}: patch", write=True
            )
        except SENT_ERRORS as exc:
            tested = isinstance(exc, ApiError) and exc.status == 422
            return None if tested else outcome_of(exc), explain(exc)
        stored.append(pool_view(answer))
        return Outcome.PATCHED, None

    def decide_again(sent: PoolPatch, why: str | None) -> PoolPatch | Ended:
        try:
            found = pace.retry(lambda t: kube.nodepool(name, timeout=t), f"nodepool/{name}: get")
        except SENT_ERRORS as exc:
            return outcome_of(exc) or Outcome.FAILED, explain(exc)
        fresh = pool_view(found)
        if budget.landed(sent, fresh):
            stored.append(fresh)
            return Outcome.PATCHED, None
        again = decide_pool(fresh, plan)
        if again is None or fresh == sent.pool:
            return Outcome.FAILED if again else Outcome.SETTLED, why
        return again

    last, (outcome, error), _ = patch_until_settled(
        patch, send, decide_again, pace, gave_up="still changing"
    )
    result = PoolResult(last, outcome, error)
    if outcome is Outcome.PATCHED and (why := budget.lost(last, stored[-1])):
        result = _withdraw(result, stored[-1], why, kube, pace)
    making = last.entry is not None and result.outcome in (Outcome.FAILED, Outcome.GONE)
    return replace(result, fallback=making and plan.hold.mechanism is Mechanism.AUTO)


def _withdraw(
    result: PoolResult, stored: PoolView, why: str, kube: Client, pace: Pace
) -> PoolResult:
    """An entry that landed but is not in the list as sent (a conversion webhook dropped it or
    its reasons: Karpenter before v1.0) is removed again by value, with the record: the
    NodePool cannot take the mechanism, and the result fails saying so."""
    undo = budget.withdraw(stored, result.patch.window)
    name = undo.pool.name
    try:
        ops = undo.body()
        pace.retry(
            lambda t: kube.nodepool(name, ops, timeout=t), f"nodepool/{name}: patch", write=True
        )
        why += "; the entry was removed again"
    except SENT_ERRORS as exc:
        why += f"; removing it again failed ({explain(exc)}), the next run or release will"
    why += (
        ": Karpenter v0.33.6 to v0.37.x store NodePools as v1beta1 and cannot take a budget "
        "entry; use --mechanism annotation (or auto) until Karpenter v1.0"
    )
    return replace(result, outcome=Outcome.FAILED, error=why)
