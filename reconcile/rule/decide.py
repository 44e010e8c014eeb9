"""The decision: (node views, now, hold settings) -> Plan. Pure: no I/O, no clock.

The rule is docs/design.md's: hold windows ("How it works", "Scopes, selectors and a cap"),
claims ("The ownership marker"), pins ("Pins"), each node's own hold settings ("Hold settings
per NodePool") and the stamps ("The `--max-hold` rule"). Only nodes whose annotations must
change get a patch. The plan says what changes, never in words: each hold that starts, grows
or ends is a `Transition`, which reconcile/cli/summary.py words for the Events and the report.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import cached_property, lru_cache
from typing import NamedTuple

from reconcile.rule.nodes import (
    NodePoolOwn,
    NodePoolSettings,
    NodeView,
    claimed_keys,
    parse_own,
    pinned_keys,
    shown,
)
from reconcile.rule.settings import (
    DEFAULT_GROUP_LABEL,
    FREE_UNTIL,
    HOLD_STARTED,
    HOLD_VALUE,
    KNOWN_HOLD_KEYS,
    NODE_HOLD,
    NODE_MAX_HOLD,
    OWNERSHIP_MARKER,
    PINNED,
    STAMP_FORMAT,
    HoldSettings,
    Mechanism,
    Mode,
    Scope,
    format_duration,
    format_time,
)

#: How far a stamp may lie beyond what this run's clock allows before it counts as not
#: ours: API servers' clocks differ by a little, and an overlapping run read its own.
STAMP_SLACK = timedelta(minutes=1)


class KeyState(StrEnum):
    OURS = "ours"  # present, claimed by the ownership marker, value as we wrote it
    FOREIGN = "foreign"  # "true", set by someone else (or taken over): held by others
    EXEMPT = "exempt"  # another value ("false"), set by someone: Karpenter may disrupt it
    FREE = "free"  # absent
    PINNED = "pinned"  # listed in PINNED by a person: never added or removed by a run


@dataclass(frozen=True)
class HoldWindow:
    """One unit that is held or released as a whole, and why."""

    name: str  # "cluster", "karpenter.sh/nodepool=batch", "!karpenter.sh/nodepool", "node/x"
    held: bool
    youngest: str | None = None  # youngest trigger node (None: no trigger node at all)
    youngest_created: datetime | None = None
    hold_until: datetime | None = None  # end of the latest stretch (may be in the past)
    stretch_start: datetime | None = None  # creation of the stretch's oldest trigger node
    capped: bool = False  # hold_until was cut short by the cap (`max_hold`)
    triggers: int = 0
    nodes: int = 0
    free_until: datetime | None = None  # after a capped stretch: no hold before this
    duration: timedelta = timedelta(0)  # the longest own hold of its stretch: its free period
    max_hold: timedelta | None = None  # the smallest cap of its trigger nodes (None: no cap)
    #: where those come from: `nodepool/x` (its metadata.annotations); None: --hold-duration,
    #: --max-hold
    sources: tuple[str | None, str | None] = (None, None)
    reach: datetime | None = None  # when the last trigger node's own hold ends, uncapped
    bound: timedelta = timedelta(0)  # the longest hold duration of its nodes (forged stamps)


@dataclass(frozen=True, slots=True)  # one per node: no __dict__ each
class NodePatch:
    """A merge patch of metadata.annotations for one node, guarded by its resourceVersion."""

    node: str
    resource_version: str
    changes: tuple[tuple[str, str | None], ...]  # key -> new value, None deletes the key
    added: tuple[str, ...] = ()  # hold annotations this patch sets
    removed: tuple[str, ...] = ()  # hold annotations this patch removes
    window: str = ""
    disowned: tuple[str, ...] = ()  # claims dropped: someone changed or removed the key
    pinned: tuple[str, ...] = ()  # keys `pin` pins
    unpinned: tuple[str, ...] = ()  # keys `unpin` gives back to the normal rule
    ignored: tuple[str, ...] = ()  # stamps this tool could not have written, and why

    def body(self) -> dict:
        metadata: dict = {"annotations": dict(self.changes)}
        if self.resource_version:
            metadata["resourceVersion"] = self.resource_version
        return {"metadata": metadata}

    @property
    def action(self) -> str:
        if self.pinned or self.unpinned:
            return "pin" if self.pinned else "unpin"
        if self.added or self.removed:
            return "add" if self.added else "remove"
        if self.disowned:
            return "disown"
        return "tidy"  # only this tool's own bookkeeping annotations change


class NodeDecision(NamedTuple):  # one per node: a named tuple, as NodeView (rule/nodes.py)
    node: str
    window: str
    held: bool  # should carry the hold annotations after this run
    deleting: bool
    created: datetime
    keys: tuple[tuple[str, KeyState], ...]  # state of each relevant key before the run
    patch: NodePatch | None = None
    selected: bool = True  # matches --node-selector


class Reason(StrEnum):
    """Why an Event is recorded: its `reason`, which `kubectl get events` filters on."""

    STARTED = "HoldStarted"
    EXTENDED = "HoldExtended"  # a new node arrived while the window was held by us
    ENDED = "HoldEnded"
    #: A NodePool's budget entry added again after someone else removed it: the hold went on.
    RESTORED = "HoldRestored"


@dataclass(frozen=True)
class Transition:
    """A hold that starts, grows or ends in this run: one Kubernetes Event, attached to
    `node` (the window's youngest trigger node). Past MAX_EVENTS, one Transition per reason
    sums up the rest: `window` is None and `more` says how many windows it stands for."""

    reason: Reason
    window: HoldWindow | None
    node: str
    node_uid: str
    nodes: int  # nodes whose hold annotation this run adds (started, extended) or removes
    more: int = 0
    kind: str = "Node"  # or "NodePool" (`node` its name): its budget entry (rule/budget.py)


@dataclass(frozen=True)
class Observed:
    """What a run found in the cluster besides its nodes, which decide() reads beside the
    settings: the NodePools it listed, with their own hold settings (None: not read), and with
    --mechanism auto those whose budget entry holds their nodes, not annotations
    (rule/budget.py)."""

    nodepool_settings: NodePoolSettings | None = None
    budgeted: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Plan:
    now: datetime
    hold: HoldSettings
    mode: Mode
    windows: tuple[HoldWindow, ...]
    decisions: tuple[NodeDecision, ...]
    transitions: tuple[Transition, ...] = ()
    bad_values: tuple[tuple[str, str], ...] = ()  # (nodepool/x, why): a value not used
    #: The NodePools ("": none) of nodes that carry NODE_HOLD or NODE_MAX_HOLD themselves
    #: (copied from a NodePool's template, say), which are read on NodePools only
    settings_on_nodes: tuple[str, ...] = ()
    observed: Observed = Observed()
    refused: tuple[tuple[str, str], ...] = ()  # (node, why): `pin` left it as it was

    @cached_property  # the report reads them several times a run: one pass over the nodes
    def patches(self) -> tuple[NodePatch, ...]:
        return tuple(d.patch for d in self.decisions if d.patch is not None)

    @property
    def kept_claims(self) -> dict[str, int]:
        """Keys node-holder set that this run may not remove (not configured, not well
        known), most nodes first: the claims stay, and a run that names the key removes it."""
        ours = (k for d in self.decisions for k, s in d.keys if s is KeyState.OURS)
        return dict(Counter(k for k in ours if not _known(k, self.hold)).most_common())

    def decide_again(self, node: NodeView, now: datetime) -> NodeDecision:
        """Decide for one node re-read after a 409, at `now` (later than the plan's), its window
        as its own stamps now say (an overlapping run may have capped the stretch meanwhile)."""
        now = max(now, self.now)
        name = window_name(node, self.hold)
        planned = next((w for w in self.windows if w.name == name), None)
        found = planned or _window(name, [node], now, self.hold)
        window = _stamped(found, [node], now, self.hold)
        return decide_node(node, window, self.hold, self.mode, now, self.observed.budgeted)


def marker_value(keys: Iterable[str]) -> str | None:
    return ",".join(sorted(set(keys))) or None  # no keys: no annotation


def key_state(
    annotations: Mapping[str, str], key: str, claimed: frozenset[str], pinned: frozenset[str]
) -> KeyState:
    if key in pinned:
        return KeyState.PINNED
    if key not in annotations:
        return KeyState.FREE
    if annotations[key] != HOLD_VALUE:
        return KeyState.EXEMPT
    return KeyState.OURS if key in claimed else KeyState.FOREIGN


def _known(key: str, hold: HoldSettings) -> bool:
    """Whether this run may remove `key` where the marker claims it: a configured or a
    well-known hold key only (anyone who can edit a node can make the marker name any key)."""
    return key in hold.annotations or key in KNOWN_HOLD_KEYS


def holds_ours(node: NodeView, hold: HoldSettings) -> bool:
    """The node carries a hold of ours on a key this run acts on."""
    pinned = pinned_keys(node.annotations)
    return any(
        node.annotations.get(k) == HOLD_VALUE and k not in pinned and _known(k, hold)
        for k in claimed_keys(node.annotations)
    )


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


class Own(NamedTuple):
    """A node's hold settings: its NodePool's own within the configured ones, those that apply."""

    duration: timedelta
    cap: timedelta | None
    sources: tuple[str | None, str | None] = (None, None)  # `nodepool/x`; None: the option
    bad: tuple[tuple[str, str], ...] = ()  # (source, why): its NodePool's values not used


def own_settings(given: NodePoolOwn, hold: HoldSettings) -> Own:
    """The hold settings of the nodes of a NodePool that gives its own (docs/design.md, "Hold
    settings per NodePool")."""
    return _own(given, hold.hold_duration, hold.max_hold)


@lru_cache(maxsize=256)  # one per NodePool and configuration: shared by its nodes every run
def _own(given: NodePoolOwn, default: timedelta, cap0: timedelta | None) -> Own:
    """A NodePool's values, parsed, within the bounds of --max-hold: a cap is at least its
    hold, a hold at most the configured cap. A bad value: the configured setting instead."""
    source = f"nodepool/{given.pool}"
    hold, hold_bad = parse_own(NODE_HOLD, given.hold) if given.hold is not None else (None, None)
    cap, cap_bad = parse_own(NODE_MAX_HOLD, given.cap) if given.cap is not None else (None, None)
    bad = [(source, why) for why in (hold_bad, cap_bad) if why]
    duration = default if hold is None else hold
    sources = [source if hold is not None else None, None]
    if given.cap is None or cap_bad:
        cap = cap0
    elif cap is not None and cap < duration:
        why = f"is shorter than the hold ({format_duration(duration)})"
        bad.append((source, f"{NODE_MAX_HOLD}={shown(given.cap)} {why}"))
        cap = cap0
    else:
        sources[1] = source  # (empty: no cap for its nodes)
    if hold is not None and cap is not None and duration > cap:  # the configured cap: shorter
        why = f"is longer than --max-hold ({format_duration(cap)})"
        bad.append((source, f"{NODE_HOLD}={shown(given.hold or '')} {why}"))
        duration, sources[0] = default, None
    return Own(duration, cap, (sources[0], sources[1]), tuple(bad))


def _stamp(
    node: NodeView, key: str, now: datetime, bound: timedelta
) -> tuple[datetime | None, str | None]:
    """The time a --max-hold stamp on `node` says, if this tool could have written it at
    `now` (`bound`: the longest hold duration in its window); else None and why not (None,
    None: no such stamp)."""
    raw = node.annotations.get(key)
    if raw is None:
        return None, None  # most nodes, every run
    moment = _parsed(raw)
    if moment is None:
        return None, f"{key}={shown(raw)} is not a time node-holder writes"
    if key == HOLD_STARTED and moment > now + STAMP_SLACK:
        return None, f"{key}={raw} is in the future"
    if key == FREE_UNTIL and moment > now + bound + STAMP_SLACK:
        return None, f"{key}={raw} is later than now plus {format_duration(bound)}"
    return moment, None


@lru_cache(maxsize=1024)  # a window's nodes carry the same few stamps, read every run
def _parsed(raw: str) -> datetime | None:
    """A stamp as this tool writes it (`STAMP_FORMAT`), or None."""
    try:
        return datetime.strptime(raw, STAMP_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def _triggers(node: NodeView, own: Own, hold: HoldSettings) -> bool:
    """Whether this node's arrival starts a hold of its window ("0": its NodePool's never do)."""
    if node.deleting or not own.duration:
        return False
    if hold.trigger_selector.requirements and not hold.trigger_selector.matches(node.labels):
        return False  # (the default selector, empty, matches every node)
    # A Karpenter node before registration would hold the unlabelled (system) nodes' group.
    return not (
        hold.scope is Scope.GROUP and node.registering and hold.group_label not in node.labels
    )


class _Trigger(NamedTuple):
    """A trigger node's own hold [start, end). Its tuple order is the rule's order of trigger
    nodes: creation, then name (a node's name is unique): `max` finds the youngest in C."""

    created: datetime
    name: str
    start: datetime  # its creation, a skewed server's future counting as now
    end: datetime
    own: Own


def _window(
    name: str, members: Sequence[NodeView], now: datetime, hold: HoldSettings
) -> HoldWindow:
    """The window's hold from its trigger nodes (every node is one with the default selector),
    its last stretch as `_last_stretch` finds it."""
    plain = Own(hold.hold_duration, hold.max_hold)  # most nodes': the configured settings
    bound, triggers = hold.hold_duration, []
    for node in members:
        own = plain
        if node.own is not None:
            own = own_settings(node.own, hold)
            bound = max(bound, own.duration)
        if _triggers(node, own, hold):
            start = node.created if node.created < now else now  # a skewed server's future: now
            triggers.append(_Trigger(node.created, node.name, start, start + own.duration, own))
    if not triggers:
        window = HoldWindow(
            name,
            False,
            nodes=len(members),
            duration=hold.hold_duration,
            max_hold=hold.max_hold,
            bound=bound,
        )
        return _stamped(window, members, now, hold)
    cap = min((t.own.cap for t in triggers if t.own.cap is not None), default=None)
    stretch, until, capped = _last_stretch(triggers, cap, bound)
    duration = max(t.own.duration for t in stretch)
    longest = min(t for t in stretch if t.own.duration == duration)
    youngest = max(triggers)
    capper = (  # the youngest of those whose cap applies
        youngest if youngest.own.cap == cap else max(t for t in triggers if t.own.cap == cap)
    )
    window = HoldWindow(
        name,
        held=now < until,
        youngest=youngest.name,
        youngest_created=youngest.start,
        hold_until=until,
        stretch_start=min(t.start for t in stretch),
        capped=capped,
        triggers=len(triggers),
        nodes=len(members),
        duration=duration,
        max_hold=cap,
        sources=(longest.own.sources[0], capper.own.sources[1]),
        reach=max(t.end for t in triggers),
        bound=bound,
    )
    return _stamped(window, members, now, hold)


def _last_stretch(
    triggers: Sequence[_Trigger], cap: timedelta | None, longest: timedelta
) -> tuple[list[_Trigger], datetime, bool]:
    """The last stretch of continuous holding: (its trigger nodes, its end, capped). Own
    holds that overlap chain; a capped stretch ends at its start + cap, and nodes created in
    the free period after it (its longest own hold) start no hold. Stretches chain from the
    oldest trigger node on, yet none reaches past a gap of `longest` (the longest own hold;
    under a cap, two: a hold and the free period after it) between two nodes' creations: the
    nodes are taken youngest first back to such a gap (from a heap, not sorted: a steady run
    takes a few), then their stretches found in order."""
    gap = longest if cap is None else 2 * longest
    # The youngest on top, by the trigger nodes' own order: heapq's max-heap, in C (public as
    # heapify_max and heappop_max from Python 3.14, which keeps these names).
    heap = list(triggers)
    heapq._heapify_max(heap)
    tail = [heapq._heappop_max(heap)]
    while heap and heap[0].start + gap > tail[-1].start:
        tail.append(heapq._heappop_max(heap))
    tail.reverse()
    first = 0
    while True:
        stop, until, capped, after = _stretch(tail, first, cap)
        if after >= len(tail):
            return tail[first:stop], until, capped
        first = after


def _stretch(
    holds: Sequence[_Trigger], first: int, cap: timedelta | None
) -> tuple[int, datetime, bool, int]:
    """The stretch that starts at holds[first] (in order of creation): (the index after its
    nodes, its end, capped, the index after its free period)."""
    end = None if cap is None else holds[first].start + cap
    until, stop = holds[first].end, first + 1
    while (
        stop < len(holds) and holds[stop].start < until and (end is None or holds[stop].start < end)
    ):
        until = max(until, holds[stop].end)
        stop += 1
    if end is None or until <= end:
        return stop, until, False, stop
    free, after = max(t.end - t.start for t in holds[first:stop]), stop
    while after < len(holds) and holds[after].start < end + free:
        after += 1
    return stop, end, True, after


def _stamped(
    window: HoldWindow, members: Sequence[NodeView], now: datetime, hold: HoldSettings
) -> HoldWindow:
    """`window` as the --max-hold stamps on `members` say: the stretch may have begun before
    its oldest surviving node (`hold-started`), or be followed by a free period (`free-until`)."""
    cap, bound, free = window.max_hold, window.bound, window.duration
    if cap is None:
        return window
    frees = [t for m in members if (t := _stamp(m, FREE_UNTIL, now, bound)[0]) and t > now]
    free_until = max([*frees, *filter(None, [window.free_until])], default=None)
    start, until, capped = window.stretch_start, window.hold_until, window.capped
    if start is not None and until is not None and window.reach is not None:
        starts = _started(members, now, hold, bound)
        if starts and min(starts) < start:
            start = min(starts)
            if until > start + cap:
                until, capped = start + cap, True
        if free_until is None and starts and capped and until <= now < window.reach:
            # The cap ends our hold in this run (a young node would still hold the window):
            # free from the release itself, which a late run (missed runs, a crash) must not
            # shorten. Every node of the window gets the stamp.
            free_until = now + free
        if free_until is not None:  # no hold during the free period: the last one ended
            until = min(until, free_until - free, now)
    return replace(
        window,
        held=until is not None and now < until and free_until is None,
        hold_until=until,
        stretch_start=start,
        capped=capped,
        free_until=free_until,
    )


def _started(
    members: Sequence[NodeView], now: datetime, hold: HoldSettings, bound: timedelta
) -> list[datetime]:
    """The hold-started stamps, up to now, on members that carry a hold of ours."""
    ours = [m for m in members if HOLD_STARTED in m.annotations and holds_ours(m, hold)]
    return [t for m in ours if (t := _stamp(m, HOLD_STARTED, now, bound)[0]) and t <= now]


def decide_node(
    node: NodeView,
    window: HoldWindow,
    hold: HoldSettings,
    mode: Mode,
    now: datetime,
    budgeted: frozenset[str] = frozenset(),
) -> NodeDecision:
    """One node's decision: its hold keys and claims, then its stamps, in one patch. A node
    its NodePool's budget entry holds (`budget`; `auto`: `budgeted`) gets no annotation."""
    if mode in (Mode.PIN, Mode.UNPIN):
        return _decide_pin(node, hold, mode, now)[0]
    annotations = node.annotations
    selected = hold.node_selector.matches(node.labels)
    held = (
        mode is Mode.RECONCILE
        and window.held
        and selected
        and not node.deleting
        and not _on_budget(node, hold, budgeted)
    )
    created = node.created if node.created < now else now
    if not held and (node.deleting or window.free_until is None) and _unmarked(annotations, hold):
        # Most nodes of a steady run: every key free, no stamp due, nothing to change.
        states = _all_free(hold.annotations)
        # (by position: one per node, and a keyword costs a named tuple about 0.2 us more)
        return NodeDecision(
            node.name, window.name, held, node.deleting, created, states, None, selected
        )
    if held and _keeps_hold(node, window, hold.annotations, now):
        # Most nodes of a held run: nothing to change (what the rest finds for such a node).
        states = _all_ours(hold.annotations)
        return NodeDecision(node.name, window.name, True, False, created, states)
    states, patch = _patch(node, window, hold, mode, now, held)
    return NodeDecision(
        node.name, window.name, held, node.deleting, created, states, patch, selected
    )


def _patch(
    node: NodeView, window: HoldWindow, hold: HoldSettings, mode: Mode, now: datetime, held: bool
) -> tuple[tuple[tuple[str, KeyState], ...], NodePatch | None]:
    """The state of each key the node's decision reads, and the patch it needs (None: none)."""
    annotations = node.annotations
    claims, pins = claimed_keys(annotations), pinned_keys(annotations)
    keys = (*hold.annotations, *sorted((claims | pins) - set(hold.annotations)))
    states = tuple((k, key_state(annotations, k, claims, pins)) for k in keys)
    if node.deleting:
        return states, None
    wanted = set(hold.annotations) if held else set()
    added = tuple(k for k, s in states if k in wanted and s is KeyState.FREE)
    removed = tuple(
        k for k, s in states if k not in wanted and s is KeyState.OURS and _known(k, hold)
    )
    owned, disowned = _claims(annotations, states, claims, pins, added, removed)
    changes: dict[str, str | None] = dict.fromkeys(added, HOLD_VALUE) | dict.fromkeys(removed)
    if owned != claims or (not owned and OWNERSHIP_MARKER in annotations):
        changes[OWNERSHIP_MARKER] = marker_value(owned)  # an empty marker goes away
    ours = any(_known(k, hold) for k in owned - pins)
    stamps, ignored = _stamps(node, window, hold, mode, now, held=ours)
    changes.update(stamps)
    if not changes:
        return states, None
    patch = NodePatch(
        node=node.name,
        resource_version=node.resource_version,
        changes=tuple(changes.items()),
        added=added,
        removed=removed,
        window=window.name,
        disowned=disowned,
        ignored=ignored,
    )
    return states, patch


def _claims(
    annotations: Mapping[str, str],
    states: Sequence[tuple[str, KeyState]],
    claims: frozenset[str],
    pins: frozenset[str],
    added: Sequence[str],
    removed: Sequence[str],
) -> tuple[set[str], tuple[str, ...]]:
    """The keys the marker claims after this patch, and the claims it drops. A claim stays
    while its key is "true": ours, or pinned by a person over a value this tool wrote (unpin
    hands it back). One on a key someone changed or removed is dropped."""
    kept = {k for k in claims & pins if annotations.get(k) == HOLD_VALUE}
    owned = {k for k, s in states if s is KeyState.OURS and k not in removed} | set(added) | kept
    disowned = tuple(k for k, _ in states if k in claims - owned and k not in removed)
    return owned, disowned


def _on_budget(node: NodeView, hold: HoldSettings, budgeted: frozenset[str]) -> bool:
    """Held by its NodePool's budget entry (`budget`; `auto`: `budgeted`), not annotations."""
    return hold.mechanism is Mechanism.BUDGET or node.labels.get(DEFAULT_GROUP_LABEL) in budgeted


@lru_cache(maxsize=8)  # one tuple a run, shared by every node that carries none of the keys
def _all_free(keys: tuple[str, ...]) -> tuple[tuple[str, KeyState], ...]:
    return tuple((k, KeyState.FREE) for k in keys)


def _unmarked(annotations: Mapping[str, str], hold: HoldSettings) -> bool:
    """The node carries none of the annotations decide_node reads: no hold key, no claim,
    pin or stamp."""
    return not annotations or not any(k in annotations for k in (*hold.annotations, *_MARKS))


_MARKS = (OWNERSHIP_MARKER, PINNED, HOLD_STARTED, FREE_UNTIL)


@lru_cache(maxsize=8)  # one tuple a run, shared by every node that carries our hold
def _all_ours(keys: tuple[str, ...]) -> tuple[tuple[str, KeyState], ...]:
    return tuple((k, KeyState.OURS) for k in keys)


def _keeps_hold(node: NodeView, window: HoldWindow, keys: tuple[str, ...], now: datetime) -> bool:
    """The node carries our hold on every key and claims no other, without a pin or a free
    period, and a hold-started stamp exactly where a cap wants one (a good one: it stays):
    a node that stays held, whose annotations decide_node would not change."""
    annotations = node.annotations
    if (
        annotations.get(OWNERSHIP_MARKER) != marker_value(keys)
        or PINNED in annotations
        or FREE_UNTIL in annotations
        or not all(annotations.get(k) == HOLD_VALUE for k in keys)
    ):
        return False
    if window.max_hold is None:
        return HOLD_STARTED not in annotations
    return bool(keys) and _stamp(node, HOLD_STARTED, now, window.bound)[0] is not None


def _stamps(
    node: NodeView, window: HoldWindow, hold: HoldSettings, mode: Mode, now: datetime, held: bool
) -> tuple[dict[str, str | None], tuple[str, ...]]:
    """The --max-hold stamps this node must change, and why the ones this tool could not
    have written are removed. `held`: the node carries a hold of ours after this run.
    free-until goes on every selected node of the window without one (docs/design.md)."""
    annotations = node.annotations
    capped = window.max_hold is not None
    if not capped and HOLD_STARTED not in annotations and FREE_UNTIL not in annotations:
        return {}, ()  # the common case, for every node of every run: nothing to stamp
    started, started_bad = _stamp(node, HOLD_STARTED, now, window.bound)
    free, free_bad = _stamp(node, FREE_UNTIL, now, window.bound)
    want: dict[str, str | None] = dict.fromkeys((HOLD_STARTED, FREE_UNTIL))
    if held and capped and mode is Mode.RECONCILE:
        if started and holds_ours(node, hold):  # it came with our hold: the stretch began then
            want[HOLD_STARTED] = annotations[HOLD_STARTED]
        elif window.stretch_start:
            want[HOLD_STARTED] = format_time(window.stretch_start)
    if not held and mode is Mode.RECONCILE:  # a hold of ours, or a release: no free period
        want[FREE_UNTIL] = _free_stamp(node, window.free_until, free, hold, now)
    changes = {k: v for k, v in want.items() if annotations.get(k) != v}
    return changes, tuple(why for why in (started_bad, free_bad) if why)


def _free_stamp(
    node: NodeView, due: datetime | None, free: datetime | None, hold: HoldSettings, now: datetime
) -> str | None:
    """The free-until stamp a node without our hold carries: the window's (`due`, which only
    --max-hold sets) on a selected node without a later one, else its own while not over."""
    if due and (free is None or free < due) and hold.node_selector.matches(node.labels):
        return format_time(due)
    if free is not None and free > now:
        return node.annotations[FREE_UNTIL]  # the free period is not over yet
    return None


def _decide_pin(
    node: NodeView, hold: HoldSettings, mode: Mode, now: datetime
) -> tuple[NodeDecision, str | None]:
    """`pin`: every configured key "true" and listed in PINNED; a key it adds is claimed too,
    so that the marker still says which values this tool wrote. `unpin`: out of PINNED, the
    claims as they are: a key the tool set goes back to the normal rule, a person's stays
    theirs. A person's other value ("false") is refused, not overwritten (docs/design.md,
    "Pins"). Returns the decision and why the node was refused, if it was."""
    annotations = node.annotations
    claims, pins = claimed_keys(annotations), pinned_keys(annotations)
    states = tuple((k, key_state(annotations, k, claims, pins)) for k in hold.annotations)
    decision = NodeDecision(node.name, "", False, node.deleting, min(node.created, now), states)
    changes: dict[str, str | None] = {}
    if node.deleting:
        return decision, None
    if mode is Mode.PIN:
        theirs = [k for k in hold.annotations if annotations.get(k, HOLD_VALUE) != HOLD_VALUE]
        if theirs:
            key = theirs[0]
            return decision, (
                f"{key} is {annotations[key]!r}, someone else's value; "
                f"to pin it, remove it first (kubectl annotate node {node.name} {key}-)"
            )
        added = {k for k in hold.annotations if k not in annotations}
        changes = dict.fromkeys(sorted(added), HOLD_VALUE)
        touched = tuple(k for k in hold.annotations if k in added or k not in pins)
        now_pinned, owned = pins | set(hold.annotations), claims | added
    else:
        touched = tuple(k for k in hold.annotations if k in pins)
        now_pinned, owned = pins - set(hold.annotations), claims
    if now_pinned != pins:
        changes[PINNED] = marker_value(now_pinned)
    if owned != claims:
        changes[OWNERSHIP_MARKER] = marker_value(owned)
    if not changes:
        return decision, None
    pinned, unpinned = (touched, ()) if mode is Mode.PIN else ((), touched)
    patch = NodePatch(
        node.name, node.resource_version, tuple(changes.items()), pinned=pinned, unpinned=unpinned
    )
    return decision._replace(patch=patch), None


def _transitions(
    windows: Mapping[str, HoldWindow],
    decisions: Sequence[NodeDecision],
    nodes: Sequence[NodeView],
    hold: HoldSettings,
    mode: Mode,
) -> tuple[Transition, ...]:
    """Each window whose hold this run starts, extends (it was ours already) or ends."""
    by_window: dict[str, list[NodeDecision]] = defaultdict(list)
    for d in decisions:
        by_window[d.window].append(d)
    found = (_transition(windows[name], group, hold, mode) for name, group in by_window.items())
    result = [t for t in found if t is not None]
    if not result:
        return ()  # a steady run: no pass over the nodes for their uids
    anchors = {t.node for t in result}
    uids = {n.name: n.uid for n in nodes if n.name in anchors}
    return tuple(replace(t, node_uid=uids.get(t.node, "")) for t in result)


def _transition(
    window: HoldWindow, group: Sequence[NodeDecision], hold: HoldSettings, mode: Mode
) -> Transition | None:
    """The window's hold starts, extends or ends in this run (None: neither); no node uid yet."""
    adds = [d for d in group if d.patch and d.patch.added]
    removes = [d for d in group if d.patch and d.patch.removed]
    if mode is Mode.RECONCILE and window.held and adds:
        ours = any(s is KeyState.OURS and _known(k, hold) for d in group for k, s in d.keys)
        reason, changed = (Reason.EXTENDED if ours else Reason.STARTED), adds
    elif removes and not (window.held and mode is Mode.RECONCILE and hold.mechanism.budgets):
        reason, changed = Reason.ENDED, removes  # held: not an end, a budget took over
    else:
        return None
    return Transition(reason, window, window.youngest or changed[0].node, "", len(changed))


#: The most Events one run records: one per window whose hold started, grew or ended, and past
#: this many the rest summed up in one Event per reason (a scope change once sent 1,508).
MAX_EVENTS = 10


def recorded_events(transitions: Sequence[Transition]) -> tuple[Transition, ...]:
    """The Events a run records, on nodes and NodePools alike: at most MAX_EVENTS; past that,
    the rest are summed up, one per reason with its node count."""
    if len(transitions) <= MAX_EVENTS:
        return tuple(transitions)
    reasons = sorted({t.reason for t in transitions})
    cut = MAX_EVENTS - len(reasons)
    summed = []
    for reason in reasons:
        if rest := [t for t in transitions[cut:] if t.reason == reason]:
            nodes = sum(t.nodes for t in rest)
            first = rest[0]
            summed.append(
                Transition(reason, None, first.node, first.node_uid, nodes, len(rest), first.kind)
            )
    return (*transitions[:cut], *summed)


def decide(
    nodes: Sequence[NodeView],
    now: datetime,
    hold: HoldSettings,
    mode: Mode = Mode.RECONCILE,
    observed: Observed = Observed(),
) -> Plan:
    """The whole decision for one run."""
    if mode in (Mode.PIN, Mode.UNPIN):
        pins = [_decide_pin(node, hold, mode, now) for node in nodes]
        refused = tuple((d.node, why) for d, why in pins if why)
        decisions = tuple(d for d, _ in pins)
        return Plan(now, hold, mode, (), decisions, refused=refused, observed=observed)
    names = [window_name(node, hold) for node in nodes]
    members: dict[str, list[NodeView]] = defaultdict(list)
    bad, on_nodes = [], set()
    for node, name in zip(nodes, names, strict=True):
        members[name].append(node)
        if node.own is not None:  # (most nodes' NodePools have no settings of their own)
            bad += own_settings(node.own, hold).bad
        if node.annotations and (
            NODE_HOLD in node.annotations or NODE_MAX_HOLD in node.annotations
        ):
            on_nodes.add(node.labels.get(DEFAULT_GROUP_LABEL, ""))
    if hold.scope is Scope.CLUSTER and not members:
        members["cluster"] = []
    windows = {name: _window(name, group, now, hold) for name, group in sorted(members.items())}
    decisions = tuple(
        decide_node(node, windows[name], hold, mode, now, observed.budgeted)
        for node, name in zip(nodes, names, strict=True)
    )
    reconcile = mode is Mode.RECONCILE
    return Plan(
        now=now,
        hold=hold,
        mode=mode,
        windows=tuple(windows.values()),
        decisions=decisions,
        transitions=_transitions(windows, decisions, nodes, hold, mode),
        bad_values=tuple(dict.fromkeys(bad)) if reconcile else (),
        settings_on_nodes=tuple(sorted(on_nodes)) if reconcile else (),
        observed=observed,
    )
