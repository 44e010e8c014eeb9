"""`node-holder simulate`: known answers on handcrafted timelines, the in-memory API
semantics (merge patches, resourceVersion, computed requests), the comparison syntax, the
output, progress, and the demo's own command."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reconcile.rule.decide import NodeView
from reconcile.rule.settings import HoldSettings
from reconcile.simulate.replay import ReplayOptions, Simulation, replay, replay_span, simulate
from reconcile.simulate.report import _recommendation, knee
from reconcile.simulate.timeline import iso, load_timeline
from scripts import generate_day
from tests.clusters import CliResult, run_cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "reconcile" / "examples" / "batch-day.yaml"
T0 = datetime(2024, 5, 14, tzinfo=UTC)
POOL = "karpenter.sh/nodepool"
KEY = "karpenter.sh/do-not-disrupt"


def timeline_file(tmp_path: Path, *extra: str, start: str = "00:00", end: str = "01:00") -> str:
    """Two nodes from long ago, plus `extra` YAML entries, replayed from `start` to `end`."""
    text = (
        f"start: 2024-05-14T{start}:00Z\n"
        f"end: 2024-05-14T{end}:00Z\n"
        "nodes:\n"
        "  - {name: old-1, created: 2024-05-01T00:00:00Z}\n"
        "  - {name: old-2, created: 2024-05-01T00:00:00Z}\n"
    )
    path = tmp_path / "timeline.yaml"
    path.write_text(text + "".join(f"  - {e}\n" for e in extra))
    return str(path)


def simulate_json(*args: str) -> dict[str, Any]:
    result = run_cli("simulate", *args, "--output", "json")
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def figures(column: dict[str, Any]) -> dict[str, Any]:
    """The figures of one column that a person would quote."""
    return {
        "periods": [
            (p["start"][11:16], p["end"] and p["end"][11:16], p["trigger"], p["extended"])
            for p in column["periods"]
        ],
        "held_runs": column["heldRuns"],
        "node_minutes_held": column["nodeMinutesHeld"],
        "writes": column["writes"]["total"],
        "max_writes": column["writes"]["perRunMax"],
        "events": column["events"],
        "removed_while_held": column["nodesRemovedWhileHeld"],
    }


# --- known answers ----------------------------------------------------------------------


def test_one_new_node_in_an_old_cluster_holds_for_exactly_the_hold_duration(
    tmp_path: Path,
) -> None:
    path = timeline_file(tmp_path, "{name: new, created: 2024-05-14T00:00:00Z}")
    data = simulate_json(path, "--compare", "40m")
    assert data["replay"]["runs"] == 60
    twenty, forty = data["configurations"]
    assert (twenty["label"], twenty["primary"], forty["label"]) == ("20m", True, "40m")
    # Three nodes held from the run at 00:00 to the run at 00:20 (which releases them):
    # 3 patches to add, 3 to remove, HoldStarted and HoldEnded.
    assert figures(twenty) == {
        "periods": [("00:00", "00:20", "new", 0)],
        "held_runs": 20,
        "node_minutes_held": 60.0,
        "writes": 6,
        "max_writes": 3,
        "events": 2,
        "removed_while_held": 0,
    }
    assert figures(forty) == {
        "periods": [("00:00", "00:40", "new", 0)],
        "held_runs": 40,
        "node_minutes_held": 120.0,
        "writes": 6,
        "max_writes": 3,
        "events": 2,
        "removed_while_held": 0,
    }
    # Every run lists once; the rest are the patches and Events: all went to the server.
    assert twenty["requests"] == 60 * 2 + 6 + 2  # a NodePool list and a node page a run
    assert twenty["heldShare"] == pytest.approx(20 / 60)
    assert twenty["nodeMinutes"] == 180.0
    assert twenty["heldNodes"] == [3] * 20 + [0] * 40
    assert data["presentNodes"] == [3] * 60


def test_every_json_key_is_camel_case_as_in_reconcile_s_json(tmp_path: Path) -> None:
    path = timeline_file(tmp_path, "{name: new, created: 2024-05-14T00:00:00Z}")
    keys: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            keys.extend(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(simulate_json(path, "--compare", "40m/group/max=1h"))
    assert {"nodesRemovedWhileHeld", "nodePoolsBudget", "peakHeld", "presentNodes"} <= set(keys)
    assert [k for k in keys if not re.fullmatch(r"[a-z]+(?:[A-Z][a-z]*)*", k)] == []


def test_a_node_created_between_runs_is_seen_by_the_next_run_and_a_newer_one_extends(
    tmp_path: Path,
) -> None:
    path = timeline_file(
        tmp_path,
        "{name: new, created: 2024-05-14T00:00:30Z}",  # the run at 00:01 sees it first
        "{name: newer, created: 2024-05-14T00:10:00Z}",  # hold until 00:30
    )
    (column,) = simulate_json(path)["configurations"]
    assert figures(column) == {
        "periods": [("00:01", "00:30", "new", 1)],
        "held_runs": 29,
        "node_minutes_held": 9 * 3 + 20 * 4.0,
        "writes": 3 + 1 + 4,
        "max_writes": 4,
        "events": 3,  # HoldStarted, HoldExtended, HoldEnded
        "removed_while_held": 0,
    }


def test_deletions_while_held_are_counted_and_short_lived_nodes_are_never_seen(
    tmp_path: Path,
) -> None:
    path = timeline_file(
        tmp_path,
        "{name: new, created: 2024-05-14T00:00:00Z, deleted: 2024-05-14T00:05:30Z}",
        "{name: flash, created: 2024-05-14T00:30:10Z, deleted: 2024-05-14T00:30:50Z}",
    )
    timeline = load_timeline([path])
    hold = HoldSettings()
    span = replay_span(timeline, [hold], timedelta(minutes=1))
    sim = simulate(Simulation(timeline, span, [hold]))
    (result,) = sim.results
    assert sim.unseen == ("flash",)
    # `new` leaves at the run at 00:06 while held; the old nodes then release at once.
    assert [(p.start, p.end) for p in result.periods] == [(T0, T0 + timedelta(minutes=6))]
    assert result.removed_while_held == 1
    assert result.held_nodes[:7] == [3, 3, 3, 3, 3, 3, 0]
    assert result.present_nodes[5:7] == [3, 2]
    assert sum(result.writes) == 3 + 2


BUYS = (
    "{name: new, created: 2024-05-14T00:00:00Z, labels: {karpenter.sh/nodepool: b}}",
    # removed at 00:05:30 and 00:08 while the hold (until 00:20 at the time) keeps them
    "{name: gone, created: 2024-05-01T00:00:00Z, deleted: 2024-05-14T00:05:30Z, "
    "labels: {karpenter.sh/nodepool: b}}",
    "{name: gone-too, created: 2024-05-01T00:00:00Z, deleted: 2024-05-14T00:08:00Z, "
    "labels: {karpenter.sh/nodepool: b}}",
    # one new node of the same pool before the hold ends: one launch a kept node saves
    "{name: again, created: 2024-05-14T00:10:00Z, labels: {karpenter.sh/nodepool: b}}",
    "{name: other, created: 2024-05-14T00:12:00Z, labels: {karpenter.sh/nodepool: c}}",
)


def test_what_a_hold_buys_is_estimated_as_launches_avoided_and_node_hours_kept(
    tmp_path: Path,
) -> None:
    path = timeline_file(tmp_path, *BUYS)
    twenty, five = simulate_json(path, "--compare", "5m")["configurations"]
    assert twenty["nodesRemovedWhileHeld"] == 2
    assert twenty["launchesAvoidedEstimate"] == 1  # `again` replaces one; `other` is pool c
    assert twenty["nodeHoursKeptEstimate"] == round((14.5 + 12) / 60, 3)  # up to 00:20
    # A 5m hold ends at 00:05, before either removal: it buys nothing here.
    assert (five["launchesAvoidedEstimate"], five["nodeHoursKeptEstimate"]) == (0, 0.0)
    out = run_cli("simulate", path, "--compare", "5m").stdout
    assert re.search(r"^  launches avoided \(estimate\)\s+1\s+0$", out, re.MULTILINE), out
    assert re.search(r"^  node-hours kept \(estimate\)\s+0\.4\s+0\.0$", out, re.MULTILINE), out
    assert "launches avoided (estimate): nodes removed while held, each followed" in out


def test_a_sweep_shows_launches_avoided_against_node_hours_kept_per_hold_duration(
    tmp_path: Path,
) -> None:
    path = timeline_file(tmp_path, *BUYS)
    result = run_cli("simulate", path, "--sweep", "40m,5m")
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index(
        "Sweep: what each hold duration buys and costs (cluster scope; the same 60 runs each)"
    )
    head, *rows = lines[start + 1 : start + 5]
    assert head.split() == ["hold", "time", "held", "node-hours", "held", "launches", "avoided",
                            "(est.)", "node-hours", "kept", "(est.)"]  # fmt: skip
    assert [row.split()[0] for row in rows] == ["5m", "20m", "40m"]  # shortest first
    # Bars scaled to the largest figure of each column: 40m keeps the most node-hours.
    assert rows[0].split()[1:] == ["20%", "1.0", "0", "0.0"]  # 5m ends before the removals
    assert rows[1].split()[1:] == ["*", "53%", "2.5", "1", "█" * 16, "0.4", "██████▍"]
    assert rows[2].split()[1:] == ["87%", "4.2", "1", "█" * 16, "1.1", "█" * 16]
    assert "node-hours kept (estimate): how much longer those removed nodes would have lived" in (
        result.stdout
    )
    assert "Comparison:" not in result.stdout  # the sweep is its own table
    assert max(len(line.encode()) for line in lines) < 16 * 1024
    data = simulate_json(path, "--sweep", "40m,5m")
    assert data["sweep"] is True
    assert [c["label"] for c in data["configurations"]] == ["20m", "40m", "5m"]
    # 20m is 0.6 launch above the line from 5m to 40m: not a knee.
    assert data["knee"] is None and "<- knee" not in result.stdout
    assert "  recommended: none; no knee (no duration avoids a launch more than the straight " in (
        result.stdout
    )


def test_the_sweep_marks_the_knee_of_the_bundled_day_and_recommends_it() -> None:
    """30m: from 20m it avoids 12 more launches for 14.1 more node-hours kept, 45m 1 more
    for 24.2 more (docs/simulate.md); farthest above the line from 5m to 2h."""
    result = run_cli("simulate", str(EXAMPLE), "--sweep")
    assert result.code == 0, result.stderr
    marked = [line.split()[0] for line in result.lines if line.endswith("<- knee")]
    assert marked == ["30m"]
    assert (
        "  recommended: --hold-duration 30m, the knee: from 20m it avoids 12 more launches "
        "(est.) for 14.1 more node-hours kept; 45m avoids 1 more for 24.2 more"
    ) in result.lines
    found = simulate_json(str(EXAMPLE), "--sweep")["knee"]
    assert (found["label"], found["holdDurationSeconds"]) == ("30m", 1800)
    assert [(s["from"], s["to"], s["launchesAvoided"]) for s in found["steps"]] == [
        ("20m", "30m", 12),
        ("30m", "45m", 1),
    ]


def test_the_knee_follows_the_day_a_churn_of_12_minute_nodes_has_it_at_15m(
    tmp_path: Path,
) -> None:
    """A batch node lives 12 minutes and the next comes a minute later, 40 times: a hold
    avoids a launch only if it outlasts the 12 minutes and the gap (longer than 13m), and
    then every one; each longer hold only keeps the removed nodes longer. The knee is the
    first duration past 13m, 15m (the bundled day's is 30m)."""
    start = datetime(2024, 5, 14, 0, 5, tzinfo=UTC)
    jobs = [
        f"{{name: job-{i}, created: {iso(start + timedelta(minutes=13 * i))}, "
        f"deleted: {iso(start + timedelta(minutes=13 * i + 12))}, labels: {{{POOL}: batch}}}}"
        for i in range(40)
    ]
    path = timeline_file(tmp_path, *jobs, end="12:00")

    result = run_cli("simulate", path, "--sweep", "5m,10m,15m,30m,1h,2h")
    data = simulate_json(path, "--sweep", "5m,10m,15m,30m,1h,2h")

    assert result.code == 0, result.stderr
    assert [line.split()[0] for line in result.lines if line.endswith("<- knee")] == ["15m"]
    assert "  recommended: --hold-duration 15m, the knee: from 10m it avoids 39 more " in (
        result.stdout
    )
    avoided = {c["label"]: c["launchesAvoidedEstimate"] for c in data["configurations"]}
    assert (avoided["10m"], avoided["15m"], avoided["2h"]) == (0, 39, 39)
    assert data["knee"]["label"] == "15m"


def test_a_trigger_selector_and_group_label_no_node_carries_are_warned_naming_the_label(
    tmp_path: Path,
) -> None:
    """As `reconcile` warns: the label the input lacks, in one line each; a YAML input needs
    no kube-state-metrics flag. The selector, not the hold duration, is why no hold started."""
    path = timeline_file(tmp_path, "{name: new, created: 2024-05-14T00:10:00Z}")
    label = "eks.amazonaws.com/nodegroup"
    args = ("--trigger-selector", f"{label}=gpu", "--group-label", label, "--compare", "20m/group")
    result = run_cli("simulate", path, *args)
    assert result.code == 0, result.stderr
    warnings = [line for line in result.lines if line.startswith("  warning: ")]
    assert warnings == [
        f"  warning: --trigger-selector '{label}=gpu' matches none of the 3 nodes of the input: "
        f"no node starts a hold; no node carries the label {label}",
        f"  warning: --group-label '{label}' is on none of the 3 nodes of the input: in group "
        f"scope they all form one group; no node carries the label {label}",
    ]
    assert "  no hold: no node of the input matches --trigger-selector (see above)" in result.lines
    assert simulate_json(path, *args)["timeline"]["warnings"] == [w[11:] for w in warnings]
    held = run_cli("simulate", path, "--trigger-selector", "!gpu")  # matches: no warning
    assert "warning:" not in held.stdout and "no hold" not in held.stdout
    unheld = run_cli("simulate", path, "--node-selector", "team in (a,b)")
    assert (
        "  warning: --node-selector 'team in (a,b)' matches none of the 3 nodes of the input: "
        "no node is held; no node carries the label team"
    ) in unheld.lines


def test_a_step_past_the_knee_that_avoids_fewer_launches_says_fewer() -> None:
    """10m avoids 120 launches, 20m only 16: the line never says a negative `more`."""
    columns = [
        {"label": label, "holdDurationSeconds": seconds, "launchesAvoidedEstimate": launches,
         "nodeHoursKeptEstimate": hours}
        for label, seconds, launches, hours in (("5m", 300, 0, 0.0), ("10m", 600, 120, 1.0),
                                                ("20m", 1200, 16, 0.5))
    ]  # fmt: skip
    line = _recommendation(knee(columns), columns)
    assert line.endswith(
        "from 5m it avoids 120 more launches (est.) for 1.0 more node-hours kept; "
        "20m avoids 104 fewer for 0.5 fewer"
    ), line


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--sweep", "10m", "--compare", "40m"), "--sweep and --compare: give one of them"),
        (("--sweep", "10m,soon"), "--sweep: column 2 ('soon'): hold duration 'soon' is not a"),
    ],
)
def test_sweep_mistakes_are_one_line_exit_2(
    tmp_path: Path, args: tuple[str, ...], words: str
) -> None:
    path = timeline_file(tmp_path, "{name: new, created: 2024-05-14T00:00:00Z}")
    result = run_cli("simulate", path, *args)
    assert (result.code, result.stdout) == (2, "")
    assert result.stderr.startswith(f"node-holder: error: {words}"), result.stderr


def test_a_sweep_without_durations_tries_eight_from_5m_to_2h(tmp_path: Path) -> None:
    path = timeline_file(tmp_path, "{name: new, created: 2024-05-14T00:00:00Z}")
    labels = [c["label"] for c in simulate_json(path, "--sweep")["configurations"]]
    assert labels == ["20m", "5m", "10m", "15m", "30m", "45m", "1h", "2h"]


def test_group_scope_holds_only_the_group_that_grew(tmp_path: Path) -> None:
    path = timeline_file(
        tmp_path,
        "{name: b-old, created: 2024-05-01T00:00:00Z, labels: {karpenter.sh/nodepool: b}}",
        "{name: b-new, created: 2024-05-14T00:00:00Z, labels: {karpenter.sh/nodepool: b}}",
    )
    data = simulate_json(path, "--hold-scope", "group", "--compare", "20m/cluster")
    group, cluster = data["configurations"]
    assert (group["label"], cluster["label"]) == ("20m/group", "20m")
    assert [(p["window"], p["trigger"], p["peakHeld"]) for p in group["periods"]] == [
        (f"{POOL}=b", "b-new", 2)
    ]
    assert group["nodeMinutesHeld"] == 2 * 20.0
    assert cluster["nodeMinutesHeld"] == 4 * 20.0


def test_requests_are_computed_as_list_pages_patches_and_events(tmp_path: Path) -> None:
    """What the old replay counted from the test server's log: lists, patches, Events."""
    olds = "".join(
        f"  - {{name: old-{i}, created: 2024-05-01T00:00:00Z}}\n" for i in range(3, 1001)
    )
    path = timeline_file(tmp_path, "{name: new, created: 2024-05-14T00:00:00Z}", end="00:30")
    Path(path).write_text(Path(path).read_text() + olds)
    data = simulate_json(path)
    (column,) = data["configurations"]
    assert data["presentNodes"] == [1001] * 30
    # 1,001 nodes: 3 list pages of 500 per run; every node patched on and off; 2 Events.
    assert column["writes"]["total"] == 2 * 1001
    assert column["events"] == 2
    assert column["requests"] == 30 * 4 + 2 * 1001 + 2
    quiet = simulate_json(path, "--no-events")["configurations"][0]
    assert (quiet["events"], quiet["requests"]) == (0, 30 * 4 + 2 * 1001)


def test_a_hand_set_annotation_is_never_touched(tmp_path: Path) -> None:
    """A node that arrives with the hold key set by someone else keeps it through a cycle;
    patches change only the keys they name, as the API server applies them."""
    path = timeline_file(
        tmp_path,
        "{name: new, created: 2024-05-14T00:00:00Z, annotations: {example.com/since: old}}",
        "{name: pinned, created: 2024-05-01T00:00:00Z, "
        "annotations: {karpenter.sh/do-not-disrupt: 'false', team: x}}",
    )
    timeline = load_timeline([path])
    hold = HoldSettings()
    span = replay_span(timeline, [hold], timedelta(minutes=1))
    seen: dict[datetime, dict[str, dict[str, str]]] = {}

    def observe(tick: datetime, views: list[NodeView]) -> None:
        seen[tick] = {v.name: dict(v.annotations) for v in views}

    result = replay(timeline, span, hold, ReplayOptions(observe=observe))
    pinned = {KEY: "false", "team": "x"}
    assert len(seen) == 60 and all(nodes["pinned"] == pinned for nodes in seen.values())
    owned = {KEY: "true", "node-holder.dev/owned-annotations": KEY}
    assert seen[T0]["new"] == {"example.com/since": "old", **owned}
    assert seen[T0]["old-1"] == owned
    assert seen[T0 + timedelta(minutes=20)]["new"] == {"example.com/since": "old"}
    assert seen[T0 + timedelta(minutes=20)]["old-1"] == {}
    # Held by someone else counts as carrying the annotation, as in the cluster.
    assert result.held_nodes[0] == 4 and result.held_nodes[20] == 1
    assert sum(result.writes) == 3 + 3


def test_events_is_the_cronjob_s_setting_with_its_variable(tmp_path: Path) -> None:
    """--events is one option in the settings table: NODE_HOLDER_EVENTS=false, as the
    CronJob's ConfigMap may say, counts no Events, as --no-events does."""
    path = timeline_file(tmp_path, "{name: new, created: 2024-05-14T00:00:00Z}")

    def events(*args: str, env: dict[str, str] | None = None) -> int:
        result = run_cli("simulate", path, "--output", "json", *args, env=env)
        assert result.code == 0, result.stderr
        return json.loads(result.stdout)["configurations"][0]["events"]

    assert events() == 2  # HoldStarted, HoldEnded
    assert events(env={"NODE_HOLDER_EVENTS": "false"}) == events("--no-events") == 0
    assert events("--events", env={"NODE_HOLDER_EVENTS": "false"}) == 2  # the flag wins


def test_jobs_is_refused_like_any_unknown_option(tmp_path: Path) -> None:
    """--jobs was accepted and ignored for a while (the replay used a process per column);
    every option is in the settings table now, and it is not one."""
    path = timeline_file(tmp_path, "{name: new, created: 2024-05-14T00:00:00Z}")
    result = run_cli("simulate", path, "--jobs", "2")
    assert result.code == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert "No such option '--jobs'" in line and "node-holder simulate --help" in line, line


def test_simulate_imports_no_http_client_and_no_test_server(tmp_path: Path) -> None:
    path = timeline_file(tmp_path, "{name: new, created: 2024-05-14T00:00:00Z}")
    code = (
        "import sys\n"
        "from reconcile.cli import main\n"
        "try:\n"
        f"    main(['simulate', {path!r}])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in\n"
        "          ('kubernetes', 'urllib3', 'tests', 'socketserver')\n"
        "          or m in ('http.server', 'reconcile.cluster', 'reconcile.run')]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "Replayed 1 configuration(s) x 60 runs" in done.stdout


def test_each_configuration_says_on_one_stderr_line_when_its_replay_is_done(
    tmp_path: Path,
) -> None:
    path = timeline_file(tmp_path, "{name: new, created: 2024-05-14T00:00:00Z}")
    for output in ("text", "json"):
        result = run_cli("simulate", path, "--compare", "10m,40m/group", "--output", output)
        assert result.code == 0, result.stderr
        assert result.stderr.splitlines() == [
            "simulate: 20m done (1 of 3)",
            "simulate: 10m done (2 of 3)",
            "simulate: 40m/group done (3 of 3)",
        ]
        assert " done (" not in result.stdout


# --- the command line -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("compare", "words"),
    [
        ("10m,,40m", "--compare: column 2 is empty"),
        ("10m,1x", "--compare: column 2 ('1x'): hold duration '1x' is not a duration"),
        ("20m/grp", "--compare: column 1 ('20m/grp'): 'grp' is neither a scope"),
        ("20m/group/node", "--compare: column 1 ('20m/group/node'): gives the scope twice"),
        ("20m/max=5m", "--compare: column 1 ('20m/max=5m'): 5m is shorter than the hold"),
        ("20m/max=soon", "--compare: column 1 ('20m/max=soon'): max hold 'soon' is not a"),
        ("1m,2m,3m,4m,5m,6m,7m,8m", "--compare: 8 columns; compare at most 7"),
        (
            "20m/nodepool:b",
            "--compare: column 1 ('20m/nodepool:b'): 'nodepool:b' is not nodepool:NAME=DURATION",
        ),
        (
            "20m/nodepool:b:cap=1h",
            "--compare: column 1 ('20m/nodepool:b:cap=1h'): 'nodepool:b:cap=1h' is not",
        ),
        (
            "20m/nodepool:b=45 minutes",
            "--compare: column 1 ('20m/nodepool:b=45 minutes'): node-holder.dev/hold-duration="
            "'45 minutes' is not a duration; use e.g. nodepool:b=45m",
        ),
        (
            "20m/max=1h/nodepool:b=2h",
            "--compare: column 1 ('20m/max=1h/nodepool:b=2h'): node-holder.dev/hold-duration="
            "'2h' is longer than --max-hold (1h)",
        ),
        (
            "20m/nodepool:b:max=10m",
            "--compare: column 1 ('20m/nodepool:b:max=10m'): node-holder.dev/max-hold='10m' is "
            "shorter than the hold (20m)",
        ),
        (  # the old name, `pool:`: a --group-label value, not a NodePool
            "20m/pool:b=45m",
            "--compare: column 1 ('20m/pool:b=45m'): 'pool:b=45m' is neither a scope (cluster, "
            "group, node), max=DURATION nor nodepool:NAME=DURATION; use e.g. --compare ",
        ),
    ],
)
def test_compare_syntax_errors_are_one_line_exit_2(
    tmp_path: Path, compare: str, words: str
) -> None:
    path = timeline_file(tmp_path, "{name: new, created: 2024-05-14T00:00:00Z}")
    result = run_cli("simulate", path, "--compare", compare)
    assert result.code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"node-holder: error: {words}"), result.stderr
    assert result.stderr.count("\n") == 1


def test_compare_overrides_a_nodepools_own_settings(tmp_path: Path) -> None:
    """The NodePool list beside the timeline says batch holds 45m (the batch node's own
    annotation, 10m, is not read, in YAML and JSON alike); a column says what another value of
    a NodePool would do, as if that NodePool carried it, and its label says so."""
    batch = "labels: {karpenter.sh/nodepool: batch}"
    own = "annotations: {node-holder.dev/hold-duration: 10m}"
    path = timeline_file(tmp_path, f"{{name: b1, created: 2024-05-14T00:00:00Z, {batch}, {own}}}")
    entries = [
        {"name": "old-1", "created": "2024-05-01T00:00:00Z"},
        {"name": "old-2", "created": "2024-05-01T00:00:00Z"},
        {
            "name": "b1",
            "created": "2024-05-14T00:00:00Z",
            "labels": {POOL: "batch"},
            "annotations": {"node-holder.dev/hold-duration": "10m"},
        },
    ]
    as_json = tmp_path / "timeline.json"
    as_json.write_text(json.dumps(entries))
    pools = tmp_path / "nodepools.json"
    annotations = {"node-holder.dev/hold-duration": "45m"}
    pools.write_text(
        json.dumps({"kind": "NodePool", "metadata": {"name": "batch", "annotations": annotations}})
    )
    compare = (
        "20m/nodepool:batch=10,20m/nodepool:batch=0,20m/nodepool:web=5m/nodepool:batch:max=50m"
    )
    args = ("--start", "2024-05-14T00:00:00Z", "--end", "2024-05-14T01:00:00Z")
    for source in (path, str(as_json)):
        alone = simulate_json(source, *args)
        assert alone["configurations"][0]["heldRuns"] == 20, source  # the node's 10m: not read
        assert alone["timeline"]["notes"] == [
            "1 node(s) carry node-holder.dev/hold-duration or node-holder.dev/max-hold, which "
            "are not read on nodes: give the NodePools' own as a NodePool list (kubectl get "
            "nodepools -o json), or a column's nodepool:NAME=DURATION"
        ]
        data = simulate_json(source, str(pools), *args, "--compare", compare)
        columns = {c["label"]: c for c in data["configurations"]}
        assert list(columns) == [
            "20m",
            "20m/nodepool:batch=10",
            "20m/nodepool:batch=0",
            "20m/nodepool:web=5m/nodepool:batch:max=50m",
        ]
        held = [c["heldRuns"] for c in columns.values()]
        assert held == [45, 10, 0, 45], source  # the NodePool's 45m, then 10m, then never


def test_compare_columns_inherit_the_hold_options(tmp_path: Path) -> None:
    path = timeline_file(tmp_path, "{name: new, created: 2024-05-14T00:00:00Z}")
    data = simulate_json(
        path, "--hold-scope", "node", "--max-hold", "30m", "--compare", "10m,40m,20m/max=none"
    )
    labels = [c["label"] for c in data["configurations"]]
    # 40m drops the inherited 30m cap (a cap below the hold duration is refused)
    assert labels == ["20m/node/max=30m", "10m/node/max=30m", "40m/node", "20m/node"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--interval", "5s"), "--interval: '5s' is shorter than 10s"),
        (("--start", "today"), "--start: 'today' is not an RFC 3339 time"),
        (("--end", "2024-05-13T00:00:00Z"), "the replay would end (2024-05-13T00:00:00Z) before"),
        (("--plot", "out.svg"), "--plot: 'out.svg' does not end in .png"),
    ],
)
def test_bad_replay_options_are_one_line_exit_2(
    tmp_path: Path, args: tuple[str, ...], words: str
) -> None:
    path = timeline_file(tmp_path, "{name: new, created: 2024-05-14T00:00:00Z}")
    result = run_cli("simulate", path, *args)
    assert result.code == 2
    assert result.stderr.startswith(f"node-holder: error: {words}"), result.stderr


def test_a_long_history_asks_for_a_shorter_window_and_last_gives_it(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(
        "nodes:\n"
        "  - {name: ancient, created: 2023-01-01T00:00:00Z}\n"
        "  - {name: new, created: 2024-05-14T00:00:00Z}\n"
    )
    result = run_cli("simulate", str(path))
    assert result.code == 2
    assert "runs at --interval 1m (at most 20,160); replay part of it with --last 24h" in (
        result.stderr
    )
    data = simulate_json(str(path), "--last", "1h")
    assert data["replay"]["runs"] == 60
    assert data["replay"]["end"] == "2024-05-14T00:21:00Z"  # the last hold ends, one run more
    assert figures(data["configurations"][0])["periods"] == [("00:00", "00:20", "new", 0)]


def test_text_output_explains_itself(tmp_path: Path) -> None:
    path = timeline_file(
        tmp_path,
        "{name: new, created: 2024-05-14T00:00:00Z, labels: {karpenter.sh/nodepool: batch}}",
    )
    result = run_cli("simulate", path, "--compare", "40m")
    assert result.code == 0, result.stderr
    out = result.stdout
    assert "60 runs per configuration" in out
    assert (
        "Holds with the primary configuration (hold 20m, cluster scope): 1 started, "
        "held 20m of 1h (33%)"
    ) in out
    assert re.search(r"^  00:00  00:20\s+20m  new \(batch\)\s+3$", out, re.MULTILINE), out
    assert re.search(r"^  node-minutes held\s+60\s+120$", out, re.MULTILINE), out
    assert re.search(r"^  share of time held\s+33%\s+67%$", out, re.MULTILINE), out
    assert re.search(r"^  20m \s*\|█{20} {40}\|$", out, re.MULTILINE), out
    assert "removed while held: nodes the timeline deletes while they carry the hold" in out
    assert out.rstrip().splitlines()[-1].startswith("Replayed 2 configuration(s) x 60 runs")


def test_plot_writes_a_png_or_says_how_to_install_matplotlib(tmp_path: Path) -> None:
    path = timeline_file(tmp_path, "{name: new, created: 2024-05-14T00:00:00Z}")
    png = tmp_path / "hold.png"
    result = run_cli("simulate", path, "--plot", str(png))
    try:
        import matplotlib  # noqa: F401, PLC0415
    except ImportError:
        assert result.code == 2
        assert "--plot needs matplotlib, which is not installed; pip install matplotlib" in (
            result.stderr
        )
        assert not png.exists()
    else:
        assert result.code == 0, result.stderr
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        curve = tmp_path / "sweep.png"
        swept = run_cli("simulate", path, "--sweep", "10m,40m", "--plot", str(curve))
        assert swept.code == 0, swept.stderr
        assert curve.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"Plot written to {curve}." in swept.stdout


def test_help_does_not_import_the_replay() -> None:
    code = (
        "import sys\n"
        "from reconcile.cli import main\n"
        "try:\n"
        "    main(['simulate', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "assert 'kubernetes' not in sys.modules\n"
        "assert 'reconcile.simulate' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "--compare" in done.stdout


# --- the demo and its bundled timeline -------------------------------------------------


def demo_args() -> list[str]:
    """The arguments `make demo` passes, read from the Makefile itself."""
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(r"^DEMO_ARGS \?= (.+)$", makefile, re.MULTILINE)
    assert match, "Makefile has no DEMO_ARGS"
    assert "$(PY) -m reconcile simulate $(DEMO_ARGS)" in makefile
    return shlex.split(match.group(1))


def test_bundled_day_is_what_its_generator_writes() -> None:
    assert EXAMPLE.read_text() == generate_day.render()
    timeline = load_timeline([str(EXAMPLE)])
    assert (timeline.start, timeline.end) == (T0, T0 + timedelta(days=1))
    pools = {n.labels[POOL] for n in timeline.nodes}
    assert pools == {"system", "general", "batch", "gpu"}
    batch = [n for n in timeline.nodes if n.labels[POOL] == "batch"]
    lives = [(n.deleted - n.created) for n in batch if n.deleted and n.created]
    assert len(batch) > 60
    assert min(lives) >= timedelta(minutes=10) and max(lives) <= timedelta(minutes=33)
    gpu = [n.deleted - n.created for n in timeline.nodes if n.labels[POOL] == "gpu"]
    assert all(life >= timedelta(hours=2) for life in gpu)  # type: ignore[operator]


def test_the_demo_command_on_the_first_six_hours() -> None:
    args = demo_args()
    assert args[0] == "reconcile/examples/batch-day.yaml"
    args[0] = str(ROOT / args[0])
    result: CliResult = run_cli("simulate", *args, "--end", "2024-05-14T06:00:00Z")
    assert result.code == 0, result.stderr
    out = result.stdout
    assert "360 runs per configuration" in out
    assert "Holds with the primary configuration (hold 20m, cluster scope): 2 started" in out
    assert re.search(r"^  01:31  01:53\s+22m  ip-\S+ \(batch\)\s+\+4\s+14$", out, re.MULTILINE)
    header = next(line for line in out.splitlines() if line.strip().startswith("20m *"))
    assert header.split() == ["20m", "*", "10m", "40m", "20m/group", "20m/node"]
    assert "Replayed 5 configuration(s) x 360 runs through the reconciler's decision" in out


KARPENTER_LOG = """\
{"level":"INFO","time":"2024-09-10T15:20:41.702Z","logger":"controller","message":"launched nodeclaim","NodeClaim":{"name":"batch-wgbwq"},"instance-type":"c6i.4xlarge"}
{"level":"INFO","time":"2024-09-10T15:21:41.702Z","logger":"controller","message":"registered nodeclaim","controller":"nodeclaim.lifecycle","NodeClaim":{"name":"batch-wgbwq"},"Node":{"name":"ip-10-0-55-209.us-east-2.compute.internal"}}
a line that is not JSON
{"level":"INFO","time":"2024-09-10T15:22:00.000Z","logger":"controller","message":"registered nodeclaim","controller":"nodeclaim.lifecycle","NodeClaim":{"name":"gpu-train-abcde"},"Node":{"name":"ip-10-0-1-2.us-east-2.compute.internal"}}
{"level":"INFO","time":"2024-09-10T15:29:12.708Z","logger":"controller","message":"deleted node","controller":"node.termination","Node":{"name":"ip-10-0-55-209.us-east-2.compute.internal"}}
{"level":"INFO","time":"2024-09-10T15:30:12.708Z","logger":"controller","message":"deleted node","controller":"node.termination","Node":{"name":"ip-10-9-9-9.us-east-2.compute.internal"}}
"""  # noqa: E501


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not on PATH")
def test_the_documented_karpenter_log_recipe_makes_a_timeline(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "simulate.md").read_text()
    recipe = next(line for line in doc.splitlines() if line.startswith("jq -cR "))
    assert recipe.endswith("> history.json")
    (tmp_path / "karpenter.log").write_text(KARPENTER_LOG)
    subprocess.run(["bash", "-c", recipe], cwd=tmp_path, check=True, timeout=30)
    timeline = load_timeline([str(tmp_path / "history.json")])
    got = {n.name: (n.created, n.deleted, dict(n.labels)) for n in timeline.nodes}
    registered = datetime(2024, 9, 10, 15, 21, 41, 702000, tzinfo=UTC)
    assert got == {
        "ip-10-0-55-209.us-east-2.compute.internal": (
            registered,
            datetime(2024, 9, 10, 15, 29, 12, 708000, tzinfo=UTC),
            {POOL: "batch"},
        ),
        "ip-10-0-1-2.us-east-2.compute.internal": (
            datetime(2024, 9, 10, 15, 22, tzinfo=UTC),
            None,
            {POOL: "gpu-train"},
        ),
    }
