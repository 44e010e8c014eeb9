"""The NodePool-budget mechanism (`--mechanism budget|auto`): which NodePools carry this
tool's budget entry, the entry, and the JSON Patch that adds, extends or removes it. Pure.
The entry, its ownership and a revert: docs/design.md, "NodePool budgets (`--mechanism`)".
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconcile.rule.decide import HoldWindow, Plan, Reason, Transition, holds_ours
from reconcile.rule.nodes import NodeView
from reconcile.rule.settings import DEFAULT_GROUP_LABEL, HoldSettings, Mechanism, Mode, Scope

#: On a NodePool: the budget entry node-holder added, as compact JSON with sorted keys.
ENTRY_KEY = "node-holder.dev/budget"
REASONS = ("Empty", "Underutilized")  # consolidation only: drift and expiration go on
BUDGETS = "/spec/disruption/budgets"
_KEY_PATH = "/metadata/annotations/" + ENTRY_KEY.replace("~", "~0").replace("/", "~1")
_EVENTS = {"add": Reason.STARTED, "extend": Reason.EXTENDED, "remove": Reason.ENDED}


def budget_entry(start: datetime, until: datetime) -> dict[str, Any]:
    """The entry for a hold from `start` to `until` (UTC): active from the minute of `start`
    until at least `until`."""
    start = start.replace(second=0, microsecond=0)
    minutes = max(1, math.ceil((until - start) / timedelta(minutes=1)))
    hours, rest = divmod(minutes, 60)
    duration = (f"{hours}h" if hours else "") + (f"{rest}m" if rest or not hours else "")
    schedule = f"{start.minute} {start.hour} {start.day} {start.month} *"
    return {"duration": duration, "nodes": "0", "reasons": list(REASONS), "schedule": schedule}


def _named(value: str | None) -> dict[str, Any] | None:
    """The entry an ENTRY_KEY value names, if it is one this tool writes."""
    try:
        entry = json.loads(value) if value else None
    except ValueError:
        return None
    ours = isinstance(entry, dict) and set(entry) == {"duration", "nodes", "reasons", "schedule"}
    return entry if ours and entry["nodes"] == "0" and entry["reasons"] == list(REASONS) else None


def stripped(entry: Mapping[str, Any]) -> dict[str, Any]:
    """`entry` as Karpenter v0.34 to v0.37 store it: their v1beta1 budgets have no `reasons`,
    so their conversion webhook drops them (docs/install.md, "Supported versions")."""
    return {k: v for k, v in entry.items() if k != "reasons"}


@dataclass(frozen=True)
class PoolView:
    """What the mechanism reads of a Karpenter v1 NodePool."""

    name: str
    uid: str
    resource_version: str
    budgets: tuple[Any, ...]  # (never missing: the CRD defaults it to [{nodes: "10%"}])
    annotated: bool  # has metadata.annotations at all
    named: dict[str, Any] | None  # the entry ENTRY_KEY names: the ownership record
    ours: tuple[int, ...]  # where the list holds it: as written, else its last stripped copy
    at: int | None  # where the list holds it as written (None: not there)
    reverted: bool  # ENTRY_KEY is there but the list holds no copy of what it names

    @property
    def entry(self) -> dict[str, Any] | None:
        """This tool's entry in the list, as written (None: none)."""
        return self.named if self.at is not None else None


def pool_view(obj: Mapping[str, Any]) -> PoolView:
    """The view of one NodePool. This tool's entry is the one ENTRY_KEY names, found by value;
    where the list does not hold it as written, the last stripped copy of it is this tool's
    (what a conversion to v1beta1 left of the one entry it appends), and an equal entry before
    it a person's. Beside the original, a lookalike is a person's."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    listed = (spec.get("disruption") or {}).get("budgets")
    budgets = tuple(listed) if isinstance(listed, list) else ()
    annotations = meta.get("annotations") or {}
    named = _named(annotations.get(ENTRY_KEY))
    at = next((i for i, b in enumerate(budgets) if named and b == named), None)
    copy = stripped(named) if named and at is None else None
    copies = [i for i, b in enumerate(budgets) if b == copy]
    ours = (at,) if at is not None else tuple(copies[-1:])
    return PoolView(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        budgets=budgets,
        annotated=bool(annotations),
        named=named,
        ours=ours,
        at=at,
        reverted=annotations.get(ENTRY_KEY) is not None and not ours,
    )


def budgeted(
    pools: Sequence[PoolView], nodes: Sequence[NodeView], hold: HoldSettings
) -> frozenset[str]:
    """In auto mode, the NodePools whose nodes a budget entry holds, not annotations: each one
    listed, but not one whose entry was reverted, nor one whose nodes still carry this tool's
    hold annotations (a fallback, or a switch from annotations: it lasts until that hold ends)."""
    if hold.mechanism is not Mechanism.AUTO:
        return frozenset()
    annotated = {n.labels.get(DEFAULT_GROUP_LABEL) for n in nodes if holds_ours(n, hold)}
    return frozenset(p.name for p in pools if not p.reverted and p.name not in annotated)


@dataclass(frozen=True)
class PoolPatch:
    """One NodePool's JSON Patch: `test`s guard its resourceVersion and its whole budget list,
    then the list is replaced by the same list with every entry of this tool's gone but the
    one kept (or added), and ENTRY_KEY is added, replaced or removed, together."""

    pool: PoolView
    window: HoldWindow
    entry: dict[str, Any] | None  # this tool's entry after the patch (None: none)
    action: str  # add, extend, remove; drop: the record and any stripped copy (no entry held)
    restored: bool = False  # an add of the entry someone else removed while the hold went on

    def budgets(self) -> list[Any]:
        """The list after the patch: the same order, other entries untouched."""
        pool, entry = self.pool, self.entry
        keep = pool.at if entry is not None else None
        budgets = [entry if i == keep else b for i, b in enumerate(pool.budgets)]
        budgets = [b for i, b in enumerate(budgets) if i not in pool.ours or i == keep]
        return [*budgets, entry] if entry is not None and keep is None else budgets

    def body(self) -> list[dict[str, Any]]:
        pool, entry = self.pool, self.entry
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": pool.resource_version},
            {"op": "test", "path": BUDGETS, "value": list(pool.budgets)},
        ]
        if self.budgets() != list(pool.budgets):
            ops.append({"op": "replace", "path": BUDGETS, "value": self.budgets()})
        if entry is None:
            return [*ops, {"op": "remove", "path": _KEY_PATH}]
        value = json.dumps(entry, separators=(",", ":"), sort_keys=True)
        key = {"path": _KEY_PATH, "value": value}
        if not pool.annotated:  # a JSON Patch cannot add a key to a map that is not there
            key = {"path": "/metadata/annotations", "value": {ENTRY_KEY: value}}
        return [*ops, {"op": "add", **key}]

    @property
    def transition(self) -> Transition | None:
        """The Event this change records on the NodePool (none for a drop)."""
        reason, pool = _EVENTS.get(self.action), self.pool
        reason = Reason.RESTORED if self.restored else reason
        return reason and Transition(reason, self.window, pool.name, pool.uid, 0, 0, "NodePool")


def landed(sent: PoolPatch, fresh: PoolView) -> bool:
    """Whether `fresh`, read after `sent`'s answer was lost, shows that `sent` landed: it
    changed, and its record and list are what `sent` wrote (its entry maybe stripped)."""
    if fresh.resource_version == sent.pool.resource_version or fresh.named != sent.entry:
        return False
    return bool(fresh.ours) if sent.entry else list(fresh.budgets) == sent.budgets()


def lost(sent: PoolPatch, stored: PoolView) -> str | None:
    """Why the entry `sent` wrote is not in the NodePool as stored (None: it is, or none was
    sent): Karpenter v0.33.6 to v0.37.x store NodePools as v1beta1, and their conversion
    webhook drops what v1beta1 lacks."""
    if sent.entry is None or stored.entry == sent.entry:
        return None
    if stored.ours:
        return "Karpenter's conversion webhook dropped the entry's reasons (v0.34 to v0.37)"
    return "Karpenter's conversion webhook dropped the budget list (v0.33)"


def withdraw(stored: PoolView, window: HoldWindow) -> PoolPatch:
    """The patch that removes the copy of this tool's entry a lossy write left, and the
    record: the NodePool is as before, but for its resourceVersion."""
    return PoolPatch(stored, window, None, "drop")


def pool_window(pool: str, hold: HoldSettings) -> str:
    """The name of the hold window a NodePool's entry follows."""
    return "cluster" if hold.scope is Scope.CLUSTER else f"{DEFAULT_GROUP_LABEL}={pool}"


def window_of(pool: str, plan: Plan) -> HoldWindow:
    """The hold window a NodePool's entry follows (one without nodes: a released one)."""
    name = pool_window(pool, plan.hold)
    return next((w for w in plan.windows if w.name == name), HoldWindow(name, held=False))


def decide_pool(pool: PoolView, plan: Plan) -> PoolPatch | None:
    """The change `pool` needs: the entry while its window is held (by a budget), else none;
    the stripped copy of this tool's entry a conversion left, and a record naming none,
    go. Adding again, in the same stretch, an entry someone else removed: restored."""
    window = window_of(pool.name, plan)
    on_budget = plan.hold.mechanism is Mechanism.BUDGET or pool.name in plan.observed.budgeted
    held = plan.mode is Mode.RECONCILE and on_budget and window.held
    entry = budget_entry(window.stretch_start, window.hold_until) if held else None  # type: ignore[arg-type]
    current = pool.entry
    if entry is None:
        if current is None and not pool.ours and not pool.reverted:
            return None
        return PoolPatch(pool, window, None, "drop" if current is None else "remove")
    if entry == current:
        return None
    restored = pool.reverted and (pool.named or {}).get("schedule") == entry["schedule"]
    return PoolPatch(pool, window, entry, "add" if current is None else "extend", restored)
