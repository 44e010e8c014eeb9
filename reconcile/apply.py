"""Applying: patches and Events. Bounded workers, rate limit, retries, 409 -> re-read -> decide.

Each node changes in exactly one patch (hold annotation and ownership marker
together), so a run killed at any moment leaves every node consistent. A stop
request (SIGTERM) or the deadline lets in-flight patches finish and starts no
new ones. Patches are handed to workers as they free up, never queued all at
once: memory stays flat whatever the number of nodes.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from reconcile.client import (
    ApiError,
    Client,
    Conflict,
    Forbidden,
    NotFound,
    TransportError,
    Unauthorized,
    Unconfirmed,
    node_event,
)
from reconcile.decide import NodePatch, Plan, Transition
from reconcile.nodes import MalformedNode, NodeView
from reconcile.retry import Backoff, Deadline, DeadlineExceeded, Interrupted, RateLimiter, retrying
from reconcile.settings import RunSettings

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_CONFLICTS = 5  # 409 -> re-read -> decide again, at most this many times per node


class Outcome(StrEnum):
    PATCHED = "patched"
    SETTLED = "settled"  # re-read after a 409: nothing left to change
    GONE = "gone"  # 404: deleted in between; nothing to do
    FAILED = "failed"
    NOT_SENT = "not sent"  # stopped (SIGTERM, deadline, auth failure) before it started


@dataclass(frozen=True, slots=True)  # one per node: no __dict__ each
class NodeResult:
    node: str
    outcome: Outcome
    patch: NodePatch  # the patch finally sent (after re-decisions) or planned
    attempts: int = 0
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
        return tuple(r for r in self.results if r.outcome in (Outcome.FAILED, Outcome.NOT_SENT))

    @property
    def writes(self) -> int:
        return sum(1 for r in self.results if r.outcome is Outcome.PATCHED)


@dataclass(frozen=True)
class Pool:
    """How hard a run may push: workers, QPS, retries, time."""

    workers: int
    limiter: RateLimiter
    backoff: Backoff
    deadline: Deadline
    stop: threading.Event
    request_timeout: float

    def retry(self, call: Callable[[float], T], what: str) -> T:
        """`retrying()` under this run's backoff, deadline, stop flag and request timeout."""
        return retrying(
            call,
            what=what,
            backoff=self.backoff,
            deadline=self.deadline,
            stop=self.stop,
            request_timeout=self.request_timeout,
        )


class _Abort:
    """Set once by the first 401/403: the identity cannot write, so stop trying."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._lock = threading.Lock()

    def set(self, reason: str) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason


def _patch_node(
    plan: Plan,
    *,
    patch: NodePatch,
    kube: Client,
    pool: Pool,
    reread: Callable[[str, float], NodeView | None],
    abort: _Abort,
) -> NodeResult:
    attempts = conflicts = 0
    current = patch

    def result(outcome: Outcome, error: str | None = None) -> NodeResult:
        return NodeResult(patch.node, outcome, current, attempts, conflicts, error)

    while True:
        if pool.stop.is_set():
            return result(Outcome.NOT_SENT, "stopped by signal")
        if pool.deadline.expired:
            return result(Outcome.NOT_SENT, "run timeout reached")
        if abort.reason:
            return result(Outcome.NOT_SENT)
        try:
            pool.limiter.acquire(pool.deadline, pool.stop)
            attempts += 1

            def send(timeout: float, p: NodePatch = current) -> str:
                return kube.patch_node(p.node, p.body(), timeout=timeout)

            pool.retry(send, f"node/{patch.node}: patch")
            return result(Outcome.PATCHED)
        except NotFound:
            return result(Outcome.GONE)
        except (Unauthorized, Forbidden) as exc:
            abort.set(exc.explain())
            return result(Outcome.FAILED, exc.explain())
        except (Conflict, Unconfirmed) as exc:
            # The node changed after we listed it, or we cannot tell whether the patch
            # landed: either way, read it again and decide again (below).
            why = "changed since listed (409)" if isinstance(exc, Conflict) else str(exc)
        except ApiError as exc:
            return result(Outcome.FAILED, exc.explain())
        except TransportError as exc:
            return result(Outcome.FAILED, str(exc))
        except (Interrupted, DeadlineExceeded) as exc:
            why = "stopped by signal" if isinstance(exc, Interrupted) else "run timeout reached"
            return result(Outcome.NOT_SENT, why)
        conflicts += 1
        if conflicts > MAX_CONFLICTS:
            return result(Outcome.FAILED, f"still conflicting after {MAX_CONFLICTS} re-reads")
        log.info("node/%s: %s; reading it again", patch.node, why)
        try:
            fresh = pool.retry(
                lambda timeout: reread(patch.node, timeout), f"node/{patch.node}: get"
            )
        except (ApiError, TransportError, MalformedNode) as exc:
            return result(Outcome.FAILED, exc.explain() if isinstance(exc, ApiError) else str(exc))
        except (Interrupted, DeadlineExceeded):
            return result(Outcome.NOT_SENT)
        if fresh is None:
            return result(Outcome.GONE)
        again = plan.decide_again(fresh)
        if again.patch is None:
            return result(Outcome.SETTLED)
        current = again.patch


def _patch_node_safely(plan: Plan, *, patch: NodePatch, **kw: Any) -> NodeResult:
    """One node's surprise (say, an unreadable answer) must not sink the other nodes' patches."""
    try:
        return _patch_node(plan, patch=patch, **kw)
    except Exception as exc:
        log.debug("node/%s: unexpected error", patch.node, exc_info=True)
        return NodeResult(patch.node, Outcome.FAILED, patch, error=f"{type(exc).__name__}: {exc}")


def apply_plan(
    plan: Plan,
    kube: Client,
    pool: Pool,
    reread: Callable[[str, float], NodeView | None],
    on_result: Callable[[NodeResult], None] | None = None,
) -> ApplyResult:
    """Send every patch of the plan; never raises for a single node's failure.

    `workers` threads each take the next patch when they are free, so only the patches in
    flight exist as pending work (not one queued task per node). `on_result` is called once
    per node as soon as its result is known, one call at a time, so that a report can print
    each line as its patch lands (a run killed later still leaves those lines in its log).
    """
    patches = plan.patches
    if not patches:
        return ApplyResult(())
    abort = _Abort()
    results: list[NodeResult | None] = [None] * len(patches)
    upcoming = iter(enumerate(patches))
    take, report = threading.Lock(), threading.Lock()

    def work() -> None:
        while True:
            with take:
                index, patch = next(upcoming, (-1, None))
            if patch is None:
                return
            result = _patch_node_safely(
                plan, patch=patch, kube=kube, pool=pool, reread=reread, abort=abort
            )
            results[index] = result
            if on_result is not None:
                with report:
                    try:
                        on_result(result)
                    except Exception:  # a printing problem must not stop the patching
                        log.debug("on_result failed for node/%s", patch.node, exc_info=True)

    threads = [
        threading.Thread(target=work, name=f"patch-{n}", daemon=True)
        for n in range(max(1, min(pool.workers, len(patches))))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done = tuple(r for r in results if r is not None)
    return ApplyResult(
        done,
        interrupted=pool.stop.is_set(),
        timed_out=pool.deadline.expired and any(r.outcome is Outcome.NOT_SENT for r in done),
        fatal=abort.reason,
    )


def record_events(
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
