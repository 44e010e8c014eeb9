"""Node views: the few facts about a node that the decision reads, from its metadata (a few
hundred bytes instead of ~10 KB), its NodePool's own hold settings, and the ownership marker.
A node whose creationTimestamp cannot be read is refused: the decision could not tell whether
it is the youngest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from types import MappingProxyType
from typing import Any, NamedTuple

from reconcile.rule.settings import (
    DEFAULT_GROUP_LABEL,
    KEPT_ANNOTATIONS,
    NODE_HOLD,
    NODE_MAX_HOLD,
    OWNERSHIP_MARKER,
    PINNED,
    Invalid,
    parse_duration,
)


class MalformedNode(Exception):
    """A node whose metadata cannot be decided on (e.g. an unparseable timestamp)."""


class NodePoolOwn(NamedTuple):
    """A NodePool's own hold settings as written in its metadata.annotations (None: not
    given), shared by its nodes' views; decide.own_settings reads them."""

    pool: str
    hold: str | None  # NODE_HOLD
    cap: str | None  # NODE_MAX_HOLD


#: Every NodePool a run listed -> its own hold settings (None: it gives none).
NodePoolSettings = Mapping[str, NodePoolOwn | None]

#: Shared by every node without labels or annotations the decision reads (most nodes).
_EMPTY: Mapping[str, str] = MappingProxyType({})


class NodeView(NamedTuple):
    """The few facts about a node that the decision needs. A named tuple, not a frozen
    dataclass: immutable too, and built per node every run at a fifth of the cost (a frozen
    __init__ sets each field through object.__setattr__)."""

    name: str
    created: datetime
    resource_version: str = ""
    uid: str = ""
    deleting: bool = False
    labels: Mapping[str, str] = _EMPTY
    annotations: Mapping[str, str] = _EMPTY
    #: Launched by a Karpenter NodeClaim whose NodePool label has not arrived yet
    #: (registration copies it a few seconds later, or much later when it is delayed).
    registering: bool = False
    own: NodePoolOwn | None = None  # its NodePool's own hold settings (None: the configured)


@lru_cache(maxsize=256)  # a few values in a cluster, each read on many nodes
def parse_own(key: str, text: str) -> tuple[timedelta | None, str | None]:
    """One NODE_HOLD or NODE_MAX_HOLD value, in the options' grammar: the hold as
    --hold-duration or "0" (never holds), the cap as --max-hold or empty (no cap).
    Returns (value, None) or (None, why it is not used)."""
    try:
        if key == NODE_HOLD:
            zero = text.strip() == "0"
            return (timedelta(0) if zero else parse_duration(text, bare_minutes=True)), None
        return (parse_duration(text) if text.strip() else None), None
    except Invalid as exc:
        return None, f"{key}={shown(text)} {exc.problem}"


def shown(raw: str) -> str:
    """A value as a report line quotes it: cut short (anyone who edits a NodePool writes it)."""
    return repr(raw if len(raw) <= 40 else raw[:40] + "...")


def claimed_keys(annotations: Mapping[str, str], marker: str = OWNERSHIP_MARKER) -> frozenset[str]:
    """Keys the ownership marker says this tool set (or, with `marker=PINNED`, the pins)."""
    raw = annotations.get(marker, "")
    if not raw:
        return _NO_KEYS  # most nodes: no marker (a steady run reads every node)
    return frozenset(k.strip() for k in raw.split(",") if k.strip())


def pinned_keys(annotations: Mapping[str, str]) -> frozenset[str]:
    """Hold keys a person pinned on this node: never added, removed or claimed by a run."""
    return claimed_keys(annotations, PINNED)


def _claimed(metadata: Mapping[str, Any]) -> bool:
    """Owned by a karpenter.sh NodeClaim."""
    owners = metadata.get("ownerReferences")
    if not isinstance(owners, list):
        return False
    return any(
        isinstance(o, dict)
        and o.get("kind") == "NodeClaim"
        and str(o.get("apiVersion", "")).startswith("karpenter.sh/")
        for o in owners
    )


_NO_KEYS: frozenset[str] = frozenset()


def parse_timestamp(raw: Any, node: str) -> datetime:
    """A node's creationTimestamp as an aware UTC datetime, or MalformedNode naming the node.
    Only the API server writes it (RFC 3339, `2026-11-22T20:41:22Z`): no stricter check."""
    if not raw:
        raise MalformedNode(f"node/{node}: creationTimestamp is missing")
    try:
        moment = datetime.fromisoformat(raw)
        return moment if moment.tzinfo is UTC else moment.astimezone(UTC)
    except (TypeError, ValueError, OverflowError):  # month 13, hour 25, a number
        raise MalformedNode(
            f"node/{node}: creationTimestamp {raw!r} is not an RFC 3339 time"
        ) from None


def nodepool_settings(nodepools: Iterable[Mapping[str, Any]]) -> NodePoolSettings:
    """Each NodePool listed, with the hold settings in its own metadata.annotations."""
    found: dict[str, NodePoolOwn | None] = {}
    for pool in nodepools:
        meta = pool.get("metadata") or {}
        name, annotations = str(meta.get("name", "")), meta.get("annotations") or {}
        hold, cap = annotations.get(NODE_HOLD), annotations.get(NODE_MAX_HOLD)  # (text: the API's)
        found[name] = None if hold is None and cap is None else NodePoolOwn(name, hold, cap)
    return found


def _copied(value: Any) -> str:
    """A string of the view's own, not one of the parsed page's: views that hold on to the
    page's small strings (three a node) leave its memory in pieces, and parsing every later
    page gets slower (at 50,000 nodes, 0.4 s of CPU more than the copies cost)."""
    return "".join((str(value), ""))  # join copies whenever it joins two or more


@lru_cache(maxsize=8)  # the same keys for every node of a run
def _kept_keys(annotation_keys: frozenset[str]) -> frozenset[str]:
    return annotation_keys.union(KEPT_ANNOTATIONS)


def node_view(
    metadata: Mapping[str, Any],
    annotation_keys: frozenset[str],
    label_keys: frozenset[str],
    nodepools: NodePoolSettings = _EMPTY,
) -> NodeView:
    """Keep only what the decision reads: a few hundred bytes instead of ~10 KB, and its
    NodePool's own hold settings (`nodepools`). A node that carries those settings itself
    keeps its NodePool label, for the line that says they are not read there."""
    name = _copied(metadata.get("name", ""))
    annotations = metadata.get("annotations") or _EMPTY
    labels = metadata.get("labels") or _EMPTY
    keep = _kept_keys(annotation_keys)
    if OWNERSHIP_MARKER in annotations or PINNED in annotations:
        keep = keep.union(claimed_keys(annotations), pinned_keys(annotations))
    kept_labels = {k: labels[k] for k in label_keys if k in labels} if label_keys else None
    found = keep.intersection(annotations)  # most nodes: none
    kept = {k: annotations[k] for k in found} if found else None
    pool = labels.get(DEFAULT_GROUP_LABEL)
    if kept and pool is not None and not _NODEPOOL_KEYS.isdisjoint(kept):
        kept_labels = {**(kept_labels or {}), DEFAULT_GROUP_LABEL: pool}
    return NodeView(  # by position: one per node, and keywords cost about 0.4 µs a call more
        name,
        parse_timestamp(metadata.get("creationTimestamp"), name),
        _copied(metadata.get("resourceVersion", "")),
        _copied(metadata.get("uid", "")),
        bool(metadata.get("deletionTimestamp")),
        kept_labels or _EMPTY,
        kept or _EMPTY,
        # registering: a Karpenter node whose NodePool label has not arrived yet
        pool is None and _claimed(metadata),
        nodepools.get(pool) if pool is not None else None,
    )


_NODEPOOL_KEYS = frozenset((NODE_HOLD, NODE_MAX_HOLD))
