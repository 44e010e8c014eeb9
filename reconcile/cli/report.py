"""Text and JSON renderings of a run: the lines people read in `kubectl logs`.

Wording follows kube-janitor's `node/<name>: would add ...` lines, then one
summary line per run. No line grows with the cluster: per-node detail is in the per-node
lines, and the final JSON line lists a few windows, errors and Events (LISTED) and counts the rest
(log pipelines drop lines over 16 KiB). `status --output json` stays one whole document.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconcile.cluster.apply import NodeResult, Outcome
from reconcile.rule.decide import HoldWindow, KeyState, Mode, NodeDecision, NodePatch, Plan
from reconcile.rule.settings import Scope, format_duration
from reconcile.run import RunResult


def iso(moment: datetime | None) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else None


def _keys(keys: tuple[str, ...]) -> str:
    return ", ".join(keys)


def _body(patch: NodePatch) -> str:
    return json.dumps(patch.body(), separators=(",", ":"), sort_keys=False)


def _what(patch: NodePatch, past: bool) -> str:
    """Every key a patch adds and removes, e.g. `add a, remove b` / `added a, removed b`,
    and the stamps it removes because this tool could not have written them."""
    verbs = (
        ("pinned", "unpinned", "added", "removed") if past else ("pin", "unpin", "add", "remove")
    )
    keys = (patch.pinned, patch.unpinned, patch.added, patch.removed)
    parts = [f"{verb} {_keys(k)}" for verb, k in zip(verbs, keys, strict=True) if k]
    if not parts and patch.action == "disown":
        verb = "dropped" if past else "drop"
        parts = [
            f"{verb} ownership of {_keys(patch.disowned)} (changed or removed by someone else)"
        ]
    elif not parts:
        parts = [f"{'tidied' if past else 'tidy'} {_keys(tuple(k for k, _ in patch.changes))}"]
    return ", ".join(parts) + "".join(f"; ignored {why}" for why in patch.ignored)


def patch_line(patch: NodePatch, result: NodeResult | None, dry_run: bool) -> str:
    """`node/x: would add karpenter.sh/do-not-disrupt {...}` and friends."""
    what = _what(patch, past=False)
    if dry_run:
        return f"node/{patch.node}: would {what} {_body(patch)}"
    assert result is not None
    match result.outcome:
        case Outcome.PATCHED:
            extra = f" (after {result.conflicts} conflict(s))" if result.conflicts else ""
            return f"node/{patch.node}: {_what(result.patch, past=True)}{extra}"
        case Outcome.SETTLED:
            return f"node/{patch.node}: changed by someone else meanwhile; nothing left to do"
        case Outcome.GONE:
            return f"node/{patch.node}: deleted meanwhile; skipped"
        case Outcome.NOT_SENT:
            return f"node/{patch.node}: not sent ({result.error or 'stopped'}): would {what}"
    return f"node/{patch.node}: failed to {what}: {result.error}"


def describe_window(window: HoldWindow, now: datetime, plan: Plan) -> str:
    """`held: youngest node x is 3m old, hold until T (17m left)` and its released forms."""
    if plan.mode is Mode.RELEASE:
        return "released (node-holder release: every hold this tool owns is removed)"
    if window.youngest is None or window.youngest_created is None:
        return "released: no node that can start a hold"
    age = format_duration(now - window.youngest_created)
    until = iso(window.hold_until)
    if window.held:
        assert window.hold_until is not None
        left = format_duration(window.hold_until - now)
        capped = f", capped by --max-hold at {until}" if window.capped else ""
        return (
            f"held: youngest node {window.youngest} is {age} old, "
            f"hold until {until} ({left} left{capped})"
        )
    free = f"; no new hold before {iso(window.free_until)}" if window.free_until else ""
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
_ORDER = (
    "added",
    "removed",
    "switched",
    "disowned",
    "tidied",
    "pinned",
    "unpinned",
    "failed",
    "unchanged",
    "not selected",
    "held by others",
    "exempt",
    "deleting",
    "gone",
)
#: A node no patch changes is counted by its state: these states, else "unchanged".
_STATES = ("held by others", "exempt", "pinned")
#: Windows, errors and Events the final JSON line lists at most (each list in LISTED_BYTES of
#: JSON); it counts the others.
LISTED, LISTED_BYTES = 20, 4096


def _landed_category(patch: NodePatch) -> str:
    if patch.pinned or patch.unpinned:
        return "pinned" if patch.pinned else "unpinned"
    if patch.added and patch.removed:
        return "switched"  # one key added and another removed in the same patch
    if patch.added:
        return "added"
    if patch.removed:
        return "removed"
    return "disowned" if patch.action == "disown" else "tidied"


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
        state = decision.state
        return (state if state in states else "unchanged"), None
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
    planned = ("added", "removed", "switched", "disowned", "tidied", "pinned", "unpinned")
    why = ", ".join(f"{n} to {a}" for a, n in sorted(counted.failed_by_action.items()))
    parts = [
        f"{n} {verb if c in planned else ''}{c}" + (f" ({why})" if c == "failed" else "")
        for c, n in counted.categories.items()
    ]
    text = f"{counted.nodes} nodes: " + ", ".join(parts)
    if len(counted.keys_added) + len(counted.keys_removed) > 1:
        keys = [f"+{k} on {n}" for k, n in counted.keys_added.items()]
        keys += [f"-{k} on {n}" for k, n in counted.keys_removed.items()]
        text += f" (keys: {', '.join(keys)})"
    return text


def decision_lines(result: RunResult) -> list[str]:
    """The summary: one line for the cluster scope, one per held/changed window otherwise."""
    plan = result.plan
    counts = _counts(result)
    if plan.mode in _ALWAYS_FOR:
        return [f"{plan.mode} {_keys(plan.hold.annotations)}; {counts}"]
    kept = [_kept_line(plan.kept_claims)] if plan.kept_claims else []
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
    shown = [f"{key} on {n} node(s)" for key, n in list(kept.items())[:5]]
    more = f" and {len(kept) - 5} more key(s)" if len(kept) > 5 else ""
    return (
        f"kept: {', '.join(shown)}{more}, set by node-holder, not removed by this run "
        "(not a configured or well-known hold key); name it with --annotation to remove it"
    )


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


def owned_in_dry_run(plan: Plan) -> str | None:
    """A dry run removes nothing: holds this tool owns stay until a real run or a release."""
    owned = sum(1 for d in plan.decisions if any(s is KeyState.OURS for _, s in d.keys))
    if not owned:
        return None
    return (
        f"dry run: {owned} nodes carry hold annotations of node-holder, which a dry run never "
        "removes; release them with `node-holder release`, or run without --dry-run "
        "(NODE_HOLDER_DRY_RUN)"
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
        "(--hold-scope group), or use the NodePool-budget mechanism (--mechanism budget, "
        "coming: one write per NodePool)"
    )


def warnings(result: RunResult, command: str) -> list[str]:
    """What stderr says about this run besides errors: settings that select nothing, a dry
    run's holds left in place, a hold edge too large."""
    found = unheeded(result.plan)
    if edge := large_edge(result.plan):
        found.append(edge)
    if command == "reconcile" and result.dry_run and (owned := owned_in_dry_run(result.plan)):
        found.append(owned)
    return found


def final_lines(result: RunResult, command: str, as_json: bool) -> list[str]:
    """Stdout once the run is done; a real run printed its per-node lines as they landed."""
    if command == "status":
        return [_line(render_status_json(result))] if as_json else render_status_text(result)
    if not as_json:
        return render_text(result, streamed=not result.dry_run)
    planned = [json.dumps(planned_json(p)) for p in result.plan.patches if result.dry_run]
    return [*planned, _line(render_json(result, command))]


def _line(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"))


def landed_line(result: NodeResult) -> str:
    """The line for one node's patch, printed the moment its result is known."""
    return patch_line(result.patch, result, dry_run=False)


def landed_json(result: NodeResult) -> dict[str, Any]:
    """The JSON line for one node's patch, printed the moment its result is known."""
    entry: dict[str, Any] = {
        "node": result.node,
        "action": result.patch.action,
        "result": str(result.outcome),
        "body": result.patch.body(),
    }
    if result.conflicts:
        entry["conflicts"] = result.conflicts
    if result.error:
        entry["error"] = result.error
    if result.patch.ignored:
        entry["ignored"] = list(result.patch.ignored)
    return entry


def render_text(result: RunResult, streamed: bool = False) -> list[str]:
    """The run's lines; with `streamed`, the per-node lines were printed as they landed."""
    lines = [f"node/{name}: not found" for name in result.missing]
    outcomes = {r.node: r for r in result.applied.results} if result.applied else {}
    for patch in () if streamed else result.plan.patches:
        lines.append(patch_line(patch, outcomes.get(patch.node), result.dry_run))
    for transition in result.events:
        lines.append(f"event {transition.reason} on node/{transition.node}: {transition.message}")
    lines.extend(decision_lines(result))
    return lines


def window_json(window: HoldWindow, now: datetime) -> dict[str, Any]:
    return {
        "name": window.name,
        "held": window.held,
        "youngestNode": window.youngest,
        "youngestAge": format_duration(now - window.youngest_created)
        if window.youngest_created
        else None,
        "holdUntil": iso(window.hold_until),
        "stretchStart": iso(window.stretch_start),
        "capped": window.capped,
        "freeUntil": iso(window.free_until),  # after --max-hold ended a hold: none before this
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
        "holdUntil": iso(until),
        "youngestNode": youngest.youngest if youngest else None,
        "youngestCreated": iso(youngest.youngest_created) if youngest else None,
    }


def planned_json(patch: NodePatch) -> dict[str, Any]:
    """A dry run's line for one node's patch (a real run's: `landed_json`)."""
    entry = {"node": patch.node, "action": patch.action, "body": patch.body()}
    return entry | ({"ignored": list(patch.ignored)} if patch.ignored else {})


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
    """The run's last line; `whole` (status) also lists every window, patch and error."""
    plan = result.plan
    counted = tally(result)
    windows = [w for w in plan.windows if plan.hold.scope != Scope.NODE or w.held]
    windows.sort(key=lambda w: not w.held)  # the held ones first
    data = {
        "command": command,
        "dryRun": result.dry_run,
        "now": iso(plan.now),
        "clock": result.listing.clock,
        "scope": str(plan.hold.scope),
        "holdDuration": format_duration(plan.hold.hold_duration),
        "annotations": list(plan.hold.annotations),
        "largeEdge": large_edge(plan) is not None,
        **_headline(plan),
        **_listed("windows", [window_json(w, plan.now) for w in windows], whole),
        **_listed("errors", [*result.errors, *result.event_errors], whole),
        **_listed(
            "events",
            [{"reason": t.reason, "node": t.node, "message": t.message} for t in result.events],
            whole,
        ),
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
        data["patches"] = [planned_json(p) for p in plan.patches]
    return data


def _camel(category: str) -> str:
    first, *rest = category.split()
    return first + "".join(w.capitalize() for w in rest)


# --- status --------------------------------------------------------------------


def status_rows(plan: Plan) -> list[dict[str, Any]]:
    rows = []
    for d in plan.decisions:
        nxt = d.patch.action if d.patch else "-"
        rows.append(
            {
                "name": d.node,
                "age": format_duration(plan.now - d.created),
                "window": d.window,
                "state": d.state + (" (deleting)" if d.deleting else ""),
                "annotations": {k: str(s) for k, s in d.keys},
                "next": nxt,
            }
        )
    return rows


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]


def window_rows(plan: Plan) -> list[tuple[str, ...]]:
    """One row per hold window: the cluster, or each group (node scope: the held nodes)."""
    rows = []
    for w in plan.windows:
        if plan.hold.scope is Scope.NODE and not w.held:
            continue
        held = w.held and plan.mode is Mode.RECONCILE
        age = format_duration(plan.now - w.youngest_created) if w.youngest_created else "-"
        rows.append(
            (
                w.name,
                "held" + (" (max-hold)" if w.capped else "")
                if held
                else f"free until {iso(w.free_until)}"
                if w.free_until and plan.mode is Mode.RECONCILE
                else "released",
                w.youngest or "-",
                age,
                iso(w.hold_until) or "-",
                str(w.nodes),
            )
        )
    return rows


def render_status_text(result: RunResult) -> list[str]:
    plan = result.plan
    windows = _table(
        ("WINDOW", "STATE", "YOUNGEST NODE", "AGE", "HOLD UNTIL", "NODES"), window_rows(plan)
    )
    nodes = _table(
        ("NODE", "AGE", "WINDOW", "STATE", "NEXT RUN"),
        [(r["name"], r["age"], r["window"], r["state"], r["next"]) for r in status_rows(plan)],
    )
    ignored = [f"node/{p.node}: ignored {why}" for p in plan.patches for why in p.ignored]
    return [*decision_lines(result), "", *windows, "", *nodes, *ignored]


def render_status_json(result: RunResult) -> dict[str, Any]:
    """One whole document for scripts, however many nodes."""
    data = render_json(result, "status", whole=True)
    data["nodes"] = status_rows(result.plan)
    return data
