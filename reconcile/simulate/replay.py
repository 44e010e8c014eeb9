"""`node-holder simulate`: replay a node timeline through the pure decision, change by change.

Every configuration replays the same runs, `--interval` apart, in memory: the timeline's
deletions and arrivals change the nodes, `decide()` (the function the CronJob calls between
reading and writing) plans the run, and each patch's changes are applied to its node.
Events come from the plan's transitions as the real run counts them (`recorded_events`:
those of a window that had a patch land, at most MAX_EVENTS a run). Nothing here interprets
annotation keys or decides anything.

A window is decided again only at a run where its decision can change, and alike nodes are
decided once (see `_Replay` and `_Class`; docs/simulate.md says why no figure changes).
`exact=True` does neither: the run-by-run replay that the tests compare with.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta

from reconcile.rule.decide import (
    HoldWindow,
    NodePatch,
    NodeView,
    Plan,
    decide,
    recorded_events,
    window_name,
)
from reconcile.rule.settings import (
    ConfigError,
    HoldSettings,
    RunSettings,
    Scope,
    check_max_hold,
    format_duration,
    parse_duration,
)
from reconcile.simulate.timeline import Timeline, TimelineNode, iso, load_timeline, parse_time

MAX_RUNS = 20_160  # 14 days at one run a minute, per configuration
MAX_COLUMNS = 8
MAX_SWEEP = 12
MIN_INTERVAL = timedelta(seconds=10)
ANCIENT = timedelta(days=30)  # creation time given to nodes whose creation is unknown
COMPARE_EXAMPLE = "10m,40m,20m/group,20m/node,20m/max=1h"
SWEEP = "5m,10m,15m,20m,30m,45m,1h,2h"  # `--sweep` without durations
PAGE_SIZE = RunSettings().page_size  # a run lists its nodes in pages of the CronJob's default

#: Told how far a replay has come: (configuration label, runs done, runs in all).
Progress = Callable[[str, int, int], None]
_TIMES = [f.name for f in fields(HoldWindow)]


class SimulationFailed(Exception):
    """The replay broke one of its own invariants: a bug worth reporting (exit 1)."""


# --- what to replay ---------------------------------------------------------------------


def describe(hold: HoldSettings) -> str:
    """A configuration in `--compare` syntax: `20m`, `20m/group`, `20m/max=1h`."""
    text = format_duration(hold.hold_duration)
    if hold.scope is not Scope.CLUSTER:
        text += f"/{hold.scope}"
    if hold.max_hold is not None:
        text += f"/max={format_duration(hold.max_hold)}"
    return text


def parse_compare(
    text: str, base: HoldSettings, option: str = "--compare", most: int = MAX_COLUMNS - 1
) -> list[HoldSettings]:
    """`--compare 10m,40m,20m/group,20m/max=1h`: what each column changes from `base`.

    A column names a hold duration, then optionally `/SCOPE` and `/max=DURATION`
    (or `/max=none`); whatever it leaves out is taken from the hold options.
    """
    columns: list[HoldSettings] = []
    example = f"use e.g. {option} {COMPARE_EXAMPLE}"
    for n, item in enumerate(text.split(",") if text.strip() else [], start=1):
        spec = item.strip()
        where = f"{option}: column {n}" + (f" ({spec!r})" if spec else "")
        if not spec:
            raise ConfigError(f"{where} is empty; {example}")
        duration, *parts = [p.strip() for p in spec.split("/")]
        hold = replace(base, hold_duration=_compare_duration(duration, where, example))
        caps = [p[4:].strip() for p in parts if p.lower().startswith("max=")]
        scopes = [p for p in parts if not p.lower().startswith("max=")]
        for kind, given in (("scope", scopes), ("max", caps)):
            if len(given) > 1:
                raise ConfigError(f"{where}: gives the {kind} twice; give it once")
        for scope in scopes:
            if scope.lower() not in {s.value for s in Scope}:
                raise ConfigError(
                    f"{where}: {scope!r} is neither a scope (cluster, group, node) nor "
                    f"max=DURATION; {example}"
                )
            hold = replace(hold, scope=Scope(scope.lower()))
        for cap in caps:
            none = cap.lower() == "none"
            cap_hold = None if none else _compare_duration(cap, where, example, "max hold")
            hold = replace(hold, max_hold=cap_hold)
        if not caps and hold.max_hold is not None and hold.max_hold < hold.hold_duration:
            hold = replace(hold, max_hold=None)  # a longer hold drops the inherited cap
        check_max_hold(hold, option=where, env=None)
        columns.append(hold)
    if len(columns) > most:
        raise ConfigError(
            f"{option}: {len(columns)} columns; compare at most {most} configurations with the "
            "primary one"
        )
    return columns


def _compare_duration(
    text: str, where: str, example: str, what: str = "hold duration"
) -> timedelta:
    try:
        return parse_duration(text, bare_minutes=what == "hold duration")
    except ValueError as exc:
        raise ConfigError(f"{where}: {what} {text!r} {exc}; {example}") from None


def configurations(base: HoldSettings, columns: list[HoldSettings]) -> list[HoldSettings]:
    """The primary configuration first, then each different column once."""
    result = [base]
    for hold in columns:
        if describe(hold) not in {describe(h) for h in result}:
            result.append(hold)
    return result


@dataclass(frozen=True)
class Window:
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


def replay_window(
    timeline: Timeline,
    holds: list[HoldSettings],
    interval: timedelta,
    start: datetime | None = None,
    end: datetime | None = None,
    last: timedelta | None = None,
) -> Window:
    """Default: from the first thing that happens until the last hold could have ended.

    Runs land on multiples of the interval (like a `*/N` CronJob schedule).
    """
    moments = [t for n in timeline.nodes for t in (n.created, n.deleted) if t is not None]
    step = interval.total_seconds()
    if end is None and timeline.end is None and moments:
        latest = (max(moments) + max(h.hold_duration for h in holds)).timestamp()
        end = datetime.fromtimestamp(math.ceil(latest / step) * step, UTC) + interval
    end = end or timeline.end
    start = start or timeline.start or min(moments, default=None)
    if end is None or start is None:
        raise ConfigError("the timeline has no times at all; give --start and --end")
    if last is not None:
        start = end - last
    start = datetime.fromtimestamp(math.floor(start.timestamp() / step) * step, UTC)
    window = Window(start, end, interval)
    if end <= start:
        raise ConfigError(
            f"the replay would end ({iso(end)}) before it starts ({iso(start)}); "
            "fix --start/--end or the timeline's start:/end:"
        )
    if window.runs > MAX_RUNS:
        raise ConfigError(
            f"the timeline spans {format_duration(end - start)}: {window.runs:,} runs at "
            f"--interval {format_duration(interval)} (at most {MAX_RUNS:,}); replay part of it "
            "with --last 24h or --start/--end, or a longer --interval"
        )
    return window


@dataclass(frozen=True)
class Schedule:
    """Which timeline nodes arrive and leave at each run, and those no run ever sees."""

    arrivals: Mapping[int, list[TimelineNode]]
    departures: Mapping[int, list[TimelineNode]]
    unseen: tuple[str, ...]


def schedule(timeline: Timeline, window: Window) -> Schedule:
    """A node arrives at the first run at or after its creation and leaves at the first
    run at or after its deletion; one that lives between two runs is never seen."""
    arrivals: dict[int, list[TimelineNode]] = defaultdict(list)
    departures: dict[int, list[TimelineNode]] = defaultdict(list)
    unseen: list[str] = []
    for node in timeline.nodes:
        first = 0
        if node.created is not None and node.created > window.start:
            first = window.index(node.created)
        leave = None
        if node.deleted is not None:
            if node.deleted <= window.start:
                continue  # gone before the replay starts
            leave = window.index(node.deleted)
        if first >= window.runs:
            continue
        if leave is not None and leave <= first:
            unseen.append(node.name)
            continue
        arrivals[first].append(node)
        if leave is not None and leave < window.runs:
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
    window: Window
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
    observe: Callable[[datetime, list[NodeView]], None] | None = None


# --- one configuration, change by change ---------------------------------------------------


Key = tuple[str | None, frozenset, frozenset]  # (node decided alone, labels, annotations)


@dataclass
class _Class:
    """Nodes of one window that decide() cannot tell apart: same labels, same annotations.

    decide() sees the youngest member, and every member gets its patch. A node decided alone
    (in the exact replay; with a cap, until its window's next quiet spell) is a class of one.
    """

    window: str
    alone: str | None  # the node's name, if it is decided alone
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    members: dict[str, datetime] = field(default_factory=dict)  # name -> creation time
    top: tuple[datetime, str] | None = None  # the youngest member; None: to be found again

    @property
    def key(self) -> Key:
        return self.alone, frozenset(self.labels.items()), frozenset(self.annotations.items())

    def add(self, members: Mapping[str, datetime], top: tuple[datetime, str] | None) -> None:
        """Take in `members`, whose youngest is `top` (None: not known)."""
        fresh = not self.members
        self.members.update(members)
        if fresh or self.top is None or top is None:
            self.top = top if fresh else None
        else:
            self.top = max(self.top, top)

    def view(self) -> NodeView:
        if self.top is None:
            self.top = max((created, name) for name, created in self.members.items())
        created, name = self.top
        return NodeView(name, created, "1", f"sim-{name}", False, self.labels, self.annotations)


@dataclass
class _Win:
    """One hold window: its nodes, by class, and its last decision."""

    classes: dict[Key, _Class] = field(default_factory=dict)
    last: HoldWindow | None = None


def _changed(annotations: Mapping[str, str], patch: NodePatch) -> dict[str, str]:
    """The annotations after the API server applied the patch's changes."""
    result = dict(annotations)
    for key, value in patch.changes:
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


class _Replay:
    """One configuration's nodes in memory, and its figures as the runs go by.

    `due` holds the runs at which a window must be decided again (its nodes changed, or a
    time its last decision names comes); the runs in between are counted, not replayed.
    """

    def __init__(self, hold: HoldSettings, window: Window, options: ReplayOptions) -> None:
        self.hold, self.window, self.options = hold, window, options
        self.result = Result(hold)
        self.wins: dict[str, _Win] = {}
        self.where: dict[str, _Class] = {}  # node -> its class
        self.group: dict[str, str | None] = {}  # node -> its --group-label value
        self.open: dict[str, Period] = {}
        self.due: dict[int, set[str]] = {}  # run -> windows to decide then
        self.queue: list[int] = []  # the runs in `due`, earliest first
        self.present = self.carrying = 0
        self.kept: list[tuple[datetime, datetime, str | None]] = []  # removed while held
        self.pooled = not options.exact and hold.max_hold is None  # classes from the start

    def carries(self, annotations: Mapping[str, str]) -> bool:
        return any(key in annotations for key in self.hold.annotations)

    def run(self, plan: Schedule) -> Result:
        for i in {0, *plan.arrivals, *plan.departures}:
            self._due(i)
        done, runs = 0, self.window.runs
        while self.queue and (i := heapq.heappop(self.queue)) < runs:
            if i > done:
                self._record(i - done)  # runs where nothing could change: skipped
            tick = self.window.tick(i)
            names = self.due.pop(i)
            names.update(self._leave(node, tick) for node in plan.departures.get(i, ()))
            names.update(self._arrive(node) for node in plan.arrivals.get(i, ()))
            if i == 0 or self.options.exact:
                names.update(self.wins)
            if self.options.exact:
                self._due(i + 1)
            writes, plans = 0, []
            for name in sorted(names & self.wins.keys()):
                w, plan_ = self._decide(name, i, tick)
                writes, plans = writes + w, [*plans, plan_]
            self._record(1, writes, self._events(plans))
            self.result.replayed += 1
            done = i + 1
        if runs > done:
            self._record(runs - done)
        self.result.periods = sorted(
            [*self.result.periods, *self.open.values()], key=lambda p: (p.start, p.window)
        )
        return self.result

    def _due(self, i: int, name: str | None = None) -> None:
        if i not in self.due:
            self.due[i] = set()
            heapq.heappush(self.queue, i)
        if name is not None:
            self.due[i].add(name)

    def _record(self, runs: int, writes: int = 0, events: int = 0) -> None:
        """`runs` more runs with the nodes as they are now; only the first may have written."""
        result = self.result
        result.present_nodes += [self.present] * runs
        result.held_nodes += [self.carrying] * runs
        result.writes += [writes] + [0] * (runs - 1)
        result.events += events
        result.requests += runs * max(1, math.ceil(self.present / PAGE_SIZE)) + writes + events
        if self.options.observe:
            for i in range(result.runs - runs, result.runs):
                self.options.observe(self.window.tick(i), self._views())
        if self.options.progress:
            self.options.progress(result.label, result.runs, self.window.runs)

    def _views(self) -> list[NodeView]:
        return [
            NodeView(name, created, "1", f"sim-{name}", False, cls.labels, cls.annotations)
            for win in self.wins.values()
            for cls in win.classes.values()
            for name, created in cls.members.items()
        ]

    # --- the nodes -------------------------------------------------------------------------

    def _arrive(self, node: TimelineNode) -> str:
        created = (node.created or self.window.start - ANCIENT).replace(microsecond=0)
        labels = {k: node.labels[k] for k in self.hold.label_keys if k in node.labels}
        annotations = dict(node.annotations)
        name = window_name(NodeView(node.name, created, labels=labels), self.hold)
        self.wins.setdefault(name, _Win())
        alone = None if self.pooled else node.name
        self._join(
            _Class(name, alone, labels, annotations), {node.name: created}, (created, node.name)
        )
        self.group[node.name] = node.labels.get(self.hold.group_label)
        self.present += 1
        self.carrying += self.carries(annotations)
        return name

    def _join(
        self, cls: _Class, members: Mapping[str, datetime], top: tuple[datetime, str] | None
    ) -> None:
        """`members` join the class that looks like `cls` in its window (or `cls` itself)."""
        cls = self.wins[cls.window].classes.setdefault(cls.key, cls)
        cls.add(members, top)
        for node in members:
            self.where[node] = cls

    def _leave(self, node: TimelineNode, tick: datetime) -> str:
        cls = self.where.pop(node.name)
        win = self.wins[cls.window]
        del cls.members[node.name]
        if cls.top and cls.top[1] == node.name:
            cls.top = None
        if not cls.members:
            del win.classes[cls.key]
        if self.carries(cls.annotations):
            self.result.removed_while_held += 1
            self.carrying -= 1
            last = win.last  # its window's last decision: held, and until when
            if last and last.held and last.hold_until and node.deleted < last.hold_until:  # type: ignore[operator]
                self.kept.append((node.deleted, last.hold_until, self.group[node.name]))  # type: ignore[arg-type]
        self.present -= 1
        del self.group[node.name]
        if not win.classes:
            del self.wins[cls.window]
            if cls.window in self.open:
                self._close(cls.window, tick)
        return cls.window

    # --- deciding ------------------------------------------------------------------------

    def _events(self, plans: Sequence[Plan]) -> int:
        """The Events the run records, as a real run counts them (at most MAX_EVENTS)."""
        transitions = [t for p in plans for t in p.transitions]
        patches = [patch for p in plans for patch in p.patches]
        return len(recorded_events(transitions, patches)) if self.options.events else 0

    def _decide(self, name: str, i: int, tick: datetime) -> tuple[int, Plan]:
        """Decide one window, apply its patches; returns (writes, its plan)."""
        win = self.wins[name]
        if not self.pooled and not self.options.exact:
            self._settle(win, tick)
        views = [cls.view() for cls in win.classes.values()]
        classes = dict(zip((v.name for v in views), win.classes.values(), strict=True))
        plan = decide(views, tick, self.hold)
        if [w.name for w in plan.windows] != [name]:
            raise SimulationFailed(f"decide() did not keep the nodes of {name} in one window")
        (window,) = plan.windows
        held = sum(len(classes[d.node].members) for d in plan.decisions if d.held)
        writes = sum(len(classes[p.node].members) for p in plan.patches)
        self._apply(win, [(classes[p.node], p) for p in plan.patches])
        self._period(name, window, held, tick)
        win.last = window
        for moment in (getattr(window, t) for t in _TIMES):
            if isinstance(moment, datetime) and moment > tick:
                self._due(self.window.index(moment), name)
        if plan.patches:
            self._due(i + 1, name)  # its nodes changed: decided again at the next run
        return writes, plan

    def _settle(self, win: _Win, now: datetime) -> None:
        """With a cap: the nodes created before the last gap of one hold and one cap (or that
        long before now) join their classes. A trigger's part in any stretch (its hold, the
        cap, the free period after it) ends within that span of its creation, so no later
        stretch depends on which of them are there. With per-node settings, the span is the
        longest hold plus the longest cap."""
        span = self.hold.hold_duration + (self.hold.max_hold or timedelta(0))
        alone = sorted((c for c in win.classes.values() if c.alone), key=lambda c: c.view().created)
        times = [c.view().created for c in alone] + [now]
        cut = max((k for k in range(1, len(times)) if times[k] - times[k - 1] >= span), default=0)
        for cls in alone[:cut]:
            del win.classes[cls.key]
            self._join(replace(cls, alone=None, members={}), cls.members, cls.top)

    def _apply(self, win: _Win, patches: Sequence[tuple[_Class, NodePatch]]) -> None:
        """Each patch's changes on every member of its class."""
        for cls, patch in patches:
            new = _changed(cls.annotations, patch)
            self.carrying += len(cls.members) * (self.carries(new) - self.carries(cls.annotations))
            del win.classes[cls.key]
            cls.annotations = new
        for cls, _ in patches:  # after all of them: a class that now looks like another joins it
            if win.classes.setdefault(cls.key, cls) is not cls:
                self._join(cls, cls.members, cls.top)

    def _period(self, name: str, window: HoldWindow, held: int, tick: datetime) -> None:
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
    arrivals: dict[str | None, list[datetime]] = defaultdict(list)
    for node in timeline.nodes:
        if node.created is not None:
            arrivals[node.labels.get(group_label)].append(node.created)
    removals: dict[str | None, list[tuple[datetime, datetime]]] = defaultdict(list)
    for gone, until, group in kept:
        removals[group].append((gone, until))
    avoided = 0
    for group, pending in removals.items():
        pending.sort()
        ends: list[datetime] = []
        j = 0
        for created in sorted(arrivals[group]):
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
    timeline: Timeline, window: Window, hold: HoldSettings, options: ReplayOptions = ReplayOptions()
) -> Result:
    """Replay every run of `window` for one configuration; raises SimulationFailed."""
    began = time.perf_counter()
    state = _Replay(hold, window, options)
    result = state.run(schedule(timeline, window))
    result.launches_avoided = launches_avoided(state.kept, timeline, hold.group_label)
    result.node_hours_kept = sum((u - g).total_seconds() for g, u, _ in state.kept) / 3600
    result.seconds = time.perf_counter() - began
    return result


def simulate(sim: Simulation, options: ReplayOptions = ReplayOptions()) -> Simulation:
    """Replay every configuration, one after the other, in this process."""
    began = time.perf_counter()
    results = tuple(replay(sim.timeline, sim.window, hold, options) for hold in sim.holds)
    unseen = schedule(sim.timeline, sim.window).unseen
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


def prepare(paths: Sequence[str], base: HoldSettings, asked: Asked) -> Simulation:
    """Check the replay options and read the timeline; ConfigError says what is wrong."""
    if asked.sweep is not None and asked.compare.strip():
        raise ConfigError("--sweep and --compare: give one of them (a sweep is its own table)")
    if asked.sweep is not None:
        columns = parse_compare(asked.sweep or SWEEP, base, "--sweep", MAX_SWEEP)
    else:
        columns = parse_compare(asked.compare, base)
    holds = configurations(base, columns)
    interval = asked.interval
    if interval < MIN_INTERVAL or interval.total_seconds() % 1:
        raise ConfigError("--interval: use whole seconds, at least 10s (the CronJob runs every 1m)")
    start, end = _moment(asked.start, "--start"), _moment(asked.end, "--end")
    timeline = load_timeline(list(paths))
    window = replay_window(timeline, holds, interval, start, end, asked.last)
    return Simulation(timeline, window, holds, asked.sweep is not None)


def _moment(raw: str | None, option: str) -> datetime | None:
    if raw is None:
        return None
    try:
        return parse_time(raw)
    except ValueError as exc:
        raise ConfigError(f"{option}: {raw!r} {exc}; use e.g. 2024-05-14T00:00:00Z") from None
