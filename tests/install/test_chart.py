"""The Helm chart in charts/karpenter-node-holder, rendered by the pinned Helm 4 and Helm 3.

`make tools` installs both binaries (hashes checked) into .venv/tools; without them these tests
skip, unless NODE_HOLDER_REQUIRE_TOOLS=1 (what `make test` sets), where they fail.

The chart and the kustomize base are one install: a render with the defaults, and one with
`ci/<overlay>-values.yaml` per `cronjob/overlays/<overlay>`, must give the same objects as
`kubectl kustomize` (Helm's own labels and hooks set aside). Every property test_manifests.py
asserts of the kustomize output is asserted here of the chart's renders too.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

import reconcile
from tests.install.test_manifests import (
    KARPENTER_NODE_LABELS,
    OVERLAYS,
    cli_envvars,
    needs_kubectl,
    pss_restricted_violations,
    settings_of,
)
from tests.install.test_manifests import (
    render as kustomize,
)

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "karpenter-node-holder"
CI = CHART / "ci"
TOOLS = ROOT / ".venv" / "tools"
HELMS = {"helm4": TOOLS / "helm4", "helm3": TOOLS / "helm3"}
REQUIRE = os.environ.get("NODE_HOLDER_REQUIRE_TOOLS") == "1"
RELEASE = NAMESPACE = "node-holder"
IMAGE = f"ghcr.io/karpenter-node-holder/karpenter-node-holder:{reconcile.__version__}"
HELM_LABELS = {
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
}
# The oldest Kubernetes the chart supports (CronJob timeZone GA), the kubectl here, the newest.
KUBE_VERSIONS = ["1.27", "1.32", ".".join(kubernetes_validate.latest_version().split(".")[:2])]
# Every values set the chart is tested with: the defaults, and one file per overlay.
VALUES_SETS = ["default", *OVERLAYS]


def helm_path(helm: str) -> Path:
    path = HELMS[helm]
    if not path.exists():
        if REQUIRE:
            pytest.fail(f"{path} is missing: make tools")
        pytest.skip(f"{path} is missing: make tools")
    return path


@pytest.fixture(params=sorted(HELMS))
def helm(request: pytest.FixtureRequest) -> str:
    helm_path(request.param)
    return request.param


def values_file(name: str) -> Path | None:
    if name == "default":
        return None
    return CI / f"{name}-values.yaml"


def run_helm(helm: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(helm_path(helm)), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "HELM_CACHE_HOME": "/tmp/helm-cache", "HELM_CONFIG_HOME": "/tmp/helm"},
    )
    if check:
        assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stderr}"
    return proc


@functools.cache
def _template(helm: str, values: str, kube: str, extra: tuple[str, ...]) -> str:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version", kube]
    file = values_file(values)
    if file is not None:
        assert file.is_file(), f"cronjob/overlays/{values} has no {file.relative_to(ROOT)}"
        args += ["--values", str(file)]
    return run_helm(helm, *args, *extra).stdout


def template(
    helm: str, values: str = "default", kube: str = "1.32", *extra: str
) -> list[dict[str, Any]]:
    """The objects `helm install` would create (hooks and test pod included), a fresh copy."""
    return [doc for doc in yaml.safe_load_all(_template(helm, values, kube, extra)) if doc]


def is_hook(obj: dict[str, Any]) -> bool:
    return "helm.sh/hook" in (obj["metadata"].get("annotations") or {})


def installed(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if not is_hook(o)]


def one(objs: list[dict[str, Any]], kind: str, hook: str | None = None) -> dict[str, Any]:
    found = [
        o
        for o in objs
        if o["kind"] == kind
        and (o["metadata"].get("annotations") or {}).get("helm.sh/hook") == hook
    ]
    assert len(found) == 1, f"expected one {kind} (hook {hook}), got {len(found)}"
    return found[0]


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    if obj["kind"] == "Job":
        return obj["spec"]["template"]["spec"]
    return obj["spec"]


def pods(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every pod spec the chart makes: the runs, the uninstall hook, the helm test."""
    return [pod_spec(o) for o in objs if o["kind"] in ("CronJob", "Job", "Pod")]


def env_of(objs: list[dict[str, Any]], spec: dict[str, Any]) -> dict[str, str]:
    """A pod's environment: the settings ConfigMap it reads whole, then its own `env`."""
    return settings_of(objs, spec)


# --------------------------------------------------------------------------- lint, schema


def test_lint_strict(helm):
    run_helm(helm, "lint", "--strict", str(CHART))
    for name in VALUES_SETS[1:]:
        run_helm(helm, "lint", "--strict", str(CHART), "--values", str(values_file(name)))


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
@pytest.mark.parametrize("values", VALUES_SETS)
def test_every_object_validates_strictly(helm, values, kube):
    objs = template(helm, values, kube)
    for obj in objs:
        kubernetes_validate.validate(obj, kube, strict=True)
    policy = [o for o in objs if o["kind"].startswith("ValidatingAdmissionPolicy")]
    expected = 2 if kube != "1.27" and values != "without-admission-policy" else 0
    expected *= 2 if values == "budget-mechanism" else 1  # and the NodePool policy
    assert len(policy) == expected, "the admission policy needs 1.30 (admissionregistration/v1)"


def test_every_overlay_has_a_values_file_and_no_file_is_stray():
    files = {p.name.removesuffix("-values.yaml") for p in CI.glob("*-values.yaml")}
    assert files == set(OVERLAYS), "one ci/<overlay>-values.yaml per cronjob/overlays/<overlay>"


# --------------------------------------------------------------------------- kustomize parity


def _comparable(objs: list[dict[str, Any]], *, chart: bool) -> list[dict[str, Any]]:
    """Helm's own labels and hooks set aside."""
    out = []
    for obj in copy.deepcopy(objs):
        if chart and is_hook(obj):
            continue
        if not chart and obj["kind"] == "Namespace":
            continue  # Helm charts don't own their namespace: docs/install.md
        _strip_labels(obj)
        out.append(obj)
    return sorted(out, key=lambda o: (o["kind"], o["metadata"]["name"]))


def _strip_labels(node: Any) -> None:
    if isinstance(node, dict):
        labels = node.get("labels")
        if isinstance(labels, dict):
            for key in HELM_LABELS:
                labels.pop(key, None)
        for value in node.values():
            _strip_labels(value)
    elif isinstance(node, list):
        for value in node:
            _strip_labels(value)


@needs_kubectl
@pytest.mark.parametrize("values", VALUES_SETS)
def test_chart_renders_what_kustomize_builds(helm, values):
    target = "base" if values == "default" else f"overlays/{values}"
    chart = _comparable(template(helm, values, "1.32"), chart=True)
    base = _comparable(kustomize(target), chart=False)
    assert [(o["kind"], o["metadata"]["name"]) for o in chart] == [
        (o["kind"], o["metadata"]["name"]) for o in base
    ]
    for ours, theirs in zip(chart, base, strict=True):
        assert ours == theirs, f"{ours['kind']} {ours['metadata']['name']} differs"


def test_helm_4_and_helm_3_render_the_same(helm):
    for values in VALUES_SETS:
        assert template("helm4", values) == template("helm3", values), values


# --------------------------------------------------------------------------- properties


@pytest.mark.parametrize("values", VALUES_SETS)
def test_every_pod_passes_pss_restricted_and_runs_the_image(helm, values):
    objs = template(helm, values)
    assert len(pods(objs)) == 3
    for spec in pods(objs):
        assert pss_restricted_violations(spec) == []
        (container,) = spec["containers"]
        assert container["image"] == IMAGE
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert "command" not in container, "the image's ENTRYPOINT stays in charge"
        assert spec["automountServiceAccountToken"] is True


@pytest.mark.parametrize("values", VALUES_SETS)
def test_every_env_var_is_one_the_cli_reads_with_a_value_it_accepts(helm, values, monkeypatch):
    from reconcile.cli import cli  # noqa: PLC0415

    known = cli_envvars()
    objs = template(helm, values)
    for spec in pods(objs):
        env = env_of(objs, spec)
        assert sorted(set(env) - set(known)) == []
        command = cli.commands[spec["containers"][0]["args"][0]]
        for name in known:
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        with command.make_context(command.name, list(spec["containers"][0]["args"][1:])):
            pass  # click parsed every variable the command reads


@pytest.mark.parametrize("values", VALUES_SETS)
def test_rbac_is_least_privilege_and_bound_to_the_runs(helm, values):
    objs = installed(template(helm, values))
    base = kustomize("base" if values == "default" else f"overlays/{values}")
    for kind in ("ClusterRole", "Role"):
        assert one(objs, kind)["rules"] == one(base, kind)["rules"]
    sa = one(objs, "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False
    subject = {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NAMESPACE}
    assert one(objs, "ClusterRoleBinding")["subjects"] == [subject]
    assert one(objs, "RoleBinding")["subjects"] == [subject]
    assert pod_spec(one(objs, "CronJob"))["serviceAccountName"] == subject["name"]


def test_the_uninstall_hook_is_scoped_and_exists_only_while_it_runs(helm):
    objs = template(helm)
    hooks = [o for o in objs if (o["metadata"].get("annotations") or {}).get("helm.sh/hook")]
    by_kind = {o["kind"]: o for o in hooks if o["metadata"]["annotations"]["helm.sh/hook"]}
    assert sorted(o["kind"] for o in hooks) == sorted(
        ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Job", "Pod"]
    )
    cronjob = one(objs, "CronJob")
    name = cronjob["metadata"]["name"]
    for obj in hooks:
        annotations = obj["metadata"]["annotations"]
        if obj["kind"] == "Pod":
            assert annotations["helm.sh/hook"] == "test"
            continue
        assert annotations["helm.sh/hook"] == "pre-delete"
        policy = set(annotations["helm.sh/hook-delete-policy"].split(","))
        assert {"before-hook-creation", "hook-succeeded"} <= policy
        if obj["kind"] != "Job":
            assert "hook-failed" in policy, "the hook's RBAC never outlives it"
            assert int(annotations["helm.sh/hook-weight"]) < 0, "RBAC exists before the Job"
    assert by_kind["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}
    ]
    assert by_kind["Role"]["metadata"]["namespace"] == NAMESPACE
    assert by_kind["Role"]["rules"] == [
        {
            "apiGroups": ["batch"],
            "resources": ["cronjobs"],
            "resourceNames": [name],
            "verbs": ["get", "patch"],
        },
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list"]},
    ]
    job = by_kind["Job"]
    spec = pod_spec(job)
    assert spec["serviceAccountName"] == by_kind["ServiceAccount"]["metadata"]["name"]
    for binding in ("ClusterRoleBinding", "RoleBinding"):
        assert by_kind[binding]["subjects"][0]["name"] == spec["serviceAccountName"]
    args = spec["containers"][0]["args"]
    assert args == ["release", "--no-events", "--suspend-cronjob", f"{NAMESPACE}/{name}"]
    assert (
        env_of(objs, spec)["HOLD_ANNOTATION"] == env_of(objs, pod_spec(cronjob))["HOLD_ANNOTATION"]
    )
    # Long enough for the wait (the run's deadline and grace) and the release's own timeout.
    run = cronjob["spec"]["jobTemplate"]["spec"]
    assert job["spec"]["activeDeadlineSeconds"] > run["activeDeadlineSeconds"] + 5 + 10 + 45


def test_argo_cd_runs_the_uninstall_hook_as_predelete_and_its_rbac_outlives_the_job(helm):
    """Argo CD (v3.3+) maps `pre-delete` to PreDelete, but an `argocd.argoproj.io/hook` on an
    object replaces that object's `helm.sh/hook`, and its `HookSucceeded` on passive
    objects may come at another point than Helm's: every one of the six objects says PreDelete
    itself, the Job goes once it succeeded, the ServiceAccount and RBAC only before a new one is
    created (never while the Job runs). Helm's own annotations stay as they are."""
    objs = template(helm)
    hooks = [o for o in objs if (o["metadata"].get("annotations") or {}).get("helm.sh/hook")]
    uninstall = [o for o in hooks if o["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"]
    assert sorted(o["kind"] for o in uninstall) == sorted(
        ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Job"]
    )
    for obj in uninstall:
        annotations = obj["metadata"]["annotations"]
        assert annotations["argocd.argoproj.io/hook"] == "PreDelete", obj["kind"]
        expected = "HookSucceeded" if obj["kind"] == "Job" else "BeforeHookCreation"
        assert annotations["argocd.argoproj.io/hook-delete-policy"] == expected, obj["kind"]
    # Only the uninstall hook is Argo CD's: the `helm test` pod and the release's own objects
    # carry no Argo CD hook annotation (they would become hooks and never be applied).
    assert [
        o["kind"]
        for o in objs
        if "argocd.argoproj.io/hook" in (o["metadata"].get("annotations") or {})
    ] == [o["kind"] for o in uninstall]


def test_helm_test_runs_status_with_the_runs_service_account(helm):
    objs = template(helm)
    pod = one(objs, "Pod", hook="test")
    assert pod["spec"]["containers"][0]["args"] == ["status"]
    assert pod["spec"]["serviceAccountName"] == pod_spec(one(objs, "CronJob"))["serviceAccountName"]


def test_uninstall_hook_can_be_turned_off(helm):
    objs = template(helm, "default", "1.32", "--set", "uninstall.releaseHolds=false")
    assert [o["kind"] for o in objs if is_hook(o)] == ["Pod"]


# --------------------------------------------------------------------------- values


def cronjob_env(helm: str, *extra: str) -> dict[str, str]:
    objs = template(helm, "default", "1.32", *extra)
    return env_of(objs, pod_spec(one(objs, "CronJob")))


def test_original_charts_bare_minutes_keep_working(helm):
    env = cronjob_env(helm, "--set", "holdDuration=20", "--set", "holdAnnotation=x.io/hold")
    assert env["HOLD_DURATION"] == "20"  # the CLI reads a bare number as minutes
    assert env["HOLD_ANNOTATION"] == "x.io/hold"


def test_settings_map_sets_the_other_knobs_as_the_verdict_test_assumes(helm):
    """The text each value becomes is what test_chart_schema.as_text says."""
    from tests.install.test_chart_schema import as_text as helm_text  # noqa: PLC0415

    chosen = {
        "NODE_HOLDER_QPS": 0.5,
        "NODE_HOLDER_WORKERS": 16.0,
        "NODE_HOLDER_VERBOSE": -0.0,
        "NODE_HOLDER_REQUEST_TIMEOUT": "5s",
        "NODE_HOLDER_PAGE_SIZE": "250",
    }
    env = cronjob_env(helm, "--set-json", "settings=" + json.dumps(chosen), "--set", "dryRun=true")
    assert {k: env[k] for k in chosen} == {k: helm_text(v) for k, v in chosen.items()}
    assert env["NODE_HOLDER_QPS"] == "0.5" and env["NODE_HOLDER_VERBOSE"] == "0"
    assert env["NODE_HOLDER_DRY_RUN"] == helm_text(True) == "true"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "bogus=1"], "additional properties 'bogus' not allowed"),
        # A duration's syntax: the schema's pattern (the CLI's own), in Helm's words.
        (["--set", "holdDuration=20 mins"], "at '/holdDuration': '20 mins' does not match pattern"),
        (["--set", "timeout=PT45S"], "at '/timeout': 'PT45S' does not match pattern"),
        (["--set", "holdDuration=8d"], "holdDuration (HOLD_DURATION): '8d' is longer than 7d"),
        (["--set", "holdDuration=0"], "holdDuration (HOLD_DURATION): '0' is not a positive"),
        (["--set", "holdScope=everything"], "holdScope (HOLD_SCOPE): 'everything' is not one of"),
        (["--set", "holdAnnotation=node-holder.dev/mine"], "names 'node-holder.dev/mine', one"),
        (["--set", "holdNodeSelector=a b"], "'a b' is not a label selector"),
        (["--set", "settings.HOLD_DURATION=20m"], "additional properties 'HOLD_DURATION'"),
        (["--set", "settings.NODE_HOLDER_WORKERS=0"], "settings.NODE_HOLDER_WORKERS: '0' is out"),
        (["--set", "image.tag=a b"], "/image"),
        (["--set", "startingDeadlineSeconds=5"], "/startingDeadlineSeconds"),
        (["--set", "image=ghcr.io/x/y:1"], "image.repository and image.tag"),
        (["--set", "serviceAccount.create=false"], "serviceAccount.name"),
        (["--set", "mechanism=budgets"], "mechanism (NODE_HOLDER_MECHANISM): 'budgets' is not"),
        # The CLI's check_mechanism, in the values' names: a budget holds whole NodePools.
        (
            ["--set", "mechanism=budget", "--set", "holdScope=node"],
            "mechanism (NODE_HOLDER_MECHANISM) budget: holdScope (HOLD_SCOPE) node holds less "
            "than a whole NodePool",
        ),
        (
            ["--set", "mechanism=auto", "--set", "holdScope=group", "--set", "holdGroupLabel=x"],
            "auto: holdGroupLabel (HOLD_GROUP_LABEL) x holds less",
        ),
        (
            ["--set", "mechanism=Budget", "--set", "holdNodeSelector=team=a"],
            "budget: holdNodeSelector (HOLD_NODE_SELECTOR) 'team=a' holds less",
        ),
    ],
)
def test_bad_values_fail_at_install_time_with_a_message(helm, args, message):
    proc = run_helm(helm, "template", RELEASE, str(CHART), *args, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr


def test_an_empty_affinity_does_not_remove_the_default_but_null_does(helm):
    """Helm merges maps: `affinity: {}` keeps the default, `null` deletes it (docs)."""
    empty = pod_spec(one(template(helm, "default", "1.32", "--set-json", "affinity={}"), "CronJob"))
    assert empty["affinity"]["nodeAffinity"]
    gone = pod_spec(one(template(helm, "karpenter-only-cluster"), "CronJob"))
    assert "affinity" not in gone
    terms = empty["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    keys = {e["key"] for e in terms["nodeSelectorTerms"][0]["matchExpressions"]}
    assert keys == set(KARPENTER_NODE_LABELS)


def test_digest_wins_over_tag_and_names_follow_the_release(helm):
    digest = "sha256:" + "a" * 64
    objs = template(helm, "default", "1.32", "--set", f"image.digest={digest}")
    image = pod_spec(one(objs, "CronJob"))["containers"][0]["image"]
    assert image == f"ghcr.io/karpenter-node-holder/karpenter-node-holder@{digest}"
    other = run_helm(helm, "template", "batch", str(CHART), "-n", "ops").stdout
    cronjob = next(o for o in yaml.safe_load_all(other) if o and o["kind"] == "CronJob")
    assert cronjob["metadata"]["name"] == "batch-node-holder"
    policy = next(o for o in yaml.safe_load_all(other) if o and o["kind"] == "ConfigMap")
    assert policy["metadata"]["namespace"] == "ops"
    assert "system:serviceaccount:ops:batch-node-holder" in other


# --------------------------------------------------------------------------- NOTES


def notes(*args: str) -> str:
    """NOTES.txt as `helm install` prints it. Helm 4 only: Helm 3's `install --dry-run=client`
    still asks a cluster for its OpenAPI document, and `helm template` leaves NOTES out."""
    helm = "helm4"
    proc = run_helm(
        helm, "install", RELEASE, str(CHART), "-n", NAMESPACE, "--dry-run=client", *args
    )
    return proc.stdout.split("NOTES:", 1)[1]


def test_notes_say_what_runs_and_how_to_run_status_and_uninstall():
    text = notes()
    for needle in (
        "CronJob node-holder/node-holder",
        "kubectl create job --from=cronjob/node-holder",
        "helm test node-holder",
        "helm uninstall node-holder",
        "karpenter\\.sh/do-not-disrupt",
    ):
        assert needle in text, needle
    assert "DRY RUN" not in text and "initialDelay" not in text


def test_notes_warn_about_dry_run_and_the_ignored_initial_delay():
    text = notes("--set", "dryRun=true", "--set", "initialDelay=30s")
    assert text.lstrip().startswith("*** DRY RUN")
    assert "helm uninstall still releases every hold" in text
    assert "WARNING: initialDelay=30s is ignored" in text
    assert "DRY RUN" in notes("--set-string", "dryRun=yes"), "as the CLI reads it"
    assert "DRY RUN" not in notes("--set-string", "dryRun=off")


@needs_kubectl
def test_notes_one_off_command_runs_with_the_cronjobs_settings_and_account(tmp_path):
    """The printed `kubectl run` makes a pod that reads the same ConfigMap with
    the same ServiceAccount and placement as the CronJob, for a release of any name. kubectl
    itself builds the pod (a client-side dry run against the API test server)."""
    import shlex  # noqa: PLC0415
    import shutil  # noqa: PLC0415

    from tests.kubeapi.apiserver import ApiServer  # noqa: PLC0415

    args = ["-n", "ops", "--dry-run=client"]
    proc = run_helm("helm4", "install", "batch", str(CHART), *args, "--set", "dryRun=true")
    text = proc.stdout.split("NOTES:", 1)[1]
    objs = [o for o in yaml.safe_load_all(proc.stdout.split("NOTES:", 1)[0]) if o and "kind" in o]
    command = re.search(r"^  (kubectl run .*?-- status)$", text, re.MULTILINE | re.DOTALL)
    assert command, text
    argv = shlex.split(command.group(1).replace("\\\n", " "))
    assert argv[argv.index("--") + 1 :] == ["status"]
    argv.remove("--rm")
    argv.remove("-i")  # attached: kubectl would not dry-run it
    with ApiServer() as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        argv[argv.index("--") : argv.index("--")] = ["--dry-run=client", "-o", "json"]
        done = subprocess.run(
            [shutil.which("kubectl"), "--kubeconfig", str(kubeconfig), *argv[1:]],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    pod = json.loads(done.stdout)
    cron = pod_spec(one(objs, "CronJob"))
    spec = pod["spec"]
    assert spec["serviceAccountName"] == cron["serviceAccountName"] == "batch-node-holder"
    assert spec["containers"][0]["envFrom"] == cron["containers"][0]["envFrom"]
    assert env_of(objs, spec) == env_of(objs, cron)
    assert env_of(objs, spec)["NODE_HOLDER_DRY_RUN"] == "true"
    for key in ("affinity", "tolerations", "securityContext", "automountServiceAccountToken"):
        assert spec[key] == cron[key], key
    assert pss_restricted_violations(spec) == []
    assert spec["containers"][0]["image"] == cron["containers"][0]["image"]


# --------------------------------------------------------------------------- the hook, for real


def _request_verb(method: str, path: str) -> tuple[str, str, str, str, str]:
    """(verb, group, resource, namespace, name) the RBAC authorizer sees for a request."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], (rest[1] if len(rest) > 1 else "")
    verb = {"GET": "get" if name else "list", "PATCH": "patch", "POST": "create"}[method]
    return verb, group, resource, namespace, name


def _allowed(objs: list[dict[str, Any]], request: tuple[str, str, str, str, str]) -> bool:
    verb, group, resource, namespace, name = request
    for obj in objs:
        if obj["kind"] == "Role" and obj["metadata"]["namespace"] != namespace:
            continue
        if obj["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in obj["rules"]:
            if (
                group in rule["apiGroups"]
                and resource in rule["resources"]
                and verb in rule["verbs"]
                and (not rule.get("resourceNames") or name in rule["resourceNames"])
            ):
                return True
    return False


@pytest.mark.parametrize(
    ("dry_run", "mechanism"), [("false", "annotation"), ("true", "annotation"), ("true", "budget")]
)
def test_the_hook_does_its_job_with_only_its_own_rbac(helm, tmp_path, dry_run, mechanism):
    """Run the hook's command with its environment (the settings ConfigMap, then its own env)
    against the API test server, which answers 403 to any request the hook's Role and
    ClusterRole do not allow, as RBAC would. The holds are gone, also when the runs are a dry
    run: an uninstall that left them would leave them for good; with the budget
    mechanism the NodePool's entry too. With annotations the hook may not read NodePools: the
    release says so and goes on (release looks for budget entries whatever the mechanism)."""
    from tests.clusters import run_cli  # noqa: PLC0415
    from tests.kubeapi.apiserver import ApiServer  # noqa: PLC0415
    from tests.kubeapi.statuses import forbidden  # noqa: PLC0415

    namespace = "kube-system"  # a namespace the test server has
    values = ["--set", f"dryRun={dry_run}", "--set", f"mechanism={mechanism}"]
    rendered = run_helm(helm, "template", RELEASE, str(CHART), "-n", namespace, *values).stdout
    objs = [o for o in yaml.safe_load_all(rendered) if o]
    assert env_of(objs, pod_spec(one(objs, "CronJob")))["NODE_HOLDER_DRY_RUN"] == dry_run
    hook_rbac = [o for o in objs if is_hook(o) and o["kind"] in ("Role", "ClusterRole")]
    job = next(o for o in objs if o["kind"] == "Job")
    container = pod_spec(job)["containers"][0]
    name = one(objs, "CronJob")["metadata"]["name"]
    ours = {
        "karpenter.sh/do-not-disrupt": "true",
        "node-holder.dev/owned-annotations": "karpenter.sh/do-not-disrupt",
    }
    entry = {"duration": "20m", "nodes": "0", "reasons": ["Empty", "Underutilized"]}
    entry["schedule"] = "0 9 22 11 *"
    owned = {"node-holder.dev/budget": json.dumps(entry, separators=(",", ":"), sort_keys=True)}
    refused = []
    with ApiServer() as api:
        cronjob = api.add_batch(
            "cronjobs",
            {"metadata": {"name": name, "namespace": namespace}, "spec": {"suspend": False}},
        )
        owner = {"kind": "CronJob", "name": name, "uid": cronjob["metadata"]["uid"]}
        api.add_batch(
            "jobs",
            {
                "metadata": {
                    "name": f"{name}-1",
                    "namespace": namespace,
                    "ownerReferences": [owner],
                },
                "status": {"conditions": [{"type": "Complete", "status": "True"}]},
            },
        )
        api.add_node("held", eks=False, annotations=ours)
        api.add_nodepool("batch", budgets=[{"nodes": "10%"}, entry], annotations=owned)

        def rbac(info: Any) -> None:
            verb, group, resource, ns, obj = request = _request_verb(info.method, info.path)
            if not _allowed(hook_rbac, request):
                refused.append(request)
                raise forbidden("hook", verb, resource, name=obj, group=group, namespace=ns)

        api.on_request(rbac)
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        env = env_of(objs, pod_spec(job))
        assert env["NODE_HOLDER_DRY_RUN"] == "false"
        result = run_cli(*container["args"], "--kubeconfig", kubeconfig, env=env)
        assert result.code == 0, result.stderr
        assert api.get_node("held")["metadata"].get("annotations", {}) == {}
        assert api.get_batch("cronjobs", namespace, name)["spec"]["suspend"] is True
        pool = api.get_nodepool("batch")
        requests = [_request_verb(r.method, r.path) for r in api.requests]
    assert {r[2] for r in requests} == {"nodes", "cronjobs", "jobs", "nodepools"}
    if mechanism == "annotation":
        assert refused == [("list", "karpenter.sh", "nodepools", "", "")]
        assert "NodePools not read (403 Forbidden" in result.stderr
        assert pool["spec"]["disruption"]["budgets"] == [{"nodes": "10%"}, entry]
    else:
        assert refused == []
        assert pool["spec"]["disruption"]["budgets"] == [{"nodes": "10%"}]
        assert "node-holder.dev/budget" not in pool["metadata"].get("annotations", {})
    assert not _allowed(hook_rbac, ("patch", "batch", "cronjobs", namespace, "other"))
