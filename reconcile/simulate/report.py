"""What `node-holder simulate` prints: hold periods, the comparison or sweep table, sparklines,
JSON.

Written for someone choosing a hold duration who has not read the code: every section has
a heading, every figure a unit, a legend says what each row counts, and the figures that
are estimates say so wherever they are printed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TextIO

from reconcile.rule.settings import format_duration
from reconcile.simulate import sparkline
from reconcile.simulate.replay import Result, Simulation
from reconcile.simulate.timeline import iso

MAX_PERIOD_LINES = 60
WHOLE_PERCENT_FROM = 10  # below 10%, one decimal: 0.4% is not 0%
ESTIMATES = (
    "  launches avoided (estimate): nodes removed while held, each followed before the hold's",
    "    end by a new node of its {group}: a launch a kept node could have saved",
    "  node-hours kept (estimate): how much longer those removed nodes would have lived, up to",
    "    the end of their hold (docs/simulate.md: how, and why a replay cannot know more)",
)


def _clock(moment: datetime, multi_day: bool) -> str:
    return moment.strftime("%m-%d %H:%M" if multi_day else "%H:%M")


def _pct(part: float, whole: float) -> str:
    if not whole:
        return "-"
    share = 100 * part / whole
    return f"{share:.0f}%" if share >= WHOLE_PERCENT_FROM or share == 0 else f"{share:.1f}%"


def _node_minutes(counts: Sequence[int], interval: timedelta) -> float:
    return sum(counts) * interval.total_seconds() / 60


class _Figures:
    """The figures of one configuration that the text, the JSON and the plot share."""

    def __init__(self, result: Result, sim: Simulation) -> None:
        interval = sim.window.interval
        self.total = (sim.window.end - sim.window.start).total_seconds()
        self.held = result.held_runs * interval.total_seconds()
        self.minutes = _node_minutes(result.present_nodes, interval)
        self.held_minutes = _node_minutes(result.held_nodes, interval)
        self.writes = sum(result.writes)
        self.avg_writes = self.writes / max(result.runs, 1)


# --- text --------------------------------------------------------------------------------


def render_text(sim: Simulation) -> list[str]:
    lines = _header(sim)
    if not sim.sweep:
        lines += ["", *_periods(sim), "", *_comparison(sim)]
    else:
        lines += ["", *_sweep(sim)]
    lines += ["", *_sparklines(sim)]
    runs = sim.window.runs * len(sim.results)
    replayed = sum(r.replayed for r in sim.results)
    lines += [
        "",
        f"Replayed {len(sim.results)} configuration(s) x {sim.window.runs:,} runs through the "
        f"reconciler's decision, in memory, in {sim.elapsed:.1f}s ({replayed:,} runs decided, "
        f"{runs - replayed:,} skipped: nothing could change).",
    ]
    return lines


def _span(delta: timedelta) -> str:
    """`24h` rather than `1d`: a replay is read in hours."""
    hours = delta.total_seconds() / 3600
    if hours.is_integer() and hours <= 72:
        return f"{int(hours)}h"
    return format_duration(delta)


def _header(sim: Simulation) -> list[str]:
    window, timeline = sim.window, sim.timeline
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
    return lines + [f"  note: {note}" for note in timeline.notes]


def _periods(sim: Simulation) -> list[str]:
    result = sim.primary
    hold = result.hold
    figures = _Figures(result, sim)
    scope = f"hold {format_duration(hold.hold_duration)}, {hold.scope} scope"
    if hold.max_hold is not None:
        scope += f", max hold {format_duration(hold.max_hold)}"
    lines = [
        f"Holds with the primary configuration ({scope}): {len(result.periods)} started, held "
        f"{format_duration(timedelta(seconds=figures.held))} of "
        f"{_span(sim.window.end - sim.window.start)} ({_pct(figures.held, figures.total)})"
    ]
    if not result.periods:
        return [*lines, "  no hold: no node was younger than the hold duration at any run"]
    multi_day = sim.window.start.date() != sim.window.tick(sim.window.runs - 1).date()
    show_window = hold.scope.value != "cluster"
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
        + (f" (its {hold.group_label} in brackets)" if bracket else ""),
        "  newer: nodes that arrived during the hold and extended it; nodes held: the most at once",
    ]
    if any(p.end is None for p in result.periods):
        lines.append("  (end): still held when the replay ended")
    return lines


#: The comparison's rows: (name, figure of a configuration).
Row = tuple[str, Callable[[Result, _Figures], str]]
_ROWS: tuple[Row, ...] = (
    ("holds started", lambda r, f: str(len(r.periods))),
    ("time held", lambda r, f: format_duration(timedelta(seconds=f.held))),
    ("share of time held", lambda r, f: _pct(f.held, f.total)),
    ("node-minutes held", lambda r, f: f"{f.held_minutes:,.0f}"),
    ("share of node-minutes held", lambda r, f: _pct(f.held_minutes, f.minutes)),
    ("nodes removed while held", lambda r, f: str(r.removed_while_held)),
    ("launches avoided (estimate)", lambda r, f: str(r.launches_avoided)),
    ("node-hours kept (estimate)", lambda r, f: f"{r.node_hours_kept:,.1f}"),
    ("node writes (PATCH)", lambda r, f: f"{f.writes:,}"),
    ("writes per run: avg / max", lambda r, f: f"{f.avg_writes:.2f} / {max(r.writes, default=0)}"),
    ("Events recorded", lambda r, f: str(r.events)),
    ("API requests (computed)", lambda r, f: f"{r.requests:,}"),
)


def _comparison(sim: Simulation) -> list[str]:
    head = ["", *[r.label + (" *" if i == 0 else "") for i, r in enumerate(sim.results)]]
    figures = [_Figures(r, sim) for r in sim.results]
    rows = [
        [name, *[fn(r, f) for r, f in zip(sim.results, figures, strict=True)]] for name, fn in _ROWS
    ]
    lines = [
        f"Comparison: the same {sim.window.runs:,} runs for each configuration "
        "(duration[/scope][/max=cap])"
    ]
    lines += ["  " + line for line in _table(head, rows, right=set(range(1, len(head))))]
    hold = sim.primary.hold
    return [
        *lines,
        "  * primary configuration (--hold-duration, --hold-scope, --max-hold): holds listed above",
        f"  time held: at least one node carries the hold annotation ({hold.annotations[0]})",
        "  node-minutes held: one node carrying it for one minute counts one",
        "  removed while held: nodes the timeline deletes while they carry the hold; Karpenter",
        "    would not have disrupted them voluntarily then: the churn a hold prevents",
        *[line.format(group=hold.group_label) for line in ESTIMATES],
        "  writes: annotation patches sent to nodes; Events: HoldStarted/Extended/Ended recorded",
        "  API requests: what the runs would send: list pages (500 nodes each), patches, Events",
    ]


def _sweep(sim: Simulation) -> list[str]:
    """Each hold duration's gain (estimates) against its cost, with bars to find the knee."""
    results = sorted(sim.results, key=lambda r: r.hold.hold_duration)
    figures = [_Figures(r, sim) for r in results]
    top = max(r.launches_avoided for r in results) or 1
    kept = max(r.node_hours_kept for r in results) or 1.0
    head = [
        "hold",
        "time held",
        "node-hours held",
        "launches avoided (est.)",
        "node-hours kept (est.)",
    ]
    rows = [
        [
            r.label + (" *" if r is sim.primary else ""),
            _pct(f.held, f.total),
            f"{f.held_minutes / 60:,.1f}",
            f"{r.launches_avoided:>6} {sparkline.bar(r.launches_avoided / top)}",
            f"{r.node_hours_kept:>8,.1f} {sparkline.bar(r.node_hours_kept / kept)}",
        ]
        for r, f in zip(results, figures, strict=True)
    ]
    hold = sim.primary.hold
    return [
        f"Sweep: what each hold duration buys and costs ({hold.scope} scope; the same "
        f"{sim.window.runs:,} runs each)",
        *["  " + line for line in _table(head, rows, right={1, 2})],
        "  * primary configuration; time held: share of the replay with any node held",
        "  node-hours held: node time that carried the hold annotation (the cost)",
        *[line.format(group=hold.group_label) for line in ESTIMATES],
        "  the knee: the shortest hold after which longer ones keep more node-hours but avoid",
        "    few more launches",
    ]


def _sparklines(sim: Simulation) -> list[str]:
    window = sim.window
    per = sparkline.runs_per_char(window.runs)
    width = max(len(label) for label in ["nodes", *[r.label for r in sim.results]]) + 2
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
    return [*lines, f"  {'':<{width}} {ticks}"]


def _table(head: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def fmt(cells: list[str]) -> str:
        parts = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    return [fmt(head), *[fmt(r) for r in rows]]


# --- JSON ------------------------------------------------------------------------------


def _configuration_json(result: Result, sim: Simulation) -> dict[str, Any]:
    figures = _Figures(result, sim)
    hold = result.hold
    return {
        "label": result.label,
        "primary": result is sim.primary,
        "hold_duration_seconds": hold.hold_duration.total_seconds(),
        "scope": hold.scope.value,
        "max_hold_seconds": hold.max_hold.total_seconds() if hold.max_hold else None,
        "holds_started": len(result.periods),
        "held_runs": result.held_runs,
        "held_seconds": figures.held,
        "held_share": figures.held / figures.total if figures.total else 0.0,
        "node_minutes": figures.minutes,
        "node_minutes_held": figures.held_minutes,
        "node_minutes_held_share": figures.held_minutes / figures.minutes
        if figures.minutes
        else 0.0,
        "removed_while_held": result.removed_while_held,
        "launches_avoided_estimate": result.launches_avoided,
        "node_hours_kept_estimate": round(result.node_hours_kept, 3),
        "writes": {
            "total": figures.writes,
            "per_run_avg": figures.avg_writes,
            "per_run_max": max(result.writes, default=0),
        },
        "events": result.events,
        "requests": result.requests,
        "runs_decided": result.replayed,
        "replay_seconds": round(result.seconds, 3),
        "periods": [
            {
                "window": p.window,
                "start": iso(p.start),
                "end": p.end and iso(p.end),
                "duration_seconds": p.duration(sim.window.end).total_seconds(),
                "trigger": p.trigger,
                "trigger_group": p.trigger_group,
                "extended": p.extended,
                "peak_held": p.peak_held,
            }
            for p in result.periods
        ],
        "held_nodes": result.held_nodes,
    }


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
            "start": iso(window.start),
            "end": iso(window.end),
            "interval_seconds": window.interval.total_seconds(),
            "runs": window.runs,
        },
        "sweep": sim.sweep,
        "present_nodes": sim.primary.present_nodes,
        "configurations": [_configuration_json(r, sim) for r in sim.results],
        "elapsed_seconds": round(sim.elapsed, 3),
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
