"""`node-holder reconcile` through the API test server, one test per point of the contract.

Each test runs the real CLI over HTTP with the official client's connection
pool, then asserts the stored state and the request log.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from tests.clusters import CliResult, run_cli
from tests.kubeapi.apiserver import ApiServer, Fault, RequestInfo

KEY = "karpenter.sh/do-not-disrupt"
MARKER = "node-holder.dev/owned-annotations"
OURS = {KEY: "true", MARKER: KEY}
NODES = "/api/v1/nodes"


def reconcile(kubeconfig: str | Path, *args: str, env: dict[str, str] | None = None) -> CliResult:
    return run_cli("reconcile", "--kubeconfig", str(kubeconfig), *args, env=env)


def old(api: ApiServer, *names: str, **kw: object) -> None:
    for name in names:
        api.add_node(name, created=api.now() - timedelta(hours=3), eks=False, **kw)  # type: ignore[arg-type]


def young(api: ApiServer, name: str, minutes: float = 2, **kw: object) -> None:
    api.add_node(name, created=api.now() - timedelta(minutes=minutes), eks=False, **kw)  # type: ignore[arg-type]


# 1. the whole list, metadata only, paged; an incomplete list changes nothing


def test_list_is_paged_metadata_only_and_steady_run_sends_nothing_else(
    api: ApiServer, kubeconfig: Path
) -> None:
    api.add_nodes(1200, created=api.now() - timedelta(days=2), eks=True)
    result = reconcile(kubeconfig)
    assert result.code == 0, result.stderr
    log = api.requests
    # The NodePools (their hold settings) in one list, then a first page of 20 nodes, then
    # pages sized to their bytes (at most --page-size 500).
    limits = ["20", "500", "500", "500"]
    assert [(r.method, r.path, r.query.get("limit")) for r in log] == [
        ("GET", "/apis/karpenter.sh/v1/nodepools", None),
        *(("GET", NODES, limit) for limit in limits),
    ]
    assert all("as=PartialObjectMetadataList" in r.accept for r in log)
    assert all("gzip" in r.accept_encoding for r in log)
    assert "0 added, 0 removed, 1200 unchanged" in result.lines[-1]


def test_a_list_that_fails_midway_changes_nothing_and_exits_1(
    api: ApiServer, kubeconfig: Path
) -> None:
    api.add_nodes(30, created=api.now() - timedelta(days=2), eks=False)
    young(api, "new")

    # From the second page on, every list request fails: the tool must not act on page one.
    def fail_continued_lists(req: RequestInfo) -> None:
        if req.method == "GET" and req.path == NODES and "continue" in req.query:
            api.inject(Fault(method="GET", path=NODES + "$", status=503, times=1))

    api.on_request(fail_continued_lists)
    result = reconcile(kubeconfig, "--page-size", "10", "--timeout", "3s")
    assert result.code == 1
    assert "nothing was changed" in result.stderr
    assert api.writes() == []
    assert all(api.annotations(n) == {} for n in api.node_names())


def test_an_expired_continue_token_restarts_the_list(api: ApiServer, kubeconfig: Path) -> None:
    old(api, *[f"n{i}" for i in range(25)])
    young(api, "new")
    compacted = {"done": False}

    def compact_once(req: RequestInfo) -> None:
        if req.method == "GET" and "continue" in req.query and not compacted["done"]:
            compacted["done"] = True
            api.compact()

    api.on_request(compact_once)
    result = reconcile(kubeconfig, "--page-size", "10")
    assert result.code == 0, result.stderr
    statuses = [r.status for r in api.requests if r.method == "GET"]
    assert 410 in statuses
    assert all(api.annotations(n) == OURS for n in api.node_names())


# 2. now is the API server's clock


def test_now_is_the_servers_clock_else_the_local_clock(tmp_path: Path) -> None:
    with ApiServer(clock_offset=timedelta(hours=1)) as api:  # the server is an hour ahead
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kc"))
        api.add_node("n", created=api.now() - timedelta(minutes=30), eks=False)
        by_server = reconcile(kubeconfig, "--dry-run")
        assert by_server.code == 0
        assert by_server.lines[-1].startswith("released: youngest node n is 30m")
        # A proxy that drops the Date header: the list page as the server sent it, without it.
        page = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1"}
        page |= {"metadata": {}, "items": [{"metadata": api.get_node("n")["metadata"]}]}
        api.inject(
            Fault(
                method="GET", path=f"^{NODES}$", raw=json.dumps(page).encode(), headers={"Date": ""}
            )
        )
        by_local = reconcile(kubeconfig, "--dry-run")
        # By the local clock the node was created 30 minutes from now: it counts as created
        # now (never a negative age), so it holds for one hold duration from now.
        assert by_local.lines[-1].startswith("held: youngest node n is 0s old")
        assert "(20m left)" in by_local.lines[-1]
        assert "sent no Date header; deciding with the local clock" in by_local.stderr


# 3-5. youngest node decides; add, remove only ours; deleting nodes


def test_hold_follows_the_youngest_node(api: ApiServer, kubeconfig: Path) -> None:
    api.set_clock(api.now())  # only advance_clock moves time: a slow run must not age c
    old(api, "a", "b")
    young(api, "c", minutes=19)
    assert reconcile(kubeconfig).code == 0
    assert [api.annotations(n) for n in ("a", "b", "c")] == [OURS] * 3
    api.advance_clock(timedelta(minutes=1))  # c is now exactly 20m old: released
    result = reconcile(kubeconfig)
    assert result.code == 0
    assert [api.annotations(n) for n in ("a", "b", "c")] == [{}] * 3
    assert result.lines[-1].startswith("released: youngest node c is 20m old")


def test_release_deletes_the_key_instead_of_setting_false(api: ApiServer, kubeconfig: Path) -> None:
    old(api, "a", annotations=dict(OURS))
    patches: list[bytes] = []
    api.on_request(lambda r: patches.append(r.body) if r.method == "PATCH" else None)
    assert reconcile(kubeconfig).code == 0
    assert json.loads(patches[0])["metadata"]["annotations"] == {KEY: None, MARKER: None}
    assert api.annotations("a") == {}


def test_deleting_node_starts_no_hold_and_is_not_patched(api: ApiServer, kubeconfig: Path) -> None:
    old(api, "a")
    api.add_node("dying", created=api.now(), eks=False, deleting=True)
    result = reconcile(kubeconfig)
    assert result.code == 0
    assert api.writes() == []
    assert "1 deleting" in result.lines[-1]


# 6. minimal writes


def test_each_node_is_written_once_and_steady_runs_write_nothing(
    api: ApiServer, kubeconfig: Path
) -> None:
    old(api, *[f"n{i}" for i in range(20)])
    young(api, "new")
    assert reconcile(kubeconfig).code == 0
    assert sorted(r.path for r in api.writes()) == sorted(f"{NODES}/{n}" for n in api.node_names())
    api.reset_log()
    assert reconcile(kubeconfig).code == 0
    assert api.writes() == []
    young(api, "newer", minutes=0)
    assert reconcile(kubeconfig).code == 0
    assert [r.path for r in api.writes()] == [f"{NODES}/newer"]


# 7. merge patch of annotations with resourceVersion; 409 -> re-read -> decide again; 404


def test_patch_is_a_guarded_merge_patch_of_annotations(api: ApiServer, kubeconfig: Path) -> None:
    young(api, "n")
    rv = api.get_node("n")["metadata"]["resourceVersion"]  # type: ignore[index]
    bodies: list[RequestInfo] = []
    api.on_request(lambda r: bodies.append(r) if r.method == "PATCH" else None)
    assert reconcile(kubeconfig).code == 0
    (patch,) = bodies
    assert patch.content_type == "application/merge-patch+json"
    assert json.loads(patch.body) == {"metadata": {"annotations": OURS, "resourceVersion": rv}}
    (record,) = api.writes()
    assert "as=PartialObjectMetadata" in record.accept


def test_a_concurrent_edit_is_kept_and_the_patch_retried(api: ApiServer, kubeconfig: Path) -> None:
    young(api, "n", annotations={"team": "a"})

    def person_edits_first(req: RequestInfo) -> None:
        if req.method == "PATCH" and not person_edits_first.done:  # type: ignore[attr-defined]
            person_edits_first.done = True  # type: ignore[attr-defined]
            api.set_annotation("n", "team", "b")

    person_edits_first.done = False  # type: ignore[attr-defined]
    api.on_request(person_edits_first)
    result = reconcile(kubeconfig)
    assert result.code == 0, result.stderr
    assert [r.status for r in api.writes()] == [409, 200]
    assert api.annotations("n") == {"team": "b", **OURS}
    assert "after 1 conflict(s)" in result.stdout


def test_a_person_who_adds_the_hold_annotation_meanwhile_keeps_it(
    api: ApiServer, kubeconfig: Path
) -> None:
    young(api, "n")
    once = []

    def person_holds(req: RequestInfo) -> None:
        if req.method == "PATCH" and not once:
            once.append(1)
            api.set_annotation("n", KEY, "false")

    api.on_request(person_holds)
    result = reconcile(kubeconfig)
    assert result.code == 0
    assert api.annotations("n") == {KEY: "false"}
    assert "nothing left to do" in result.stdout


def test_a_node_deleted_before_its_patch_is_skipped(api: ApiServer, kubeconfig: Path) -> None:
    old(api, "a")
    young(api, "gone")
    api.on_request(lambda r: api.delete_node("gone") if r.path == f"{NODES}/gone" else None)
    result = reconcile(kubeconfig)
    assert result.code == 0, result.stderr
    assert "node/gone: deleted meanwhile; skipped" in result.stdout
    assert api.annotations("a") == OURS


# 8. transient failures: retried; what still fails is named, the rest is patched, exit 1


@pytest.mark.parametrize("status", [429, 500, 503, 504])
def test_transient_errors_are_retried(api: ApiServer, kubeconfig: Path, status: int) -> None:
    young(api, "n")
    fault = api.inject(Fault(method="PATCH", status=status, times=2, retry_after=0))
    result = reconcile(kubeconfig)
    assert result.code == 0, result.stderr
    assert fault.hits == 2
    assert api.annotations("n") == OURS


def test_retry_after_is_honoured(api: ApiServer, kubeconfig: Path) -> None:
    young(api, "n")
    api.inject(Fault(method="PATCH", status=429, times=1, retry_after=1))
    result = reconcile(kubeconfig, "-v")
    assert result.code == 0
    assert "retry 1 in 1.00s" in result.stderr


def test_dropped_connections_and_slow_answers_are_retried(api: ApiServer, kubeconfig: Path) -> None:
    young(api, "n")
    young(api, "m")
    api.inject(Fault(method="PATCH", path="/n$", drop_connection=True, times=1))
    api.inject(Fault(method="PATCH", path="/m$", delay=1.0, times=1))
    result = reconcile(kubeconfig, "--request-timeout", "0.3s")
    assert result.code == 0, result.stderr
    assert api.annotations("n") == OURS and api.annotations("m") == OURS


def test_a_node_that_keeps_failing_is_named_the_rest_are_patched(
    api: ApiServer, kubeconfig: Path
) -> None:
    old(api, "a", "b")
    young(api, "bad")
    api.inject(Fault(method="PATCH", path="/bad$", status=503, times=None))
    result = reconcile(kubeconfig, "--timeout", "4s")
    assert result.code == 1
    assert api.annotations("a") == OURS and api.annotations("b") == OURS
    assert api.annotations("bad") == {}
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("node-holder: error: 1 node(s) not patched")
    )
    assert "bad" in result.stderr.splitlines()[-1]
    assert "node/bad: failed to add" in result.stdout


# 9. bounded concurrency


def test_patches_go_out_through_a_bounded_pool(api: ApiServer, kubeconfig: Path) -> None:
    old(api, *[f"n{i}" for i in range(12)])
    young(api, "new")
    api.write_latency = 0.05
    result = reconcile(kubeconfig, "--workers", "3")
    assert result.code == 0
    starts = sorted((r.started, r.started + r.duration) for r in api.writes())
    peak = max(sum(1 for s, e in starts if s <= t < e) for t, _ in starts)
    assert 1 < peak <= 3
