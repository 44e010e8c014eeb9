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
from datetime import UTC, datetime

from reconcile.apply import ApplyResult, NodeResult, Pool, apply_plan, record_events
from reconcile.decide import Mode, NodeView, Plan, Transition, decide
from reconcile.kube import (
    FIRST_PAGE,
    ApiError,
    Kube,
    MalformedNode,
    Page,
    TransportError,
    gc_paused,
)
from reconcile.retry import Backoff, Deadline, DeadlineExceeded, Interrupted, RateLimiter
from reconcile.settings import OWNERSHIP_MARKER, Clock, HoldSettings, RunSettings

log = logging.getLogger(__name__)

LIST_RESTARTS = 3  # a continue token that expired (410) restarts the list this often


class ListFailed(Exception):
    """The whole node list could not be read; nothing was changed."""


@dataclass(frozen=True)
class Listing:
    nodes: list[NodeView]
    now: datetime
    clock: str  # "server" (Date header) or "local"
    pages: int
    restarts: int


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


def read_nodes(kube: Kube, hold: HoldSettings, run: RunSettings, pool: Pool) -> Listing:
    """The whole list or an exception: a partial list is never returned."""
    annotation_keys = frozenset(hold.annotations) | {OWNERSHIP_MARKER}
    label_keys = hold.label_keys
    restarts = 0
    while True:
        nodes: list[NodeView] = []
        pages = 0
        server_now: datetime | None = None
        token: str | None = None
        size = min(run.page_size, FIRST_PAGE)  # then sized to the bytes of the last page
        try:
            while True:
                if pool.stop.is_set():
                    raise Interrupted("list")

                def page(timeout: float, token: str | None = token, size: int = size) -> Page:
                    return kube.list_page(
                        page_size=size,
                        annotation_keys=annotation_keys,
                        label_keys=label_keys,
                        continue_token=token,
                        timeout=timeout,
                        max_page_size=run.page_size,
                    )

                got = pool.retry(page, "list nodes")
                nodes.extend(got.nodes)
                pages += 1
                server_now = got.date
                token = got.continue_token
                size = got.next_page_size or size
                if not token:
                    break
        except ApiError as exc:
            if exc.status == 410 and restarts < LIST_RESTARTS:
                restarts += 1
                log.info("node list expired mid-way (410 Gone); starting the list again")
                continue
            raise ListFailed(f"cannot list nodes: {exc.explain()}; nothing was changed") from None
        except TransportError as exc:
            raise ListFailed(f"cannot list nodes: {exc}; nothing was changed") from None
        except MalformedNode as exc:
            # One node we cannot decide on makes the whole decision unsafe (is it the youngest?).
            raise ListFailed(
                f"cannot decide: {exc}; fix or delete that node; nothing was changed"
            ) from None
        except DeadlineExceeded:
            raise ListFailed(
                "cannot list nodes within --timeout (NODE_HOLDER_TIMEOUT); nothing was changed"
            ) from None
        break
    if run.clock is Clock.SERVER and server_now is not None:
        now, clock = server_now, "server"
    else:
        if run.clock is Clock.SERVER:
            log.warning("the API server sent no Date header; deciding with the local clock")
        now, clock = datetime.now(UTC), "local"
    return Listing(nodes, now, clock, pages, restarts)


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
    kube: Kube,
    hold: HoldSettings,
    run: RunSettings,
    *,
    mode: Mode = Mode.RECONCILE,
    write: bool = True,
    stop: threading.Event | None = None,
    backoff: Backoff | None = None,
    on_result: Callable[[NodeResult], None] | None = None,
) -> RunResult:
    """List, decide and (unless dry-run or `write=False`) patch and record Events.

    Raises ListFailed when the node list is incomplete or a node cannot be
    decided on; Interrupted on SIGTERM before anything was written. `backoff`
    is for tests that inject many faults and must not wait the real pauses;
    `on_result` sees each node's result as its patch lands (see apply_plan).
    """
    stop = stop or threading.Event()
    kube.stop_on(stop)
    pool = make_pool(run, stop, kube.request_timeout, backoff)
    with gc_paused():  # tens of thousands of records that live to the end: nothing to collect
        listing = read_nodes(kube, hold, run, pool)
        plan = decide(listing.nodes, listing.now, hold, mode)
    del listing.nodes[:]  # the plan keeps what it needs; let the views go
    if run.dry_run or not write:
        return RunResult(plan, listing, dry_run=True, requests=kube.requests)

    annotation_keys = frozenset(hold.annotations) | {OWNERSHIP_MARKER}

    def reread(name: str, timeout: float) -> NodeView | None:
        return kube.read_node(
            name, annotation_keys=annotation_keys, label_keys=hold.label_keys, timeout=timeout
        )

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
    )
