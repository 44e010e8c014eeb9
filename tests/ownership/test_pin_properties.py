"""Nothing lost through pins: whatever a person's annotations were before, any sequence of
`pin`, `unpin`, `reconcile` and `release` in which every pin is later undone by `unpin`
leaves every node, once the hold is over, exactly as it started.

The commands are the pure decision (`decide`) applied as the API server merges its patches;
tests/ownership/test_pins.py runs the same rules through the real CLI over HTTP.
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from reconcile.rule.decide import decide
from reconcile.rule.nodes import NodeView
from reconcile.rule.settings import HoldSettings, Mode
from tests.support import T0, apply_plan, node

KEY = "karpenter.sh/do-not-disrupt"
CA_KEY = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
HOLD = timedelta(minutes=20)
NAMES = ("a", "b", "c")

#: A person's annotations before anything runs: hold keys with any value, and others.
people = st.dictionaries(
    st.sampled_from([KEY, CA_KEY, "team"]), st.sampled_from(["true", "false", "", "x"])
)
holds = st.sampled_from([HoldSettings(), HoldSettings(annotations=(KEY, CA_KEY))])
#: ("pin" | "unpin", node), "reconcile", "release", "wait" (minutes pass), "arrive" (a new
#: node starts a hold).
steps = st.lists(
    st.one_of(
        st.tuples(st.sampled_from([Mode.PIN, Mode.UNPIN]), st.sampled_from(NAMES)),
        st.sampled_from([Mode.RECONCILE, Mode.RELEASE, "wait", "arrive"]),
    ),
    max_size=14,
)


def run(nodes: list[NodeView], now, hold: HoldSettings, mode: Mode, only=()) -> list[NodeView]:
    named = [n for n in nodes if n.name in only] if only else nodes
    plan = decide(named, now, hold, mode)
    return apply_plan(nodes, plan.patches)


@settings(max_examples=400, deadline=None)
@given(start=st.fixed_dictionaries(dict.fromkeys(NAMES, people)), hold=holds, steps=steps)
def test_pins_undone_leave_every_node_as_it_started(
    start: dict[str, dict[str, str]], hold: HoldSettings, steps: list
) -> None:
    nodes = [node(name, timedelta(hours=3), annotations=start[name]) for name in NAMES]
    now, last_pin = T0, {}
    for step in steps:
        if step == "wait":
            now += timedelta(minutes=7)
        elif step == "arrive":
            nodes.append(node(f"new-{len(nodes)}", timedelta(0), now=now))
        elif isinstance(step, tuple):
            mode, name = step
            nodes = run(nodes, now, hold, mode, only=(name,))
            last_pin[name] = mode
        else:
            nodes = run(nodes, now, hold, step)
    for name, mode in last_pin.items():  # every pin is undone
        if mode is Mode.PIN:
            nodes = run(nodes, now, hold, Mode.UNPIN, only=(name,))
    now += HOLD  # the hold is over: the next run ends it
    nodes = run(nodes, now, hold, Mode.RECONCILE)
    assert {n.name: n.annotations for n in nodes if n.name in NAMES} == start
    assert all(n.annotations == {} for n in nodes if n.name not in NAMES)
