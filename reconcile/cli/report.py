"""The run's text, worded from its summary (summary.py, whose JSON says the same), `status`'s
table, and what stderr says besides errors. No line grows with the cluster: per-node detail is a
line per node (docs/reference.md#output).
"""

from __future__ import annotations

import json
from collections import defaultdict

from reconcile.cli.summary import (
    CHANGED,
    DONE,
    LISTED,
    ORDER,
    STATE_ORDER,
    Summary,
    Window,
    by_annotation,
    listed,
    node_json,
    patch_json,
    patch_line,
    state,
    summary_json,
)
from reconcile.cli.summary import names as _names
from reconcile.rule.decide import KeyState, NodeDecision, Plan
from reconcile.rule.settings import (
    DEFAULT_GROUP_LABEL,
    KNOWN_HOLD_KEYS,
    NODE_HOLD,
    NODE_MAX_HOLD,
    HoldSettings,
    Mechanism,
    Mode,
    RunSettings,
    Scope,
    format_duration,
)
from reconcile.rule.text import table
from reconcile.run import RunResult

# --- a run's text ----------------------------------------------------------------------

#: Always printed, even at 0; the others only when they happen.
_ALWAYS = ("added", "removed", "unchanged", "held by others", "exempt", "deleting")
_ALWAYS_FOR = {Mode.PIN: ("pinned", "unchanged"), Mode.UNPIN: ("unpinned", "unchanged")}
#: A category's words where its name is not them: a node whose only change is node-holder's
#: own stamps (the marker, the --max-hold stamps).
_WORDS = {"tidied": ("with stamps updated", "would have stamps updated")}


def final_lines(result: RunResult, data: Summary, as_json: bool, nodes: bool = False) -> list[str]:
    """Stdout once the run is done: a dry run's patch lines (a real run printed each as it
    landed), then the summary; status: with `nodes` (--nodes) a line per node first."""
    if data.command == "status":
        return _status_lines(result, data, as_json, nodes)
    planned = [*result.pools.patches, *result.plan.patches] if result.dry_run else []
    if as_json:
        return [*(json.dumps(patch_json(p)) for p in planned), _line(summary_json(data))]
    return text_lines(data, [patch_line(p) for p in planned])


def _line(data: dict) -> str:
    return json.dumps(data, separators=(",", ":"))


def text_lines(data: Summary, patches: list[str]) -> list[str]:
    """The run's text: nodes not found, a dry run's `patches` lines, Events, NodePools, counts;
    last, when the run paced and nothing failed, what the next run continues with."""
    lines = [f"node/{name}: not found" for name in data.not_found]
    lines += [
        f"node/{n.node}: not pinned" + (f": {n.why}" if n.why else "") for n in data.not_pinned
    ]
    lines += patches
    lines += [f"event {e.reason} on {e.kind.lower()}/{e.node}: {e.message}" for e in data.events]
    lines += [*_pool_lines(data), *_decision_lines(data)]
    if (continues := data.continues) and data.mode is not Mode.RELEASE:
        n = continues.runs
        runs = f"about {n} run{'s' * (n != 1)}" if n else "none patched in this run"
        lines.append(f"continues next run: {continues.nodes_left} nodes left ({runs})")
    return lines


def _counts_text(data: Summary) -> str:
    """`44 nodes: 1 added, 0 removed, ...`: the categories always shown and those that happen."""
    found = data.counts.categories
    always = _ALWAYS_FOR.get(data.mode, _ALWAYS)
    verb = "would be " if data.dry_run else ""
    words = {c: f"{verb}{c}" for c in CHANGED} | {c: w[data.dry_run] for c, w in _WORDS.items()}
    parts = [f"{n} {words.get(c, c)}" for c in ORDER if (n := found[c]) or c in always]
    return f"{data.counts.nodes} nodes: " + ", ".join(parts)


def _pool_lines(data: Summary) -> list[str]:
    """One line on the NodePools, where a run used or changed them."""
    mechanism, pools = data.mechanism, data.node_pools
    used = mechanism.budgets and data.mode is Mode.RECONCILE
    if not used and not pools.done:
        return []
    named = f" (mechanism {mechanism})" if used else ""
    if not pools.listed:  # none, or no NodePool CRD at all (404)
        held = (
            "no node is held"
            if mechanism is Mechanism.BUDGET
            else "every node is held by annotations"
        )
        return [f"no NodePools{named}: {held}"]
    verb = "would be " if data.dry_run else ""
    done = [f"{n} {verb}{DONE.get(a, a)}" for a, n in pools.done.items()]
    return [
        f"{pools.listed} NodePools{named}, {pools.with_entry} with node-holder's budget "
        f"entry before this run; entries: {', '.join(done) or 'unchanged'}"
    ]


def _released(data: Summary) -> str:
    """release: what it removed, and, while nodes are still held or something failed, that it
    is not done."""
    if not data.still_held and not data.failure:
        return "released (node-holder release: every hold this tool owns is removed)"
    again = "" if data.failure else " (it continues where it stopped)"
    return f"{data.counts.released} removed, {data.still_held} still held: run release again{again}"


def _window_words(window: Window | None) -> str:
    """`held: youngest node x is 3m old, hold until T (17m left)` and its released forms; a
    hold that ended while nodes still carry it says how many, and that the next run goes on."""
    if window is None or window.youngest_created is None:
        return "released: no node that can start a hold"
    node, age, until = window.youngest_node, window.youngest_age, window.hold_until
    if window.held:
        capped = f", capped by {window.capped_by} at {until}" if window.capped else ""
        left = window.hold_left
        return f"held: youngest node {node} is {age} old, hold until {until} ({left} left{capped})"
    free = f"; no new hold before {window.free_until}" if window.free_until else ""
    done = "released"
    if window.still_held:
        done = "ending"
        free += f"; {window.still_held} node(s) still held: the next run removes the hold from them"
    # The cap ended this hold unless its youngest node came after (times as format_time writes
    # them, to the second in UTC, sort as strings).
    if window.capped and until and until > window.youngest_created:
        ended = f"{done}: {window.capped_by} ended the hold at {until}{free}"
        return f"{ended}; youngest node {node} is {age} old"
    return f"{done}: youngest node {node} is {age} old, hold ended at {until}{free}"


def _decision_lines(data: Summary) -> list[str]:
    """The counts, after one line for the cluster scope, one per held/changed group otherwise."""
    mode, scope, counts = data.mode, data.scope, _counts_text(data)
    if mode in _ALWAYS_FOR:
        return [f"{mode} {', '.join(data.annotations)}; {counts}"]
    kept = [_kept_line(claims)] if (claims := data.counts.kept_claims) else []
    windows = data.windows
    if mode is Mode.RELEASE:
        return [*kept, f"{_released(data)}; {counts}"]
    if scope is Scope.CLUSTER:
        return [*kept, f"{_window_words(windows[0] if windows else None)}; {counts}"]
    groups = [w for w in windows if scope is Scope.GROUP and (w.held or w.node_patches)]
    lines = [f"group {w.name}: {_window_words(w)}" for w in groups[:LISTED]]
    if len(groups) > LISTED:
        lines.append(f"... and {len(groups) - LISTED} more groups held or changed")
    held = sum(1 for w in windows if w.held)
    unit = "groups" if scope is Scope.GROUP else "nodes"
    still = f", {data.still_held} still held until the next run" if data.still_held else ""
    lines.append(f"{held} of {data.window_count} {unit} held ({scope} scope{still}); {counts}")
    return [*kept, *lines]


def _kept_line(kept: dict[str, int]) -> str:
    """Holds node-holder set under keys this run may not remove: said, never dropped."""
    shown = _names([f"{key} on {n} node(s)" for key, n in kept.items()], " key(s)")
    return (
        f"kept: {shown}, set by node-holder, not removed by this run "
        "(not a configured or well-known hold key); name it with --annotation to remove it"
    )


# --- status --------------------------------------------------------------------


def _window_state(window: Window) -> str:
    if window.held:
        return "held (max-hold)" if window.capped else "held"
    return f"free until {window.free_until}" if window.free_until else "released"


def _status_lines(result: RunResult, data: Summary, as_json: bool, nodes: bool) -> list[str]:
    """`status`: the summary, bounded like the last JSON line of a run; `nodes`: first a JSON
    line per node and per NodePool patch, or (text) every window and a table of the nodes."""
    plan = result.plan
    if not as_json:
        ignored = [f"node/{p.node}: ignored {why}" for p in plan.patches for why in p.ignored]
        return status_text(data, ignored, plan if nodes else None)
    lines = [_line(node_json(d, plan.now)) for d in plan.decisions] if nodes else []
    lines += [_line(patch_json(p)) for p in result.pools.patches] if nodes else []
    return [*lines, _line(summary_json(data))]


def _states_line(data: Summary) -> str:
    """`nodes by state: 3 held by us, 0 held by others, 0 pinned, 0 exempt, 1 free`."""
    states = data.node_states or {}
    return "nodes by state: " + ", ".join(f"{states.get(w, 0)} {w}" for w in STATE_ORDER)


def _node_row(decision: NodeDecision, plan: Plan) -> tuple[str, ...]:
    """`status --nodes`: a node's row, as its JSON line says it (summary.node_json)."""
    deleting = " (deleting)" if decision.deleting else ""
    return (
        decision.node,
        format_duration(plan.now - decision.created),
        decision.window,
        state(decision) + deleting,
        decision.patch.action if decision.patch else "-",
    )


def status_text(data: Summary, ignored: list[str], plan: Plan | None = None) -> list[str]:
    """The summary, the nodes by state, a table of the hold windows (node scope: the held
    nodes), the held first, and the `ignored` stamps' lines, at most LISTED of each; `plan`
    (--nodes): every window and stamp, and a table of its nodes."""
    whole, budgets = plan is not None, data.mechanism.budgets
    shown, more = listed(sorted(data.windows, key=lambda w: not w.held), whole)
    windows = [
        (
            w.name,
            _window_state(w),
            w.youngest_node or "-",
            w.youngest_age or "-",
            w.hold_until or "-",
            f"{w.hold_duration} ({w.hold_duration_from})",
            f"{w.max_hold or 'none'} ({w.max_hold_from})",
            str(w.nodes),
            *([f"{w.node_pools_with_entry} of {w.node_pools}"] if budgets else []),
        )
        for w in shown
    ]
    head = ("WINDOW", "STATE", "YOUNGEST NODE", "AGE", "HOLD UNTIL", "HOLD", "MAX HOLD", "NODES")
    lines = [
        *_pool_lines(data),
        *_decision_lines(data),
        _states_line(data),
        "",
        *table((*head, *["NODEPOOLS WITH ENTRY"] * budgets), windows),
    ]
    if more:
        lines.append(f"... and {more} more windows (--nodes lists every window and node)")
    if plan is not None:
        rows = [_node_row(d, plan) for d in plan.decisions]
        lines += ["", *table(("NODE", "AGE", "WINDOW", "STATE", "NEXT RUN"), rows)]
    stamps, more = listed(ignored, whole)
    lines += stamps
    if more:
        lines.append(f"... and {more} more stamps ignored (--nodes names every one)")
    return lines


# --- what stderr says --------------------------------------------------------------


def unread_keys(hold: HoldSettings, run: RunSettings) -> list[str]:
    """Hold keys neither Karpenter nor cluster-autoscaler reads: set anyway, and said."""
    if run.mode is Mode.RELEASE:
        return []  # it removes them
    return [
        f"--annotation (HOLD_ANNOTATION): {key!r} is not read by Karpenter or cluster-autoscaler "
        f"(they read {', '.join(KNOWN_HOLD_KEYS)}); it is set anyway"
        for key in hold.annotations
        if key not in KNOWN_HOLD_KEYS
    ]


def unheeded(plan: Plan) -> list[str]:
    """Hold settings that select nothing in this cluster, as given: said, not swallowed."""
    hold, nodes = plan.hold, len(plan.decisions)
    if plan.mode is Mode.RELEASE or not nodes:
        return []
    found = []
    if hold.node_selector and not any(d.selected for d in plan.decisions):
        found.append(
            f"--node-selector (HOLD_NODE_SELECTOR) {hold.node_selector.text!r} matches none of "
            f"the {nodes} nodes: no node is held"
        )
    if hold.trigger_selector and not any(w.triggers for w in plan.windows):
        found.append(
            f"--trigger-selector (HOLD_TRIGGER_SELECTOR) {hold.trigger_selector.text!r} "
            f"matches none of the {nodes} nodes: no node starts a hold"
        )
    if hold.scope is Scope.GROUP and all(w.name.startswith("!") for w in plan.windows):
        found.append(
            f"--group-label (HOLD_GROUP_LABEL) {hold.group_label!r} is on none of the {nodes} "
            "nodes: they all form one group"
        )
    return found


def bad_values(plan: Plan) -> list[str]:
    """Hold settings on NodePools or nodes that are not settings, once a run: a line per value
    (at most LISTED), naming where it is; those nodes hold with the configured setting."""
    sources: dict[str, list[str]] = defaultdict(list)
    for source, why in plan.bad_values:
        sources[why].append(source)
    return [
        f"{_names(names)}: {why}; those nodes use the configured setting; fix the value in the "
        'NodePool\'s metadata.annotations (a duration such as 45m, "0": never holds)'
        for why, names in list(sources.items())[:LISTED]
    ]


def settings_on_nodes(plan: Plan) -> str | None:
    """Nodes that carry a NodePool's hold settings themselves (copied from its template, say):
    not read there. Names the NodePools that should carry them, and those not listed."""
    if not plan.settings_on_nodes:
        return None
    listed = plan.observed.nodepool_settings
    pools = [p for p in plan.settings_on_nodes if p]
    missing = [f"nodepool/{p}" for p in pools if listed is not None and p not in listed]
    there = [f"nodepool/{p}" for p in pools if f"nodepool/{p}" not in missing]
    parts = [f"set them on {_names(there)}"] if there else []
    if missing:
        parts.append(f"{_names(missing)} (the nodes' {DEFAULT_GROUP_LABEL}): missing, not listed")
    if "" in plan.settings_on_nodes:
        parts.append(f"nodes without a {DEFAULT_GROUP_LABEL} label take the options")
    return (
        f"{NODE_HOLD} and {NODE_MAX_HOLD} on nodes are not read, only in a NodePool's own "
        f"metadata.annotations: {'; '.join(parts)} (docs/design.md#hold-settings-per-nodepool)"
    )


def _by_annotation_line(fallen: tuple[tuple[str, str], ...]) -> str:
    """`by_annotation`'s NodePools in one line, those with the same why together."""
    names: dict[str, list[str]] = defaultdict(list)
    for name, why in fallen:
        names[why].append(name)
    held = [f"nodepool/{_names(pools)}: no budget entry ({why})" for why, pools in names.items()]
    more = f"; and {len(held) - 5} more reasons" if len(held) > 5 else ""
    return f"{'; '.join(held[:5])}{more}: held by annotation until the hold ends"


def warnings(result: RunResult, command: str) -> list[str]:
    """What stderr says about this run besides errors: settings that select nothing, bad
    NodePool settings on nodes, NodePools not read or whose entry someone else removed (once a
    run), and a dry run's holds left in place (a dry run removes nothing:
    they stay until a real run or a release)."""
    found = [*unheeded(result.plan), *bad_values(result.plan)]
    if on_nodes := settings_on_nodes(result.plan):
        found.append(on_nodes)
    if result.pools.unread:
        found.append(
            f"NodePools not read ({result.pools.unread}): hold settings from the options only"
        )
    if result.pools.unreadable:
        found.append(
            f"NodePools not read ({result.pools.unreadable}): budget entries node-holder added "
            "with --mechanism budget or auto, if any, stay"
        )
    if reverted := [p.name for p in result.pools.views if p.reverted]:
        auto = result.plan.hold.mechanism is Mechanism.AUTO
        then = "its nodes get hold annotations until the hold ends" if auto else "added again"
        found.append(
            f"nodepool/{_names(reverted)}: node-holder's budget entry was removed or changed by "
            f"someone else (a GitOps tool restoring the NodePool?); {then}; tell the GitOps "
            "tool to leave it alone (docs/design.md#gitops)"
        )
    if fallen := by_annotation(result):
        found.append(_by_annotation_line(fallen))
    if command != "reconcile" or not result.dry_run:
        return found
    owned = sum(1 for d in result.plan.decisions if any(s is KeyState.OURS for _, s in d.keys))
    if owned:
        found.append(
            f"dry run: {owned} nodes carry hold annotations of node-holder, which a dry run "
            "never removes; release them with `node-holder release`, or run without --dry-run "
            "(NODE_HOLDER_DRY_RUN)"
        )
    return found
