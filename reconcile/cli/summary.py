"""A run's summary as a typed value, and its JSON line: the text (report.py) is worded from
the same value, so the two cannot say different things. A new figure is one field here, one
key in `summary_json` and one phrase in the text. No list grows with the cluster past LISTED:
per-node detail is a line per node (docs/reference.md#output).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple

from reconcile.cluster.apply import FAILURES, ApplyResult, NodeResult, Outcome
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
from reconcile.rule.settings import Mechanism, Mode, Scope, format_duration, format_time
from reconcile.run import RunResult


def _time(moment: datetime | None) -> str | None:
    return format_time(moment) if moment else None


def names(found: list[str], unit: str = "") -> str:
    """The first five, and how many more."""
    more = f" and {len(found) - 5} more{unit}" if len(found) > 5 else ""
    return ", ".join(found[:5]) + more


def camel(words: str) -> str:
    """`held by others` or `held_by_others` -> `heldByOthers`: the JSON's key for it."""
    first, *rest = words.replace("_", " ").split()
    return first + "".join(w.capitalize() for w in rest)


# --- one patch, a node's or a NodePool's ---------------------------------------------

#: What a patch did (a dry run: would do), by its action: a node's, a NodePool's
#: (`extend`, `drop`), a node's bookkeeping stamps (`set`), and a node's category in the counts.
DONE = {
    "pin": "pinned",
    "unpin": "unpinned",
    "add": "added",
    "extend": "extended",
    "remove": "removed",
    "drop": "dropped",
    "disown": "disowned",
    "tidy": "tidied",
    "set": "set",
}


def _verb(action: str, past: bool) -> str:
    return DONE[action] if past else action


def _what(patch: NodePatch | PoolPatch, past: bool) -> str:
    """What a patch changes, e.g. `add a, remove b` / `added a, removed b`, `add budget entry
    40 9 22 11 * for 20m`, `set node-holder.dev/free-until` (a stamp)."""
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
    elif not parts:  # only node-holder's own stamps change: which are set, which removed
        stamped = [k for k, v in patch.changes if v is not None]
        gone = [k for k, v in patch.changes if v is None]
        stamps = (("set", stamped), ("remove", gone))
        parts = [f"{_verb(a, past)} stamp {', '.join(k)}" for a, k in stamps if k]
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
    where = f"node/{patch.node}" if isinstance(patch, NodePatch) else f"nodepool/{patch.pool.name}"
    stamps = patch.ignored if isinstance(patch, NodePatch) else ()
    ignored = "".join(f"; ignored {why}" for why in stamps)
    what = _what(patch, past=False) + ignored
    if result is None:
        return f"{where}: would {what} {json.dumps(patch.body(), separators=(',', ':'))}"
    match result.outcome:
        case Outcome.PATCHED:
            n = result.conflicts if isinstance(result, NodeResult) else 0
            conflicts = f" (after {n} conflict(s))" if n else ""
            return f"{where}: {_what(patch, past=True)}{ignored}{conflicts}"
        case Outcome.SETTLED:
            return f"{where}: changed by someone else meanwhile; nothing left to do"
        case Outcome.GONE:
            return f"{where}: deleted meanwhile; skipped"
        case Outcome.NOT_SENT:
            return f"{where}: not sent ({result.error or 'stopped'}): would {what}"
    return f"{where}: failed to {what}: {result.error}"


def landed(result: NodeResult | PoolResult, as_json: bool) -> str:
    """The line for one node's or NodePool's patch, printed the moment its result is known."""
    return (
        json.dumps(patch_json(result.patch, result))
        if as_json
        else patch_line(result.patch, result)
    )


# --- Events ---------------------------------------------------------------------------


def word_event(transition: Transition, plan: Plan) -> str:
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


# --- the summary's parts ------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """One hold window as `status` tabulates it and the lines say it (JSON: `windows`)."""

    name: str
    held: bool
    youngest_node: str | None
    youngest_created: str | None
    youngest_age: str | None
    hold_until: str | None
    hold_left: str | None
    stretch_start: str | None
    capped: bool
    free_until: str | None  # after --max-hold ended a hold: none before this
    hold_duration: str
    max_hold: str | None
    hold_duration_from: str
    max_hold_from: str
    capped_by: str | None
    trigger_nodes: int
    nodes: int
    node_patches: int  # the node patches this run plans in it
    still_held: int  # nodes whose hold this run was to remove and did not (paced or failed)
    node_pools: int | None = None  # budgets: its NodePools, and those with our entry
    node_pools_with_entry: int | None = None

    def json(self) -> dict[str, Any]:
        found = {camel(k): v for k, v in asdict(self).items()}
        return {k: v for k, v in found.items() if v is not None or not k.startswith("nodePools")}


class Event(NamedTuple):
    reason: str
    node: str
    kind: str
    message: str


class NotPinned(NamedTuple):
    node: str
    why: str | None


class Continues(NamedTuple):
    """Nodes a paced run left for the next one, and about how many runs like this one they
    take (by the nodes this run patched; None if it patched none)."""

    nodes_left: int
    runs: int | None


@dataclass(frozen=True)
class NodePools:
    listed: int
    with_entry: int
    done: dict[str, int]  # NodePools by what happened to their entry (dry run: would), failed


@dataclass(frozen=True)
class Counts:
    """Each node in exactly one category (`categories`, by ORDER's words); writes counted only
    where they landed."""

    nodes: int
    categories: Counter[str]
    released: int  # nodes a hold key was removed from ("removed" or "switched")
    ignored_stamps: int
    kept_claims: dict[str, int]
    writes: int
    requests: int
    list_pages: int


@dataclass(frozen=True)
class Summary:
    """The run, every list whole: `summary_json` bounds it into the last JSON line, report.py
    words it. `node_states` for `status` only; `failure`, the run's error line (exit 1)."""

    command: str
    dry_run: bool
    now: str | None
    clock: str
    scope: Scope
    hold_duration: str
    annotations: tuple[str, ...]
    mechanism: Mechanism
    held: bool
    hold_until: str | None
    youngest_node: str | None
    youngest_created: str | None
    windows: tuple[Window, ...]  # node scope: the held only
    window_count: int
    errors: tuple[str, ...]
    events: tuple[Event, ...]
    bad_values: tuple[dict[str, str], ...]  # {"nodepool"|"node": name, "value": why}
    reverted_node_pools: tuple[str, ...]
    by_annotation: tuple[tuple[str, str], ...]  # auto: (NodePool, why) held by annotation
    continues: Continues | None  # only when the run paced and nothing failed
    still_held: int
    not_found: tuple[str, ...]
    not_pinned: tuple[NotPinned, ...]
    node_pools: NodePools
    counts: Counts
    node_states: Counter[str] | None
    failure: str | None

    @property
    def mode(self) -> Mode:
        """The command as a Mode: `status` is a reconcile that writes nothing."""
        return Mode.RECONCILE if self.command == "status" else Mode(self.command)


# --- counting ----------------------------------------------------------------------

#: The categories, in the order they are printed: what changed, what failed, what was left for
#: the next run, what did not; "switched": a key added and another removed in the same patch.
CHANGED = ("added", "removed", "switched", "disowned", "tidied", "pinned", "unpinned")
UNCHANGED = (
    "already pinned",
    "unchanged",
    "not selected",
    "held by others",
    "exempt",
    "deleting",
    "gone",
)
ORDER = (*CHANGED, "failed", "left", *UNCHANGED)
#: How `status` names a node's state, from the states of its hold keys: the first found.
_STATE_WORDS = (
    (KeyState.PINNED, "pinned"),
    (KeyState.OURS, "held by us"),
    (KeyState.FOREIGN, "held by others"),
    (KeyState.EXEMPT, "exempt"),
)
#: `status`'s count of nodes by state, in this order.
STATE_ORDER = ("held by us", "held by others", "pinned", "exempt", "free")
#: A node no patch changes is counted by its state: these states, else "unchanged".
_STATES = ("held by others", "exempt", "pinned")
#: Patches that did not land, by outcome; any other outcome is a failure.
_NOT_LANDED = {Outcome.GONE: "gone", Outcome.SETTLED: "unchanged", Outcome.LEFT: "left"}


def state(decision: NodeDecision) -> str:
    """`pinned`, `held by us`, `held by others`, `exempt` or `free`."""
    return _state_of(decision.keys)


@lru_cache(maxsize=256)  # most nodes' keys are alike (every key free): asked of every node
def _state_of(keys: tuple[tuple[str, KeyState], ...]) -> str:
    states = {s for _, s in keys}
    return next((word for key, word in _STATE_WORDS if key in states), "free")


def _landed_category(patch: NodePatch) -> str:
    return "switched" if patch.added and patch.removed else DONE[patch.action]


def _category(decision: NodeDecision, outcome: NodeResult | None, plan: Plan, dry: bool) -> str:
    """The one category a node falls in after this run (in a dry run: would)."""
    patch = decision.patch
    if decision.deleting:
        return "deleting"
    if patch is None and not decision.selected:
        return "not selected"  # outside --node-selector: never "unchanged"
    if patch is None:
        return _unpatched(state(decision), plan.mode)
    if dry or outcome is None:
        return _landed_category(patch)  # planned: the dry run's "would be"
    if outcome.outcome is Outcome.PATCHED:
        return _landed_category(outcome.patch)
    return _NOT_LANDED.get(outcome.outcome, "failed")


def _unpatched(found: str, mode: Mode) -> str:
    """A node no patch changes, by its state: pin says a pinned node is already pinned; unpin
    counts a node already as asked unchanged."""
    if mode is Mode.PIN:
        return "already pinned" if found == "pinned" else "unchanged"
    return found if found in _STATES and mode is not Mode.UNPIN else "unchanged"


def _counts(result: RunResult) -> Counts:
    outcomes = {r.node: r for r in result.applied.results} if result.applied else {}
    plan = result.plan
    found = Counter(
        _category(d, outcomes.get(d.node), plan, result.dry_run) for d in plan.decisions
    )
    return Counts(
        nodes=len(plan.decisions),
        categories=found,
        released=found["removed"] + found["switched"],
        ignored_stamps=sum(1 for p in plan.patches if p.ignored),
        kept_claims=plan.kept_claims,
        writes=result.applied.writes if result.applied else 0,
        requests=result.requests,
        list_pages=result.listing.pages,
    )


#: A NodePool's patch actions, in the order the counts name them.
POOL_ACTIONS = ("add", "extend", "remove", "drop")


def _node_pools(result: RunResult) -> NodePools:
    pools = result.pools
    done = [r.patch for r in pools.results if r.outcome is Outcome.PATCHED]
    counts = Counter(p.action for p in (pools.patches if result.dry_run else done))
    counts["failed"] = len(pools.failed)
    return NodePools(
        listed=pools.listed,
        with_entry=sum(1 for p in pools.views if p.entry),
        done={a: counts[a] for a in (*POOL_ACTIONS, "failed") if counts[a]},
    )


# --- the summary: one run as a value ----------------------------------------------------


def _still_held(result: RunResult) -> Counter[str]:
    """By window: nodes whose hold this run was to remove and did not (left or failed)."""
    if result.applied is None:
        return Counter()
    undone = (*FAILURES, Outcome.LEFT)
    return Counter(
        r.patch.window for r in result.applied.results if r.outcome in undone and r.patch.removed
    )


def _window(window: HoldWindow, result: RunResult, patches: int, still: int) -> Window:
    now, created, until = result.plan.now, window.youngest_created, window.hold_until
    budgets, hold = result.plan.hold.mechanism.budgets, result.plan.hold
    pools = [p for p in result.pools.views if budgets and pool_window(p.name, hold) == window.name]
    return Window(
        name=window.name,
        held=window.held,
        youngest_node=window.youngest,
        youngest_created=_time(created),
        youngest_age=format_duration(now - created) if created else None,
        hold_until=_time(until),
        hold_left=format_duration(until - now) if window.held and until else None,
        stretch_start=_time(window.stretch_start),
        capped=window.capped,
        free_until=_time(window.free_until),
        hold_duration=format_duration(window.duration),
        max_hold=format_duration(window.max_hold) if window.max_hold else None,
        hold_duration_from=window.sources[0] or "--hold-duration",
        max_hold_from=window.sources[1] or "--max-hold",
        capped_by=_capped_by(window) if window.capped else None,
        trigger_nodes=window.triggers,
        nodes=window.nodes,
        node_patches=patches,
        still_held=still,
        node_pools=len(pools) if budgets else None,
        node_pools_with_entry=sum(1 for p in pools if p.entry) if budgets else None,
    )


def _capped_by(window: HoldWindow) -> str:
    """The cap that applies and where it comes from: `--max-hold 2h` (the option), or
    `nodepool/batch max-hold 3h` / `node/x max-hold 3h` (a NodePool's or a node's own)."""
    cap = format_duration(window.max_hold) if window.max_hold else "none"
    source = window.sources[1]
    return f"{source} max-hold {cap}" if source else f"--max-hold {cap}"


def _shown(plan: Plan) -> list[HoldWindow]:
    """The windows a report shows: every one, but in node scope only the held nodes."""
    return [w for w in plan.windows if plan.hold.scope is not Scope.NODE or w.held]


def summary(result: RunResult, command: str, next_run: bool = True) -> Summary:
    """The run as a value (`next_run`: a next run follows, see `failure`)."""
    plan = result.plan
    patched = Counter(p.window for p in plan.patches)
    still = _still_held(result)
    failed = failure(result, next_run)
    held_windows = [w for w in plan.windows if w.held] if plan.mode is Mode.RECONCILE else []
    with_trigger = [w for w in plan.windows if w.youngest_created is not None]
    youngest = max(with_trigger, key=lambda w: w.youngest_created, default=None)  # type: ignore[arg-type, return-value]
    return Summary(
        command=command,
        dry_run=result.dry_run,
        now=_time(plan.now),
        clock=result.listing.clock,
        scope=plan.hold.scope,
        hold_duration=format_duration(plan.hold.hold_duration),
        annotations=tuple(plan.hold.annotations),
        mechanism=plan.hold.mechanism,
        held=bool(held_windows),
        hold_until=_time(max((w.hold_until for w in held_windows if w.hold_until), default=None)),
        youngest_node=youngest.youngest if youngest else None,
        youngest_created=_time(youngest.youngest_created) if youngest else None,
        windows=tuple(_window(w, result, patched[w.name], still[w.name]) for w in _shown(plan)),
        window_count=len(plan.windows),
        errors=(*result.errors, *result.event_errors),
        events=tuple(Event(t.reason, t.node, t.kind, word_event(t, plan)) for t in result.events),
        bad_values=tuple(_bad_value(source, why) for source, why in plan.bad_values),
        reverted_node_pools=tuple(p.name for p in result.pools.views if p.reverted),
        by_annotation=by_annotation(result),
        continues=None if failed else _continues(result),
        still_held=sum(still.values()),
        not_found=result.missing,
        not_pinned=_not_pinned(plan),
        node_pools=_node_pools(result),
        counts=_counts(result),
        node_states=Counter(state(d) for d in plan.decisions) if command == "status" else None,
        failure=failed,
    )


def by_annotation(result: RunResult) -> tuple[tuple[str, str], ...]:
    """auto: each held NodePool whose nodes this run holds by annotation instead of a budget
    entry, and why, in every run until the hold ends: the cluster says so (a fallback leaves
    no entry, and its nodes carry node-holder's hold annotations, see budget.budgeted)."""
    plan = result.plan
    if plan.hold.mechanism is not Mechanism.AUTO or plan.mode is not Mode.RECONCILE:
        return ()
    fallen = {r.patch.pool.name: r.error or "" for r in result.pools.fallbacks}
    return tuple(
        (
            pool.name,
            fallen.get(pool.name)
            or (
                "someone else removed it"
                if pool.reverted
                else "its nodes carry node-holder's hold annotations since an earlier run: a "
                "budget entry that could not be made, or a switch from annotations"
            ),
        )
        for pool in result.pools.views
        if pool.name not in plan.observed.budgeted and window_of(pool.name, plan).held
    )


def _continues(result: RunResult) -> Continues | None:
    applied = result.applied
    if applied is None or not applied.left:
        return None
    return Continues(
        applied.left, math.ceil(applied.left / applied.writes) if applied.writes else None
    )


def _not_pinned(plan: Plan) -> tuple[NotPinned, ...]:
    """Nodes `pin` left as they were (and why), and those `unpin` found with no pinned key;
    other commands decide on every node, and pass over none of them here."""
    if plan.mode not in (Mode.PIN, Mode.UNPIN):
        return ()
    found = [NotPinned(n, why) for n, why in plan.refused]
    return (
        *found,
        *(
            NotPinned(d.node, None)
            for d in plan.decisions
            if plan.mode is Mode.UNPIN and not any(s is KeyState.PINNED for _, s in d.keys)
        ),
    )


def _bad_value(source: str, why: str) -> dict[str, str]:
    """`{"nodepool": "batch", ...}` or `{"node": "x", ...}`: where a bad value was read."""
    kind, _, name = source.partition("/")
    return {kind: name, "value": why}


# --- what failed ------------------------------------------------------------------------


def failure(result: RunResult, next_run: bool = True) -> str | None:
    """The one error line of a run that failed, or None. Nodes left for the next run are no
    failure, unless none was done (patches were due and none landed) or no `next_run` follows
    (the uninstall hook's release)."""
    applied = result.applied
    if applied is not None and applied.failed and applied.fatal:
        return "; ".join([str(applied.fatal), *_not_tried(applied)])
    parts = []
    if pools := result.pools.failed:  # one line names the first reason (a 403 names the grant)
        found = names([r.patch.pool.name for r in pools])
        parts.append(f"{len(pools)} NodePool(s) not patched: {found} ({pools[0].error})")
    if result.missing:  # pin, unpin: the others were still patched
        parts.append(f"{len(result.missing)} node(s) not found: {names(list(result.missing))}")
    if refused := result.plan.refused:  # pin: a person's value is not overwritten
        found = names([name for name, _ in refused])
        parts.append(f"{len(refused)} node(s) not pinned: {found} ({refused[0][1]})")
    if applied is not None:
        parts += _node_failures(applied, next_run)
    return "; ".join(parts) or None


def _node_failures(applied: ApplyResult, next_run: bool) -> list[str]:
    """The nodes not patched and why, and those not tried (left at the run's deadline)."""
    failed = applied.failed
    if failed:
        why = (
            " (stopped by a signal)"
            if applied.interrupted
            else " (run timeout reached)"
            if applied.timed_out
            else ""
        )
        found = names([r.node for r in failed])
        return [
            f"{len(failed)} node(s) not patched{why}: {found}; the next run retries them",
            *_not_tried(applied),
        ]
    if applied.left and (applied.stalled or not next_run):
        then = "none patched in time" if applied.stalled else "no next run follows this one"
        return [
            f"{applied.left} node(s) left at the run timeout and {then}: give the run more "
            "time (--timeout) or a higher rate (--qps), or run it again"
        ]
    return []


def _not_tried(applied: ApplyResult) -> list[str]:
    """A failed run's nodes left at its deadline: not failed, not done either."""
    return [f"{applied.left} node(s) not tried (the next run tries them)"] if applied.left else []


# --- the JSON ----------------------------------------------------------------------------

#: Windows, errors and Events the final JSON line lists at most (each list in LISTED_BYTES of
#: JSON); it counts the others. Of the kept claims, the first _KEPT_LISTED keys.
LISTED, LISTED_BYTES = 20, 4096
_KEPT_LISTED = 5


def summary_json(data: Summary) -> dict[str, Any]:
    """The last JSON line: the summary with the held windows first and each list bounded to
    LISTED items in LISTED_BYTES (`{key}NotListed` counts the others)."""
    counts = data.counts
    windows = sorted(data.windows, key=lambda w: not w.held)
    found: dict[str, Any] = {
        "command": data.command,
        "dryRun": data.dry_run,
        "now": data.now,
        "clock": data.clock,
        "scope": str(data.scope),
        "holdDuration": data.hold_duration,
        "annotations": list(data.annotations),
        "mechanism": str(data.mechanism),
        "held": data.held,
        "holdUntil": data.hold_until,
        "youngestNode": data.youngest_node,
        "youngestCreated": data.youngest_created,
        "windowCount": data.window_count,
        **_bounded("windows", [w.json() for w in windows]),
        **_bounded("errors", list(data.errors)),
        **_bounded("events", [e._asdict() for e in data.events]),
        **_bounded("badValues", list(data.bad_values)),
        **_bounded("revertedNodePools", list(data.reverted_node_pools)),
        **_bounded(
            "nodePoolsByAnnotation", [{"nodePool": n, "why": w} for n, w in data.by_annotation]
        ),
        "continues": data.continues and {camel(k): v for k, v in data.continues._asdict().items()},
        "stillHeld": data.still_held,
        **_bounded("notFound", list(data.not_found)),
        **_bounded("notPinned", [p._asdict() for p in data.not_pinned]),
        "nodePools": {
            "listed": data.node_pools.listed,
            "withEntry": data.node_pools.with_entry,
            **data.node_pools.done,
        },
        "summary": {
            "nodes": counts.nodes,
            **{camel(c): counts.categories[c] for c in ORDER},
            "ignoredStamps": counts.ignored_stamps,
            "keptClaims": dict(list(counts.kept_claims.items())[:_KEPT_LISTED]),
            "writes": counts.writes,
            "requests": counts.requests,
            "listPages": counts.list_pages,
        },
    }
    if data.node_states is not None:
        found["nodeStates"] = {camel(w): data.node_states[w] for w in STATE_ORDER}
    return found


def _bounded(key: str, items: list[Any]) -> dict[str, Any]:
    """`key`'s items as `listed` bounds them, and `{key}NotListed`: how many are not listed."""
    shown, more = listed(items)
    return {key: shown, f"{key}NotListed": more}


def listed(items: list[Any], whole: bool = False) -> tuple[list[Any], int]:
    """The first items, at most LISTED in LISTED_BYTES of JSON (`whole`: all of them), and
    how many are not listed; a Window is measured by its JSON."""
    shown: list[Any] = []
    size = 0
    for item in items:
        size += len(json.dumps(item, default=Window.json))
        if not whole and (len(shown) == LISTED or size > LISTED_BYTES):
            break
        shown.append(item)
    return shown, len(items) - len(shown)


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
