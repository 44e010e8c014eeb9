"""What `node-holder simulate` prints: hold periods, the comparison or sweep table, sparklines
(a day of runs squeezed into one line of block characters), JSON.

Written for someone choosing a hold duration who has not read the code: every section has
a heading, every figure a unit, a legend says what each row counts, and the figures that
are estimates say so wherever they are printed. Each configuration's figures are worked out
once (`figures`, the JSON object); the text tables show those.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, TextIO

from reconcile.rule.settings import Scope, format_duration
from reconcile.rule.text import table
from reconcile.simulate.replay import EPOCH, Result, Simulation
from reconcile.simulate.timeline import iso

MAX_PERIOD_LINES = 60
WHOLE_PERCENT_FROM = 10  # below 10%, one decimal: 0.4% is not 0%
BLOCKS = " ▁▂▃▄▅▆▇█"
EIGHTHS = " ▏▎▍▌▋▊▉"  # a bar's last character
WIDTH = 72  # characters of a sparkline
_TICKS = [timedelta(minutes=m) for m in (5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080)]
ESTIMATES = (
    "  launches avoided (estimate): nodes removed while held, each followed before the hold's",
    "    end by a new node of its {group}: a launch a kept node could have saved",
    "  node-hours kept (estimate): how much longer those removed nodes would have lived, up to",
    "    the end of their hold (docs/simulate.md: how, and why a replay cannot know more)",
)


def _pct(part: float, whole: float) -> str:
    if not whole:
        return "-"
    share = 100 * part / whole
    return f"{share:.0f}%" if share >= WHOLE_PERCENT_FROM or share == 0 else f"{share:.1f}%"


def _clock(moment: datetime, multi_day: bool) -> str:
    return moment.strftime("%m-%d %H:%M" if multi_day else "%H:%M")


def _span(delta: timedelta) -> str:
    """`24h` rather than `1d`: a replay is read in hours."""
    hours = delta.total_seconds() / 3600
    return f"{int(hours)}h" if hours.is_integer() and hours <= 72 else format_duration(delta)


def figures(result: Result, sim: Simulation) -> dict[str, Any]:
    """One configuration's figures, as `--output json` gives them."""
    seconds = sim.span.interval.total_seconds()
    total = (sim.span.end - sim.span.start).total_seconds()
    held = result.held_runs * seconds
    minutes = sum(result.present_nodes) * seconds / 60
    held_minutes = sum(result.held_nodes) * seconds / 60
    writes = sum(result.writes)
    hold = result.hold
    return {
        "label": result.label,
        "primary": result is sim.primary,
        "holdDurationSeconds": hold.hold_duration.total_seconds(),
        "scope": hold.scope.value,
        "maxHoldSeconds": hold.max_hold.total_seconds() if hold.max_hold else None,
        "holdsStarted": len(result.periods),
        "heldRuns": result.held_runs,
        "heldSeconds": held,
        "heldShare": held / total if total else 0.0,
        "nodeMinutes": minutes,
        "nodeMinutesHeld": held_minutes,
        "nodeMinutesHeldShare": held_minutes / minutes if minutes else 0.0,
        "nodesRemovedWhileHeld": result.removed_while_held,
        "launchesAvoidedEstimate": result.launches_avoided,
        "nodeHoursKeptEstimate": round(result.node_hours_kept, 3),
        "writes": {
            "total": writes,
            "perRunAvg": writes / max(result.runs, 1),
            "perRunMax": max(result.writes, default=0),
            "nodePoolsBudget": result.budget_writes,
        },
        "events": result.events,
        "requests": result.requests,
        "runsDecided": result.replayed,
        "replaySeconds": round(result.seconds, 3),
        "periods": [
            {
                "window": p.window,
                "start": iso(p.start),
                "end": p.end and iso(p.end),
                "durationSeconds": p.duration(sim.span.end).total_seconds(),
                "trigger": p.trigger,
                "triggerGroup": p.trigger_group,
                "extended": p.extended,
                "peakHeld": p.peak_held,
            }
            for p in result.periods
        ],
        "heldNodes": result.held_nodes,
    }


def render(sim: Simulation, output: str, plot: str | None) -> list[str]:
    """The lines to print: the text report, or one JSON object."""
    columns = [figures(r, sim) for r in sim.results]
    if output == "json":
        window = sim.span
        data = {
            "timeline": {
                "sources": list(sim.timeline.sources),
                "nodes": len(sim.timeline.nodes),
                "unseen": list(sim.unseen),
                "notes": list(sim.timeline.notes),
                "warnings": unmatched(sim),
            },
            "replay": {
                "start": iso(window.start),
                "end": iso(window.end),
                "intervalSeconds": window.interval.total_seconds(),
                "runs": window.runs,
            },
            "sweep": sim.sweep,
            **({"knee": knee(columns)} if sim.sweep else {}),
            "presentNodes": sim.primary.present_nodes,
            "configurations": columns,
            "elapsedSeconds": round(sim.elapsed, 3),
            **({"plot": plot} if plot else {}),
        }
        return [json.dumps(data, indent=2)]
    tables = _sweep(sim, columns) if sim.sweep else [*_periods(sim), "", *_comparison(sim, columns)]
    decided = sum(r.replayed for r in sim.results)
    skipped = sim.span.runs * len(sim.results) - decided
    return [
        *_header(sim),
        "",
        *tables,
        "",
        *_sparklines(sim),
        "",
        f"Replayed {len(sim.results)} configuration(s) x {sim.span.runs:,} runs through the "
        f"reconciler's decision, in memory, in {sim.elapsed:.1f}s ({decided:,} runs decided, "
        f"{skipped:,} skipped: nothing could change).",
        *([f"Plot written to {plot}."] if plot else []),
    ]


# --- text --------------------------------------------------------------------------------


def _header(sim: Simulation) -> list[str]:
    window, timeline = sim.span, sim.timeline
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
    lines += [f"  warning: {line}" for line in unmatched(sim)]
    return lines + [f"  note: {note}" for note in timeline.notes]


def unmatched(sim: Simulation) -> list[str]:
    """The selectors and group label that no node of the input matches, as `reconcile`
    warns: the label the input lacks, and for a Prometheus answer where it would come from."""
    hold, nodes = sim.holds[0], sim.timeline.nodes
    found = []
    selector = hold.trigger_selector
    if _no_trigger(sim):
        found.append(
            f"--trigger-selector {selector.text!r} matches none of the {len(nodes)} nodes of the "
            f"input: no node starts a hold{_lacking(sim, selector.keys)}"
        )
    chosen = hold.node_selector
    if chosen and not any(chosen.matches(n.labels) for n in nodes):
        found.append(
            f"--node-selector {chosen.text!r} matches none of the {len(nodes)} nodes of the "
            f"input: no node is held{_lacking(sim, chosen.keys)}"
        )
    label = hold.group_label
    if any(h.scope is Scope.GROUP for h in sim.holds) and not any(label in n.labels for n in nodes):
        found.append(
            f"--group-label {label!r} is on none of the {len(nodes)} nodes of the input: in group "
            f"scope they all form one group{_lacking(sim, {label})}"
        )
    return found


def _no_trigger(sim: Simulation) -> bool:
    selector = sim.holds[0].trigger_selector
    return bool(selector) and not any(selector.matches(n.labels) for n in sim.timeline.nodes)


def _lacking(sim: Simulation, keys: Iterable[str]) -> str:
    """`; no node carries the label X`, and the kube-state-metrics flag that exports it."""
    missing = sorted(k for k in keys if not any(k in n.labels for n in sim.timeline.nodes))
    if not missing:
        return ""
    words = f"; no node carries the label {', '.join(missing)}"
    if sim.timeline.step:  # read from Prometheus
        words += (
            f" (kube-state-metrics puts it in kube_node_labels with "
            f"--metric-labels-allowlist=nodes=[{','.join(missing)}])"
        )
    return words


def _periods(sim: Simulation) -> list[str]:
    result, window = sim.primary, sim.span
    hold = result.hold
    held = timedelta(seconds=result.held_runs * window.interval.total_seconds())
    scope = f"hold {format_duration(hold.hold_duration)}, {hold.scope} scope"
    if hold.max_hold is not None:
        scope += f", max hold {format_duration(hold.max_hold)}"
    lines = [
        f"Holds with the primary configuration ({scope}): {len(result.periods)} started, held "
        f"{format_duration(held)} of {_span(window.end - window.start)} "
        f"({_pct(held.total_seconds(), (window.end - window.start).total_seconds())})"
    ]
    if not result.periods and _no_trigger(sim):
        return [*lines, "  no hold: no node of the input matches --trigger-selector (see above)"]
    if not result.periods:
        return [*lines, "  no hold: no node was younger than the hold duration at any run"]
    multi_day = window.start.date() != window.tick(window.runs - 1).date()
    by_window = hold.scope.value != "cluster"
    head = ["start", "end", "held", *(["window"] if by_window else []), "started by (new node)"]
    rows: list[list[str]] = []
    for period in result.periods[:MAX_PERIOD_LINES]:
        trigger = period.trigger
        if period.trigger_group is not None and not by_window:
            trigger += f" ({period.trigger_group})"
        rows.append(
            [
                _clock(period.start, multi_day),
                _clock(period.end, multi_day) if period.end else "(end)",
                format_duration(period.duration(window.end)),
                *([period.window] if by_window else []),
                trigger,
                f"+{period.extended}" if period.extended else "",
                str(period.peak_held),
            ]
        )
    head += ["newer", "nodes held"]
    lines += ["  " + line for line in table(head, rows, right={2, len(head) - 2, len(head) - 1})]
    if len(result.periods) > MAX_PERIOD_LINES:
        lines.append(
            f"  ... and {len(result.periods) - MAX_PERIOD_LINES} more (all in --output json)"
        )
    bracket = not by_window and any(p.trigger_group is not None for p in result.periods)
    lines += [
        "  started by: the youngest node when the hold began"
        + (f" (its {hold.group_label} in brackets)" if bracket else ""),
        "  newer: nodes that arrived during the hold and extended it; nodes held: the most at once",
    ]
    if any(p.end is None for p in result.periods):
        lines.append("  (end): still held when the replay ended")
    return lines


#: The comparison's rows: a name, and how to show a configuration's figure (given the
#: replay's length in seconds).
_ROWS: tuple[tuple[str, Callable[[dict[str, Any], float], str]], ...] = (
    ("holds started", lambda c, _: str(c["holdsStarted"])),
    ("time held", lambda c, _: format_duration(timedelta(seconds=c["heldSeconds"]))),
    ("share of time held", lambda c, total: _pct(c["heldSeconds"], total)),
    ("node-minutes held", lambda c, _: f"{c['nodeMinutesHeld']:,.0f}"),
    ("share of node-minutes held", lambda c, _: _pct(c["nodeMinutesHeld"], c["nodeMinutes"])),
    ("nodes removed while held", lambda c, _: str(c["nodesRemovedWhileHeld"])),
    ("launches avoided (estimate)", lambda c, _: str(c["launchesAvoidedEstimate"])),
    ("node-hours kept (estimate)", lambda c, _: f"{c['nodeHoursKeptEstimate']:,.1f}"),
    ("node writes (PATCH)", lambda c, _: f"{c['writes']['total']:,}"),
    (
        "writes per run: avg / max",
        lambda c, _: f"{c['writes']['perRunAvg']:.2f} / {c['writes']['perRunMax']}",
    ),
    ("NodePool writes if --mechanism budget", lambda c, _: f"{c['writes']['nodePoolsBudget']:,}"),
    ("Events recorded", lambda c, _: str(c["events"])),
    ("API requests (computed)", lambda c, _: f"{c['requests']:,}"),
)


def _comparison(sim: Simulation, columns: list[dict[str, Any]]) -> list[str]:
    head = ["", *[c["label"] + (" *" if c["primary"] else "") for c in columns]]
    total = (sim.span.end - sim.span.start).total_seconds()
    rows = [[name, *[show(c, total) for c in columns]] for name, show in _ROWS]
    hold = sim.primary.hold
    return [
        f"Comparison: the same {sim.span.runs:,} runs for each configuration "
        "(duration[/scope][/max=cap])",
        *["  " + line for line in table(head, rows, right=set(range(1, len(head))))],
        "  * primary configuration (--hold-duration, --hold-scope, --max-hold): holds listed above",
        f"  time held: at least one node carries the hold annotation ({hold.annotations[0]})",
        "  node-minutes held: one node carrying it for one minute counts one",
        "  removed while held: nodes the timeline deletes while they carry the hold; Karpenter",
        "    would not have disrupted them voluntarily then: the churn a hold prevents",
        *[line.format(group=hold.group_label) for line in ESTIMATES],
        "  writes: annotation patches sent to nodes; Events: HoldStarted/Extended/Ended recorded",
        "  NodePool writes: the budget mechanism's patches, one per NodePool (node label",
        "    karpenter.sh/nodepool) each time its entry changes; none in node scope",
        "  API requests: what the runs would send: list pages (500 nodes each), patches, Events",
    ]


#: A knee avoids at least this many launches more than the straight line predicts: less is
#: noise in an estimate counted in whole launches.
KNEE_MARGIN = 1.0


def knee(columns: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The sweep's knee, or None: on the curve of launches avoided against node-hours kept,
    shortest hold first, the duration farthest above the straight line from the shortest
    duration's point to the longest's (by at least KNEE_MARGIN launches). Up to it, each
    step buys launches faster than the sweep does on average; after it, slower. It is the
    setting `--sweep` recommends, with its steps from the duration before and to the next."""
    ordered = sorted(columns, key=lambda c: c["holdDurationSeconds"])
    points = [(c["nodeHoursKeptEstimate"], c["launchesAvoidedEstimate"]) for c in ordered]
    (k0, a0), (k1, a1) = points[0], points[-1]
    if len(points) < 3 or k1 <= k0:
        return None
    above = [a - a0 - (a1 - a0) * (k - k0) / (k1 - k0) for k, a in points]
    best = max(range(len(points)), key=above.__getitem__)
    if above[best] < KNEE_MARGIN:
        return None
    column = ordered[best]
    steps = [
        {
            "from": ordered[before]["label"],
            "to": ordered[after]["label"],
            "launchesAvoided": points[after][1] - points[before][1],
            "nodeHoursKept": round(points[after][0] - points[before][0], 3),
        }
        for before, after in ((best - 1, best), (best, best + 1))
    ]
    return {
        "label": column["label"],
        "holdDurationSeconds": column["holdDurationSeconds"],
        "launchesAvoidedEstimate": column["launchesAvoidedEstimate"],
        "nodeHoursKeptEstimate": column["nodeHoursKeptEstimate"],
        "aboveLine": round(above[best], 3),
        "steps": steps,
    }


def _recommendation(found: dict[str, Any] | None, columns: list[dict[str, Any]]) -> str:
    """The sweep's one line: which hold duration it recommends, and why."""
    if found is None:
        first, last = columns[0]["label"], columns[-1]["label"]
        return (
            f"  recommended: none; no knee (no duration avoids a launch more than the straight "
            f"line from {first} to {last} predicts): longer holds buy launches at an even rate, "
            "so choose by the node-hours you accept"
        )
    setting = format_duration(timedelta(seconds=found["holdDurationSeconds"]))
    column = "" if found["label"] == setting else f" (column {found['label']})"
    before, after = found["steps"]
    return (
        f"  recommended: --hold-duration {setting}{column}, the knee: from {before['from']} it "
        f"avoids {_more(before['launchesAvoided'])} launches (est.) for "
        f"{_more(before['nodeHoursKept'], '.1f')} node-hours kept; {after['to']} avoids "
        f"{_more(after['launchesAvoided'])} for {_more(after['nodeHoursKept'], '.1f')}"
    )


def _more(value: float, digits: str = "") -> str:
    """A step's change: `N more`, or `N fewer` where it goes down (never a negative "more")."""
    return f"{abs(value):,{digits}} {'fewer' if value < 0 else 'more'}"


def _sweep(sim: Simulation, columns: list[dict[str, Any]]) -> list[str]:
    """Each hold duration's gain (estimates) against its cost, the knee marked."""
    columns = sorted(columns, key=lambda c: c["holdDurationSeconds"])
    found = knee(columns)
    total = (sim.span.end - sim.span.start).total_seconds()
    top = max(c["launchesAvoidedEstimate"] for c in columns) or 1
    most = max(c["nodeHoursKeptEstimate"] for c in columns) or 1.0
    head = ["hold", "time held", "node-hours held", "launches avoided (est.)"]
    rows = []
    for c in columns:
        avoided, kept = c["launchesAvoidedEstimate"], c["nodeHoursKeptEstimate"]
        rows.append(
            [
                c["label"] + (" *" if c["primary"] else ""),
                _pct(c["heldSeconds"], total),
                f"{c['nodeMinutesHeld'] / 60:,.1f}",
                f"{avoided:>6} {_bar(avoided / top)}",
                f"{kept:>8,.1f} {_bar(kept / most)}",
                "<- knee" if found and c["label"] == found["label"] else "",
            ]
        )
    hold = sim.primary.hold
    return [
        f"Sweep: what each hold duration buys and costs ({hold.scope} scope; the same "
        f"{sim.span.runs:,} runs each)",
        *["  " + line for line in table([*head, "node-hours kept (est.)", ""], rows, right={1, 2})],
        "  * primary configuration; time held: share of the replay with any node held",
        "  node-hours held: node time that carried the hold annotation (the cost)",
        *[line.format(group=hold.group_label) for line in ESTIMATES],
        "  knee: on the curve of launches avoided against node-hours kept, the duration",
        "    farthest above the straight line from the shortest to the longest: the step to",
        "    it avoids launches per node-hour at least as fast as the sweep on average, the",
        "    next step slower",
        _recommendation(found, columns),
    ]


def _sparklines(sim: Simulation) -> list[str]:
    window, present = sim.span, sim.primary.present_nodes
    per = max(1, math.ceil(window.runs / WIDTH))  # runs one character stands for
    levels, peak = level_line(present, per)
    width = max(len(label) for label in ["nodes", *[r.label for r in sim.results]]) + 2
    lines = [
        f"Over time: one character = {format_duration(window.interval * per)} "
        f"(UTC); nodes: how many exist (top = {peak})",
        "  each configuration: share of the nodes held (█ all, ▄ half, ▁ a few, blank none)",
        f"  {'nodes':<{width}}|{levels}|",
    ]
    for result in sim.results:
        pairs = zip(_chunks(result.held_nodes, per), _chunks(present, per), strict=True)
        line = "".join(_block(sum(h) / sum(p) if sum(p) else 0.0) for h, p in pairs)
        lines.append(f"  {result.label:<{width}}|{line}|")
    return [*lines, f"  {'':<{width}} {_axis(window.start, window.interval, window.runs, per)}"]


def level_line(values: list[int], per: int) -> tuple[str, int]:
    """Per character (`per` values), their average scaled to the peak: (line, peak)."""
    peak = max(values, default=0)
    return "".join(_block(sum(c) / len(c) / (peak or 1)) for c in _chunks(values, per)), peak


def _chunks(values: list[int], per: int) -> list[list[int]]:
    return [values[i : i + per] for i in range(0, len(values), per)]


def _block(fraction: float) -> str:
    """Blank for nothing, at least the lowest block for anything above nothing."""
    return BLOCKS[max(1, min(8, round(fraction * 8)))] if fraction > 0 else " "


def _bar(fraction: float, width: int = 16) -> str:
    """A row's bar, in eighths of a character; anything above nothing shows at least `▏`."""
    eighths = max(round(min(fraction, 1.0) * width * 8), 1 if fraction > 0 else 0)
    return "█" * (eighths // 8) + EIGHTHS[eighths % 8].strip()


def _axis(start: datetime, interval: timedelta, runs: int, per: int) -> str:
    """Clock times under a sparkline, at round steps at least 12 characters apart."""
    char = interval * per
    step = next((s for s in _TICKS if s / char >= 12), _TICKS[-1])
    line = [" "] * (math.ceil(runs / per) + 6)
    moment = EPOCH + math.ceil((start - EPOCH) / step) * step
    while moment < start + interval * runs:
        pos = round((moment - start) / char)
        label = _clock(moment, interval * runs > timedelta(days=1))
        if (
            pos + len(label) <= len(line)
            and not "".join(line[max(0, pos - 1) : pos + len(label)]).strip()
        ):
            line[pos : pos + len(label)] = list(label)
        moment += step
    return "".join(line).rstrip()


# --- progress ------------------------------------------------------------------------------


class Finished:
    """One stderr line as each configuration's replay ends (`simulate: 20m/group done (3 of
    5)`): a long comparison shows how far it is, and a log file gets whole lines."""

    def __init__(self, stream: TextIO, configurations: int) -> None:
        self.stream, self.configurations, self.done = stream, configurations, 0

    def __call__(self, label: str, runs: int, total: int) -> None:
        if runs < total:
            return
        self.done += 1
        self.stream.write(f"simulate: {label} done ({self.done} of {self.configurations})\n")
        self.stream.flush()
