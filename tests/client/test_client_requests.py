"""The request path's shortcuts keep their promises.

List pages come back in order, each page sent once, as plain metadata; each error status that
matters has its own type; credentials are cached for a second, yet a rotated token is used;
the shortcut to the connection pool leaves a configured proxy in charge.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from reconcile.cluster.access import connection_for
from reconcile.cluster.client import Client, Page
from reconcile.cluster.errors import (
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    ServerError,
    TooManyRequests,
    Unauthorized,
)
from reconcile.cluster.transport import AUTH_REFRESH_SECONDS
from reconcile.rule.settings import ClusterAccess
from tests.kubeapi.apiserver import ApiServer, Fault


def read(kube: Client, name: str = "n") -> None:
    assert kube.get_node(name).items[0]["name"] == name


def client_for(kubeconfig: Path) -> Client:
    return Client(connection_for(ClusterAccess(kubeconfig=str(kubeconfig))), pool_size=2)


def page(kube: Client, token: str | None = None) -> Page:
    return kube.list_nodes(limit=5, continue_token=token)


def add_old(api: ApiServer, count: int) -> list[str]:
    names = [f"n{i:02}" for i in range(count)]
    for name in names:
        api.add_node(name, created=api.now() - timedelta(hours=1), eks=False)
    return names


def test_pages_come_in_order_each_sent_once_as_plain_metadata(
    api: ApiServer, kubeconfig: Path
) -> None:
    names = add_old(api, 12)
    kube = client_for(kubeconfig)

    first = page(kube)
    second = page(kube, first.continue_token)
    third = page(kube, second.continue_token)

    assert [m["name"] for p in (first, second, third) for m in p.items] == names
    assert all(isinstance(m, dict) and "creationTimestamp" in m for m in first.items)
    assert third.continue_token is None
    assert first.date is not None and abs(first.date - api.now()) < timedelta(seconds=2)
    lists = [r.query.get("continue", "") for r in api.requests]
    assert lists == ["", first.continue_token, second.continue_token]  # each page once
    assert kube.requests == 3


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, Unauthorized),
        (403, Forbidden),
        (404, NotFound),
        (409, Conflict),
        (410, Gone),
        (429, TooManyRequests),
        (500, ServerError),
        (503, ServerError),
    ],
)
def test_each_status_that_matters_has_its_own_error_type(
    api: ApiServer, kubeconfig: Path, status: int, kind: type[Exception]
) -> None:
    api.add_node("n", created=api.now() - timedelta(hours=1), eks=False)
    api.inject(Fault(method="PATCH", status=status))
    kube = client_for(kubeconfig)
    with pytest.raises(kind) as raised:
        kube.patch_node("n", {"metadata": {"annotations": {"a": "b"}}})
    assert raised.value.status == status
    assert "n" in raised.value.explain()


def test_a_missing_node_is_not_found(api: ApiServer, kubeconfig: Path) -> None:
    with pytest.raises(NotFound):
        client_for(kubeconfig).get_node("nowhere")


def test_a_stale_resource_version_is_a_conflict(api: ApiServer, kubeconfig: Path) -> None:
    api.add_node("n", created=api.now() - timedelta(hours=1), eks=False)
    kube = client_for(kubeconfig)
    stale = kube.get_node("n").items[0]["resourceVersion"]
    fresh = kube.patch_node("n", {"metadata": {"annotations": {"a": "1"}}})
    assert fresh != stale
    with pytest.raises(Conflict):
        kube.patch_node("n", {"metadata": {"annotations": {"a": "2"}, "resourceVersion": stale}})
    assert api.annotations("n")["a"] == "1"


def test_credentials_are_asked_for_once_a_second_and_a_rotated_token_is_used(
    api: ApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    api.add_node("n", created=api.now() - timedelta(hours=1), eks=False)
    token_file = tmp_path / "token"  # like a kubelet-rotated service account token
    token_file.write_text(api.token("admin"))
    doc = yaml.safe_load(kubeconfig.read_text())
    doc["users"][0]["user"] = {"tokenFile": str(token_file)}
    kubeconfig.write_text(yaml.safe_dump(doc))
    connection = connection_for(ClusterAccess(kubeconfig=str(kubeconfig)))
    asked: list[dict[str, str]] = []

    def credentials() -> dict[str, str]:
        asked.append(connection.credentials())
        return asked[-1]

    now = [100.0]
    counted = dataclasses.replace(connection, credentials=credentials)
    kube = Client(counted, clock=lambda: now[0])
    for _ in range(5):
        read(kube)
    token_file.write_text(api.token("readonly") + "\n")  # the credential rotates
    read(kube)  # within the same second: the cached token still goes out
    now[0] += AUTH_REFRESH_SECONDS
    read(kube)
    assert len(asked) == 2
    assert [r.identity for r in api.requests] == ["admin"] * 6 + ["readonly"]
    assert kube.requests == 7


def test_requests_go_through_a_configured_http_proxy(api: ApiServer, kubeconfig: Path) -> None:
    api.add_node("n", created=api.now() - timedelta(hours=1), eks=False)
    connection = connection_for(ClusterAccess(kubeconfig=str(kubeconfig)))
    # A server name only the proxy can reach; the test server takes absolute-form request
    # targets (`GET http://host/path`), so it can be the proxy in front of itself.
    server = connection.server.replace(api.url, "http://kube-apiserver.invalid")
    kube = Client(dataclasses.replace(connection, server=server, proxy=api.url))
    read(kube)
    listed = kube.list_nodes(limit=10)
    assert [m["name"] for m in listed.items] == ["n"]
    assert [(r.method, r.path, r.status) for r in api.requests] == [
        ("GET", "/api/v1/nodes/n", 200),
        ("GET", "/api/v1/nodes", 200),
    ]
