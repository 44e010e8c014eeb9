"""`node-holder simulate`: replay a node timeline through the real reconciler, run by run.

Each configuration (the primary one from the hold options, plus one per `--compare`
column) gets its own API test server with a frozen clock. At every tick (one
CronJob run, `--interval` apart) the timeline's deletions and arrivals are applied
to the server, then `run_once` runs exactly as the CronJob would: the official
client's connection pool, over HTTP, listing, deciding, patching, recording
Events. Nothing here decides; figures come from the runs' results and from the
server (its request log and the annotations it stores).

Not modelled: Karpenter. Nodes come and go as the timeline says, so the figures
tell how often, how long and how many nodes a hold would cover, not how the
cluster would have evolved with it (see docs/simulate.md).
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from reconcile.decide import HoldWindow
from reconcile.settings import (
    Clock,
    ClusterAccess,
    ConfigError,
    HoldSettings,
    RunSettings,
    Scope,
    check_max_hold,
    format_duration,
    parse_duration,
)
from reconcile.simulate.timeline import Timeline, TimelineNode

if TYPE_CHECKING:
    from tests.kubeapi.apiserver import ApiServer

log = logging.getLogger(__name__)

MAX_RUNS = 20_160  # 14 days at one run a minute, per configuration
MAX_COLUMNS = 8
ANCIENT = timedelta(days=30)  # creation time given to nodes whose creation is unknown
COMPARE_EXAMPLE = "10m,40m,20m/group,20m/node,20m/max=1h"
#: How a replayed run talks to its server: as the CronJob does, minus the client-side
#: rate limit (it only spaces requests in wall-clock time; the counts are the same).
REPLAY_RUN = RunSettings(
    dry_run=False, clock=Clock.SERVER, timeout=timedelta(seconds=45), workers=8, qps=0.0
)


class SimulationFailed(Exception):
    """A replayed run failed against the test server: a bug worth reporting (exit 1)."""


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
        return parse_duration(text)
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


def replay_window(
    timeline: Timeline,
    holds: list[HoldSettings],
    interval: timedelta,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    last: timedelta | None = None,
) -> Window:
    """Default: from the first thing that happens until the last hold could have ended.

    Runs land on multiples of the interval (like a `*/N` CronJob schedule).
    """
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
    held_nodes: tuple[int, ...]  # nodes carrying the hold after each run (from the server)
    present_nodes: tuple[int, ...]  # nodes in the cluster at each run
    writes: tuple[int, ...]  # node patches each run sent (from the server's log)
    events: int
    requests: int
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
    jobs: int
    elapsed: float = 0.0

    @property
    def primary(self) -> ColumnResult:
        return self.results[0]


# --- the replay -----------------------------------------------------------------------------


@dataclass
class _Open:
    start: datetime
    trigger: str
    trigger_group: str | None
    last: str | None
    extended: int = 0
    peak_held: int = 0


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
    step = window.interval.total_seconds()
    for node in timeline.nodes:
        first = 0
        if node.created is not None and node.created > window.start:
            first = math.ceil((node.created - window.start).total_seconds() / step)
        leave = None
        if node.deleted is not None:
            if node.deleted <= window.start:
                continue  # gone before the replay starts
            leave = math.ceil((node.deleted - window.start).total_seconds() / step)
        if first >= window.runs:
            continue
        if leave is not None and leave <= first:
            plan.unseen.append(node.name)
            continue
        plan.arrivals[first].append(node)
        if leave is not None and leave < window.runs:
            plan.departures[leave].append(node)
    return plan


def replay(
    timeline: Timeline,
    window: Window,
    hold: HoldSettings,
    events: bool = True,
    observe: Callable[[ApiServer], None] | None = None,
) -> ColumnResult:
    """Replay every run of `window` for one configuration; raises SimulationFailed.

    `observe` sees the server once it has started (tests hook its requests).
    """
    # Imported here: the Kubernetes client is slow to import and --help doesn't need it.
    from reconcile.access import load_configuration  # noqa: PLC0415
    from reconcile.client import Client  # noqa: PLC0415
    from reconcile.read import ListFailed  # noqa: PLC0415
    from reconcile.run import run_once  # noqa: PLC0415
    from tests.kubeapi.apiserver import ApiServer  # noqa: PLC0415

    began = time.perf_counter()
    plan = schedule(timeline, window)
    run_settings = replace(REPLAY_RUN, events=events)
    keys = hold.annotations
    held_nodes: list[int] = []
    present_nodes: list[int] = []
    writes: list[int] = []
    periods = _Periods(hold)
    event_count = requests = removed_while_held = 0
    with ApiServer() as api, tempfile.TemporaryDirectory(prefix="node-holder-sim-") as tmp:
        kubeconfig = api.write_kubeconfig(Path(tmp) / "kubeconfig")
        access = ClusterAccess(kubeconfig=str(kubeconfig))
        kube = Client(load_configuration(access, pool_size=run_settings.workers + 1))
        if observe is not None:
            observe(api)
        for i in range(window.runs):
            tick = window.tick(i)
            api.set_clock(tick)
            for node in plan.departures.get(i, ()):
                if any(k in api.annotations(node.name) for k in keys):
                    removed_while_held += 1
                api.delete_node(node.name)
                periods.labels.pop(node.name, None)
            for node in plan.arrivals.get(i, ()):
                created = node.created or window.start - ANCIENT
                api.add_node(node.name, created=created, labels=dict(node.labels), eks=False)
                periods.labels[node.name] = dict(node.labels)
            try:
                result = run_once(kube, hold, run_settings)
            except ListFailed as exc:
                raise SimulationFailed(f"run at {_iso(tick)}: {exc}") from None
            if not result.ok or result.event_errors:
                problems = [*result.errors, *result.event_errors]
                raise SimulationFailed(f"run at {_iso(tick)}: {problems[0]}")
            records = api.requests
            api.reset_log()
            requests += len(records)
            writes.append(
                sum(
                    1
                    for r in records
                    if r.method == "PATCH" and r.path.startswith("/api/v1/nodes/") and r.stored
                )
            )
            event_count += sum(
                1 for r in records if r.method == "POST" and r.path.endswith("/events")
            )
            names = api.node_names()
            present_nodes.append(len(names))
            held_nodes.append(sum(1 for n in names if any(k in api.annotations(n) for k in keys)))
            held_by_window: dict[str, int] = defaultdict(int)
            for decision in result.plan.decisions:
                if decision.held:
                    held_by_window[decision.window] += 1
            periods.see(tick, result.plan.windows, held_by_window)
    if api.errors:
        raise SimulationFailed(f"the API test server failed: {api.errors[0].splitlines()[-1]}")
    return ColumnResult(
        hold=hold,
        label=describe(hold),
        periods=periods.all(),
        held_runs=sum(1 for n in held_nodes if n),
        held_nodes=tuple(held_nodes),
        present_nodes=tuple(present_nodes),
        writes=tuple(writes),
        events=event_count,
        requests=requests,
        removed_while_held=removed_while_held,
        seconds=time.perf_counter() - began,
    )


class _Periods:
    """Open, extend and close hold periods from each run's hold windows."""

    def __init__(self, hold: HoldSettings) -> None:
        self.hold = hold
        self.labels: dict[str, dict[str, str]] = {}  # labels of the nodes there now
        self.open: dict[str, _Open] = {}
        self.closed: list[HoldPeriod] = []

    def see(self, tick: datetime, windows: tuple[HoldWindow, ...], held: dict[str, int]) -> None:
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


def _replay_job(args: tuple[Timeline, Window, HoldSettings, bool]) -> ColumnResult:
    return replay(*args)


def simulate(
    timeline: Timeline,
    window: Window,
    holds: list[HoldSettings],
    *,
    events: bool = True,
    jobs: int = 0,
) -> Simulation:
    """Replay every configuration; with jobs > 1, in that many processes at once."""
    began = time.perf_counter()
    jobs = jobs or (os.cpu_count() or 1)
    jobs = max(1, min(jobs, len(holds)))
    work = [(timeline, window, hold, events) for hold in holds]
    if jobs == 1:
        results = [_replay_job(w) for w in work]
    else:
        # spawn, not fork: the parent may have threads (a test runner's), and a fresh
        # interpreter per process keeps each replay independent.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            results = list(pool.map(_replay_job, work))
    return Simulation(
        timeline=timeline,
        window=window,
        results=tuple(results),
        unseen=tuple(schedule(timeline, window).unseen),
        jobs=jobs,
        elapsed=time.perf_counter() - began,
    )


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
