"""The alerts: the chart's PrometheusRule (`prometheusRule.enabled`) and the kustomize component
cronjob/components/prometheus-rule, checked with the real `promtool` (Debian's prometheus:
`make prom-tools`; kubernetes-validate has no schema for PrometheusRule).

`promtool check rules` on the rendered groups, then `promtool test rules` on kube-state-metrics
series written as kube-state-metrics exports them: each alert fires on a series that should
fire it and stays silent on the ones that should not (pacing runs, a suspended and a resumed
CronJob, another CronJob's failures, a pinned node, a person's annotation, two stretches back
to back, a kube-state-metrics restart). The same scenarios run on the defaults and on other
values, whose thresholds they follow. Without promtool these tests skip in one line saying how
to install it, unless NODE_HOLDER_REQUIRE_TOOLS=1 (CI), where they fail.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import prometheus_tool
from tests.install.test_chart import HELM_LABELS, HELMS, helm_path, run_helm, template
from tests.install.test_manifests import CRONJOB_DIR, KUBECTL, needs_kubectl

ROOT = Path(__file__).resolve().parents[2]
NS = CRONJOB = "node-holder"
ENABLED = ("--set", "prometheusRule.enabled=true")
ALERTS = ["NodeHolderRunsFailing", "NodeHolderNoSuccessfulRun", "NodeHolderHeldBeyondCap"]


@pytest.fixture(params=sorted(HELMS))
def helm(request: pytest.FixtureRequest) -> str:
    """Helm 4 and Helm 3, as tests/install/test_chart.py renders with both."""
    helm_path(request.param)
    return request.param


def chart_rule(helm: str, *values: str) -> dict[str, Any]:
    """The chart's PrometheusRule, rendered with prometheusRule.enabled and `values`."""
    found = [
        o
        for o in template(helm, "default", "1.32", *ENABLED, *values)
        if o["kind"] == "PrometheusRule"
    ]
    assert len(found) == 1
    return found[0]


def kustomize_rule(tmp_path: Path) -> dict[str, Any]:
    """The component's PrometheusRule, in an overlay of the base as a user writes one."""
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(CRONJOB_DIR / "base", tmp_path)],
                "components": [
                    os.path.relpath(CRONJOB_DIR / "components" / "prometheus-rule", tmp_path)
                ],
            }
        )
    )
    proc = subprocess.run(
        [KUBECTL, "kustomize", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    found = [d for d in yaml.safe_load_all(proc.stdout) if d and d["kind"] == "PrometheusRule"]
    assert len(found) == 1
    return found[0]


def alert_names(rule: dict[str, Any]) -> list[str]:
    return [r["alert"] for group in rule["spec"]["groups"] for r in group["rules"]]


# --------------------------------------------------------------------------- the scenarios


@dataclass(frozen=True)
class Thresholds:
    """What the rendered rules were given: prometheusRule.* and holdMaxDuration."""

    failed_runs: int = 2
    no_success: int = 10  # minutes
    no_success_text: str = "10m"
    hold_for: int = 135  # minutes: the cap plus the margin
    cap_text: str = "2h"
    margin_text: str = "15m"


def values(end: int, at: Callable[[int], str | None]) -> str:
    """A series from minute 0 to `end`, one sample a minute: at(minute), or none where it gives
    None; a series that goes away gets a staleness marker, as Prometheus records it."""
    tokens, before = [], None
    for minute in range(end + 1):
        now = at(minute)
        tokens.append(now if now is not None else ("stale" if before is not None else "_"))
        before = now
    return " ".join(tokens)


def between(start: int, stop: int, value: str = "1") -> Callable[[int], str | None]:
    return lambda m: value if start <= m < stop else None


def series(name: str, labels: dict[str, str], end: int, at: Callable[[int], str | None]) -> dict:
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{text}}}", "values": values(end, at)}


def job(
    name: str,
    end: int,
    at: Callable,
    *,
    failed: bool,
    ns: str = NS,
    owner: str = CRONJOB,
    failed_pods: int | None = None,
):
    """The series kube-state-metrics exports for one Job while `at` says it exists: its owner
    and, failed, the Failed condition; succeeded (a run that exits 0, pacing or not), Complete.
    `failed_pods`: pods that failed on the way (an evicted pod the Job ignored and replaced)."""
    pods = str(failed_pods if failed_pods is not None else int(failed))
    kind = "CronJob" if owner != "<none>" else "<none>"
    job_labels = {"namespace": ns, "job_name": name}
    owner_labels = {**job_labels, "owner_kind": kind, "owner_name": owner}
    out = [series("kube_job_owner", {**owner_labels, "owner_is_controller": "true"}, end, at)]
    condition = "kube_job_failed" if failed else "kube_job_complete"
    for status in ("true", "false", "unknown"):
        flag = "1" if status == "true" else "0"
        out.append(
            series(
                condition,
                {**job_labels, "condition": status},
                end,
                lambda m, f=flag: f if at(m) else None,
            )
        )
    reason = {"reason": "BackoffLimitExceeded"} if failed else {}
    out.append(
        series(
            "kube_job_status_failed",
            {**job_labels, **reason},
            end,
            lambda m: pods if at(m) else None,
        )
    )
    out.append(
        series(
            "kube_job_status_succeeded",
            job_labels,
            end,
            lambda m: ("0" if failed else "1") if at(m) else None,
        )
    )
    return out


def alert(name: str, at: int, *expected: dict[str, Any]) -> dict[str, Any]:
    return {"eval_time": f"{at}m", "alertname": name, "exp_alerts": list(expected)}


def humanize_duration(seconds: int) -> str:
    """Prometheus' humanizeDuration for whole seconds of at least a minute."""
    d, rest = divmod(seconds, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    if d:
        return f"{d}d {h}h {m}m {s}s"
    return f"{h}h {m}m {s}s" if h else f"{m}m {s}s"


def runs_failing(t: Thresholds) -> dict[str, Any]:
    """failed_runs failed Jobs of this CronJob, ten minutes apart; the first is deleted
    (ttlSecondsAfterFinished) later. Around them: pacing runs that succeeded, one after an
    evicted pod (a failed pod, not a failed Job), and failures that are not this CronJob's
    (another CronJob, the uninstall hook's Job, another namespace)."""
    last = 10 * t.failed_runs
    end = last + 40
    input_series = []
    for i in range(1, t.failed_runs + 1):
        gone = last + 30 if i == 1 else end + 1
        input_series += job(f"node-holder-{i}", end, between(10 * i, gone), failed=True)
    for i in range(5):
        input_series += job(f"node-holder-pacing-{i}", end, between(0, end + 1), failed=False)
    # A run whose first pod was evicted (podFailurePolicy Ignore) and whose second succeeded.
    input_series += job(
        "node-holder-evicted", end, between(0, end + 1), failed=False, failed_pods=1
    )
    for i in range(t.failed_runs + 1):
        input_series += job(f"other-{i}", end, between(0, end + 1), failed=True, owner="other")
        input_series += job(f"nh-{i}", end, between(0, end + 1), failed=True, ns="other-ns")
    input_series += job(
        "node-holder-uninstall", end, between(0, end + 1), failed=True, owner="<none>"
    )
    fired = {
        "exp_labels": {"severity": "warning", "namespace": NS, "owner_name": CRONJOB},
        "exp_annotations": {
            "summary": "node-holder runs are failing",
            "description": f"{t.failed_runs} Jobs of CronJob {NS}/{CRONJOB} failed recently. "
            "`kubectl logs` of a failed Job: its last line names the bad setting (exit 2) or "
            "the refused request (exit 1).",
        },
    }
    name = "NodeHolderRunsFailing"
    return {
        "interval": "1m",
        "input_series": input_series,
        "alert_rule_test": [
            alert(name, last - 5),  # one failure fewer
            alert(name, last + 1, fired),
            alert(name, last + 35),  # the first failed Job is gone
        ],
    }


def no_successful_run(t: Thresholds) -> list[dict[str, Any]]:
    """Three CronJobs' histories, one test group each: pacing runs that succeed every minute
    until minute 20, then none; suspended (last success at minute 0) and resumed; created and
    never successful, beside another CronJob of the namespace that never succeeds either."""
    n = t.no_success
    name = "NodeHolderNoSuccessfulRun"
    cron = {"namespace": NS, "cronjob": CRONJOB}

    def fired(seconds: int) -> dict[str, Any]:
        return {
            "exp_labels": {"severity": "warning", **cron},
            "exp_annotations": {
                "summary": f"node-holder has not completed a run for {t.no_success_text}",
                "description": f"CronJob {NS}/{CRONJOB} has had no successful run for "
                f"{humanize_duration(seconds)}: holds are neither started nor ended. "
                f"`kubectl get jobs,pods -n {NS}` shows why.",
            },
        }

    end = 20 + n + 5
    pacing = [
        series("kube_cronjob_created", cron, end, lambda m: "0"),
        series("kube_cronjob_spec_suspend", cron, end, lambda m: "0"),
        series(
            "kube_cronjob_status_last_successful_time", cron, end, lambda m: str(60 * min(m, 20))
        ),
    ]
    resume = 2 * n + 10
    end_suspended = resume + n + 5
    suspended = [
        series("kube_cronjob_created", cron, end_suspended, lambda m: "0"),
        series("kube_cronjob_status_last_successful_time", cron, end_suspended, lambda m: "0"),
        series(
            "kube_cronjob_spec_suspend", cron, end_suspended, lambda m: "1" if m < resume else "0"
        ),
    ]
    other = {"namespace": NS, "cronjob": "other"}
    never = [
        series("kube_cronjob_created", cron, n + 5, lambda m: "0"),
        series("kube_cronjob_spec_suspend", cron, n + 5, lambda m: "0"),
        series("kube_cronjob_created", other, n + 5, lambda m: "0"),
        series("kube_cronjob_spec_suspend", other, n + 5, lambda m: "0"),
    ]
    return [
        {
            "interval": "1m",
            "input_series": pacing,
            "alert_rule_test": [
                alert(name, 15),
                alert(name, 20 + n - 1),
                alert(name, 20 + n + 1, fired(60 * (n + 1))),
            ],
        },
        {
            "interval": "1m",
            "input_series": suspended,
            "alert_rule_test": [
                alert(name, resume - 1),
                alert(name, resume + n - 2),  # resumed less than noSuccessFor ago
                alert(name, resume + n + 1, fired(60 * (resume + n + 1))),
            ],
        },
        {
            "interval": "1m",
            "input_series": never,
            "alert_rule_test": [alert(name, n - 1), alert(name, n + 1, fired(60 * (n + 1)))],
        },
    ]


OWNED = "annotation_node_holder_dev_owned_annotations"
STARTED = "annotation_node_holder_dev_hold_started"


def held_beyond_cap(t: Thresholds) -> dict[str, Any]:
    """kube_node_annotations with node-holder's keys allow-listed. node-a is held past the
    cap, then released (kube-state-metrics restarts under it: another instance label); node-b
    has two stretches back to back, each shorter than the cap; node-c was held, then pinned
    (the marker keeps its claim, no run stamps it);
    node-d carries a person's annotation; node-e a claim without a cap (an uncapped NodePool, a
    kept key); node-f is in a free period; node-g has a stamp without the marker (a person
    copied it, say into a NodePool's template)."""
    end = t.hold_for + 30
    marker = {OWNED: "karpenter.sh/do-not-disrupt"}

    def node(name: str, at: Callable, instance: str = "ksm-0", **annotations: str) -> dict:
        labels = {"instance": instance, "job": "kube-state-metrics", "node": name}
        return series("kube_node_annotations", {**labels, **annotations}, end, at)

    first, second = "2026-11-27T01:00:00Z", "2026-11-27T03:15:00Z"
    split = t.hold_for - 10
    input_series = [
        node("node-a", between(0, 60), **marker, **{STARTED: first}),
        node("node-a", between(60, t.hold_for + 20), "ksm-1", **marker, **{STARTED: first}),
        node("node-b", between(0, split), **marker, **{STARTED: first}),
        node("node-b", between(split, end + 1), **marker, **{STARTED: second}),
        node("node-c", between(0, 30), **marker, **{STARTED: first}),
        node("node-c", between(30, end + 1), **marker),
        node("node-d", between(0, end + 1), annotation_karpenter_sh_do_not_disrupt="true"),
        node("node-e", between(0, end + 1), **marker),
        node("node-f", between(0, end + 1), annotation_node_holder_dev_free_until=second),
        node("node-g", between(0, end + 1), **{STARTED: first}),
    ]
    fired = {
        "exp_labels": {"severity": "warning", "node": "node-a", STARTED: first},
        "exp_annotations": {
            "summary": f"a node is held longer than holdMaxDuration ({t.cap_text})",
            "description": f"Node node-a has carried node-holder's hold (stretch started {first}) "
            f"for more than {t.cap_text} plus {t.margin_text}. A NodePool with a longer "
            "node-holder.dev/max-hold of its own also fires it (raise prometheusRule.capMargin); "
            "otherwise `node-holder status` says why.",
        },
    }
    name = "NodeHolderHeldBeyondCap"
    held, stretches = panel_queries()
    later = t.hold_for - 5  # node-b's second stretch; node-c pinned
    return {
        "interval": "1m",
        "input_series": input_series,
        "alert_rule_test": [
            alert(name, t.hold_for - 2),
            alert(name, t.hold_for + 2, fired),
            alert(name, end),  # node-a released
        ],
        "promql_expr_test": [
            {"expr": held, "eval_time": "10m", "exp_samples": [{"labels": "{}", "value": 4}]},
            {"expr": held, "eval_time": f"{later}m", "exp_samples": [{"labels": "{}", "value": 4}]},
            {"expr": held, "eval_time": f"{end}m", "exp_samples": [{"labels": "{}", "value": 3}]},
            {
                "expr": stretches,
                "eval_time": "10m",
                "exp_samples": [{"labels": f'{{{STARTED}="{first}"}}', "value": 3}],
            },
            {
                "expr": stretches,
                "eval_time": f"{later}m",
                "exp_samples": [
                    {"labels": f'{{{STARTED}="{first}"}}', "value": 1},
                    {"labels": f'{{{STARTED}="{second}"}}', "value": 1},
                ],
            },
        ],
    }


def panel_queries() -> list[str]:
    """The Grafana panel's queries, as docs/operations-notes.md gives them."""
    notes = (ROOT / "docs" / "operations-notes.md").read_text().split("\n## Alerts\n", 1)[1]
    return re.findall(r"```promql\n(.*?)```", notes, flags=re.DOTALL)


def check_and_test(tmp_path: Path, rule: dict[str, Any], t: Thresholds) -> None:
    """`promtool check rules`, then `promtool test rules` with every scenario; each run's
    output in the assertion message."""
    tool = prometheus_tool("promtool")
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    checked = subprocess.run(
        [tool, "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(alert_names(rule))} rules found" in checked.stdout
    tests = [runs_failing(t), *no_successful_run(t), held_beyond_cap(t)]
    unit = tmp_path / "alerts_test.yaml"
    unit.write_text(
        yaml.safe_dump(
            {"rule_files": [rules.name], "evaluation_interval": "1m", "tests": tests},
            sort_keys=False,
            width=1 << 20,
        )
    )
    tested = subprocess.run(
        [tool, "test", "rules", str(unit)], capture_output=True, text=True, check=False
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


# --------------------------------------------------------------------------- the tests

OTHER_VALUES = (
    "--set",
    "holdMaxDuration=90m",
    "--set",
    "prometheusRule.capMargin=5m",
    "--set",
    "prometheusRule.failedRuns=1",
    "--set",
    "prometheusRule.noSuccessFor=15m",
)
OTHER = Thresholds(
    failed_runs=1,
    no_success=15,
    no_success_text="15m",
    hold_for=95,
    cap_text="90m",
    margin_text="5m",
)


@pytest.mark.parametrize(
    ("extra", "thresholds"), [((), Thresholds()), (OTHER_VALUES, OTHER)], ids=["defaults", "other"]
)
def test_the_charts_alerts_fire_exactly_when_they_should(helm, tmp_path, extra, thresholds):
    rule = chart_rule(helm, *extra)
    assert alert_names(rule) == ALERTS
    check_and_test(tmp_path, rule, thresholds)


@needs_kubectl
def test_the_kustomize_components_alerts_fire_exactly_when_they_should(tmp_path):
    (tmp_path / "overlay").mkdir()
    rule = kustomize_rule(tmp_path / "overlay")
    check_and_test(tmp_path, rule, Thresholds())


@needs_kubectl
def test_the_component_is_the_charts_rule_with_the_defaults(helm, tmp_path):
    chart = chart_rule(helm)
    for key in HELM_LABELS:
        chart["metadata"]["labels"].pop(key)
    assert kustomize_rule(tmp_path) == chart


def test_off_by_default_and_labelled_for_the_rule_selector(helm):
    assert not [o for o in template(helm) if o["kind"] == "PrometheusRule"]
    rule = chart_rule(helm, "--set", "prometheusRule.labels.release=kube-prometheus-stack")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert rule["metadata"]["namespace"] == NS


@pytest.mark.parametrize(
    ("values", "alerts", "wait"),
    [
        (("--set", "holdMaxDuration="), ALERTS[:2], None),  # no cap: nothing to alert on
        (("--set", "mechanism=budget"), ALERTS[:2], None),  # no node carries a hold or a stamp
        (("--set", "mechanism=auto"), ALERTS, "2h15m"),
        (
            ("--set", "holdMaxDuration=1.5H", "--set", "prometheusRule.capMargin=1h2m3s"),
            ALERTS,
            "2h32m3s",
        ),
    ],
    ids=["no-cap", "budget", "auto", "fraction-cap"],
)
def test_the_cap_alert_only_where_a_cap_applies_to_node_holds(helm, values, alerts, wait):
    rule = chart_rule(helm, *values)
    assert alert_names(rule) == alerts
    if wait:
        assert rule["spec"]["groups"][0]["rules"][2]["for"] == wait


def test_the_rules_scope_to_this_releases_cronjob(helm):
    rule = chart_rule(helm, "--namespace", "ops", "--set", "fullnameOverride=holder")
    runs, success, _ = rule["spec"]["groups"][0]["rules"]
    assert 'owner_name="holder"' in runs["expr"] and 'namespace="ops"' in runs["expr"]
    assert success["expr"].count('{namespace="ops", cronjob="holder"}') == 3


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            ("--set", "prometheusRule.noSuccessFor=10 minutes"),
            "prometheusRule.noSuccessFor: '10 minutes' is not a duration of hours, minutes and "
            "seconds as Prometheus writes them; use e.g. 15m or 1h30m",
        ),
        (
            ("--set", "prometheusRule.noSuccessFor=1m"),
            "prometheusRule.noSuccessFor: 1m is not longer than the schedule's interval (60s: "
            "schedule '* * * * *'), so it would fire between two good runs; use a longer duration",
        ),
        (
            ("--set", "prometheusRule.failedRuns=4"),
            "prometheusRule.failedRuns: 4 can never fire, only failedJobsHistoryLimit=3 failed "
            "Jobs are kept; raise failedJobsHistoryLimit to at least 4, or lower failedRuns",
        ),
        (
            ("--set", "holdMaxDuration=", "--set-string", "prometheusRule.capMargin=15"),
            "prometheusRule.capMargin: '15' is not a duration",
        ),
    ],
    ids=["not-a-duration", "within-the-interval", "more-than-kept", "no-unit"],
)
def test_bad_alert_values_fail_at_install_time(helm, values, message):
    proc = run_helm(
        helm,
        "template",
        "x",
        str(ROOT / "charts" / "karpenter-node-holder"),
        *ENABLED,
        *values,
        check=False,
    )
    assert proc.returncode != 0
    assert message in proc.stderr


def test_the_documented_allowlist_exports_every_annotation_the_rules_and_panel_read(helm):
    """kube-state-metrics names a label `annotation_` + the key with every character outside
    [a-zA-Z0-9_] made `_`; the rules and the panel query read only keys the docs allow-list."""
    notes = (ROOT / "docs" / "operations-notes.md").read_text()
    (listed,) = set(re.findall(r"--metric-annotations-allowlist=nodes=\[([^\]]+)\]", notes))
    exported = {"annotation_" + re.sub(r"[^a-zA-Z0-9_]", "_", key) for key in listed.split(",")}
    read = set(re.findall(r"annotation_\w+", yaml.safe_dump(chart_rule(helm)["spec"])))
    assert read and read <= exported
    assert set(re.findall(r"annotation_\w+", "".join(panel_queries()))) <= exported
    readme = (ROOT / "README.md").read_text()
    assert "--set prometheusRule.enabled=true" in readme
