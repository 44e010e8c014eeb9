"""A model-based (stateful) property test through the API test server.

Hypothesis drives random sequences of: nodes added (young, old, or created ahead of the
server's clock as through a skewed API server; with or without people's annotations),
deleted or marked deleting; people editing annotations, at rest or in the middle of a
run (between our list and our patch), and pinning or unpinning nodes with
`node-holder pin`/`unpin`; clock steps; injected faults (throttling, 5xx, resets, slow
answers that land late, conflicts, expired continue tokens, 403); and runs of the real
`run_once` over HTTP.

The oracle is a pure model of who set what: for each node, the annotations people
set, and whether the tool's hold annotation is on it. After every step:
- annotations set by others are exactly as they set them (never altered or removed);
- the tool's annotation never appears without its marker, and a marker that claims a
  missing or changed annotation only exists after a person changed ours;
- a pinned key and `node-holder.dev/pinned` are a person's: no run changes them;
after every run:
- a node gained the hold only while held, and lost it only while released (so the
  cluster is never released while a non-deleting node younger than the hold exists);
- stored writes went only to nodes whose state required one, at most one per node;
- no node's age and no window's youngest node or stretch is dated after now;
after the faults stop, one run reaches exactly the desired state with exactly one
write per node that needed one.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from reconcile.cli.summary import word_event
from reconcile.cluster.client import Client
from reconcile.cluster.pace import Backoff
from reconcile.cluster.read import ListFailed
from reconcile.rule.decide import Mode
from reconcile.rule.nodes import claimed_keys
from reconcile.rule.settings import HoldSettings, RunSettings
from reconcile.run import RunResult, run_once
from tests.helpers import KEY, MARKER, NODES, Arrivals, kube_for
from tests.kubeapi.apiserver import ApiServer, Fault, RequestInfo
from tests.support import held as held_plan

HOLD = timedelta(minutes=20)
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
MAX_NODES = 7
RUN = RunSettings(page_size=2, workers=3, qps=0, timeout=timedelta(seconds=20))
FAST = Backoff(base=0.002, cap=0.01, attempts=4)  # real retries, without the real pauses
FAULTY_TIMEOUT = 0.1  # --request-timeout while faults are armed
SLOW = 0.2  # longer than FAULTY_TIMEOUT: we give up, the server still handles it
CLEAN_TIMEOUT = 10.0  # once the faults stop: no request may time out on a busy machine

PINNED = "node-holder.dev/pinned"
#: Negative: created ahead of the server's clock (a node created through a skewed server).
AGES = [
    timedelta(0),
    timedelta(minutes=1),
    HOLD - timedelta(seconds=1),
    HOLD,
    timedelta(hours=3),
    -timedelta(hours=3),
]
STEPS = [timedelta(seconds=1), timedelta(minutes=5), HOLD - timedelta(seconds=1), HOLD]
START = [{}, {"team": "a"}, {KEY: "false"}, {KEY: "true"}, {KEY: "true", "team": "b"}]
KEYS = ["team", "owner", KEY, KEY]
VALUES = [None, "a", "true", "false", ""]

PATCH_FAULTS = {
    "503": Fault(method="PATCH", status=503),
    "429": Fault(method="PATCH", status=429, retry_after=0),
    "500 twice": Fault(method="PATCH", status=500, times=2),
    "reset": Fault(method="PATCH", drop_connection=True),
    "slow, lands late": Fault(method="PATCH", delay=SLOW),
    "409 without a change": Fault(method="PATCH", status=409),
    "404": Fault(method="PATCH", status=404),
    "403": Fault(method="PATCH", status=403),
}
READ_FAULTS = {
    "list 503": Fault(method="GET", path=NODES + "$", status=503),
    "list 504 until the run gives up": Fault(method="GET", path=NODES + "$", status=504, times=4),
    "list reset": Fault(method="GET", path=NODES + "$", drop_connection=True),
    "list slow": Fault(method="GET", path=NODES + "$", delay=SLOW),
    "list 401": Fault(method="GET", path=NODES + "$", status=401),
    "re-read 503": Fault(method="GET", path=NODES + "/", status=503),
    "event 500": Fault(method="POST", path="/events$", status=500, times=2),
}
ALL_FAULTS = {**PATCH_FAULTS, **READ_FAULTS}


def pick(data: st.DataObject, items: list[str], label: str) -> str:
    """One of `items`, drawn with the same constraints whatever their number: which nodes a
    run left held (and so `items`) can differ when Hypothesis replays a case on a loaded
    machine (a slow answer lands late), and a draw whose bounds changed is a flaky strategy."""
    return items[data.draw(st.integers(0, 4 * MAX_NODES - 1), label=label) % len(items)]


@dataclass
class NodeModel:
    created: datetime
    people: dict[str, str] = field(default_factory=dict)  # what people set: sacred
    deleting: bool = False
    ours: bool = False  # the tool's hold annotation (and its marker) is on the node
    stale: bool = False  # a person removed or changed ours; the marker may still claim it
    pinned_ours: bool = False  # pinned over a "true" the tool wrote: the claim stays for unpin


class NodeHolder(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.api = ApiServer().start()
        self.api.set_clock(T0)
        self.tmp = Path(tempfile.mkdtemp(prefix="stateful-"))
        kubeconfig = self.api.write_kubeconfig(self.tmp / "kubeconfig")
        self.faulty_kube = kube_for(kubeconfig, request_timeout=FAULTY_TIMEOUT)
        self.clean_kube = kube_for(kubeconfig, request_timeout=CLEAN_TIMEOUT)
        self.arrivals = Arrivals(self.api)
        self.model: dict[str, NodeModel] = {}
        self.next_name = 0
        self.race_hooks: list[Callable[[RequestInfo], None]] = []

    def teardown(self) -> None:
        self.api.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- the oracle ---------------------------------------------------------------

    def held(self) -> bool:
        now = self.api.now()
        return any(not n.deleting and now < n.created + HOLD for n in self.model.values())

    def desired(self, name: str, held: bool) -> dict[str, str]:
        node = self.model[name]
        if node.deleting:  # never patched: whatever it carries stays
            return self.api.annotations(name)
        pinned = node.people.get(PINNED) == KEY  # a person's pin: never added, even if gone
        wanted = node.pinned_ours or (held and KEY not in node.people and not pinned)
        return {**node.people, **({KEY: "true", MARKER: KEY} if wanted else {})}

    def person_edits(self, name: str, key: str, value: str | None) -> None:
        """A person sets (or, with None, removes) one annotation; the model records who did."""
        node = self.model[name]
        if key == KEY and node.pinned_ours:
            if value != "true":  # the person changes a pinned value the tool wrote: theirs now
                node.pinned_ours, node.stale = False, True
                node.people.pop(KEY, None) if value is None else node.people.update({KEY: value})
        elif key == KEY:
            claimed = KEY in claimed_keys(self.api.annotations(name))
            if value == "true" and claimed:
                # Writing back the value the marker claims is indistinguishable from ours
                # (a documented limit): the tool treats it as its own, pinned if it is pinned.
                node.people.pop(KEY, None)
                pinned = node.people.get(PINNED) == KEY
                node.ours, node.pinned_ours, node.stale = not pinned, pinned, False
            else:
                if value is None:
                    node.people.pop(KEY, None)
                else:
                    node.people[KEY] = value
                if node.ours:
                    node.ours, node.stale = False, True
        elif value is None:
            node.people.pop(key, None)
        else:
            node.people[key] = value
        self.api.set_annotation(name, key, value)

    # --- the cluster changes ----------------------------------------------------------

    @initialize(
        nodes=st.lists(
            st.tuples(st.sampled_from(AGES), st.sampled_from(START)), min_size=2, max_size=5
        )
    )
    def a_cluster(self, nodes: list[tuple[timedelta, dict[str, str]]]) -> None:
        for age, people in nodes:
            self.add_node(age, people)

    def add_node(self, age: timedelta, people: dict[str, str]) -> None:
        name = f"n{self.next_name}"
        self.next_name += 1
        created = self.api.now() - age
        self.api.add_node(name, created=created, annotations=dict(people), eks=False)
        self.model[name] = NodeModel(created=created, people=dict(people))

    def something_changes(self, data: st.DataObject) -> None:
        """A node comes or goes, a person edits annotations, or time passes."""
        names = sorted(self.model)
        living = [n for n in names if not self.model[n].deleting]
        actions = ["clock moves"]
        actions += ["node added"] if len(names) < MAX_NODES else []
        actions += ["node deleted", "person edits", "person edits"] if names else []
        actions += ["node marked deleting"] if living else []
        action = data.draw(st.sampled_from(actions), label="change")
        if action == "clock moves":
            self.api.advance_clock(data.draw(st.sampled_from(STEPS), label="step"))
        elif action == "node added":
            age = data.draw(st.sampled_from(AGES), label="age")
            self.add_node(age, data.draw(st.sampled_from(START), label="people"))
        elif action == "node deleted":
            name = data.draw(st.sampled_from(names), label="node")
            self.api.delete_node(name)
            del self.model[name]
        elif action == "node marked deleting":
            name = data.draw(st.sampled_from(living), label="node")
            self.api.mark_deleting(name)
            self.model[name].deleting = True
        else:
            self.person_edits(*self.draw_edit(data, names))

    def draw_edit(self, data: st.DataObject, names: list[str]) -> tuple[str, str, str | None]:
        """A person's edit; nodes that carry our hold are the interesting ones, so likelier."""
        ours = [n for n in names if self.model[n].ours]
        name = pick(data, ours + names, "node")
        key = data.draw(st.sampled_from(KEYS), label="key")
        value = data.draw(st.sampled_from(VALUES), label="value (None: removed)")
        return name, key, value

    # --- faults -----------------------------------------------------------------------

    def something_goes_wrong(self, data: st.DataObject) -> None:
        """Arm a fault for the next run(s): the API's, or a person's edit mid-run."""
        held = self.held()
        names = sorted(self.model)
        # Nodes the next run will patch: a person's edit between our list and our patch
        # matters there.
        targets = [n for n in names if self.api.annotations(n) != self.desired(n, held)]
        kinds = [*ALL_FAULTS, "continue tokens expire", *["person edits mid-run"] * 4]
        kind = data.draw(st.sampled_from(kinds), label="fault")
        if kind in ALL_FAULTS:
            self.api.inject(replace(ALL_FAULTS[kind]))
        elif kind == "continue tokens expire":
            self.continue_tokens_expire(data.draw(st.integers(1, 4), label="times"))
        elif targets:  # else no node is left to patch: nothing to edit mid-run
            self.person_edits_during_the_next_patch(*self.draw_edit(data, targets))

    def continue_tokens_expire(self, times: int) -> None:
        """The next `times` continued list pages find their token expired (410)."""
        left = [times]

        def hook(req: RequestInfo) -> None:
            if req.method == "GET" and req.path == NODES and "continue" in req.query and left[0]:
                left[0] -= 1
                self.api.compact()

        self.race_hooks.append(self.api.on_request(hook))

    def person_edits_during_the_next_patch(self, name: str, key: str, value: str | None) -> None:
        """Between our list and our patch of this node, a person edits it."""
        done: list[bool] = []

        def hook(req: RequestInfo) -> None:
            if req.method == "PATCH" and req.path == f"{NODES}/{name}" and not done:
                done.append(True)
                if name in self.model:
                    self.person_edits(name, key, value)

        self.race_hooks.append(self.api.on_request(hook))

    # --- a person pins or unpins a node (`node-holder pin`, the person's credentials) ----

    @rule(data=st.data())
    def a_person_pins_or_unpins(self, data: st.DataObject) -> None:
        if not self.model:
            return
        self.stop_faults()
        name = data.draw(st.sampled_from(sorted(self.model)), label="node")
        mode = data.draw(st.sampled_from([Mode.PIN, Mode.UNPIN]), label="command")
        run = replace(RUN, mode=mode, only=(name,), events=False)
        result = run_once(self.clean_kube, HoldSettings(), run, word_event=word_event, backoff=FAST)
        node = self.model[name]
        found = self.api.annotations(name)
        refused = mode is Mode.PIN and node.people.get(KEY, "true") != "true"
        if node.deleting:  # never patched, never refused
            assert not result.errors and not result.missing, result.errors
            return
        if refused:  # a person's "false" is not overwritten: nothing changes
            assert [e.split(":")[:2] for e in result.errors] == [[f"node/{name}", " not pinned"]]
        else:
            assert not result.errors and not result.missing, result.errors
        if mode is Mode.PIN and not refused:
            # Pinned: a person's "true" stays theirs; a "true" the tool wrote (or this pin
            # adds, also again on a pinned node whose key someone removed) keeps its claim,
            # so that unpin hands it back.
            again = PINNED in node.people
            node.people[PINNED] = KEY
            node.pinned_ours = (again and node.pinned_ours) or KEY not in node.people
            node.ours = node.stale = False
        elif mode is Mode.UNPIN and PINNED in node.people:  # back to the normal rule
            del node.people[PINNED]
            node.ours, node.pinned_ours = node.pinned_ours, False
        theirs = node.ours or node.pinned_ours
        expected = {**node.people, **({KEY: "true", MARKER: KEY} if theirs else {})}
        if node.stale and found.get(MARKER) == KEY:
            expected[MARKER] = KEY  # a claim someone broke: the next run drops it
        assert found == expected

    def stop_faults(self) -> None:
        self.api.clear_faults()
        for hook in self.race_hooks:
            self.api.remove_hook(hook)
        self.race_hooks.clear()

    # --- runs: each step is one CronJob minute ---------------------------------------

    @rule(data=st.data())
    def a_minute_passes(self, data: st.DataObject) -> None:
        """Some changes, maybe some faults, then the scheduled run."""
        for _ in range(data.draw(st.integers(0, 3), label="changes")):
            self.something_changes(data)
        for _ in range(data.draw(st.integers(0, 2), label="faults")):
            self.something_goes_wrong(data)
        self.run(self.faulty_kube)

    @rule(data=st.data())
    def the_faults_stop(self, data: st.DataObject) -> None:
        """Some changes, no faults any more: one run reaches exactly the desired state."""
        for _ in range(data.draw(st.integers(0, 2), label="changes")):
            self.something_changes(data)
        self.stop_faults()
        held = self.held()
        needed = {n for n in self.model if self.api.annotations(n) != self.desired(n, held)}

        result, stored = self.run(self.clean_kube)

        assert result is not None and not result.errors, result and result.errors
        for name in self.model:
            assert self.api.annotations(name) == self.desired(name, held), name
        assert stored == Counter(needed)  # exactly the writes the state required
        assert len(self.api.writes()) == len(needed)  # and nothing else: no 409, no retry

    def run(self, kube: Client) -> tuple[RunResult | None, Counter[str]]:
        """One run; returns its result (None: the list failed) and its stored writes."""
        self.arrivals.reset()
        before = {n: self.api.annotations(n) for n in self.model}
        held = self.held()
        needed = {n for n in self.model if before[n] != self.desired(n, held)}
        try:
            result: RunResult | None = run_once(
                kube, HoldSettings(), RUN, word_event=word_event, backoff=FAST
            )
        except ListFailed:
            result = None
        self.arrivals.quiesce()  # requests we gave up on may land late: let them
        stored = Counter(r.path.rsplit("/", 1)[1] for r in self.api.writes() if r.status == 200)
        if result is None:
            assert self.api.writes() == []  # never act on part of a list
            assert {n: self.api.annotations(n) for n in self.model} == before
        else:
            assert held_plan(result.plan) == held
            now = result.plan.now  # nothing dated after it, whatever the nodes' clocks said
            assert all(d.created <= now for d in result.plan.decisions)
            assert all((w.youngest_created or now) <= now for w in result.plan.windows)
            assert all((w.stretch_start or now) <= now for w in result.plan.windows)
        assert set(stored) <= needed, f"wrote {set(stored) - needed}, which needed nothing"
        assert all(count == 1 for count in stored.values()), stored
        self.check_transitions(held)
        return result, stored

    def check_transitions(self, held: bool) -> None:
        """What the run changed moved each node towards the decision, never away from it."""
        for name, node in self.model.items():
            found = self.api.annotations(name)
            claimed = KEY in claimed_keys(found) and found.get(KEY) == "true"
            ours = claimed and PINNED not in found
            assert node.pinned_ours == (claimed and PINNED in found), name  # no run touches a pin
            if ours and not node.ours:  # the tool added its hold: only while held
                assert held and not node.deleting, name
            if node.ours and not ours:  # the tool removed its hold: only while released
                assert not held, f"{name} released while a young node exists"
            stale = KEY in claimed_keys(found) and not claimed
            assert not stale or node.stale, f"{name}: marker without its annotation"
            node.ours, node.stale = ours, stale

    # --- after every step ----------------------------------------------------------------

    @invariant()
    def others_annotations_are_untouched_and_ours_come_with_the_marker(self) -> None:
        assert self.api.node_names() == sorted(self.model)
        for name, node in self.model.items():
            found = self.api.annotations(name)
            for key, value in node.people.items():
                assert found.get(key) == value, (name, key)  # never altered, never removed
            unrelated = {k: v for k, v in found.items() if k not in (KEY, MARKER)}
            assert unrelated == {k: v for k, v in node.people.items() if k != KEY}, name
            claimed = claimed_keys(found)
            assert claimed <= {KEY}, name
            backed = found.get(KEY) == "true" and KEY in claimed
            assert (backed and PINNED not in found) == node.ours, name
            assert (backed and PINNED in found) == node.pinned_ours, name
            if KEY in found and KEY not in node.people:
                assert backed, f"{name}: our annotation without our marker"
            if claimed and not backed:
                assert node.stale, f"{name}: our marker without our annotation"


NodeHolder.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestNodeHolder = NodeHolder.TestCase
