"""No line of any command exceeds 16 KiB at 15,000 nodes, in text and JSON.

Container runtimes split longer lines and log pipelines drop them. One API test server holds
15,000 nodes for every case: 7,500 an hour old carry node-holder's hold (a reconcile removes
it, a release would), 7,500 five minutes old are free (in node scope each is a held window
that a reconcile adds). Each case lists them once over HTTP with the real client (the server
is set up once per module, per pytest worker). The real reconcile is refused (403) with a long
message: a line per node still, the first few with that message, and no 15,000 writes; the
others are dry runs or read-only. simulate replays a day of 15,000 nodes.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.clusters import CliResult, run_cli
from tests.helpers import NODES, OURS
from tests.kubeapi.apiserver import ApiServer, Fault

#: 15,000 nodes listed 14 times: minutes on a shared machine; `make test` runs it.
pytestmark = pytest.mark.slow
LINE_LIMIT = 16 * 1024
HALF = 7_500


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApiServer, Path]]:
    """One server for the module: listing 15,000 nodes is the cost, so it is set up once."""
    with ApiServer() as api:
        now = api.now()
        api.add_nodes(HALF, prefix="held-", created=now - timedelta(hours=1), annotations=OURS)
        api.add_nodes(HALF, prefix="new-", created=now - timedelta(minutes=5), eks=False)
        yield api, api.write_kubeconfig(tmp_path_factory.mktemp("kc") / "admin.kubeconfig")
        assert not api.errors, api.errors[0]


@pytest.fixture(scope="module")
def big_day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A day of 15,000 nodes: 14,990 from before it, and a 30-minute job node every 2 hours
    (a replay's cost follows the hold edges, each of which patches every node in memory)."""
    start = datetime(2024, 5, 14, tzinfo=UTC)
    nodes = []
    for i in range(15_000):
        job = i - 14_990
        created = (
            start + timedelta(hours=2 * job, minutes=7) if job >= 0 else start - timedelta(days=3)
        )
        nodes.append(
            {
                "name": f"ip-10-{i // 250}-{i % 250}.ec2.internal",
                "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "deleted": (created + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
                if job >= 0
                else None,
                "labels": {"karpenter.sh/nodepool": f"pool-{i % 40}"},
            }
        )
    path = tmp_path_factory.mktemp("day") / "big-day.json"
    day = {"start": "2024-05-14T00:00:00Z", "end": "2024-05-15T00:00:00Z", "nodes": nodes}
    path.write_text(json.dumps(day))
    return path


def longest(result: CliResult) -> int:
    return max(
        len(line.encode()) for line in result.stdout.splitlines() + result.stderr.splitlines()
    )


#: A refusal with a server's long message: the first patches fail with it, the others are
#: not sent (every node a result line), without 15,000 requests.
REFUSED = Fault(
    method="PATCH",
    path=f"^{NODES}/",
    status=403,
    message="nodes is forbidden: " + "x" * 20_000,
    times=None,
)
MISSING = [f"gone-{i}" for i in range(500)]

#: Each case: the command and its arguments (after --kubeconfig and --output; NAMES: 1,500
#: of the cluster's nodes and 500 missing) and its exit code.
CASES = {
    "reconcile --dry-run": (("reconcile", "--dry-run", "--hold-scope", "node"), 0),
    "reconcile, refused": (("reconcile", "--hold-scope", "node", "--qps", "0"), 1),
    "status": (("status", "--hold-scope", "node"), 0),
    "status --nodes": (("status", "--hold-scope", "node", "--nodes"), 0),
    "release --dry-run": (("release", "--dry-run"), 0),
    "pin --dry-run of 2,000 nodes": (("pin", "--dry-run", "NAMES"), 1),
    "unpin --dry-run of 2,000 nodes": (("unpin", "--dry-run", "NAMES"), 1),
}


@pytest.mark.parametrize("output", ["text", "json"])
@pytest.mark.parametrize("case", list(CASES))
def test_no_line_of_any_command_exceeds_16_kib_at_15000_nodes(
    cluster: tuple[ApiServer, Path], case: str, output: str
) -> None:
    api, kubeconfig = cluster
    (command, *args), code = CASES[case]
    names = [n for n in api.node_names() if n.startswith("new-")][::5] + MISSING
    args = [a for arg in args for a in (names if arg == "NAMES" else [arg])]
    refused = api.inject(dataclasses.replace(REFUSED))
    try:
        result = run_cli(
            command, "--kubeconfig", kubeconfig, "--output", output, "--log-format", output, *args
        )
    finally:
        api.clear_faults()

    assert result.code == code, (case, result.stderr[-2000:])
    assert longest(result) <= LINE_LIMIT, (case, longest(result))
    assert 0 < refused.hits <= 8 if "refused" in case else refused.hits == 0  # 8 workers
    listed = len(names) - len(MISSING) if command in ("pin", "unpin") else 15_000
    if output == "json":
        assert json.loads(result.stdout.splitlines()[-1])["summary"]["nodes"] == listed
    else:
        assert f"{listed} nodes" in result.stdout, result.stdout[-3000:]
    if command in ("reconcile", "release"):  # a line per node
        assert len(result.stdout.splitlines()) > (HALF if command == "release" else 15_000)


@pytest.mark.parametrize("output", ["text", "json"])
def test_no_line_of_simulate_exceeds_16_kib_on_a_day_of_15000_nodes(
    big_day: Path, output: str
) -> None:
    """The cluster scope and the node scope side by side: 10 holds of 15,000 nodes, and
    10 held windows of one node each."""
    result = run_cli("simulate", big_day, "--compare", "10m/node", "--output", output)
    assert result.code == 0, result.stderr
    assert longest(result) <= LINE_LIMIT, longest(result)
    if output == "json":
        first, second = json.loads(result.stdout)["configurations"]
        assert (first["holdsStarted"], second["holdsStarted"]) == (10, 10)
        assert max(first["heldNodes"]) == 14_991  # the old nodes and one job node
        assert max(second["heldNodes"]) == 1
    else:
        assert "(15000 nodes)" in result.lines[0]
