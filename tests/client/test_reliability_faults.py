"""API faults, through the real CLI and the API test server.

The matrix crosses every transient fault (429 with Retry-After, APF's plain-text 429,
500, 503, 504, a reset connection, an answer slower than --request-timeout) with every
request a run makes besides the patch itself (the first list page, a continued page,
the re-read after a conflict, the Event). Faults on the patch are in
`tests/hold/test_reconcile_api.py`. Then the faults a run cannot get past: an expired
continue token on every attempt, 401, 403.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tests.clusters import CliResult, run_cli
from tests.helpers import (
    KEY,
    NODES,
    OURS,
    Arrivals,
    assert_one_clear_line,
    old,
    young,
)
from tests.kubeapi.apiserver import ApiServer, Fault, RequestInfo

EVENTS = "/api/v1/namespaces/default/events"
REQUEST_TIMEOUT = "0.5s"

FAULTS = {
    "429 with Retry-After": Fault(status=429, retry_after=0),
    "429 from API Priority and Fairness (plain text)": Fault(
        status=429, retry_after=0, plain_text=True, message="Too many requests"
    ),
    "500": Fault(status=500),
    "503": Fault(status=503),
    "504": Fault(status=504),
    "reset connection": Fault(drop_connection=True),
    "slower than --request-timeout": Fault(delay=0.8),
    "a body that trickles in": Fault(drip=(1, 0.05)),  # each read is quick; the whole is not
    "a truncated body": Fault(cut="truncate"),
    "a reset mid-body": Fault(cut="reset"),
}

Predicate = Callable[[RequestInfo], bool]


def first_page(req: RequestInfo) -> bool:
    return req.method == "GET" and req.path == NODES and "continue" not in req.query


def continued_page(req: RequestInfo) -> bool:
    return req.method == "GET" and req.path == NODES and "continue" in req.query


def re_read(req: RequestInfo) -> bool:
    return req.method == "GET" and req.path == f"{NODES}/n00"


def event(req: RequestInfo) -> bool:
    return req.method == "POST" and req.path == EVENTS


PLACES: dict[str, Predicate] = {
    "first list page": first_page,
    "continued list page": continued_page,
    "re-read after a conflict": re_read,
    "event": event,
}


def fault_on_first(api: ApiServer, where: Predicate, fault: Fault) -> list[Fault]:
    """Inject `fault` when the first request matching `where` arrives (it gets the fault too).

    Returns a list that holds the injected fault once it is in.
    """
    injected: list[Fault] = []

    def hook(req: RequestInfo) -> None:
        if not injected and where(req):
            injected.append(api.inject(replace(fault, method=req.method, path=req.path + "$")))

    api.on_request(hook)
    return injected


def conflict_once(api: ApiServer, node: str) -> None:
    """A person edits `node` as our first patch of it arrives: 409, then a re-read."""
    done: list[bool] = []

    def hook(req: RequestInfo) -> None:
        if req.method == "PATCH" and req.path == f"{NODES}/{node}" and not done:
            done.append(True)
            api.set_annotation(node, "team", "x")

    api.on_request(hook)


def reconcile(kubeconfig: Path, *args: str) -> CliResult:
    return run_cli("reconcile", "--kubeconfig", str(kubeconfig), *args)


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("kind", list(FAULTS))
def test_a_transient_fault_anywhere_is_retried_and_the_run_converges(
    api: ApiServer, kubeconfig: Path, kind: str, place: str
) -> None:
    names = [f"n{i:02}" for i in range(12)]
    old(api, *names[:-1])
    young(api, names[-1])
    arrivals = Arrivals(api)
    conflict_once(api, "n00")
    injected = fault_on_first(api, PLACES[place], FAULTS[kind])

    result = reconcile(kubeconfig, "--page-size", "5", "--request-timeout", REQUEST_TIMEOUT)
    arrivals.quiesce()  # a slow answer the client gave up on may still land; wait for it

    assert result.code == 0, result.stderr
    assert [f.hits for f in injected] == [1], f"no fault at the {place}"
    assert result.stderr == ""  # retries that worked are not news (-v shows them)
    assert {n: api.annotations(n) for n in names} == {
        "n00": {"team": "x", **OURS},
        **dict.fromkeys(names[1:], OURS),
    }
    stored = Counter(r.path for r in api.writes() if r.status == 200)
    assert stored == Counter(f"{NODES}/{n}" for n in names)  # one stored write per node
    # The Event is recorded. Events are best effort and named by the server (generateName):
    # a create we gave up on that still lands, plus our retry, may record it twice.
    assert [e["reason"] for e in api.events] in (["HoldStarted"], ["HoldStarted"] * 2)
    assert "event HoldStarted on node/n11" in result.stdout


def test_an_expired_continue_token_on_every_attempt_changes_nothing(
    api: ApiServer, kubeconfig: Path
) -> None:
    old(api, *[f"n{i:02}" for i in range(12)])
    young(api, "new")
    api.on_request(lambda req: api.compact() if continued_page(req) else None)

    result = reconcile(kubeconfig, "--page-size", "5")

    assert result.code == 1
    line = assert_one_clear_line(result.stderr)
    assert "cannot list nodes: 410 Expired" in line and "nothing was changed" in line
    pages = [r for r in api.requests if r.path == "/api/v1/nodes"]
    assert len(pages) == 2 * 4  # the list was restarted three times, then given up
    assert api.writes() == []
    assert all(api.annotations(n) == {} for n in api.node_names())


def test_401_gives_one_line_about_credentials_and_changes_nothing(
    api: ApiServer, tmp_path: Path
) -> None:
    young(api, "n")
    kubeconfig = api.write_kubeconfig(tmp_path / "noauth", identity="noauth")

    result = reconcile(kubeconfig)

    assert result.code == 1
    line = assert_one_clear_line(result.stderr)
    assert "401 Unauthorized" in line and "credentials" in line
    assert "kubeconfig user or the service account token" in line
    assert [r.status for r in api.requests] == [401]  # not retried: it cannot get better
    assert api.annotations("n") == {}


def test_403_on_patch_stops_the_run_and_names_the_missing_verb(
    api: ApiServer, tmp_path: Path
) -> None:
    api.add_nodes(300, created=api.now(), eks=False)
    kubeconfig = api.write_kubeconfig(tmp_path / "readonly", identity="readonly")

    result = reconcile(kubeconfig, "--workers", "8")

    assert result.code == 1
    line = assert_one_clear_line(result.stderr)
    assert line.startswith("node-holder: error: 403 Forbidden")
    assert 'cannot patch resource "nodes"' in line and "it needs 'patch'" in line
    patches = [r for r in api.requests if r.method == "PATCH"]
    assert 1 <= len(patches) <= 8  # the first wave of workers, not 300 doomed patches
    assert {r.status for r in patches} == {403}
    assert all(api.annotations(n) == {} for n in api.node_names())


def test_403_on_list_names_the_verb_and_resource(api: ApiServer, kubeconfig: Path) -> None:
    young(api, "n")
    api.inject(
        Fault(
            method="GET",
            path=NODES + "$",
            status=403,
            message='nodes is forbidden: User "system:serviceaccount:x:y" cannot list '
            'resource "nodes" in API group "" at the cluster scope',
        )
    )

    result = reconcile(kubeconfig)

    assert result.code == 1
    line = assert_one_clear_line(result.stderr)
    assert 'cannot list resource "nodes"' in line and "nothing was changed" in line
    assert api.writes() == []


def test_a_patch_that_times_out_but_lands_is_written_once(api: ApiServer, kubeconfig: Path) -> None:
    young(api, "n")
    arrivals = Arrivals(api)
    late = api.inject(Fault(method="PATCH", delay=0.8))  # answered after we gave up

    result = reconcile(kubeconfig, "--request-timeout", REQUEST_TIMEOUT)
    arrivals.quiesce()

    assert result.code == 0, result.stderr
    assert late.hits == 1
    assert api.annotations("n") == OURS
    # Our retry and the late original carry the same resourceVersion: one of them lands,
    # the other gets 409; never two changes.
    statuses = [r.status for r in api.writes()]
    assert statuses.count(200) == 1 and statuses.count(409) >= 1
    assert set(statuses) == {200, 409}


def test_a_conflict_without_a_change_is_re_read_and_patched(
    api: ApiServer, kubeconfig: Path
) -> None:
    young(api, "n", annotations={"team": "a"})
    api.inject(Fault(method="PATCH", status=409))

    result = reconcile(kubeconfig)

    assert result.code == 0, result.stderr
    assert api.annotations("n") == {"team": "a", **OURS}
    assert [r.method for r in api.requests if r.path == f"{NODES}/n"] == ["PATCH", "GET", "PATCH"]
    assert f"node/n: added {KEY} (after 1 conflict(s))" in result.stdout
