"""The NodePool admission policy of the budget mechanism
(cronjob/components/budget-mechanism/nodepool-policy.yaml, and the chart's, rendered the same),
evaluated with cel-python as test_admission_policy.py evaluates the node policy.

The tool's own requests are not written by hand: the real CLI runs against the API test server
(add with other entries present and with an empty list, extend, a GitOps revert, auto, release,
the uninstall hook), and a request hook evaluates the policy on every NodePool PATCH the way the
API server would (the JSON Patch applied to the stored NodePool, the field manager's record of
the update) and answers 422 if it denies. Every run must succeed with every patch admitted.
Then every way a stolen token could abuse a NodePool must be denied.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from tests.clusters import run_cli
from tests.install.test_admission_policy import HOOK_USER, OUR_USER, Verdict, admit
from tests.install.test_manifests import CRONJOB_DIR, needs_kubectl, only, render
from tests.kubeapi import karpenter, managedfields
from tests.kubeapi.apiserver import ApiServer, RequestInfo
from tests.kubeapi.patching import apply_json_patch
from tests.kubeapi.statuses import ApiError

POLICY_FILE = CRONJOB_DIR / "components" / "budget-mechanism" / "nodepool-policy.yaml"
KEY = "node-holder.dev/budget"
T0 = datetime(2026, 11, 22, 20, tzinfo=UTC)
PEOPLES = [{"nodes": "10%"}, {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}]


def policy() -> dict[str, Any]:
    return only(
        [d for d in yaml.safe_load_all(POLICY_FILE.read_text()) if d], "ValidatingAdmissionPolicy"
    )


def admit_pool(old: dict[str, Any], new: dict[str, Any], username: str = OUR_USER) -> Verdict:
    return admit(old, new, username=username, policy=policy())


def ours(schedule: str = "0 20 22 11 *", duration: str = "20m") -> dict[str, Any]:
    return {
        "duration": duration,
        "nodes": "0",
        "reasons": ["Empty", "Underutilized"],
        "schedule": schedule,
    }


def stripped(entry: dict[str, Any]) -> dict[str, Any]:
    """`entry` as Karpenter v0.34 to v0.37 store it (no `reasons`)."""
    return {k: v for k, v in entry.items() if k != "reasons"}


def named(entry: dict[str, Any]) -> str:
    return json.dumps(entry, separators=(",", ":"), sort_keys=True)


def nodepool(budgets: list[dict[str, Any]], annotation: str | None = None) -> dict[str, Any]:
    pool = karpenter.make_nodepool("batch", budgets=budgets)
    pool["metadata"].update(resourceVersion="7", uid="6f1c9e8a-0000-4000-8000-00000000000a")
    pool["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    if annotation is not None:
        pool["metadata"]["annotations"][KEY] = annotation
    return pool


def changed(pool: dict[str, Any], change: Any) -> dict[str, Any]:
    new = copy.deepcopy(pool)
    change(new)
    return new


HELD = nodepool([*PEOPLES, ours()], named(ours()))
FREE = nodepool(list(PEOPLES))
EMPTY_HELD = nodepool([ours()], named(ours()))

ALLOWED = {
    "nothing changed": (FREE, FREE),
    "our entry added after the others": (FREE, HELD),
    "our entry added to an empty list": (nodepool([]), EMPTY_HELD),
    "our entry removed, the empty list restored": (EMPTY_HELD, nodepool([])),
    "our entry removed": (HELD, FREE),
    "our entry extended in place": (
        HELD,
        nodepool([*PEOPLES, ours(duration="1h5m")], named(ours(duration="1h5m"))),
    ),
    "a stale annotation dropped (a GitOps tool removed our entry)": (
        nodepool(list(PEOPLES), named(ours())),
        FREE,
    ),
    "our entry added again after a revert": (nodepool(list(PEOPLES), named(ours())), HELD),
    "a stripped copy removed with the annotation (a lossy write undone)": (
        nodepool([*PEOPLES, stripped(ours())], named(ours())),
        FREE,
    ),
    "every stripped copy removed (left by earlier versions, one a run)": (
        nodepool([stripped(ours()), *PEOPLES, stripped(ours())], named(ours())),
        FREE,
    ),
    "a stripped copy removed and our entry added again": (
        nodepool([*PEOPLES, stripped(ours())], named(ours())),
        HELD,
    ),
    "the first annotation on a NodePool without any": (
        changed(FREE, lambda p: p["metadata"].pop("annotations")),
        changed(HELD, lambda p: p["metadata"].update(annotations={KEY: named(ours())})),
    ),
}


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_allowed(name):
    old, new = ALLOWED[name]
    verdict = admit_pool(old, new)
    assert verdict.matched and verdict.denied == ()


def _budgets(pool: dict[str, Any]) -> list[dict[str, Any]]:
    return pool["spec"]["disruption"]["budgets"]


REFUSED = {
    # name: (old, new, what the message must mention)
    "another entry changed": (
        HELD,
        changed(HELD, lambda p: _budgets(p)[0].update(nodes="100%")),
        "never another entry",
    ),
    "another entry removed with ours": (HELD, nodepool([PEOPLES[1]]), "never another entry"),
    "another entry removed, ours kept": (
        HELD,
        nodepool([PEOPLES[1], ours()], named(ours())),
        "never",
    ),
    "the entries reordered": (
        HELD,
        nodepool([PEOPLES[1], PEOPLES[0], ours()], named(ours())),
        "never",
    ),
    "an entry of nodes 1 added as ours": (
        FREE,
        nodepool([*PEOPLES, {**ours(), "nodes": "1"}], named({**ours(), "nodes": "1"})),
        "own budget entry",
    ),
    "an entry that also blocks drift": (
        FREE,
        nodepool(
            [*PEOPLES, {**ours(), "reasons": ["Drifted", "Empty", "Underutilized"]}],
            named({**ours(), "reasons": ["Drifted", "Empty", "Underutilized"]}),
        ),
        "own budget entry",
    ),
    "an entry without a schedule (always on)": (
        FREE,
        nodepool([*PEOPLES, {"nodes": "0", "reasons": ["Empty", "Underutilized"]}]),
        "own budget entry",
    ),
    "a duration of years": (
        FREE,
        nodepool([*PEOPLES, ours(duration="99999h")], named(ours(duration="99999h"))),
        "own budget entry",
    ),
    "an entry added without the annotation": (
        FREE,
        nodepool([*PEOPLES, ours()]),
        "own budget entry",
    ),
    "the annotation forged to name a person's entry": (
        nodepool([*PEOPLES, ours("0 9 1 1 *")]),
        nodepool([*PEOPLES, ours("0 9 1 1 *")], named(ours("0 9 1 1 *"))),
        "never another entry",
    ),
    "a person's entry of our shape removed by forging the annotation": (
        nodepool([*PEOPLES, ours("0 9 1 1 *")]),
        nodepool(list(PEOPLES)),
        "never another entry",
    ),
    "a stripped lookalike removed beside our entry as written": (
        nodepool([*PEOPLES, stripped(ours()), ours()], named(ours())),
        FREE,
        "never another entry",
    ),
    "a stripped entry the annotation does not name removed": (
        nodepool([*PEOPLES, stripped(ours("0 9 1 1 *"))], named(ours())),
        FREE,
        "never another entry",
    ),
    "a stripped entry removed without the annotation": (
        nodepool([*PEOPLES, stripped(ours())]),
        FREE,
        "never another entry",
    ),
    "a stripped entry added as ours": (
        FREE,
        nodepool([*PEOPLES, stripped(ours())], named(ours())),
        "own budget entry",
    ),
    "200 KB in the annotation": (FREE, nodepool(list(PEOPLES), "x" * 200_000), "own budget entry"),
    "the annotation naming nothing in the list": (
        FREE,
        nodepool(list(PEOPLES), named(ours())),
        "own",
    ),
    "another annotation added": (
        FREE,
        changed(FREE, lambda p: p["metadata"]["annotations"].update(x="y")),
        "only its annotation",
    ),
    "another annotation removed": (
        FREE,
        changed(FREE, lambda p: p["metadata"].pop("annotations")),
        "only its annotation",
    ),
    "a label added": (
        FREE,
        changed(FREE, lambda p: p["metadata"].update(labels={"a": "b"})),
        "labels",
    ),
    "the weight changed": (
        FREE,
        changed(FREE, lambda p: p["spec"].update(weight=100)),
        "only spec",
    ),
    "the limits lifted": (FREE, changed(FREE, lambda p: p["spec"].pop("limits")), "only spec"),
    "consolidation turned off": (
        FREE,
        changed(FREE, lambda p: p["spec"]["disruption"].update(consolidateAfter="Never")),
        "only spec",
    ),
    "the template's node class changed": (
        FREE,
        changed(FREE, lambda p: p["spec"]["template"]["spec"]["nodeClassRef"].update(name="evil")),
        "only spec",
    ),
    "a taint added to the template": (
        FREE,
        changed(
            FREE,
            lambda p: p["spec"]["template"]["spec"].update(
                taints=[{"key": "x", "effect": "NoSchedule"}]
            ),
        ),
        "only spec",
    ),
    "a managedFields entry forged": (
        FREE,
        changed(FREE, lambda p: p["metadata"].update(managedFields=[{"manager": "karpenter"}])),
        "managedFields",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused(name):
    old, new, mentions = REFUSED[name]
    verdict = admit_pool(old, new)
    assert verdict.matched
    assert verdict.denied, f"{name}: admitted"
    assert any(mentions in message for message in verdict.denied), verdict.denied


def test_only_node_holder_is_matched():
    old, new, _ = REFUSED["the weight changed"]
    assert admit_pool(old, new, "system:serviceaccount:kube-system:karpenter") == Verdict(False, ())
    assert admit_pool(old, new, HOOK_USER).denied


# --------------------------------------------------------------------------- the tool's requests


@dataclass
class PoolGate:
    """The policy at the API test server's door for NodePool PATCHes, as the API server runs
    it: the JSON Patch applied to the stored NodePool, the field manager's record added."""

    api: ApiServer
    username: str = OUR_USER
    policy: dict[str, Any] = field(default_factory=policy)
    seen: list[tuple[str, list[Any], Verdict]] = field(default_factory=list)

    def __call__(self, info: RequestInfo) -> None:
        prefix = "/apis/karpenter.sh/v1/nodepools/"
        if info.method != "PATCH" or not info.path.startswith(prefix):
            return
        name = info.path.removeprefix(prefix)
        old = self.api.get_nodepool(name)
        if old is None:
            return
        new = apply_json_patch(old, info.body)  # a failed `test` is the server's 422 already
        changed_, removed = managedfields.object_diff(old, new, status=False)
        new["metadata"]["managedFields"] = managedfields.record_update(
            old["metadata"].get("managedFields"),
            "node-holder",
            changed_,
            removed,
            self.api.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        verdict = admit(old, new, username=self.username, policy=self.policy)
        self.seen.append((name, json.loads(info.body), verdict))
        if verdict.denied:
            raise ApiError(422, "Invalid", f"denied request: {verdict.denied[0]}")


@pytest.fixture
def gated(tmp_path):
    with ApiServer() as api:
        api.set_clock(T0)
        gate = PoolGate(api)
        api.on_request(gate)
        yield api, gate, str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    assert [v.denied for _, _, v in gate.seen if v.denied] == []


def _run(kubeconfig: str, *args: str) -> None:
    result = run_cli(*args, "--kubeconfig", kubeconfig, env={"NODE_HOLDER_OUTPUT": "text"})
    assert result.code == 0, result.stderr


@pytest.mark.parametrize("mechanism", ["budget", "auto"])
def test_every_patch_of_a_hold_a_revert_and_a_release_is_admitted(gated, mechanism):
    api, gate, kubeconfig = gated
    api.add_nodepool("batch", budgets=copy.deepcopy(PEOPLES))
    api.add_nodepool("gpu", budgets=[])
    api.add_nodepool("plain")  # the CRD's default list
    for pool in ("batch", "gpu", "plain"):
        api.add_node(
            f"{pool}-old",
            created=T0 - timedelta(days=2),
            labels={"karpenter.sh/nodepool": pool},
            eks=False,
        )
    api.add_node("batch-new", created=T0, labels={"karpenter.sh/nodepool": "batch"}, eks=False)
    reconcile = ("reconcile", "--mechanism", mechanism)
    _run(kubeconfig, *reconcile)  # add, on three kinds of list
    api.advance_clock(timedelta(minutes=10))
    api.add_node(
        "batch-newer", created=api.now(), labels={"karpenter.sh/nodepool": "batch"}, eks=False
    )
    _run(kubeconfig, *reconcile)  # extend
    api.edit_nodepool("gpu", lambda p: p["spec"]["disruption"].update(budgets=[]))  # Argo CD
    _run(kubeconfig, *reconcile)  # the revert: dropped (auto) or added again (budget)
    gate.username = HOOK_USER
    _run(kubeconfig, "release", "--no-events")
    assert len(gate.seen) == 3 + 3 + 1 + (3 if mechanism == "budget" else 2)
    assert _budgets(api.get_nodepool("batch")) == PEOPLES
    assert _budgets(api.get_nodepool("gpu")) == []
    assert _budgets(api.get_nodepool("plain")) == karpenter.DEFAULT_BUDGETS


@pytest.mark.parametrize("conversion", [karpenter.DROPS_REASONS, karpenter.DROPS_BUDGETS])
def test_every_patch_on_a_karpenter_that_stores_v1beta1_is_admitted(gated, conversion):
    """The lossy add and its removal in the same run (budget: exit 1; auto: annotations),
    and release of a stripped copy whose removal an older policy had refused."""
    api, gate, kubeconfig = gated
    api.karpenter_conversion = conversion
    api.add_nodepool("batch", budgets=copy.deepcopy(PEOPLES))
    api.add_node("batch-new", created=T0, labels={"karpenter.sh/nodepool": "batch"}, eks=False)
    before = _budgets(api.get_nodepool("batch"))
    budget = run_cli("reconcile", "--mechanism", "budget", "--kubeconfig", kubeconfig)
    assert budget.code == 1 and "the entry was removed again" in budget.stderr
    _run(kubeconfig, "reconcile", "--mechanism", "auto")
    assert len(gate.seen) == 4 and _budgets(api.get_nodepool("batch")) == before
    left = [*before, stripped(ours("59 19 22 11 *", "21m"))]
    api.edit_nodepool(
        "batch",
        lambda p: (
            p["spec"]["disruption"].update(budgets=left),
            p["metadata"]["annotations"].update({KEY: named(ours("59 19 22 11 *", "21m"))}),
        ),
    )
    gate.username = HOOK_USER
    _run(kubeconfig, "release", "--no-events")
    assert len(gate.seen) == 5 and _budgets(api.get_nodepool("batch")) == before


def test_the_gate_does_refuse_what_the_policy_denies(gated):
    """The hook above is not a no-op: with a policy that takes durations of whole hours only
    (the policy and the runs disagree), the run's 20-minute entry is denied, the run exits 1
    naming the NodePool, and nothing changed."""
    api, gate, kubeconfig = gated
    api.add_nodepool("batch", budgets=copy.deepcopy(PEOPLES))
    api.add_node("batch-new", created=T0, labels={"karpenter.sh/nodepool": "batch"}, eks=False)
    gate.policy = json.loads(json.dumps(policy()).replace("([0-9]{1,2}m)?", ""))
    result = run_cli("reconcile", "--mechanism", "budget", "--kubeconfig", kubeconfig)
    assert result.code == 1
    assert "nodepool/batch: failed to add budget entry" in result.stdout
    assert "denied request" in result.stderr
    assert _budgets(api.get_nodepool("batch")) == PEOPLES
    gate.seen.clear()


# --------------------------------------------------------------------------- every render


@needs_kubectl
def test_the_overlay_renders_the_policy_bound_and_for_node_holder_only():
    objs = render("overlays/budget-mechanism")
    rendered = [o for o in objs if o["metadata"]["name"] == "node-holder-nodepool-budget"]
    assert sorted(o["kind"] for o in rendered) == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    [binding] = [o for o in rendered if o["kind"].endswith("Binding")]
    assert binding["spec"] == {
        "policyName": "node-holder-nodepool-budget",
        "validationActions": ["Deny"],
    }
    [condition] = only(rendered, "ValidatingAdmissionPolicy")["spec"]["matchConditions"]
    assert OUR_USER in condition["expression"] and HOOK_USER in condition["expression"]
    assert not [o for o in render("base") if o["metadata"]["name"].endswith("nodepool-budget")]
