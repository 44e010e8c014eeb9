"""Races. A person's change between our list and our patch survives,
the tool never claims an annotation it did not set, and two runs at once converge
without losing or flapping anything.

`tests/hold/test_reconcile_api.py` already covers a person who sets the hold annotation to
"false" or edits an unrelated annotation while a hold *starts*; here are the other
kinds of edit, the release side, edits that never stop, and concurrent runs.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from reconcile.cli.summary import word_event
from reconcile.cluster.apply import Outcome
from reconcile.rule.settings import HoldSettings, RunSettings
from reconcile.run import RunResult, run_once
from tests.clusters import CliResult, run_cli
from tests.helpers import KEY, MARKER, NODES, OURS, kube_for, old, young
from tests.kubeapi.apiserver import ApiServer, RequestInfo
from tests.support import held as held_plan

HOLD = timedelta(minutes=20)

Edit = Callable[[dict[str, str]], None]


def set_(key: str, value: str) -> Edit:
    return lambda annotations: annotations.__setitem__(key, value)


def remove(key: str) -> Edit:
    return lambda annotations: annotations.pop(key, None)


def both(*edits: Edit) -> Edit:
    def run(annotations: dict[str, str]) -> None:
        for edit in edits:
            edit(annotations)

    return run


def edit_before_first_patch(
    api: ApiServer, node: str, edit: Edit
) -> tuple[list[bytes], Callable[[RequestInfo], None]]:
    """A person edits `node` after our list, just before our first patch of it arrives.

    Returns the bodies of every PATCH of that node, in order, and the hook.
    """
    bodies: list[bytes] = []

    def hook(req: RequestInfo) -> None:
        if req.method == "PATCH" and req.path == f"{NODES}/{node}":
            if not bodies:
                api.edit_node(node, lambda obj: edit(obj["metadata"].setdefault("annotations", {})))
            bodies.append(req.body)

    return bodies, api.on_request(hook)


def reconcile(kubeconfig: Path, *args: str) -> CliResult:
    return run_cli("reconcile", "--kubeconfig", str(kubeconfig), *args)


# Each case: the node's annotations when we list it, whether the run holds or releases,
# the person's edit, and what the node carries after the run, during the next hold and
# after that hold ends.
RACES = {
    "person adds the hold annotation as we add it": (
        {},
        "hold",
        set_(KEY, "true"),
        ({KEY: "true"}, {KEY: "true"}, {KEY: "true"}),
    ),
    "person removes our hold annotation as we remove it": (
        {**OURS, "team": "a"},
        "release",
        remove(KEY),
        ({"team": "a"}, {"team": "a", **OURS}, {"team": "a"}),
    ),
    "person sets our hold annotation to another value as we remove it": (
        dict(OURS),
        "release",
        set_(KEY, "false"),
        ({KEY: "false"}, {KEY: "false"}, {KEY: "false"}),
    ),
    "person edits unrelated annotations as we remove ours": (
        {**OURS, "owner": "x"},
        "release",
        both(set_("team", "b"), remove("owner")),
        ({"team": "b"}, {"team": "b", **OURS}, {"team": "b"}),
    ),
    "person removes an unrelated annotation as we add ours": (
        {"owner": "x", "team": "a"},
        "hold",
        remove("owner"),
        ({"team": "a", **OURS}, {"team": "a", **OURS}, {"team": "a"}),
    ),
}


@pytest.mark.parametrize("case", list(RACES))
def test_a_persons_edit_between_our_list_and_our_patch_survives(
    api: ApiServer, kubeconfig: Path, case: str
) -> None:
    before, phase, edit, (after, next_hold, next_release) = RACES[case]
    old(api, "n", annotations=before)
    if phase == "hold":
        young(api, "trigger")
    bodies, hook = edit_before_first_patch(api, "n", edit)

    result = reconcile(kubeconfig)

    assert result.code == 0, result.stderr
    assert api.annotations("n") == after
    statuses = [r.status for r in api.writes() if r.path == f"{NODES}/n"]
    assert statuses[0] == 409  # the guard caught the person's edit ...
    assert set(statuses[1:]) <= {200}  # ... and the decision was taken again on what they left
    theirs = KEY in after and after.get(MARKER) != KEY
    for body in bodies[1:]:  # what we sent after the re-read
        sent = json.loads(body)["metadata"]["annotations"]
        assert set(sent) <= {KEY, MARKER}  # never one of their other annotations
        assert not (theirs and KEY in sent)  # never their hold annotation
        assert not (theirs and KEY in (sent.get(MARKER) or ""))  # never a claim on it

    # A whole cycle later (a hold, then its end) their change is still there, never claimed.
    api.remove_hook(hook)
    young(api, "later")
    assert reconcile(kubeconfig).code == 0
    assert api.annotations("n") == next_hold
    api.advance_clock(HOLD + timedelta(minutes=1))
    assert reconcile(kubeconfig).code == 0
    assert api.annotations("n") == next_release


def test_a_node_edited_before_every_patch_is_reported_and_nothing_is_lost(
    api: ApiServer, kubeconfig: Path
) -> None:
    old(api, "a")
    young(api, "busy")
    edits = []

    def person_keeps_editing(req: RequestInfo) -> None:
        if req.method == "PATCH" and req.path == f"{NODES}/busy":
            edits.append(len(edits))
            api.set_annotation("busy", f"edit-{len(edits)}", "yes")

    api.on_request(person_keeps_editing)
    result = reconcile(kubeconfig, "--timeout", "10s")

    assert result.code == 1
    assert "busy" in result.stderr.splitlines()[-1]
    assert "node/busy: failed to add" in result.stdout
    assert "still conflicting after 5 re-reads" in result.stdout
    assert api.annotations("a") == OURS
    # Every one of the person's edits is there, and our annotation never landed on it.
    assert api.annotations("busy") == {f"edit-{i + 1}": "yes" for i in range(len(edits))}
    assert [r.status for r in api.writes() if r.path == f"{NODES}/busy"] == [409] * 6


def test_a_node_deleted_between_a_conflict_and_its_re_read_is_skipped(
    api: ApiServer, kubeconfig: Path
) -> None:
    old(api, "a")
    young(api, "gone")

    def edit_then_delete(req: RequestInfo) -> None:
        if req.path != f"{NODES}/gone":
            return
        if req.method == "PATCH":
            api.set_annotation("gone", "team", "x")  # our patch now conflicts ...
        elif req.method == "GET":
            api.delete_node("gone")  # ... and the node is gone before we read it again

    api.on_request(edit_then_delete)
    result = reconcile(kubeconfig)

    assert result.code == 0, result.stderr
    assert "node/gone: deleted meanwhile; skipped" in result.stdout
    assert api.annotations("a") == OURS
    assert api.node_names() == ["a"]


# --- two runs at once (the scheduled job and a manual one) -----------------------------


def both_list_first(api: ApiServer) -> tuple[threading.Barrier, Callable[[RequestInfo], None]]:
    """Hold each run's second list page until both runs are there.

    Continued pages are served from the snapshot of the first page, so both runs
    decide on the same state, and neither patches before the other has listed.
    """
    barrier = threading.Barrier(2, timeout=20)

    def hook(req: RequestInfo) -> None:
        if req.method == "GET" and req.path == NODES and "continue" in req.query:
            barrier.wait()

    return barrier, api.on_request(hook)


def two_runs_at_once(kubeconfig: Path) -> list[RunResult]:
    run = RunSettings(page_size=20, workers=4, qps=0)
    results: list[RunResult] = []
    errors: list[BaseException] = []

    def one() -> None:
        try:
            results.append(
                run_once(kube_for(kubeconfig), HoldSettings(), run, word_event=word_event)
            )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert len(results) == 2
    return results


def successful_patches(api: ApiServer) -> Counter[str]:
    return Counter(r.path.rsplit("/", 1)[1] for r in api.writes() if r.status == 200)


def test_two_runs_at_once_converge_with_one_write_per_node_and_no_flapping(
    api: ApiServer, kubeconfig: Path
) -> None:
    plain = [f"n{i:02}" for i in range(30)]
    old(api, *plain)
    old(api, "exempt", annotations={KEY: "false"})
    old(api, "theirs", annotations={KEY: "true", "team": "a"})
    young(api, "new")
    changing = [*plain, "new"]

    barrier, hook = both_list_first(api)
    held = two_runs_at_once(kubeconfig)

    assert barrier.n_waiting == 0 and not barrier.broken
    assert successful_patches(api) == Counter(changing)  # every node written once, by one run
    assert [r.status for r in api.writes()].count(409) == len(changing)  # the other run: 409
    outcomes = Counter(r.outcome for result in held for r in result.applied.results)  # type: ignore[union-attr]
    assert outcomes == {Outcome.PATCHED: len(changing), Outcome.SETTLED: len(changing)}
    assert all(api.annotations(n) == OURS for n in changing)
    assert api.annotations("exempt") == {KEY: "false"}
    assert api.annotations("theirs") == {KEY: "true", "team": "a"}

    # The hold ends; both runs release at once: again one write per node, nothing else lost.
    api.remove_hook(hook)
    api.reset_log()
    api.advance_clock(HOLD)
    both_list_first(api)
    released = two_runs_at_once(kubeconfig)

    assert all(not held_plan(r.plan) for r in released)
    assert successful_patches(api) == Counter(changing)
    assert all(api.annotations(n) == {} for n in changing)
    assert api.annotations("exempt") == {KEY: "false"}
    assert api.annotations("theirs") == {KEY: "true", "team": "a"}

    # Settled: the next run has nothing to write.
    api.reset_log()
    assert reconcile(kubeconfig).code == 0
    assert api.writes() == []


# --- a slow run and a later run's --max-hold cap ----------------------------------------


def test_a_slow_run_decides_again_from_the_stamps_a_later_run_wrote(
    api: ApiServer, kubeconfig: Path
) -> None:
    """Run B lists while the stretch may still hold; run A, later, finds the cap reached,
    releases and stamps the free period. B's patch then meets a node A changed (409): B
    decides again from what it reads, stamps included, and does not put the hold back."""
    started, free = "node-holder.dev/hold-started", "node-holder.dev/free-until"
    t0 = api.now().replace(microsecond=0)
    api.set_clock(t0)
    stretch = t0 - timedelta(minutes=60) + timedelta(seconds=15)  # the cap: t0 + 15s
    stamp = {**OURS, started: stretch.strftime("%Y-%m-%dT%H:%M:%SZ")}
    api.add_node("first", created=stretch, eks=False, annotations=stamp)
    api.add_node("young", created=t0 - timedelta(minutes=5), eks=False, annotations=stamp)
    api.add_node("newcomer", created=t0 - timedelta(minutes=1), eks=False)
    capped = HoldSettings(hold_duration=HOLD, max_hold=timedelta(hours=1))
    run = RunSettings(events=False)
    later: list[RunResult] = []
    hooked: list[bool] = []

    def a_later_run_first(req: RequestInfo) -> None:
        if req.method == "PATCH" and req.path == f"{NODES}/newcomer" and not hooked:
            hooked.append(True)  # once: A's own patch of that node comes through here too
            api.advance_clock(timedelta(seconds=30))  # past the cap
            later.append(run_once(kube_for(kubeconfig), capped, run, word_event=word_event))

    api.on_request(a_later_run_first)
    slow = run_once(kube_for(kubeconfig), capped, run, word_event=word_event)

    assert held_plan(slow.plan) and not held_plan(later[0].plan)  # B saw a hold, A the cap
    (result,) = slow.applied.results  # type: ignore[union-attr]
    assert result.node == "newcomer" and result.conflicts == 1
    assert result.outcome is Outcome.SETTLED, result  # nothing left to do: no hold put back
    free_until = (t0 + timedelta(seconds=30) + HOLD).strftime("%Y-%m-%dT%H:%M:%SZ")
    for name in ("first", "young", "newcomer"):
        assert api.annotations(name) == {free: free_until}, name
