"""The decision: (node views, now, hold settings) -> Plan. Pure: no I/O, no clock.

Rules, all in this file:
- A *hold window* is the cluster, a group of nodes (`--hold-scope group`) or one
  node (`--hold-scope node`). It is held while now < its youngest trigger node's
  creationTimestamp + hold duration (with `--max-hold`: see `_stretches`).
  Nodes being deleted never trigger a hold and are never patched.
- A held window's selected nodes carry every hold annotation; a node that already
  has a hold annotation, whatever its value, is left alone for that key.
- Ownership: the tool lists the keys it set in its ownership marker, in the same
  patch that sets them. It removes a hold annotation only if the marker claims
  it and its value is still the one the tool wrote; otherwise the claim is
  dropped and the annotation stays (someone else took it over).
- `--max-hold` is a hard bound on continuous holding. A stretch's start is written
  as `node-holder.dev/hold-started` in the same patch as the hold annotation, so
  the bound holds when the stretch's first nodes go away. When the cap ends a
  stretch, the releasing patch writes `node-holder.dev/free-until` (the release
  plus one hold duration): until then no new hold starts in that window. Both go away with
  the hold, or once the free period is over.
- Only nodes whose annotations must change get a patch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from reconcile.nodes import NodeView, claimed_keys
from reconcile.settings import (
    FREE_UNTIL,
    HOLD_STARTED,
    HOLD_VALUE,
    KNOWN_HOLD_KEYS,
    OWNERSHIP_MARKER,
    HoldSettings,
    Scope,
    format_duration,
)


class Mode(StrEnum):
    RECONCILE = "reconcile"
    RELEASE = "release"  # remove every hold this tool owns, whatever the ages


class KeyState(StrEnum):
    OURS = "ours"  # present, claimed by the ownership marker, value as we wrote it
    FOREIGN = "foreign"  # "true", set by someone else (or taken over): held by others
    EXEMPT = "exempt"  # another value ("false"), set by someone: Karpenter may disrupt it
    FREE = "free"  # absent


@dataclass(frozen=True)
class HoldWindow:
    """One unit that is held or released as a whole, and why."""

    name: str  # "cluster", "karpenter.sh/nodepool=batch", "!karpenter.sh/nodepool", "node/x"
    held: bool
    youngest: str | None = None  # youngest trigger node (None: no trigger node at all)
    youngest_created: datetime | None = None
    hold_until: datetime | None = None  # end of the latest stretch (may be in the past)
    stretch_start: datetime | None = None  # creation of the stretch's oldest trigger node
    capped: bool = False  # hold_until was cut short by --max-hold
    triggers: int = 0
    nodes: int = 0
    free_until: datetime | None = None  # after a capped stretch: no hold before this


@dataclass(frozen=True, slots=True)  # one per node: no __dict__ each
class NodePatch:
    """A merge patch of metadata.annotations for one node, guarded by its resourceVersion."""

    node: str
    resource_version: str
    changes: tuple[tuple[str, str | None], ...]  # key -> new value, None deletes the key
    added: tuple[str, ...] = ()  # hold annotations this patch sets
    removed: tuple[str, ...] = ()  # hold annotations this patch removes
    window: str = ""

    def body(self) -> dict:
        metadata: dict = {"annotations": dict(self.changes)}
        if self.resource_version:
            metadata["resourceVersion"] = self.resource_version
        return {"metadata": metadata}

    @property
    def action(self) -> str:
        if self.added:
            return "add"
        if self.removed:
            return "remove"
        if any(key == OWNERSHIP_MARKER for key, _ in self.changes):
            return "disown"
        return "tidy"  # only this tool's own bookkeeping annotations change


@dataclass(frozen=True, slots=True)  # one per node: no __dict__ each
class NodeDecision:
    node: str
    window: str
    held: bool  # should carry the hold annotations after this run
    deleting: bool
    created: datetime
    keys: tuple[tuple[str, KeyState], ...]  # state of each relevant key before the run
    patch: NodePatch | None = None
    selected: bool = True  # matches --node-selector

    @property
    def state(self) -> str:
        """`held by us`, `held by others`, `exempt` or `free`, as `status` shows it."""
        states = {s for _, s in self.keys}
        if KeyState.OURS in states:
            return "held by us"
        if KeyState.FOREIGN in states:
            return "held by others"
        if KeyState.EXEMPT in states:
            return "exempt"
        return "free"


@dataclass(frozen=True)
class Transition:
    """A hold that starts, grows or ends in this run; becomes a Kubernetes Event."""

    reason: str  # HoldStarted | HoldExtended | HoldEnded
    window: str
    node: str  # the node the event is attached to (the youngest trigger node)
    node_uid: str
    message: str


@dataclass(frozen=True)
class Plan:
    now: datetime
    hold: HoldSettings
    mode: Mode
    windows: tuple[HoldWindow, ...]
    decisions: tuple[NodeDecision, ...]
    transitions: tuple[Transition, ...] = ()

    @property
    def patches(self) -> tuple[NodePatch, ...]:
        return tuple(d.patch for d in self.decisions if d.patch is not None)

    @property
    def held(self) -> bool:
        return any(w.held for w in self.windows) and self.mode is Mode.RECONCILE

    def window(self, name: str) -> HoldWindow | None:
        for w in self.windows:
            if w.name == name:
                return w
        return None

    def decide_again(self, node: NodeView) -> NodeDecision:
        """Decide for one node re-read after a 409, keeping this plan's hold windows."""
        name = window_name(node, self.hold)
        found = self.window(name)
        if found is None:
            found = _window(name, [node], self.now, self.hold)
        return decide_node(node, found, self.hold, self.mode, now=self.now)


# --- ownership ---------------------------------------------------------------


def marker_value(keys: Iterable[str]) -> str | None:
    ordered = sorted(set(keys))
    return ",".join(ordered) if ordered else None


def key_state(annotations: Mapping[str, str], key: str, claimed: frozenset[str]) -> KeyState:
    if key not in annotations:
        return KeyState.FREE
    if annotations[key] != HOLD_VALUE:
        return KeyState.EXEMPT
    return KeyState.OURS if key in claimed else KeyState.FOREIGN


# --- hold windows ------------------------------------------------------------


def window_name(node: NodeView, hold: HoldSettings) -> str:
    match hold.scope:
        case Scope.CLUSTER:
            return "cluster"
        case Scope.GROUP:
            value = node.labels.get(hold.group_label)
            return f"!{hold.group_label}" if value is None else f"{hold.group_label}={value}"
        case Scope.NODE:
            return f"node/{node.name}"
    raise AssertionError(hold.scope)


@dataclass(frozen=True)
class _Stretch:
    start: datetime
    until: datetime
    youngest: int  # index into the sorted trigger list
    capped: bool


def _stretches(
    created: Sequence[datetime], hold: timedelta, max_hold: timedelta | None
) -> list[_Stretch]:
    """Split sorted creation times into stretches of continuous holding.

    Each trigger node holds [created, created + hold); overlapping intervals chain
    into one stretch. With max_hold, a stretch ends at start + max_hold however
    many nodes keep arriving, and then the window stays free for one hold
    duration: nodes created in that gap start no hold, so Karpenter gets a
    chance to consolidate. Everything follows from creation times alone, so
    every run (and every replica) computes the same stretches.
    """
    result: list[_Stretch] = []
    i, n = 0, len(created)
    while i < n:
        start = created[i]
        until = start + hold
        youngest = i
        cap = start + max_hold if max_hold is not None else None
        j = i + 1
        while j < n and created[j] < until and (cap is None or created[j] < cap):
            until = max(until, created[j] + hold)
            youngest = j
            j += 1
        capped = cap is not None and until > cap
        if capped:
            until = cap  # type: ignore[assignment]
            while j < n and created[j] < until + hold:
                j += 1
        result.append(_Stretch(start, until, youngest, capped))
        i = j
    return result


def _recorded(
    members: Sequence[NodeView], key: str, ours_only: bool, hold: HoldSettings
) -> list[datetime]:
    """Valid times this tool wrote under `key` (on nodes it still holds, if `ours_only`)."""
    found = []
    for node in members:
        raw = node.annotations.get(key)
        if raw is None or (ours_only and not _holds_ours(node, hold)):
            continue
        moment = parse_stamp(raw)
        if moment is not None:
            found.append(moment)
    return found


def trusted_claims(annotations: Mapping[str, str], hold: HoldSettings) -> frozenset[str]:
    """The keys of the ownership marker this tool may act on: hold annotations it knows.

    The marker is only an annotation: anyone who can edit a node can make it name any key.
    Only the configured keys and the well-known Karpenter and cluster-autoscaler hold
    keys are ever removed; any other key in a marker is dropped from it and left alone.
    """
    known = set(hold.annotations) | set(KNOWN_HOLD_KEYS)
    return frozenset(k for k in claimed_keys(annotations) if k in known)


def _holds_ours(node: NodeView, hold: HoldSettings) -> bool:
    claimed = trusted_claims(node.annotations, hold)
    return any(key_state(node.annotations, k, claimed) is KeyState.OURS for k in claimed)


def parse_stamp(raw: str) -> datetime | None:
    """One of our own RFC 3339 UTC stamps (`2026-11-22T20:41:22Z`); None if someone broke it."""
    if not raw:
        return None  # absent: most nodes, every run; strptime would raise (slowly) for it
    try:
        moment = datetime.strptime(raw, "%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError):
        return None
    return moment.replace(tzinfo=UTC)


def _window(
    name: str, members: Sequence[NodeView], now: datetime, hold: HoldSettings
) -> HoldWindow:
    triggers = sorted(
        (n for n in members if not n.deleting and hold.trigger_selector.matches(n.labels)),
        key=lambda n: (n.created, n.name),
    )
    frees = _recorded(members, FREE_UNTIL, ours_only=False, hold=hold) if hold.max_hold else []
    free_until = max(frees) if frees and max(frees) > now else None
    if not triggers:
        return HoldWindow(name=name, held=False, nodes=len(members), free_until=free_until)
    stretches = _stretches([n.created for n in triggers], hold.hold_duration, hold.max_hold)
    last = stretches[-1]
    start, until, capped = last.start, last.until, last.capped
    youngest = triggers[-1]
    if hold.max_hold is not None:
        # The stretch may have begun before its oldest surviving node: the stamp says when.
        starts = [
            t for t in _recorded(members, HOLD_STARTED, ours_only=True, hold=hold) if t <= now
        ]
        if starts and min(starts) < start:
            start = min(starts)
            if until > start + hold.max_hold:
                until, capped = start + hold.max_hold, True
        young = now < youngest.created + hold.hold_duration
        if free_until is None and starts and capped and until <= now and young:
            # The cap ends our hold in this run (a young node would still hold the window):
            # free for one hold duration from the release itself, which a late run (missed
            # runs, a crash) must not shorten. Every node of the window gets the stamp.
            free_until = max(until, now) + hold.hold_duration
    return HoldWindow(
        name=name,
        held=now < until and free_until is None,
        youngest=youngest.name,
        youngest_created=youngest.created,
        hold_until=until,
        stretch_start=start,
        capped=capped,
        triggers=len(triggers),
        nodes=len(members),
        free_until=free_until,
    )


def hold_windows(
    nodes: Sequence[NodeView], now: datetime, hold: HoldSettings
) -> dict[str, HoldWindow]:
    members: dict[str, list[NodeView]] = defaultdict(list)
    for node in nodes:
        members[window_name(node, hold)].append(node)
    if hold.scope is Scope.CLUSTER and not members:
        members["cluster"] = []
    return {name: _window(name, group, now, hold) for name, group in sorted(members.items())}


# --- per node ----------------------------------------------------------------


def decide_node(
    node: NodeView,
    window: HoldWindow,
    hold: HoldSettings,
    mode: Mode,
    *,
    now: datetime | None = None,
) -> NodeDecision:
    listed = claimed_keys(node.annotations)
    claimed = trusted_claims(node.annotations, hold) if listed else listed
    relevant = hold.annotations
    if listed:
        relevant = (*hold.annotations, *sorted(listed - set(hold.annotations)))
    states = tuple((k, key_state(node.annotations, k, claimed)) for k in relevant)
    selected = hold.node_selector.matches(node.labels)
    held = mode is Mode.RECONCILE and window.held and not node.deleting and selected
    decision = NodeDecision(
        node=node.name,
        window=window.name,
        held=held,
        deleting=node.deleting,
        created=node.created,
        keys=states,
        selected=selected,
    )
    if node.deleting:
        return decision

    changes: dict[str, str | None] = {}
    added: list[str] = []
    removed: list[str] = []
    owned = set(claimed)
    for key, state in states:
        wanted = held and key in hold.annotations
        if wanted and state is KeyState.FREE:
            changes[key] = HOLD_VALUE
            added.append(key)
            owned.add(key)
        elif not wanted and state is KeyState.OURS:
            changes[key] = None
            removed.append(key)
            owned.discard(key)
        elif state in (KeyState.FOREIGN, KeyState.EXEMPT):
            owned.discard(key)  # someone else's now: never ours to remove
        elif state is KeyState.FREE and not wanted:
            owned.discard(key)  # claimed but gone: forget the claim
    if owned != listed or (not owned and OWNERSHIP_MARKER in node.annotations):
        changes[OWNERSHIP_MARKER] = marker_value(owned)  # an empty marker goes away
    context = _Context(window, hold, mode, now)
    changes.update(_bookkeeping(node, context, owned=bool(owned)))
    if not changes:
        return decision
    patch = NodePatch(
        node=node.name,
        resource_version=node.resource_version,
        changes=tuple(changes.items()),
        added=tuple(added),
        removed=tuple(removed),
        window=window.name,
    )
    return replace(decision, patch=patch)


@dataclass(frozen=True)
class _Context:
    """What one node's decision is made in."""

    window: HoldWindow
    hold: HoldSettings
    mode: Mode
    now: datetime | None


def _bookkeeping(node: NodeView, ctx: _Context, *, owned: bool) -> dict[str, str | None]:
    """The --max-hold stamps: set with the hold, removed with it or once stale.

    `owned`: the node carries a hold of ours after this run.
    """
    window, hold, mode = ctx.window, ctx.hold, ctx.mode
    annotations = node.annotations
    if hold.max_hold is None and HOLD_STARTED not in annotations and FREE_UNTIL not in annotations:
        return {}  # the common case, for every node of every run: nothing to stamp
    changes: dict[str, str | None] = {}
    keep_started = owned and hold.max_hold is not None and mode is Mode.RECONCILE
    if keep_started and HOLD_STARTED not in annotations and window.stretch_start:
        changes[HOLD_STARTED] = _iso(window.stretch_start)
    elif not keep_started and HOLD_STARTED in annotations:
        changes[HOLD_STARTED] = None
    changes.update(_free_stamp(node, ctx, owned=owned))
    return changes


def _free_stamp(node: NodeView, ctx: _Context, *, owned: bool) -> dict[str, str | None]:
    """FREE_UNTIL on every node of a window in its free period, not only on the nodes the
    cap released: consolidation may remove all of those before the period ends. Removed
    once the period is over."""
    window, hold, mode, now = ctx.window, ctx.hold, ctx.mode, ctx.now
    annotations = node.annotations
    free = parse_stamp(annotations.get(FREE_UNTIL, ""))
    if (
        window.free_until is not None
        and (free is None or free < window.free_until)
        and not owned
        and mode is Mode.RECONCILE
        and hold.node_selector.matches(node.labels)
    ):
        return {FREE_UNTIL: _iso(window.free_until)}  # (free_until is only set by --max-hold)
    if FREE_UNTIL in annotations and (
        mode is Mode.RELEASE or free is None or owned or (now is not None and free <= now)
    ):
        return {FREE_UNTIL: None}  # the free period is over (or was never ours to keep)
    return {}


# --- the whole plan ----------------------------------------------------------


def _transitions(
    windows: Mapping[str, HoldWindow],
    decisions: Sequence[NodeDecision],
    uids: Mapping[str, str],
    hold: HoldSettings,
    mode: Mode,
) -> tuple[Transition, ...]:
    by_window: dict[str, list[NodeDecision]] = defaultdict(list)
    for d in decisions:
        by_window[d.window].append(d)
    result = []
    for name, group in by_window.items():
        window = windows[name]
        adds = [d for d in group if d.patch and d.patch.added]
        removes = [d for d in group if d.patch and d.patch.removed]
        already = any(s is KeyState.OURS for d in group for _, s in d.keys)
        anchor = window.youngest or (adds or removes or group)[0].node
        until = _iso(window.hold_until) if window.hold_until else "-"
        if mode is Mode.RECONCILE and window.held and adds:
            reason = "HoldExtended" if already else "HoldStarted"
            verb = "extended" if already else "started"
            message = (
                f"Hold {verb} for {name} until {until}: youngest node {window.youngest} "
                f"created {_iso(window.youngest_created)}; hold annotation added to "
                f"{len(adds)} node(s)"
            )
        elif removes:
            if mode is Mode.RELEASE:
                why = "released by node-holder release"
            elif window.capped:
                why = f"max-hold reached at {until}"
            elif window.youngest:
                age = format_duration(hold.hold_duration)
                why = f"youngest node {window.youngest} is older than {age}"
            else:
                why = "no node triggers a hold any more"
            message = (
                f"Hold ended for {name}: {why}; hold annotation removed from {len(removes)} node(s)"
            )
            reason = "HoldEnded"
        else:
            continue
        result.append(Transition(reason, name, anchor, uids.get(anchor, ""), message))
    return tuple(result)


def _iso(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else "-"


#: The most Events one run records: one per window whose hold started, grew or ended, and past
#: this many the rest summed up in one Event per reason (a scope change once sent 1,508).
MAX_EVENTS = 10


def recorded_events(
    transitions: Sequence[Transition], landed: Sequence[NodePatch]
) -> tuple[Transition, ...]:
    """The Events a run records: the transitions whose window had a patch land, at most
    MAX_EVENTS; past that, the rest are summed up, one Event per reason with its node count."""
    windows = {p.window for p in landed}
    events = [t for t in transitions if t.window in windows]
    if len(events) <= MAX_EVENTS:
        return tuple(events)
    reasons = sorted({t.reason for t in events})
    cut = MAX_EVENTS - len(reasons)
    summed = []
    for reason in reasons:
        rest = [t for t in events[cut:] if t.reason == reason]
        names = {t.window for t in rest}
        ended = reason == "HoldEnded"
        nodes = sum(1 for p in landed if p.window in names and (p.removed if ended else p.added))
        message = (
            f"Hold {reason[4:].lower()} for {len(rest)} more windows, {nodes} node(s) in all "
            f"(one run records at most {MAX_EVENTS} Events)"
        )
        if rest:
            summed.append(Transition(reason, "", rest[0].node, rest[0].node_uid, message))
    return (*events[:cut], *summed)


def decide(
    nodes: Sequence[NodeView],
    now: datetime,
    hold: HoldSettings,
    mode: Mode = Mode.RECONCILE,
) -> Plan:
    """The whole decision for one run."""
    windows = hold_windows(nodes, now, hold)
    decisions = tuple(
        decide_node(node, windows[window_name(node, hold)], hold, mode, now=now) for node in nodes
    )
    uids = {n.name: n.uid for n in nodes}
    return Plan(
        now=now,
        hold=hold,
        mode=mode,
        windows=tuple(windows.values()),
        decisions=decisions,
        transitions=_transitions(windows, decisions, uids, hold, mode),
    )
