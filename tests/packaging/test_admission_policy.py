"""The admission policy in cronjob/base/admission-policy.yaml.

Its CEL is evaluated for real with cel-python (celpy) against old/new Node
pairs, the way kube-apiserver evaluates a ValidatingAdmissionPolicy on an
UPDATE: matchConditions first, then the variables in order, then every
validation; the request is denied if any validation is not true. celpy
implements only the core CEL language, so these tests also prove the policy
needs no extension library. The tool's own patches (from the real decide
step) must pass; everything else a stolen token could do to a node must not.
The objects are validated strictly against the Kubernetes schema, and every
overlay's policy parameters must agree with its CronJob's HOLD_ANNOTATION.
"""

from __future__ import annotations

import copy
import functools
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import celpy
import kubernetes_validate
import pytest
import yaml
from celpy import celtypes

from reconcile.cli import cli, hold_settings
from reconcile.decide import HoldWindow, Mode, NodeView, decide_node
from reconcile.settings import OWNERSHIP_MARKER, HoldSettings
from tests.packaging.test_manifests import (
    CRONJOB_DIR,
    TARGETS,
    container,
    env_of,
    needs_kubectl,
    only,
    render,
    schema_versions,
)

POLICY_FILE = CRONJOB_DIR / "base" / "admission-policy.yaml"
SECURITY_DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
OUR_USER = "system:serviceaccount:node-holder:node-holder"
DISRUPT = "karpenter.sh/do-not-disrupt"
CONSOLIDATE = "karpenter.sh/do-not-consolidate"
ATTACH_DETACH = "volumes.kubernetes.io/controller-managed-attach-detach"
OPT_OUT = "overlays/without-admission-policy"
POLICY_KINDS = {"ConfigMap", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


# --------------------------------------------------------------------------- evaluating the CEL


def base_objects() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(POLICY_FILE.read_text()) if doc]


def policy_of(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return only(objs, "ValidatingAdmissionPolicy")


def configmap(hold_annotations: str = DISRUPT) -> dict[str, Any]:
    cm = copy.deepcopy(only(base_objects(), "ConfigMap"))
    cm["data"]["holdAnnotations"] = hold_annotations
    return cm


@functools.cache
def _program(expression: str) -> celpy.Runner:
    env = celpy.Environment()
    return env.program(env.compile(expression))


def cel(expression: str, activation: dict[str, Any]) -> Any:
    """Evaluate one expression; an evaluation error raises (the apiserver would refuse)."""
    result = _program(expression).evaluate(activation)
    if isinstance(result, celpy.CELEvalError):
        raise result
    return result


@dataclass(frozen=True)
class Verdict:
    matched: bool  # False: matchConditions excluded the request, the policy didn't apply
    denied: tuple[str, ...]  # messages of the validations that failed

    @property
    def allowed(self) -> bool:
        return not self.denied


def admit(
    old: dict[str, Any],
    new: dict[str, Any],
    *,
    params: dict[str, Any] | None = None,
    username: str = OUR_USER,
    policy: dict[str, Any] | None = None,
) -> Verdict:
    """What the API server decides for one UPDATE of a Node, with this policy bound."""
    spec = (policy or policy_of(base_objects()))["spec"]
    assert spec["matchConstraints"]["resourceRules"][0]["operations"] == ["UPDATE"]
    request = {
        "operation": "UPDATE",
        "kind": {"group": "", "version": "v1", "kind": "Node"},
        "resource": {"group": "", "version": "v1", "resource": "nodes"},
        "name": new["metadata"]["name"],
        "userInfo": {"username": username, "groups": ["system:serviceaccounts"]},
    }
    activation: dict[str, Any] = {
        "object": celpy.json_to_cel(new),
        "oldObject": celpy.json_to_cel(old),
        "request": celpy.json_to_cel(request),
        "params": celpy.json_to_cel(params if params is not None else configmap()),
    }
    for condition in spec["matchConditions"]:
        if cel(condition["expression"], activation) != celtypes.BoolType(True):
            return Verdict(matched=False, denied=())
    variables: dict[celtypes.StringType, Any] = {}
    for variable in spec["variables"]:
        activation["variables"] = celtypes.MapType(variables)
        value = cel(variable["expression"], activation)
        if type(value) is str:
            # celpy 0.5's string `+` yields a plain Python str, which has none of
            # CEL's string methods; hand the variable on as the CEL string it is.
            value = celtypes.StringType(value)
        variables[celtypes.StringType(variable["name"])] = value
    activation["variables"] = celtypes.MapType(variables)
    denied = []
    for validation in spec["validations"]:
        if cel(validation["expression"], activation) != celtypes.BoolType(True):
            message = validation["message"]
            if "messageExpression" in validation:
                message = str(cel(validation["messageExpression"], activation))
            denied.append(message)
    return Verdict(matched=True, denied=tuple(denied))


def eks_node() -> dict[str, Any]:
    """A Karpenter-launched node as `kubectl get node -o json` shows it (trimmed)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "ip-10-0-12-34.eu-west-1.compute.internal",
            "uid": "6f1c9e8a-0000-4000-8000-000000000001",
            "resourceVersion": "48213",
            "creationTimestamp": "2026-11-22T20:00:00Z",
            "labels": {
                "karpenter.sh/nodepool": "batch",
                "kubernetes.io/hostname": "ip-10-0-12-34.eu-west-1.compute.internal",
                "node.kubernetes.io/instance-type": "m6i.large",
            },
            "annotations": {
                ATTACH_DETACH: "true",
                "node.alpha.kubernetes.io/ttl": "0",
                "karpenter.sh/nodepool-hash": "6821555240594823858",
            },
            "finalizers": ["karpenter.sh/termination"],
            "ownerReferences": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodeClaim",
                    "name": "batch-x7k2p",
                    "uid": "6f1c9e8a-0000-4000-8000-000000000002",
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"providerID": "aws:///eu-west-1a/i-0123456789abcdef0"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def with_annotations(node: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    new = copy.deepcopy(node)
    new["metadata"]["annotations"] = {**new["metadata"].get("annotations", {}), **annotations}
    return new


def held(node: dict[str, Any], *keys: str) -> dict[str, Any]:
    """`node` as a hold by node-holder leaves it."""
    return with_annotations(
        node, {**dict.fromkeys(keys, "true"), OWNERSHIP_MARKER: ",".join(sorted(keys))}
    )


def patched(node: dict[str, Any], changes: dict[str, str | None]) -> dict[str, Any]:
    new = copy.deepcopy(node)
    annotations = dict(new["metadata"].get("annotations", {}))
    for key, value in changes.items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    new["metadata"]["annotations"] = annotations
    if not annotations:
        del new["metadata"]["annotations"]
    return new


# --------------------------------------------------------------------------- allowed


def _no_annotations() -> dict[str, Any]:
    node = eks_node()
    del node["metadata"]["annotations"]
    return node


ALLOWED: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    # name: (old, new, params holdAnnotations)
    "hold added with its marker": (eks_node(), held(eks_node(), DISRUPT), DISRUPT),
    "hold removed with its marker": (
        held(eks_node(), DISRUPT),
        eks_node(),
        DISRUPT,
    ),
    "hold key value changed": (
        held(eks_node(), DISRUPT),
        patched(held(eks_node(), DISRUPT), {DISRUPT: "false"}),
        DISRUPT,
    ),
    "marker added alone": (
        with_annotations(eks_node(), {DISRUPT: "true"}),
        held(eks_node(), DISRUPT),
        DISRUPT,
    ),
    "marker removed alone": (
        held(eks_node(), DISRUPT),
        patched(held(eks_node(), DISRUPT), {OWNERSHIP_MARKER: None}),
        DISRUPT,
    ),
    "nothing changed": (eks_node(), eks_node(), DISRUPT),
    "status differs (reset by the API server anyway)": (
        eks_node(),
        {**eks_node(), "status": {"conditions": []}},
        DISRUPT,
    ),
    "hold on a node without any annotations": (
        _no_annotations(),
        held(_no_annotations(), DISRUPT),
        DISRUPT,
    ),
    "release leaves a node without any annotations": (
        held(_no_annotations(), DISRUPT),
        _no_annotations(),
        DISRUPT,
    ),
    "two configured keys added": (
        eks_node(),
        held(eks_node(), DISRUPT, CONSOLIDATE),
        f"{DISRUPT},{CONSOLIDATE}",
    ),
    "migration: a claimed old key removed, the new one added": (
        held(eks_node(), CONSOLIDATE),
        held(eks_node(), DISRUPT),
        DISRUPT,
    ),
    "marker drops a claim on a foreign key, which stays": (
        with_annotations(
            eks_node(), {OWNERSHIP_MARKER: f"{ATTACH_DETACH},{DISRUPT}", DISRUPT: "true"}
        ),
        with_annotations(eks_node(), {OWNERSHIP_MARKER: DISRUPT, DISRUPT: "true"}),
        DISRUPT,
    ),
    "resourceVersion and managedFields differ": (
        eks_node(),
        {
            **eks_node(),
            "metadata": {
                **eks_node()["metadata"],
                "resourceVersion": "48214",
                "managedFields": [{"manager": "node-holder", "operation": "Update"}],
            },
        },
        DISRUPT,
    ),
}


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_allowed(name):
    old, new, keys = ALLOWED[name]
    verdict = admit(old, new, params=configmap(keys))
    assert verdict.matched
    assert verdict.denied == ()


# --------------------------------------------------------------------------- refused


def _spec(**fields: Any) -> dict[str, Any]:
    node = eks_node()
    node["spec"].update(fields)
    return node


def _labels(change: dict[str, str | None]) -> dict[str, Any]:
    node = eks_node()
    for key, value in change.items():
        if value is None:
            node["metadata"]["labels"].pop(key)
        else:
            node["metadata"]["labels"][key] = value
    return node


def _without(field: str) -> dict[str, Any]:
    node = eks_node()
    del node["metadata"][field]
    return node


REFUSED: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    # name: (old, new, what the message must mention)
    "NoExecute taint added": (
        eks_node(),
        _spec(taints=[{"key": "evil", "value": "x", "effect": "NoExecute"}]),
        "spec",
    ),
    "cordoned (spec.unschedulable)": (eks_node(), _spec(unschedulable=True), "spec"),
    "providerID changed": (eks_node(), _spec(providerID="aws:///eu-west-1a/i-0fff"), "spec"),
    "label added": (
        eks_node(),
        _labels({"node.kubernetes.io/exclude-from-external-load-balancers": "true"}),
        "labels",
    ),
    "label changed": (eks_node(), _labels({"karpenter.sh/nodepool": "other"}), "labels"),
    "label removed": (eks_node(), _labels({"karpenter.sh/nodepool": None}), "labels"),
    "every label removed": (eks_node(), _without("labels"), "labels"),
    "finalizer removed": (eks_node(), _without("finalizers"), "finalizers"),
    "ownerReferences removed": (eks_node(), _without("ownerReferences"), "ownerReferences"),
    "foreign annotation added": (
        eks_node(),
        patched(eks_node(), {"example.com/owner": "mallory"}),
        "add or change",
    ),
    "foreign annotation changed": (
        eks_node(),
        patched(eks_node(), {ATTACH_DETACH: "false"}),
        "add or change",
    ),
    "foreign annotation removed": (
        eks_node(),
        patched(eks_node(), {ATTACH_DETACH: None}),
        "remove",
    ),
    "foreign annotation removed in the same patch as a hold": (
        eks_node(),
        patched(held(eks_node(), DISRUPT), {ATTACH_DETACH: None}),
        "remove",
    ),
    "every annotation removed": (eks_node(), _no_annotations(), "remove"),
    "a key that merely starts with the hold key": (
        eks_node(),
        patched(eks_node(), {DISRUPT + "-not": "true"}),
        "add or change",
    ),
    "a key that is a suffix of the hold key": (
        eks_node(),
        patched(eks_node(), {"do-not-disrupt": "true"}),
        "add or change",
    ),
    "someone else's well-known hold key removed": (
        with_annotations(eks_node(), {CONSOLIDATE: "true"}),
        eks_node(),
        "remove",
    ),
    # Someone set our claimed key to "false": it is theirs now.
    "a claimed well-known key removed after someone set it to false": (
        patched(held(eks_node(), CONSOLIDATE), {CONSOLIDATE: "false"}),
        eks_node(),
        "remove",
    ),
    "a claimed foreign key removed (the marker is no licence)": (
        with_annotations(eks_node(), {OWNERSHIP_MARKER: ATTACH_DETACH}),
        patched(eks_node(), {ATTACH_DETACH: None}),
        "remove",
    ),
    "marker newly claims a well-known key that isn't configured": (
        with_annotations(eks_node(), {CONSOLIDATE: "true"}),
        with_annotations(eks_node(), {CONSOLIDATE: "true", OWNERSHIP_MARKER: CONSOLIDATE}),
        "may newly claim",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused(name):
    old, new, mentions = REFUSED[name]
    verdict = admit(old, new)
    assert verdict.matched
    assert verdict.denied, f"{name}: admitted"
    assert any(mentions in message for message in verdict.denied), verdict.denied


def test_refusal_names_the_allowed_keys_and_where_they_are_configured():
    verdict = admit(eks_node(), patched(eks_node(), {ATTACH_DETACH: "false"}))
    assert verdict.denied == (
        f"node-holder may add or change only the annotations {DISRUPT} and {OWNERSHIP_MARKER} "
        "(ConfigMap node-holder/node-holder-admission)",
    )


def test_configured_keys_come_from_the_params():
    """The same patch is refused or admitted depending on the ConfigMap alone."""
    old, new = eks_node(), held(eks_node(), CONSOLIDATE)
    assert admit(old, new, params=configmap(DISRUPT)).denied
    assert admit(old, new, params=configmap(CONSOLIDATE)).allowed
    assert admit(old, new, params=configmap(f"{DISRUPT},{CONSOLIDATE}")).allowed


def test_a_configmap_without_the_keys_refuses_everything():
    params = configmap()
    del params["data"]
    with pytest.raises(celpy.CELEvalError):
        # The API server: an evaluation error under failurePolicy Fail refuses the request.
        admit(eks_node(), held(eks_node(), DISRUPT), params=params)
    spec = policy_of(base_objects())["spec"]
    assert spec["failurePolicy"] == "Fail"
    binding = only(base_objects(), "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["paramRef"]["parameterNotFoundAction"] == "Deny"


# --------------------------------------------------------------------------- who is matched


@pytest.mark.parametrize(
    "username",
    [
        "system:node:ip-10-0-12-34.eu-west-1.compute.internal",  # kubelet
        "system:serviceaccount:kube-system:karpenter",
        "system:serviceaccount:node-holder:default",  # another account, our namespace
        "system:serviceaccount:other:node-holder",  # our name, another namespace
        "kubernetes-admin",
    ],
)
def test_other_users_are_not_matched(username):
    verdict = admit(eks_node(), _spec(unschedulable=True), username=username)
    assert verdict == Verdict(matched=False, denied=())


def test_our_service_account_is_matched():
    assert admit(eks_node(), _spec(unschedulable=True)).matched


def test_the_uninstall_hook_is_held_to_the_same_rules():
    """The chart's pre-delete hook removes holds with a service account of its own."""
    hook = "system:serviceaccount:node-holder:node-holder-uninstall"
    node = eks_node()
    assert admit(node, _spec(unschedulable=True), username=hook).denied
    removes_ours = tool_patch(held(node, DISRUPT), (DISRUPT,), False)
    assert admit(held(node, DISRUPT), removes_ours, username=hook).allowed


# --------------------------------------------------------------------------- the tool's own patches


def _view(node: dict[str, Any]) -> NodeView:
    meta = node["metadata"]
    return NodeView(
        name=meta["name"],
        created=datetime(2026, 11, 22, 20, tzinfo=UTC),
        resource_version=meta["resourceVersion"],
        labels=meta.get("labels", {}),
        annotations=meta.get("annotations", {}),
    )


def tool_patch(
    node: dict[str, Any], keys: tuple[str, ...], hold: bool, capped: bool = False
) -> dict[str, Any]:
    """`node` after the patch the real decide step makes for it (with --max-hold 1h)."""
    start = datetime(2026, 11, 22, 19, tzinfo=UTC)
    window = HoldWindow(
        name="cluster",
        held=hold,
        stretch_start=start,
        hold_until=start + timedelta(hours=1),
        capped=capped,
        # Released by the cap: free for one hold duration (20m) from the release.
        free_until=start + timedelta(hours=1, minutes=20) if capped else None,
    )
    settings = HoldSettings(annotations=keys, max_hold=timedelta(hours=1))
    decision = decide_node(_view(node), window, settings, Mode.RECONCILE)
    assert decision.patch is not None, "the scenario must make the tool patch"
    return patched(node, dict(decision.patch.changes))


TOOL_SCENARIOS = {
    # name: (node before, configured keys, hold?)
    "hold": (eks_node(), (DISRUPT,), True),
    "hold, two keys": (eks_node(), (DISRUPT, CONSOLIDATE), True),
    "hold next to someone else's key": (
        with_annotations(eks_node(), {CONSOLIDATE: "true"}),
        (DISRUPT, CONSOLIDATE),
        True,
    ),
    "release": (held(eks_node(), DISRUPT), (DISRUPT,), False),
    "release, key set to false by someone (claim dropped)": (
        patched(held(eks_node(), DISRUPT), {DISRUPT: "false"}),
        (DISRUPT,),
        False,
    ),
    "migration during a hold": (held(eks_node(), CONSOLIDATE), (DISRUPT,), True),
    "migration after a hold": (held(eks_node(), CONSOLIDATE), (DISRUPT,), False),
    "release, node without other annotations": (
        held(_no_annotations(), DISRUPT),
        (DISRUPT,),
        False,
    ),
    "release by --max-hold (writes free-until)": (
        patched(
            held(eks_node(), DISRUPT), {"node-holder.dev/hold-started": "2026-11-22T19:00:00Z"}
        ),
        (DISRUPT,),
        False,
        True,
    ),
    "a node that arrives in the free period (writes free-until)": (
        eks_node(),
        (DISRUPT,),
        False,
        True,
    ),
}


@pytest.mark.parametrize("name", sorted(TOOL_SCENARIOS))
def test_the_tools_own_patches_are_admitted(name):
    node, keys, hold, *capped = TOOL_SCENARIOS[name]
    new = tool_patch(node, keys, hold, *capped)
    assert new != node
    if "writes free-until" in name:
        assert "node-holder.dev/free-until" in new["metadata"]["annotations"]
    assert admit(node, new, params=configmap(",".join(keys))).allowed


# --------------------------------------------------------------------------- every overlay


def policy_disagreements(objs: list[dict[str, Any]]) -> list[str]:
    """Why the policy objects in one render don't fit its CronJob (empty: they do)."""
    kinds = {o["kind"] for o in objs}
    present = kinds & POLICY_KINDS
    if not present:
        return []
    if present != POLICY_KINDS:
        return [f"only some of the policy objects: {sorted(present)}"]
    bad = []
    env_keys = hold_keys_from_env(env_of(objs))
    cm = only(objs, "ConfigMap")
    allowed = cm["data"]["holdAnnotations"].split(",")
    if allowed != env_keys:
        bad.append(f"policy allows {allowed}, HOLD_ANNOTATION is {env_keys}")
    policy = only(objs, "ValidatingAdmissionPolicy")
    binding = only(objs, "ValidatingAdmissionPolicyBinding")
    ref = binding["spec"]["paramRef"]
    if (ref["name"], ref["namespace"]) != (cm["metadata"]["name"], cm["metadata"]["namespace"]):
        bad.append(f"binding points at {ref}, not at the ConfigMap")
    if binding["spec"]["policyName"] != policy["metadata"]["name"]:
        bad.append("binding names another policy")
    if binding["spec"]["validationActions"] != ["Deny"]:
        bad.append(f"validationActions {binding['spec']['validationActions']}")
    cronjob = only(objs, "CronJob")
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    user = f"system:serviceaccount:{cronjob['metadata']['namespace']}:{pod['serviceAccountName']}"
    [condition] = policy["spec"]["matchConditions"]
    hook = f"{user}-uninstall"  # the Helm chart's uninstall hook (charts/.../hooks/uninstall.yaml)
    if condition["expression"] != f"request.userInfo.username in ['{user}', '{hook}']":
        bad.append(f"matchCondition {condition['expression']!r} doesn't name {user} and {hook}")
    return bad


def hold_keys_from_env(env: dict[str, str]) -> list[str]:
    """HOLD_ANNOTATION parsed exactly as the pod's `node-holder reconcile` parses it."""
    command = cli.commands["reconcile"]
    environ = {"HOLD_ANNOTATION": env["HOLD_ANNOTATION"]}
    with mock.patch.dict(os.environ, environ), command.make_context("reconcile", []) as ctx:
        return list(hold_settings(ctx.params).annotations)


@needs_kubectl
@pytest.mark.parametrize("target", TARGETS)
def test_policy_agrees_with_the_cronjob(target):
    objs = render(target)
    assert policy_disagreements(objs) == []
    if target != OPT_OUT:
        assert {o["kind"] for o in objs} >= POLICY_KINDS, "the policy is on by default"


@needs_kubectl
@pytest.mark.parametrize("target", [t for t in TARGETS if t != OPT_OUT])
def test_each_renders_policy_admits_its_own_hold_and_refuses_a_taint(target):
    objs = render(target)
    keys = tuple(env_of(objs)["HOLD_ANNOTATION"].split(","))
    policy, params = only(objs, "ValidatingAdmissionPolicy"), only(objs, "ConfigMap")
    node = eks_node()
    assert admit(node, tool_patch(node, keys, True), params=params, policy=policy).allowed
    tainted = _spec(taints=[{"key": "evil", "effect": "NoExecute"}])
    assert admit(node, tainted, params=params, policy=policy).denied


@needs_kubectl
def test_disagreement_is_caught():
    """An overlay that changes HOLD_ANNOTATION but not the ConfigMap fails the check above."""
    objs = render("overlays/karpenter-before-v0.32")
    only(objs, "ConfigMap")["data"]["holdAnnotations"] = DISRUPT
    assert policy_disagreements(objs) == [
        f"policy allows ['{DISRUPT}'], HOLD_ANNOTATION is ['{CONSOLIDATE}']"
    ]
    objs = render("base")
    env = container(objs)["env"]
    next(e for e in env if e["name"] == "HOLD_ANNOTATION")["value"] = f"{DISRUPT},{CONSOLIDATE}"
    assert policy_disagreements(objs) != []
    objs = [o for o in render("base") if o["kind"] != "ConfigMap"]
    assert policy_disagreements(objs) != []


@needs_kubectl
def test_opt_out_leaves_out_exactly_the_policy():
    base = render("base")
    opt_out = render(OPT_OUT)
    assert opt_out == [o for o in base if o["kind"] not in POLICY_KINDS]


# --------------------------------------------------------------------------- schema


@pytest.mark.parametrize("version", sorted({"1.30", *schema_versions()}))
def test_policy_objects_validate_strictly(version):
    for obj in base_objects():
        kubernetes_validate.validate(obj, version, strict=True)


def test_strict_validation_catches_a_typo_in_the_policy():
    policy = policy_of(base_objects())
    policy["spec"]["validations"][0]["expresion"] = "true"
    with pytest.raises(kubernetes_validate.ValidationError, match="expresion"):
        kubernetes_validate.validate(policy, "1.30", strict=True)


@pytest.mark.parametrize("version", ["1.27", "1.29"])
def test_policy_kinds_do_not_exist_before_1_30(version):
    """Why the opt-out exists: a 1.29 API server has no v1 ValidatingAdmissionPolicy."""
    # kubernetes-validate has no schema file for a kind the version lacks.
    with pytest.raises((kubernetes_validate.SchemaNotFoundError, FileNotFoundError)):
        kubernetes_validate.validate(policy_of(base_objects()), version, strict=True)


@needs_kubectl
@pytest.mark.parametrize("version", ["1.27", "1.29"])
def test_opt_out_validates_strictly_on_older_clusters(version):
    for obj in render(OPT_OUT):
        kubernetes_validate.validate(obj, version, strict=True)


# --------------------------------------------------------------------------- docs


def test_security_doc_covers_the_policy_events_and_the_opt_out():
    doc = SECURITY_DOC.read_text()
    assert "kubectl apply -k cronjob/overlays/without-admission-policy" in doc
    assert "cronjob/components/without-admission-policy" in doc
    assert "`create events`" in doc
    for name in ("node-holder-admission", "holdAnnotations", "HOLD_ANNOTATION"):
        assert name in doc
    for path in ("cronjob/overlays/without-admission-policy", "cronjob/components/"):
        assert (CRONJOB_DIR.parent / path).exists()
