"""`--max-hold` over time: a hypothesis state machine with nodes coming and going.

Nodes arrive (some created through an API server whose clock runs hours ahead) and are
deleted (spot interruptions, expiry, Karpenter itself) during long stretches; runs crash
half-way (patches dropped), are missed, or run twice at once. After
every clean run the bound is checked on what the API test server holds: no node carries
our hold continuously for longer than --max-hold, and after a stretch the cap ended, no
hold starts again for one hold duration, unless every node carrying that free period was
deleted between two runs (the state lives on the nodes).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
from datetime import datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from reconcile.cli.summary import word_event
from reconcile.cluster.pace import Backoff
from reconcile.cluster.read import ListFailed
from reconcile.rule.decide import claimed_keys
from reconcile.rule.settings import HoldSettings, RunSettings
from reconcile.run import run_once
from tests.helpers import KEY, kube_for
from tests.kubeapi.apiserver import ApiServer, Fault

FREE_UNTIL = "node-holder.dev/free-until"

T0 = datetime.fromisoformat("2026-11-22T12:00:00+00:00")
HOLD = timedelta(minutes=20)
MAX = timedelta(minutes=40)
SETTINGS = HoldSettings(hold_duration=HOLD, max_hold=MAX)
RUN = RunSettings(timeout=timedelta(seconds=20), workers=4, events=False)
FAST = Backoff(base=0.001, cap=0.002, attempts=2)


class MaxHold(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.api = ApiServer().start()
        self.api.set_clock(T0)
        self.tmp = Path(tempfile.mkdtemp(prefix="maxhold-"))
        self.kube = kube_for(self.api.write_kubeconfig(self.tmp / "kc"), request_timeout=5)
        self.api.add_node("base", created=T0 - timedelta(hours=5), eks=False)
        self.names = 0
        self.held_since: dict[str, datetime] = {}  # per node: held by us continuously since
        self.cap_free_until: datetime | None = None  # after a capped release: no hold before
        self.seen: set[str] = set()  # the nodes there at the last look (a run saw them)

    def teardown(self) -> None:
        self.api.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- the world -------------------------------------------------------------------

    @rule(minutes=st.integers(1, 8))
    def time_passes(self, minutes: int) -> None:
        self.api.advance_clock(timedelta(minutes=minutes))

    @rule(count=st.integers(1, 3))
    def batch_nodes_arrive(self, count: int) -> None:
        for _ in range(count):
            self.names += 1
            self.api.add_node(f"n{self.names}", created=self.api.now(), eks=False)

    @rule(hours=st.integers(1, 3))
    def a_node_from_a_skewed_server(self, hours: int) -> None:
        """Created "in the future": its stretch still starts no later than the run that
        sees it, so the cap counts from there."""
        self.names += 1
        created = self.api.now() + timedelta(hours=hours)
        self.api.add_node(f"n{self.names}", created=created, eks=False)

    @rule(data=st.data())
    def a_node_goes_away(self, data: st.DataObject) -> None:
        names = self.api.node_names()  # "base" too: consolidation may take every old node
        if names:
            name = data.draw(st.sampled_from(sorted(names)), label="deleted")
            self.api.delete_node(name)
            self.held_since.pop(name, None)

    @rule(lifetime=st.integers(10, 30))
    def a_batch_minute(self, lifetime: int) -> None:
        """The churn the cap is for: a node arrives, nodes older than `lifetime` minutes
        are gone (spot, expiry, Karpenter), five minutes pass, the CronJob runs."""
        self.api.advance_clock(timedelta(minutes=5))
        self.batch_nodes_arrive(1)
        for name in self.api.node_names():
            if name != "base" and self.api.now() - self._created(name) >= timedelta(
                minutes=lifetime
            ):
                self.api.delete_node(name)
                self.held_since.pop(name, None)
        self.a_clean_run()

    # --- runs ----------------------------------------------------------------------------

    @rule()
    def a_clean_run(self) -> None:
        self._run()
        self._observe()

    @rule(data=st.data())
    def a_run_crashes_half_way(self, data: st.DataObject) -> None:
        """Some patches never land (the pod was killed); the next run must finish the job."""
        fault = Fault(method="PATCH", drop_connection=True, times=data.draw(st.integers(1, 4)))
        self.api.inject(fault)
        self._run()
        self.api.clear_faults()
        self._run()
        self._observe()

    @rule()
    def two_runs_at_once(self) -> None:
        threads = [threading.Thread(target=self._run) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self._run()  # whatever the race left (409s give up after re-reads) converges here
        self._observe()

    def _run(self) -> None:
        with contextlib.suppress(ListFailed):  # a failed list changes nothing: fine here
            run_once(self.kube, SETTINGS, RUN, word_event=word_event, backoff=FAST)

    def _observe(self) -> None:
        """After a run that converged: record who is held since when, check the bound."""
        now = self.api.now()
        names = set(self.api.node_names())
        if self.cap_free_until is not None and not self.seen & names:
            # Every node a run saw during the free period (each carries it) was deleted before
            # the next run could copy it to the newcomers: the state lived on those nodes, so
            # the cluster has forgotten it (docs/design.md, --max-hold). Anything less must
            # keep the free period.
            self.cap_free_until = None
        self.seen = names
        was_held = bool(self.held_since)
        for name in self.api.node_names():
            found = self.api.annotations(name)
            ours = found.get(KEY) == "true" and KEY in claimed_keys(found)
            if ours:
                self.held_since.setdefault(name, now)
            else:
                self.held_since.pop(name, None)
        held = bool(self.held_since)
        young = any(now - self._created(n) < HOLD for n in self.api.node_names() if n != "base")
        if was_held and not held and young:
            self.cap_free_until = now + HOLD  # free for one hold duration from the release
        if held and not was_held and self.cap_free_until is not None:
            assert now >= self.cap_free_until, "a hold started during the free period"
        for name, since in self.held_since.items():
            assert now - since <= MAX, f"{name} held since {since}, now {now}"
        if self.cap_free_until is not None and now < self.cap_free_until and not held:
            for name in names:  # the free period is on every node, so that it outlives any
                assert FREE_UNTIL in self.api.annotations(name), name

    def _created(self, name: str) -> datetime:
        node = self.api.get_node(name)
        assert node is not None
        return datetime.fromisoformat(node["metadata"]["creationTimestamp"].replace("Z", "+00:00"))

    @invariant()
    def nothing_of_ours_without_the_hold(self) -> None:
        """Our stamps travel with our hold: no node keeps hold-started without it."""
        for name in self.api.node_names():
            found = self.api.annotations(name)
            if "node-holder.dev/hold-started" in found and name not in self.held_since:
                assert found.get(KEY) == "true", name  # only mid-crash, before observation


MaxHold.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMaxHold = MaxHold.TestCase
