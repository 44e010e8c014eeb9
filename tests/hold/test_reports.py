"""Reports are an audit trail: counts and lines say what landed, what failed and why.

Every case runs the real CLI against the API test server (real HTTP, real client).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from reconcile.rule.text import table
from tests.clusters import CliResult, run_cli
from tests.kubeapi.apiserver import ApiServer

KEY = "karpenter.sh/do-not-disrupt"
OLD_KEY = "karpenter.sh/do-not-consolidate"
MARKER = "node-holder.dev/owned-annotations"
CATEGORIES = (
    "added",
    "removed",
    "switched",
    "disowned",
    "tidied",
    "pinned",
    "unpinned",
    "failed",
    "unchanged",
    "notSelected",
    "heldByOthers",
    "exempt",
    "deleting",
    "gone",
)


def add(api: ApiServer, name: str, minutes: float, annotations: dict | None = None) -> None:
    created = api.now() - timedelta(minutes=minutes)
    api.add_node(name, created=created, eks=False, annotations=annotations)


def run(kubeconfig: Path, command: str, *args: str) -> CliResult:
    return run_cli(command, "--kubeconfig", str(kubeconfig), *args)


def summary(result: CliResult) -> dict:
    return result.json["summary"]


def node_lines(result: CliResult) -> list[dict]:
    """`status --nodes --output json`: the line of each node, before the summary line."""
    return [row for row in map(json.loads, result.lines[:-1]) if "node" in row]


def test_a_read_only_identity_counts_failures_not_additions(api: ApiServer, tmp_path: Path):
    for i in range(30):
        add(api, f"n{i}", 300)
    add(api, "new", 2)
    readonly = api.write_kubeconfig(tmp_path / "ro", identity="readonly")

    text = run(readonly, "reconcile", "--no-events")
    as_json = run(readonly, "reconcile", "--no-events", "--output", "json")

    assert text.code == as_json.code == 1
    counts = text.lines[-1]
    assert "0 added" in counts and "31 failed" in counts, counts
    data = summary(as_json)
    assert data["added"] == 0 and data["failed"] == 31 and data["writes"] == 0
    assert api.writes() == [] or all(w.status == 403 for w in api.writes())


def test_switching_the_key_names_both_keys_in_lines_and_counts_it_switched(
    api: ApiServer, kubeconfig: Path
):
    add(api, "held", 300, {OLD_KEY: "true", MARKER: OLD_KEY})
    add(api, "new", 2, {OLD_KEY: "true", MARKER: OLD_KEY})

    dry = run(kubeconfig, "reconcile", "--dry-run", "--annotation", KEY)
    real = run(kubeconfig, "reconcile", "--annotation", KEY)

    assert dry.code == real.code == 0
    assert f"node/held: would add {KEY}, remove {OLD_KEY}" in dry.stdout
    assert f"node/held: added {KEY}, removed {OLD_KEY}" in real.stdout
    for result, verb in ((dry, "would be "), (real, "")):
        last = result.lines[-1]
        assert f"2 {verb}switched" in last, last
    assert api.annotations("held") == {KEY: "true", MARKER: KEY}


def test_summary_categories_add_up_to_the_nodes(api: ApiServer, kubeconfig: Path) -> None:
    add(api, "ours", 300, {KEY: "true", MARKER: KEY})
    add(api, "others", 300, {KEY: "true"})
    add(api, "exempt", 300, {KEY: "false"})
    add(api, "free", 300)
    add(api, "new", 2)
    api.mark_deleting("free")
    for command in (("reconcile", "--dry-run"), ("reconcile",), ("status",), ("reconcile",)):
        result = run(kubeconfig, *command, "--output", "json")
        assert result.code == 0, result
        data = summary(result)
        assert sum(data[c] for c in CATEGORIES) == data["nodes"] == 5, data
        assert data["heldByOthers"] == 1 and data["exempt"] == 1 and data["deleting"] == 1


def test_a_node_set_to_false_is_exempt_not_held_by_others(api: ApiServer, kubeconfig: Path):
    add(api, "exempt", 300, {KEY: "false"})
    add(api, "others", 300, {KEY: "true"})

    text = run(kubeconfig, "status", "--nodes")
    as_json = run(kubeconfig, "status", "--nodes", "--output", "json")

    assert text.code == as_json.code == 0
    rows = {line.split()[0]: line for line in text.lines if line.startswith(("exempt", "others"))}
    assert "exempt" in rows["exempt"].split()[3:] and "held by others" in rows["others"]
    nodes = {n["node"]: n for n in node_lines(as_json)}
    assert nodes["exempt"]["state"] == "exempt"
    assert nodes["others"]["state"] == "held by others"
    assert "1 held by others, 1 exempt" in text.lines[0]
    assert as_json.json["nodeStates"] == {
        "heldByUs": 0,
        "heldByOthers": 1,
        "pinned": 0,
        "exempt": 1,
        "free": 0,
    }


@pytest.mark.parametrize("output", ["text", "json"])
def test_dry_run_and_real_run_use_the_same_words(api: ApiServer, kubeconfig: Path, output: str):
    add(api, "new", 2)
    dry = run(kubeconfig, "reconcile", "--dry-run", "--output", output)
    real = run(kubeconfig, "reconcile", "--output", output)
    assert dry.code == real.code == 0
    if output == "text":
        assert f"would add {KEY}" in dry.stdout and f"added {KEY}" in real.stdout
        assert "1 would be added" in dry.lines[-1] and "1 added" in real.lines[-1]
    else:
        assert summary(dry)["added"] == summary(real)["added"] == 1


def test_the_free_period_after_max_hold_is_reported(api: ApiServer, kubeconfig: Path) -> None:
    """While --max-hold keeps a window free, the lines say until when, and the node that
    arrived meanwhile is stamped with it (not held)."""
    api.set_clock(api.now())  # a slow run (a loaded machine) must not age the newcomer
    free = (api.now() + timedelta(minutes=12)).strftime("%Y-%m-%dT%H:%M:%SZ")
    add(api, "released", 90, {"node-holder.dev/free-until": free})
    add(api, "newcomer", 2)

    dry = run(kubeconfig, "reconcile", "--max-hold", "1h", "--dry-run")
    result = run(kubeconfig, "reconcile", "--max-hold", "1h")

    assert dry.code == result.code == 0, dry.stderr + result.stderr
    # Words that say what changed: a stamp set (or removed), never "tidied".
    assert dry.lines[0].startswith("node/newcomer: would set stamp node-holder.dev/free-until")
    assert "1 would have stamps updated" in dry.lines[-1] and "tidied" not in dry.stdout
    assert "node/newcomer: set stamp node-holder.dev/free-until" in result.lines
    assert "1 with stamps updated" in result.lines[-1] and "tidied" not in result.stdout
    assert result.lines[-1].startswith("released: youngest node newcomer is 2m old, hold ended")
    assert f"no new hold before {free}" in result.lines[-1]
    assert api.annotations("newcomer") == {"node-holder.dev/free-until": free}
    status = run(kubeconfig, "status", "--max-hold", "1h", "--output", "json")
    (window,) = json.loads(status.stdout)["windows"]
    assert window["freeUntil"] == free and window["held"] is False
    table = run(kubeconfig, "status", "--max-hold", "1h")
    assert f"free until {free}" in table.stdout


def test_a_run_records_at_most_ten_events_and_sums_up_the_rest(
    api: ApiServer, kubeconfig: Path
) -> None:
    """A change of scope during a hold: every node becomes its own window, and each ends its
    hold. One Event per window would be 60 here (1,508 in the issue's cluster)."""
    for i in range(60):
        add(api, f"n{i:02}", 300, {KEY: "true", MARKER: KEY})

    result = run(kubeconfig, "reconcile", "--hold-scope", "node", "--output", "json")

    assert result.code == 0, result.stderr
    assert summary(result)["removed"] == 60
    events = api.events
    assert len(events) == len(result.json["events"]) == 10
    assert all(e["reason"] == "HoldEnded" for e in events)
    single, (summed,) = events[:9], events[9:]
    assert all("removed from 1 node(s)" in e["message"] for e in single)
    assert summed["message"] == (
        "Hold ended for 51 more windows, 51 node(s) in all (one run records at most 10 Events)"
    )
    named = {e["involvedObject"]["name"] for e in events}
    assert len(named) == 10 and named <= set(api.node_names())


def test_nodes_outside_the_node_selector_are_not_selected_never_unchanged(
    api: ApiServer, kubeconfig: Path
) -> None:
    for name, labels in (("a1", {"pool": "a"}), ("a2", {"pool": "a"}), ("b1", {"pool": "b"})):
        api.add_node(name, created=api.now() - timedelta(hours=5), eks=False, labels=labels)
    add(api, "new", 2)
    selector = ("--node-selector", "pool in ( a )")

    text = run(kubeconfig, "reconcile", "--dry-run", *selector)
    as_json = run(kubeconfig, "reconcile", *selector, "--output", "json")

    assert text.code == as_json.code == 0, as_json.stderr
    assert "2 would be added, 0 would be removed, 0 unchanged, 2 not selected" in text.lines[-1]
    data = summary(as_json)
    assert (data["added"], data["unchanged"], data["notSelected"]) == (2, 0, 2), data
    assert sum(data[c] for c in CATEGORIES) == data["nodes"] == 4
    assert "matches none" not in text.stderr + as_json.stderr


@pytest.mark.parametrize(
    ("args", "warning"),
    [
        (
            ("--node-selector", "pool in ( c )"),
            "--node-selector (HOLD_NODE_SELECTOR) 'pool in ( c )' matches none of the 2 nodes",
        ),
        (
            ("--trigger-selector", "karpenter.sh/nodepool"),
            "--trigger-selector (HOLD_TRIGGER_SELECTOR) 'karpenter.sh/nodepool' matches none "
            "of the 2 nodes",
        ),
        (
            ("--hold-scope", "group", "--group-label", "example.com/team"),
            "--group-label (HOLD_GROUP_LABEL) 'example.com/team' is on none of the 2 nodes",
        ),
    ],
)
def test_a_setting_that_selects_nothing_is_said_on_stderr(
    api: ApiServer, kubeconfig: Path, args: tuple[str, ...], warning: str
) -> None:
    api.add_node("old", created=api.now() - timedelta(hours=5), eks=False, labels={"pool": "a"})
    add(api, "new", 2)
    for command in ("reconcile", "status"):
        for output in ("text", "json"):
            result = run(kubeconfig, command, *args, "--output", output)
            assert result.code == 0, result.stderr
            assert warning in result.stderr, result.stderr
            assert warning not in result.stdout
    if args[0] == "--node-selector":
        assert summary(result)["notSelected"] == 2 and summary(result)["unchanged"] == 0
        assert all(KEY not in api.annotations(n) for n in ("old", "new"))


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_dry_run_says_on_every_run_how_many_holds_it_leaves_and_how_to_release_them(
    api: ApiServer, kubeconfig: Path, output: str
) -> None:
    for name in ("a", "b", "c"):
        add(api, name, 300, {KEY: "true", MARKER: KEY})
    add(api, "free", 300)
    said = (
        "dry run: 3 nodes carry hold annotations of node-holder, which a dry run never "
        "removes; release them with `node-holder release`"
    )
    for _ in range(2):
        result = run(kubeconfig, "reconcile", "--dry-run", "--output", output)
        assert result.code == 0, result.stderr
        assert said in result.stderr, result.stderr
        if output == "json":  # each node's would-be patch is its own line, as in a real run
            planned = [json.loads(line) for line in result.lines[:-1]]
            assert sorted(p["node"] for p in planned) == ["a", "b", "c"]
            assert {p["action"] for p in planned} == {"remove"}
    assert all(api.annotations(n)[KEY] == "true" for n in ("a", "b", "c"))
    assert said not in run(kubeconfig, "reconcile").stderr  # a real run removes them
    assert "dry run:" not in run(kubeconfig, "reconcile", "--dry-run").stderr


def test_the_text_words_the_json_summary_of_the_same_run(api: ApiServer, kubeconfig: Path):
    """One summary, two renderings: each text line is the JSON line's fields in words."""
    api.set_clock(api.now())  # the text and the JSON run see the same ages
    for name, pool, minutes, marks in (
        ("young", "a", 2, None),
        ("a-old", "a", 300, None),
        ("b-old", "b", 300, {KEY: "true", MARKER: KEY}),  # its hold ends in this run
        ("c-old", "c", 300, None),
    ):
        created = api.now() - timedelta(minutes=minutes)
        labels = {"karpenter.sh/nodepool": pool}
        api.add_node(name, created=created, eks=False, labels=labels, annotations=marks)
    args = ("reconcile", "--dry-run", "--hold-scope", "group")

    text, as_json = run(kubeconfig, *args), run(kubeconfig, *args, "--output", "json")

    assert text.code == as_json.code == 0, text.stderr + as_json.stderr
    data = as_json.json
    windows = {w["name"]: w for w in data["windows"]}
    held, ended = windows["karpenter.sh/nodepool=a"], windows["karpenter.sh/nodepool=b"]
    assert (held["nodePatches"], ended["nodePatches"], data["windowCount"]) == (2, 1, 3)
    assert windows["karpenter.sh/nodepool=c"]["nodePatches"] == 0
    counts = summary(as_json)
    assert text.lines[-3:] == [
        f"group {held['name']}: held: youngest node {held['youngestNode']} is "
        f"{held['youngestAge']} old, hold until {held['holdUntil']} ({held['holdLeft']} left)",
        f"group {ended['name']}: released: youngest node {ended['youngestNode']} is "
        f"{ended['youngestAge']} old, hold ended at {ended['holdUntil']}",
        f"1 of {data['windowCount']} groups held (group scope); {counts['nodes']} nodes: "
        f"{counts['added']} would be added, {counts['removed']} would be removed, "
        f"{counts['unchanged']} unchanged, 0 held by others, 0 exempt, 0 deleting",
    ]
    assert (held["holdLeft"], counts["added"], counts["removed"]) == ("18m", 2, 1)


def test_status_and_simulate_tables_share_one_helper() -> None:
    """Columns as wide as their widest cell, figures aligned right, no trailing spaces."""
    lines = table(("NAME", "NODES", ""), [("a", "3", "x"), ("long-name", "120", "")], right={1})
    assert lines == ["NAME       NODES", "a              3  x", "long-name    120"]


@pytest.mark.parametrize("where", ["flag", "nodepool"])
def test_the_summary_line_names_the_cap_that_applies_and_where_it_comes_from(
    api: ApiServer, kubeconfig: Path, where: str
) -> None:
    """A node every 10 minutes, a 30m hold capped at 1h: by --max-hold 1h, or by a NodePool's
    max-hold 1h under --max-hold 3h. While held and once released, the line and the JSON
    (`cappedBy`) name the cap and its source."""
    t0 = api.now().replace(microsecond=0)
    if where == "nodepool":
        api.add_nodepool("batch", annotations={"node-holder.dev/max-hold": "1h"})
    flag = ("--max-hold", "1h") if where == "flag" else ("--max-hold", "3h")
    hold = ("--hold-duration", "30m", *flag)
    for minute in range(0, 41, 10):
        api.set_clock(t0 + timedelta(minutes=minute))
        labels = {"karpenter.sh/nodepool": "batch"}
        api.add_node(f"n{minute}", created=api.now(), eks=False, labels=labels)
        assert run(kubeconfig, "reconcile", "--no-events", *hold).code == 0

    held, held_json = (
        run(kubeconfig, "status", *hold),
        run(kubeconfig, "status", *hold, "--output", "json"),
    )
    api.set_clock(t0 + timedelta(minutes=65))
    ended = run(kubeconfig, "reconcile", "--no-events", *hold, "--output", "json")
    after = run(kubeconfig, "status", *hold)

    (window,) = held_json.json["windows"]
    source = window["maxHoldFrom"]
    expected = "--max-hold 1h" if where == "flag" else "nodepool/batch max-hold 1h"
    assert source == ("--max-hold" if where == "flag" else "nodepool/batch"), source
    assert window["capped"] and window["cappedBy"] == expected
    until = window["holdUntil"]
    assert until == (t0 + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"capped by {expected} at {until})" in held.lines[0], held.lines[0]
    (window,) = ended.json["windows"]
    assert window["cappedBy"] == expected and not window["held"]
    assert after.lines[0].startswith(f"released: {expected} ended the hold at {until}"), after.lines
    assert all(api.annotations(f"n{m}").get(KEY) is None for m in range(0, 41, 10))


def test_status_is_a_summary_unless_asked_for_every_node(api: ApiServer, kubeconfig: Path):
    """Node scope, 30 held nodes: by default the summary lists the first windows (held first,
    at most 20 in 4 KiB of JSON) and counts the rest, in text and JSON alike; --nodes adds a
    row, or a JSON line, per node."""
    api.set_clock(api.now())  # the four runs see the same ages (a loaded machine is slow)
    for i in range(30):
        add(api, f"n{i:02}", 2)
    add(api, "old", 300, {KEY: "false"})
    scope = ("--hold-scope", "node")
    assert run(kubeconfig, "reconcile", "--no-events", *scope).code == 0

    text, as_json = (
        run(kubeconfig, "status", *scope),
        run(kubeconfig, "status", *scope, "--output", "json"),
    )
    every = run(kubeconfig, "status", *scope, "--nodes")
    lines = run(kubeconfig, "status", *scope, "--nodes", "--output", "json")

    assert {text.code, as_json.code, every.code, lines.code} == {0}
    assert (
        "nodes by state: 30 held by us, 0 held by others, 0 pinned, 1 exempt, 0 free" in text.lines
    )
    (data,) = map(json.loads, as_json.lines)
    listed, more = len(data["windows"]), data["windowsNotListed"]
    assert 0 < listed <= 20 and listed + more == 30  # as many as fit in 4 KiB of JSON
    windows = [line for line in text.lines if line.startswith("node/n")]
    assert len(windows) == listed and text.lines[-1] == f"... and {more} more windows" + (
        " (--nodes lists every window and node)"
    )
    assert not any(line.startswith("n00 ") for line in text.lines)  # no node rows
    assert data["nodeStates"]["heldByUs"] == 30 and data["nodeStates"]["exempt"] == 1
    assert "nodes" not in data and "patches" not in data
    rows = {line.split()[0] for line in every.lines if line.startswith(("n", "old "))}
    assert {f"n{i:02}" for i in range(30)} | {"old"} <= rows
    assert sum(1 for line in every.lines if line.startswith("node/n")) == 30
    assert {n["node"]: n["state"] for n in node_lines(lines)} == {
        **{f"n{i:02}": "held by us" for i in range(30)},
        "old": "exempt",
    }
    assert lines.json == data | {"now": lines.json["now"], "summary": lines.json["summary"]}


def test_node_pools_listed_counts_those_listed_metadata_only(api: ApiServer, kubeconfig: Path):
    """The annotation mechanism lists the NodePools' metadata alone (their hold settings): the
    JSON counts them all the same."""
    for name in ("a", "b", "c"):
        api.add_nodepool(name)
    add(api, "new", 2)

    result = run(kubeconfig, "reconcile", "--mechanism", "annotation", "--output", "json")

    assert result.code == 0, result.stderr
    assert result.json["nodePools"] == {"listed": 3, "withEntry": 0}
