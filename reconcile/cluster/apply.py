"""Applying: patches and Events through the run's pace; 409 -> read again -> decide again.

Each node changes in one patch (docs/design.md, "Patches and concurrency"); a run sends what
fits its deadline at its rate and leaves the rest to the next run; a stop starts no new patch;
workers take the next patch as they free up, so memory stays flat.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import TypeVar

from reconcile.cluster.client import Client, make_event
from reconcile.cluster.errors import (
    ApiError,
    Conflict,
    Forbidden,
    NotFound,
    TransportError,
    Unauthorized,
    Unconfirmed,
)
from reconcile.cluster.pace import DeadlineExceeded, Deferred, Interrupted, Pace, explain
from reconcile.cluster.read import read_node
from reconcile.rule.decide import NodePatch, Plan, Transition
from reconcile.rule.nodes import MalformedNode
from reconcile.rule.settings import Mode, RunSettings, format_time

log = logging.getLogger(__name__)

MAX_CONFLICTS = 5  # 409 -> re-read -> decide again, at most this many times a patch


class Outcome(StrEnum):
    PATCHED = "patched"
    SETTLED = "settled"  # re-read after a 409: nothing left to change
    GONE = "gone"  # 404: deleted in between; nothing to do
    FAILED = "failed"
    NOT_SENT = "not sent"  # stopped (SIGTERM, deadline, auth failure) before it started
    LEFT = "left"  # beyond what fits this run's deadline at its rate: the next run's, by design


FAILURES = (Outcome.FAILED, Outcome.NOT_SENT)


@dataclass(frozen=True, slots=True)  # one per node: no __dict__ each
class NodeResult:
    node: str
    outcome: Outcome
    patch: NodePatch  # the patch finally sent (after re-decisions) or planned
    conflicts: int = 0
    error: str | None = None


@dataclass(frozen=True)
class ApplyResult:
    results: tuple[NodeResult, ...]
    interrupted: bool = False
    timed_out: bool = False
    fatal: str | None = None  # 401/403: every other patch would fail the same way

    @property
    def failed(self) -> tuple[NodeResult, ...]:
        return tuple(r for r in self.results if r.outcome in FAILURES)

    @property
    def writes(self) -> int:
        return sum(1 for r in self.results if r.outcome is Outcome.PATCHED)

    @property
    def left(self) -> int:
        """Nodes left for the next run by design; not a failure."""
        return sum(1 for r in self.results if r.outcome is Outcome.LEFT)

    @property
    def stalled(self) -> bool:
        """Patches were due and none was done: neither landed, nor found settled or gone."""
        undone = (*FAILURES, Outcome.LEFT)
        return bool(self.results) and all(r.outcome in undone for r in self.results)


#: What a failed send means for the node, by error type, first match wins. None: the node
#: changed since listed (409), or the patch may or may not have landed: read it again and
#: decide again.
OUTCOMES: tuple[tuple[type[Exception], Outcome | None], ...] = (
    (NotFound, Outcome.GONE),
    (Conflict, None),
    (Unconfirmed, None),
    (ApiError, Outcome.FAILED),
    (TransportError, Outcome.FAILED),
    (Interrupted, Outcome.NOT_SENT),
    (DeadlineExceeded, Outcome.NOT_SENT),
)
SENT_ERRORS = (ApiError, TransportError, Unconfirmed, Interrupted, DeadlineExceeded)


def outcome_of(exc: Exception) -> Outcome | None:
    """What a send that raised one of SENT_ERRORS means (OUTCOMES)."""
    return next(outcome for kind, outcome in OUTCOMES if isinstance(exc, kind))


#: How a patch ended: its outcome, and why if it was not patched.
Ended = tuple[Outcome, str | None]
#: How one try ended; an outcome of None: the object changed since it was read (or the patch
#: may have landed), so read it again and decide again; the text says why.
Tried = tuple[Outcome | None, str | None]
P = TypeVar("P")


def patch_until_settled(
    planned: P,
    send: Callable[[P], Tried],
    decide_again: Callable[[P, str | None], P | Ended],
    pace: Pace,
    *,
    gave_up: str,
    refused: Sequence[str] = (),
) -> tuple[P, Ended, int]:
    """The one conflict loop, for a node's patch and a NodePool's: send (its resourceVersion a
    precondition); changed since read: read again and decide again (`decide_again`: the next
    patch, or how it ended, given why the send did not land), at most MAX_CONFLICTS times. A
    stop or a `refused` identity starts no new try (nor does the deadline: Pace.retry). Returns
    the patch last sent, how it ended (`gave_up`: the words for too many conflicts), and how
    many it met."""
    current, conflicts = planned, 0
    while True:
        outcome, why = _stopped(pace, refused) or send(current)
        if outcome is not None:
            return current, (outcome, why), conflicts
        conflicts += 1
        if conflicts > MAX_CONFLICTS:
            return current, (Outcome.FAILED, f"{gave_up} after {MAX_CONFLICTS} re-reads"), conflicts
        again = decide_again(current, why)
        if isinstance(again, tuple):
            return current, again, conflicts
        current = again


def _stopped(pace: Pace, refused: Sequence[str]) -> Ended | None:
    """A stop request or a refused identity: start nothing new. (A send that cannot start in
    time is the pace's to say: Deferred, or DeadlineExceeded for a retry.)"""
    if pace.stop.is_set():
        return Outcome.NOT_SENT, "stopped by signal"
    if refused:
        return Outcome.NOT_SENT, "not sent after the API refused our identity"
    return None


@dataclass(frozen=True)
class _Patcher:
    """Sends one node's patch; on a 409 reads the node again and decides again."""

    plan: Plan
    kube: Client
    pace: Pace
    started: float  # time.monotonic() when the plan's `now` was taken, near enough
    #: Why the API refused our identity (401, 403), the first one first: every other patch
    #: would fail the same way, so none is started after it. (list.append is thread-safe.)
    refused: list[str] = field(default_factory=list)

    def patch(self, planned: NodePatch) -> NodeResult:
        sent, (outcome, error), conflicts = patch_until_settled(
            planned,
            self._send,
            self._decide_again,
            self.pace,
            gave_up="still conflicting",
            refused=self.refused,
        )
        return NodeResult(planned.node, outcome, sent, conflicts, error)

    def _send(self, patch: NodePatch) -> Tried:
        """The patch, retried as the pace allows."""

        def send(timeout: float) -> str:
            return self.kube.patch_node(patch.node, patch.body(), timeout=timeout)

        cost = write_cost(self.plan, patch)
        try:
            self.pace.retry(send, f"node/{patch.node}: patch", write=True, cost=cost)
        except SENT_ERRORS as exc:
            if isinstance(exc, Unauthorized | Forbidden):
                self.refused.append(exc.explain())
            # Left, not failed: a node's patch is the next run's (a NodePool's is not paced).
            outcome = Outcome.LEFT if isinstance(exc, Deferred) else outcome_of(exc)
            if outcome is None:
                why = "changed since listed (409)" if isinstance(exc, Conflict) else str(exc)
                log.info("node/%s: %s; reading it again", patch.node, why)
            quiet = (None, Outcome.GONE, Outcome.LEFT)
            return outcome, None if outcome in quiet else explain(exc)
        return Outcome.PATCHED, None

    def _decide_again(self, patch: NodePatch, _why: str | None) -> NodePatch | Ended:
        """The node as it is now, decided again: the next patch, or how it ended."""
        try:
            fresh = read_node(self.kube, patch.node, self.plan, self.pace)
        except (ApiError, TransportError, MalformedNode) as exc:
            return Outcome.FAILED, explain(exc)
        except (Interrupted, DeadlineExceeded) as exc:
            return Outcome.NOT_SENT, explain(exc)
        if fresh is None:
            return Outcome.GONE, None
        # Decided at the time of the re-read: what an overlapping run wrote is not from the future.
        now = self.plan.now + timedelta(seconds=time.monotonic() - self.started)
        again = self.plan.decide_again(fresh, now)
        return again.patch if again.patch is not None else (Outcome.SETTLED, None)


def apply_plan(
    plan: Plan,
    kube: Client,
    pace: Pace,
    on_result: Callable[[NodeResult], None] | None = None,
) -> ApplyResult:
    """Send the patches of the plan, in `write_order`, at the pace's rate, until one cannot
    start in time to be answered (Deferred, RateLimiter.acquire): that one and the rest are left
    for the next run (Outcome.LEFT), so the nodes left are the last in write order (but for
    patches the other workers had already started). Never raises for a single node's failure.
    `on_result` hears each node's result as soon as it is known, one at a time: a run killed
    later still leaves those lines in its log."""
    patches = write_order(plan)
    if not patches:
        return ApplyResult(())
    patcher = _Patcher(plan, kube, pace, time.monotonic())
    results: list[NodeResult | None] = [None] * len(patches)
    upcoming = iter(enumerate(patches))
    take, report = threading.Lock(), threading.Lock()

    def work() -> None:
        while True:
            with take:
                index, patch = next(upcoming, (-1, None))
            if patch is None:
                return
            try:
                result = patcher.patch(patch)
            except Exception as exc:  # one node's surprise must not sink the others' patches
                log.debug("node/%s: unexpected error", patch.node, exc_info=True)
                error = f"{type(exc).__name__}: {exc}"
                result = NodeResult(patch.node, Outcome.FAILED, patch, error=error)
            results[index] = result
            if result.outcome is Outcome.LEFT:
                return  # the first patch left ends the sending: the later ones are left with it
            if on_result is not None:
                with report:
                    try:
                        on_result(result)
                    except Exception:  # a printing problem must not stop the patching
                        log.debug("on_result failed for node/%s", patch.node, exc_info=True)

    threads = [
        threading.Thread(target=work, name=f"patch-{n}", daemon=True)
        for n in range(max(1, min(pace.workers, len(patches))))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done = tuple(
        NodeResult(p.node, Outcome.LEFT, p) if r is None else r
        for r, p in zip(results, patches, strict=True)
    )
    return ApplyResult(
        done,
        interrupted=pace.stop.is_set(),
        timed_out=pace.deadline.expired and any(r.outcome in FAILURES for r in done),
        fatal=patcher.refused[0] if patcher.refused else None,
    )


def write_cost(plan: Plan, patch: NodePatch) -> int:
    """A hold ends at half the rate it starts at (a patch that only removes costs twice): the
    nodes go back to consolidation gently. `release` removes at the full rate."""
    ending = plan.mode is Mode.RECONCILE and patch.removed and not patch.added
    return 2 if ending else 1


def write_order(plan: Plan) -> list[NodePatch]:
    """The plan's patches, holds before releases, each youngest node first: Karpenter's
    consolidation takes empty and cheap nodes first, and from metadata the tool knows a node's
    age, not its pods; a node that just arrived is the likeliest to be near-empty."""
    patched = sorted(
        (d for d in plan.decisions if d.patch is not None), key=lambda d: d.created, reverse=True
    )
    patched.sort(key=lambda d: not d.held)  # stable: youngest first within each
    return [d.patch for d in patched if d.patch is not None]


def record_events(
    kube: Client,
    plan: Plan,
    transitions: Sequence[Transition],
    run: RunSettings,
    pace: Pace,
    describe: Callable[[Transition, Plan], str],
) -> tuple[tuple[Transition, ...], tuple[str, ...]]:
    """An Event for each transition, on its node or NodePool, in `describe`'s words; best
    effort (docs/design.md): a failure is logged and reported, and the run goes on."""
    if not run.events:
        return (), ()
    instance = socket.gethostname()
    sent, errors = [], []
    for transition in transitions:
        where = f"{transition.kind.lower()}/{transition.node}"
        try:
            event = make_event(
                kind=transition.kind,
                name=transition.node,
                uid=transition.node_uid or transition.node,
                reason=transition.reason,
                message=describe(transition, plan),
                at=format_time(plan.now),
                instance=instance,
            )
            pace.retry(
                lambda timeout, e=event: kube.create_event(e, timeout=timeout),
                f"event {transition.reason} on {where}",
            )
            sent.append(transition)
        except (ApiError, TransportError, DeadlineExceeded, Interrupted) as exc:
            text = explain(exc)
            log.warning("could not record event %s: %s", transition.reason, text)
            errors.append(f"event {transition.reason} on {where}: {text}")
    return tuple(sent), tuple(errors)
