"""`node-holder simulate`: replay a node timeline through the pure decision, change by change.

Every configuration replays the same runs, `--interval` apart, in memory: the timeline's
deletions and arrivals change the nodes, `decide()` (the function the CronJob calls) plans
the run, and each patch's changes are applied to its node; nothing here interprets
annotation keys or decides anything. A window is decided again only at a run where its
decision can change, and decide() sees one node of each class of alike nodes plus the nodes
its hold depends on (`_Replay._views`); `exact=True` takes neither shortcut, the reference
the tests compare with (docs/maintainers/replay.md, says why both are exact).
"""

from __future__ import annotations

import heapq
import math
import re
import time
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from reconcile.rule import decide as rules
from reconcile.rule import nodes, settings
from reconcile.rule.budget import budget_entry
from reconcile.rule.settings import ConfigError, HoldSettings, Scope, format_duration
from reconcile.simulate.timeline import (
    Grid,
    Timeline,
    TimelineNode,
    iso,
    load_timeline,
    parse_time,
)

MAX_RUNS = 20_160  # 14 days at one run a minute, per configuration
MAX_COLUMNS = 8
MAX_SWEEP = 12
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # before any node
MICROSECOND = timedelta(microseconds=1)
COMPARE_EXAMPLE = "10m,40m,20m/group,20m/node,20m/max=1h,20m/nodepool:batch=45m"
NODEPOOL = "nodepool:"  # a column's NodePool settings: nodepool:NAME=DURATION
SWEEP = "5m,10m,15m,20m,30m,45m,1h,2h"  # `--sweep` without durations
PAGE_SIZE = settings.RunSettings().page_size  # a run lists its nodes in the CronJob's pages
#: The stamps decide() reads from a window's nodes as one set of values, whichever nodes
#: carry them: a class of alike nodes brings the same values as all its members.
STAMPS = frozenset({settings.HOLD_STARTED, settings.FREE_UNTIL})
FEW = 8  # a window of at most this many nodes: decide() sees them all (cheaper than choosing)
#: A window's moments (its fields that hold a datetime): where its decision may change.
_TIMES = [f.name for f in fields(rules.HoldWindow) if "datetime" in str(f.type)]
POOL_LABEL = settings.DEFAULT_GROUP_LABEL  # a node's NodePool (the budget mechanism's figure)

#: Told how far a replay has come: (configuration label, runs done, runs in all).
Progress = Callable[[str, int, int], None]


class SimulationFailed(Exception):
    """The replay broke one of its own invariants: a bug worth reporting (exit 1)."""


# --- what to replay ---------------------------------------------------------------------


@dataclass(frozen=True)
class Column(HoldSettings):
    """A configuration to replay: hold settings, and per-NodePool settings as if those
    NodePools carried them (over a NodePool list's): what a NodePool change would do."""

    #: (NodePool, NODE_HOLD or NODE_MAX_HOLD, value)
    nodepools: tuple[tuple[str, str, str], ...] = ()


def describe(hold: HoldSettings) -> str:
    """A configuration in `--compare` syntax: `20m`, `20m/group`, `20m/max=1h/nodepool:b=45m`."""
    scope = "" if hold.scope is Scope.CLUSTER else f"/{hold.scope}"
    cap = "" if hold.max_hold is None else f"/max={format_duration(hold.max_hold)}"
    given = [
        f"/{NODEPOOL}{p}{':max' * (k == settings.NODE_MAX_HOLD)}={v}" for p, k, v in _given(hold)
    ]
    return format_duration(hold.hold_duration) + scope + cap + "".join(given)


def _given(hold: HoldSettings) -> tuple[tuple[str, str, str], ...]:
    return hold.nodepools if isinstance(hold, Column) else ()


def with_column(found: nodes.NodePoolSettings, hold: HoldSettings) -> nodes.NodePoolSettings:
    """The NodePools' own settings a configuration replays: a NodePool list's, and over them
    the column's `nodepool:` values."""
    merged = dict(found)
    for pool, key, value in _given(hold):
        own = merged.get(pool) or nodes.NodePoolOwn(pool, None, None)
        merged[pool] = own._replace(**{"hold" if key == settings.NODE_HOLD else "cap": value})
    return merged


def parse_compare(
    text: str, base: HoldSettings, option: str = "--compare", most: int = MAX_COLUMNS - 1
) -> list[HoldSettings]:
    """`--compare 10m,40m,20m/group,20m/max=1h`: what each column changes from `base`
    (the grammar: docs/simulate.md, "Command line")."""
    specs = [c.strip() for c in text.split(",")] if text.strip() else []
    columns = [
        _column(spec, base, f"{option}: column {n}", option) for n, spec in enumerate(specs, 1)
    ]
    if len(columns) > most:
        raise ConfigError(
            f"{option}: {len(columns)} columns; compare at most {most} configurations with the "
            "primary one"
        )
    return columns


def _column(spec: str, base: HoldSettings, where: str, option: str) -> Column:
    """One column: DURATION[/SCOPE][/max=DURATION][/nodepool:NAME[:max]=DURATION...]."""
    example = f"use e.g. {option} {COMPARE_EXAMPLE}"
    if not spec:
        raise ConfigError(f"{where} is empty; {example}")
    where += f" ({spec!r})"
    first, *parts = [p.strip() for p in spec.split("/")]
    hold = replace(base, hold_duration=_duration(first, "hold duration", where, example))
    caps = [p[4:].strip() for p in parts if p.lower().startswith("max=")]
    given = [p[len(NODEPOOL) :] for p in parts if p.lower().startswith(NODEPOOL)]
    scopes = [p for p in parts if not p.lower().startswith(("max=", NODEPOOL))]
    for kind, found in (("scope", scopes), ("max", caps)):
        if len(found) > 1:
            raise ConfigError(f"{where}: gives the {kind} twice; give it once")
    if scopes and scopes[0].lower() not in {s.value for s in Scope}:
        raise ConfigError(
            f"{where}: {scopes[0]!r} is neither a scope (cluster, group, node), max=DURATION "
            f"nor {NODEPOOL}NAME=DURATION; {example}"
        )
    if scopes:
        hold = replace(hold, scope=Scope(scopes[0].lower()))
    if caps:
        cap = None if caps[0].lower() == "none" else _duration(caps[0], "max hold", where, example)
        hold = replace(hold, max_hold=cap)
    elif hold.max_hold is not None and hold.max_hold < hold.hold_duration:
        hold = replace(hold, max_hold=None)  # a longer hold drops the inherited cap
    settings.check_max_hold(hold, option=where, env=None)
    own = tuple(_nodepool(p, hold, where) for p in given)
    return Column(**{**vars(hold), "nodepools": own})


def _duration(raw: str, what: str, where: str, example: str) -> timedelta:
    try:
        return settings.parse_duration(raw, bare_minutes=what == "hold duration")
    except ValueError as exc:
        raise ConfigError(f"{where}: {what} {raw!r} {exc}; {example}") from None


def _nodepool(text: str, hold: HoldSettings, where: str) -> tuple[str, str, str]:
    """`batch=45m` or `batch:max=3h`: checked as the rule checks the NodePool's annotation."""
    found = re.fullmatch(r"\s*([^:=\s]+)\s*(:\s*max)?\s*=(.*)", text, re.IGNORECASE)
    if not found:
        raise ConfigError(
            f"{where}: '{NODEPOOL}{text}' is not {NODEPOOL}NAME=DURATION or "
            f"{NODEPOOL}NAME:max=DURATION"
        )
    pool, value = found[1], found[3].strip()
    key = settings.NODE_MAX_HOLD if found[2] else settings.NODE_HOLD
    own = nodes.NodePoolOwn(pool, *((None, value) if found[2] else (value, None)))
    if bad := rules.own_settings(own, hold).bad:
        raise ConfigError(f"{where}: {bad[0][1]}; use e.g. {NODEPOOL}{pool}=45m")
    return pool, key, value


@dataclass(frozen=True)
class Span:
    """When the replay runs: start, start + interval, ... before end."""

    start: datetime
    end: datetime
    interval: timedelta

    @property
    def runs(self) -> int:
        return max(0, math.ceil((self.end - self.start) / self.interval))

    def tick(self, i: int) -> datetime:
        return self.start + i * self.interval

    def index(self, moment: datetime) -> int:
        """The first run at or after `moment`."""
        return math.ceil((moment - self.start) / self.interval)


def replay_span(
    timeline: Timeline,
    holds: list[HoldSettings],
    interval: timedelta,
    start: datetime | None = None,
    end: datetime | None = None,
    last: timedelta | None = None,
) -> Span:
    """Default: from the first thing that happens until the last hold could have ended;
    runs land on multiples of the interval (like a `*/N` CronJob schedule)."""
    moments = [t for n in timeline.nodes for t in (n.created, n.deleted) if t is not None]
    step = interval.total_seconds()
    if end is None and timeline.end is None and moments:
        longest = max(d for d, _ in hold_durations(timeline, holds))
        latest = (max(moments) + longest).timestamp()
        end = datetime.fromtimestamp(math.ceil(latest / step) * step, UTC) + interval
    end = end or timeline.end
    start = start or timeline.start or min(moments, default=None)
    if end is None or start is None:
        raise ConfigError("the timeline has no times at all; give --start and --end")
    start = end - last if last is not None else start
    span = Span(datetime.fromtimestamp(start.timestamp() // step * step, UTC), end, interval)
    if end <= span.start:
        raise ConfigError(
            f"the replay would end ({iso(end)}) before it starts ({iso(span.start)}); "
            "fix --start/--end or the timeline's start:/end:"
        )
    if span.runs > MAX_RUNS:
        raise ConfigError(
            f"the timeline spans {format_duration(end - span.start)}: {span.runs:,} runs "
            f"at --interval {format_duration(interval)} (at most {MAX_RUNS:,}); replay part "
            "of it with --last 24h or --start/--end, or a longer --interval"
        )
    return span


def hold_durations(
    timeline: Timeline, holds: list[HoldSettings]
) -> set[tuple[timedelta, str | None]]:
    """Every hold the replay compares, each configuration's and its NodePools' own ("0" holds
    nothing), and where it comes from (None: a configuration's)."""
    found = set()
    for hold in holds:
        own = with_column(timeline.nodepool_settings, hold)
        found.add((hold.hold_duration, None))
        for given in filter(None, own.values()):
            pool = rules.own_settings(given, hold)
            found.add((pool.duration, pool.sources[0]))
    return {(d, source) for d, source in found if d}


class Schedule(NamedTuple):
    """Which timeline nodes arrive and leave at each run, and those no run ever sees."""

    arrivals: Mapping[int, list[TimelineNode]]
    departures: Mapping[int, list[TimelineNode]]
    unseen: tuple[str, ...]


def schedule(timeline: Timeline, span: Span) -> Schedule:
    """A node arrives at the first run at or after its creation and leaves at the first
    run at or after its deletion; one that lives between two runs is never seen."""
    arrivals: dict[int, list[TimelineNode]] = defaultdict(list)
    departures: dict[int, list[TimelineNode]] = defaultdict(list)
    unseen = []
    for node in timeline.nodes:
        first = span.index(max(node.created, span.start))
        if (node.deleted and node.deleted <= span.start) or first >= span.runs:
            continue  # gone before the replay starts, or born after it
        leave = span.index(node.deleted) if node.deleted else span.runs
        if leave <= first:
            unseen.append(node.name)
            continue
        arrivals[first].append(node)
        if leave < span.runs:
            departures[leave].append(node)
    return Schedule(arrivals, departures, tuple(unseen))


# --- results ------------------------------------------------------------------------------


@dataclass
class Period:
    """One stretch of holding in one hold window, as the runs saw it."""

    window: str
    start: datetime  # the first run that held
    trigger: str  # youngest node when the hold started
    trigger_group: str | None  # its --group-label value, to say where the hold came from
    end: datetime | None = None  # the first run that released; None: held when the replay ended
    extended: int = 0  # how often a younger node extended it
    peak_held: int = 0  # most nodes held at once in this window
    youngest: str | None = None  # the youngest trigger node at the last run

    def duration(self, replay_end: datetime) -> timedelta:
        return (self.end or replay_end) - self.start


@dataclass
class Result:
    """One configuration's figures over the whole replay."""

    hold: HoldSettings
    periods: list[Period] = field(default_factory=list)
    present_nodes: list[int] = field(default_factory=list)  # nodes in the cluster at each run
    held_nodes: list[int] = field(default_factory=list)  # carrying a hold annotation, each run
    writes: list[int] = field(default_factory=list)  # node patches each run applied
    budget_writes: int = 0  # NodePool patches of --mechanism budget (none in node scope)
    events: int = 0
    requests: int = 0  # computed: list pages + patches + Events, as a real run sends them
    removed_while_held: int = 0  # timeline deletions of nodes that carried the hold
    launches_avoided: int = 0  # estimate (docs/simulate.md)
    node_hours_kept: float = 0.0  # estimate (docs/simulate.md)
    replayed: int = 0  # runs replayed; the others could change nothing
    seconds: float = 0.0

    @property
    def label(self) -> str:
        return describe(self.hold)

    @property
    def runs(self) -> int:
        return len(self.writes)

    @property
    def held_runs(self) -> int:
        """Runs after which at least one node carried the hold."""
        return sum(1 for n in self.held_nodes if n)


@dataclass(frozen=True)
class Simulation:
    """What to replay (the timeline, when, the configurations) and, once replayed, how."""

    timeline: Timeline
    span: Span
    holds: list[HoldSettings]
    sweep: bool = False  # the configurations are a --sweep over hold durations
    results: tuple[Result, ...] = ()
    unseen: tuple[str, ...] = ()  # nodes that lived between two runs: no run ever saw them
    elapsed: float = 0.0

    @property
    def primary(self) -> Result:
        return self.results[0]


@dataclass(frozen=True)
class ReplayOptions:
    """How to replay, beyond what and when."""

    events: bool = True  # record Events as the CronJob does (--no-events: none)
    progress: Progress | None = None  # hears how far the replay is
    exact: bool = False  # decide every window with every node at every run (the reference)
    #: sees every node after each run (the cross-check compares them with a real cluster's)
    observe: Callable[[datetime, list[rules.NodeView]], None] | None = None


# --- one configuration, change by change ---------------------------------------------------


@dataclass(eq=False)
class _Class:
    """Nodes of one window that decide() cannot tell apart: same labels, same annotations
    (a node's decision never depends on its name or creation); exact replay: one each."""

    alone: str | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    own: nodes.NodePoolOwn | None = None  # its NodePool's own settings, as a run's view has them
    members: dict[str, datetime] = field(default_factory=dict)  # name -> creation time

    @property
    def key(self) -> tuple:
        labels, annotations = frozenset(self.labels.items()), frozenset(self.annotations.items())
        return self.alone, labels, annotations, self.own

    def view(self, name: str, light: bool = False) -> rules.NodeView:
        """`light`: without the stamps (`STAMPS`), for asking decide() about the node's own
        hold only (in node scope, under a cap, the window's stamps would move it)."""
        annotations = self.annotations
        if light and not STAMPS.isdisjoint(annotations):
            annotations = {k: v for k, v in annotations.items() if k not in STAMPS}
        return self._view(name, self.members[name], annotations)

    def stand_in(self) -> rules.NodeView:
        """A member dated 1970: its settings, cap and stamps count, its own hold is long over."""
        return self._view(next(iter(self.members)), EPOCH, self.annotations)

    def _view(self, name: str, created: datetime, annotations: Mapping[str, str]) -> rules.NodeView:
        return rules.NodeView(
            name, created, "1", f"sim-{name}", False, self.labels, annotations, own=self.own
        )


def _drop(counts: Counter, key: object) -> None:
    """One fewer `key`, and none left: no key (`-=` would build a Counter of every key)."""
    counts[key] -= 1
    if not counts[key]:
        del counts[key]


def _us(moment: datetime) -> int:
    """A moment as whole microseconds since 1970: exact and cheap to compare."""
    return (moment - EPOCH) // MICROSECOND


#: A trigger node as the stretches see it: (creation, name, end of its own hold, its own cap),
#: the times in microseconds (`_us`).
Trigger = tuple[int, str, int, int]
NO_CAP = 2**62  # a trigger node without a cap
EMPTY = -(2**62)  # an empty slot's end and duration: less than any


class _Triggers:
    """A window's trigger nodes in creation order, one slot each (a node that leaves empties
    its slot), under trees of the largest own-hold end and own duration over any slots, and
    the slots at which its stretches started when they were last walked.

    The stretches are those of decide() (`_last_stretch`): from the oldest node on, each from
    its first node while nodes start before the largest end so far and the cap, then past the
    free period after a capped one. Here a stretch is walked a hold at a time (a search of the
    creation times and one of a tree per step), not node by node, and after a change only
    from the stretch that holds it to a start the last walk found after it: from there on the
    stretches are the same. An arrival or a departure costs O(log n) and the steps of the
    stretches it touches (docs/maintainers/replay.md)."""

    def __init__(self, nodes: Sequence[Trigger]) -> None:
        self.size = 16
        while self.size < 2 * len(nodes):
            self.size *= 2
        self.created: list[int] = []  # by slot, empty ones too: ascending
        self.names: list[str] = []
        self.own_caps: list[int] = []
        self.ends = [EMPTY] * (2 * self.size)  # trees of maxima: the leaves at size + slot
        self.durations = [EMPTY] * (2 * self.size)
        self.alive: list[int] = []  # the slots of nodes present, ascending
        self.slots: dict[str, int] = {}
        self.caps: Counter[int] = Counter()  # own cap -> nodes present
        self.cap = -1  # the window's cap (the smallest) the starts were walked with
        self.starts: list[int] = []
        self.changed: list[int] = []  # slots that changed since the last walk
        self.extend(nodes)

    def extend(self, nodes: Sequence[Trigger]) -> bool:
        """Nodes younger than all others join (in order); False: they do not fit, build anew."""
        if nodes and (
            len(self.names) + len(nodes) > self.size
            or (self.names and nodes[0][:2] <= (self.created[-1], self.names[-1]))
        ):
            return False
        for created, name, end, cap in nodes:
            slot = len(self.names)
            self.created.append(created)
            self.names.append(name)
            self.own_caps.append(cap)
            self.alive.append(slot)
            self.slots[name] = slot
            self.caps[cap] += 1
            self._set(slot, end, end - created)
        return True

    def remove(self, name: str) -> None:
        slot = self.slots.pop(name, None)
        if slot is not None:  # else not a trigger node
            _drop(self.caps, self.own_caps[slot])
            del self.alive[bisect_left(self.alive, slot)]
            self._set(slot, EMPTY, EMPTY)

    def _set(self, slot: int, end: int, duration: int) -> None:
        self.changed.append(slot)
        ends, durations = self.ends, self.durations
        i = slot + self.size
        ends[i], durations[i] = end, duration
        while i > 1:
            i >>= 1
            ends[i] = max(ends[2 * i], ends[2 * i + 1])
            durations[i] = max(durations[2 * i], durations[2 * i + 1])

    def _largest(self, tree: list[int], lo: int, hi: int) -> tuple[int, int]:
        """(the largest value of the slots lo..hi-1, its first slot); (EMPTY, -1): none."""
        left, right = [], []
        lo, hi = lo + self.size, hi + self.size
        while lo < hi:
            if lo & 1:
                left.append(lo)
                lo += 1
            if hi & 1:
                hi -= 1
                right.append(hi)
            lo, hi = lo >> 1, hi >> 1
        best, node = EMPTY, 0
        for i in left + right[::-1]:
            if tree[i] > best:
                best, node = tree[i], i
        if not node:
            return EMPTY, -1
        while node < self.size:
            node = 2 * node if tree[2 * node] == best else 2 * node + 1
        return best, node - self.size

    def _after(self, slot: int) -> int | None:
        """The first slot at or after `slot` whose node is present."""
        k = bisect_left(self.alive, slot)
        return self.alive[k] if k < len(self.alive) else None

    def _stretch(self, first: int) -> tuple[int, list[int]]:
        """The stretch that starts at `first`: (the slot after it and its free period, the
        slots decide() needs to find it: its first, each that carried it further, its longest
        own hold)."""
        cap_end = self.created[first] + self.cap
        until, carriers = self.ends[first + self.size], [first]
        while True:
            stop = bisect_left(self.created, min(until, cap_end), first + 1)
            reach, slot = self._largest(self.ends, first, stop)
            if reach <= until:
                break
            until = reach
            carriers.append(slot)
        free, longest = self._largest(self.durations, first, stop)
        if until > cap_end:  # capped: nodes created in the free period after it start nothing
            stop = bisect_left(self.created, cap_end + free, stop)
        return stop, [*carriers, longest]

    def walk(self) -> list[int]:
        """The slots of the nodes decide() needs for the window's last stretch: that stretch's
        (above), the youngest node, the node whose own hold ends last and, where that one lies
        in the free period after an earlier capped stretch, that stretch's."""
        if not self.alive:
            return []
        cap = min(self.caps)
        if cap != self.cap:  # a new cap moves every stretch: walk them all
            self.cap, self.starts = cap, []
        old, changed, new = self.starts, sorted(self.changed), []
        at: int | None = self.alive[0]
        picks: list[int] = []
        while at is not None:
            k = bisect_left(old, at)
            if k < len(old) and old[k] == at:  # a start as before: is its stretch unchanged?
                c = bisect_left(changed, at)
                upto = bisect_right(old, changed[c]) - 1 if c < len(changed) else len(old) - 1
                if upto > k:  # the stretches up to old[upto] start where they did
                    new += old[k:upto]
                    at = self._after(old[upto])
                    continue
            new.append(at)
            stop, picks = self._stretch(at)
            at = self._after(stop)
        self.starts, self.changed = new, []
        last = new[-1]
        if not picks or picks[0] != last:
            picks = self._stretch(last)[1]
        reach = self._largest(self.ends, 0, len(self.names))[1]
        if reach < last:
            picks += self._stretch(new[bisect_right(new, reach) - 1])[1]
        return [*picks, reach, self.alive[-1]]


@dataclass
class _WindowState:
    """One hold window as the replay keeps it: its nodes, by class, its trigger nodes in
    creation order, and its last decision."""

    classes: dict[tuple, _Class] = field(default_factory=dict)
    triggers: _Triggers | None = None  # None: to be built from all its nodes
    pending: set[str] = field(default_factory=set)  # arrived since it was last decided
    last: rules.HoldWindow | None = None
    entry: dict | None = None  # --mechanism budget: the entry its NodePools would carry

    def nodes(self) -> list[str]:
        return [name for cls in self.classes.values() for name in cls.members]


class _Replay:
    """One configuration's nodes in memory, and its figures as the runs go by; `due`: the
    runs at which a window must be decided again, the runs in between are counted only."""

    def __init__(
        self,
        hold: HoldSettings,
        span: Span,
        options: ReplayOptions,
        nodepool_settings: nodes.NodePoolSettings,
    ) -> None:
        self.hold, self.span, self.options = hold, span, options
        self.nodepool_settings = with_column(nodepool_settings, hold)
        self.result = Result(hold)
        self.label = self.result.label  # told to `progress` at every replayed run
        self.wins: dict[str, _WindowState] = {}
        self.where: dict[str, _Class] = {}  # node -> its class: every node present
        self.group: dict[str, str | None] = {}  # node -> its --group-label value
        self.as_trigger: dict[str, Trigger | None] = {}  # node -> as a trigger node; None: not one
        self.open: dict[str, Period] = {}
        self.due: dict[int, set[str]] = defaultdict(set)  # run -> windows to decide then
        self.queue: list[int] = []  # the runs in `due`, earliest first
        self.carrying = 0
        self.nodepools: Counter[str | None] = Counter()  # NodePool label -> nodes present
        self.kept: list[tuple[datetime, datetime, str | None]] = []  # removed while held

    def carries(self, annotations: Mapping[str, str]) -> bool:
        return any(key in annotations for key in self.hold.annotations)

    def run(self, plan: Schedule) -> Result:
        for i in {0, *plan.arrivals, *plan.departures}:
            self._due(i)
        done, runs = 0, self.span.runs
        while self.queue and (i := heapq.heappop(self.queue)) < runs:
            if i > done:
                self._record(i - done)  # runs where nothing could change: skipped
            tick = self.span.tick(i)
            names = self.due.pop(i)
            names.update(self._leave(node, tick) for node in plan.departures.get(i, ()))
            names.update(self._arrive(node) for node in plan.arrivals.get(i, ()))
            if i == 0 or self.options.exact:
                names.update(self.wins)
            if self.options.exact:
                self._due(i + 1)
            plans = [self._decide(name, i, tick) for name in sorted(names & self.wins.keys())]
            transitions = [t for p, _ in plans for t in p.transitions]
            events = len(rules.recorded_events(transitions)) if self.options.events else 0
            self._record(1, sum(w for _, w in plans), events)
            self.result.replayed += 1
            done = i + 1
        self._record(runs - done)
        self.result.periods.extend(self.open.values())
        self.result.periods.sort(key=lambda p: (p.start, p.window))
        return self.result

    def _due(self, i: int, name: str | None = None) -> None:
        if i not in self.due:
            heapq.heappush(self.queue, i)
        self.due[i].update([name] if name else [])

    def _record(self, runs: int, writes: int = 0, events: int = 0) -> None:
        """`runs` more runs with the nodes as they are now; only the first may have written."""
        if runs <= 0:
            return
        result = self.result
        result.present_nodes += [len(self.where)] * runs
        result.held_nodes += [self.carrying] * runs
        result.writes += [writes] + [0] * (runs - 1)
        result.events += events
        pages = 1 + max(1, math.ceil(len(self.where) / PAGE_SIZE))  # the NodePools, the nodes
        result.requests += runs * pages + writes + events
        if self.options.observe:
            views = [self.where[n].view(n) for win in self.wins.values() for n in win.nodes()]
            for i in range(result.runs - runs, result.runs):
                self.options.observe(self.span.tick(i), views)
        if self.options.progress:
            self.options.progress(self.label, result.runs, self.span.runs)

    # --- the nodes -------------------------------------------------------------------------

    def _arrive(self, node: TimelineNode) -> str:
        created = node.created.replace(microsecond=0)
        labels = {k: node.labels[k] for k in self.hold.label_keys if k in node.labels}
        name = rules.window_name(rules.NodeView(node.name, created, labels=labels), self.hold)
        win = self.wins.setdefault(name, _WindowState())
        alone = node.name if self.options.exact else None
        # Its NodePool's own settings (a NodePool list's, a column's): as a run reads them.
        pool = node.labels.get(POOL_LABEL)
        own = self.nodepool_settings.get(pool) if pool is not None else None
        cls = _Class(alone, labels, node.annotations, own)
        self._join(win, cls, {node.name: created})
        win.pending.add(node.name)
        self.group[node.name] = node.labels.get(self.hold.group_label)
        self.nodepools[node.labels.get(POOL_LABEL)] += 1
        self.carrying += self.carries(node.annotations)
        return name

    def _join(self, win: _WindowState, cls: _Class, members: dict[str, datetime]) -> None:
        """`members` join the class of `win` that looks like `cls` (or `cls` itself)."""
        joined = win.classes.setdefault(cls.key, cls)
        joined.members.update(members)
        for node in members:
            self.where[node] = joined

    def _leave(self, node: TimelineNode, tick: datetime) -> str:
        cls = self.where.pop(node.name)
        name = rules.window_name(cls.view(node.name), self.hold)
        win = self.wins[name]
        del cls.members[node.name]
        if win.triggers:
            win.triggers.remove(node.name)
        if not cls.members:
            del win.classes[cls.key]
        if self.carries(cls.annotations):
            self.result.removed_while_held += 1
            self.carrying -= 1
            last = win.last  # its window's last decision: held, and until when
            if last and last.held and last.hold_until and node.deleted < last.hold_until:  # type: ignore[operator]
                self.kept.append((node.deleted, last.hold_until, self.group[node.name]))  # type: ignore[arg-type]
        _drop(self.nodepools, node.labels.get(POOL_LABEL))
        win.pending.discard(node.name)
        self.as_trigger.pop(node.name, None)
        del self.group[node.name]
        if not win.classes:
            del self.wins[name]
            if name in self.open:
                self._close(name, tick)
        return name

    # --- deciding ------------------------------------------------------------------------

    def _decide(self, name: str, i: int, tick: datetime) -> tuple[rules.Plan, int]:
        """Decide one window and apply its patches: (its plan, the node writes)."""
        win = self.wins[name]
        plan = rules.decide(self._views(win, tick), tick, self.hold)
        if [w.name for w in plan.windows] != [name]:
            raise SimulationFailed(f"decide() did not keep the nodes of {name} in one window")
        (window,) = plan.windows
        held = sum(len(c.members) for c in {self.where[d.node] for d in plan.decisions if d.held})
        patches: dict[_Class, Sequence] = {}
        for patch in plan.patches:  # alike nodes get alike patches: one for each class
            patches.setdefault(self.where[patch.node], patch.changes)
        writes = sum(len(c.members) for c in patches)
        for cls, changes in patches.items():  # as the API server merges them, on every member
            new = {k: v for k, v in {**cls.annotations, **dict(changes)}.items() if v is not None}
            self.carrying += len(cls.members) * (self.carries(new) - self.carries(cls.annotations))
            del win.classes[cls.key]
            cls.annotations = new
        for cls in patches:  # after all of them: a class that now looks like another joins it
            if win.classes.setdefault(cls.key, cls) is not cls:
                self._join(win, cls, cls.members)
        self._period(name, window, held, tick)
        win.last = window
        entry = budget_entry(window.stretch_start, window.hold_until) if window.held else None  # type: ignore[arg-type]
        if entry != win.entry:  # the budget mechanism: one patch on each of its NodePools
            win.entry = entry
            self.result.budget_writes += self._nodepools(name)
        for moment in (getattr(window, t) for t in _TIMES):
            if isinstance(moment, datetime) and moment > tick:
                self._due(self.span.index(moment), name)
        if patches:
            self._due(i + 1, name)  # its nodes changed: decided again at the next run
        return plan, writes

    def _views(self, win: _WindowState, now: datetime) -> list[rules.NodeView]:
        """What decide() is given for a window: in the exact replay (and for a few nodes),
        every node; else the nodes its last stretch depends on (`_Triggers.walk`) and one node
        of each other class, dated 1970 (docs/maintainers/replay.md)."""
        if self.options.exact or sum(len(c.members) for c in win.classes.values()) <= FEW:
            win.triggers = None  # built anew when it grows
            return [self.where[n].view(n) for n in win.nodes()]
        names = win.nodes() if win.triggers is None else list(win.pending)
        win.pending = set()
        self._probe([n for n in names if n not in self.as_trigger], now)
        fresh = sorted(t for n in names if (t := self.as_trigger[n]))
        if win.triggers is None or not win.triggers.extend(fresh):
            every = sorted(t for n in win.nodes() if (t := self.as_trigger[n]))
            win.triggers = _Triggers(every)
        chosen = [win.triggers.names[slot] for slot in win.triggers.walk()]
        classes = {self.where[n] for n in chosen}
        views = [self.where[n].view(n) for n in dict.fromkeys(chosen)]
        return views + [c.stand_in() for c in win.classes.values() if c not in classes]

    def _probe(self, names: Sequence[str], now: datetime) -> None:
        """Each node as a trigger node (when a hold it alone starts would end, its cap), or
        None: asked of decide() in node scope, where each node is a window of its own."""
        alone = replace(self.hold, scope=Scope.NODE)
        views = [self.where[n].view(n, light=True) for n in names]
        named = {rules.window_name(v, alone): v for v in views}
        self.as_trigger.update(dict.fromkeys(names))
        for window in rules.decide(views, now, alone).windows if views else ():
            if window.hold_until is not None:
                node = named[window.name]
                cap = NO_CAP if window.max_hold is None else window.max_hold // MICROSECOND
                end = _us(window.hold_until)
                self.as_trigger[node.name] = (_us(node.created), node.name, end, cap)

    def _nodepools(self, name: str) -> int:
        """NodePools a budget entry of this window goes on: all, its own (a NodePool's group)."""
        if self.hold.scope is Scope.CLUSTER:
            return sum(1 for pool in self.nodepools if pool)
        by_pool = self.hold.scope is Scope.GROUP and self.hold.group_label == POOL_LABEL
        return int(by_pool and name.startswith(f"{POOL_LABEL}="))

    def _period(self, name: str, window: rules.HoldWindow, held: int, tick: datetime) -> None:
        period = self.open.get(name)
        if window.held:
            if period is None:
                trigger = window.youngest or "?"
                period = Period(name, tick, trigger, self.group.get(trigger), youngest=trigger)
                self.open[name] = period
            elif window.youngest != period.youngest:
                period.extended += 1
                period.youngest = window.youngest
            period.peak_held = max(period.peak_held, held)
        elif period is not None:
            self._close(name, tick)

    def _close(self, name: str, tick: datetime) -> None:
        period = self.open.pop(name)
        period.end = tick
        self.result.periods.append(period)


def launches_avoided(
    kept: Sequence[tuple[datetime, datetime, str | None]], timeline: Timeline, group_label: str
) -> int:
    """Removals while held (when, until when the hold would have kept the node, its group)
    matched with new nodes of the same group created before that hold's end: each match is
    one launch a kept node could have saved. One new node per removal, earliest end first."""
    removals: dict[str | None, list[tuple[datetime, datetime]]] = defaultdict(list)
    for gone, until, group in kept:
        removals[group].append((gone, until))
    avoided = 0
    for group, pending in removals.items():
        pending.sort()
        ends: list[datetime] = []
        j = 0
        group_nodes = (n for n in timeline.nodes if n.labels.get(group_label) == group)
        for created in sorted(n.created for n in group_nodes if n.created is not None):
            while j < len(pending) and pending[j][0] < created:
                heapq.heappush(ends, pending[j][1])
                j += 1
            while ends and ends[0] < created:
                heapq.heappop(ends)
            if ends:
                heapq.heappop(ends)
                avoided += 1
    return avoided


def replay(
    timeline: Timeline, span: Span, hold: HoldSettings, options: ReplayOptions = ReplayOptions()
) -> Result:
    """Replay every run of `span` for one configuration; raises SimulationFailed."""
    began = time.perf_counter()
    state = _Replay(hold, span, options, timeline.nodepool_settings)
    result = state.run(schedule(timeline, span))
    result.launches_avoided = launches_avoided(state.kept, timeline, hold.group_label)
    result.node_hours_kept = sum((u - g).total_seconds() for g, u, _ in state.kept) / 3600
    result.seconds = time.perf_counter() - began
    return result


def simulate(sim: Simulation, options: ReplayOptions = ReplayOptions()) -> Simulation:
    """Replay every configuration, one after the other, in this process."""
    began = time.perf_counter()
    results = tuple(replay(sim.timeline, sim.span, hold, options) for hold in sim.holds)
    unseen = schedule(sim.timeline, sim.span).unseen
    return replace(sim, results=results, unseen=unseen, elapsed=time.perf_counter() - began)


# --- from the command line ---------------------------------------------------------------


@dataclass(frozen=True)
class Asked:
    """The replay options as given: --compare, --sweep, --interval, --start, --end, --last."""

    compare: str = ""
    interval: timedelta = timedelta(minutes=1)
    start: str | None = None
    end: str | None = None
    last: timedelta | None = None
    sweep: str | None = None


def prepare(
    paths: Sequence[str],
    base: HoldSettings,
    asked: Asked,
    fetched: Callable[[datetime, datetime], tuple[str, list[Any], Grid]] | None = None,
) -> Simulation:
    """Check the replay options and read the timeline (or have `fetched` read it: `_fetch`);
    ConfigError says what is wrong. The configurations: the primary, then each different column."""
    if asked.sweep is not None and asked.compare.strip():
        raise ConfigError("--sweep and --compare: give one of them (a sweep is its own table)")
    if asked.sweep is not None:
        columns = parse_compare(asked.sweep or SWEEP, base, "--sweep", MAX_SWEEP)
    else:
        columns = parse_compare(asked.compare, base)
    holds = [base]
    for hold in columns:
        if describe(hold) not in {describe(h) for h in holds}:
            holds.append(hold)
    if asked.interval.total_seconds() % 1:
        raise ConfigError("--interval: use whole seconds, at least 10s (the CronJob runs every 1m)")
    moments = []
    for raw, option in ((asked.start, "--start"), (asked.end, "--end")):
        try:
            moments.append(None if raw is None else parse_time(raw))
        except ValueError as exc:
            raise ConfigError(f"{option}: {raw!r} {exc}; use e.g. 2024-05-14T00:00:00Z") from None
    keys = {settings.DEFAULT_GROUP_LABEL}
    keys |= {k for h in holds for k in h.trigger_selector.keys | h.node_selector.keys}
    keys |= {h.group_label for h in holds}
    timeline = load_timeline(list(paths), keys, fetched and _fetch(fetched, *moments, asked))
    check_step(timeline, holds)
    span = replay_span(timeline, holds, asked.interval, *moments, asked.last)
    return Simulation(timeline, span, holds, asked.sweep is not None)


def _fetch(
    fetched: Callable[[datetime, datetime], tuple[str, list[Any], Grid]],
    start: datetime | None,
    end: datetime | None,
    asked: Asked,
) -> tuple[str, list[Any], Grid]:
    """The history from Prometheus: from --start, or --last before --end (or now), on the
    grid of runs (whole intervals, as replay_span lays them)."""
    end = end or datetime.now(UTC)
    start = end - asked.last if asked.last else start
    if start is None or start >= end:
        raise ConfigError("--prometheus: give --last (e.g. --last 7d) or a --start before --end")
    step = asked.interval.total_seconds()
    return fetched(
        *(datetime.fromtimestamp(t.timestamp() // step * step, UTC) for t in (start, end))
    )


def check_step(timeline: Timeline, holds: list[HoldSettings]) -> None:
    """A Prometheus answer's step must not be longer than any hold compared: a removal is
    known only to within a step."""
    shortest, source = min(hold_durations(timeline, holds), key=lambda h: h[0])
    if timeline.step is not None and timeline.step > shortest:
        step, hold = format_duration(timeline.step), format_duration(shortest)
        raise ConfigError(
            f"{', '.join(timeline.sources)}: the step is {step}, longer than the shortest hold "
            f"compared ({hold}{f', {source}' if source else ''}), so removals would be known "
            f"only to within more than a hold; query again with a step of at most {hold}"
        )
