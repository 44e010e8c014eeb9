"""Answers a proxy in between might give: a run acts only on a whole list it could read.

A list page is a page only if it is a `...List` with an `items` array; an empty body, `{}`,
a `Status`, `items: null` mid-list, JSON `null` or `[]`, an HTML page or a truncated gzip body
is a fault of the way there: retried within the deadline, then exit 1, one clear line,
nothing changed. On a patch, an unreadable answer means "unknown whether it landed": the
node is read again and decided again, as after a 409.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clusters import CliResult, run_cli
from tests.helpers import KEY, NODES, OURS, assert_one_clear_line, old, young
from tests.kubeapi.apiserver import ApiServer, Fault, RequestInfo

PAGE = b'{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{},'
HTML = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
ANSWERS = {
    "empty body": Fault(raw=b""),
    "{}": Fault(raw=b"{}"),
    "Status Success": Fault(raw=b'{"kind":"Status","apiVersion":"v1","status":"Success"}'),
    "items: null": Fault(raw=PAGE + b'"items":null}'),
    "no items": Fault(raw=PAGE[:-1] + b"}"),
    "JSON null": Fault(raw=b"null"),
    "JSON []": Fault(raw=b"[]"),
    "a proxy's HTML": Fault(raw=HTML, content_type="text/html"),
    "truncated gzip": Fault(
        raw=PAGE + b'"items":[' + b'{"metadata":{}},' * 50 + b"]}", gzip_cut=True
    ),
}
NAMES = ("n1", "n2", "n3", "n4", "n5", "n6")


def reconcile(kubeconfig: Path, *args: str) -> CliResult:
    return run_cli("reconcile", "--kubeconfig", str(kubeconfig), "--page-size", "3", *args)


def held_cluster_with_a_young_node_on_page_two(api: ApiServer) -> None:
    """Every node held by us; the only reason to keep holding is n5, on the second page."""
    old(api, "n1", "n2", "n3", "n4", "n6", annotations=OURS)
    young(api, "n5", annotations=OURS)


def answer_continued_pages(api: ApiServer, fault: Fault, times: int | None) -> None:
    """Every request for a continued page gets `fault`, up to `times` in all."""
    spent: list[int] = []

    def hook(req: RequestInfo) -> None:
        if req.path == NODES and "continue" in req.query and (times is None or len(spent) < times):
            spent.append(1)
            api.inject(Fault(**{**vars(fault), "method": "GET", "path": f"^{NODES}$", "hits": 0}))

    api.on_request(hook)


@pytest.mark.parametrize("kind", list(ANSWERS))
def test_a_page_that_is_not_a_list_page_fails_the_run_and_changes_nothing(
    api: ApiServer, kubeconfig: Path, kind: str
) -> None:
    held_cluster_with_a_young_node_on_page_two(api)
    answer_continued_pages(api, ANSWERS[kind], times=None)

    result = reconcile(kubeconfig, "--timeout", "4s")

    assert result.code == 1, result.stderr
    line = assert_one_clear_line(result.stderr)
    assert "cannot list nodes" in line and "nothing was changed" in line, line
    assert api.writes() == []
    assert all(api.annotations(n) == OURS for n in NAMES)
    continued = [r for r in api.requests if r.path == NODES and "continue" in r.query]
    assert len(continued) > 1  # retried within the deadline before giving up


@pytest.mark.parametrize("kind", ["{}", "a proxy's HTML", "truncated gzip"])
def test_a_page_unreadable_once_is_retried_and_the_run_succeeds(
    api: ApiServer, kubeconfig: Path, kind: str
) -> None:
    held_cluster_with_a_young_node_on_page_two(api)
    answer_continued_pages(api, ANSWERS[kind], times=1)

    result = reconcile(kubeconfig)

    assert result.code == 0, result.stderr
    assert api.writes() == []  # n5 still holds the cluster: nothing to change
    assert all(api.annotations(n) == OURS for n in NAMES)


def test_an_unreadable_patch_answer_means_read_again_and_decide_again(
    api: ApiServer, kubeconfig: Path
) -> None:
    old(api, "n1")
    young(api, "n2")
    api.inject(Fault(method="PATCH", path=f"^{NODES}/n1$", raw=HTML, content_type="text/html"))

    result = reconcile(kubeconfig)

    assert result.code == 0, result.stderr
    assert api.annotations("n1")[KEY] == "true"
    n1 = [(r.method, r.status) for r in api.requests if r.path == f"{NODES}/n1"]
    assert n1 == [("PATCH", 200), ("GET", 200), ("PATCH", 200)]  # not landed: sent again


def test_a_patch_that_landed_but_whose_answer_was_lost_is_not_sent_again(
    api: ApiServer, kubeconfig: Path
) -> None:
    old(api, "n1")
    young(api, "n2")

    lost: list[bool] = []

    def lands_then_answer_lost(req: RequestInfo) -> None:
        # Once, on n1's first patch (n2's may arrive first: the workers race).
        if req.method == "PATCH" and req.path == f"{NODES}/n1" and not lost:
            lost.append(True)
            for key, value in OURS.items():  # what the patch does, before its answer is lost
                api.set_annotation("n1", key, value)
            api.inject(Fault(method="PATCH", path=f"^{NODES}/n1$", raw=b"{}"))

    api.on_request(lands_then_answer_lost)

    result = reconcile(kubeconfig)

    assert result.code == 0, result.stderr
    assert api.annotations("n1") == OURS
    n1 = [(r.method, r.status) for r in api.requests if r.path == f"{NODES}/n1"]
    assert n1 == [("PATCH", 200), ("GET", 200)]  # read again: already held, nothing to send
