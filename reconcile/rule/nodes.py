"""Node views: the few facts about a node that the decision reads, from its metadata (a few
hundred bytes instead of ~10 KB), and the ownership marker. A node whose creationTimestamp
cannot be read is refused: the decision could not tell whether it is the youngest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from reconcile.rule.settings import DEFAULT_GROUP_LABEL, KEPT_ANNOTATIONS, OWNERSHIP_MARKER, PINNED


class MalformedNode(Exception):
    """A node whose metadata cannot be decided on (e.g. an unparseable timestamp)."""


@dataclass(frozen=True, slots=True)  # one per node: no __dict__ each
class NodeView:
    """The few facts about a node that the decision needs."""

    name: str
    created: datetime
    resource_version: str = ""
    uid: str = ""
    deleting: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: Launched by a Karpenter NodeClaim whose NodePool label has not arrived yet
    #: (registration copies it a few seconds later, or much later when it is delayed).
    registering: bool = False


def claimed_keys(annotations: Mapping[str, str], marker: str = OWNERSHIP_MARKER) -> frozenset[str]:
    """Keys the ownership marker says this tool set (or, with `marker=PINNED`, the pins)."""
    raw = annotations.get(marker, "")
    if not raw:
        return _NO_KEYS  # most nodes: no marker (a steady run reads every node)
    return frozenset(k.strip() for k in raw.split(",") if k.strip())


def pinned_keys(annotations: Mapping[str, str]) -> frozenset[str]:
    """Hold keys a person pinned on this node: never added, removed or claimed by a run."""
    return claimed_keys(annotations, PINNED)


def _registering(metadata: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Owned by a karpenter.sh NodeClaim, and without the NodePool label Karpenter copies."""
    owners = metadata.get("ownerReferences")
    if DEFAULT_GROUP_LABEL in labels or not isinstance(owners, list):
        return False
    return any(
        isinstance(o, dict)
        and o.get("kind") == "NodeClaim"
        and str(o.get("apiVersion", "")).startswith("karpenter.sh/")
        for o in owners
    )


_NO_KEYS: frozenset[str] = frozenset()
#: Shared by every node without labels or annotations the decision reads (most nodes).
_EMPTY: Mapping[str, str] = MappingProxyType({})


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


@lru_cache(maxsize=8)  # the same keys for every node of a run
def _kept_keys(annotation_keys: frozenset[str]) -> frozenset[str]:
    return annotation_keys.union(KEPT_ANNOTATIONS)


def node_view(
    metadata: Mapping[str, Any], annotation_keys: frozenset[str], label_keys: frozenset[str]
) -> NodeView:
    """Keep only what the decision reads: a few hundred bytes instead of ~10 KB."""
    name = str(metadata.get("name", ""))
    annotations = metadata.get("annotations") or _EMPTY
    labels = metadata.get("labels") or _EMPTY
    keep = _kept_keys(annotation_keys)
    if OWNERSHIP_MARKER in annotations or PINNED in annotations:
        keep = keep.union(claimed_keys(annotations), pinned_keys(annotations))
    kept_labels = {k: labels[k] for k in label_keys if k in labels} if label_keys else None
    kept = {k: annotations[k] for k in keep.intersection(annotations)}
    return NodeView(
        name=name,
        created=parse_timestamp(metadata.get("creationTimestamp"), name),
        resource_version=str(metadata.get("resourceVersion", "")),
        uid=str(metadata.get("uid", "")),
        deleting=bool(metadata.get("deletionTimestamp")),
        labels=kept_labels or _EMPTY,
        annotations=kept or _EMPTY,
        registering=_registering(metadata, labels),
    )
