"""The official kubernetes python client against the API test server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.kubeapi.apiserver import ApiServer

HOLD = "karpenter.sh/do-not-disrupt"
POM_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


@pytest.fixture
def core(kubeconfig: Path) -> Iterator[client.CoreV1Api]:
    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        yield client.CoreV1Api(api_client)
    finally:
        api_client.close()


def status_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_list_node_pages_with_limit_and_continue(api: ApiServer, core):
    created = api.add_nodes(5, eks=False, labels={"pool": "a"})
    api.add_node("other", eks=False, labels={"pool": "b"})
    seen, token = [], None
    while True:
        page = core.list_node(limit=2, _continue=token, label_selector="pool=a")
        seen += [n.metadata.name for n in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert seen == created
    assert [n.metadata.name for n in core.list_node(label_selector="pool!=a").items] == ["other"]


def test_read_node_is_a_typed_object(api, core):
    api.add_node("ip-10-0-0-5.ec2.internal")
    node = core.read_node("ip-10-0-0-5.ec2.internal")
    assert node.spec.provider_id.startswith("aws:///")
    assert node.metadata.owner_references[0].kind == "NodeClaim"
    assert node.status.node_info.kubelet_version.startswith("v1.32")
    assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)


def test_patch_node_strategic_by_default_and_merge_when_asked(api, core):
    name = api.add_node("n1", eks=False, annotations={"keep": "1"})["metadata"]["name"]
    patched = core.patch_node(name, {"metadata": {"annotations": {HOLD: "true"}}})
    assert patched.metadata.annotations == {"keep": "1", HOLD: "true"}
    assert api.requests[-1].content_type == "application/strategic-merge-patch+json"
    core.patch_node(
        name,
        {"metadata": {"annotations": {HOLD: None}}},
        _content_type="application/merge-patch+json",
    )
    assert api.requests[-1].content_type == "application/merge-patch+json"
    assert api.annotations(name) == {"keep": "1"}


def test_patch_with_stale_resource_version_raises_409(api, core):
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    rv = core.read_node(name).metadata.resource_version
    api.set_annotation(name, "person", "edit")
    with pytest.raises(ApiException) as caught:
        core.patch_node(
            name,
            {"metadata": {"resourceVersion": rv, "annotations": {HOLD: "true"}}},
            _content_type="application/merge-patch+json",
        )
    assert caught.value.status == 409
    assert status_of(caught.value)["reason"] == "Conflict"


def test_create_and_delete_node(api, core):
    body = client.V1Node(metadata=client.V1ObjectMeta(name="made", labels={"a": "b"}))
    made = core.create_node(body)
    assert made.metadata.uid and made.metadata.creation_timestamp
    assert api.get_node("made")["metadata"]["labels"] == {"a": "b"}
    with pytest.raises(ApiException) as caught:
        core.create_node(body)
    assert caught.value.status == 409
    assert status_of(caught.value)["reason"] == "AlreadyExists"
    status = core.delete_node("made")  # the generated client returns a plain dict here
    assert status["status"] == "Success"
    assert api.get_node("made") is None


def test_errors_raise_api_exception_with_a_status_body(api, core, tmp_path):
    with pytest.raises(ApiException) as missing:
        core.read_node("nope")
    assert missing.value.status == 404
    assert status_of(missing.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'nodes "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "nodes"},
        "code": 404,
    }
    name = api.add_node("n1", eks=False)["metadata"]["name"]
    with pytest.raises(ApiException) as invalid:
        core.patch_node(name, {"metadata": {"annotations": {"no good": "x"}}})
    assert invalid.value.status == 422
    readonly = config.new_client_from_config(
        config_file=str(api.write_kubeconfig(tmp_path / "ro.yaml", identity="readonly"))
    )
    try:
        with pytest.raises(ApiException) as denied:
            client.CoreV1Api(readonly).patch_node(name, {"metadata": {"labels": {"x": "y"}}})
        assert denied.value.status == 403
        assert status_of(denied.value)["reason"] == "Forbidden"
    finally:
        readonly.close()
    anonymous = config.new_client_from_config(
        config_file=str(api.write_kubeconfig(tmp_path / "anon.yaml", identity="noauth"))
    )
    try:
        with pytest.raises(ApiException) as unauthorized:
            client.CoreV1Api(anonymous).list_node()
        assert unauthorized.value.status == 401
    finally:
        anonymous.close()


def test_metadata_only_list_through_call_api(api, kubeconfig):
    api.add_nodes(3)
    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        method, url, headers, body, post = api_client.param_serialize(
            "GET",
            "/api/v1/nodes",
            query_params=[("limit", 2)],
            header_params={"Accept": POM_LIST},
            auth_settings=["BearerToken"],
        )
        response = api_client.call_api(
            method, url, header_params=headers, body=body, post_params=post
        )
        response.read()
        body = json.loads(response.data)
    finally:
        api_client.close()
    assert body["kind"] == "PartialObjectMetadataList"
    assert len(body["items"]) == 2
    assert body["metadata"]["remainingItemCount"] == 1
    assert body["items"][0]["kind"] == "PartialObjectMetadata"
    assert "spec" not in body["items"][0]
    assert api.requests[-1].identity == "admin"
