"""The request path's shortcuts keep their promises.

The next list page is asked for while the current one is parsed, yet each page is sent once
and its errors reach the caller; credentials are cached for a second, yet a rotated token is
used; the shortcut to the connection pool leaves a configured proxy in charge.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from reconcile.kube import AUTH_REFRESH_SECONDS, ApiError, Kube, Page, load_configuration
from reconcile.settings import OWNERSHIP_MARKER, ClusterAccess
from tests.kubeapi.apiserver import ApiServer, Fault, RequestInfo

KEYS = frozenset({"karpenter.sh/do-not-disrupt", OWNERSHIP_MARKER})


def read(kube: Kube, name: str = "n") -> None:
    assert kube.read_node(name, annotation_keys=KEYS, label_keys=frozenset()) is not None


def kube_for(kubeconfig: Path) -> Kube:
    return Kube(load_configuration(ClusterAccess(kubeconfig=str(kubeconfig)), pool_size=2))


def page(kube: Kube, token: str | None = None) -> Page:
    return kube.list_page(
        page_size=5, annotation_keys=KEYS, label_keys=frozenset(), continue_token=token
    )


def add_old(api: ApiServer, count: int) -> list[str]:
    names = [f"n{i:02}" for i in range(count)]
    for name in names:
        api.add_node(name, created=api.now() - timedelta(hours=1), eks=False)
    return names


def test_the_next_page_is_asked_for_before_the_caller_wants_it_and_sent_once(
    api: ApiServer, kubeconfig: Path
) -> None:
    names = add_old(api, 12)
    asked_ahead = threading.Event()
    api.on_request(lambda req: asked_ahead.set() if req.query.get("continue") else None)
    kube = kube_for(kubeconfig)

    first = page(kube)
    assert asked_ahead.wait(10)  # page 2 is on its way before anyone asked for it
    second = page(kube, first.continue_token)
    third = page(kube, second.continue_token)

    assert [n.name for p in (first, second, third) for n in p.nodes] == names
    assert third.continue_token is None
    lists = [r.query.get("continue", "") for r in api.requests]
    assert lists == ["", first.continue_token, second.continue_token]  # each page once
    assert kube.requests == 3


def test_an_error_on_the_page_asked_ahead_is_raised_for_that_page(
    api: ApiServer, kubeconfig: Path
) -> None:
    names = add_old(api, 10)

    def fail_second_page(req: RequestInfo) -> None:
        if req.query.get("continue") and not api.requests[1:]:  # its first attempt only
            api.inject(Fault(method="GET", status=503, times=1))

    api.on_request(fail_second_page)
    kube = kube_for(kubeconfig)
    first = page(kube)
    with pytest.raises(ApiError) as failed:
        page(kube, first.continue_token)
    assert failed.value.status == 503
    second = page(kube, first.continue_token)  # asked again: a request of its own

    assert [n.name for p in (first, second) for n in p.nodes] == names
    assert [r.status for r in api.requests] == [200, 503, 200]


def test_credentials_are_asked_for_once_a_second_and_a_rotated_token_is_used(
    api: ApiServer, kubeconfig: Path
) -> None:
    api.add_node("n", created=api.now() - timedelta(hours=1), eks=False)
    cfg = load_configuration(ClusterAccess(kubeconfig=str(kubeconfig)), pool_size=2)
    current = {"token": api.token("admin")}
    refreshes: list[str] = []

    def refresh(c: Any) -> None:  # like an exec plugin or a kubelet-rotated token file
        refreshes.append(current["token"])
        c.api_key["BearerToken"] = f"Bearer {current['token']}"

    cfg.refresh_api_key_hook = refresh
    now = [100.0]
    kube = Kube(cfg, clock=lambda: now[0])
    for _ in range(5):
        read(kube)
    current["token"] = api.token("readonly")  # the credential rotates
    read(kube)  # within the same second: the cached token still goes out
    now[0] += AUTH_REFRESH_SECONDS
    read(kube)
    assert len(refreshes) == 2
    assert [r.identity for r in api.requests] == ["admin"] * 6 + ["readonly"]
    assert kube.requests == 7


def test_requests_go_through_a_configured_http_proxy(api: ApiServer, kubeconfig: Path) -> None:
    api.add_node("n", created=api.now() - timedelta(hours=1), eks=False)
    cfg = load_configuration(ClusterAccess(kubeconfig=str(kubeconfig)), pool_size=2)
    # A server name only the proxy can reach; the test server takes absolute-form request
    # targets (`GET http://host/path`), so it can be the proxy in front of itself.
    cfg.host = cfg.host.replace(api.url, "http://kube-apiserver.invalid")
    cfg.proxy, cfg.no_proxy = api.url, ""
    kube = Kube(cfg)
    read(kube)
    page = kube.list_page(page_size=10, annotation_keys=KEYS, label_keys=frozenset())
    assert [n.name for n in page.nodes] == ["n"]
    assert [(r.method, r.path, r.status) for r in api.requests] == [
        ("GET", "/api/v1/nodes/n", 200),
        ("GET", "/api/v1/nodes", 200),
    ]
