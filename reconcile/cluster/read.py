"""Reading the cluster: the whole node list, or the named nodes, as compact node views.

A run that cannot see every node it decides on changes nothing: `read_nodes` returns every
node (or, for pin and unpin, each named one: a GET each, no list) or raises `ListFailed`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconcile.cluster.client import Client, Page
from reconcile.cluster.errors import ApiError, Gone, NotFound, TransportError
from reconcile.cluster.pace import DeadlineExceeded, Interrupted, Pace, explain
from reconcile.rule.decide import Plan
from reconcile.rule.nodes import MalformedNode, NodePoolSettings, NodeView, node_view
from reconcile.rule.settings import HoldSettings, RunSettings

log = logging.getLogger(__name__)

LIST_RESTARTS = 3  # a continue token that expired (410) restarts the list this often
#: A list page is sized to hold about this many bytes (at most --page-size nodes): memory
#: follows the page size in bytes, not the size of the annotations people put on nodes.
PAGE_BYTES = 4 * 2**20
FIRST_PAGE = 20  # nodes in the first page, before anything is known about their size
MIN_PAGE = 10


def fitting_page_size(nodes: int, body_bytes: int, max_page_size: int) -> int:
    """How many nodes fit PAGE_BYTES, judging by a page of `nodes` nodes and `body_bytes`."""
    per_node = body_bytes / max(nodes, 1)
    fit = int(PAGE_BYTES / per_node) if per_node else max_page_size
    return max(min(fit, max_page_size), min(MIN_PAGE, max_page_size))


class ListFailed(Exception):
    """The nodes to decide on could not all be read; nothing was changed."""


@dataclass(frozen=True)
class Listing:
    nodes: list[NodeView]
    now: datetime
    clock: str  # "server" (Date header) or "local"
    pages: int  # list pages read (none for named nodes)


#: A node's metadata as the compact view the decision reads.
View = Callable[[dict[str, Any]], NodeView]


def _viewer(hold: HoldSettings, nodepool_settings: NodePoolSettings) -> View:
    """Views that keep the annotations and labels the decision reads (and this tool's own
    annotations: nodes.node_view), with their NodePool's own hold settings."""
    annotations, labels = frozenset(hold.annotations), hold.label_keys
    return lambda metadata: node_view(metadata, annotations, labels, nodepool_settings)


def read_nodes(
    kube: Client,
    hold: HoldSettings,
    run: RunSettings,
    pace: Pace,
    nodepool_settings: NodePoolSettings,
) -> Listing:
    """Every node, or with `run.only` (pin, unpin) the named ones that exist, or an
    exception: a partial reading is never returned."""
    view = _viewer(hold, nodepool_settings)
    doing = "read the named nodes" if run.only else "list nodes"
    restarts = 0
    while True:
        try:
            if run.only:
                nodes, pages, server_now = _named(kube, view, run.only, pace)
            else:
                nodes, pages, server_now = _all_pages(kube, view, run, pace)
            break
        except Gone as exc:
            if restarts >= LIST_RESTARTS:
                raise _failed(exc, doing) from None
            restarts += 1
            log.info("node list expired mid-way (410 Gone); starting the list again")
        except (ApiError, TransportError, MalformedNode, DeadlineExceeded) as exc:
            raise _failed(exc, doing) from None
    if server_now is not None:
        return Listing(nodes, server_now, "server", pages)
    if nodes:
        log.warning("the API server sent no Date header; deciding with the local clock")
    return Listing(nodes, datetime.now(UTC), "local", pages)


def _all_pages(
    kube: Client, view: View, run: RunSettings, pace: Pace
) -> tuple[list[NodeView], int, datetime | None]:
    """Every page once, from the first: the node views, the page count, the last Date."""
    nodes: list[NodeView] = []
    pages = 0
    token: str | None = None
    size = min(run.page_size, FIRST_PAGE)  # then sized to the bytes of the last page
    while True:
        if pace.stop.is_set():
            raise Interrupted("list")

        def page(timeout: float, token: str | None = token, size: int = size) -> Page:
            return kube.list_nodes(limit=size, continue_token=token, timeout=timeout)

        got = pace.retry(page, "list nodes")
        # run_once pauses the cyclic GC while it reads: nothing here is cyclic garbage.
        nodes.extend(view(m) for m in got.items)
        size = fitting_page_size(len(got.items) or size, got.size, run.page_size)
        del got.items[:]
        pages += 1
        token = got.continue_token
        if not token:
            return nodes, pages, got.date


def _named(
    kube: Client, view: View, names: tuple[str, ...], pace: Pace
) -> tuple[list[NodeView], int, datetime | None]:
    """Each named node that exists, one GET each: a pin costs no list page."""
    nodes: list[NodeView] = []
    server_now: datetime | None = None
    for name in names:
        found = _get(kube, name, pace)
        if found is not None:
            nodes.append(view(found.items[0]))
            server_now = found.date or server_now
    return nodes, 0, server_now


def _failed(exc: Exception, doing: str) -> ListFailed:
    """One line for the run's error: why the nodes are not all read, and that nothing changed."""
    if isinstance(exc, MalformedNode):
        # One node we cannot decide on makes the whole decision unsafe (is it the youngest?).
        return ListFailed(f"cannot decide: {exc}; fix or delete that node; nothing was changed")
    if isinstance(exc, DeadlineExceeded):
        return ListFailed(
            f"cannot {doing} within --timeout (NODE_HOLDER_TIMEOUT); nothing was changed"
        )
    return ListFailed(f"cannot {doing}: {explain(exc)}; nothing was changed")


def read_node(kube: Client, name: str, plan: Plan, pace: Pace) -> NodeView | None:
    """One node read again (after a 409), as the run read it; None if it is gone."""
    found = _get(kube, name, pace)
    view = _viewer(plan.hold, plan.observed.nodepool_settings or {})
    return None if found is None else view(found.items[0])


def _get(kube: Client, name: str, pace: Pace) -> Page | None:
    """One node by name with the pace's retries; None if it does not exist."""
    try:
        return pace.retry(lambda timeout: kube.get_node(name, timeout=timeout), f"node/{name}: get")
    except NotFound:
        return None
