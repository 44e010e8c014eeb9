"""Text and JSON renderings of a run and the words of its Events (the rule says what changed,
as a `Transition`; this module says it).

A run's summary is built once, as data (`summary`): its JSON line is that data with each list
bounded (`render_json`), and its text lines are worded from the same data, so the two cannot
say different things. A new figure is one field in `summary` and one phrase in the text. No
line grows with the cluster: per-node detail is a line per node (docs/reference.md#output).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from datetime import datetime
from functools import lru_cache
from typing import Any

from reconcile.cluster.apply import NodeResult, Outcome
from reconcile.cluster.nodepools import PoolResult
from reconcile.rule.budget import ENTRY_KEY, PoolPatch, pool_window, window_of
from reconcile.rule.decide import (
    MAX_EVENTS,
    HoldWindow,
    KeyState,
    NodeDecision,
    NodePatch,
    Plan,
    Reason,
    Transition,
)
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
    format_time,
)
from reconcile.rule.text import table
from reconcile.run import RunResult


def _time(moment: datetime | None) -> str | None:
    return format_time(moment) if moment else None


def _names(names: list[str], unit: str = "") -> str:
    more = f" and {len(names) - 5} more{unit}" if len(names) > 5 else ""
    return ", ".join(names[:5]) + more


# --- one patch, a node's or a NodePool's ---------------------------------------------

#: What a patch did (a dry run: would do), by its action: a node's, a NodePool's
#: (`extend`, `drop`), and a node's category in the counts.
_DONE = {
    "pin": "pinned",
    "unpin": "unpinned",
    "add": "added",
    "extend": "extended",
    "remove": "removed",
    "drop": "dropped",
    "disown": "disowned",
    "tidy": "tidied",
}
#: A NodePool's patch actions, in the order the counts name them.
_POOL_ACTIONS = ("add", "extend", "remove", "drop")


def _verb(action: str, past: bool) -> str:
    return _DONE[action] if past else action


def _what(patch: NodePatch | PoolPatch, past: bool) -> str:
    """What a patch changes, e.g. `add a, remove b` / `added a, removed b`, `add budget entry
    40 9 22 11 * for 20m`."""
    if isinstance(patch, PoolPatch):
        if patch.action == "drop":
            stray = len(patch.pool.ours)  # copies of its entry a conversion stripped of reasons
            also = (
                f"{_verb('remove', past)} {stray} stripped copy(ies) of its entry, "
                if stray
                else ""
            )
            return f"{also}{_verb('drop', past)} {ENTRY_KEY} (its entry is no longer in the list)"
        entry = patch.entry or patch.pool.entry or {}
        verb = _verb(patch.action, past)
        return f"{verb} budget entry {entry.get('schedule')} for {entry.get('duration')}"
    keys = (
        ("pin", patch.pinned),
        ("unpin", patch.unpinned),
        ("add", patch.added),
        ("remove", patch.removed),
    )
    parts = [f"{_verb(action, past)} {', '.join(k)}" for action, k in keys if k]
    if not parts and patch.action == "disown":
        disowned = ", ".join(patch.disowned)
        parts = [
            f"{_verb('drop', past)} ownership of {disowned} (changed or removed by someone else)"
        ]
    elif not parts:
        parts = [f"{_verb('tidy', past)} {', '.join(k for k, _ in patch.changes)}"]
    return ", ".join(parts)


def patch_json(
    patch: NodePatch | PoolPatch, result: NodeResult | PoolResult | None = None
) -> dict[str, Any]:
    """One patch's JSON line, a node's or a NodePool's: the patch a dry run would send, or
    (`result`) how it landed."""
    if isinstance(patch, PoolPatch):
        where, ignored = {"nodePool": patch.pool.name}, []
    else:
        where, ignored = {"node": patch.node}, list(patch.ignored)
    facts = {
        "result": result and str(result.outcome),
        "conflicts": isinstance(result, NodeResult) and result.conflicts,
        "error": result and result.error,
        "ignored": ignored,
    }
    entry = where | {"action": patch.action, "body": patch.body()}
    return entry | {key: value for key, value in facts.items() if value}


def patch_line(patch: NodePatch | PoolPatch, result: NodeResult | PoolResult | None = None) -> str:
    """The text of `patch_json`'s line: `node/x: would add karpenter.sh/do-not-disrupt {...}`
    (planned), `nodepool/x: added budget entry ...` or why not (landed)."""
    entry = patch_json(patch, result)
    where = f"node/{entry['node']}" if "node" in entry else f"nodepool/{entry['nodePool']}"
    ignored = "".join(f"; ignored {why}" for why in entry.get("ignored", []))
    what = _what(patch, past=False) + ignored
    if result is None:
        return f"{where}: would {what} {json.dumps(entry['body'], separators=(',', ':'))}"
    match result.outcome:
        case Outcome.PATCHED:
            conflicts = f" (after {n} conflict(s))" if (n := entry.get("conflicts")) else ""
            return f"{where}: {_what(patch, past=True)}{ignored}{conflicts}"
        case Outcome.SETTLED:
            return f"{where}: changed by someone else meanwhile; nothing left to do"
        case Outcome.GONE:
            return f"{where}: deleted meanwhile; skipped"
        case Outcome.NOT_SENT:
            return f"{where}: not sent ({entry.get('error') or 'stopped'}): would {what}"
    return f"{where}: failed to {what}: {entry.get('error')}"


def landed(result: NodeResult | PoolResult, as_json: bool) -> str:
    """The line for one node's or NodePool's patch, printed the moment its result is known."""
    return (
        json.dumps(patch_json(result.patch, result))
        if as_json
        else patch_line(result.patch, result)
    )


# --- hold windows and their Events -----------------------------------------------------


def _window_json(window: HoldWindow, result: RunResult, patches: int) -> dict[str, Any]:
    """One window in the summary (`patches`: the node patches this run plans in it): what
    `status` tabulates and the lines say of it."""
    now, created, until = result.plan.now, window.youngest_created, window.hold_until
    return {
        "name": window.name,
        "held": window.held,
        "youngestNode": window.youngest,
        "youngestCreated": _time(created),
        "youngestAge": format_duration(now - created) if created else None,
        "holdUntil": _time(until),
        "holdLeft": format_duration(until - now) if window.held and until else None,
        "stretchStart": _time(window.stretch_start),
        "capped": window.capped,
        "freeUntil": _time(window.free_until),  # after --max-hold ended a hold: none before this
        "holdDuration": format_duration(window.duration),
        "maxHold": format_duration(window.max_hold) if window.max_hold else None,
        "holdDurationFrom": window.sources[0] or "--hold-duration",
        "maxHoldFrom": window.sources[1] or "--max-hold",
        "cappedBy": _capped_by(window) if window.capped else None,
        "triggerNodes": window.triggers,
        "nodes": window.nodes,
        "nodePatches": patches,
        **_window_pools(window, result),
    }


def _capped_by(window: HoldWindow) -> str:
    """The cap that applies and where it comes from: `--max-hold 2h` (the option), or
    `nodepool/batch max-hold 3h` / `node/x max-hold 3h` (a NodePool's or a node's own)."""
    cap = format_duration(window.max_hold) if window.max_hold else "none"
    source = window.sources[1]
    return f"{source} max-hold {cap}" if source else f"--max-hold {cap}"


def _window_pools(window: HoldWindow, result: RunResult) -> dict[str, int]:
    """How many of the window's NodePools carry node-holder's budget entry (before the run)."""
    if not result.plan.hold.mechanism.budgets:
        return {}
    pools = [p for p in result.pools.views if pool_window(p.name, result.plan.hold) == window.name]
    return {"nodePools": len(pools), "nodePoolsWithEntry": sum(1 for p in pools if p.entry)}


def _describe(window: dict[str, Any] | None, mode: Mode) -> str:
    """`held: youngest node x is 3m old, hold until T (17m left)` and its released forms."""
    if mode is Mode.RELEASE:
        return "released (node-holder release: every hold this tool owns is removed)"
    if window is None or window["youngestCreated"] is None:
        return "released: no node that can start a hold"
    node, age, until = window["youngestNode"], window["youngestAge"], window["holdUntil"]
    if window["held"]:
        capped = f", capped by {window['cappedBy']} at {until}" if window["capped"] else ""
        left = window["holdLeft"]
        return f"held: youngest node {node} is {age} old, hold until {until} ({left} left{capped})"
    free = f"; no new hold before {window['freeUntil']}" if window["freeUntil"] else ""
    # The cap ended this hold unless its youngest node came after (times as format_time writes
    # them, to the second in UTC, sort as strings).
    if window["capped"] and until and until > window["youngestCreated"]:
        ended = f"released: {window['cappedBy']} ended the hold at {until}{free}"
        return f"{ended}; youngest node {node} is {age} old"
    return f"released: youngest node {node} is {age} old, hold ended at {until}{free}"


def event_message(transition: Transition, plan: Plan) -> str:
    """An Event's words, as recorded on the node and printed in the run's report."""
    window, nodes = transition.window, transition.nodes
    if window is None:
        return (
            f"Hold {transition.reason[4:].lower()} for {transition.more} more windows, "
            f"{nodes} node(s) in all (one run records at most {MAX_EVENTS} Events)"
        )
    until = _time(window.hold_until) or "-"
    verb = "removed from" if transition.reason is Reason.ENDED else "added to"
    what = f"hold annotation {verb} {nodes} node(s)"
    if transition.kind == "NodePool":
        what = f"budget entry {verb} NodePool {transition.node}"
    if transition.reason is not Reason.ENDED:
        return (
            f"Hold {transition.reason[4:].lower()} for {window.name} until {until}: youngest "
            f"node {window.youngest} created {_time(window.youngest_created) or '-'}; {what}"
        )
    if plan.mode is Mode.RELEASE:
        why = "released by node-holder release"
    elif window.capped:
        why = f"max-hold reached at {until}"
    elif window.youngest:
        why = f"the trigger nodes' holds ended at {until}"
    else:
        why = "no node triggers a hold any more"
    return f"Hold ended for {window.name}: {why}; {what}"


def _shown(plan: Plan) -> list[HoldWindow]:
    """The windows a report shows: every one, but in node scope only the held nodes."""
    return [w for w in plan.windows if plan.hold.scope is not Scope.NODE or w.held]


# --- counting ----------------------------------------------------------------------

#: Always printed, even at 0; the others only when they happen.
_ALWAYS = ("added", "removed", "unchanged", "held by others", "exempt", "deleting")
_ALWAYS_FOR = {Mode.PIN: ("pinned", "unchanged"), Mode.UNPIN: ("unpinned", "unchanged")}
#: The categories, in the order they are printed: what changed, what failed, what was left for
#: the next run, what did not; "switched": a key added and another removed in the same patch.
_CHANGED = ("added", "removed", "switched", "disowned", "tidied", "pinned", "unpinned")
_UNCHANGED = ("unchanged", "not selected", "held by others", "exempt", "deleting", "gone")
_ORDER = (*_CHANGED, "failed", "left", *_UNCHANGED)
#: How `status` names a node's state, from the states of its hold keys: the first found.
_STATE_WORDS = (
    (KeyState.PINNED, "pinned"),
    (KeyState.OURS, "held by us"),
    (KeyState.FOREIGN, "held by others"),
    (KeyState.EXEMPT, "exempt"),
)
#: `status`'s count of nodes by state, in this order.
_STATE_ORDER = ("held by us", "held by others", "pinned", "exempt", "free")
#: A node no patch changes is counted by its state: these states, else "unchanged".
_STATES = ("held by others", "exempt", "pinned")
#: Windows, errors and Events the final JSON line lists at most (each list in LISTED_BYTES of
#: JSON); it counts the others.
LISTED, LISTED_BYTES = 20, 4096


def state(decision: NodeDecision) -> str:
    """`pinned`, `held by us`, `held by others`, `exempt` or `free`."""
    return _state_of(decision.keys)


@lru_cache(maxsize=256)  # most nodes' keys are alike (every key free): asked of every node
def _state_of(keys: tuple[tuple[str, KeyState], ...]) -> str:
    states = {s for _, s in keys}
    return next((word for key, word in _STATE_WORDS if key in states), "free")


def _landed_category(patch: NodePatch) -> str:
    return "switched" if patch.added and patch.removed else _DONE[patch.action]


#: Patches that did not land, by outcome; any other outcome is a failure.
_NOT_LANDED = {Outcome.GONE: "gone", Outcome.SETTLED: "unchanged", Outcome.LEFT: "left"}


def _category(
    decision: NodeDecision, outcome: NodeResult | None, dry_run: bool, states: tuple[str, ...]
) -> tuple[str, NodePatch | None]:
    """The one category a node falls in after this run (in a dry run: would), and the
    patch that landed (would land), whose keys the counts name."""
    patch = decision.patch
    if decision.deleting:
        return "deleting", None
    if patch is None and not decision.selected:
        return "not selected", None  # outside --node-selector: never "unchanged"
    if patch is None:
        found = state(decision)
        return (found if found in states else "unchanged"), None
    if dry_run or outcome is None:
        return _landed_category(patch), patch  # planned: the dry run's "would be"
    if outcome.outcome is Outcome.PATCHED:
        return _landed_category(outcome.patch), outcome.patch
    return _NOT_LANDED.get(outcome.outcome, "failed"), None


def _counts(result: RunResult) -> dict[str, Any]:
    """Each node in exactly one category (the summary's fields, camelCase); writes counted only
    where they landed."""
    outcomes = {r.node: r for r in result.applied.results} if result.applied else {}
    counts: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    added: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    pinning = result.plan.mode in _ALWAYS_FOR
    states = () if pinning else _STATES  # pin, unpin: a node already as asked is unchanged
    for decision in result.plan.decisions:
        category, landed = _category(decision, outcomes.get(decision.node), result.dry_run, states)
        counts[category] += 1
        if landed is not None:
            added.update(landed.added)
            removed.update(landed.removed)
        elif category == "failed" and decision.patch is not None:
            failed[decision.patch.action] += 1
    return {
        "nodes": len(result.plan.decisions),
        **{_camel(c): counts[c] for c in _ORDER},
        "failedByAction": dict(failed),
        "keysAdded": dict(added),
        "keysRemoved": dict(removed),
    }


def _camel(category: str) -> str:
    first, *rest = category.split()
    return first + "".join(w.capitalize() for w in rest)


def _pool_counts(result: RunResult) -> dict[str, int]:
    """NodePools by what happened to their entry (a dry run: would happen), and the failed."""
    done = [r.patch for r in result.pools.results if r.outcome is Outcome.PATCHED]
    counts = Counter(p.action for p in (result.pools.patches if result.dry_run else done))
    counts["failed"] = len(result.pools.failed)
    return {a: counts[a] for a in (*_POOL_ACTIONS, "failed") if counts[a]}


# --- the summary: one run as data ----------------------------------------------------------


def summary(result: RunResult, command: str) -> dict[str, Any]:
    """The run's summary, every list whole: `render_json` bounds it into the last JSON line,
    `text_lines` words it. `status` adds the nodes' count by state."""
    plan = result.plan
    patched = Counter(p.window for p in plan.patches)
    events = [
        {"reason": t.reason, "node": t.node, "kind": t.kind, "message": event_message(t, plan)}
        for t in result.events
    ]
    data = {
        "command": command,
        "dryRun": result.dry_run,
        "now": _time(plan.now),
        "clock": result.listing.clock,
        "scope": str(plan.hold.scope),
        "holdDuration": format_duration(plan.hold.hold_duration),
        "annotations": list(plan.hold.annotations),
        "mechanism": str(plan.hold.mechanism),
        "largeEdge": large_edge(plan) is not None,
        **_headline(plan),
        "windowCount": len(plan.windows),
        "windows": [_window_json(w, result, patched[w.name]) for w in _shown(plan)],
        "errors": [*result.errors, *result.event_errors],
        "events": events,
        "badValues": [_bad_value(source, why) for source, why in plan.bad_values],
        "revertedNodePools": [p.name for p in result.pools.views if p.reverted],
        "nodePoolsByAnnotation": [
            {"nodePool": name, "why": why} for name, why in by_annotation(result).items()
        ],
        "continues": _continues(result),
        "notFound": list(result.missing),
        "notPinned": _not_pinned(plan),
        "nodePools": {
            "listed": len(result.pools.views),
            "withEntry": sum(1 for p in result.pools.views if p.entry),
            **_pool_counts(result),
        },
        "summary": {
            **_counts(result),
            "ignoredStamps": sum(1 for p in plan.patches if p.ignored),
            "keptClaims": plan.kept_claims,
            "writes": result.applied.writes if result.applied else 0,
            "requests": result.requests,
            "listPages": result.listing.pages,
        },
    }
    if command == "status":
        found = Counter(state(d) for d in plan.decisions)
        data["nodeStates"] = {_camel(word): found[word] for word in _STATE_ORDER}
    return data


def _continues(result: RunResult) -> dict[str, Any] | None:
    """The nodes left for the next run, and about how many runs like this one they take (by
    the nodes this run patched; None if it patched none)."""
    applied = result.applied
    if applied is None or not applied.left:
        return None
    runs = math.ceil(applied.left / applied.writes) if applied.writes else None
    return {"nodesLeft": applied.left, "runs": runs}


def _not_pinned(plan: Plan) -> list[dict[str, Any]]:
    """Nodes `pin` left as they were (and why), and those `unpin` found with no pinned key;
    other commands decide on every node, and pass over none of them here."""
    if plan.mode not in (Mode.PIN, Mode.UNPIN):
        return []
    found = [{"node": n, "why": why} for n, why in plan.refused]
    return found + [
        {"node": d.node, "why": None}
        for d in plan.decisions
        if plan.mode is Mode.UNPIN and not any(s is KeyState.PINNED for _, s in d.keys)
    ]


def _headline(plan: Plan) -> dict[str, Any]:
    held_windows = [w for w in plan.windows if w.held] if plan.mode is Mode.RECONCILE else []
    with_trigger = [w for w in plan.windows if w.youngest_created is not None]
    youngest = max(with_trigger, key=lambda w: w.youngest_created, default=None)  # type: ignore[arg-type, return-value]
    until = max((w.hold_until for w in held_windows if w.hold_until), default=None)
    return {
        "held": bool(held_windows),
        "holdUntil": _time(until),
        "youngestNode": youngest.youngest if youngest else None,
        "youngestCreated": _time(youngest.youngest_created) if youngest else None,
    }


#: The summary's lists the last JSON line bounds (LISTED items, LISTED_BYTES), with a count of
#: the others (`windowsNotListed`, ...); of the kept claims, the first _KEPT_LISTED keys.
_LISTS = (
    "windows",
    "errors",
    "events",
    "badValues",
    "revertedNodePools",
    "nodePoolsByAnnotation",
    "notFound",
    "notPinned",
)
_KEPT_LISTED = 5


def render_json(data: dict[str, Any]) -> dict[str, Any]:
    """The last JSON line: the summary with the held windows first and each list bounded."""
    kept = list(data["summary"]["keptClaims"].items())[:_KEPT_LISTED]
    data = data | {
        "windows": sorted(data["windows"], key=lambda w: not w["held"]),
        "summary": data["summary"] | {"keptClaims": dict(kept)},
    }
    bounded: dict[str, Any] = {}
    for key, value in data.items():
        bounded |= _listed(key, value) if key in _LISTS else {key: value}
    return bounded


def _listed(key: str, items: list[Any], whole: bool = False) -> dict[str, Any]:
    """The first items, at most LISTED in LISTED_BYTES of JSON (`whole`: all of them), and
    how many are not listed (`{key}NotListed`)."""
    shown: list[Any] = []
    size = 0
    for item in items:
        size += len(json.dumps(item))
        if not whole and (len(shown) == LISTED or size > LISTED_BYTES):
            break
        shown.append(item)
    return {key: shown, f"{key}NotListed": len(items) - len(shown)}


def node_json(decision: NodeDecision, now: datetime) -> dict[str, Any]:
    """`status --nodes`: one node's JSON line, with the patch the next run would send."""
    patch = decision.patch
    row = {
        "node": decision.node,
        "age": format_duration(now - decision.created),
        "window": decision.window,
        "state": state(decision) + (" (deleting)" if decision.deleting else ""),
        "annotations": {k: str(s) for k, s in decision.keys},
        "next": patch.action if patch else "-",
    }
    if patch is not None:
        row |= {"patch": patch.body()} | ({"ignored": list(patch.ignored)} if patch.ignored else {})
    return row


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


def _bad_value(source: str, why: str) -> dict[str, str]:
    """`{"nodepool": "batch", ...}` or `{"node": "x", ...}`: where a bad value was read."""
    kind, _, name = source.partition("/")
    return {kind: name, "value": why}


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


#: More node patches than this in one hold start or end is a burden on the control plane:
#: each one goes to every client that watches all Nodes (docs/performance.md).
LARGE_EDGE = 20_000


def large_edge(plan: Plan) -> str | None:
    """A hold start or end too large for the control plane's watchers (final JSON: largeEdge)."""
    if (patches := len(plan.patches)) <= LARGE_EDGE:
        return None
    return (
        f"this hold start or end patches {patches} nodes (more than {LARGE_EDGE:,}), each patch "
        "sent to every client that watches all Nodes: hold each NodePool on its own "
        "(--hold-scope group), or use the NodePool-budget mechanism (--mechanism budget: one "
        "write per NodePool)"
    )


def warnings(result: RunResult, command: str) -> list[str]:
    """What stderr says about this run besides errors: settings that select nothing, bad
    NodePool settings on nodes, NodePools not read or whose entry someone else removed (once a
    run), a hold edge too large, and a dry run's holds left in place (a dry run removes nothing:
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
    if edge := large_edge(result.plan):
        found.append(edge)
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


def by_annotation(result: RunResult) -> dict[str, str]:
    """auto: each held NodePool whose nodes this run holds by annotation instead of a budget
    entry, and why, in every run until the hold ends: the cluster says so (a fallback leaves
    no entry, and its nodes carry node-holder's hold annotations, see budget.budgeted)."""
    plan = result.plan
    if plan.hold.mechanism is not Mechanism.AUTO or plan.mode is not Mode.RECONCILE:
        return {}
    fallen = {r.patch.pool.name: r.error or "" for r in result.pools.fallbacks}
    found = {}
    for pool in result.pools.views:
        if pool.name in plan.observed.budgeted or not window_of(pool.name, plan).held:
            continue
        found[pool.name] = fallen.get(pool.name) or (
            "someone else removed it"
            if pool.reverted
            else "its nodes carry node-holder's hold annotations since an earlier run: a budget "
            "entry that could not be made, or a switch from annotations"
        )
    return found


def _by_annotation_line(fallen: dict[str, str]) -> str:
    """`by_annotation`'s NodePools in one line, those with the same why together."""
    names: dict[str, list[str]] = defaultdict(list)
    for name, why in fallen.items():
        names[why].append(name)
    held = [f"nodepool/{_names(pools)}: no budget entry ({why})" for why, pools in names.items()]
    more = f"; and {len(held) - 5} more reasons" if len(held) > 5 else ""
    return f"{'; '.join(held[:5])}{more}: held by annotation until the hold ends"


def failure(result: RunResult, next_run: bool = True) -> str | None:
    """The one error line of a run that failed, or None. Nodes left for the next run are no
    failure, unless none was done (patches were due and none landed) or no `next_run` follows
    (the uninstall hook's release)."""
    applied = result.applied
    failed = list(applied.failed) if applied is not None else []
    if applied is not None and failed and applied.fatal:
        return str(applied.fatal)
    parts = []
    if pools := result.pools.failed:  # one line names the first reason (a 403 names the grant)
        names = _names([r.patch.pool.name for r in pools])
        parts.append(f"{len(pools)} NodePool(s) not patched: {names} ({pools[0].error})")
    if result.missing:  # pin, unpin: the others were still patched
        parts.append(f"{len(result.missing)} node(s) not found: {_names(list(result.missing))}")
    if refused := result.plan.refused:  # pin: a person's value is not overwritten
        names = _names([name for name, _ in refused])
        parts.append(f"{len(refused)} node(s) not pinned: {names} ({refused[0][1]})")
    if applied is not None and failed:
        why = (
            " (stopped by a signal)"
            if applied.interrupted
            else " (run timeout reached)"
            if applied.timed_out
            else ""
        )
        names = _names([r.node for r in failed])
        parts.append(f"{len(failed)} node(s) not patched{why}: {names}; the next run retries them")
    elif applied is not None and applied.left and (applied.stalled or not next_run):
        then = "none patched in time" if applied.stalled else "no next run follows this one"
        parts.append(
            f"{applied.left} node(s) left at the run timeout and {then}: give the run more "
            "time (--timeout) or a higher rate (--qps), or run it again"
        )
    return "; ".join(parts) or None


# --- the text, worded from the summary -------------------------------------------------------


def _mode(data: dict[str, Any]) -> Mode:
    """The summary's command as a Mode: `status` is a reconcile that writes nothing."""
    return Mode.RECONCILE if data["command"] == "status" else Mode(data["command"])


def text_lines(data: dict[str, Any], patches: list[str]) -> list[str]:
    """The run's text: nodes not found, a dry run's `patches` lines, Events, NodePools, counts."""
    lines = [f"node/{name}: not found" for name in data["notFound"]]
    lines += [
        f"node/{n['node']}: not pinned" + (f": {n['why']}" if n["why"] else "")
        for n in data["notPinned"]
    ]
    lines += patches
    lines += [
        f"event {e['reason']} on {e['kind'].lower()}/{e['node']}: {e['message']}"
        for e in data["events"]
    ]
    lines += [*_pool_lines(data), *_decision_lines(data)]
    if continues := data["continues"]:
        n = continues["runs"]
        runs = f"about {n} run{'s' * (n != 1)}" if n else "none patched in this run"
        lines.append(f"continues next run: {continues['nodesLeft']} nodes left ({runs})")
    return lines


def _counts_text(data: dict[str, Any]) -> str:
    """`44 nodes: 1 added, 0 removed, ...`: the categories always shown and those that happen."""
    counts = data["summary"]
    always = _ALWAYS_FOR.get(_mode(data), _ALWAYS)
    verb = "would be " if data["dryRun"] else ""
    why = ", ".join(f"{n} to {a}" for a, n in sorted(counts["failedByAction"].items()))
    parts = [
        f"{n} {verb if c in _CHANGED else ''}{c}" + (f" ({why})" if c == "failed" else "")
        for c in _ORDER
        if (n := counts[_camel(c)]) or c in always
    ]
    text = f"{counts['nodes']} nodes: " + ", ".join(parts)
    keys = [f"+{k} on {n}" for k, n in counts["keysAdded"].items()]
    keys += [f"-{k} on {n}" for k, n in counts["keysRemoved"].items()]
    return text + (f" (keys: {', '.join(keys)})" if len(keys) > 1 else "")


def _pool_lines(data: dict[str, Any]) -> list[str]:
    """One line on the NodePools, where a run used or changed them."""
    mechanism, pools = Mechanism(data["mechanism"]), data["nodePools"]
    used = mechanism.budgets and _mode(data) is Mode.RECONCILE
    counts = {a: n for a, n in pools.items() if a in (*_POOL_ACTIONS, "failed")}
    if not used and not counts:
        return []
    named = f" (mechanism {mechanism})" if used else ""
    if not pools["listed"]:  # none, or no NodePool CRD at all (404)
        held = (
            "no node is held"
            if mechanism is Mechanism.BUDGET
            else "every node is held by annotations"
        )
        return [f"no NodePools{named}: {held}"]
    verb = "would be " if data["dryRun"] else ""
    done = [f"{n} {verb}{_DONE.get(a, a)}" for a, n in counts.items()]
    return [
        f"{pools['listed']} NodePools{named}, {pools['withEntry']} with node-holder's budget "
        f"entry before this run; entries: {', '.join(done) or 'unchanged'}"
    ]


def _decision_lines(data: dict[str, Any]) -> list[str]:
    """The counts, after one line for the cluster scope, one per held/changed group otherwise."""
    mode, scope, counts = _mode(data), Scope(data["scope"]), _counts_text(data)
    if mode in _ALWAYS_FOR:
        return [f"{mode} {', '.join(data['annotations'])}; {counts}"]
    kept = [_kept_line(claims)] if (claims := data["summary"]["keptClaims"]) else []
    windows = data["windows"]
    if scope is Scope.CLUSTER or mode is Mode.RELEASE:
        return [*kept, f"{_describe(windows[0] if windows else None, mode)}; {counts}"]
    groups = [w for w in windows if scope is Scope.GROUP and (w["held"] or w["nodePatches"])]
    lines = [f"group {w['name']}: {_describe(w, mode)}" for w in groups[:LISTED]]
    if len(groups) > LISTED:
        lines.append(f"... and {len(groups) - LISTED} more groups held or changed")
    held = sum(1 for w in windows if w["held"])
    unit = "groups" if scope is Scope.GROUP else "nodes"
    lines.append(f"{held} of {data['windowCount']} {unit} held ({scope} scope); {counts}")
    return [*kept, *lines]


def _kept_line(kept: dict[str, int]) -> str:
    """Holds node-holder set under keys this run may not remove: said, never dropped."""
    shown = _names([f"{key} on {n} node(s)" for key, n in kept.items()], " key(s)")
    return (
        f"kept: {shown}, set by node-holder, not removed by this run "
        "(not a configured or well-known hold key); name it with --annotation to remove it"
    )


def final_lines(result: RunResult, command: str, as_json: bool, nodes: bool = False) -> list[str]:
    """Stdout once the run is done: a dry run's patch lines (a real run printed each as it
    landed), then the summary; status: with `nodes` (--nodes) a line per node first."""
    data = summary(result, command)
    if command == "status":
        return _status_lines(result, data, as_json, nodes)
    planned = [*result.pools.patches, *result.plan.patches] if result.dry_run else []
    if as_json:
        return [*(json.dumps(patch_json(p)) for p in planned), _line(render_json(data))]
    return text_lines(data, [patch_line(p) for p in planned])


def _line(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"))


# --- status --------------------------------------------------------------------


def _window_state(window: dict[str, Any], mode: Mode) -> str:
    if mode is not Mode.RECONCILE:
        return "released"
    if window["held"]:
        return "held (max-hold)" if window["capped"] else "held"
    return f"free until {window['freeUntil']}" if window["freeUntil"] else "released"


def _status_lines(result: RunResult, data: dict[str, Any], as_json: bool, nodes: bool) -> list[str]:
    """`status`: the summary, bounded like the last JSON line of a run; `nodes`: first a JSON
    line per node and per NodePool patch, or (text) every window and a table of the nodes."""
    plan = result.plan
    if not as_json:
        ignored = [f"node/{p.node}: ignored {why}" for p in plan.patches for why in p.ignored]
        rows = [node_json(d, plan.now) for d in plan.decisions] if nodes else None
        return status_text(data, ignored, rows)
    lines = [_line(node_json(d, plan.now)) for d in plan.decisions] if nodes else []
    lines += [_line(patch_json(p)) for p in result.pools.patches] if nodes else []
    return [*lines, _line(render_json(data))]


def _states_line(data: dict[str, Any]) -> str:
    """`nodes by state: 3 held by us, 0 held by others, 0 pinned, 0 exempt, 1 free`."""
    states = data["nodeStates"]
    return "nodes by state: " + ", ".join(f"{states[_camel(w)]} {w}" for w in _STATE_ORDER)


def status_text(
    data: dict[str, Any], ignored: list[str], nodes: list[dict[str, Any]] | None = None
) -> list[str]:
    """The summary, the nodes by state, a table of the hold windows (node scope: the held
    nodes), the held first, and the `ignored` stamps' lines, at most LISTED of each; `nodes`
    (--nodes): every window and stamp, and a table of the nodes."""
    mode, budgets = _mode(data), Mechanism(data["mechanism"]).budgets
    shown = _listed(
        "windows", sorted(data["windows"], key=lambda w: not w["held"]), nodes is not None
    )
    windows = [
        (
            w["name"],
            _window_state(w, mode),
            w["youngestNode"] or "-",
            w["youngestAge"] or "-",
            w["holdUntil"] or "-",
            f"{w['holdDuration']} ({w['holdDurationFrom']})",
            f"{w['maxHold'] or 'none'} ({w['maxHoldFrom']})",
            str(w["nodes"]),
            *(["{nodePoolsWithEntry} of {nodePools}".format(**w)] if budgets else []),
        )
        for w in shown["windows"]
    ]
    head = ("WINDOW", "STATE", "YOUNGEST NODE", "AGE", "HOLD UNTIL", "HOLD", "MAX HOLD", "NODES")
    lines = [
        *_pool_lines(data),
        *_decision_lines(data),
        _states_line(data),
        "",
        *table((*head, *["NODEPOOLS WITH ENTRY"] * budgets), windows),
    ]
    if more := shown["windowsNotListed"]:
        lines.append(f"... and {more} more windows (--nodes lists every window and node)")
    if nodes is not None:
        rows = [(r["node"], r["age"], r["window"], r["state"], r["next"]) for r in nodes]
        lines += ["", *table(("NODE", "AGE", "WINDOW", "STATE", "NEXT RUN"), rows)]
    shown = _listed("ignored", ignored, nodes is not None)
    lines += shown["ignored"]
    if more := shown["ignoredNotListed"]:
        lines.append(f"... and {more} more stamps ignored (--nodes names every one)")
    return lines
