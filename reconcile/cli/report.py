"""Text and JSON renderings of a run and the words of its Events (the rule says what changed,
as a `Transition`; this module says it). No line grows with the cluster but `status --output
json`: docs/reference.md#output.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconcile.cluster.apply import NodeResult, Outcome
from reconcile.cluster.nodepools import PoolResult
from reconcile.rule.budget import ENTRY_KEY, PoolPatch, pool_window
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
    KNOWN_HOLD_KEYS,
    HoldSettings,
    Mechanism,
    Mode,
    RunSettings,
    Scope,
    format_duration,
    format_time,
)
from reconcile.run import RunResult


def _time(moment: datetime | None) -> str | None:
    return format_time(moment) if moment else None


def _names(names: list[str], unit: str = "") -> str:
    more = f" and {len(names) - 5} more{unit}" if len(names) > 5 else ""
    return ", ".join(names[:5]) + more


# --- one node's patch --------------------------------------------------------------


def _what(patch: NodePatch, past: bool) -> str:
    """Every key a patch adds and removes, e.g. `add a, remove b` / `added a, removed b`,
    and the stamps it removes because this tool could not have written them."""
    verbs = (
        ("pinned", "unpinned", "added", "removed") if past else ("pin", "unpin", "add", "remove")
    )
    keys = (patch.pinned, patch.unpinned, patch.added, patch.removed)
    parts = [f"{verb} {', '.join(k)}" for verb, k in zip(verbs, keys, strict=True) if k]
    if not parts and patch.action == "disown":
        verb = "dropped" if past else "drop"
        parts = [
            f"{verb} ownership of {', '.join(patch.disowned)} (changed or removed by someone else)"
        ]
    elif not parts:
        parts = [f"{'tidied' if past else 'tidy'} {', '.join(k for k, _ in patch.changes)}"]
    return ", ".join(parts) + "".join(f"; ignored {why}" for why in patch.ignored)


def patch_line(done: NodePatch | NodeResult) -> str:
    """`node/x: would add karpenter.sh/do-not-disrupt {...}` (planned), or how it ended."""
    patch = done if isinstance(done, NodePatch) else done.patch
    where, what = f"node/{patch.node}", _what(patch, past=False)
    if isinstance(done, NodePatch):
        return f"{where}: would {what} {json.dumps(patch.body(), separators=(',', ':'))}"
    extra = f" (after {done.conflicts} conflict(s))" if done.conflicts else ""
    return _outcome(where, done.outcome, done.error, what, _what(patch, past=True) + extra)


def _outcome(where: str, outcome: Outcome, error: str | None, what: str, done: str) -> str:
    """How a patch (a node's, a NodePool's) ended: `done`, or why not."""
    match outcome:
        case Outcome.PATCHED:
            return f"{where}: {done}"
        case Outcome.SETTLED:
            return f"{where}: changed by someone else meanwhile; nothing left to do"
        case Outcome.GONE:
            return f"{where}: deleted meanwhile; skipped"
        case Outcome.NOT_SENT:
            return f"{where}: not sent ({error or 'stopped'}): would {what}"
    return f"{where}: failed to {what}: {error}"


def patch_json(patch: NodePatch, result: NodeResult | None = None) -> dict[str, Any]:
    """One node's JSON line: the patch a dry run would send, or (`result`) how it landed."""
    facts = {
        "result": result and str(result.outcome),
        "conflicts": result and result.conflicts,
        "error": result and result.error,
        "ignored": list(patch.ignored),
    }
    entry = {"node": patch.node, "action": patch.action, "body": patch.body()}
    return entry | {key: value for key, value in facts.items() if value}


def landed(result: NodeResult | PoolResult, as_json: bool) -> str:
    """The line for one node's or NodePool's patch, printed the moment its result is known."""
    if isinstance(result, PoolResult):
        return json.dumps(pool_json(result.patch, result)) if as_json else pool_line(result)
    return json.dumps(patch_json(result.patch, result)) if as_json else patch_line(result)


# --- NodePools: the budget mechanism ---------------------------------------------------

_POOL_DONE = {"add": "added", "extend": "extended", "remove": "removed", "drop": "dropped"}


def _pool_what(patch: PoolPatch, past: bool) -> str:
    """`add budget entry 40 9 22 11 * for 20m`, `dropped node-holder.dev/budget ...`."""
    verb = _POOL_DONE[patch.action] if past else patch.action
    if patch.action == "drop":
        return f"{verb} {ENTRY_KEY} (its entry is no longer in the list)"
    entry = patch.entry or patch.pool.entry or {}
    return f"{verb} budget entry {entry.get('schedule')} for {entry.get('duration')}"


def pool_line(done: PoolPatch | PoolResult) -> str:
    """`nodepool/x: would add budget entry ... [JSON Patch]` (planned), or how it ended."""
    patch = done if isinstance(done, PoolPatch) else done.patch
    where, what = f"nodepool/{patch.pool.name}", _pool_what(patch, past=False)
    if isinstance(done, PoolPatch):
        return f"{where}: would {what} {json.dumps(patch.body(), separators=(',', ':'))}"
    return _outcome(where, done.outcome, done.error, what, _pool_what(patch, past=True))


def pool_json(patch: PoolPatch, result: PoolResult | None = None) -> dict[str, Any]:
    entry = {"nodePool": patch.pool.name, "action": patch.action, "body": patch.body()}
    facts = {"result": result and str(result.outcome), "error": result and result.error}
    return entry | {key: value for key, value in facts.items() if value}


def _pool_counts(result: RunResult) -> dict[str, int]:
    """NodePools by what happened to their entry (a dry run: would happen), and the failed."""
    done = [r.patch for r in result.pools.results if r.outcome is Outcome.PATCHED]
    counts = Counter(p.action for p in (result.pools.patches if result.dry_run else done))
    counts["failed"] = len(result.pools.failed)
    return {a: counts[a] for a in (*_POOL_DONE, "failed") if counts[a]}


def pool_summary(result: RunResult) -> list[str]:
    """One line on the NodePools, where a run used or changed them."""
    plan, pools = result.plan, result.pools
    used = plan.hold.mechanism.budgets and plan.mode is Mode.RECONCILE
    mechanism = f" (mechanism {plan.hold.mechanism})" if used else ""
    if not used and not pools.patches:
        return []
    if not pools.views:  # none, or no NodePool CRD at all (404)
        budget = plan.hold.mechanism is Mechanism.BUDGET
        held = "no node is held" if budget else "every node is held by annotations"
        return [f"no NodePools{mechanism}: {held}"]
    verb = "would be " if result.dry_run else ""
    counts = [f"{n} {verb}{_POOL_DONE.get(a, a)}" for a, n in _pool_counts(result).items()]
    return [
        f"{len(pools.views)} NodePools{mechanism}, {sum(1 for p in pools.views if p.entry)} with "
        f"node-holder's budget entry before this run; entries: {', '.join(counts) or 'unchanged'}"
    ]


def _window_pools(window: HoldWindow, result: RunResult) -> dict[str, int]:
    """How many of the window's NodePools carry node-holder's budget entry (before the run)."""
    if not result.plan.hold.mechanism.budgets:
        return {}
    pools = [p for p in result.pools.views if pool_window(p.name, result.plan.hold) == window.name]
    return {"nodePools": len(pools), "nodePoolsWithEntry": sum(1 for p in pools if p.entry)}


# --- hold windows and their Events -----------------------------------------------------


def describe_window(window: HoldWindow, now: datetime, plan: Plan) -> str:
    """`held: youngest node x is 3m old, hold until T (17m left)` and its released forms."""
    if plan.mode is Mode.RELEASE:
        return "released (node-holder release: every hold this tool owns is removed)"
    if window.youngest is None or window.youngest_created is None:
        return "released: no node that can start a hold"
    age = format_duration(now - window.youngest_created)
    until = _time(window.hold_until)
    if window.held:
        assert window.hold_until is not None
        left = format_duration(window.hold_until - now)
        capped = f", capped by --max-hold at {until}" if window.capped else ""
        return (
            f"held: youngest node {window.youngest} is {age} old, "
            f"hold until {until} ({left} left{capped})"
        )
    free = f"; no new hold before {_time(window.free_until)}" if window.free_until else ""
    if (
        window.capped
        and window.hold_until is not None
        and window.hold_until > window.youngest_created
    ):
        return (
            f"released: --max-hold ended the hold at {until}{free}; youngest node "
            f"{window.youngest} is {age} old"
        )
    return f"released: youngest node {window.youngest} is {age} old, hold ended at {until}{free}"


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


def _source(node: str | None) -> str:
    """Where a window's hold duration or cap comes from: `node/x` (the annotation of its
    NodePool on node x) or `default` (the option)."""
    return f"node/{node}" if node else "default"


def _shown(plan: Plan) -> list[HoldWindow]:
    """The windows a report shows: every one, but in node scope only the held nodes."""
    return [w for w in plan.windows if plan.hold.scope is not Scope.NODE or w.held]


# --- counting ----------------------------------------------------------------------


@dataclass(frozen=True)
class Tally:
    """Each node in exactly one category; writes counted only where they landed."""

    nodes: int
    categories: dict[str, int]  # category -> nodes, in the order they are printed
    failed_by_action: dict[str, int]  # what the failed patches would have done
    keys_added: dict[str, int]  # key -> nodes it landed on
    keys_removed: dict[str, int]


#: Always printed, even at 0; the others only when they happen.
_ALWAYS = ("added", "removed", "unchanged", "held by others", "exempt", "deleting")
_ALWAYS_FOR = {Mode.PIN: ("pinned", "unchanged"), Mode.UNPIN: ("unpinned", "unchanged")}
#: What a patch did (a dry run: would do), by its action; "switched": a key added and
#: another removed in the same patch.
_DONE = {
    "pin": "pinned",
    "unpin": "unpinned",
    "add": "added",
    "remove": "removed",
    "disown": "disowned",
    "tidy": "tidied",
}
#: The categories, in the order they are printed: what changed, what failed, what did not.
_CHANGED = ("added", "removed", "switched", "disowned", "tidied", "pinned", "unpinned")
_UNCHANGED = ("unchanged", "not selected", "held by others", "exempt", "deleting", "gone")
_ORDER = (*_CHANGED, "failed", *_UNCHANGED)
#: How `status` names a node's state, from the states of its hold keys: the first found.
_STATE_WORDS = (
    (KeyState.PINNED, "pinned"),
    (KeyState.OURS, "held by us"),
    (KeyState.FOREIGN, "held by others"),
    (KeyState.EXEMPT, "exempt"),
)
#: A node no patch changes is counted by its state: these states, else "unchanged".
_STATES = ("held by others", "exempt", "pinned")
#: Windows, errors and Events the final JSON line lists at most (each list in LISTED_BYTES of
#: JSON); it counts the others.
LISTED, LISTED_BYTES = 20, 4096


def state(decision: NodeDecision) -> str:
    """`pinned`, `held by us`, `held by others`, `exempt` or `free`."""
    states = {s for _, s in decision.keys}
    return next((word for key, word in _STATE_WORDS if key in states), "free")


def _landed_category(patch: NodePatch) -> str:
    return "switched" if patch.added and patch.removed else _DONE[patch.action]


#: Patches that did not land, by outcome; any other outcome is a failure.
_NOT_LANDED = {Outcome.GONE: "gone", Outcome.SETTLED: "unchanged"}


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


def tally(result: RunResult) -> Tally:
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
    always = _ALWAYS_FOR.get(result.plan.mode, _ALWAYS)
    shown = {c: counts[c] for c in _ORDER if counts[c] or c in always}
    return Tally(len(result.plan.decisions), shown, dict(failed), dict(added), dict(removed))


def _counts(result: RunResult) -> str:
    counted = tally(result)
    verb = "would be " if result.dry_run else ""
    why = ", ".join(f"{n} to {a}" for a, n in sorted(counted.failed_by_action.items()))
    parts = [
        f"{n} {verb if c in _CHANGED else ''}{c}" + (f" ({why})" if c == "failed" else "")
        for c, n in counted.categories.items()
    ]
    text = f"{counted.nodes} nodes: " + ", ".join(parts)
    if len(counted.keys_added) + len(counted.keys_removed) > 1:
        keys = [f"+{k} on {n}" for k, n in counted.keys_added.items()]
        keys += [f"-{k} on {n}" for k, n in counted.keys_removed.items()]
        text += f" (keys: {', '.join(keys)})"
    return text


# --- the text lines ------------------------------------------------------------------


def decision_lines(result: RunResult) -> list[str]:
    """The summary: one line for the cluster scope, one per held/changed window otherwise."""
    plan = result.plan
    counts = _counts(result)
    if plan.mode in _ALWAYS_FOR:
        return [f"{plan.mode} {', '.join(plan.hold.annotations)}; {counts}"]
    kept = [_kept_line(claims)] if (claims := plan.kept_claims) else []
    if plan.hold.scope is Scope.CLUSTER or plan.mode is Mode.RELEASE:
        window = plan.windows[0] if plan.windows else HoldWindow("cluster", held=False)
        text = describe_window(window, plan.now, plan)
        return [*kept, f"{text}; {counts}"]
    changed = {p.window for p in plan.patches}
    lines = []
    if plan.hold.scope is Scope.GROUP:
        for window in plan.windows:
            if window.held or window.name in changed:
                lines.append(f"group {window.name}: {describe_window(window, plan.now, plan)}")
    held = sum(1 for w in plan.windows if w.held)
    unit = "groups" if plan.hold.scope is Scope.GROUP else "nodes"
    lines.append(f"{held} of {len(plan.windows)} {unit} held ({plan.hold.scope} scope); {counts}")
    return [*kept, *lines]


def _kept_line(kept: dict[str, int]) -> str:
    """Holds node-holder set under keys this run may not remove: said, never dropped."""
    shown = _names([f"{key} on {n} node(s)" for key, n in kept.items()], " key(s)")
    return (
        f"kept: {shown}, set by node-holder, not removed by this run "
        "(not a configured or well-known hold key); name it with --annotation to remove it"
    )


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
    """NodePool settings on nodes that are not settings, once a run: a line per value (at
    most LISTED), naming its nodes; they hold with the configured setting meanwhile."""
    nodes: dict[str, list[str]] = defaultdict(list)
    for node, why in plan.bad_values:
        nodes[why].append(f"node/{node}")
    return [
        f"{_names(names)}: {why}; those nodes use the configured setting; fix the NodePool's "
        'spec.template.metadata.annotations (a duration such as 45m, "0": never holds)'
        for why, names in list(nodes.items())[:LISTED]
    ]


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


def failure(result: RunResult) -> str | None:
    """The one error line of a run that did not do all it had to, or None."""
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
    return "; ".join(parts) or None


def final_lines(result: RunResult, command: str, as_json: bool) -> list[str]:
    """Stdout once the run is done; a real run printed its per-node lines as they landed."""
    whole = command == "status"
    if not as_json:
        return render_status_text(result) if whole else render_text(result)
    planned = result.dry_run and not whole  # status's document holds its patches
    lines = [json.dumps(pool_json(p)) for p in result.pools.patches if planned]
    lines += [json.dumps(patch_json(p)) for p in result.plan.patches if planned]
    return [*lines, _line(render_json(result, command, whole))]


def _line(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"))


def render_text(result: RunResult) -> list[str]:
    """The run's lines; a real run printed its per-node lines as they landed."""
    lines = [f"node/{name}: not found" for name in result.missing]
    lines += [f"node/{name}: {why}" for name, why in result.plan.refused]
    if result.plan.mode is Mode.UNPIN:
        lines += [f"node/{d.node}: not pinned" for d in result.plan.decisions if not _pinned(d)]
    lines += [pool_line(p) for p in result.pools.patches if result.dry_run]
    lines += [patch_line(p) for p in result.plan.patches if result.dry_run]
    for t in result.events:
        where = f"{t.kind.lower()}/{t.node}"
        lines.append(f"event {t.reason} on {where}: {event_message(t, result.plan)}")
    return [*lines, *pool_summary(result), *decision_lines(result)]


def _pinned(decision: NodeDecision) -> bool:
    return any(state is KeyState.PINNED for _, state in decision.keys)


# --- the JSON summary ----------------------------------------------------------------


def window_json(window: HoldWindow, now: datetime) -> dict[str, Any]:
    created = window.youngest_created
    return {
        "name": window.name,
        "held": window.held,
        "youngestNode": window.youngest,
        "youngestAge": format_duration(now - created) if created else None,
        "holdUntil": _time(window.hold_until),
        "stretchStart": _time(window.stretch_start),
        "capped": window.capped,
        "freeUntil": _time(window.free_until),  # after --max-hold ended a hold: none before this
        "holdDuration": format_duration(window.duration),
        "maxHold": format_duration(window.max_hold) if window.max_hold else None,
        "holdDurationFrom": _source(window.sources[0]),
        "maxHoldFrom": _source(window.sources[1]),
        "triggerNodes": window.triggers,
        "nodes": window.nodes,
    }


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


def _listed(key: str, items: list[Any], whole: bool) -> dict[str, Any]:
    shown: list[Any] = []
    size = 0
    for item in items:
        size += len(json.dumps(item))
        if not whole and (len(shown) == LISTED or size > LISTED_BYTES):
            break
        shown.append(item)
    return {key: shown, f"{key}NotListed": len(items) - len(shown)}


def render_json(result: RunResult, command: str, whole: bool = False) -> dict[str, Any]:
    """The run's last line; `whole` (status: one document for scripts, however many nodes) also
    lists every window, patch, error and node."""
    plan = result.plan
    counted = tally(result)
    windows = sorted(_shown(plan), key=lambda w: not w.held)  # the held ones first
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
        **_listed(
            "windows", [window_json(w, plan.now) | _window_pools(w, result) for w in windows], whole
        ),
        **_listed("errors", [*result.errors, *result.event_errors], whole),
        **_listed("events", events, whole),
        **_listed("badValues", [{"node": n, "value": why} for n, why in plan.bad_values], whole),
        **_listed("revertedNodePools", [p.name for p in result.pools.views if p.reverted], whole),
        "nodePools": {
            "listed": len(result.pools.views),
            "withEntry": sum(1 for p in result.pools.views if p.entry),
            **_pool_counts(result),
        },
        "summary": {
            "nodes": counted.nodes,
            **{_camel(c): counted.categories.get(c, 0) for c in _ORDER},
            "failedByAction": counted.failed_by_action,
            "ignoredStamps": sum(1 for p in plan.patches if p.ignored),
            "keptClaims": dict(list(plan.kept_claims.items())[:5]),
            "keysAdded": counted.keys_added,
            "keysRemoved": counted.keys_removed,
            "writes": result.applied.writes if result.applied else 0,
            "requests": result.requests,
            "listPages": result.listing.pages,
        },
    }
    if whole:
        data["patches"] = [patch_json(p) for p in plan.patches]
        data["nodePoolPatches"] = [pool_json(p) for p in result.pools.patches]
        data["nodes"] = status_rows(plan)
    return data


def _camel(category: str) -> str:
    first, *rest = category.split()
    return first + "".join(w.capitalize() for w in rest)


# --- status --------------------------------------------------------------------


def status_rows(plan: Plan) -> list[dict[str, Any]]:
    return [
        {
            "name": d.node,
            "age": format_duration(plan.now - d.created),
            "window": d.window,
            "state": state(d) + (" (deleting)" if d.deleting else ""),
            "annotations": {k: str(s) for k, s in d.keys},
            "next": d.patch.action if d.patch else "-",
        }
        for d in plan.decisions
    ]


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]


def _window_state(window: HoldWindow, plan: Plan) -> str:
    if plan.mode is not Mode.RECONCILE:
        return "released"
    if window.held:
        return "held (max-hold)" if window.capped else "held"
    return f"free until {_time(window.free_until)}" if window.free_until else "released"


def render_status_text(result: RunResult) -> list[str]:
    """The summary, a table of the hold windows (node scope: the held nodes) and one of the
    nodes."""
    plan = result.plan
    windows = [
        (
            w.name,
            _window_state(w, plan),
            w.youngest or "-",
            format_duration(plan.now - w.youngest_created) if w.youngest_created else "-",
            _time(w.hold_until) or "-",
            f"{format_duration(w.duration)} ({_source(w.sources[0])})",
            f"{format_duration(w.max_hold) if w.max_hold else 'none'} ({_source(w.sources[1])})",
            str(w.nodes),
            *_entries(w, result),
        )
        for w in _shown(plan)
    ]
    nodes = [(r["name"], r["age"], r["window"], r["state"], r["next"]) for r in status_rows(plan)]
    ignored = [f"node/{p.node}: ignored {why}" for p in plan.patches for why in p.ignored]
    head = ("WINDOW", "STATE", "YOUNGEST NODE", "AGE", "HOLD UNTIL", "HOLD", "MAX HOLD", "NODES")
    return [
        *pool_summary(result),
        *decision_lines(result),
        "",
        *_table((*head, *["NODEPOOLS WITH ENTRY"] * plan.hold.mechanism.budgets), windows),
        "",
        *_table(("NODE", "AGE", "WINDOW", "STATE", "NEXT RUN"), nodes),
        *ignored,
    ]


def _entries(window: HoldWindow, result: RunResult) -> list[str]:
    """`1 of 3`: the status column of NodePools with node-holder's entry (none: no budgets)."""
    counts = _window_pools(window, result)
    return ["{nodePoolsWithEntry} of {nodePools}".format(**counts)] if counts else []
