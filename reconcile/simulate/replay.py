"""`node-holder simulate`: replay a node timeline run by run through the pure decision.

Every configuration (the primary one from the hold options, plus one per `--compare`
column) replays the same runs, `--interval` apart, in memory: at each run the
timeline's deletions and arrivals change an in-memory node list, `decide()` (the
function the CronJob calls between reading and writing) plans the run, and the plan's
patches are applied to the nodes' metadata as the API server would apply a JSON merge
patch (RFC 7386), guarded by the resourceVersion. Events come from the plan's
transitions as the real run sends them (`recorded_events`: one per transition whose
window had a patch land, at most MAX_EVENTS a run). Nothing here interprets annotation
keys or decides anything.

decide() is pure, so a hold window whose nodes did not change since its last
decision, and whose `hold_until` the clock did not cross, decides the same again:
such windows are not decided again (see `_Decider`). `verify=True` decides the whole
cluster every run too and fails on any difference; the tests replay with it.

Not modelled: Karpenter. Nodes come and go as the timeline says, so the figures
tell how often, how long and how many nodes a hold would cover, not how the
cluster would have evolved with it (see docs/simulate.md).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from reconcile.decide import (
    HoldWindow,
    NodePatch,
    NodeView,
    Plan,
    Transition,
    decide,
    recorded_events,
    window_name,
)
from reconcile.settings import (
    ConfigError,
    HoldSettings,
    RunSettings,
    Scope,
    check_max_hold,
    format_duration,
    parse_duration,
)
from reconcile.simulate.timeline import Timeline, TimelineNode, load_timeline, parse_time

MAX_RUNS = 20_160  # 14 days at one run a minute, per configuration
MAX_COLUMNS = 8
MIN_INTERVAL = timedelta(seconds=10)
ANCIENT = timedelta(days=30)  # creation time given to nodes whose creation is unknown
COMPARE_EXAMPLE = "10m,40m,20m/group,20m/node,20m/max=1h"
#: The run settings a replayed run stands for: the CronJob's defaults (page size for the
#: request count, Events on).
REPLAY_RUN = RunSettings()

#: Told how far a replay has come: (configuration label, runs done, runs in all).
Progress = Callable[[str, int, int], None]


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


def parse_compare(text: str, base: HoldSettings) -> list[HoldSettings]:
    """`--compare 10m,40m,20m/group,20m/max=1h`: what each column changes from `base`.

    A column names a hold duration, then optionally `/SCOPE` and `/max=DURATION`
    (or `/max=none`); whatever it leaves out is taken from the hold options.
    """
    columns: list[HoldSettings] = []
    if not text.strip():
        return columns
    for n, item in enumerate(text.split(","), start=1):
        spec = item.strip()
        where = f"--compare: column {n} ({spec!r})" if spec else f"--compare: column {n}"
        if not spec:
            raise ConfigError(f"{where} is empty; use e.g. --compare {COMPARE_EXAMPLE}")
        duration, *parts = [p.strip() for p in spec.split("/")]
        hold = replace(base, hold_duration=_compare_duration(duration, where))
        seen: set[str] = set()
        for part in parts:
            kind = "max" if part.lower().startswith("max=") else "scope"
            if kind in seen:
                raise ConfigError(f"{where}: gives the {kind} twice; give it once")
            seen.add(kind)
            if kind == "max":
                value = part.split("=", 1)[1].strip()
                hold = replace(
                    hold,
                    max_hold=None
                    if value.lower() == "none"
                    else _compare_duration(value, where, what="max hold"),
                )
            elif part.lower() in {s.value for s in Scope}:
                hold = replace(hold, scope=Scope(part.lower()))
            else:
                raise ConfigError(
                    f"{where}: {part!r} is neither a scope (cluster, group, node) nor "
                    f"max=DURATION; use e.g. --compare {COMPARE_EXAMPLE}"
                )
        inherited = "max" not in seen and hold.max_hold is not None
        if inherited and hold.max_hold < hold.hold_duration:  # type: ignore[operator]
            hold = replace(hold, max_hold=None)  # a longer hold drops the inherited cap
        check_max_hold(hold, option=where, env=None)  # type: ignore[arg-type]
        columns.append(hold)
    if len(columns) + 1 > MAX_COLUMNS:
        raise ConfigError(
            f"--compare: {len(columns)} columns; compare at most {MAX_COLUMNS - 1} "
            "configurations with the primary one"
        )
    return columns


def _compare_duration(text: str, where: str, what: str = "hold duration") -> timedelta:
    try:
        return parse_duration(text, bare_minutes=what == "hold duration")
    except ValueError as exc:
        raise ConfigError(
            f"{where}: {what} {text!r} {exc}; use e.g. --compare {COMPARE_EXAMPLE}"
        ) from None


def configurations(base: HoldSettings, compare: list[HoldSettings]) -> list[HoldSettings]:
    """The primary configuration first, then each different column once."""
    result = [base]
    for hold in compare:
        if describe(hold) not in {describe(h) for h in result}:
            result.append(hold)
    return result


@dataclass(frozen=True)
class Window:
    """When the replay runs: ticks start, start + interval, ... before end."""

    start: datetime
    end: datetime
    interval: timedelta

    @property
    def runs(self) -> int:
        return max(0, math.ceil((self.end - self.start) / self.interval))

    def tick(self, i: int) -> datetime:
        return self.start + i * self.interval


@dataclass(frozen=True)
class Bounds:
    """What the user asked for: --start, --end, --last (None: from the timeline)."""

    start: datetime | None = None
    end: datetime | None = None
    last: timedelta | None = None


def replay_window(
    timeline: Timeline, holds: list[HoldSettings], interval: timedelta, bounds: Bounds = Bounds()
) -> Window:
    """Default: from the first thing that happens until the last hold could have ended.

    Runs land on multiples of the interval (like a `*/N` CronJob schedule).
    """
    start, end, last = bounds.start, bounds.end, bounds.last
    moments = timeline.moments
    longest = max(h.hold_duration for h in holds)
    step = interval.total_seconds()
    if end is None and timeline.end is None and moments:
        latest = (moments[-1] + longest).timestamp()
        end = datetime.fromtimestamp(math.ceil(latest / step) * step, UTC) + interval
    end = end or timeline.end
    start = start or timeline.start or (moments[0] if moments else None)
    if end is None or start is None:
        raise ConfigError("the timeline has no times at all; give --start and --end")
    if last is not None:
        start = end - last
    start = datetime.fromtimestamp(math.floor(start.timestamp() / step) * step, UTC)
    window = Window(start, end, interval)
    if end <= start:
        raise ConfigError(
            f"the replay would end ({_iso(end)}) before it starts ({_iso(start)}); "
            "fix --start/--end or the timeline's start:/end:"
        )
    if window.runs > MAX_RUNS:
        raise ConfigError(
            f"the timeline spans {format_duration(end - start)}: {window.runs:,} runs at "
            f"--interval {format_duration(interval)} (at most {MAX_RUNS:,}); replay part of it "
            "with --last 24h or --start/--end, or a longer --interval"
        )
    return window


# --- results ------------------------------------------------------------------------------


# --- results ------------------------------------------------------------------------------


@dataclass(frozen=True)
class HoldPeriod:
    """One stretch of holding in one hold window, as the runs saw it."""

    window: str
    start: datetime  # the first run that held
    end: datetime | None  # the first run that released; None: still held when the replay ended
    trigger: str  # youngest node when the hold started
    trigger_group: str | None  # its --group-label value, to say where the hold came from
    extended: int  # how often a younger node extended it
    peak_held: int  # most nodes held at once in this window

    def duration(self, replay_end: datetime) -> timedelta:
        return (self.end or replay_end) - self.start


@dataclass(frozen=True)
class ColumnResult:
    """The figures for one configuration over the whole replay."""

    hold: HoldSettings
    label: str
    periods: tuple[HoldPeriod, ...]
    held_runs: int  # runs after which at least one node carried the hold
    held_nodes: tuple[int, ...]  # nodes carrying a hold annotation after each run
    present_nodes: tuple[int, ...]  # nodes in the cluster at each run
    writes: tuple[int, ...]  # node patches each run applied
    events: int
    requests: int  # computed: list pages + patches + Events (see RunCost)
    removed_while_held: int  # timeline deletions of nodes that carried the hold
    seconds: float

    @property
    def runs(self) -> int:
        return len(self.writes)


@dataclass(frozen=True)
class Simulation:
    timeline: Timeline
    window: Window
    results: tuple[ColumnResult, ...]
    unseen: tuple[str, ...]  # nodes that lived between two runs: no run ever saw them
    elapsed: float = 0.0

    @property
    def primary(self) -> ColumnResult:
        return self.results[0]


# --- the timeline, run by run --------------------------------------------------------------


@dataclass
class _Schedule:
    """Which timeline nodes arrive and leave at each run."""

    arrivals: dict[int, list[TimelineNode]] = field(default_factory=lambda: defaultdict(list))
    departures: dict[int, list[TimelineNode]] = field(default_factory=lambda: defaultdict(list))
    unseen: list[str] = field(default_factory=list)


def schedule(timeline: Timeline, window: Window) -> _Schedule:
    """A node arrives at the first run at or after its creation and leaves at the first
    run at or after its deletion; one that lives between two runs is never seen."""
    plan = _Schedule()
    for node in timeline.nodes:
        first = 0
        if node.created is not None and node.created > window.start:
            first = _run_at_or_after(node.created, window)
        leave = None
        if node.deleted is not None:
            if node.deleted <= window.start:
                continue  # gone before the replay starts
            leave = _run_at_or_after(node.deleted, window)
        if first >= window.runs:
            continue
        if leave is not None and leave <= first:
            plan.unseen.append(node.name)
            continue
        plan.arrivals[first].append(node)
        if leave is not None and leave < window.runs:
            plan.departures[leave].append(node)
    return plan


def _run_at_or_after(moment: datetime, window: Window) -> int:
    return math.ceil((moment - window.start).total_seconds() / window.interval.total_seconds())


# --- the nodes, as the API server would store them -----------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: a new value; `target` is not changed."""
    if not isinstance(patch, Mapping):
        return patch
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


#: The NodeView fields a patch of `metadata` may write, by metadata key.
_WRITABLE = {"labels": "labels", "annotations": "annotations"}


def apply_patch(view: NodeView, patch: NodePatch) -> NodeView:
    """The node after the API server applied `patch`: its body merged into the metadata.

    As the server does, a patch whose resourceVersion is not the node's is refused (the
    replay has no other writer, so that is a bug in the replay); `resourceVersion` then
    moves on. Whatever keys the body writes are written: nothing here knows hold keys.
    """
    metadata = patch.body().get("metadata", {})
    expected = metadata.get("resourceVersion")
    if expected is not None and expected != view.resource_version:
        raise SimulationFailed(
            f"patch of node/{view.name} expects resourceVersion {expected}, "
            f"the node has {view.resource_version}"
        )
    changed: dict[str, Any] = {}
    for key, value in metadata.items():
        if key == "resourceVersion":
            continue
        if key not in _WRITABLE:
            raise SimulationFailed(f"patch of node/{view.name} writes metadata.{key}")
        changed[_WRITABLE[key]] = merge_patch(getattr(view, _WRITABLE[key]), value) or {}
    return replace(view, **changed, resource_version=str(int(view.resource_version) + 1))


def arriving_view(node: TimelineNode, window: Window) -> NodeView:
    """A new node as a list returns it: creationTimestamp has whole seconds, like the API's."""
    created = node.created or window.start - ANCIENT
    return NodeView(
        name=node.name,
        created=created.replace(microsecond=0),
        resource_version="1",
        uid=f"sim-{node.name}",
        labels=dict(node.labels),
        annotations=dict(node.annotations),
    )


@dataclass(frozen=True)
class RunCost:
    """What one run costs the API server, computed as the real run would spend it."""

    pages: int  # list requests: ceil(nodes / page size), at least one
    writes: int  # one PATCH per node whose annotations change
    events: int  # one POST per transition whose window had a patch land

    @property
    def requests(self) -> int:
        return self.pages + self.writes + self.events


def run_cost(nodes: int, plan_patches: int, events: int, page_size: int) -> RunCost:
    return RunCost(max(1, math.ceil(nodes / page_size)), plan_patches, events)


# --- deciding, window by window ------------------------------------------------------------


@dataclass(frozen=True)
class _Decided:
    """One hold window's part of the last plan that covered it."""

    window: HoldWindow
    patches: tuple[NodePatch, ...]
    transitions: tuple[Transition, ...]
    held: int  # nodes decided to carry the hold
    decided_at: datetime


class _Decider:
    """decide() per hold window, redone only where its inputs changed.

    A window's decision depends on its nodes, the settings and the clock. decide() is
    pure, so a window decided again with the same nodes gives the same plan unless the
    clock crossed a time the plan depends on: the window's `hold_until`, or the end of
    the free period after a stretch --max-hold ended (`free_until`). Windows whose
    nodes changed (an arrival, a departure, a patch applied) or whose times were
    crossed are decided again; the others keep their last decision, which had no
    patches (a patch changes a node, which makes its window decided again).
    """

    def __init__(self, hold: HoldSettings) -> None:
        self.hold = hold
        self.members: dict[str, dict[str, NodeView]] = defaultdict(dict)
        self.window_of: dict[str, str] = {}
        self.dirty: set[str] = set()
        self.decided: dict[str, _Decided] = {}

    def put(self, view: NodeView) -> None:
        name = window_name(view, self.hold)
        old = self.window_of.get(view.name)
        if old is not None and old != name:
            self._drop(view.name, old)
        self.window_of[view.name] = name
        self.members[name][view.name] = view
        self.dirty.add(name)

    def remove(self, node: str) -> None:
        name = self.window_of.pop(node, None)
        if name is not None:
            self._drop(node, name)

    def _drop(self, node: str, name: str) -> None:
        members = self.members[name]
        members.pop(node, None)
        self.dirty.add(name)
        if not members:
            del self.members[name]
            self.decided.pop(name, None)
            self.dirty.discard(name)

    def views(self) -> list[NodeView]:
        return [v for members in self.members.values() for v in members.values()]

    def view(self, node: str) -> NodeView:
        return self.members[self.window_of[node]][node]

    def decide(self, now: datetime) -> list[_Decided]:
        """This run's decision for every window, in window order."""
        for name, done in self.decided.items():
            for until in (done.window.hold_until, done.window.free_until):
                if until is not None and done.decided_at < until <= now:
                    self.dirty.add(name)
        for name in sorted(self.dirty):
            self.decided[name] = self._decide(name, now)
        kept = [n for n, d in self.decided.items() if n not in self.dirty and d.patches]
        if kept:  # its patches changed its nodes, so it should have been decided again
            raise SimulationFailed(f"run at {_iso(now)}: the decision of {kept[0]} went stale")
        self.dirty.clear()
        if not self.decided and self.hold.scope is Scope.CLUSTER:
            return [self._empty(now)]
        return [self.decided[name] for name in sorted(self.decided)]

    def _decide(self, name: str, now: datetime) -> _Decided:
        plan = decide(list(self.members[name].values()), now, self.hold)
        window = plan.window(name)
        if window is None or len(plan.windows) != 1:
            raise SimulationFailed(f"decide() did not keep the nodes of {name} in one window")
        return _Decided(
            window=window,
            patches=plan.patches,
            transitions=plan.transitions,
            held=sum(1 for d in plan.decisions if d.held),
            decided_at=now,
        )

    def _empty(self, now: datetime) -> _Decided:
        (window,) = decide([], now, self.hold).windows
        return _Decided(window, (), (), 0, now)


def _check_against_full(plan: Plan, decided: list[_Decided], now: datetime) -> None:
    """verify=True: the windowed decision is exactly what deciding everything gives."""

    def key(patches: Iterable[NodePatch], transitions: Iterable[Transition], windows: Any) -> Any:
        return (
            sorted((p.node, p.changes, p.window) for p in patches),
            sorted((t.reason, t.window, t.node, t.message) for t in transitions),
            sorted(windows, key=lambda w: w.name),
        )

    full = key(plan.patches, plan.transitions, plan.windows)
    part = key(
        [p for d in decided for p in d.patches],
        [t for d in decided for t in d.transitions],
        [d.window for d in decided],
    )
    if full != part:
        raise SimulationFailed(
            f"run at {_iso(now)}: deciding window by window differs from deciding the whole "
            "cluster; replay with verify off is wrong here: please report it"
        )


# --- one configuration ---------------------------------------------------------------------


class _Column:
    """One configuration's cluster in memory and the figures collected run by run."""

    def __init__(self, hold: HoldSettings, events: bool) -> None:
        self.hold = hold
        self.events_on = events
        self.keys = frozenset(hold.annotations)
        self.decider = _Decider(hold)
        self.carrying: set[str] = set()  # nodes that carry a hold annotation now
        self.periods = _Periods(hold)
        self.held_nodes: list[int] = []
        self.present_nodes: list[int] = []
        self.writes: list[int] = []
        self.events = self.requests = self.removed_while_held = 0

    def leave(self, node: TimelineNode) -> None:
        if node.name in self.carrying:
            self.removed_while_held += 1
        self.carrying.discard(node.name)
        self.decider.remove(node.name)
        self.periods.labels.pop(node.name, None)

    def arrive(self, node: TimelineNode, window: Window) -> None:
        self._put(arriving_view(node, window))
        self.periods.labels[node.name] = dict(node.labels)

    def _put(self, view: NodeView) -> None:
        self.decider.put(view)
        if self.keys.intersection(view.annotations):
            self.carrying.add(view.name)
        else:
            self.carrying.discard(view.name)

    def run(self, tick: datetime, verify: bool) -> None:
        """One run: decide, apply the patches, count what it cost."""
        present = len(self.decider.window_of)
        full = decide(self.decider.views(), tick, self.hold) if verify else None
        decided = self.decider.decide(tick)
        if full is not None:
            _check_against_full(full, decided, tick)
        patches = [p for d in decided for p in d.patches]
        for patch in patches:
            self._put(apply_patch(self.decider.view(patch.node), patch))
        sent = recorded_events([t for d in decided for t in d.transitions], patches)
        cost = run_cost(
            present, len(patches), len(sent) if self.events_on else 0, REPLAY_RUN.page_size
        )
        self.present_nodes.append(present)
        self.writes.append(cost.writes)
        self.events += cost.events
        self.requests += cost.requests
        self.held_nodes.append(len(self.carrying))
        self.periods.see(
            tick, [d.window for d in decided], {d.window.name: d.held for d in decided}
        )

    def result(self, seconds: float) -> ColumnResult:
        return ColumnResult(
            hold=self.hold,
            label=describe(self.hold),
            periods=self.periods.all(),
            held_runs=sum(1 for n in self.held_nodes if n),
            held_nodes=tuple(self.held_nodes),
            present_nodes=tuple(self.present_nodes),
            writes=tuple(self.writes),
            events=self.events,
            requests=self.requests,
            removed_while_held=self.removed_while_held,
            seconds=seconds,
        )


@dataclass(frozen=True)
class ReplayOptions:
    """How to replay, beyond what and when."""

    events: bool = True  # record Events as the CronJob does (--no-events: none)
    progress: Progress | None = None  # hears how far the replay is
    verify: bool = False  # also decide the whole cluster every run; fail on any difference
    #: sees every node after each run (the cross-check compares them with a real cluster's)
    observe: Callable[[datetime, list[NodeView]], None] | None = None


def replay(
    timeline: Timeline, window: Window, hold: HoldSettings, options: ReplayOptions = ReplayOptions()
) -> ColumnResult:
    """Replay every run of `window` for one configuration; raises SimulationFailed."""
    began = time.perf_counter()
    plan = schedule(timeline, window)
    column = _Column(hold, options.events)
    verify, observe, progress = options.verify, options.observe, options.progress
    label = describe(hold)
    for i in range(window.runs):
        tick = window.tick(i)
        for node in plan.departures.get(i, ()):
            column.leave(node)
        for node in plan.arrivals.get(i, ()):
            column.arrive(node, window)
        column.run(tick, verify)
        if observe is not None:
            observe(tick, column.decider.views())
        if progress is not None:
            progress(label, i + 1, window.runs)
    return column.result(time.perf_counter() - began)


@dataclass
class _Open:
    start: datetime
    trigger: str
    trigger_group: str | None
    last: str | None
    extended: int = 0
    peak_held: int = 0


class _Periods:
    """Open, extend and close hold periods from each run's hold windows."""

    def __init__(self, hold: HoldSettings) -> None:
        self.hold = hold
        self.labels: dict[str, dict[str, str]] = {}  # labels of the nodes there now
        self.open: dict[str, _Open] = {}
        self.closed: list[HoldPeriod] = []

    def see(self, tick: datetime, windows: Iterable[HoldWindow], held: Mapping[str, int]) -> None:
        """One run: `held` counts the nodes each window holds after it."""
        holding = {w.name: w for w in windows if w.held}
        for name in [n for n in self.open if n not in holding]:
            self.closed.append(_close(name, self.open.pop(name), tick))
        for name, window in holding.items():
            period = self.open.get(name)
            if period is None:
                trigger = window.youngest or "?"
                group = self.labels.get(trigger, {}).get(self.hold.group_label)
                period = self.open[name] = _Open(tick, trigger, group, window.youngest)
            elif window.youngest != period.last:
                period.extended += 1
                period.last = window.youngest
            period.peak_held = max(period.peak_held, held.get(name, 0))

    def all(self) -> tuple[HoldPeriod, ...]:
        """Every period, those still open ending with the replay."""
        periods = self.closed + [_close(n, p, None) for n, p in self.open.items()]
        return tuple(sorted(periods, key=lambda p: (p.start, p.window)))


def _close(name: str, period: _Open, end: datetime | None) -> HoldPeriod:
    return HoldPeriod(
        window=name,
        start=period.start,
        end=end,
        trigger=period.trigger,
        trigger_group=period.trigger_group,
        extended=period.extended,
        peak_held=period.peak_held,
    )


def simulate(
    timeline: Timeline,
    window: Window,
    holds: list[HoldSettings],
    options: ReplayOptions = ReplayOptions(),
) -> Simulation:
    """Replay every configuration, one after the other, in this process."""
    began = time.perf_counter()
    results = [replay(timeline, window, hold, options) for hold in holds]
    return Simulation(
        timeline=timeline,
        window=window,
        results=tuple(results),
        unseen=tuple(schedule(timeline, window).unseen),
        elapsed=time.perf_counter() - began,
    )


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class Request(NamedTuple):
    """What to replay: the timeline, when, and the configurations."""

    timeline: Timeline
    window: Window
    holds: list[HoldSettings]


@dataclass(frozen=True)
class Asked:
    """The replay options as given: --compare, --interval, --start, --end, --last."""

    compare: str = ""
    interval: timedelta = timedelta(minutes=1)
    start: str | None = None
    end: str | None = None
    last: timedelta | None = None


def prepare(paths: Sequence[str], base: HoldSettings, asked: Asked) -> Request:
    """Check the replay options and read the timeline; ConfigError says what is wrong."""
    holds = configurations(base, parse_compare(asked.compare, base))
    interval = asked.interval
    if interval < MIN_INTERVAL or interval.total_seconds() % 1:
        raise ConfigError("--interval: use whole seconds, at least 10s (the CronJob runs every 1m)")
    bounds = Bounds(_moment(asked.start, "--start"), _moment(asked.end, "--end"), asked.last)
    timeline = load_timeline(list(paths))
    return Request(timeline, replay_window(timeline, holds, interval, bounds), holds)


def _moment(raw: str | None, option: str) -> datetime | None:
    if raw is None:
        return None
    try:
        return parse_time(raw)
    except ValueError as exc:
        raise ConfigError(f"{option}: {raw!r} {exc}; use e.g. 2024-05-14T00:00:00Z") from None
