"""`node-holder simulate` reads a Prometheus range query of kube-state-metrics: the reader on
small hand-written answers (the labels in the same answer or a file of their own, promtool's
bare matrix, every error), and a generated week backfilled into Debian's real
`prometheus`, queried over HTTP, with `promtool` and by `simulate --prometheus` itself, whose
replay must give the figures of the same week from YAML with its removals rounded to the step;
two clusters in one server with --query.max-samples lowered (chunks split); a stub front on
loopback for auth, TLS and failures.

The real-server tests need Debian 12's `prometheus` and `promtool` (`make prom-tools`); without
them they skip in one line saying how to install them, unless NODE_HOLDER_REQUIRE_TOOLS=1 (CI:
.ci/run and the GitHub workflow set it), where they fail.
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import random
import socket
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconcile.simulate.timeline import Timeline, TimelineError, ksm_label, load_timeline
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
    assert not any("live list" in note for note in timeline.notes)  # Prometheus has the rest
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
            "the label karpenter.sh/nodepool (label_karpenter_sh_nodepool='a b') ",
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


def openmetrics(nodes: list[Life], **fleet: list[Life]) -> str:
    """kube-state-metrics' two node series, as `promtool tsdb create-blocks-from` reads them;
    `fleet`: more clusters' nodes, by the `cluster` label (`nodes`: the label unset)."""
    created, labels = [], []
    for cluster, lives in [("", nodes), *fleet.items()]:
        where = f',cluster="{cluster}"' if cluster else ""
        for node in lives:
            pool = f',label_karpenter_sh_nodepool="{node.pool}"' if node.pool else ""
            for t in samples(node):
                value = f"{node.created.timestamp():.0f}"
                created.append((t, f'{CREATED}{{node="{node.name}"{where}}} {value}'))
                labels.append((t, f'{LABELS}{{node="{node.name}"{where}{pool}}} 1'))
    lines = [f"# TYPE {CREATED} gauge"]
    lines += [f"{line} {t.timestamp():.0f}" for t, line in sorted(created, key=lambda c: c[0])]
    lines += [f"# TYPE {LABELS} gauge"]
    lines += [f"{line} {t.timestamp():.0f}" for t, line in sorted(labels, key=lambda c: c[0])]
    return "\n".join([*lines, "# EOF", ""])


def rounded_yaml(nodes: list[Life], step: timedelta = STEP) -> str:
    """The same days as a YAML timeline, each removal a step after the step that holds the
    node's last sample (still there at the range's end: none); nodes no sample saw are left
    out."""
    entries = []
    for node in nodes:
        seen = samples(node)
        if not seen:
            continue
        last = START + math.ceil((seen[-1] - START) / step) * step
        deleted = None if last == END else last + step
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


@contextmanager
def served(work: Path, metrics: str, *flags: str) -> Iterator[str]:
    """A real Prometheus on loopback serving `metrics` backfilled: its URL."""
    server, promtool = tool("prometheus"), tool("promtool")
    (work / "days.om").write_text(metrics)
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
            *flags,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(lambda: proc.poll() is not None or ready(url), timeout=120)
        assert proc.poll() is None and ready(url), (work / "prometheus.log").read_text()
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real Prometheus on loopback serving the backfilled days: (its URL, a work folder)."""
    work = tmp_path_factory.mktemp("prometheus")
    with served(work, openmetrics(history())) as url:
        yield url, work


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
    """Saved answers from `promtool query range -o json` (one file per metric, the matrix alone)
    replay the same week as the YAML."""
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


def test_a_trigger_selector_no_node_of_the_answer_matches_is_said_as_the_reason_for_no_hold(
    prometheus: tuple[str, Path],
) -> None:
    """The chart's trigger selector on an answer of kube_node_created alone: no node carries
    the NodePool label, so none starts a hold. simulate says so, naming the label and the
    kube-state-metrics flag that exports it, not that no node was young."""
    url, work = prometheus
    path = work / "created-only.json"
    path.write_text(json.dumps(query_range(url, CREATED)))
    nodes = len(load_timeline([str(path)]).nodes)
    result = run_cli("simulate", str(path), "--trigger-selector", POOL)
    assert result.code == 0, result.stderr
    assert (
        f"  warning: --trigger-selector '{POOL}' matches none of the {nodes} nodes of the input: "
        f"no node starts a hold; no node carries the label {POOL} (kube-state-metrics puts it in "
        f"kube_node_labels with --metric-labels-allowlist=nodes=[{POOL}])"
    ) in result.lines
    assert "  no hold: no node of the input matches --trigger-selector (see above)" in result.lines
    assert "younger than the hold duration" not in result.stdout


@pytest.fixture(scope="module")
def from_yaml_by_minute(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The week from YAML, removals rounded to --interval's 1m, as --prometheus reads them."""
    path = tmp_path_factory.mktemp("yaml") / "days.yaml"
    path.write_text(rounded_yaml(history(), timedelta(minutes=1)))
    return figures(str(path))


def test_simulate_asks_prometheus_itself_and_replays_the_same_days(
    prometheus: tuple[str, Path], from_yaml_by_minute: dict[str, Any]
) -> None:
    url, _ = prometheus
    span = ("--start", START.isoformat(), "--end", END.isoformat())
    assert figures("--prometheus", url, *span) == from_yaml_by_minute
    last = figures("--prometheus", url, "--end", END.isoformat(), "--last", f"{DAYS}d")
    assert last == from_yaml_by_minute


# --- labels by kube-state-metrics' names, and names that come back ---------------------------


def minute_answer(lives: list[tuple[str, int, int | None, dict[str, str]]], end: int) -> dict:
    """A range query's answer at 1m from T to T + `end` minutes: each life (name, created and
    deleted in minutes from T, labels as kube-state-metrics names them) sampled each minute."""
    result = []
    for name, born, gone, labels in lives:
        stop = end if gone is None else gone - 1
        steps = minutes(*range(max(born, 0), stop + 1), value=str(T + 60 * born))
        result.append(series(CREATED, name, steps))
        result.append(series(LABELS, name, [(t, "1") for t, _ in steps], **labels))
    return answer(*result)


def minute_yaml(lives: list[tuple[str, int, int | None, dict[str, str]]], end: int) -> str:
    entries = [
        {
            "name": name,
            "created": (T0 + timedelta(minutes=born)).isoformat(),
            "deleted": None if gone is None else (T0 + timedelta(minutes=gone)).isoformat(),
            "labels": labels,
        }
        for name, born, gone, labels in lives
    ]
    span = {"start": T0.isoformat(), "end": (T0 + timedelta(minutes=end)).isoformat()}
    return yaml.safe_dump({**span, "nodes": entries})


def replayed(path: Path, *args: str) -> dict[str, Any]:
    result = run_cli("simulate", str(path), *args, "--output", "json")
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    data.pop("elapsedSeconds")
    data.pop("timeline")
    for column in data["configurations"]:
        column.pop("replaySeconds")
    return data


NODEGROUP = "eks.amazonaws.com/nodegroup"
#: The README's cluster-autoscaler row: group label and trigger eks.amazonaws.com/nodegroup.
AUTOSCALER = (
    "--annotation",
    "cluster-autoscaler.kubernetes.io/scale-down-disabled",
    "--hold-scope",
    "group",
    "--group-label",
    NODEGROUP,
    "--trigger-selector",
    NODEGROUP,
    "--compare",
    "40m,10m/cluster",
)


def test_the_cluster_autoscaler_setup_replays_from_prometheus_as_from_yaml(
    tmp_path: Path,
) -> None:
    """Every label the settings use is read from kube_node_labels under kube-state-metrics'
    name for it: the group label and the trigger selector's, not only the NodePool's."""
    groups = ["ng-a", "ng-b", "ng-a", "ng-b", "ng-a", None, "ng-a", "ng-b"]
    lives = [
        (f"n{i}", 30 * i, 30 * i + 50, {NODEGROUP: group} if group else {})
        for i, group in enumerate(groups)
    ] + [("base", -60, None, {NODEGROUP: "system"})]
    (tmp_path / "day.yaml").write_text(minute_yaml(lives, 300))
    ksm = [
        (
            name,
            born,
            gone,
            {"label_eks_amazonaws_com_nodegroup": labels[NODEGROUP]} if labels else {},
        )
        for name, born, gone, labels in lives
    ]
    (tmp_path / "day.json").write_text(json.dumps(minute_answer(ksm, 300)))
    from_yaml = replayed(tmp_path / "day.yaml", "--hold-duration", "20m", *AUTOSCALER)
    assert from_yaml["configurations"][0]["holdsStarted"] >= 4
    assert replayed(tmp_path / "day.json", "--hold-duration", "20m", *AUTOSCALER) == from_yaml


@pytest.mark.parametrize(
    ("key", "name"),
    [
        (NODEGROUP, "label_eks_amazonaws_com_nodegroup"),
        ("topology.kubernetes.io/zoneName", "label_topology_kubernetes_io_zone_name"),
        ("team", "label_team"),
        ("a-b/HTTPServer", "label_a_b_httpserver"),
    ],
)
def test_kube_state_metrics_label_names(key: str, name: str) -> None:
    assert ksm_label(key) == name


def test_labels_kube_state_metrics_renamed_for_a_collision_are_named_not_picked(
    tmp_path: Path,
) -> None:
    labels = {"label_team_conflict1": "a", "label_team_conflict2": "b"}
    document = answer(
        series(CREATED, "a", minutes(0, 1, value=str(T))),
        series(LABELS, "a", minutes(0, 1, value="1"), **labels),
    )
    (tmp_path / "a.json").write_text(json.dumps(document))
    result = run_cli("simulate", str(tmp_path / "a.json"), "--trigger-selector", "team=a")
    assert result.code == 2
    assert "kube-state-metrics renamed colliding labels to label_team_conflict1, " in result.stderr
    assert "label_team_conflict2: several node labels read label_team, so none of them" in (
        result.stderr
    )
    assert "allowlist only team" in result.stderr


def test_a_name_created_again_within_one_step_is_two_nodes(tmp_path: Path) -> None:
    """b is deleted at 01:00:20 and created again at 01:00:40: between two samples its created
    value changes, so they are two nodes, as in the YAML, and two holds."""
    b1, b2 = T + 1800, T + 3640
    document = answer(
        series(CREATED, "a", [(T + 60 * m, str(T - 7200)) for m in range(0, 121)]),
        series(
            CREATED,
            "b",
            [(T + 60 * m, str(b1)) for m in range(30, 61)]
            + [(T + 60 * m, str(b2)) for m in range(61, 121)],
        ),
    )
    (tmp_path / "b.json").write_text(json.dumps(document))
    at = lambda s: datetime.fromtimestamp(s, UTC).isoformat()  # noqa: E731
    nodes = [
        {"name": "a", "created": at(T - 7200)},
        {"name": "b", "created": at(b1), "deleted": at(T + 3620)},
        {"name": "b", "created": at(b2)},
    ]
    (tmp_path / "b.yaml").write_text(
        yaml.safe_dump({"start": at(T), "end": at(T + 7200), "nodes": nodes})
    )
    from_yaml = replayed(tmp_path / "b.yaml")
    assert from_yaml["configurations"][0]["holdsStarted"] == 2
    timeline = load_timeline([str(tmp_path / "b.json")])
    assert [(n.name, n.created) for n in timeline.nodes][1:] == [
        ("b", datetime.fromtimestamp(b1, UTC)),
        ("b", datetime.fromtimestamp(b2, UTC)),
    ]
    assert replayed(tmp_path / "b.json") == from_yaml


# --- what a failed download and a live list say -------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty, most likely a failed download (`curl -f` leaves an empty file"),
        ("  \n", "empty, most likely a failed download"),
        (
            json.dumps(answer(*SMALL))[:300],
            "the JSON stops before its end (line 1), most likely a cut download",
        ),
    ],
)
def test_an_empty_or_cut_file_or_standard_input_is_exit_2_naming_a_failed_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, words: str
) -> None:
    (tmp_path / "history.json").write_text(text)
    result = run_cli("simulate", str(tmp_path / "history.json"))
    assert (result.code, result.stdout) == (2, "")
    assert result.stderr.startswith(f"node-holder: error: {tmp_path / 'history.json'}: {words}")
    assert result.stderr.count("\n") == 1
    assert "not valid JSON" not in result.stderr
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    result = run_cli("simulate", "-")
    assert result.code == 2
    assert f"<stdin>: {words}" in result.stderr


def test_a_live_node_list_says_deleted_nodes_are_missing(tmp_path: Path) -> None:
    meta = {"name": "a", "creationTimestamp": "2024-05-13T23:00:00Z"}
    (tmp_path / "nodes.json").write_text(
        json.dumps({"kind": "NodeList", "items": [{"kind": "Node", "metadata": meta}]})
    )
    result = run_cli("simulate", str(tmp_path / "nodes.json"))
    assert result.code == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if "--prometheus" in line]
    assert lines == [
        "  note: a live list has no deleted nodes, so launches avoided is a lower bound; replay "
        "the history with --prometheus URL (docs/simulate.md)"
    ]


# --- a fleet in one server, and limits ----------------------------------------------------

#: Low enough that a 6-hour chunk of one cluster is refused, high enough for a shorter one.
MAX_SAMPLES = 2000


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Two clusters' weeks in one server, told apart by `cluster`, with --query.max-samples
    lowered so that simulate must ask for shorter chunks."""
    work = tmp_path_factory.mktemp("fleet")
    metrics = openmetrics([], **{"prod-1": history(), "prod-2": history(seed=7)})
    with served(work, metrics, f"--query.max-samples={MAX_SAMPLES}") as url:
        yield url


def test_one_cluster_of_a_fleet_in_chunks_the_server_accepts(
    fleet: str, from_yaml_by_minute: dict[str, Any]
) -> None:
    span = ("--start", START.isoformat(), "--end", END.isoformat())
    result = run_cli(
        "simulate",
        "--prometheus",
        fleet,
        "--prometheus-match",
        '{cluster="prod-1"}',
        *span,
        *HOLDS,
        "--output",
        "json",
    )
    assert result.code == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "for its size" in line]
    assert said == [
        "simulate: Prometheus refused a query for its size (query processing "
        "would load too many samples into memory in query execution); asking for less time"
    ]
    data = json.loads(result.stdout)
    data.pop("elapsedSeconds"), data.pop("timeline")
    for column in data["configurations"]:
        column.pop("replaySeconds")
    assert data == from_yaml_by_minute
    both = figures("--prometheus", fleet, *span)  # both clusters: more nodes, other figures
    assert both["configurations"] != from_yaml_by_minute["configurations"]


# --- talking to fronts, and failures --------------------------------------------------------


@dataclass
class Stub:
    """A stand-in for a Prometheus front on loopback: every query gets `status` and `body`
    (no answer at all when status is 0); it keeps each request's headers."""

    status: int = 422
    body: bytes = b'{"status":"error","errorType":"execution","error":"boom"}'
    seen: list[dict[str, str]] = field(default_factory=list)


@contextmanager
def stubbed(tls: ssl.SSLContext | None = None) -> Iterator[tuple[str, Stub]]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.seen.append({k.lower(): v for k, v in self.headers.items()})
            if not state.status:
                self.close_connection = True
                return
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Retry-After", "0")  # a 5xx is retried: at once
            self.send_header("Content-Length", str(len(state.body)))
            self.end_headers()
            self.wfile.write(state.body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http{'s' if tls else ''}://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def stub() -> Iterator[tuple[str, Stub]]:
    with stubbed() as found:
        yield found


LAST_DAY = ("--end", END.isoformat(), "--last", "1d")


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (
            422,
            b'{"status":"error","errorType":"execution","error":"query timed out in expression'
            b' evaluation"}',
            "422 execution while trying to query {url}/api/v1/query: query timed out in "
            "expression evaluation",
        ),
        (
            500,
            b'{"status":"error","errorType":"internal","error":"tsdb unavailable"}',
            "500 internal while trying to query {url}/api/v1/query: tsdb unavailable",
        ),
        (503, b"upstream connect error", "503 ServiceUnavailable while trying to query {url}"),
        (0, b"", "cannot query {url}: connection to {url} dropped"),
    ],
)
def test_a_failed_query_is_one_line_and_exit_1(
    stub: tuple[str, Stub], status: int, body: bytes, words: str
) -> None:
    url, state = stub
    state.status, state.body = status, body
    secret = url.replace("http://", "http://ops:hunter2@")
    result = run_cli("simulate", "--prometheus", secret, *LAST_DAY)
    assert (result.code, result.stdout) == (1, "")
    assert result.stderr.startswith(f"node-holder: error: simulate: {words.format(url=url)}")
    assert result.stderr.count("\n") == 1
    assert "hunter2" not in result.stderr
    assert len(state.seen) == (6 if status >= 500 or not status else 1)  # 5xx: retried


def test_bearer_token_basic_auth_headers_and_credentials_in_the_url(
    stub: tuple[str, Stub], tmp_path: Path
) -> None:
    url, state = stub
    (tmp_path / "token").write_text("t0ken\n")
    (tmp_path / "password").write_text("s3cret\n")
    header = ("--prometheus-header", "X-Scope-OrgID: tenant-1", "--prometheus-header", "X-A: b")
    run_cli(
        "simulate",
        "--prometheus",
        url,
        "--prometheus-bearer-token-file",
        tmp_path / "token",
        *header,
        *LAST_DAY,
    )
    basic = ("--prometheus-username", "ops", "--prometheus-password-file", tmp_path / "password")
    run_cli("simulate", "--prometheus", url, *basic, *LAST_DAY)
    result = run_cli("simulate", "--prometheus", url.replace("//", "//ops:hunter2@"), *LAST_DAY)
    assert "hunter2" not in result.stderr + result.stdout
    sent = [(h.get("authorization"), h.get("x-scope-orgid"), h.get("x-a")) for h in state.seen]
    assert sent == [
        ("Bearer t0ken", "tenant-1", "b"),
        ("Basic " + base64.b64encode(b"ops:s3cret").decode(), None, None),
        ("Basic " + base64.b64encode(b"ops:hunter2").decode(), None, None),
    ]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ("--prometheus", "prometheus:9090"),
            "--prometheus: 'prometheus:9090' is not an http(s) URL",
        ),
        (
            ("--prometheus-match", 'cluster="a"'),
            "--prometheus-match: 'cluster=\"a\"' is not a matcher",
        ),
        (
            ("--prometheus-header", "X-Scope-OrgID"),
            "--prometheus-header: 'X-Scope-OrgID' is not `Name: value`",
        ),
        (
            ("--prometheus-bearer-token-file", "/nonexistent"),
            "--prometheus-bearer-token-file: cannot read /nonexistent",
        ),
        (("--last", "1d"), "give a TIMELINE file (`-`: standard input) or --prometheus URL"),
    ],
)
def test_bad_prometheus_options_are_exit_2_before_any_query(
    stub: tuple[str, Stub], args: tuple[str, ...], words: str
) -> None:
    url, state = stub
    given = ("--prometheus", url, *args) if args[0] not in ("--prometheus", "--last") else args
    result = run_cli("simulate", *given, *LAST_DAY[:2], "--last", "1d")
    assert result.code == 2
    assert words in result.stderr
    assert state.seen == []


def test_no_node_series_in_the_range_is_exit_1_naming_what_to_check(
    prometheus: tuple[str, Path],
) -> None:
    url, _ = prometheus
    result = run_cli(
        "simulate", "--prometheus", url, "--end", "2020-01-02T00:00:00Z", "--last", "1d"
    )
    assert result.code == 1
    assert result.stderr == (
        f"node-holder: error: simulate: {url}: no kube_node_created series from "
        "2020-01-01T00:00:00Z to 2020-01-02T00:00:00Z; check that kube-state-metrics' "
        "--resources includes nodes, that no --metric-denylist drops kube_node_created, and "
        "that Prometheus scrapes it\n"
    )


def test_a_ca_file_or_insecure_skip_tls_verify_reaches_a_self_signed_front(tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    request = ("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=a")
    names = ("-addext", "subjectAltName=IP:127.0.0.1")
    subprocess.run(
        ["openssl", *request, *names, "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with stubbed(context) as (url, state):
        refused = run_cli("simulate", "--prometheus", url, *LAST_DAY)
        assert refused.code == 1
        assert "TLS error talking to" in refused.stderr
        assert state.seen == []
        for trust in (("--prometheus-ca-file", str(cert)), ("--insecure-skip-tls-verify",)):
            result = run_cli("simulate", "--prometheus", url, *trust, *LAST_DAY)
            assert "422 execution while trying to query" in result.stderr  # the stub's answer
        assert len(state.seen) == 2


@pytest.mark.parametrize(
    "refusal",
    [
        "query processing would load too many samples into memory in query execution",
        "expanding series: exceeded samples limit: limit 1000 violated (got 3600)",  # Thanos store
        "the query exceeded the maximum number of chunks (limit: 11 chunks) "
        "(err-mimir-max-chunks-per-query)",  # Mimir
    ],
)
def test_a_size_refusal_is_split_and_said_once_until_a_chunk_cannot_be_split(
    stub: tuple[str, Stub], refusal: str
) -> None:
    url, state = stub
    state.body = json.dumps(
        {"status": "error", "errorType": "execution", "error": refusal}
    ).encode()
    result = run_cli("simulate", "--prometheus", url, *LAST_DAY)
    assert result.code == 1
    assert result.stderr == (
        f"simulate: Prometheus refused a query for its size ({refusal}); asking for less time\n"
        f"node-holder: error: simulate: 422 execution while trying to query {url}/api/v1/query: "
        f"{refusal}\n"
    )
    assert len(state.seen) == 9  # 6h, 3h, ... down to 2m: halved 8 times, then given up


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
