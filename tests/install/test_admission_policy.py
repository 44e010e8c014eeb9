"""The admission policy in cronjob/base/admission-policy.yaml (and the chart's, rendered the same).

Its CEL is evaluated for real with cel-python (celpy), an evaluator independent of the API
server's, against old/new Node pairs, the way kube-apiserver evaluates a
ValidatingAdmissionPolicy on an UPDATE: matchConditions first, then the variables in order,
then every validation; the request is denied if any validation is not true. celpy implements
the core CEL language; the policy also uses `split` and `trim` from the strings extension
library Kubernetes enables for every CEL expression, given to celpy below with Go's semantics.

The tool's own requests are not written by hand: the real CLI runs against the API test server
(hold, extend, release, the --max-hold cap and its free period, a key switch, a migration,
people's edits, the uninstall hook), and a request hook evaluates the policy on every PATCH the
way the API server would (the patched object, status reset, the field manager's record of the
update) and answers 422 if it denies. Every run must succeed with every patch admitted. Then
every way a stolen token could abuse a node must be denied.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import celpy
import kubernetes_validate
import pytest
import yaml
from celpy import celtypes

from tests.clusters import CliResult, run_cli
from tests.install.test_manifests import (
    CRONJOB_DIR,
    TARGETS,
    container,
    env_of,
    needs_kubectl,
    only,
    render,
    schema_versions,
    settings_map,
)
from tests.kubeapi import managedfields
from tests.kubeapi.apiserver import ApiServer, RequestInfo
from tests.kubeapi.patching import merge_patch
from tests.kubeapi.statuses import ApiError

POLICY_FILE = CRONJOB_DIR / "base" / "admission-policy.yaml"
SETTINGS_FILE = CRONJOB_DIR / "base" / "settings.yaml"
SECURITY_DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
OUR_USER = "system:serviceaccount:node-holder:node-holder"
HOOK_USER = "system:serviceaccount:node-holder:node-holder-uninstall"
DISRUPT = "karpenter.sh/do-not-disrupt"
CONSOLIDATE = "karpenter.sh/do-not-consolidate"
MARKER = "node-holder.dev/owned-annotations"
PINNED = "node-holder.dev/pinned"
STARTED = "node-holder.dev/hold-started"
FREE = "node-holder.dev/free-until"
POOL_HOLD = "node-holder.dev/hold-duration"  # a NodePool's, copied by Karpenter: people's
POOL_MAX = "node-holder.dev/max-hold"
ATTACH_DETACH = "volumes.kubernetes.io/controller-managed-attach-detach"
OPT_OUT = "overlays/without-admission-policy"
POLICY_KINDS = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}

# --------------------------------------------------------------------------- evaluating the CEL

#: unicode.IsSpace, as cel-go's trim uses it.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"  # noqa: E501


def _split(text: Any, separator: Any) -> celtypes.ListType:
    """cel-go ext strings `split` (Go's strings.Split: '' gives [''])."""
    return celtypes.ListType([celtypes.StringType(p) for p in str(text).split(str(separator))])


def _trim(text: Any) -> celtypes.StringType:
    return celtypes.StringType(str(text).strip(_GO_SPACE))


EXTENSIONS = {"split": _split, "trim": _trim}


def base_objects() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(POLICY_FILE.read_text()) if doc]


def policy_of(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return only(objs, "ValidatingAdmissionPolicy")


def settings(hold_annotation: str | None = DISRUPT) -> dict[str, Any]:
    """The settings ConfigMap (the policy's parameter) with HOLD_ANNOTATION set (or unset)."""
    cm = yaml.safe_load(SETTINGS_FILE.read_text())
    if hold_annotation is None:
        del cm["data"]["HOLD_ANNOTATION"]
    else:
        cm["data"]["HOLD_ANNOTATION"] = hold_annotation
    return cm


@functools.cache
def _program(expression: str) -> celpy.Runner:
    env = celpy.Environment()
    return env.program(env.compile(expression), functions=EXTENSIONS)


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
    """What the API server decides for one UPDATE of a Node (or, with the NodePool policy, of
    a NodePool), with this policy bound."""
    spec = (policy or policy_of(base_objects()))["spec"]
    [rule] = spec["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["UPDATE"]
    group, [resource] = rule["apiGroups"][0], rule["resources"]
    request = {
        "operation": "UPDATE",
        "kind": {"group": group, "version": "v1", "kind": new["kind"]},
        "resource": {"group": group, "version": "v1", "resource": resource},
        "name": new["metadata"]["name"],
        "userInfo": {"username": username, "groups": ["system:serviceaccounts"]},
    }
    activation: dict[str, Any] = {
        "object": celpy.json_to_cel(new),
        "oldObject": celpy.json_to_cel(old),
        "request": celpy.json_to_cel(request),
        "params": celpy.json_to_cel(params if params is not None else settings()),
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


# --------------------------------------------------------------------------- nodes by hand

MANAGED_FIELDS = [
    {
        "manager": "kubelet",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-11-22T20:00:05Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {"f:kubernetes.io/hostname": {}}}},
    },
    {
        "manager": "kubelet",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-11-22T20:03:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:conditions": {}}},
        "subresource": "status",
    },
]


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
            "managedFields": copy.deepcopy(MANAGED_FIELDS),
        },
        "spec": {"providerID": "aws:///eu-west-1a/i-0123456789abcdef0"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def patched(node: dict[str, Any], changes: dict[str, str | None]) -> dict[str, Any]:
    """`node` after a merge patch of its annotations (None deletes a key)."""
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


def held(node: dict[str, Any], *keys: str) -> dict[str, Any]:
    """`node` as a hold by node-holder leaves it."""
    return patched(node, {**dict.fromkeys(keys, "true"), MARKER: ",".join(sorted(keys))})


def _spec(**fields: Any) -> dict[str, Any]:
    node = eks_node()
    node["spec"].update(fields)
    return node


def _meta(change: Callable[[dict[str, Any]], None], node: dict[str, Any] | None = None) -> Any:
    node = copy.deepcopy(node or eks_node())
    change(node["metadata"])
    return node


def _ours_recorded(node: dict[str, Any]) -> dict[str, Any]:
    """`node` with the API server's record of an update by node-holder (what admission sees)."""
    return _meta(
        lambda m: m["managedFields"].append(
            {
                "manager": "node-holder",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-11-22T20:10:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{DISRUPT}": {}}}},
            }
        ),
        node,
    )


def _with_no_annotations() -> dict[str, Any]:
    node = eks_node()
    del node["metadata"]["annotations"]
    return node


BIG = "x" * 200_000
HELD = held(eks_node(), DISRUPT)
PERSONS_TRUE = patched(eks_node(), {DISRUPT: "true"})
PERSONS_FALSE = patched(eks_node(), {DISRUPT: "false"})
PINNED_HELD = patched(HELD, {PINNED: DISRUPT})
POOLED = patched(HELD, {POOL_HOLD: "45m", POOL_MAX: "3h"})  # a NodePool's node, held

ALLOWED: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # name: (old, new); what the tool's patches look like, by hand (the real ones: below)
    "nothing changed": (eks_node(), eks_node()),
    "status differs (the API server keeps the old status anyway)": (
        eks_node(),
        {**eks_node(), "status": {"conditions": []}},
    ),
    "hold added, with the API server's record of the update": (
        eks_node(),
        _ours_recorded(held(eks_node(), DISRUPT)),
    ),
    "hold on a node without annotations": (
        _with_no_annotations(),
        held(_with_no_annotations(), DISRUPT),
    ),
    "release leaves a node without annotations": (
        held(_with_no_annotations(), DISRUPT),
        _with_no_annotations(),
    ),
    "a claim on a key someone set to false is dropped": (
        patched(HELD, {DISRUPT: "false"}),
        patched(eks_node(), {DISRUPT: "false"}),
    ),
    "a claim on a key someone removed is dropped": (
        patched(HELD, {DISRUPT: None}),
        eks_node(),
    ),
    "a claim on a key outside the configured set is kept": (
        held(eks_node(), "example.com/hold"),
        held(eks_node(), "example.com/hold", DISRUPT),
    ),
    "the free period is stamped": (HELD, patched(eks_node(), {FREE: "2026-11-22T21:20:00Z"})),
}


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_allowed(name):
    old, new = ALLOWED[name]
    verdict = admit(old, new)
    assert verdict.matched
    assert verdict.denied == ()


# --------------------------------------------------------------------------- attacks

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
        _meta(
            lambda m: m["labels"].update(
                {"node.kubernetes.io/exclude-from-external-load-balancers": "true"}
            )
        ),
        "labels",
    ),
    "label changed": (
        eks_node(),
        _meta(lambda m: m["labels"].update({"karpenter.sh/nodepool": "x"})),
        "labels",
    ),
    "every label removed": (eks_node(), _meta(lambda m: m.pop("labels")), "labels"),
    "finalizer removed": (eks_node(), _meta(lambda m: m.pop("finalizers")), "finalizers"),
    "ownerReferences removed": (
        eks_node(),
        _meta(lambda m: m.pop("ownerReferences")),
        "ownerReferences",
    ),
    "foreign annotation added": (
        eks_node(),
        patched(eks_node(), {"example.com/owner": "x"}),
        "may add",
    ),
    "foreign annotation changed": (
        eks_node(),
        patched(eks_node(), {ATTACH_DETACH: "false"}),
        "may change",
    ),
    "foreign annotation removed": (
        eks_node(),
        patched(eks_node(), {ATTACH_DETACH: None}),
        "may remove",
    ),
    "foreign annotation removed with a hold": (
        eks_node(),
        patched(HELD, {ATTACH_DETACH: None}),
        "may remove",
    ),
    "a key that merely starts with the hold key": (
        eks_node(),
        held(eks_node(), DISRUPT + "-not"),
        "may add",
    ),
    "a claimed foreign key removed (the marker is no licence)": (
        patched(eks_node(), {MARKER: ATTACH_DETACH}),
        patched(eks_node(), {MARKER: None, ATTACH_DETACH: None}),
        "may remove",
    ),
    # Values bounded to what the tool writes.
    "200 KB under the hold key": (eks_node(), patched(HELD, {DISRUPT: BIG}), "may add"),
    "200 KB in the marker": (
        eks_node(),
        patched(HELD, {MARKER: f"{DISRUPT},{BIG}"}),
        "owned-annotations",
    ),
    "the marker lists a key twice": (
        eks_node(),
        patched(HELD, {MARKER: f"{DISRUPT},{DISRUPT}"}),
        "each key once",
    ),
    "200 KB in hold-started": (HELD, patched(HELD, {STARTED: BIG}), "RFC 3339"),
    "200 KB in free-until": (HELD, patched(HELD, {FREE: BIG}), "RFC 3339"),
    "a free-until that is not a time": (
        HELD,
        patched(HELD, {FREE: "2026-11-22 21:20"}),
        "RFC 3339",
    ),
    # The tool's patch shape.
    "a person's true on a configured key removed": (PERSONS_TRUE, eks_node(), "may remove"),
    "a person's true claimed (step one of taking it)": (
        PERSONS_TRUE,
        patched(PERSONS_TRUE, {MARKER: DISRUPT}),
        "owned-annotations may keep",
    ),
    "a person's true claimed and removed at once": (
        PERSONS_TRUE,
        patched(eks_node(), {MARKER: DISRUPT}),
        "may remove",
    ),
    "a person's false flipped to true": (PERSONS_FALSE, held(eks_node(), DISRUPT), "may change"),
    "a person's false flipped to true, unclaimed": (PERSONS_FALSE, PERSONS_TRUE, "may change"),
    "a hold added without its claim": (eks_node(), PERSONS_TRUE, "may add"),
    "a claim dropped while its key is still true (orphaning the hold)": (
        HELD,
        patched(HELD, {MARKER: None}),
        "may not drop its claim",
    ),
    "a claim on a pinned key dropped (unpin could no longer hand it back)": (
        PINNED_HELD,
        patched(PINNED_HELD, {MARKER: None}),
        "may not drop its claim",
    ),
    "the marker newly claims a well-known key that is not configured": (
        patched(eks_node(), {CONSOLIDATE: "true"}),
        patched(eks_node(), {CONSOLIDATE: "true", MARKER: CONSOLIDATE}),
        "owned-annotations may keep",
    ),
    "a claimed key that is neither configured nor well known removed": (
        held(eks_node(), "example.com/hold"),
        eks_node(),
        "may remove",
    ),
    # PINS.md: a person's pin is theirs.
    "pinned added": (HELD, patched(HELD, {PINNED: DISRUPT}), "pinned: pin and unpin"),
    "pinned changed": (
        PINNED_HELD,
        patched(PINNED_HELD, {PINNED: CONSOLIDATE}),
        "pinned: pin and unpin",
    ),
    "pinned removed (unpin)": (
        PINNED_HELD,
        patched(PINNED_HELD, {PINNED: None}),
        "pinned: pin and unpin",
    ),
    "a pinned key removed": (
        PINNED_HELD,
        patched(PINNED_HELD, {DISRUPT: None, MARKER: None}),
        "pinned lists",
    ),
    "a pinned key added": (
        patched(eks_node(), {PINNED: DISRUPT}),
        held(patched(eks_node(), {PINNED: DISRUPT}), DISRUPT),
        "pinned lists",
    ),
    # A NodePool's hold settings are written by Karpenter and people, never by the tool.
    "a NodePool's hold-duration added": (HELD, patched(HELD, {POOL_HOLD: "0"}), "may add"),
    "a NodePool's max-hold added": (HELD, patched(HELD, {POOL_MAX: "7d"}), "may add"),
    "a NodePool's hold-duration changed": (
        POOLED,
        patched(POOLED, {POOL_HOLD: "7d"}),
        "may change",
    ),
    "a NodePool's max-hold changed": (POOLED, patched(POOLED, {POOL_MAX: ""}), "may change"),
    "a NodePool's hold-duration removed": (
        POOLED,
        patched(POOLED, {POOL_HOLD: None}),
        "may remove",
    ),
    "a NodePool's max-hold removed with the hold": (
        POOLED,
        patched(POOLED, {DISRUPT: None, MARKER: None, POOL_MAX: None}),
        "may remove",
    ),
    "a NodePool's hold-duration claimed and removed": (
        patched(POOLED, {MARKER: f"{DISRUPT},{POOL_HOLD}"}),
        patched(POOLED, {MARKER: DISRUPT, POOL_HOLD: None}),
        "may remove",
    ),
    # managedFields: only the API server's record of this update may differ.
    "a managedFields entry forged for another manager": (
        eks_node(),
        _meta(lambda m: m["managedFields"].append({**MANAGED_FIELDS[0], "manager": "karpenter"})),
        "managedFields",
    ),
    "another manager's entry re-dated": (
        eks_node(),
        _meta(lambda m: m["managedFields"][0].update(time="2030-01-01T00:00:00Z")),
        "managedFields",
    ),
    "our entry written as a status update": (
        eks_node(),
        _meta(
            lambda m: m["managedFields"].append(
                {"manager": "node-holder", "operation": "Update", "subresource": "status"}
            )
        ),
        "managedFields",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused(name):
    old, new, mentions = REFUSED[name]
    verdict = admit(old, new)
    assert verdict.matched
    assert verdict.denied, f"{name}: admitted"
    assert any(mentions in message for message in verdict.denied), verdict.denied


LIMITS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # What CEL on Kubernetes 1.30 cannot tell from the tool's own updates (docs/security.md).
    # Entries of other managers may go: the API server drops an entry whose last field an
    # update took over, and which fields an entry owns (fieldsV1) is not readable in CEL.
    "every other manager's managedFields entry dropped": (
        eks_node(),
        _meta(lambda m: m.update(managedFields=[])),
    ),
    # Admission has no clock: a stamp's time cannot be compared with now (the tool ignores
    # and removes stamps it could not have written).
    "a free-until years ahead": (HELD, patched(eks_node(), {FREE: "2036-11-22T21:20:00Z"})),
}


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_limits_of_what_the_policy_can_see(name):
    old, new = LIMITS[name]
    assert admit(old, new).allowed


def test_refusal_names_the_allowed_keys_and_where_they_are_configured():
    verdict = admit(eks_node(), patched(eks_node(), {"example.com/owner": "x"}))
    assert verdict.denied == (
        f"node-holder may add only its own annotations and a hold annotation of {DISRUPT} "
        '(ConfigMap node-holder/node-holder-settings, HOLD_ANNOTATION), set to "true" and '
        f"claimed in {MARKER} in the same update",
    )


def test_configured_keys_come_from_the_settings_the_runs_read():
    """The same patch is refused or admitted depending on HOLD_ANNOTATION alone, read as the
    CLI reads it (spaces around a key trimmed; unset: the CLI's default)."""
    old, new = eks_node(), held(eks_node(), CONSOLIDATE)
    assert admit(old, new, params=settings(DISRUPT)).denied
    assert admit(old, new, params=settings(CONSOLIDATE)).allowed
    assert admit(old, new, params=settings(f" {DISRUPT} , {CONSOLIDATE} ")).allowed
    assert admit(old, held(eks_node(), DISRUPT), params=settings(None)).allowed
    assert admit(old, new, params=settings(None)).denied


def test_a_nodepool_setting_is_no_hold_key_even_where_the_settings_name_it():
    """The CLI refuses node-holder.dev/ keys in HOLD_ANNOTATION (exit 2); the policy too, so
    that a ConfigMap naming one never lets a token write a NodePool's hold settings."""
    for key in (POOL_HOLD, POOL_MAX):
        verdict = admit(eks_node(), held(eks_node(), key), params=settings(f"{DISRUPT},{key}"))
        assert any("may add" in message for message in verdict.denied), key
        claimed = patched(held(eks_node(), DISRUPT, key), {key: "true"})
        assert admit(claimed, held(eks_node(), DISRUPT), params=settings(key)).denied


def test_the_policy_fails_closed():
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
        "kubernetes-admin",  # a person: pin and unpin are theirs
    ],
)
def test_other_users_are_not_matched(username):
    verdict = admit(eks_node(), _spec(unschedulable=True), username=username)
    assert verdict == Verdict(matched=False, denied=())
    assert admit(HELD, patched(HELD, {PINNED: DISRUPT}), username=username).allowed


@pytest.mark.parametrize("username", [OUR_USER, HOOK_USER])
def test_the_runs_and_the_uninstall_hook_are_matched(username):
    assert admit(eks_node(), _spec(unschedulable=True), username=username).denied
    assert admit(HELD, eks_node(), username=username).allowed


# --------------------------------------------------------------------------- the tool's requests

T0 = datetime(2026, 11, 22, 20, tzinfo=UTC)
POOL = {"karpenter.sh/nodepool": "batch"}


@dataclass
class Gate:
    """The policy at the API test server's door: every node PATCH is evaluated as the API
    server would (the patched object, status as it was, the field manager's record of the
    update by node-holder), and answered 422 when denied."""

    api: ApiServer
    params: dict[str, Any]
    username: str = OUR_USER
    seen: list[tuple[str, dict[str, Any], Verdict]] = field(default_factory=list)

    def __call__(self, info: RequestInfo) -> None:
        if info.method != "PATCH" or not info.path.startswith("/api/v1/nodes/"):
            return
        name = info.path.rsplit("/", 1)[1]
        old = self.api.get_node(name)
        if old is None:
            return
        body = json.loads(info.body)
        new = merge_patch(copy.deepcopy(old), body)
        new["status"] = old["status"]
        changed, removed = managedfields.object_diff(old, new, status=False)
        new["metadata"]["managedFields"] = managedfields.record_update(
            old["metadata"].get("managedFields"),
            "node-holder",
            changed,
            removed,
            self.api.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        verdict = admit(old, new, params=self.params, username=self.username)
        self.seen.append((name, body, verdict))
        if verdict.denied:
            raise ApiError(
                422,
                "Invalid",
                f'nodes "{name}" is forbidden: ValidatingAdmissionPolicy '
                "'node-holder-annotations-only' with binding 'node-holder-annotations-only' "
                f"denied request: {verdict.denied[0]}",
            )

    @property
    def denied(self) -> list[tuple[str, dict[str, Any], tuple[str, ...]]]:
        return [(n, b, v.denied) for n, b, v in self.seen if v.denied]


@dataclass
class Cluster:
    api: ApiServer
    kubeconfig: str
    gate: Gate
    env: dict[str, str]

    def run(self, *args: str, **env: str) -> CliResult:
        result = run_cli(*args, "--kubeconfig", self.kubeconfig, env={**self.env, **env})
        assert result.code == 0, result.stderr
        return result

    def set(self, **settings_: str) -> None:
        """Change the settings ConfigMap: what the next run reads, and the policy's parameter."""
        self.env.update(settings_)
        self.gate.params["data"].update(settings_)

    def node(self, name: str, age: timedelta, labels: dict[str, str] | None = POOL) -> None:
        self.api.add_node(name, created=self.api.now() - age, labels=labels, eks=False)

    def annotations(self, name: str) -> dict[str, str]:
        return self.api.annotations(name)


@pytest.fixture
def cluster(tmp_path) -> Any:
    """The API test server behind the policy, with the kustomize base's settings."""
    params = settings()
    with ApiServer() as api:
        api.set_clock(T0)
        gate = Gate(api, params)
        api.on_request(gate)
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        env = {**params["data"], "NODE_HOLDER_OUTPUT": "text", "NODE_HOLDER_LOG_FORMAT": "text"}
        yield Cluster(api, kubeconfig, gate, env)
        patches = [r for r in api.requests if r.method == "PATCH"]
        assert all(r.user_agent.split("/")[0] == "node-holder" for r in patches), (
            "the policy knows node-holder's field manager by its User-Agent"
        )
    assert gate.denied == []


def _old_nodes(c: Cluster) -> dict[str, dict[str, str]]:
    c.node("old-1", timedelta(days=3), labels={**POOL, "team": "a"})
    c.node("old-2", timedelta(days=3))
    c.node("system-1", timedelta(days=9), labels={"eks.amazonaws.com/nodegroup": "system"})
    return {n: c.annotations(n) for n in ("old-1", "old-2", "system-1")}


def test_hold_extend_release(cluster):
    c = cluster
    before = _old_nodes(c)
    c.node("batch-1", timedelta(minutes=1))
    c.run("reconcile")
    assert c.annotations("old-1")[DISRUPT] == "true"
    assert STARTED in c.annotations("system-1")
    c.api.advance_clock(timedelta(minutes=10))
    c.node("batch-2", timedelta(0))
    c.run("reconcile")
    assert c.annotations("batch-2")[DISRUPT] == "true"
    c.api.advance_clock(timedelta(minutes=25))
    c.run("reconcile")
    assert {n: c.annotations(n) for n in before} == before
    assert len(c.gate.seen) == 4 + 1 + 5  # hold 4 nodes, extend to 1, release 5


def test_the_cap_and_its_free_period(cluster):
    """A node every 10 minutes for 3 hours: the 2h cap ends the stretch, free-until is
    stamped (also on a node arriving in the free period), then a new hold starts."""
    c = cluster
    _old_nodes(c)
    for step in range(18):
        c.node(f"batch-{step}", timedelta(0))
        c.run("reconcile")
        c.api.advance_clock(timedelta(minutes=10))
    written = {k for _, body, _ in c.gate.seen for k in body["metadata"]["annotations"]}
    assert {DISRUPT, MARKER, STARTED, FREE} <= written
    c.api.advance_clock(timedelta(hours=3))
    c.run("reconcile")
    assert all(not c.annotations(n) for n in ("old-2", "batch-17"))


def test_migration_from_the_old_key(cluster):
    """HOLD_ANNOTATION switched from Karpenter's old key to the new one during a hold."""
    c = cluster
    c.set(HOLD_ANNOTATION=CONSOLIDATE)
    _old_nodes(c)
    c.node("batch-1", timedelta(minutes=1))
    c.run("reconcile")
    assert c.annotations("old-2")[CONSOLIDATE] == "true"
    c.set(HOLD_ANNOTATION=DISRUPT)
    c.run("reconcile")
    assert c.annotations("old-2")[DISRUPT] == "true" and CONSOLIDATE not in c.annotations("old-2")
    c.api.advance_clock(timedelta(minutes=30))
    c.run("reconcile")
    assert c.annotations("old-2") == {}


def test_people_exempt_and_hold_nodes_themselves(cluster):
    c = cluster
    _old_nodes(c)
    c.api.set_annotation("old-2", DISRUPT, "true")  # a person's, before the hold
    c.node("batch-1", timedelta(minutes=1))
    c.run("reconcile")
    c.api.set_annotation("old-1", DISRUPT, "false")  # a person exempts a held node
    c.api.advance_clock(timedelta(minutes=30))
    c.run("reconcile")
    assert c.annotations("old-1") == {DISRUPT: "false"}
    assert c.annotations("old-2") == {DISRUPT: "true"}


def test_the_uninstall_hook_releases(cluster):
    c = cluster
    _old_nodes(c)
    c.node("batch-1", timedelta(minutes=1))
    c.run("reconcile")
    c.gate.username = HOOK_USER
    c.run("release", "--no-events", NODE_HOLDER_DRY_RUN="false")
    assert all(not c.annotations(n) for n in ("old-2", "batch-1", "system-1"))


def test_a_key_switch_keeps_the_old_claim(cluster):
    """A custom key, then the default: the claim on the custom key stays."""
    c = cluster
    c.set(HOLD_ANNOTATION="example.com/hold")
    _old_nodes(c)
    c.node("batch-1", timedelta(minutes=1))
    c.run("reconcile")
    c.set(HOLD_ANNOTATION=DISRUPT)
    c.run("reconcile")
    assert c.annotations("old-2")[MARKER] == f"example.com/hold,{DISRUPT}"


def test_a_pinned_node_keeps_its_hold(cluster):
    """A person pins a held node: the end of the hold keeps the key and its claim (unpin
    hands it back to the normal rule)."""
    c = cluster
    _old_nodes(c)
    c.node("batch-1", timedelta(minutes=1))
    c.run("reconcile")
    c.api.set_annotation("old-1", PINNED, DISRUPT)
    c.api.advance_clock(timedelta(minutes=30))
    c.run("reconcile")
    assert c.annotations("old-1") == {DISRUPT: "true", PINNED: DISRUPT, MARKER: DISRUPT}


def test_the_gate_does_refuse_what_the_policy_denies(cluster):
    """The hook above is not a no-op: a run whose patch the policy denies fails."""
    c = cluster
    _old_nodes(c)
    c.node("batch-1", timedelta(minutes=1))
    c.gate.params["data"]["HOLD_ANNOTATION"] = CONSOLIDATE  # the policy and the runs disagree
    result = run_cli("reconcile", "--kubeconfig", c.kubeconfig, env=c.env)
    assert result.code == 1
    assert "ValidatingAdmissionPolicy" in result.stderr + result.stdout
    assert c.annotations("old-2") == {}
    c.gate.seen.clear()


# --------------------------------------------------------------------------- every overlay


def policy_disagreements(objs: list[dict[str, Any]]) -> list[str]:
    """Why the node policy objects in one render don't fit its CronJob (empty: they do)."""
    objs = [o for o in objs if not o["metadata"]["name"].endswith("nodepool-budget")]
    kinds = {o["kind"] for o in objs}
    present = kinds & POLICY_KINDS
    if not present:
        return []
    if present != POLICY_KINDS:
        return [f"only some of the policy objects: {sorted(present)}"]
    bad = []
    cm = settings_map(objs)
    policy = only(objs, "ValidatingAdmissionPolicy")
    binding = only(objs, "ValidatingAdmissionPolicyBinding")
    ref = binding["spec"]["paramRef"]
    if (ref["name"], ref["namespace"]) != (cm["metadata"]["name"], cm["metadata"]["namespace"]):
        bad.append(f"binding points at {ref}, not at the ConfigMap the CronJob reads")
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
    objs = [o for o in render(target) if not o["metadata"]["name"].endswith("nodepool-budget")]
    keys = tuple(env_of(objs)["HOLD_ANNOTATION"].split(","))
    policy, params = only(objs, "ValidatingAdmissionPolicy"), settings_map(objs)
    node = eks_node()
    assert admit(node, held(node, *keys), params=params, policy=policy).allowed
    tainted = _spec(taints=[{"key": "evil", "effect": "NoExecute"}])
    assert admit(node, tainted, params=params, policy=policy).denied


@needs_kubectl
def test_disagreement_is_caught():
    objs = render("base")
    only(objs, "ValidatingAdmissionPolicyBinding")["spec"]["paramRef"]["name"] = "other"
    assert policy_disagreements(objs) != []
    objs = [o for o in render("base") if o["kind"] != "ValidatingAdmissionPolicyBinding"]
    assert policy_disagreements(objs) != []


@needs_kubectl
def test_opt_out_leaves_out_exactly_the_policy():
    base = render("base")
    opt_out = render(OPT_OUT)
    assert opt_out == [o for o in base if o["kind"] not in POLICY_KINDS]
    assert container(opt_out)["envFrom"], "the settings stay"


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
    with pytest.raises((kubernetes_validate.SchemaNotFoundError, FileNotFoundError)):
        kubernetes_validate.validate(policy_of(base_objects()), version, strict=True)


@needs_kubectl
@pytest.mark.parametrize("version", ["1.27", "1.29"])
def test_opt_out_validates_strictly_on_older_clusters(version):
    for obj in render(OPT_OUT):
        kubernetes_validate.validate(obj, version, strict=True)


# --------------------------------------------------------------------------- docs


def test_security_doc_covers_the_policy_pins_events_and_the_opt_out():
    doc = SECURITY_DOC.read_text()
    assert "kubectl apply -k cronjob/overlays/without-admission-policy" in doc
    assert "cronjob/components/without-admission-policy" in doc
    assert "`create events`" in doc
    for name in ("node-holder-settings", "HOLD_ANNOTATION", PINNED, "managedFields", "fieldsV1"):
        assert name in doc, name
    for path in ("cronjob/overlays/without-admission-policy", "cronjob/components/"):
        assert (CRONJOB_DIR.parent / path).exists()
