"""What `node-holder simulate` prints: hold periods, the comparison table, sparklines, JSON.

Written for someone choosing a hold duration who has not read the code: every
section has a heading, every figure a unit, and a legend says what each row counts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TextIO

from reconcile.settings import format_duration
from reconcile.simulate import sparkline
from reconcile.simulate.replay import ColumnResult, HoldPeriod, Simulation

MAX_PERIOD_LINES = 60
WHOLE_PERCENT_FROM = 10  # below 10%, one decimal: 0.4% is not 0%


def _clock(moment: datetime, multi_day: bool) -> str:
    return moment.strftime("%m-%d %H:%M" if multi_day else "%H:%M")


def _iso(moment: datetime | None) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else None


def _multi_day(sim: Simulation) -> bool:
    last = sim.window.start + sim.window.interval * (sim.window.runs - 1)
    return sim.window.start.date() != last.date()


def _pct(part: float, whole: float) -> str:
    if not whole:
        return "-"
    share = 100 * part / whole
    return f"{share:.0f}%" if share >= WHOLE_PERCENT_FROM or share == 0 else f"{share:.1f}%"


def _held_time(result: ColumnResult, interval: timedelta) -> timedelta:
    return result.held_runs * interval


def _node_minutes(counts: Sequence[int], interval: timedelta) -> float:
    return sum(counts) * interval.total_seconds() / 60


def _scope_text(result: ColumnResult) -> str:
    hold = result.hold
    text = f"hold {format_duration(hold.hold_duration)}, {hold.scope} scope"
    if hold.max_hold is not None:
        text += f", max hold {format_duration(hold.max_hold)}"
    return text


# --- text --------------------------------------------------------------------------------


def render_text(sim: Simulation) -> list[str]:
    lines = _header(sim)
    lines += ["", *_periods(sim)]
    lines += ["", *_comparison(sim)]
    lines += ["", *_sparklines(sim)]
    lines += [
        "",
        f"Replayed {len(sim.results)} configuration(s) x {sim.window.runs:,} runs through the "
        f"reconciler's decision, in memory, in {sim.elapsed:.1f}s.",
    ]
    return lines


def _span(delta: timedelta) -> str:
    """`24h` rather than `1d`: a replay is read in hours."""
    hours = delta.total_seconds() / 3600
    if hours.is_integer() and hours <= 72:
        return f"{int(hours)}h"
    return format_duration(delta)


def _header(sim: Simulation) -> list[str]:
    window = sim.window
    timeline = sim.timeline
    lines = [
        f"node-holder simulate: {', '.join(timeline.sources)} ({len(timeline.nodes)} nodes)",
        f"  replay {window.start:%Y-%m-%d %H:%M} -> {window.end:%Y-%m-%d %H:%M} UTC "
        f"({_span(window.end - window.start)}), a run every {format_duration(window.interval)} "
        "like the CronJob:",
        f"  {window.runs:,} runs per configuration, in memory, through the CronJob's decide()",
    ]
    if sim.unseen:
        lines.append(
            f"  {len(sim.unseen)} node(s) lived less than the time between two runs: "
            "no run saw them"
        )
    lines += [f"  note: {note}" for note in timeline.notes]
    return lines


def _periods(sim: Simulation) -> list[str]:
    result = sim.primary
    interval = sim.window.interval
    held = _held_time(result, interval)
    total = sim.window.end - sim.window.start
    lines = [
        f"Holds with the primary configuration ({_scope_text(result)}): "
        f"{len(result.periods)} started, held {format_duration(held)} of "
        f"{_span(total)} ({_pct(held.total_seconds(), total.total_seconds())})"
    ]
    if not result.periods:
        return [*lines, "  no hold: no node was younger than the hold duration at any run"]
    multi_day = _multi_day(sim)
    show_window = result.hold.scope.value != "cluster"
    group_label = result.hold.group_label
    head = ["start", "end", "held", *(["window"] if show_window else []), "started by (new node)"]
    rows: list[list[str]] = []
    for period in result.periods[:MAX_PERIOD_LINES]:
        trigger = period.trigger
        if period.trigger_group is not None and not show_window:
            trigger += f" ({period.trigger_group})"
        rows.append(
            [
                _clock(period.start, multi_day),
                _clock(period.end, multi_day) if period.end else "(end)",
                format_duration(period.duration(sim.window.end)),
                *([period.window] if show_window else []),
                trigger,
                f"+{period.extended}" if period.extended else "",
                str(period.peak_held),
            ]
        )
    head += ["newer", "nodes held"]
    lines += ["  " + line for line in _table(head, rows, right={2, len(head) - 2, len(head) - 1})]
    if len(result.periods) > MAX_PERIOD_LINES:
        lines.append(
            f"  ... and {len(result.periods) - MAX_PERIOD_LINES} more (all in --output json)"
        )
    bracket = not show_window and any(p.trigger_group is not None for p in result.periods)
    lines += [
        "  started by: the youngest node when the hold began"
        + (f" (its {group_label} in brackets)" if bracket else ""),
        "  newer: nodes that arrived during the hold and extended it; nodes held: the most at once",
    ]
    if any(p.end is None for p in result.periods):
        lines.append("  (end): still held when the replay ended")
    return lines


def _comparison(sim: Simulation) -> list[str]:
    interval = sim.window.interval
    total = (sim.window.end - sim.window.start).total_seconds()
    head = ["", *[r.label + (" *" if i == 0 else "") for i, r in enumerate(sim.results)]]
    rows: list[list[str]] = []

    def row(name: str, fn: Any) -> None:
        rows.append([name, *[fn(r) for r in sim.results]])

    row("holds started", lambda r: str(len(r.periods)))
    row("time held", lambda r: format_duration(_held_time(r, interval)))
    row("share of time held", lambda r: _pct(_held_time(r, interval).total_seconds(), total))
    row("node-minutes held", lambda r: f"{_node_minutes(r.held_nodes, interval):,.0f}")
    row(
        "share of node-minutes held",
        lambda r: _pct(
            _node_minutes(r.held_nodes, interval), _node_minutes(r.present_nodes, interval)
        ),
    )
    row("nodes removed while held", lambda r: str(r.removed_while_held))
    row("node writes (PATCH)", lambda r: f"{sum(r.writes):,}")
    row(
        "writes per run: avg / max",
        lambda r: f"{sum(r.writes) / max(r.runs, 1):.2f} / {max(r.writes, default=0)}",
    )
    row("Events recorded", lambda r: str(r.events))
    row("API requests (computed)", lambda r: f"{r.requests:,}")
    lines = [
        f"Comparison: the same {sim.window.runs:,} runs for each configuration "
        "(duration[/scope][/max=cap])"
    ]
    lines += ["  " + line for line in _table(head, rows, right=set(range(1, len(head))))]
    annotation = sim.primary.hold.annotations[0]
    lines += [
        "  * primary configuration (--hold-duration, --hold-scope, --max-hold): holds listed above",
        f"  time held: at least one node carries the hold annotation ({annotation})",
        "  node-minutes held: one node carrying it for one minute counts one",
        "  removed while held: nodes the timeline deletes while they carry the hold; Karpenter",
        "    would not have disrupted them voluntarily then: the churn a hold prevents",
        "  writes: annotation patches sent to nodes; Events: HoldStarted/Extended/Ended recorded",
        "  API requests: what the runs would send: list pages (500 nodes each), patches, Events",
    ]
    return lines


def _sparklines(sim: Simulation) -> list[str]:
    window = sim.window
    per = sparkline.runs_per_char(window.runs)
    labels = ["nodes", *[r.label for r in sim.results]]
    width = max(len(label) for label in labels) + 2
    nodes_line, peak = sparkline.level_line(sim.primary.present_nodes, per)
    lines = [
        f"Over time: one character = {format_duration(window.interval * per)} "
        f"(UTC); nodes: how many exist (top = {peak})",
        "  each configuration: share of the nodes held (█ all, ▄ half, ▁ a few, blank none)",
        f"  {'nodes':<{width}}|{nodes_line}|",
    ]
    for result in sim.results:
        line = sparkline.share_line(result.held_nodes, result.present_nodes, per)
        lines.append(f"  {result.label:<{width}}|{line}|")
    ticks = sparkline.axis(window.start, window.interval, window.runs, per)
    lines.append(f"  {'':<{width}} {ticks}")
    return lines


def _table(head: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def fmt(cells: list[str]) -> str:
        parts = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    return [fmt(head), *[fmt(r) for r in rows]]


# --- JSON ------------------------------------------------------------------------------


def _period_json(period: HoldPeriod, end: datetime) -> dict[str, Any]:
    return {
        "window": period.window,
        "start": _iso(period.start),
        "end": _iso(period.end),
        "duration_seconds": period.duration(end).total_seconds(),
        "trigger": period.trigger,
        "trigger_group": period.trigger_group,
        "extended": period.extended,
        "peak_held": period.peak_held,
    }


def _column_json(result: ColumnResult, sim: Simulation, primary: bool) -> dict[str, Any]:
    interval = sim.window.interval
    total = (sim.window.end - sim.window.start).total_seconds()
    held = _held_time(result, interval).total_seconds()
    minutes = _node_minutes(result.present_nodes, interval)
    held_minutes = _node_minutes(result.held_nodes, interval)
    hold = result.hold
    return {
        "label": result.label,
        "primary": primary,
        "hold_duration_seconds": hold.hold_duration.total_seconds(),
        "scope": hold.scope.value,
        "max_hold_seconds": hold.max_hold.total_seconds() if hold.max_hold else None,
        "holds_started": len(result.periods),
        "held_runs": result.held_runs,
        "held_seconds": held,
        "held_share": held / total if total else 0.0,
        "node_minutes": minutes,
        "node_minutes_held": held_minutes,
        "node_minutes_held_share": held_minutes / minutes if minutes else 0.0,
        "removed_while_held": result.removed_while_held,
        "writes": {
            "total": sum(result.writes),
            "per_run_avg": sum(result.writes) / max(result.runs, 1),
            "per_run_max": max(result.writes, default=0),
        },
        "events": result.events,
        "requests": result.requests,
        "replay_seconds": round(result.seconds, 3),
        "periods": [_period_json(p, sim.window.end) for p in result.periods],
        "held_nodes": list(result.held_nodes),
    }


def render(sim: Simulation, output: str, plot: str | None) -> list[str]:
    """The lines to print: the text report, or one JSON object."""
    if output == "json":
        data = render_json(sim)
        if plot:
            data["plot"] = plot
        return [json.dumps(data, indent=2)]
    lines = render_text(sim)
    return [*lines, f"Plot written to {plot}."] if plot else lines


def render_json(sim: Simulation) -> dict[str, Any]:
    window = sim.window
    return {
        "timeline": {
            "sources": list(sim.timeline.sources),
            "nodes": len(sim.timeline.nodes),
            "unseen": list(sim.unseen),
            "notes": list(sim.timeline.notes),
        },
        "replay": {
            "start": _iso(window.start),
            "end": _iso(window.end),
            "interval_seconds": window.interval.total_seconds(),
            "runs": window.runs,
        },
        "present_nodes": list(sim.primary.present_nodes),
        "configurations": [_column_json(r, sim, i == 0) for i, r in enumerate(sim.results)],
        "elapsed_seconds": round(sim.elapsed, 3),
    }


# --- progress ------------------------------------------------------------------------------


class ProgressLine:
    """Runs done / total per configuration on stderr, once a replay takes a while.

    Silent for the first `after` seconds (most replays are done by then), then at most
    one update every `every` seconds: rewritten in place on a terminal, one line each
    otherwise (a log file stays readable).
    """

    def __init__(
        self, stream: TextIO, configurations: int, after: float = 2.0, every: float = 1.0
    ) -> None:
        self.stream = stream
        self.configurations = configurations
        self.after = after
        self.every = every
        self.began = time.monotonic()
        self.shown = 0.0
        self.labels: list[str] = []
        self.tty = stream.isatty()

    def __call__(self, label: str, done: int, total: int) -> None:
        if not self.labels or self.labels[-1] != label:
            self.labels.append(label)
        now = time.monotonic()
        if now - self.began < self.after or (now - self.shown < self.every and done < total):
            return
        self.shown = now
        text = (
            f"simulate: configuration {len(self.labels)}/{self.configurations} ({label}): "
            f"{done:,}/{total:,} runs, {now - self.began:.0f}s"
        )
        self.stream.write(f"\r{text}\033[K" if self.tty else text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the line rewritten in place, so the report starts on its own line."""
        if self.tty and self.shown:
            self.stream.write("\n")
            self.stream.flush()
