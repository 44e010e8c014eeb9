"""Hold settings per NodePool (its own metadata.annotations only), through the API test server.

A NodePool sets its own hold duration and cap in its own metadata.annotations (one list of
NodePools a run), the only place they are read: on a node (copied from a NodePool's template,
say) they are not, and the run says so once. Each trigger node holds for its NodePool's
duration, a window's cap is the smallest of its trigger nodes', a pool with "0" starts no hold,
and a bad value falls back to the configured setting and is said once per run. Every case runs
the real CLI.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.clusters import CliResult, run_cli
from tests.kubeapi.apiserver import ApiServer, Fault

KEY = "karpenter.sh/do-not-disrupt"
FREE = "node-holder.dev/free-until"
HOLD = "node-holder.dev/hold-duration"
MAX = "node-holder.dev/max-hold"
POOL = "karpenter.sh/nodepool"
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
OLD = timedelta(hours=5)


def launch(api: ApiServer, name: str, pool: str, age: timedelta, **copied: str) -> None:
    """A node of NodePool `pool`, as Karpenter launches it: EKS-shaped (a NodeClaim owns
    it, kubelet's and Karpenter's annotations), with a template's annotations copied."""
    api.add_node(name, created=api.now() - age, labels={POOL: pool}, annotations=copied)


def nodepools(api: ApiServer, **pools: dict[str, str]) -> None:
    """NodePools with these hold settings in their own metadata.annotations."""
    for name, own in pools.items():
        api.add_nodepool(name, annotations=own)


def run(kubeconfig: Path, command: str, *args: str) -> CliResult:
    quiet = ("--no-events",) if command == "reconcile" else ()
    return run_cli(command, "--kubeconfig", str(kubeconfig), *quiet, *args)


def held(api: ApiServer, *names: str) -> list[bool]:
    return [api.annotations(n).get(KEY) == "true" for n in names]


def test_each_pool_holds_for_its_own_duration_and_zero_never_holds(
    api: ApiServer, kubeconfig: Path
) -> None:
    """Group scope: batch (45m) is held by a node 30m old, web (the default 20m) is not by
    one 25m old, gpu ("0") not by one a minute old; status says where each setting came
    from; the pool annotations are never written."""
    api.set_clock(T0)
    nodepools(api, batch={HOLD: "45m", MAX: "2h"}, web={}, gpu={HOLD: "0"})
    for pool in ("batch", "web", "gpu"):
        launch(api, f"{pool}-old", pool, OLD)
    launch(api, "batch-new", "batch", timedelta(minutes=30))
    launch(api, "web-new", "web", timedelta(minutes=25))
    launch(api, "gpu-new", "gpu", timedelta(minutes=1))

    result = run(kubeconfig, "reconcile", "--hold-scope", "group", "--output", "json")
    assert result.code == 0, result.stderr
    assert held(api, "batch-old", "batch-new") == [True, True]
    assert held(api, "web-old", "web-new", "gpu-old", "gpu-new") == [False] * 4
    assert result.json["badValues"] == []
    assert api.writes("nodepools") == []

    text = run(kubeconfig, "status", "--hold-scope", "group")
    status = run(kubeconfig, "status", "--hold-scope", "group", "--output", "json")
    assert text.code == status.code == 0, text.stderr
    row = next(line for line in text.lines if line.startswith(f"{POOL}=batch "))
    assert "45m (nodepool/batch)" in row and "2h (nodepool/batch)" in row, row
    web = next(line for line in text.lines if line.startswith(f"{POOL}=web "))
    assert "20m (--hold-duration)" in web and "none (--max-hold)" in web, web
    windows = {w["name"]: w for w in status.json["windows"]}
    batch, gpu = windows[f"{POOL}=batch"], windows[f"{POOL}=gpu"]
    assert (batch["holdDuration"], batch["holdDurationFrom"]) == ("45m", "nodepool/batch")
    assert (batch["maxHold"], batch["maxHoldFrom"]) == ("2h", "nodepool/batch")
    assert (gpu["triggerNodes"], gpu["holdDuration"], gpu["holdDurationFrom"]) == (
        0,
        "20m",
        "--hold-duration",
    )

    api.advance_clock(timedelta(minutes=16))  # batch-new is 46m old: past its own 45m
    assert run(kubeconfig, "reconcile", "--hold-scope", "group").code == 0
    assert held(api, "batch-old", "batch-new") == [False, False]


def test_cluster_scope_a_longer_pool_holds_everything_and_the_smallest_cap_applies(
    api: ApiServer, kubeconfig: Path
) -> None:
    api.set_clock(T0)
    nodepools(api, system={}, gpu={HOLD: "0"}, batch={HOLD: "45m", MAX: "1h"})
    launch(api, "system", "system", OLD)
    launch(api, "gpu-new", "gpu", timedelta(minutes=1))
    assert run(kubeconfig, "reconcile").code == 0
    assert held(api, "system", "gpu-new") == [False, False]  # "0": no hold, however young

    launch(api, "batch-new", "batch", timedelta(minutes=30))
    result = run(kubeconfig, "reconcile", "--max-hold", "3h", "--output", "json")
    assert result.code == 0, result.stderr
    assert held(api, "system", "gpu-new", "batch-new") == [True] * 3
    (window,) = result.json["windows"]
    assert (window["maxHold"], window["maxHoldFrom"]) == ("1h", "nodepool/batch")
    assert window["holdUntil"] == "2026-11-22T12:15:00Z"  # batch-new's own 45m


def test_per_pool_caps_and_free_periods_over_time(api: ApiServer, kubeconfig: Path) -> None:
    """A node every 10 minutes in two pools, group scope, no --max-hold: batch (30m, capped
    at 1h) is released at the cap and stays free for its own 30m, the free-until stamp says
    so; web (30m, capped at 3h) stays held throughout."""
    api.set_clock(T0)
    nodepools(api, batch={HOLD: "30m", MAX: "1h"}, web={HOLD: "30m", MAX: "3h"})
    held_at: dict[str, list[int]] = {"batch": [], "web": []}
    for minute in range(0, 101, 10):
        api.set_clock(T0 + timedelta(minutes=minute))
        launch(api, f"batch-{minute}", "batch", timedelta(0))
        launch(api, f"web-{minute}", "web", timedelta(0))
        result = run(kubeconfig, "reconcile", "--hold-scope", "group")
        assert result.code == 0, result.stderr
        for pool, minutes in held_at.items():
            if held(api, f"{pool}-{minute}") == [True]:
                minutes.append(minute)
        if minute == 60:  # the cap's release: free for batch's own 30m, not the default 20m
            assert api.annotations("batch-0")[FREE] == "2026-11-22T13:30:00Z"
    assert held_at["batch"] == [0, 10, 20, 30, 40, 50, 90, 100]
    assert held_at["web"] == list(range(0, 101, 10))


BAD = {
    # pool: (its own settings, the words of the bad value)
    "words": ({HOLD: "45 minutes"}, f"{HOLD}='45 minutes' is not a duration"),
    "negative": ({HOLD: "-5m"}, f"{HOLD}='-5m' is not a positive duration"),
    "huge": ({HOLD: "9999h"}, f"{HOLD}='9999h' is longer than 7d"),
    "short-cap": ({HOLD: "45m", MAX: "30m"}, f"{MAX}='30m' is shorter than the hold (45m)"),
    "no-unit": ({MAX: "90"}, f"{MAX}='90' has no unit"),
}


def test_a_bad_value_falls_back_to_the_configured_setting_and_is_said_once(
    api: ApiServer, kubeconfig: Path
) -> None:
    """Each pool's nodes are 25m old: held only where the 45m that remains good applies
    (short-cap keeps its hold and loses its cap); the run exits 0, says each value once
    with its NodePool, in text and in the JSON line; nothing else changes."""
    api.set_clock(T0)
    nodepools(api, **{pool: own for pool, (own, _) in BAD.items()})
    for pool in BAD:
        for i in range(2):
            launch(api, f"{pool}-{i}", pool, timedelta(minutes=25))
    text = run(kubeconfig, "reconcile", "--hold-scope", "group", "--dry-run")
    real = run(kubeconfig, "reconcile", "--hold-scope", "group", "--output", "json")
    assert text.code == real.code == 0, real.stderr
    for pool, (_, words) in BAD.items():
        assert held(api, f"{pool}-0", f"{pool}-1") == [pool == "short-cap"] * 2, pool
        (line,) = [x for x in text.stderr.splitlines() if words in x]
        assert f" nodepool/{pool}: {words}" in line
        assert "configured setting" in line and "NodePool's metadata.annotations" in line
    listed = {(b["nodepool"], b["value"]) for b in real.json["badValues"]}
    assert listed == {(p, words) for p, (_, words) in BAD.items()}
    (window,) = [w for w in real.json["windows"] if w["name"] == f"{POOL}=short-cap"]
    assert (window["holdDuration"], window["maxHold"]) == ("45m", None)


def test_many_bad_values_keep_every_line_short(api: ApiServer, kubeconfig: Path) -> None:
    api.set_clock(T0)
    for i in range(300):
        pool = f"pool-{i:03}-" + "x" * 50
        nodepools(api, **{pool: {HOLD: f"{i} min" + "y" * 300}})
        launch(api, f"node-{i:03}-" + "x" * 200, pool, OLD)
    result = run(kubeconfig, "reconcile", "--output", "json")
    assert result.code == 0, result.stderr
    assert all(len(line.encode()) < 16 * 1024 for line in result.stdout.splitlines())
    assert all(len(line.encode()) < 16 * 1024 for line in result.stderr.splitlines())
    data = result.json
    assert len(data["badValues"]) + data["badValuesNotListed"] == 300
    assert data["badValuesNotListed"] > 0
    assert all(len(b["value"]) < 120 for b in data["badValues"])  # the value is cut short
    assert 0 < len(re.findall(HOLD, result.stderr)) <= 20
    assert json.loads(result.lines[-1]) == data


METADATA = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


def pool_lists(api: ApiServer) -> list[str]:
    """The Accept header of each NodePool list the runs sent."""
    return [r.accept for r in api.requests if r.method == "GET" and r.path.endswith("/nodepools")]


def test_settings_on_nodes_are_not_read_and_one_line_names_the_nodepools(
    api: ApiServer, kubeconfig: Path
) -> None:
    """Only the NodePool object's settings are read: batch's 45m and 2h hold (its node's own
    10m is not read); web's template copied 30m onto its node, a NodePool the run did not list
    (`old`) labels a node carrying a cap, a managed node group's node carries 25m: those take
    the options. One line says so, naming web (and batch) as the NodePools to carry them, old
    as missing, never as carrying settings. One metadata-only NodePool list a run, no NodePool
    or setting written; status names each source."""
    api.set_clock(T0)
    nodepools(api, batch={HOLD: "45m", MAX: "2h"}, web={})
    launch(api, "batch-new", "batch", timedelta(minutes=30), **{HOLD: "10m"})
    launch(api, "web-new", "web", timedelta(minutes=25), **{HOLD: "30m"})
    launch(api, "old-new", "old", timedelta(minutes=15), **{MAX: "1h"})
    api.add_node(
        "ng-new",
        created=api.now() - timedelta(minutes=24),
        labels={"eks.amazonaws.com/nodegroup": "ng"},
        annotations={HOLD: "25m"},
        eks=False,
    )
    api.reset_log()
    result = run(kubeconfig, "reconcile", "--hold-scope", "node", "--output", "json")
    assert result.code == 0, result.stderr
    assert held(api, "batch-new", "web-new", "old-new", "ng-new") == [True, False, True, False]
    assert pool_lists(api) == [METADATA]
    assert api.writes("nodepools") == []
    assert api.annotations("web-new")[HOLD] == "30m" and api.annotations("old-new")[MAX] == "1h"
    (line,) = [x for x in result.stderr.splitlines() if "on nodes are not read" in x]
    assert f"{HOLD} and {MAX} on nodes are not read, only in a NodePool's own metadata." in line
    assert "set them on nodepool/batch, nodepool/web;" in line
    assert f"nodepool/old (the nodes' {POOL}): missing, not listed" in line
    assert f"nodes without a {POOL} label take the options" in line
    assert line.count("nodepool/old") == 1

    status = run(kubeconfig, "status", "--hold-scope", "node", "--output", "json")
    text = run(kubeconfig, "status", "--hold-scope", "node")
    assert status.code == text.code == 0, status.stderr
    sources = {
        w["name"]: (w["holdDuration"], w["holdDurationFrom"], w["maxHold"], w["maxHoldFrom"])
        for w in status.json["windows"]
    }
    assert sources == {
        "node/batch-new": ("45m", "nodepool/batch", "2h", "nodepool/batch"),
        "node/old-new": ("20m", "--hold-duration", None, "--max-hold"),
    }  # (status lists the held nodes' windows)
    row = next(line for line in text.lines if line.startswith("node/batch-new "))
    assert "45m (nodepool/batch)" in row and "2h (nodepool/batch)" in row, row
    assert len([x for x in text.stderr.splitlines() if "on nodes are not read" in x]) == 1

    api.edit_nodepool("batch", lambda p: p["metadata"]["annotations"].update({HOLD: "20m"}))
    assert run(kubeconfig, "reconcile", "--hold-scope", "node").code == 0
    assert held(api, "batch-new") == [False]  # 30m old: past the NodePool's new 20m


def test_a_bad_value_on_the_nodepool_is_said_once_naming_it(
    api: ApiServer, kubeconfig: Path
) -> None:
    api.set_clock(T0)
    api.add_nodepool("batch", annotations={HOLD: "45 minutes"})
    for i in range(3):
        launch(api, f"batch-{i}", "batch", timedelta(minutes=25))
    result = run(kubeconfig, "reconcile", "--output", "json")
    assert result.code == 0, result.stderr
    assert held(api, "batch-0") == [False]  # the configured 20m
    words = f"{HOLD}='45 minutes' is not a duration"
    assert result.json["badValues"] == [{"nodepool": "batch", "value": words}]
    (line,) = [x for x in result.stderr.splitlines() if words in x]
    assert f" nodepool/batch: {words}; those nodes use the configured setting" in line


def test_without_the_nodepool_crd_or_the_right_to_list_the_run_goes_on(
    api: ApiServer, kubeconfig: Path
) -> None:
    """404 (no CRD) and 403 (no RBAC): the options hold (not the node's own annotation), and
    the run says once that it read no NodePools."""
    api.set_clock(T0)
    launch(api, "batch-new", "batch", timedelta(minutes=30), **{HOLD: "45m"})
    api.add_nodepool("batch", annotations={HOLD: "10m"})
    for case in ("404", "403"):
        api.nodepools_served = case == "403"
        if case == "403":
            api.inject(Fault(method="GET", path=r"/nodepools$", status=403, times=None))
        result = run(kubeconfig, "reconcile", "--output", "json")
        assert result.code == 0, (case, result.stderr)
        assert held(api, "batch-new") == [False], case  # the option's 20m: 30m old
        lines = [x for x in result.stderr.splitlines() if "NodePools not read (" in x]
        assert len(lines) == 1, (case, result.stderr)
        assert "hold settings from the options only" in lines[0]


def test_any_other_failure_of_the_nodepool_list_changes_nothing_and_exits_1(
    api: ApiServer, kubeconfig: Path
) -> None:
    """A 500 or a dropped connection on every NodePool list: falling back to the options
    could end batch's 45m hold early (its node is 30m old, the option is 20m)."""
    api.set_clock(T0)
    api.add_nodepool("batch", annotations={HOLD: "45m"})
    launch(api, "batch-new", "batch", timedelta(minutes=30))
    assert run(kubeconfig, "reconcile").code == 0
    assert held(api, "batch-new") == [True]
    api.advance_clock(timedelta(minutes=5))
    for fault in (
        Fault(method="GET", path=r"/nodepools$", status=500, times=None),
        Fault(method="GET", path=r"/nodepools$", drop_connection=True, times=None),
    ):
        api.reset_log()
        api.inject(fault)
        result = run(kubeconfig, "reconcile", "--timeout", "5s")
        assert result.code == 1, result.stderr
        assert "cannot list NodePools" in result.stderr and "nothing was changed" in result.stderr
        assert api.writes() == [] and api.writes("nodepools") == []
        assert held(api, "batch-new") == [True]
        fault.times = 0  # spent: the next case's alone


def test_the_budget_mechanism_reads_the_same_one_list_whole(
    api: ApiServer, kubeconfig: Path
) -> None:
    """--mechanism budget needs the NodePools' spec: one list, whole, serves both."""
    api.set_clock(T0)
    api.add_nodepool("batch", annotations={HOLD: "45m"})
    launch(api, "batch-new", "batch", timedelta(minutes=30))
    api.reset_log()
    result = run(kubeconfig, "reconcile", "--mechanism", "budget", "--output", "json")
    assert result.code == 0, result.stderr
    assert pool_lists(api) == [""] or METADATA not in pool_lists(api)[0]
    assert len(pool_lists(api)) == 1
    (window,) = result.json["windows"]
    assert (window["held"], window["holdDurationFrom"]) == (True, "nodepool/batch")
