"""Karpenter v1 NodePools on the API test server, as kube-apiserver serves the CRD.

What each answer copies, and from which source, is in tests/kubeapi/crd.py and karpenter.py.
Plain HTTP pins the status codes and bodies; the real kubectl proves clients get along with them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.fidelity.test_kubectl_fidelity import KUBECTL, Kubectl
from tests.kubeapi.apiserver import Fault
from tests.kubeapi.karpenter import DEFAULT_BUDGETS, DROPS_BUDGETS, DROPS_REASONS, make_nodepool
from tests.kubeapi.statuses import ApiError

POOLS = "/apis/karpenter.sh/v1/nodepools"
MERGE = "application/merge-patch+json"
JSONP = "application/json-patch+json"
HOLD_BUDGET = {
    "nodes": "0",
    "reasons": ["Underutilized", "Empty"],
    "schedule": "0 9 * * *",
    "duration": "8h",
}
GENERIC_422 = "the server rejected our request due to an error in our request"
UNCHECKED = (
    '<nil>: Invalid value: "null": some validation rules were not checked because the object '
    "was invalid; correct the existing errors to complete validation"
)
NODES_PATTERN = "^((100|[0-9]{1,2})%|[0-9]+)$"
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")


def pool(name: str) -> str:
    return f"{POOLS}/{name}"


def conflict_message(name: str) -> str:
    return (
        f'Operation cannot be fulfilled on nodepools.karpenter.sh "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )


@pytest.fixture
def kubectl(kubeconfig: Path, tmp_path: Path) -> Kubectl:
    return Kubectl(kubeconfig, tmp_path)


# --------------------------------------------------------------------------- plain HTTP


def test_discovery_and_openapi_describe_a_cluster_scoped_crd(api_http):
    groups = api_http.get("/apis").json["groups"]
    karpenter = next(g for g in groups if g["name"] == "karpenter.sh")
    assert karpenter["preferredVersion"] == {"groupVersion": "karpenter.sh/v1", "version": "v1"}
    resources = api_http.get("/apis/karpenter.sh/v1").json["resources"]
    assert resources[0] == {
        "name": "nodepools",
        "singularName": "nodepool",
        "namespaced": False,
        "kind": "NodePool",
        "verbs": [
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "create",
            "update",
            "watch",
        ],
        "categories": ["karpenter"],
        "storageVersionHash": "Vc6J1THIlNI=",  # base64(sha256("karpenter.sh/v1/NodePool")[:8])
    }
    assert resources[1]["name"] == "nodepools/status"
    index = api_http.get("/openapi/v3").json["paths"]
    doc = api_http.get(index["apis/karpenter.sh/v1"]["serverRelativeURL"]).json
    patch = doc["paths"]["/apis/karpenter.sh/v1/nodepools/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]


def test_create_prunes_defaults_and_drops_status(api, api_http):
    body = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "web"},
        "spec": {
            "disruption": {"budgets": [{"reasons": ["Drifted"], "owner": "me"}]},
            "template": {"spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}}},
        },
        "status": {"nodes": 5},
    }
    body["spec"]["template"]["spec"]["requirements"] = []
    created = api_http.request("POST", POOLS, body=body)
    assert created.status == 201, created.data
    # fieldValidation defaults to Warn: the unknown field is dropped and named in a warning.
    assert (
        created.headers["Warning"] == '299 - "unknown field \\"spec.disruption.budgets[0].owner\\""'
    )
    stored = api.get_nodepool("web")
    assert stored["spec"]["disruption"] == {
        "budgets": [{"reasons": ["Drifted"], "nodes": "10%"}],  # the budget's `nodes` default
        "consolidateAfter": "0s",
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
    }
    assert stored["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert "status" not in stored and stored["metadata"]["generation"] == 1
    assert stored["metadata"]["managedFields"][0]["apiVersion"] == "karpenter.sh/v1"
    # No disruption at all: the CRD defaults it, budgets included; an empty list stays empty.
    body["metadata"]["name"] = "plain"
    del body["spec"]["disruption"]
    assert api_http.request("POST", POOLS, body=body).status == 201
    assert api.get_nodepool("plain")["spec"]["disruption"]["budgets"] == [{"nodes": "10%"}]
    assert api.add_nodepool("none", budgets=[])["spec"]["disruption"]["budgets"] == []
    # Strict refuses the unknown field; Ignore drops it without a word.
    body["metadata"]["name"] = "strict"
    body["spec"]["extra"] = 1
    strict = api_http.request("POST", POOLS + "?fieldValidation=Strict", body=body)
    assert (strict.status, strict.json["reason"]) == (400, "BadRequest")
    assert strict.json["message"] == (
        'NodePool in version "v1" cannot be handled as a NodePool: strict decoding error: '
        'unknown field "spec.extra"'
    )
    ignored = api_http.request("POST", POOLS + "?fieldValidation=Ignore", body=body)
    assert ignored.status == 201 and "Warning" not in ignored.headers


def test_list_pages_metadata_only_and_table(api, api_http):
    api.set_clock(datetime(2025, 6, 1, 12, 0, tzinfo=UTC))
    for name in ("a", "b", "c", "d", "e"):
        api.add_nodepool(name, status={"nodes": 2} if name == "a" else None)
    api.advance_clock(timedelta(minutes=5))
    first = api_http.get(POOLS + "?limit=2").json
    assert first["kind"] == "NodePoolList" and first["apiVersion"] == "karpenter.sh/v1"
    assert [i["metadata"]["name"] for i in first["items"]] == ["a", "b"]
    assert first["metadata"]["remainingItemCount"] == 3
    rest = api_http.get(f"{POOLS}?limit=5&continue={first['metadata']['continue']}").json
    assert [i["metadata"]["name"] for i in rest["items"]] == ["c", "d", "e"]
    partial = api_http.get(
        POOLS, accept="application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
    ).json
    assert partial["kind"] == "PartialObjectMetadataList"
    assert set(partial["items"][0]) == {"kind", "apiVersion", "metadata"}
    wrong = api_http.get(
        pool("a"), accept="application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
    )
    assert wrong.status == 406
    assert wrong.json["message"].endswith("is not a list (*unstructured.Unstructured)")
    table = api_http.get(
        POOLS + "?fieldSelector=metadata.name%3Da",
        accept="application/json;as=Table;v=v1;g=meta.k8s.io",
    ).json
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "NodeClass",
        "Nodes",
        "Ready",
        "Age",
        "Weight",
        "CPU",
        "Memory",
    ]
    assert table["rows"][0]["cells"] == ["a", "default", "2", None, "5m", None, None, None]
    bad_field = api_http.get(POOLS + "?fieldSelector=spec.weight%3D1")
    assert bad_field.status == 400
    assert bad_field.json["message"] == "field label not supported: spec.weight"


def test_update_needs_a_resource_version_and_bumps_generation_on_spec_only(api, api_http):
    current = api.add_nodepool("web")
    current["metadata"]["annotations"] = {"team": "a"}
    rv = current["metadata"]["resourceVersion"]
    del current["metadata"]["resourceVersion"]
    unconditional = api_http.request("PUT", pool("web"), body=current)
    assert unconditional.status == 422
    assert unconditional.json["message"] == (
        'nodepools.karpenter.sh "web" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
        "must be specified for an update"
    )
    assert unconditional.json["details"] == {
        "name": "web",
        "group": "karpenter.sh",
        "kind": "nodepools",
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "message": "Invalid value: 0x0: must be specified for an update",
                "field": "metadata.resourceVersion",
            }
        ],
    }
    current["metadata"]["resourceVersion"] = rv
    annotated = api_http.request("PUT", pool("web"), body=current)
    assert annotated.status == 200
    assert annotated.json["metadata"]["generation"] == 1  # metadata only
    stale = api_http.request("PUT", pool("web"), body=current)
    assert stale.status == 409 and stale.json["message"] == conflict_message("web")
    current = annotated.json
    current["spec"]["weight"] = 10
    current["status"] = {"nodes": 9}  # the main resource does not write status
    changed = api_http.request("PUT", pool("web"), body=current).json
    assert changed["metadata"]["generation"] == 2 and "status" not in changed


def test_merge_patch_resource_version_is_a_precondition(api, api_http):
    rv = api.add_nodepool("web")["metadata"]["resourceVersion"]
    api.edit_nodepool("web", lambda p: p["metadata"].setdefault("labels", {}).update(x="1"))
    body = {"metadata": {"resourceVersion": rv}, "spec": {"disruption": {"budgets": []}}}
    stale = api_http.patch(pool("web"), body, MERGE)
    assert (stale.status, stale.json["reason"]) == (409, "Conflict")
    assert stale.json["message"] == conflict_message("web")
    assert stale.json["details"] == {"name": "web", "group": "karpenter.sh", "kind": "nodepools"}
    assert api.get_nodepool("web")["spec"]["disruption"]["budgets"] == [{"nodes": "10%"}]
    body["metadata"]["resourceVersion"] = api.get_nodepool("web")["metadata"]["resourceVersion"]
    patched = api_http.patch(pool("web"), body, MERGE).json
    assert patched["spec"]["disruption"]["budgets"] == []
    assert patched["metadata"]["generation"] == 2
    api.reset_log()
    again = api_http.patch(pool("web"), {"spec": {"disruption": {"budgets": []}}}, MERGE)
    assert again.json["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    assert [w.stored for w in api.writes("nodepools")] == [False]  # a no-op stores nothing


def test_json_patch_tests_guard_the_budget_list_and_resource_version(api, api_http):
    current = api.add_nodepool("web", budgets=[{"nodes": "10%"}])
    rv = current["metadata"]["resourceVersion"]
    guarded = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "test", "path": "/spec/disruption/budgets", "value": [{"nodes": "10%"}]},
        {"op": "add", "path": "/spec/disruption/budgets/-", "value": HOLD_BUDGET},
        {"op": "add", "path": "/metadata/annotations", "value": {"owner": "node-holder"}},
    ]
    added = api_http.patch(pool("web"), guarded, JSONP)
    assert added.status == 200, added.data
    assert added.json["spec"]["disruption"]["budgets"] == [{"nodes": "10%"}, HOLD_BUDGET]
    before = api.resource_version
    failed = api_http.patch(pool("web"), guarded, JSONP)  # the resourceVersion moved on
    assert failed.status == 422
    assert failed.json == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": GENERIC_422,
        "reason": "Invalid",
        "details": {},
        "code": 422,
    }
    assert api.resource_version == before
    # Removing the list makes the CRD default it again: "no budgets" is the empty list.
    removed = api_http.patch(
        pool("web"), [{"op": "remove", "path": "/spec/disruption/budgets"}], JSONP
    )
    assert removed.json["spec"]["disruption"]["budgets"] == [{"nodes": "10%"}]


def _budget_reply(api, api_http, budgets):
    api.add_nodepool("web")
    reply = api_http.patch(pool("web"), {"spec": {"disruption": {"budgets": budgets}}}, MERGE)
    assert reply.status == 422, reply.data
    assert api.get_nodepool("web")["spec"]["disruption"]["budgets"] == [{"nodes": "10%"}]
    assert reply.json["details"]["name"] == "web" and reply.json["details"]["kind"] == "NodePool"
    return reply.json


@pytest.mark.parametrize(
    ("budgets", "causes"),
    [
        (
            [{"nodes": "101%"}],
            [
                (
                    "FieldValueInvalid",
                    "spec.disruption.budgets[0].nodes",
                    'Invalid value: "101%": spec.disruption.budgets[0].nodes in body should '
                    f"match '{NODES_PATTERN}'",
                )
            ],
        ),
        (
            [{"nodes": "0", "schedule": "0 9 * *", "duration": "1d"}],
            [
                (
                    "FieldValueInvalid",
                    "spec.disruption.budgets[0].duration",
                    'Invalid value: "1d": spec.disruption.budgets[0].duration in body should '
                    "match '^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$'",
                ),
                (
                    "FieldValueInvalid",
                    "spec.disruption.budgets[0].schedule",
                    'Invalid value: "0 9 * *": spec.disruption.budgets[0].schedule in body '
                    "should match '^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|"
                    "((.+)\\s(.+)\\s(.+)\\s(.+)\\s(.+))$'",
                ),
            ],
        ),
        (
            [{"nodes": "0", "reasons": ["Empty", "Expired", "Empty"]}],
            [
                (
                    "FieldValueNotSupported",
                    "spec.disruption.budgets[0].reasons[1]",
                    'Unsupported value: "Expired": supported values: "Underutilized", "Empty", '
                    '"Drifted"',
                ),
                (
                    "FieldValueDuplicate",
                    "spec.disruption.budgets[0].reasons[2]",
                    'Duplicate value: "Empty"',
                ),
                ("FieldValueInvalid", "<nil>", UNCHECKED.split(": ", 1)[1]),
            ],
        ),
        (
            [{"nodes": 0}] + [{"nodes": "1"}] * 50,
            [
                (
                    "FieldValueTypeInvalid",
                    "spec.disruption.budgets[0].nodes",
                    'Invalid value: "integer": spec.disruption.budgets[0].nodes in body must be '
                    'of type string: "integer"',
                ),
                (
                    "FieldValueTooMany",
                    "spec.disruption.budgets",
                    "Too many: 51: must have at most 50 items",
                ),
                ("FieldValueInvalid", "<nil>", UNCHECKED.split(": ", 1)[1]),
            ],
        ),
    ],
    ids=["nodes-pattern", "schedule-and-duration-patterns", "reasons-enum-and-set", "type-and-max"],
)
def test_invalid_budgets_are_422_as_the_crd_validates_them(api, api_http, budgets, causes):
    body = _budget_reply(api, api_http, budgets)
    got = [(c["reason"], c["field"], c["message"]) for c in body["details"]["causes"]]
    assert sorted(got) == sorted(causes)


def test_schedule_without_duration_breaks_the_crd_rule(api, api_http):
    body = _budget_reply(api, api_http, [{"nodes": "0", "schedule": "@daily"}])
    assert body["message"] == (
        'NodePool.karpenter.sh "web" is invalid: spec.disruption.budgets: Invalid value: "array": '
        "'schedule' must be set with 'duration'"
    )
    assert body["details"]["group"] == "karpenter.sh"
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: \"array\": 'schedule' must be set with 'duration'",
            "field": "spec.disruption.budgets",
        }
    ]


def test_strategic_merge_and_apply_patches_are_415(api, api_http):
    api.add_nodepool("web")
    smp = api_http.patch(pool("web"), {"metadata": {}}, "application/strategic-merge-patch+json")
    assert (smp.status, smp.json["reason"]) == (415, "UnsupportedMediaType")
    assert smp.json["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )
    apply = api_http.patch(pool("web"), b"{}", "application/apply-patch+yaml")
    assert apply.status == 415  # server-side apply is not modelled by the test server


def test_strict_patch_with_an_unknown_field_is_a_422_patch_error(api, api_http):
    api.add_nodepool("web")
    body = {"spec": {"disruption": {"budgets": [{"nodes": "1", "owner": "me"}]}}}
    strict = api_http.patch(pool("web") + "?fieldValidation=Strict", body, MERGE)
    assert strict.status == 422
    cause = strict.json["details"]["causes"][0]
    assert cause["field"] == "patch"
    assert cause["message"].endswith(
        'strict decoding error: unknown field "spec.disruption.budgets[0].owner"'
    )
    warned = api_http.patch(pool("web"), body, MERGE)
    assert warned.status == 200
    assert warned.json["spec"]["disruption"]["budgets"] == [{"nodes": "1"}]


def test_status_subresource_writes_status_only(api, api_http):
    api.add_nodepool("web")
    body = {"metadata": {"labels": {"x": "1"}}, "spec": {"weight": 5}, "status": {"nodes": 4}}
    reply = api_http.patch(pool("web") + "/status", body, MERGE)
    assert reply.status == 200, reply.data
    stored = api.get_nodepool("web")
    assert stored["status"] == {"nodes": 4}
    assert "labels" not in stored["metadata"] and "weight" not in stored["spec"]
    assert stored["metadata"]["generation"] == 1
    assert stored["metadata"]["managedFields"][-1]["subresource"] == "status"


def test_events_about_a_nodepool_are_accepted_like_node_events(api, api_http):
    uid = api.add_nodepool("web")["metadata"]["uid"]
    involved = {"kind": "NodePool", "apiVersion": "karpenter.sh/v1", "name": "web", "uid": uid}
    event = {
        "metadata": {"generateName": "web."},
        "involvedObject": involved,
        "reason": "HoldStarted",
        "message": "budget added",
        "type": "Normal",
        "source": {"component": "node-holder"},
    }
    assert api_http.request("POST", "/api/v1/namespaces/default/events", body=event).status == 201
    listed = api_http.get("/api/v1/events?fieldSelector=involvedObject.kind%3DNodePool").json
    assert [e["involvedObject"]["name"] for e in listed["items"]] == ["web"]
    v1 = {
        "metadata": {"generateName": "web."},
        "regarding": involved,
        "reason": "HoldEnded",
        "note": "budget removed",
        "type": "Normal",
        "action": "Release",
        "eventTime": "2025-06-01T12:00:00.000000Z",
        "reportingController": "node-holder.dev/cronjob",
        "reportingInstance": "node-holder-1",
    }
    posted = api_http.request("POST", "/apis/events.k8s.io/v1/namespaces/default/events", body=v1)
    assert posted.status == 201, posted.data
    assert [e["reason"] for e in api.events] == ["HoldStarted", "HoldEnded"]


def test_faults_log_and_identities_cover_nodepool_paths(api, api_http):
    api.add_nodepool("web")
    api.reset_log()
    body = {"metadata": {"annotations": {"a": "1"}}}
    api.inject(Fault(method="PATCH", path=r"/nodepools/", status=409))
    conflicted = api_http.patch(pool("web"), body, MERGE)
    assert conflicted.status == 409 and conflicted.json["message"] == conflict_message("web")
    api.inject(Fault(method="PATCH", path=r"/nodepools/", status=429, retry_after=2))
    throttled = api_http.patch(pool("web"), body, MERGE)
    assert (throttled.status, throttled.headers["Retry-After"]) == (429, "2")
    api.inject(Fault(method="PATCH", path=r"/nodepools/", status=503, delay=0.01))
    assert api_http.patch(pool("web"), body, MERGE).json["reason"] == "ServiceUnavailable"
    denied = api_http.patch(pool("web"), body, MERGE, identity="readonly")
    assert denied.status == 403
    assert denied.json["message"] == (
        'nodepools.karpenter.sh "web" is forbidden: User '
        '"system:serviceaccount:kube-system:node-viewer" cannot patch resource "nodepools" in '
        'API group "karpenter.sh" at the cluster scope'
    )
    assert api_http.get(POOLS, identity="readonly").status == 200
    assert api_http.patch(pool("web"), body, MERGE).status == 200
    assert [w.status for w in api.writes("nodepools")] == [409, 429, 503, 403, 200]
    assert api.writes() == []  # the node writes are counted apart


def test_python_helpers_validate_and_edit_like_the_api(api):
    with pytest.raises(ApiError) as refused:
        api.add_nodepool("bad", budgets=[{"nodes": "0", "duration": "1h"}])
    assert refused.value.code == 422
    assert "'schedule' must be set with 'duration'" in refused.value.message
    assert api.get_nodepool("bad") is None
    created = api.add_nodepool("web", budgets=[HOLD_BUDGET], labels={"team": "a"})
    edited = api.edit_nodepool("web", lambda p: p["spec"]["disruption"].pop("budgets"))
    assert edited["spec"]["disruption"]["budgets"] == [{"nodes": "10%"}]
    assert edited["metadata"]["generation"] == created["metadata"]["generation"] + 1
    same = api.edit_nodepool("web", lambda p: None)
    assert same["metadata"]["resourceVersion"] == edited["metadata"]["resourceVersion"]


# --------------------------------------------------------------------------- the real kubectl


@needs_kubectl
@pytest.mark.kubectl
def test_kubectl_get_table_yaml_and_category(api, kubectl):
    now = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    api.set_clock(now - timedelta(hours=3))
    ready = {"nodes": 3, "conditions": [{"type": "Ready", "status": "True"}]}
    api.add_nodepool("default", status=ready)
    api.add_nodepool("batch", budgets=[HOLD_BUDGET])
    api.set_clock(now)
    out = kubectl.run("get", "nodepools").stdout.splitlines()
    assert out[0].split() == ["NAME", "NODECLASS", "NODES", "READY", "AGE"]
    assert out[1].split() == ["batch", "default", "3h"]
    assert out[2].split() == ["default", "default", "3", "True", "3h"]
    assert "WEIGHT" in kubectl.run("get", "nodepools", "-o", "wide").stdout
    shown = json.loads(kubectl.run("get", "nodepool", "batch", "-o", "json").stdout)
    stored = api.get_nodepool("batch")
    del stored["metadata"]["managedFields"]
    assert shown == stored
    assert "- duration: 8h" in kubectl.run("get", "nodepool", "batch", "-o", "yaml").stdout
    listed = kubectl.run("get", "karpenter", "-o", "name").stdout.split()
    assert listed == ["nodepool.karpenter.sh/batch", "nodepool.karpenter.sh/default"]
    short = kubectl.run("get", "np", ok=False)  # Karpenter's CRD declares no short names
    assert short.returncode != 0 and 'the server doesn\'t have a resource type "np"' in short.stderr


@needs_kubectl
@pytest.mark.kubectl
def test_kubectl_patch_merge_json_with_test_ops_and_annotate(api, kubectl):
    rv = api.add_nodepool("web")["metadata"]["resourceVersion"]
    kubectl.run("patch", "nodepool", "web", "--type", "merge", "-p", '{"spec":{"weight":5}}')
    assert api.get_nodepool("web")["spec"]["weight"] == 5
    stale = json.dumps({"metadata": {"resourceVersion": rv}, "spec": {"weight": 6}})
    refused = kubectl.run("patch", "nodepool", "web", "--type", "merge", "-p", stale, ok=False)
    assert refused.returncode == 1
    assert conflict_message("web") in refused.stderr
    ops = [
        {"op": "test", "path": "/spec/disruption/budgets", "value": [{"nodes": "10%"}]},
        {"op": "add", "path": "/spec/disruption/budgets/-", "value": HOLD_BUDGET},
    ]
    kubectl.run("patch", "nodepool", "web", "--type", "json", "-p", json.dumps(ops))
    assert api.get_nodepool("web")["spec"]["disruption"]["budgets"][1] == HOLD_BUDGET
    before = api.resource_version
    failed = kubectl.run(
        "patch", "nodepool", "web", "--type", "json", "-p", json.dumps(ops), ok=False
    )
    assert failed.returncode == 1
    assert f"The request is invalid: {GENERIC_422}" in failed.stderr
    assert api.resource_version == before
    kubectl.run("annotate", "nodepool", "web", "node-holder.dev/budget=0")
    assert api.get_nodepool("web")["metadata"]["annotations"] == {"node-holder.dev/budget": "0"}
    patches = [w.content_type for w in api.writes("nodepools") if w.status == 200]
    assert patches == [MERGE, JSONP, MERGE]


@needs_kubectl
@pytest.mark.kubectl
def test_kubectl_strategic_patch_is_refused_and_invalid_budgets_named(api, kubectl):
    api.add_nodepool("web")
    smp = kubectl.run("patch", "nodepool", "web", "-p", '{"spec":{"weight":5}}', ok=False)
    assert smp.stderr.strip() == (
        "error: application/strategic-merge-patch+json is not supported by karpenter.sh/v1, "
        "Kind=NodePool: the body of the request was in an unknown format - accepted media types "
        "include: application/json-patch+json, application/merge-patch+json, "
        "application/apply-patch+yaml"
    )
    bad = '{"spec":{"disruption":{"budgets":[{"nodes":"all"}]}}}'
    invalid = kubectl.run("patch", "nodepool", "web", "--type", "merge", "-p", bad, ok=False)
    assert invalid.stderr.strip() == (
        'The NodePool "web" is invalid: spec.disruption.budgets[0].nodes: Invalid value: "all": '
        f"spec.disruption.budgets[0].nodes in body should match '{NODES_PATTERN}'"
    )
    extra = '{"spec":{"disruption":{"budgets":[{"nodes":"1","owner":"me"}]}}}'
    warned = kubectl.run("patch", "nodepool", "web", "--type", "merge", "-p", extra, ok=False)
    assert warned.returncode == 0
    assert 'Warning: unknown field "spec.disruption.budgets[0].owner"' in warned.stderr
    assert api.get_nodepool("web")["spec"]["disruption"]["budgets"] == [{"nodes": "1"}]


@needs_kubectl
@pytest.mark.kubectl
def test_kubectl_create_apply_and_replace(api, kubectl, tmp_path):
    manifest = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {
            "disruption": {"budgets": [{"nodes": "20%"}]},
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "gpu",
                    },
                    "requirements": [],
                }
            },
        },
    }
    path = tmp_path / "pool.json"
    path.write_text(json.dumps(manifest))
    kubectl.run("create", "-f", str(path))
    assert api.get_nodepool("gpu")["metadata"]["generation"] == 1
    manifest["spec"]["disruption"]["budgets"] = [HOLD_BUDGET]
    path.write_text(json.dumps(manifest))
    applied = kubectl.run("apply", "-f", str(path), ok=False)  # warns: no last-applied note
    assert applied.returncode == 0, applied.stderr
    stored = api.get_nodepool("gpu")
    assert stored["spec"]["disruption"]["budgets"] == [HOLD_BUDGET]
    assert stored["metadata"]["generation"] == 2
    manifest["spec"]["weight"] = 3
    path.write_text(json.dumps(manifest))
    kubectl.run("replace", "-f", str(path))  # kubectl fills in the resourceVersion
    assert api.get_nodepool("gpu")["spec"]["weight"] == 3
    manifest["metadata"]["name"] = "typo"
    manifest["spec"]["disruption"]["budget"] = []
    path.write_text(json.dumps(manifest))
    typo = kubectl.run("create", "-f", str(path), ok=False)
    assert typo.returncode == 1
    assert 'strict decoding error: unknown field "spec.disruption.budget"' in typo.stderr
    assert api.get_nodepool("typo") is None
    methods = [(w.method, w.query.get("fieldValidation")) for w in api.writes("nodepools")]
    assert methods == [
        ("POST", "Strict"),
        ("PATCH", "Strict"),
        ("PUT", "Strict"),
        ("POST", "Strict"),
    ]


def test_a_cluster_without_the_crd_answers_404_on_nodepool_paths(api, api_http):
    """`nodepools_served = False`: a cluster without Karpenter's CRD, where kube-apiserver
    answers an unknown resource's path with its generic 404."""
    api.add_nodepool("web")
    api.nodepools_served = False
    for path in (POOLS, pool("web")):
        reply = api_http.get(path)
        assert (reply.status, reply.json["reason"]) == (404, "NotFound")
        assert reply.json["message"] == "the server could not find the requested resource"


# --------------------------------------------------------------------------- Karpenter v0.33-v0.37


PEOPLES = [{"nodes": "10%"}, {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}]


@pytest.mark.parametrize(
    ("conversion", "kept"),
    [
        # v0.34 to v0.37: each budget keeps nodes, schedule and duration, not reasons.
        (DROPS_REASONS, [*PEOPLES, {k: v for k, v in HOLD_BUDGET.items() if k != "reasons"}]),
        # v0.33: no budgets in v1beta1; the v1 CRD default comes back.
        (DROPS_BUDGETS, DEFAULT_BUDGETS),
    ],
)
def test_a_karpenter_that_stores_v1beta1_answers_a_write_as_converted(
    api, api_http, conversion, kept
):
    """Through Karpenter's conversion webhook, kube-apiserver stores v1beta1: the answer to
    the PATCH is the stored object read back as v1 (the same as a GET), whatever was sent."""
    api.karpenter_conversion = conversion
    api.add_nodepool("web", budgets=[dict(b) for b in PEOPLES])
    sent = api_http.patch(
        pool("web"),
        [{"op": "add", "path": "/spec/disruption/budgets/-", "value": HOLD_BUDGET}],
        JSONP,
    )
    assert sent.status == 200, sent.data
    assert sent.json["spec"]["disruption"]["budgets"] == kept
    assert api_http.get(pool("web")).json == sent.json
    assert sent.json["spec"]["disruption"]["consolidateAfter"] == "1m"  # the rest as sent
    # The same object created: defaults and conversion on create too.
    body = make_nodepool("new", budgets=[*PEOPLES, HOLD_BUDGET])
    created = api_http.request("POST", POOLS, body=body)
    assert created.status == 201, created.data
    assert created.json["spec"]["disruption"]["budgets"] == kept


def test_crd_defaulting_fills_a_missing_budget_list_on_create_and_write(api, api_http):
    """`budgets: [{nodes: "10%"}]` when absent: on create, on an update that drops it, and,
    through a conversion that omits an empty list (v0.34 to v0.37), on `[]` as well."""
    assert api.add_nodepool("plain")["spec"]["disruption"]["budgets"] == DEFAULT_BUDGETS
    api.add_nodepool("empty", budgets=[])
    assert api.get_nodepool("empty")["spec"]["disruption"]["budgets"] == []
    api.karpenter_conversion = DROPS_REASONS
    api.add_nodepool("converted", budgets=[])
    assert api.get_nodepool("converted")["spec"]["disruption"]["budgets"] == DEFAULT_BUDGETS
