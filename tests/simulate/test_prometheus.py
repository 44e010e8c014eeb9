"""`node-holder simulate` reads a Prometheus range query of kube-state-metrics: the reader on
small hand-written answers (the labels in the same answer or a file of their own, promtool's
bare matrix, every error), and a generated week backfilled into Debian's real
`prometheus`, queried over HTTP and with `promtool`, whose replay must give the figures of
the same week from YAML with its removals rounded to the step.

The real-server tests need Debian 12's `prometheus` and `promtool` (`make prom-tools`); without
them they skip in one line saying how to install them, unless NODE_HOLDER_REQUIRE_TOOLS=1 (CI:
.ci/run and the GitHub workflow set it), where they fail.
"""

from __future__ import annotations

import io
import json
import os
import random
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconcile.simulate.timeline import Timeline, TimelineError, load_timeline
from tests.clusters import run_cli
from tests.helpers import REPO, wait_until
from tests.helpers import prometheus_tool as tool

POOL = "karpenter.sh/nodepool"
T = 1715644800  # 2024-05-14T00:00:00Z
T0 = datetime.fromtimestamp(T, UTC)
CREATED, LABELS = "kube_node_created", "kube_node_labels"


def series(metric: str, node: str, samples: list[tuple[float, str]], **labels: str) -> dict:
    return {
        "metric": {"__name__": metric, "node": node, **labels},
        "values": [list(s) for s in samples],
    }


def answer(*result: dict, kind: str = "matrix") -> dict:
    return {"status": "success", "data": {"resultType": kind, "result": list(result)}}


def minutes(*offsets: int, value: str) -> list[tuple[float, str]]:
    """Samples at T + each offset in minutes, all with `value`."""
    return [(T + 60 * m, value) for m in offsets]


def load(tmp_path: Path, *documents: Any) -> Timeline:
    paths = []
    for i, document in enumerate(documents):
        paths.append(tmp_path / f"answer-{i}.json")
        paths[-1].write_text(json.dumps(document))
    return load_timeline([str(p) for p in paths])


def error(tmp_path: Path, *documents: Any) -> str:
    with pytest.raises(TimelineError) as info:
        load(tmp_path, *documents)
    message = str(info.value)
    assert "\n" not in message
    return message.replace(str(tmp_path) + "/", "")


def lives(timeline: Timeline) -> list[tuple[str, datetime, datetime | None, dict]]:
    return sorted((n.name, n.created, n.deleted, dict(n.labels)) for n in timeline.nodes)


# --- the reader on hand-written answers ----------------------------------------------------

CREATED_A = str(T - 3600)  # node a: an hour before the range, still there at its end
CREATED_B = str(T + 90)  # node b: from 00:01:30, last seen at 00:03
CREATED_B2 = str(T + 420)  # the name b again, from 00:07, still there
SMALL = [
    series(CREATED, "a", minutes(0, 1, 2, 3, 4, 5, 6, 7, 8, value=CREATED_A)),
    series(CREATED, "b", minutes(2, 3, value=CREATED_B) + minutes(7, 8, value=CREATED_B2)),
]
SMALL_LABELS = [
    series(
        LABELS,
        "a",
        minutes(0, 1, 2, 3, 4, 5, 6, 7, 8, value="1"),
        label_karpenter_sh_nodepool="system",
    ),
    series(LABELS, "b", minutes(2, 3, value="1"), label_karpenter_sh_nodepool="batch"),
    series(LABELS, "b", minutes(7, 8, value="1")),  # no NodePool label exported then
]
SMALL_LIVES = [
    ("a", T0 - timedelta(hours=1), None, {POOL: "system"}),
    ("b", T0 + timedelta(seconds=90), T0 + timedelta(minutes=4), {POOL: "batch"}),
    ("b", T0 + timedelta(minutes=7), None, {}),
]


def test_a_node_is_created_at_its_value_and_removed_a_step_after_its_last_sample(
    tmp_path: Path,
) -> None:
    timeline = load(tmp_path, answer(*SMALL, *SMALL_LABELS))
    assert lives(timeline) == SMALL_LIVES
    assert (timeline.start, timeline.end) == (T0, T0 + timedelta(minutes=8))
    assert timeline.notes == (
        "read from Prometheus: a removal is the node's last sample plus the step (1m), "
        "so it is known to within 1m",
    )


def test_labels_in_a_file_of_their_own_and_promtools_bare_matrix(tmp_path: Path) -> None:
    """`promtool query range -o json` prints the matrix alone; the labels may come apart."""
    assert lives(load(tmp_path, answer(*SMALL), answer(*SMALL_LABELS))) == SMALL_LIVES
    assert lives(load(tmp_path, SMALL, SMALL_LABELS)) == SMALL_LIVES
    without = [(name, born, gone, {}) for name, born, gone, _ in SMALL_LIVES]
    assert lives(load(tmp_path, SMALL)) == without


def test_two_scrapers_of_one_node_are_one_node_and_a_gap_is_no_removal(tmp_path: Path) -> None:
    """Two kube-state-metrics replicas give two series of one node (the instance label);
    a scrape gap inside a life does not end it."""
    value = str(T - 60)
    timeline = load(
        tmp_path,
        answer(
            series(CREATED, "a", minutes(0, 1, 4, 5, value=value), instance="ksm-0"),
            series(CREATED, "a", minutes(0, 1, 2, value=value), instance="ksm-1"),
            series(CREATED, "z", minutes(0, 1, 2, 3, 4, 5, 6, value=value)),
        ),
    )
    assert lives(timeline) == [
        ("a", T0 - timedelta(minutes=1), T0 + timedelta(minutes=6), {}),
        ("z", T0 - timedelta(minutes=1), None, {}),
    ]


def test_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(answer(*SMALL))))
    timeline = load_timeline(["-"])
    assert timeline.sources == ("<stdin>",)
    assert len(timeline.nodes) == 3


def test_a_timeline_and_an_answer_merge_by_node(tmp_path: Path) -> None:
    """A Prometheus answer beside `kubectl get nodes -o json`: the same node is one node."""
    meta = {"name": "a", "creationTimestamp": "2024-05-13T23:00:00Z", "labels": {"team": "x"}}
    nodes = tmp_path / "nodes.json"
    nodes.write_text(
        json.dumps({"kind": "NodeList", "items": [{"kind": "Node", "metadata": meta}]})
    )
    (tmp_path / "prom.json").write_text(json.dumps(answer(*SMALL)))
    timeline = load_timeline([str(nodes), str(tmp_path / "prom.json")])
    a = [n for n in timeline.nodes if n.name == "a"]
    assert [(n.created, n.deleted, dict(n.labels)) for n in a] == [
        (T0 - timedelta(hours=1), None, {"team": "x"})
    ]


@pytest.mark.parametrize(
    ("document", "words"),
    [
        (
            {"status": "error", "errorType": "bad_data", "error": "parse error"},
            "answer-0.json: Prometheus answered 'error': bad_data parse error; fix the query",
        ),
        (
            answer(kind="vector"),
            "answer-0.json: not a range query: resultType is 'vector', not 'matrix' "
            "(/api/v1/query answers one instant); ask /api/v1/query_range with start, end and step",
        ),
        ({"status": "success", "data": {}}, "answer-0.json: not a range query's answer"),
        (
            {"status": "success", "data": {"resultType": "matrix", "result": {}}},
            "answer-0.json: data.result is not a list of series",
        ),
        (
            answer(*SMALL_LABELS),
            'answer-0.json: no kube_node_created series; query {__name__=~"kube_node_created|'
            'kube_node_labels"}',
        ),
        (
            answer({"metric": {"__name__": "up", "job": "x"}, "values": [[T, "1"]]}),
            "answer-0.json: result[0] (up): not kube_node_created or kube_node_labels: query "
            "kube-state-metrics' series themselves, unaggregated",
        ),
        (
            answer({"metric": {"node": "a"}, "values": [[T, "1"]]}),  # max by (node) (...)
            'result[0] ({node="a"}): not kube_node_created or kube_node_labels: query',
        ),
        (
            answer(series(CREATED, "a", [(T, "1"), (T + 60, "soon")])),
            "answer-0.json: result[0] (kube_node_created{node=\"a\"}): value 'soon' is not a "
            "creation time in seconds since 1970",
        ),
        (
            answer(series(CREATED, "a", [(T, "NaN"), (T + 60, "NaN")])),
            "value 'NaN' is not a creation time",
        ),
        (
            answer({"metric": {"__name__": CREATED, "node": "a"}, "values": [T, "1"]}),
            'result[0] (kube_node_created{node="a"}): each sample must be [time, "value"]',
        ),
        (
            answer({"metric": {"__name__": CREATED, "node": "a"}, "value": [T, "1"]}),
            "no `values`: not a range query's series",
        ),
        (
            answer({"metric": {"__name__": CREATED}, "values": [[T, "1"]]}),
            "result[0] (kube_node_created): no node label: query",
        ),
        (
            answer(series(CREATED, "Node_A", [(T, "1")])),
            "'Node_A' is not a valid node name",
        ),
        (
            answer(series(LABELS, "a", [(T, "1")], label_karpenter_sh_nodepool="a b")),
            "the NodePool label_karpenter_sh_nodepool='a b' ",
        ),
        (
            answer(series(CREATED, "a", [(T, "1")]), series(CREATED, "b", [(T, "2")])),
            "every sample is at one instant, so the step is unknown",
        ),
    ],
)
def test_a_bad_answer_is_one_line_naming_what_is_wrong(
    tmp_path: Path, document: dict, words: str
) -> None:
    assert words in error(tmp_path, document)


def test_a_step_longer_than_the_shortest_hold_compared_is_exit_2_before_any_replay(
    tmp_path: Path,
) -> None:
    """Every hold compared counts: --hold-duration, a --compare column, a column's
    NodePool setting (`nodepool:`) and a NodePool list's. The one line names the shortest
    hold, where it comes from, and the step."""
    path = tmp_path / "history.json"
    path.write_text(json.dumps(answer(*SMALL)))
    pools = tmp_path / "nodepools.json"
    annotations = {"node-holder.dev/hold-duration": "40s"}
    pools.write_text(
        json.dumps({"kind": "NodePool", "metadata": {"name": "batch", "annotations": annotations}})
    )
    assert run_cli("simulate", str(path), "--hold-duration", "1m").code == 0
    tail = (
        "so removals would be known only to within more than a hold; query again with a step "
        "of at most 40s\n"
    )
    for args, files, shortest in (
        (("--compare", "40s,1h"), [path], "40s"),
        (("--compare", "20m/nodepool:batch=40s,1h"), [path], "40s, nodepool/batch"),
        ((), [path, pools], "40s, nodepool/batch"),
    ):
        result = run_cli("simulate", *map(str, files), "--hold-duration", "20m", *args)
        assert result.code == 2, args
        assert result.stdout == ""
        assert result.stderr == (
            f"node-holder: error: {', '.join(map(str, files))}: the step is 1m, longer than the "
            f"shortest hold compared ({shortest}), {tail}"
        ), args


# --- a generated week through the real Prometheus -----------------------------------------

# A week, as a user replays one: promtool writes a block per 2 hours (84), each synced to disk
# (about 5 s in all on the project's loaded 2-core machine).
DAYS = 7
STEP = timedelta(minutes=5)
START = datetime(2024, 5, 13, tzinfo=UTC)  # a Monday
END = START + timedelta(days=DAYS)
HOLDS = ("--hold-duration", "20m", "--compare", "1h,20m/group/max=2h")


@dataclass(frozen=True)
class Life:
    name: str
    created: datetime
    deleted: datetime | None
    pool: str | None


def history(seed: int = 32, days: int = DAYS) -> list[Life]:
    """Three system nodes from before the range; each day 6 to 12 bursts of 1 to 5 batch nodes
    living 15 minutes to 3 hours; a gpu node a day; one name that comes back."""
    rng = random.Random(seed)
    nodes = [
        Life(f"ip-10-0-0-{i}.ec2.internal", START - timedelta(days=9 + i), None, "system")
        for i in range(3)
    ]
    for day in range(days):
        for _ in range(rng.randint(6, 12)):
            burst = START + timedelta(days=day, seconds=rng.randrange(86400))
            for _ in range(rng.randint(1, 5)):
                created = burst + timedelta(seconds=rng.randrange(180))
                gone = created + timedelta(minutes=rng.randint(15, 180))
                pool = "batch" if rng.random() < 0.9 else None  # some without the label
                nodes.append(Life(f"ip-10-1-{len(nodes)}.ec2.internal", created, gone, pool))
        created = START + timedelta(days=day, hours=rng.randint(1, 20), seconds=rng.randrange(3600))
        nodes.append(
            Life(f"ip-10-2-{day}.ec2.internal", created, created + timedelta(hours=3), "gpu")
        )
    again = nodes[5]
    assert again.deleted is not None
    nodes.append(Life(again.name, again.deleted + timedelta(minutes=40), None, "gpu"))
    return nodes


def samples(node: Life) -> list[datetime]:
    """When the backfill writes a sample of the node: half a step before each query step,
    while the node exists (so the answer holds it at a step whatever side of it a lookback
    window closes on)."""
    count = int((END - START) / STEP) + 1
    moments = (START - STEP / 2 + i * STEP for i in range(count))
    return [t for t in moments if node.created <= t and (node.deleted is None or t < node.deleted)]


def openmetrics(nodes: list[Life]) -> str:
    """kube-state-metrics' two node series, as `promtool tsdb create-blocks-from` reads them."""
    created, labels = [], []
    for node in nodes:
        pool = f',label_karpenter_sh_nodepool="{node.pool}"' if node.pool else ""
        for t in samples(node):
            created.append((t, f'{CREATED}{{node="{node.name}"}} {node.created.timestamp():.0f}'))
            labels.append((t, f'{LABELS}{{node="{node.name}"{pool}}} 1'))
    lines = [f"# TYPE {CREATED} gauge"]
    lines += [f"{line} {t.timestamp():.0f}" for t, line in sorted(created, key=lambda c: c[0])]
    lines += [f"# TYPE {LABELS} gauge"]
    lines += [f"{line} {t.timestamp():.0f}" for t, line in sorted(labels, key=lambda c: c[0])]
    return "\n".join([*lines, "# EOF", ""])


def rounded_yaml(nodes: list[Life]) -> str:
    """The same days as a YAML timeline, each removal at the step after the node's last
    sample (still there at the range's end: none); nodes no sample saw are left out."""
    entries = []
    for node in nodes:
        seen = samples(node)
        if not seen:
            continue
        last = seen[-1] + STEP / 2  # the query step that holds the last sample
        deleted = None if last == END else last + STEP
        entry = {"name": node.name, "created": node.created.isoformat().replace("+00:00", "Z")}
        entry["deleted"] = deleted and deleted.isoformat().replace("+00:00", "Z")
        entry["labels"] = {POOL: node.pool} if node.pool else {}
        entries.append(entry)
    return yaml.safe_dump({"start": START.isoformat(), "end": END.isoformat(), "nodes": entries})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError):
        return False


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real Prometheus on loopback serving the backfilled days: (its URL, a work folder)."""
    server, promtool = tool("prometheus"), tool("promtool")
    work = tmp_path_factory.mktemp("prometheus")
    (work / "days.om").write_text(openmetrics(history()))
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "days.om", "data"],
        cwd=work,
        check=True,
        capture_output=True,
        timeout=120,
    )
    (work / "prometheus.yml").write_text("global: {}\n")  # scrapes nothing
    url = f"http://127.0.0.1:{free_port()}"
    log = (work / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            server,
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address={url.removeprefix('http://')}",
            # the backfill has no staleness markers: a sample counts for one step only
            f"--query.lookback-delta={int(STEP.total_seconds())}s",
            f"--config.file={work / 'prometheus.yml'}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(lambda: proc.poll() is not None or ready(url), timeout=120)
        assert proc.poll() is None and ready(url), (work / "prometheus.log").read_text()
        yield url, work
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def query_range(url: str, query: str) -> dict:
    params = urllib.parse.urlencode(
        {
            "query": query,
            "start": START.isoformat(),
            "end": END.isoformat(),
            "step": f"{int(STEP.total_seconds())}s",
        }
    )
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{params}", timeout=60) as response:
        return json.load(response)


def figures(*args: str) -> dict[str, Any]:
    """simulate's JSON, without what it took to compute and where it read the timeline."""
    result = run_cli("simulate", *args, *HOLDS, "--output", "json")
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    for column in data["configurations"]:
        column.pop("replaySeconds")
    data.pop("elapsedSeconds")
    data.pop("timeline")
    return data


@pytest.fixture(scope="module")
def from_yaml(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("yaml") / "days.yaml"
    path.write_text(rounded_yaml(history()))
    return figures(str(path))


def test_a_week_from_prometheus_over_http_replays_as_the_same_week_from_yaml(
    prometheus: tuple[str, Path], from_yaml: dict[str, Any]
) -> None:
    url, work = prometheus
    path = work / "history.json"
    path.write_text(
        json.dumps(query_range(url, '{__name__=~"kube_node_created|kube_node_labels"}'))
    )
    got = figures(str(path))
    assert got == from_yaml
    primary = from_yaml["configurations"][0]
    assert len(from_yaml["configurations"]) == 3
    assert primary["holdsStarted"] > 5  # days with something to compare
    assert primary["nodesRemovedWhileHeld"] > 0


def test_the_documented_promtool_recipe_gives_the_same_week(
    prometheus: tuple[str, Path], from_yaml: dict[str, Any]
) -> None:
    """docs/simulate.md's promtool commands: one file per metric, the matrix alone."""
    url, work = prometheus
    files = []
    for metric in (CREATED, LABELS):
        proc = subprocess.run(
            [
                tool("promtool"),
                "query",
                "range",
                "-o",
                "json",
                f"--start={START.isoformat()}",
                f"--end={END.isoformat()}",
                f"--step={int(STEP.total_seconds())}s",
                url,
                metric,
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        files.append(work / f"{metric}.json")
        files[-1].write_text(proc.stdout)
    assert figures(*map(str, files)) == from_yaml


@pytest.mark.parametrize("required", [False, True])
def test_without_prometheus_the_real_server_tests_skip_saying_how_to_install_it(
    required: bool,
) -> None:
    """A contributor without Debian's prometheus runs the suite: each real-server test skips
    with one line that says how to install it; CI (NODE_HOLDER_REQUIRE_TOOLS=1) fails instead."""
    env = {k: v for k, v in os.environ.items() if k != "NODE_HOLDER_REQUIRE_TOOLS"}
    env["PATH"] = str(Path(sys.executable).parent)  # the venv's tools, no prometheus
    if required:
        env["NODE_HOLDER_REQUIRE_TOOLS"] = "1"
    pytest_args = ["-q", "-rsE", "-n", "0", "-p", "no:cacheprovider", "-k", "week"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *pytest_args, str(Path(__file__).relative_to(REPO))],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    how = ": prometheus is not installed: on Debian 12, apt-get install prometheus (2.42, as root"
    said = [line.split(" ", 1)[0] for line in proc.stdout.splitlines() if how in line]
    if required:
        assert proc.returncode == 1, proc.stdout
        assert "2 errors" in proc.stdout.splitlines()[-1], proc.stdout
        assert f"Failed{how}" in proc.stdout, proc.stdout
    else:
        assert proc.returncode == 0, proc.stdout
        assert proc.stdout.splitlines()[-1].startswith("2 skipped"), proc.stdout
        assert said == ["SKIPPED", "SKIPPED"], proc.stdout
