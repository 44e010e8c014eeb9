"""HTTP-level behaviour of the API test server, checked against what kube-apiserver does."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import quote

import pytest
import urllib3

from tests.kubeapi.apiserver import ApiServer, Fault, RequestInfo
from tests.kubeapi.statuses import CONTINUE_EXPIRED_MSG

MERGE = "application/merge-patch+json"
JSONP = "application/json-patch+json"
SMP = "application/strategic-merge-patch+json"
POM_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
POM = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
HOLD = "karpenter.sh/do-not-disrupt"


def names(reply) -> list[str]:
    return [i["metadata"]["name"] for i in reply.json["items"]]


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{name}"


# ---------------------------------------------------------------- list, get, paging


def test_list_items_have_no_type_meta_and_get_has_it(api, api_http):
    api.add_nodes(3, eks=False)
    listed = api_http.get("/api/v1/nodes")
    assert listed.status == 200
    body = listed.json
    assert body["kind"] == "NodeList" and body["apiVersion"] == "v1"
    assert body["metadata"]["resourceVersion"] == str(api.resource_version)
    assert all("kind" not in item for item in body["items"])
    one = api_http.get(node_path(body["items"][0]["metadata"]["name"])).json
    assert (one["kind"], one["apiVersion"]) == ("Node", "v1")
    assert listed.headers["Content-Type"] == "application/json"


def test_paging_is_a_consistent_snapshot_across_writes(api, api_http):
    created = api.add_nodes(5, eks=False)
    first = api_http.get("/api/v1/nodes?limit=2").json
    assert [i["metadata"]["name"] for i in first["items"]] == created[:2]
    assert first["metadata"]["remainingItemCount"] == 3
    snapshot_rv = first["metadata"]["resourceVersion"]
    # Writes between pages: an edit of a later node and a brand-new node.
    api.set_annotation(created[3], "edited", "yes")
    api.add_node("ip-10-0-0-99.ec2.internal", eks=False)
    token = first["metadata"]["continue"]
    second = api_http.get(f"/api/v1/nodes?limit=2&continue={token}").json
    third = api_http.get(f"/api/v1/nodes?limit=2&continue={second['metadata']['continue']}").json
    seen = names_of(first) + names_of(second) + names_of(third)
    assert seen == created
    assert second["metadata"]["resourceVersion"] == snapshot_rv
    edited = next(i for i in second["items"] if i["metadata"]["name"] == created[3])
    assert "edited" not in (edited["metadata"].get("annotations") or {})
    assert "continue" not in third["metadata"]
    # A fresh list sees both writes.
    fresh = api_http.get("/api/v1/nodes").json
    assert "ip-10-0-0-99.ec2.internal" in names_of(fresh)


def names_of(body: dict) -> list[str]:
    return [i["metadata"]["name"] for i in body["items"]]


def test_continue_after_compaction_is_410_expired_with_real_message(api, api_http):
    created = api.add_nodes(4, eks=False)
    first = api_http.get("/api/v1/nodes?limit=2").json
    api.compact()
    gone = api_http.get(f"/api/v1/nodes?limit=2&continue={first['metadata']['continue']}")
    assert gone.status == 410
    status = gone.json
    assert status["reason"] == "Expired"
    assert status["code"] == 410
    assert status["message"] == CONTINUE_EXPIRED_MSG
    assert status["message"].startswith("The provided continue parameter is too old")
    # The body's token continues inconsistently from where the old one stopped.
    rest = api_http.get(f"/api/v1/nodes?limit=10&continue={status['metadata']['continue']}").json
    assert names_of(rest) == created[2:]


def test_malformed_continue_and_continue_with_resource_version_are_400(api, api_http):
    api.add_nodes(3, eks=False)
    bad = api_http.get("/api/v1/nodes?limit=1&continue=not*base64")
    assert bad.status == 400
    assert bad.json["message"].startswith("invalid continue token")
    token = api_http.get("/api/v1/nodes?limit=1").json["metadata"]["continue"]
    both = api_http.get(f"/api/v1/nodes?limit=1&continue={token}&resourceVersion=5")
    assert both.status == 400
    assert both.json["message"] == "specifying resource version is not allowed when using continue"


def test_resource_version_zero_ignores_limit_like_the_watch_cache(api, api_http):
    api.add_nodes(4, eks=False)
    body = api_http.get("/api/v1/nodes?limit=2&resourceVersion=0").json
    assert len(body["items"]) == 4
    assert "continue" not in body["metadata"]


def test_too_large_resource_version_is_a_504_timeout(api, api_http):
    api.add_nodes(1, eks=False)
    reply = api_http.get(f"/api/v1/nodes?resourceVersion={api.resource_version + 100}")
    assert reply.status == 504
    assert reply.json["reason"] == "Timeout"
    assert "Too large resource version" in reply.json["message"]


def test_paged_list_with_selector_has_no_remaining_count(api, api_http):
    api.add_nodes(6, eks=False, labels={"pool": "a"})
    body = api_http.get("/api/v1/nodes?limit=2&labelSelector=pool%3Da").json
    assert len(body["items"]) == 2
    assert "continue" in body["metadata"]
    assert "remainingItemCount" not in body["metadata"]


# ---------------------------------------------------------------- selectors


@pytest.fixture
def labelled(api: ApiServer) -> ApiServer:
    api.add_node("a", eks=False, labels={"tier": "web", "zone": "1"})
    api.add_node("b", eks=False, labels={"tier": "db", "zone": "2"})
    api.add_node("c", eks=False, labels={"tier": "web"})
    return api


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("tier=web", ["a", "c"]),
        ("tier==db", ["b"]),
        ("tier!=web", ["b"]),
        ("zone", ["a", "b"]),
        ("!zone", ["c"]),
        ("tier in (db,web),zone notin (2)", ["a", "c"]),
        ("tier=web,zone=1", ["a"]),
        ("zone>1", ["b"]),
        ("tier in (cache)", []),
    ],
)
def test_label_selectors(labelled, api_http, selector, expected):
    reply = api_http.get(f"/api/v1/nodes?labelSelector={quote(selector)}")
    assert reply.status == 200, reply.data
    assert names(reply) == expected


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("tier in web", "unable to parse requirement: found 'web' expected: '('"),
        ("-bad=x", 'unable to parse requirement: <nil>: Invalid value: "-bad"'),
        ("tier=a b", "found 'b', expected: ',' or 'end of string'"),
        ("tier=,", "found '', expected: identifier after ','"),
    ],
)
def test_invalid_label_selector_is_400(labelled, api_http, selector, message):
    reply = api_http.get(f"/api/v1/nodes?labelSelector={quote(selector)}")
    assert reply.status == 400
    assert reply.json["reason"] == "BadRequest"
    assert reply.json["message"].startswith(message)


def test_field_selectors_on_name(labelled, api_http):
    assert names(api_http.get("/api/v1/nodes?fieldSelector=metadata.name%3Db")) == ["b"]
    assert names(api_http.get("/api/v1/nodes?fieldSelector=metadata.name!%3Db")) == ["a", "c"]
    unsupported = api_http.get("/api/v1/nodes?fieldSelector=spec.foo%3Dx")
    assert unsupported.status == 400
    assert unsupported.json["message"] == "field label not supported: spec.foo"
    garbled = api_http.get("/api/v1/nodes?fieldSelector=metadata.name")
    assert garbled.status == 400
    assert "can't understand 'metadata.name'" in garbled.json["message"]


# ---------------------------------------------------------------- negotiation


def test_metadata_only_list_is_shaped_like_the_real_server(api, api_http):
    api.add_nodes(2)
    reply = api_http.get("/api/v1/nodes", accept=POM_LIST)
    body = reply.json
    assert body["kind"] == "PartialObjectMetadataList"
    assert body["apiVersion"] == "meta.k8s.io/v1"
    assert body["metadata"]["resourceVersion"] == str(api.resource_version)
    for item in body["items"]:
        assert set(item) == {"kind", "apiVersion", "metadata"}
        assert item["kind"] == "PartialObjectMetadata"
        assert item["apiVersion"] == "meta.k8s.io/v1"
        assert item["metadata"]["managedFields"]
        assert item["metadata"]["labels"]["karpenter.sh/nodepool"]
    full = api_http.get("/api/v1/nodes").data
    assert len(reply.data) < len(full) / 2


def test_metadata_only_single_get_and_patch_response(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    got = api_http.get(node_path(name), accept=POM).json
    assert (got["kind"], got["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
    patched = api_http.patch(
        node_path(name), {"metadata": {"annotations": {HOLD: "true"}}}, MERGE, accept=POM
    ).json
    assert patched["kind"] == "PartialObjectMetadata"
    assert patched["metadata"]["annotations"][HOLD] == "true"
    assert "status" not in patched


def test_accept_alternatives_q_values_and_406(api, api_http):
    api.add_nodes(1, eks=False)
    # An unusable first choice falls through to the next acceptable clause.
    picked = api_http.get(
        "/api/v1/nodes", accept="application/json;as=Nope;g=meta.k8s.io;v=v1, application/json"
    )
    assert picked.json["kind"] == "NodeList"
    # Higher q wins over order.
    by_q = api_http.get("/api/v1/nodes", accept=f"application/json;q=0.5, {POM_LIST};q=0.9")
    assert by_q.json["kind"] == "PartialObjectMetadataList"
    refused = api_http.get("/api/v1/nodes", accept="application/json;as=Nope;g=meta.k8s.io;v=v1")
    assert refused.status == 406
    assert refused.json["reason"] == "NotAcceptable"
    single_on_list = api_http.get("/api/v1/nodes", accept=POM)
    assert single_on_list.status == 406
    assert "the requested object is a list" in single_on_list.json["message"]
    yaml_reply = api_http.get("/api/v1/nodes", accept="application/yaml")
    assert yaml_reply.headers["Content-Type"] == "application/yaml"
    assert b"kind: NodeList" in yaml_reply.data


def test_table_for_nodes_uses_server_clock(api, api_http):
    now = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    api.set_clock(now)
    api.add_node("old", created=now - timedelta(days=3, hours=4))
    api.add_node("young", created=now - timedelta(minutes=5, seconds=30), eks=False)
    table = api_http.get("/api/v1/nodes", accept=TABLE).json
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]][:5] == [
        "Name",
        "Status",
        "Roles",
        "Age",
        "Version",
    ]
    rows = {r["cells"][0]: r for r in table["rows"]}
    assert rows["old"]["cells"][1:4] == ["Ready", "<none>", "3d4h"]
    assert rows["young"]["cells"][3] == "5m30s"
    assert rows["old"]["object"]["kind"] == "PartialObjectMetadata"
    full = api_http.get("/api/v1/nodes?includeObject=Object", accept=TABLE).json
    assert full["rows"][0]["object"]["kind"] == "Node"
    none = api_http.get("/api/v1/nodes?includeObject=None", accept=TABLE).json
    assert "object" not in none["rows"][0]
    bad = api_http.get("/api/v1/nodes?includeObject=All", accept=TABLE)
    assert bad.status == 400


def test_gzip_above_128_kib_only_when_accepted(api):
    api.add_nodes(30)  # ~12 KB each: the full list is well over 128 KiB
    pool = urllib3.PoolManager(retries=False)
    auth = {"Authorization": f"Bearer {api.token('admin')}"}
    big = pool.request(
        "GET",
        api.url + "/api/v1/nodes",
        headers={**auth, "Accept-Encoding": "gzip"},
        decode_content=False,
        preload_content=True,
    )
    assert big.headers["Content-Encoding"] == "gzip"
    assert json.loads(gzip.decompress(big.data))["kind"] == "NodeList"
    plain = pool.request("GET", api.url + "/api/v1/nodes", headers=auth, decode_content=False)
    assert "Content-Encoding" not in plain.headers
    small = pool.request(
        "GET",
        api.url + "/api/v1/nodes?limit=1",
        headers={**auth, "Accept-Encoding": "gzip"},
        decode_content=False,
    )
    assert "Content-Encoding" not in small.headers
    assert len(small.data) < 128 * 1024


# ---------------------------------------------------------------- patches


def test_merge_patch_sets_and_removes_annotations(api, api_http):
    name = api.add_node("n1", eks=False, annotations={"keep": "1", "drop": "2"})["metadata"]["name"]
    reply = api_http.patch(
        node_path(name), {"metadata": {"annotations": {HOLD: "true", "drop": None}}}, MERGE
    )
    assert reply.status == 200
    assert api.annotations(name) == {"keep": "1", HOLD: "true"}


def test_json_patch_all_ops_with_escaped_pointers(api, api_http):
    name = api.add_node("n1", eks=False, annotations={"a": "1", "b": "2"})["metadata"]["name"]
    ops = [
        {"op": "test", "path": "/metadata/annotations/a", "value": "1"},
        {
            "op": "add",
            "path": "/metadata/annotations/karpenter.sh~1do-not-disrupt",
            "value": "true",
        },
        {"op": "replace", "path": "/metadata/annotations/a", "value": "one"},
        {"op": "copy", "from": "/metadata/annotations/b", "path": "/metadata/annotations/c"},
        {"op": "move", "from": "/metadata/annotations/c", "path": "/metadata/annotations/d"},
        {"op": "remove", "path": "/metadata/annotations/b"},
    ]
    reply = api_http.patch(node_path(name), ops, JSONP)
    assert reply.status == 200, reply.data
    assert api.annotations(name) == {"a": "one", HOLD: "true", "d": "2"}
    # `~0` decodes to `~` (which no annotation key may contain: the decoded key is rejected).
    tilde = [{"op": "add", "path": "/metadata/annotations/tilde~0key", "value": "t"}]
    rejected = api_http.patch(node_path(name), tilde, JSONP)
    assert rejected.status == 422
    assert 'Invalid value: "tilde~key"' in rejected.json["message"]


def test_json_patch_failed_test_is_422_with_the_generic_message(api, api_http):
    name = api.add_node("n1", eks=False, annotations={"a": "1"})["metadata"]["name"]
    before = api.resource_version
    ops = [
        {"op": "test", "path": "/metadata/annotations/a", "value": "2"},
        {"op": "add", "path": "/metadata/annotations/b", "value": "x"},
    ]
    reply = api_http.patch(node_path(name), ops, JSONP)
    assert reply.status == 422
    assert reply.json["reason"] == "Invalid"
    assert reply.json["message"] == "the server rejected our request due to an error in our request"
    assert reply.json["details"] == {}
    assert api.annotations(name) == {"a": "1"}
    assert api.resource_version == before


def test_json_patch_remove_missing_key_is_422(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    reply = api_http.patch(
        node_path(name), [{"op": "remove", "path": "/metadata/annotations/x"}], JSONP
    )
    assert reply.status == 422


def test_strategic_merge_patch_follows_node_list_strategies(api, api_http):
    node = api.add_node("n1")
    name = node["metadata"]["name"]
    owner_uid = node["metadata"]["ownerReferences"][0]["uid"]
    patch = {
        "metadata": {
            "annotations": {HOLD: "true"},
            "finalizers": ["example.com/extra"],
            "ownerReferences": [{"uid": owner_uid, "name": "renamed"}],
        },
        "spec": {"taints": [{"key": "only", "effect": "NoSchedule"}]},
    }
    reply = api_http.patch(node_path(name), patch, SMP)
    assert reply.status == 200, reply.data
    stored = api.get_node(name)
    assert stored["metadata"]["annotations"][HOLD] == "true"
    assert len(stored["metadata"]["annotations"]) == len(node["metadata"]["annotations"]) + 1
    # finalizers merge as a set; ownerReferences merge by uid; taints (no strategy) replace.
    assert stored["metadata"]["finalizers"] == ["karpenter.sh/termination", "example.com/extra"]
    assert stored["metadata"]["ownerReferences"][0]["name"] == "renamed"
    assert stored["metadata"]["ownerReferences"][0]["kind"] == "NodeClaim"
    assert stored["spec"]["taints"] == [{"key": "only", "effect": "NoSchedule"}]


def test_strategic_merge_patch_directives(api, api_http):
    name = api.add_node("n1", eks=False, annotations={"a": "1", "b": "2"})["metadata"]["name"]
    replace = {"metadata": {"annotations": {"$patch": "replace", "c": "3"}}}
    assert api_http.patch(node_path(name), replace, SMP).status == 200
    assert api.annotations(name) == {"c": "3"}
    delete = {"metadata": {"annotations": {"$patch": "delete"}}}
    assert api_http.patch(node_path(name), delete, SMP).status == 200
    assert api.annotations(name) == {}
    ordered = {
        "$setElementOrder/conditions": [{"type": "Ready"}],
        "metadata": {"labels": {"x": "y"}},
    }
    assert api_http.patch(node_path(name), ordered, SMP).status == 200
    assert api.get_node(name)["metadata"]["labels"]["x"] == "y"


@pytest.mark.parametrize(
    "case",
    [
        (MERGE, b"{not json", 400, "Invalid JSON Patch"),
        (MERGE, b'"scalar"', 400, "Invalid JSON Patch"),
        (
            JSONP,
            b'{"op":"add"}',
            400,
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ),
        (JSONP, b"[{", 400, None),
        (SMP, b"[1]", 400, None),
        ("application/apply-patch+yaml", b"metadata: {}", 415, None),
        ("text/plain", b"{}", 415, "the body of the request was in an unknown format"),
    ],
)
def test_patch_bodies_that_do_not_fit_their_type(api, api_http, case):
    ctype, body, status, message = case
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    reply = api_http.patch(node_path(name), body, ctype)
    assert reply.status == status, reply.data
    assert reply.json["kind"] == "Status"
    if message:
        assert reply.json["message"].startswith(message)


def test_non_string_annotation_value(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    patched = api_http.patch(node_path(name), {"metadata": {"annotations": {"a": 1}}}, MERGE)
    assert patched.status == 422
    go_error = "cannot unmarshal number into Go struct field ObjectMeta.metadata.annotations"
    assert f"{go_error} of type string" in patched.json["message"]
    assert patched.json["message"].startswith(' "" is invalid: patch: Invalid value: ')
    node = api.get_node(name)
    node["metadata"]["annotations"] = {"a": 1}
    put = api_http.request("PUT", node_path(name), body=node)
    assert put.status == 400
    assert put.json["message"].startswith(
        'Node in version "v1" cannot be handled as a Node: json: cannot unmarshal number'
    )


# ---------------------------------------------------------------- concurrency, resourceVersion


def test_stale_resource_version_is_409_conflict(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    rv = api.get_node(name)["metadata"]["resourceVersion"]
    api.set_annotation(name, "someone", "else")
    reply = api_http.patch(
        node_path(name), {"metadata": {"resourceVersion": rv, "annotations": {HOLD: "true"}}}, MERGE
    )
    assert reply.status == 409
    assert reply.json["reason"] == "Conflict"
    assert reply.json["message"] == (
        f'Operation cannot be fulfilled on nodes "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert reply.json["details"] == {"name": name, "kind": "nodes"}
    assert HOLD not in api.annotations(name)


def test_put_with_stale_and_without_resource_version(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    node = api.get_node(name)
    api.set_annotation(name, "touch", "1")
    node["metadata"]["annotations"] = {"mine": "1"}
    assert api_http.request("PUT", node_path(name), body=node).status == 409
    del node["metadata"]["resourceVersion"]
    unconditional = api_http.request("PUT", node_path(name), body=node)
    assert unconditional.status == 200
    assert api.annotations(name) == {"mine": "1"}


def test_writes_bump_one_global_counter_and_no_ops_do_not(api, api_http):
    a = api.add_node("a", eks=False)["metadata"]["name"]
    b = api.add_node("b", eks=False)["metadata"]["name"]
    start = api.resource_version
    first = api_http.patch(node_path(a), {"metadata": {"annotations": {HOLD: "true"}}}, MERGE).json
    assert first["metadata"]["resourceVersion"] == str(start + 1)
    second = api_http.patch(node_path(b), {"metadata": {"annotations": {HOLD: "true"}}}, MERGE).json
    assert second["metadata"]["resourceVersion"] == str(start + 2)
    api.reset_log()
    same = api_http.patch(node_path(a), {"metadata": {"annotations": {HOLD: "true"}}}, MERGE)
    assert same.status == 200
    assert same.json["metadata"]["resourceVersion"] == str(start + 1)
    assert api.resource_version == start + 2
    assert [r.stored for r in api.writes()] == [False]


def test_managed_fields_track_the_writer(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    api_http.patch(
        node_path(name) + "?fieldManager=node-holder",
        {"metadata": {"annotations": {HOLD: "true"}}},
        MERGE,
    )
    entries = api.get_node(name)["metadata"]["managedFields"]
    mine = [e for e in entries if e["manager"] == "node-holder"]
    assert mine
    assert f"f:{HOLD}" in mine[0]["fieldsV1"]["f:metadata"]["f:annotations"]
    assert "f:spec" not in mine[0]["fieldsV1"]
    assert mine[0]["operation"] == "Update"


# ---------------------------------------------------------------- validation, strategy


def test_invalid_annotation_key_is_422_with_causes(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    reply = api_http.patch(node_path(name), {"metadata": {"annotations": {"bad key!": "x"}}}, MERGE)
    assert reply.status == 422
    status = reply.json
    assert status["reason"] == "Invalid"
    assert status["message"].startswith(
        f'Node "{name}" is invalid: metadata.annotations: Invalid value: "bad key!"'
    )
    assert status["details"]["kind"] == "Node"
    cause = status["details"]["causes"][0]
    assert cause["reason"] == "FieldValueInvalid"
    assert cause["field"] == "metadata.annotations"
    assert "name part must consist of alphanumeric characters" in cause["message"]


def test_annotations_over_256_kib_are_too_long(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    reply = api_http.patch(
        node_path(name), {"metadata": {"annotations": {"big": "x" * 262_142}}}, MERGE
    )
    assert reply.status == 422
    assert (
        reply.json["details"]["causes"][0]["message"] == "Too long: must have at most 262144 bytes"
    )
    fits = api_http.patch(
        node_path(name), {"metadata": {"annotations": {"big": "x" * 262_141}}}, MERGE
    )
    assert fits.status == 200


def test_label_value_over_63_is_invalid(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    reply = api_http.patch(node_path(name), {"metadata": {"labels": {"k": "v" * 64}}}, MERGE)
    assert reply.status == 422
    assert "must be no more than 63 characters" in reply.json["message"]


def test_name_mismatch_system_fields_and_status_on_main_resource(api, api_http):
    node = api.add_node("n1")
    name = node["metadata"]["name"]
    renamed = api_http.patch(node_path(name), {"metadata": {"name": "other"}}, MERGE)
    assert renamed.status == 400
    assert (
        renamed.json["message"]
        == f"the name of the object (other) does not match the name on the URL ({name})"
    )
    edits = {
        "metadata": {"creationTimestamp": "2000-01-01T00:00:00Z", "labels": {"x": "y"}},
        "status": {"capacity": {"cpu": "999"}},
    }
    reply = api_http.patch(node_path(name), edits, MERGE)
    assert reply.status == 200
    stored = api.get_node(name)
    assert stored["metadata"]["creationTimestamp"] == node["metadata"]["creationTimestamp"]
    assert stored["metadata"]["labels"]["x"] == "y"
    assert stored["status"]["capacity"]["cpu"] == node["status"]["capacity"]["cpu"]
    via_status = api_http.patch(
        node_path(name) + "/status", {"status": {"capacity": {"cpu": "999"}}}, MERGE
    )
    assert via_status.status == 200
    assert api.get_node(name)["status"]["capacity"]["cpu"] == "999"


def test_create_conflict_delete_and_finalizers(api, api_http):
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "new1"}}
    created = api_http.request("POST", "/api/v1/nodes", body=body)
    assert created.status == 201
    assert created.json["metadata"]["uid"] and created.json["metadata"]["resourceVersion"]
    again = api_http.request("POST", "/api/v1/nodes", body=body)
    assert again.status == 409
    assert again.json["reason"] == "AlreadyExists"
    assert again.json["message"] == 'nodes "new1" already exists'
    deleted = api_http.request("DELETE", "/api/v1/nodes/new1")
    assert deleted.status == 200
    assert deleted.json["status"] == "Success"
    assert deleted.json["details"]["name"] == "new1"
    missing = api_http.get("/api/v1/nodes/new1")
    assert missing.status == 404
    assert missing.json["message"] == 'nodes "new1" not found'
    assert missing.json["details"] == {"name": "new1", "kind": "nodes"}
    # With a finalizer the delete only marks the node; removing the finalizer finishes it.
    kept = api.add_node("kept")["metadata"]["name"]
    marked = api_http.request("DELETE", node_path(kept))
    assert marked.status == 200
    assert marked.json["metadata"]["deletionTimestamp"]
    assert api.get_node(kept)["metadata"]["deletionTimestamp"]
    done = api_http.patch(node_path(kept), {"metadata": {"finalizers": None}}, MERGE)
    assert done.status == 200
    assert api.get_node(kept) is None


def test_deleting_node_from_python_api(api):
    node = api.add_node("d1", deleting=True)
    assert node["metadata"]["deletionTimestamp"]
    assert "karpenter.sh/termination" in node["metadata"]["finalizers"]
    api.add_node("d2", eks=False)
    marked = api.mark_deleting("d2")
    assert marked["metadata"]["deletionTimestamp"]
    assert api.delete_node("d2") is True
    assert api.node_names() == ["d1"]


# ---------------------------------------------------------------- auth


def test_unauthenticated_is_401_with_the_real_body(api, api_http):
    for identity_headers in ({}, {"Authorization": "Bearer nope"}):
        reply = api_http.get("/api/v1/nodes", identity=None, headers=identity_headers)
        assert reply.status == 401
        assert reply.json == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        }


def test_readonly_may_read_but_not_write(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    assert api_http.get("/api/v1/nodes", identity="readonly").status == 200
    assert api_http.get("/api/v1", identity="readonly").status == 200
    reply = api_http.patch(
        node_path(name), {"metadata": {"annotations": {HOLD: "true"}}}, MERGE, identity="readonly"
    )
    assert reply.status == 403
    assert reply.json["message"] == (
        f'nodes "{name}" is forbidden: User "system:serviceaccount:kube-system:node-viewer" '
        'cannot patch resource "nodes" in API group "" at the cluster scope'
    )
    assert reply.json["reason"] == "Forbidden"
    event = api_http.request(
        "POST", "/api/v1/namespaces/default/events", body={}, identity="readonly"
    )
    assert event.status == 403
    assert (
        'cannot create resource "events" in API group "" in the namespace "default"'
        in event.json["message"]
    )
    assert HOLD not in api.annotations(name)


def test_token_in_path_prefix_authenticates(api):
    pool = urllib3.PoolManager(retries=False)
    reply = pool.request("GET", f"{api.url}/token/{api.token('readonly')}/api/v1/nodes")
    assert reply.status == 200
    assert api.requests[-1].path == "/api/v1/nodes"
    assert api.requests[-1].identity == "readonly"


# ---------------------------------------------------------------- dry run


def test_dry_run_answers_without_storing(api, api_http):
    name = api.add_node("n1")["metadata"]["name"]
    before = api.resource_version
    patched = api_http.patch(
        node_path(name) + "?dryRun=All", {"metadata": {"annotations": {HOLD: "true"}}}, MERGE
    )
    assert patched.status == 200
    assert patched.json["metadata"]["annotations"][HOLD] == "true"
    assert patched.json["metadata"]["resourceVersion"] == str(before)
    created = api_http.request(
        "POST", "/api/v1/nodes?dryRun=All", body={"metadata": {"name": "dry"}}
    )
    assert created.status == 201
    deleted = api_http.request("DELETE", node_path(name) + "?dryRun=All")
    assert deleted.status == 200 and deleted.json["metadata"]["deletionTimestamp"]
    invalid = api_http.patch(node_path(name) + "?dryRun=Some", {"metadata": {}}, MERGE)
    assert invalid.status == 422
    assert invalid.json["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Some"}: '
        'supported values: "All"'
    )
    assert api.resource_version == before
    assert HOLD not in api.annotations(name)
    assert api.get_node("dry") is None
    assert "deletionTimestamp" not in api.get_node(name)["metadata"]
    assert all(not r.stored for r in api.writes())


# ---------------------------------------------------------------- events


def _node_event(node: str, reason: str = "Held") -> dict:
    return {
        "metadata": {"generateName": f"{node}."},
        "involvedObject": {"kind": "Node", "name": node, "uid": node, "apiVersion": "v1"},
        "reason": reason,
        "message": "held",
        "type": "Normal",
        "source": {"component": "node-holder"},
        "firstTimestamp": "2025-01-01T00:00:00Z",
        "lastTimestamp": "2025-01-01T00:00:00Z",
        "count": 1,
    }


def test_core_events_are_stored_and_selectable(api, api_http):
    created = api_http.request("POST", "/api/v1/namespaces/default/events", body=_node_event("n1"))
    assert created.status == 201, created.data
    meta = created.json["metadata"]
    assert (
        meta["name"].startswith("n1.")
        and meta["uid"]
        and meta["resourceVersion"]
        and meta["creationTimestamp"]
    )
    api_http.request(
        "POST", "/api/v1/namespaces/default/events", body=_node_event("n2", "Released")
    )
    everything = api_http.get("/api/v1/events").json
    assert everything["kind"] == "EventList" and len(everything["items"]) == 2
    per_ns = api_http.get(
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dn2"
    ).json
    assert [e["reason"] for e in per_ns["items"]] == ["Released"]
    kube_system = api_http.get("/api/v1/namespaces/kube-system/events").json
    assert kube_system["items"] == []
    assert [e["reason"] for e in api.events] == ["Held", "Released"]


def test_node_event_outside_default_namespace_is_invalid(api, api_http):
    reply = api_http.request(
        "POST", "/api/v1/namespaces/kube-system/events", body=_node_event("n1")
    )
    assert reply.status == 422
    assert (
        'involvedObject.namespace: Invalid value: "": does not match event.namespace'
        in reply.json["message"]
    )


def test_events_k8s_io_share_storage_with_core_events(api, api_http):
    body = {
        "metadata": {"name": "e1"},
        "eventTime": "2025-01-01T00:00:00.000000Z",
        "reportingController": "node-holder",
        "reportingInstance": "node-holder-abc",
        "action": "Hold",
        "reason": "Held",
        "regarding": {"kind": "Node", "name": "n1", "apiVersion": "v1"},
        "note": "held for 10m",
        "type": "Normal",
    }
    created = api_http.request(
        "POST", "/apis/events.k8s.io/v1/namespaces/default/events", body=body
    )
    assert created.status == 201, created.data
    assert created.json["apiVersion"] == "events.k8s.io/v1"
    assert created.json["regarding"]["name"] == "n1"
    core = api_http.get("/api/v1/namespaces/default/events/e1").json
    assert core["involvedObject"]["name"] == "n1" and core["message"] == "held for 10m"
    assert core["reportingComponent"] == "node-holder"
    found = api_http.get("/apis/events.k8s.io/v1/events?fieldSelector=regarding.name%3Dn1").json
    assert [e["note"] for e in found["items"]] == ["held for 10m"]
    missing = dict(body, metadata={"name": "e2"})
    del missing["eventTime"]
    rejected = api_http.request(
        "POST", "/apis/events.k8s.io/v1/namespaces/default/events", body=missing
    )
    assert rejected.status == 422
    assert "eventTime: Required value" in rejected.json["message"]
    assert api.events[0]["note"] == "held for 10m"


# ---------------------------------------------------------------- faults, hooks, log


def test_fault_status_retry_after_and_times(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    fault = api.inject(Fault(method="PATCH", path=r"/nodes/", status=503, times=2, retry_after=3))
    body = {"metadata": {"annotations": {HOLD: "true"}}}
    for _ in range(2):
        reply = api_http.patch(node_path(name), body, MERGE)
        assert reply.status == 503
        assert reply.headers["Retry-After"] == "3"
        assert reply.json["reason"] == "ServiceUnavailable"
    assert api_http.get(node_path(name)).status == 200  # GET does not match
    assert api_http.patch(node_path(name), body, MERGE).status == 200
    assert fault.hits == 2 and fault.spent
    assert api.annotations(name)[HOLD] == "true"


def test_fault_429_plain_text_and_conflict(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    api.inject(Fault(method="GET", status=429, retry_after=1, plain_text=True))
    throttled = api_http.get(node_path(name))
    assert throttled.status == 429
    assert throttled.data.startswith(b"Too many requests")
    api.inject(Fault(method="PATCH", status=409))
    conflicted = api_http.patch(node_path(name), {"metadata": {}}, MERGE)
    assert conflicted.status == 409
    assert conflicted.json["message"].startswith(f'Operation cannot be fulfilled on nodes "{name}"')


def test_fault_delay_exceeds_client_timeout_and_drop_connection(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    api.inject(Fault(method="GET", delay=0.5))
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        api_http.get(node_path(name), timeout=0.1)
    api.inject(Fault(method="GET", drop_connection=True))
    with pytest.raises(urllib3.exceptions.ProtocolError):
        api_http.get(node_path(name))
    assert api_http.get(node_path(name)).status == 200
    api.clear_faults()


def test_hook_lets_a_person_edit_between_list_and_patch(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    rv = api_http.get("/api/v1/nodes", accept=POM_LIST).json["items"][0]["metadata"][
        "resourceVersion"
    ]
    seen: list[RequestInfo] = []

    def person(req: RequestInfo) -> None:
        seen.append(req)
        if req.method == "PATCH" and len(seen) == 1:
            api.set_annotation(name, "person", "was here")

    api.on_request(person)
    body = {"metadata": {"resourceVersion": rv, "annotations": {HOLD: "true"}}}
    reply = api_http.patch(node_path(name), body, MERGE)
    api.remove_hook(person)
    assert reply.status == 409
    assert seen[0].identity == "admin" and seen[0].content_type == MERGE
    assert json.loads(seen[0].body)["metadata"]["annotations"][HOLD] == "true"
    assert api.annotations(name) == {"person": "was here"}


def test_request_log_and_writes(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    api.reset_log()
    api_http.get("/api/v1/nodes?limit=5", accept=POM_LIST)
    api_http.patch(
        node_path(name), {"metadata": {"annotations": {HOLD: "true"}}}, MERGE, identity="readonly"
    )
    api_http.patch(node_path(name), {"metadata": {"annotations": {HOLD: "true"}}}, MERGE)
    listed, denied, written = api.requests
    assert (listed.method, listed.path, listed.query, listed.status) == (
        "GET",
        "/api/v1/nodes",
        {"limit": "5"},
        200,
    )
    assert listed.accept == POM_LIST and listed.identity == "admin" and listed.bytes_out > 0
    assert (denied.status, denied.identity) == (403, "readonly")
    assert written.bytes_in > 0 and written.content_type == MERGE and written.stored
    assert [w.status for w in api.writes()] == [403, 200]
    assert written.duration >= 0


def test_write_latency_applies_to_stored_writes_only(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    api.write_latency = 0.3
    api_http.patch(node_path(name), {"metadata": {"annotations": {HOLD: "true"}}}, MERGE)
    api_http.patch(node_path(name), {"metadata": {"annotations": {HOLD: "true"}}}, MERGE)
    stored, noop = api.writes()
    assert stored.stored and stored.duration >= 0.3
    assert not noop.stored and noop.duration < 0.3


def test_date_header_follows_the_server_clock():
    with ApiServer(clock_offset=timedelta(days=-400)) as shifted:
        reply = urllib3.PoolManager().request(
            "GET",
            shifted.url + "/version",
            headers={"Authorization": f"Bearer {shifted.token('admin')}"},
        )
        date = parsedate_to_datetime(reply.headers["Date"])
        assert abs((date - (datetime.now(UTC) - timedelta(days=400))).total_seconds()) < 5
        frozen = datetime(2024, 2, 29, 23, 59, 58, tzinfo=UTC)
        shifted.set_clock(frozen)
        shifted.advance_clock(timedelta(seconds=3))
        reply = urllib3.PoolManager().request(
            "GET",
            shifted.url + "/version",
            headers={"Authorization": f"Bearer {shifted.token('admin')}"},
        )
        assert reply.headers["Date"] == "Fri, 01 Mar 2024 00:00:01 GMT"
        assert shifted.now() == frozen + timedelta(seconds=3)
        assert reply.headers["Audit-Id"]


# ---------------------------------------------------------------- discovery and the rest


def test_discovery_documents(api, api_http):
    version = api_http.get("/version").json
    assert (version["major"], version["minor"]) == ("1", "32")
    core = api_http.get("/api/v1").json
    nodes = next(r for r in core["resources"] if r["name"] == "nodes")
    assert nodes["verbs"] == [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ]
    assert nodes["namespaced"] is False and nodes["shortNames"] == ["no"]
    assert {r["name"] for r in core["resources"]} >= {
        "nodes",
        "nodes/status",
        "events",
        "namespaces",
        "pods",
    }
    groups = api_http.get("/apis").json
    assert "events.k8s.io" in [g["name"] for g in groups["groups"]]
    assert api_http.get("/apis/events.k8s.io/v1").json["resources"][0]["kind"] == "Event"
    aggregated = api_http.get(
        "/api",
        accept="application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
    )
    assert aggregated.headers["Content-Type"] == "application/json"
    assert aggregated.json["kind"] == "APIVersions"
    unknown = api_http.get("/api/v1/widgets")
    assert unknown.status == 404 and unknown.json["reason"] == "NotFound"


def test_namespaces_pods_and_leases(api, api_http):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    assert api_http.get("/api/v1/namespaces/kube-system").json["status"]["phase"] == "Active"
    assert api_http.get("/api/v1/namespaces/nope").status == 404
    assert {n["metadata"]["name"] for n in api_http.get("/api/v1/namespaces").json["items"]} >= {
        "default",
        "kube-system",
    }
    pods = api_http.get(
        f"/api/v1/pods?fieldSelector=spec.nodeName%3D{name},status.phase!%3DSucceeded"
    )
    assert pods.json["kind"] == "PodList" and pods.json["items"] == []
    lease = api_http.get(
        f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
    ).json
    assert lease["spec"]["holderIdentity"] == name
    assert (
        api_http.get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/x").status
        == 404
    )
