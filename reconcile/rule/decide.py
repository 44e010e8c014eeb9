"""The decision: (node views, now, hold settings) -> Plan. Pure: no I/O, no clock.

Rules, all in this file:
- A *hold window* is the cluster, a group of nodes (`--hold-scope group`) or one
  node (`--hold-scope node`). It is held while now < its youngest trigger node's
  creationTimestamp + hold duration (with `--max-hold`: see `_stretches`).
  Nodes being deleted never trigger a hold and are never patched.
- A held window's selected nodes carry every hold annotation; a node that already
  has a hold annotation, whatever its value, is left alone for that key.
- Ownership: the tool lists the keys it set in its ownership marker, in the same
  patch that sets them. A claim stays while its key still has the value the tool
  wrote, whether or not this run uses that key; the tool removes a claimed key only
  if it is a configured or well-known hold key. A claim whose key someone changed
  or removed is dropped and the annotation stays (someone else took it over).
- Pins: a key listed in `node-holder.dev/pinned` (a person's `node-holder pin`) is
  never added, removed or claimed; a claim on it is dropped.
- `--max-hold` is a hard bound on continuous holding. A stretch's start is written
  as `node-holder.dev/hold-started` in the same patch as the hold annotation, so
  the bound holds when the stretch's first nodes go away. When the cap ends a
  stretch, the releasing patch writes `node-holder.dev/free-until` (the release
  plus one hold duration): until then no new hold starts in that window. Both go away with
  the hold, or once the free period is over. A stamp this tool could not have written
  (unreadable, a start in the future, a free period longer than one hold duration) is
  ignored and removed.
- A creationTimestamp ahead of now (a skewed API server) counts as now.
- In group scope, a Karpenter node whose NodePool label has not arrived yet starts no
  hold of the unlabelled nodes' group.
- Only nodes whose annotations must change get a patch.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from reconcile.rule.nodes import NodeView, claimed_keys, pinned_keys
from reconcile.rule.settings import (
    FREE_UNTIL,
    HOLD_STARTED,
    HOLD_VALUE,
    KNOWN_HOLD_KEYS,
    OWNERSHIP_MARKER,
    PINNED,
    HoldSettings,
    Scope,
    format_duration,
)

#: How far a stamp may lie beyond what this run's clock allows before it counts as not
#: ours: API servers' clocks differ by a little, and an overlapping run read its own.
STAMP_SLACK = timedelta(minutes=1)


class Mode(StrEnum):
    RECONCILE = "reconcile"
    RELEASE = "release"  # remove every hold this tool owns, whatever the ages
    PIN = "pin"  # a person's pin on the named nodes (PINNED)
    UNPIN = "unpin"  # give the named nodes' pins back to the normal rule


class KeyState(StrEnum):
    OURS = "ours"  # present, claimed by the ownership marker, value as we wrote it
    FOREIGN = "foreign"  # "true", set by someone else (or taken over): held by others
    EXEMPT = "exempt"  # another value ("false"), set by someone: Karpenter may disrupt it
    FREE = "free"  # absent
    PINNED = "pinned"  # listed in PINNED by a person: never added, removed or claimed


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
        """`pinned`, `held by us`, `held by others`, `exempt` or `free`, as `status` shows it."""
        states = {s for _, s in self.keys}
        if KeyState.PINNED in states:
            return "pinned"
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

    @property
    def kept_claims(self) -> dict[str, int]:
        """Keys node-holder set that this run may not remove (not configured, not well
        known), most nodes first: the claims stay, and a run that names the key removes it."""
        kept: Counter[str] = Counter()
        if self.mode in (Mode.RECONCILE, Mode.RELEASE):
            for d in self.decisions:
                kept.update(k for k, s in d.keys if s is KeyState.OURS and not _known(k, self.hold))
        return dict(kept.most_common())

    def window(self, name: str) -> HoldWindow | None:
        for w in self.windows:
            if w.name == name:
                return w
        return None

    def decide_again(self, node: NodeView, now: datetime | None = None) -> NodeDecision:
        """Decide for one node re-read after a 409, at `now` (later than the plan's).

        The plan's hold window is taken as the node's own stamps now say: an overlapping
        run may have capped the stretch meanwhile and started a free period on it.
        """
        now = max(now or self.now, self.now)
        name = window_name(node, self.hold)
        found = self.window(name) or _window(name, [node], now, self.hold)
        return decide_node(
            node, _stamped(found, [node], now, self.hold), self.hold, self.mode, now=now
        )


# --- ownership ---------------------------------------------------------------


def marker_value(keys: Iterable[str]) -> str | None:
    ordered = sorted(set(keys))
    return ",".join(ordered) if ordered else None


def key_state(
    annotations: Mapping[str, str],
    key: str,
    claimed: frozenset[str],
    pinned: frozenset[str] = frozenset(),
) -> KeyState:
    if key in pinned:
        return KeyState.PINNED
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


def _known(key: str, hold: HoldSettings) -> bool:
    """Whether this run may remove `key` where the marker claims it.

    The marker is only an annotation: anyone who can edit a node can make it name any key.
    Only the configured keys and the well-known Karpenter and cluster-autoscaler hold keys
    are ever removed; a claim on any other key stays while its value is ours, untouched,
    until a run that configures that key removes it.
    """
    return key in hold.annotations or key in KNOWN_HOLD_KEYS


def _holds_ours(node: NodeView, hold: HoldSettings) -> bool:
    """The node carries a hold of ours on a key this run acts on."""
    pinned = pinned_keys(node.annotations)
    return any(
        node.annotations.get(k) == HOLD_VALUE and k not in pinned and _known(k, hold)
        for k in claimed_keys(node.annotations)
    )


def parse_stamp(raw: str) -> datetime | None:
    """One of our own RFC 3339 UTC stamps (`2026-11-22T20:41:22Z`); None if someone broke it."""
    if not raw:
        return None  # absent: most nodes, every run; strptime would raise (slowly) for it
    try:
        moment = datetime.strptime(raw, "%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError):
        return None
    return moment.replace(tzinfo=UTC)


def _bad_stamp(key: str, raw: str, now: datetime, hold: HoldSettings) -> str | None:
    """Why a stamp is not one this tool could have written at `now`; None if it could."""
    moment = parse_stamp(raw)
    shown = raw if len(raw) <= 40 else raw[:40] + "..."
    if moment is None:
        return f"{key}={shown!r} is not a time node-holder writes"
    if key == HOLD_STARTED and moment > now + STAMP_SLACK:
        return f"{key}={raw} is in the future"
    if key == FREE_UNTIL and moment > now + hold.hold_duration + STAMP_SLACK:
        return f"{key}={raw} is later than now plus one hold duration"
    return None


def _recorded(
    members: Sequence[NodeView], key: str, now: datetime, hold: HoldSettings
) -> list[datetime]:
    """Times under `key` on `members` that this tool could have written."""
    found = []
    for node in members:
        raw = node.annotations.get(key)
        if raw is not None and _bad_stamp(key, raw, now, hold) is None:
            found.append(parse_stamp(raw))
    return found  # type: ignore[return-value]


def _triggers(node: NodeView, hold: HoldSettings) -> bool:
    """Whether this node's arrival starts a hold of its window."""
    if node.deleting or not hold.trigger_selector.matches(node.labels):
        return False
    # A Karpenter node before registration would hold the unlabelled (system) nodes' group.
    return not (
        hold.scope is Scope.GROUP and node.registering and hold.group_label not in node.labels
    )


def _window(
    name: str, members: Sequence[NodeView], now: datetime, hold: HoldSettings
) -> HoldWindow:
    triggers = sorted((n for n in members if _triggers(n, hold)), key=lambda n: (n.created, n.name))
    if not triggers:
        return _stamped(HoldWindow(name=name, held=False, nodes=len(members)), members, now, hold)
    created = [min(n.created, now) for n in triggers]  # a skewed server's future counts as now
    last = _stretches(created, hold.hold_duration, hold.max_hold)[-1]
    window = HoldWindow(
        name=name,
        held=now < last.until,
        youngest=triggers[-1].name,
        youngest_created=created[-1],
        hold_until=last.until,
        stretch_start=last.start,
        capped=last.capped,
        triggers=len(triggers),
        nodes=len(members),
    )
    return _stamped(window, members, now, hold)


def _stamped(
    window: HoldWindow, members: Sequence[NodeView], now: datetime, hold: HoldSettings
) -> HoldWindow:
    """`window` as the --max-hold stamps on `members` say.

    The stretch may have begun before its oldest surviving node (`hold-started`), and a
    capped stretch leaves the window free for one hold duration (`free-until`).
    """
    if hold.max_hold is None:
        return window
    frees = [t for t in _recorded(members, FREE_UNTIL, now, hold) if t > now]
    free_until = max([*frees, *filter(None, [window.free_until])], default=None)
    start, until, capped = window.stretch_start, window.hold_until, window.capped
    if start is not None and until is not None and window.youngest_created is not None:
        ours = [m for m in members if HOLD_STARTED in m.annotations and _holds_ours(m, hold)]
        starts = [t for t in _recorded(ours, HOLD_STARTED, now, hold) if t <= now]
        if starts and min(starts) < start:
            start = min(starts)
            if until > start + hold.max_hold:
                until, capped = start + hold.max_hold, True
        young = now < window.youngest_created + hold.hold_duration
        if free_until is None and starts and capped and until <= now and young:
            # The cap ends our hold in this run (a young node would still hold the window):
            # free for one hold duration from the release itself, which a late run (missed
            # runs, a crash) must not shorten. Every node of the window gets the stamp.
            free_until = now + hold.hold_duration
        if free_until is not None:  # no hold during the free period: the last one ended
            until = min(until, free_until - hold.hold_duration, now)
    return replace(
        window,
        held=until is not None and now < until and free_until is None,
        hold_until=until,
        stretch_start=start,
        capped=capped,
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
    if mode in (Mode.PIN, Mode.UNPIN):
        return _decide_pin(node, hold, mode, now)
    annotations = node.annotations
    listed, pinned = claimed_keys(annotations), pinned_keys(annotations)
    relevant = hold.annotations
    if listed or pinned:
        relevant = (*hold.annotations, *sorted((listed | pinned) - set(hold.annotations)))
    states = tuple((k, key_state(annotations, k, listed, pinned)) for k in relevant)
    selected = hold.node_selector.matches(node.labels)
    held = mode is Mode.RECONCILE and window.held and not node.deleting and selected
    decision = NodeDecision(
        node=node.name,
        window=window.name,
        held=held,
        deleting=node.deleting,
        created=min(node.created, now) if now else node.created,
        keys=states,
        selected=selected,
    )
    if node.deleting:
        return decision

    changes: dict[str, str | None] = {}
    added: list[str] = []
    removed: list[str] = []
    disowned: list[str] = []
    owned = set(listed)
    for key, state in states:
        wanted = held and key in hold.annotations
        if wanted and state is KeyState.FREE:
            changes[key] = HOLD_VALUE
            added.append(key)
            owned.add(key)
        elif not wanted and state is KeyState.OURS and _known(key, hold):
            changes[key] = None
            removed.append(key)
            owned.discard(key)
        elif state is KeyState.PINNED:
            owned.discard(key)  # a person's pin: never ours
        elif key in listed and state in (KeyState.EXEMPT, KeyState.FREE):
            disowned.append(key)  # someone changed or removed it: theirs now, never ours
            owned.discard(key)
    if owned != listed or (not owned and OWNERSHIP_MARKER in annotations):
        changes[OWNERSHIP_MARKER] = marker_value(owned)  # an empty marker goes away
    context = _Context(window, hold, mode, now)
    ignored = _ignored(node, context)
    before = any(s is KeyState.OURS and _known(k, hold) for k, s in states)
    after = any(_known(k, hold) for k in owned)
    changes.update(_bookkeeping(node, context, held=(before, after), ignored=ignored))
    if not changes:
        return decision
    patch = NodePatch(
        node=node.name,
        resource_version=node.resource_version,
        changes=tuple(changes.items()),
        added=tuple(added),
        removed=tuple(removed),
        window=window.name,
        disowned=tuple(disowned),
        ignored=tuple(ignored.values()),
    )
    return replace(decision, patch=patch)


def _decide_pin(
    node: NodeView, hold: HoldSettings, mode: Mode, now: datetime | None
) -> NodeDecision:
    """`pin`: every configured key "true", listed in PINNED, dropped from the marker.
    `unpin`: the configured keys leave PINNED; each still "true" is claimed again, so the
    normal rule removes it when no hold is due (or keeps it while one is)."""
    annotations = node.annotations
    listed, pinned = claimed_keys(annotations), pinned_keys(annotations)
    keys = frozenset(hold.annotations)
    changes: dict[str, str | None] = {}
    if mode is Mode.PIN:
        changes = {k: HOLD_VALUE for k in hold.annotations if annotations.get(k) != HOLD_VALUE}
        touched = tuple(
            k for k in hold.annotations if k in changes or k in listed or k not in pinned
        )
        now_pinned, owned = pinned | keys, listed - keys
    else:
        touched = tuple(k for k in hold.annotations if k in pinned)
        ours = {k for k in touched if annotations.get(k) == HOLD_VALUE}
        now_pinned, owned = pinned - keys, listed | ours
    if now_pinned != pinned:
        changes[PINNED] = marker_value(now_pinned)
    if owned != listed:
        changes[OWNERSHIP_MARKER] = marker_value(owned)
    states = tuple((k, key_state(annotations, k, listed, pinned)) for k in hold.annotations)
    created = min(node.created, now) if now else node.created
    decision = NodeDecision(node.name, "", False, node.deleting, created, states)
    if node.deleting or not changes:
        return decision
    patch = NodePatch(
        node=node.name,
        resource_version=node.resource_version,
        changes=tuple(changes.items()),
        pinned=touched if mode is Mode.PIN else (),
        unpinned=touched if mode is Mode.UNPIN else (),
    )
    return replace(decision, patch=patch)


@dataclass(frozen=True)
class _Context:
    """What one node's decision is made in."""

    window: HoldWindow
    hold: HoldSettings
    mode: Mode
    now: datetime | None


def _ignored(node: NodeView, ctx: _Context) -> dict[str, str]:
    """The --max-hold stamps on this node that this tool could not have written, and why:
    they are ignored by the decision and removed."""
    found = {}
    for key in (HOLD_STARTED, FREE_UNTIL):
        raw = node.annotations.get(key)
        why = _bad_stamp(key, raw, ctx.now, ctx.hold) if raw is not None and ctx.now else None
        if why:
            found[key] = why
    return found


def _bookkeeping(
    node: NodeView, ctx: _Context, *, held: tuple[bool, bool], ignored: Mapping[str, str]
) -> dict[str, str | None]:
    """The --max-hold stamps: set with the hold, removed with it, once stale or when
    this tool could not have written them (`ignored`).

    `held`: the node carries a hold of ours before and after this run. A hold-started
    counts only where it came with our hold: a new hold writes the stretch's start.
    """
    window, hold, mode = ctx.window, ctx.hold, ctx.mode
    annotations = node.annotations
    if hold.max_hold is None and HOLD_STARTED not in annotations and FREE_UNTIL not in annotations:
        return {}  # the common case, for every node of every run: nothing to stamp
    changes: dict[str, str | None] = {}
    before, owned = held
    keep_started = owned and hold.max_hold is not None and mode is Mode.RECONCILE
    started = annotations.get(HOLD_STARTED)
    has_started = started is not None and before and HOLD_STARTED not in ignored
    if keep_started and not has_started and window.stretch_start:
        if started != _iso(window.stretch_start):
            changes[HOLD_STARTED] = _iso(window.stretch_start)
    elif started is not None and not (keep_started and has_started):
        changes[HOLD_STARTED] = None
    changes.update(_free_stamp(node, ctx, owned=owned, ignored=FREE_UNTIL in ignored))
    return changes


def _free_stamp(
    node: NodeView, ctx: _Context, *, owned: bool, ignored: bool
) -> dict[str, str | None]:
    """FREE_UNTIL on every node of a window in its free period, not only on the nodes the
    cap released: consolidation may remove all of those before the period ends. Removed
    once the period is over."""
    window, hold, mode, now = ctx.window, ctx.hold, ctx.mode, ctx.now
    annotations = node.annotations
    free = None if ignored else parse_stamp(annotations.get(FREE_UNTIL, ""))
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
        already = any(s is KeyState.OURS and _known(k, hold) for d in group for k, s in d.keys)
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
    if mode in (Mode.PIN, Mode.UNPIN):
        pins = tuple(_decide_pin(node, hold, mode, now) for node in nodes)
        return Plan(now=now, hold=hold, mode=mode, windows=(), decisions=pins)
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
