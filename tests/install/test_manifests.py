"""The kustomize manifests in cronjob/.

The base and every overlay (found by listing cronjob/overlays/, so a new one
is covered without touching this file) are rendered with the real
`kubectl kustomize`, every object is validated against the Kubernetes OpenAPI
schema in strict mode (unknown fields fail), and the properties the install
promises are asserted: Pod Security Standard "restricted", least-privilege
RBAC, the CronJob's timing, where the pod may run, and that every environment
variable set is one the CLI actually reads.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from packaging.version import Version

import reconcile
from reconcile.cli import cli
from reconcile.cli.options import Parsed, hold_settings, run_settings
from reconcile.rule.settings import Mode

ROOT = Path(__file__).resolve().parents[2]
CRONJOB_DIR = ROOT / "cronjob"
OVERLAYS_DIR = CRONJOB_DIR / "overlays"
#: Where installing and running are documented: the README, docs/install.md in full, and the
#: reference (settings, output).
DOCS = (
    ROOT / "README.md",
    ROOT / "docs" / "install.md",
    ROOT / "docs" / "reference.md",
    ROOT / "docs" / "operations-notes.md",  # the one-off pod without a local install
)
KUBECTL = shutil.which("kubectl")

needs_kubectl = pytest.mark.skipif(
    KUBECTL is None,
    reason="kubectl is not on PATH, so `kubectl kustomize` can't render the manifests",
)

OVERLAYS = sorted(p.name for p in OVERLAYS_DIR.iterdir() if (p / "kustomization.yaml").is_file())
# Every kustomization a user can apply, as paths relative to cronjob/.
TARGETS = [".", "base", *(f"overlays/{name}" for name in OVERLAYS)]

NAMESPACE = "node-holder"
IMAGE = f"ghcr.io/karpenter-node-holder/karpenter-node-holder:{reconcile.__version__}"
HOLD_ANNOTATION = "karpenter.sh/do-not-disrupt"
KARPENTER_NODE_LABELS = ("karpenter.sh/nodepool", "karpenter.sh/provisioner-name")

# What each example overlay is meant to change relative to the base (in the settings
# ConfigMap). The comparison is exact: an overlay that changes anything else fails.
OVERLAY_ENV_CHANGES: dict[str, dict[str, str]] = {
    "dry-run-first": {"NODE_HOLDER_DRY_RUN": "true"},
    "longer-hold": {"HOLD_DURATION": "45m"},
    "karpenter-before-v0.32": {
        "HOLD_ANNOTATION": "karpenter.sh/do-not-consolidate",
        "HOLD_GROUP_LABEL": "karpenter.sh/provisioner-name",
        "HOLD_TRIGGER_SELECTOR": "karpenter.sh/provisioner-name",
    },
    "karpenter-only-cluster": {},
    "budget-mechanism": {"NODE_HOLDER_MECHANISM": "budget"},
}


# --------------------------------------------------------------------------- helpers


@functools.cache
def _render(target: str) -> str:
    proc = subprocess.run(
        [KUBECTL, "kustomize", str(CRONJOB_DIR / target)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, f"kubectl kustomize cronjob/{target} failed:\n{proc.stderr}"
    return proc.stdout


def render(target: str) -> list[dict[str, Any]]:
    """The objects `kubectl apply -k cronjob/<target>` would create (a fresh copy)."""
    return [doc for doc in yaml.safe_load_all(_render(target)) if doc]


def only(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind]
    assert len(found) == 1, f"expected exactly one {kind}, got {len(found)}"
    return found[0]


def pod_template(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return only(objs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]


def container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    containers = pod_template(objs)["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def settings_of(objs: list[dict[str, Any]], spec: dict[str, Any]) -> dict[str, str]:
    """The environment a pod's container gets: the ConfigMaps it reads whole (`envFrom`, found
    in the same render), then its own `env` entries over them, as the kubelet builds it."""
    (c,) = spec["containers"]
    maps = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ConfigMap"}
    env: dict[str, str] = {}
    for source in c.get("envFrom", []):
        name = source["configMapRef"]["name"]
        assert name in maps, f"envFrom names ConfigMap {name}, which the install does not create"
        assert "prefix" not in source and not source["configMapRef"].get("optional")
        env.update(maps[name]["data"])
    entries = c.get("env", [])
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names)), f"duplicate env names: {names}"
    for e in entries:
        assert "valueFrom" not in e, f"{e['name']}: settings are plain values"
    return {**env, **{e["name"]: e["value"] for e in entries}}


def env_of(objs: list[dict[str, Any]]) -> dict[str, str]:
    """The CronJob's run's environment."""
    return settings_of(objs, pod_template(objs)["spec"])


def settings_map(objs: list[dict[str, Any]]) -> dict[str, Any]:
    """The settings ConfigMap: the one the CronJob's container reads with envFrom."""
    [source] = container(objs)["envFrom"]
    name = source["configMapRef"]["name"]
    return next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == name)


def seconds(duration: str) -> float:
    """'45s', '1m', '1h30m' -> seconds. Requires a unit: the manifests always spell one."""
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert parts and duration, f"not a duration with units: {duration!r}"
    h, m, s = (int(x or 0) for x in parts.groups())
    return h * 3600 + m * 60 + s


def schema_versions() -> list[str]:
    """Kubernetes 1.32 (the kubectl here) and the newest schema the package ships."""
    latest = kubernetes_validate.latest_version()
    versions = {".".join(latest.split(".")[:2])}
    if Version(latest) >= Version("1.32"):
        versions.add("1.32")
    return sorted(versions, key=Version)


def cli_envvars() -> dict[str, list[Any]]:
    """Every environment variable the real CLI reads -> the click params reading it."""
    found: dict[str, list[Any]] = {}
    for command in cli.commands.values():
        for param in command.params:
            names = param.envvar
            if names is None:
                continue
            for name in [names] if isinstance(names, str) else names:
                found.setdefault(name, []).append((command, param))
    return found


# Pod Security Standards, "restricted" profile (which includes "baseline"),
# as listed on kubernetes.io/docs/concepts/security/pod-security-standards.
_RESTRICTED_VOLUME_TYPES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def pss_restricted_violations(spec: dict[str, Any]) -> list[str]:
    """Why a pod spec would be rejected by a namespace enforcing "restricted"."""
    bad: list[str] = []
    pod_sc = spec.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            bad.append(f"{field} is set")
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= _RESTRICTED_VOLUME_TYPES:
            bad.append(f"volume {volume['name']}: type {sorted(kinds)} not allowed")
    if pod_sc.get("sysctls"):
        bad.append("sysctls are set")
    for pod_field in ("runAsUser", "runAsGroup"):
        if pod_sc.get(pod_field) == 0:
            bad.append(f"pod {pod_field} is 0")
    containers = [
        *(spec.get("initContainers") or []),
        *(spec.get("containers") or []),
        *(spec.get("ephemeralContainers") or []),
    ]
    if not containers:
        bad.append("no containers")
    for c in containers:
        sc = c.get("securityContext") or {}
        name = c.get("name", "?")
        if sc.get("privileged"):
            bad.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{name}: allowPrivilegeEscalation must be false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            bad.append(f"{name}: capabilities.drop must include ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            bad.append(f"{name}: adds capabilities {caps['add']}")
        if sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is not True:
            bad.append(f"{name}: runAsNonRoot must be true")
        for field in ("runAsUser", "runAsGroup"):
            if sc.get(field, pod_sc.get(field)) == 0:
                bad.append(f"{name}: {field} is 0")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            bad.append(f"{name}: seccompProfile.type is {seccomp!r}")
        if sc.get("procMount", "Default") != "Default":
            bad.append(f"{name}: procMount")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                bad.append(f"{name}: hostPort")
        se_type = (sc.get("seLinuxOptions") or {}).get("type")
        if se_type not in (None, "", "container_t", "container_init_t", "container_kvm_t"):
            bad.append(f"{name}: seLinuxOptions.type {se_type}")
    return bad


# --------------------------------------------------------------------------- layout


def test_example_overlays_exist():
    assert set(OVERLAY_ENV_CHANGES) <= set(OVERLAYS), "an example overlay went missing"


@needs_kubectl
def test_cronjob_dir_installs_exactly_the_base():
    assert render(".") == render("base")
    kinds = sorted(o["kind"] for o in render("."))
    expected = ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
    expected += ["Role", "RoleBinding", "CronJob"]
    # The admission policy (tests/install/test_admission_policy.py).
    expected += ["ConfigMap", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    assert kinds == sorted(expected)


# --------------------------------------------------------------------------- schema


@needs_kubectl
@pytest.mark.parametrize("version", schema_versions())
@pytest.mark.parametrize("target", TARGETS)
def test_every_object_validates_strictly(target, version):
    for obj in render(target):
        kubernetes_validate.validate(obj, version, strict=True)


@needs_kubectl
def test_without_admission_policy_validates_on_the_oldest_supported_kubernetes():
    """1.27 (CronJob timeZone GA): docs/install.md, "Supported versions"."""
    for obj in render("overlays/without-admission-policy"):
        kubernetes_validate.validate(obj, "1.27", strict=True)


@needs_kubectl
@pytest.mark.parametrize(
    "path",
    [
        ("spec", "bogusField"),
        ("spec", "jobTemplate", "spec", "template", "spec", "containers", 0, "bogusField"),
        ("spec", "jobTemplate", "spec", "template", "spec", "securityContext", "bogusField"),
    ],
)
def test_strict_validation_rejects_unknown_fields(path):
    """Proves the check above would catch a typo such as `imagePullPolicyy`."""
    cronjob = copy.deepcopy(only(render("base"), "CronJob"))
    kubernetes_validate.validate(cronjob, "1.32", strict=True)  # valid as rendered
    node: Any = cronjob
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = "x"
    with pytest.raises(kubernetes_validate.ValidationError, match="bogusField"):
        kubernetes_validate.validate(cronjob, "1.32", strict=True)


# --------------------------------------------------------------------------- pod security


@needs_kubectl
@pytest.mark.parametrize("target", TARGETS)
def test_namespace_enforces_restricted(target):
    ns = only(render(target), "Namespace")
    assert ns["metadata"]["name"] == NAMESPACE
    labels = ns["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


@needs_kubectl
@pytest.mark.parametrize("target", TARGETS)
def test_pod_passes_pss_restricted(target):
    spec = pod_template(render(target))["spec"]
    assert pss_restricted_violations(spec) == []


@needs_kubectl
@pytest.mark.parametrize("target", TARGETS)
def test_pod_hardening_beyond_pss(target):
    spec = pod_template(render(target))["spec"]
    sc = container(render(target))["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    for ctx in (spec["securityContext"], sc):
        # Numeric ids so the kubelet can check runAsNonRoot; 65532 = the image's USER.
        assert ctx["runAsUser"] == 65532
        assert ctx["runAsGroup"] == 65532
        assert ctx["runAsNonRoot"] is True
        assert ctx["seccompProfile"] == {"type": "RuntimeDefault"}
    # A read-only root needs somewhere writable for temp files.
    mounts = {m["mountPath"]: m["name"] for m in container(render(target))["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]


PSS_BREAKERS = {
    "root user": lambda s: s["containers"][0]["securityContext"].update(runAsUser=0),
    "root group": lambda s: s["securityContext"].update(runAsGroup=0),
    "runAsNonRoot unset": lambda s: (
        s["securityContext"].pop("runAsNonRoot"),
        s["containers"][0]["securityContext"].pop("runAsNonRoot"),
    ),
    "privilege escalation": lambda s: s["containers"][0]["securityContext"].update(
        allowPrivilegeEscalation=True
    ),
    "caps not dropped": lambda s: s["containers"][0]["securityContext"].pop("capabilities"),
    "cap added": lambda s: s["containers"][0]["securityContext"]["capabilities"].update(
        add=["SYS_ADMIN"]
    ),
    "seccomp unconfined": lambda s: s["containers"][0]["securityContext"].update(
        seccompProfile={"type": "Unconfined"}
    ),
    "no seccomp": lambda s: (
        s["securityContext"].pop("seccompProfile"),
        s["containers"][0]["securityContext"].pop("seccompProfile"),
    ),
    "privileged": lambda s: s["containers"][0]["securityContext"].update(privileged=True),
    "host network": lambda s: s.update(hostNetwork=True),
    "hostPath": lambda s: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
    "hostPort": lambda s: s["containers"][0].update(ports=[{"containerPort": 1, "hostPort": 1}]),
}


@needs_kubectl
@pytest.mark.parametrize("breaker", sorted(PSS_BREAKERS))
def test_pss_check_catches_each_violation(breaker):
    """The restricted check above isn't vacuous: each way of breaking it is reported."""
    spec = copy.deepcopy(pod_template(render("base"))["spec"])
    PSS_BREAKERS[breaker](spec)
    assert pss_restricted_violations(spec) != []


# --------------------------------------------------------------------------- RBAC


def _rules(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    roles = [o for o in objs if o["kind"] == kind]
    assert len(roles) == 1, f"expected one {kind}, got {len(roles)}"
    return roles[0]["rules"]


@needs_kubectl
@pytest.mark.parametrize("target", TARGETS)
def test_rbac_is_least_privilege(target):
    objs = render(target)
    cluster_rules = _rules(objs, "ClusterRole")
    budgets = env_of(objs)["NODE_HOLDER_MECHANISM"] != "annotation"  # they patch NodePools
    assert [(r["apiGroups"], r["resources"], sorted(r["verbs"])) for r in cluster_rules] == [
        ([""], ["nodes"], ["get", "list", "patch"]),
        (["karpenter.sh"], ["nodepools"], ["get", "list", *(["patch"] if budgets else [])]),
    ]

    role = only(objs, "Role")
    assert role["metadata"]["namespace"] == "default", "node events are created in `default`"
    assert [(sorted(r["apiGroups"]), r["resources"], r["verbs"]) for r in role["rules"]] == [
        ([""], ["events"], ["create"])
    ]

    for rule in cluster_rules + role["rules"]:
        assert "nonResourceURLs" not in rule
        assert "resourceNames" not in rule
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"wildcard in {field}: {rule}"
        assert not {"update", "watch", "delete", "deletecollection", "escalate", "bind"} & set(
            rule["verbs"]
        )


@needs_kubectl
@pytest.mark.parametrize("target", TARGETS)
def test_rbac_is_bound_to_the_pods_service_account(target):
    """Catches e.g. an overlay with `namespace:`, which moves objects but not subjects."""
    objs = render(target)
    cronjob = only(objs, "CronJob")
    namespace = cronjob["metadata"]["namespace"]
    pod = pod_template(objs)["spec"]
    subject = {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": namespace}

    assert namespace == NAMESPACE == only(objs, "Namespace")["metadata"]["name"]
    sa = only(objs, "ServiceAccount")
    assert (sa["metadata"]["name"], sa["metadata"]["namespace"]) == (
        subject["name"],
        namespace,
    )
    # The token is mounted only into the pod that needs it.
    assert sa["automountServiceAccountToken"] is False
    assert pod["automountServiceAccountToken"] is True

    crb = only(objs, "ClusterRoleBinding")
    assert crb["subjects"] == [subject]
    assert crb["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": only(objs, "ClusterRole")["metadata"]["name"],
    }
    rb = only(objs, "RoleBinding")
    assert rb["metadata"]["namespace"] == only(objs, "Role")["metadata"]["namespace"]
    assert rb["subjects"] == [subject]
    assert rb["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": only(objs, "Role")["metadata"]["name"],
    }


# --------------------------------------------------------------------------- the CronJob


@needs_kubectl
@pytest.mark.parametrize("target", TARGETS)
def test_cronjob_schedule_and_deadline(target):
    objs = render(target)
    spec = only(objs, "CronJob")["spec"]
    job = spec["jobTemplate"]["spec"]
    pod = job["template"]["spec"]

    assert spec["schedule"] == "* * * * *"
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["timeZone"] == "Etc/UTC"
    assert spec["suspend"] is False
    # Below 10s the controller may never start a run; at 60s+ a late run would
    # overlap the next minute's.
    assert 10 <= spec["startingDeadlineSeconds"] < 60
    assert spec["successfulJobsHistoryLimit"] >= 1
    assert spec["failedJobsHistoryLimit"] >= 1

    timeout = seconds(env_of(objs)["NODE_HOLDER_TIMEOUT"])
    deadline = job["activeDeadlineSeconds"]
    assert timeout < deadline < 60, "CLI timeout < Job deadline < schedule interval"
    assert deadline + pod["terminationGracePeriodSeconds"] <= 60
    assert job["backoffLimit"] in (0, 1)
    assert job["ttlSecondsAfterFinished"] > 0
    assert pod["restartPolicy"] == "Never"
    # Evictions and preemptions don't count as failures (see cronjob.yaml).
    assert job["podFailurePolicy"]["rules"] == [
        {
            "action": "Ignore",
            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
        }
    ]


@needs_kubectl
@pytest.mark.parametrize("target", TARGETS)
def test_container_image_args_and_resources(target):
    c = container(render(target))
    assert c["image"] == IMAGE
    assert c["imagePullPolicy"] == "IfNotPresent"
    assert c["args"] == ["reconcile"]
    assert "command" not in c, "the image's ENTRYPOINT (node-holder) must stay in charge"
    # From the benchmark (docs/performance.md); no CPU limit (throttling only slows a run).
    assert c["resources"] == {
        "requests": {"cpu": "50m", "memory": "128Mi"},
        "limits": {"memory": "256Mi"},
    }


def _excludes_karpenter_nodes(spec: dict[str, Any]) -> bool:
    """True if every nodeSelectorTerm (they are ORed) rules out Karpenter's nodes."""
    required = (
        spec.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    if not required:
        return False
    for term in required["nodeSelectorTerms"]:
        absent = {
            e["key"] for e in term.get("matchExpressions", []) if e["operator"] == "DoesNotExist"
        }
        if not set(KARPENTER_NODE_LABELS) <= absent:
            return False
    return True


@needs_kubectl
@pytest.mark.parametrize("target", TARGETS)
def test_pod_never_makes_karpenter_keep_or_launch_a_node(target):
    template = pod_template(render(target))
    spec = template["spec"]
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in spec["tolerations"]
    annotations = template.get("metadata", {}).get("annotations", {})
    if _excludes_karpenter_nodes(spec):
        # Never on a Karpenter node, where the annotation would mean nothing.
        assert HOLD_ANNOTATION not in annotations
    else:
        # On Karpenter nodes: not evicted mid-run.
        assert annotations.get(HOLD_ANNOTATION) == "true"


@needs_kubectl
def test_base_runs_off_karpenter_nodes_and_only_cluster_overlay_doesnt():
    assert _excludes_karpenter_nodes(pod_template(render("base"))["spec"])
    assert not _excludes_karpenter_nodes(
        pod_template(render("overlays/karpenter-only-cluster"))["spec"]
    )


@needs_kubectl
def test_base_settings():
    env = env_of(render("base"))
    assert env["HOLD_DURATION"] == "20m"
    assert env["HOLD_ANNOTATION"] == HOLD_ANNOTATION
    assert env["HOLD_SCOPE"] == "cluster"
    assert env["NODE_HOLDER_DRY_RUN"] == "false"
    assert env["NODE_HOLDER_LOG_FORMAT"] == "json"
    assert env["NODE_HOLDER_TIMEOUT"] == "45s"


@needs_kubectl
def test_base_defaults_are_the_safe_choice_for_a_karpenter_cluster():
    """Only nodes Karpenter launched start a hold, and holding is capped (the
    figures behind 2h: README, "Why these defaults"); the CLI's own defaults stay generic."""
    from reconcile.rule.selectors import parse_selector  # noqa: PLC0415
    from reconcile.rule.settings import HoldSettings  # noqa: PLC0415

    env = env_of(render("base"))
    trigger = parse_selector(env["HOLD_TRIGGER_SELECTOR"])
    assert trigger.matches({"karpenter.sh/nodepool": "batch"})
    for labels in (
        {},
        {"eks.amazonaws.com/nodegroup": "system"},
        {"eks.amazonaws.com/compute-type": "fargate"},
    ):
        assert not trigger.matches(labels), labels
    assert seconds(env["HOLD_MAX_DURATION"]) == 2 * 3600
    assert HoldSettings().max_hold is None and not HoldSettings().trigger_selector


@needs_kubectl
@pytest.mark.parametrize("target", TARGETS)
def test_every_setting_is_in_one_configmap_the_pod_reads_whole(target):
    """One place for the settings, read by the runs and by a one-off pod."""
    objs = render(target)
    c = container(objs)
    assert "env" not in c, "settings live in the ConfigMap, not in the CronJob"
    cm = settings_map(objs)
    assert cm["metadata"]["name"] == "node-holder-settings"
    assert cm["metadata"]["namespace"] == only(objs, "CronJob")["metadata"]["namespace"]
    assert set(cm["data"]) <= set(cli_envvars())


# --------------------------------------------------------------------------- overlays


def _normalised(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Objects in a stable order with env sorted by name (kustomize reorders env)."""
    objs = copy.deepcopy(objs)
    for obj in objs:
        if obj["kind"] == "CronJob":
            c = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
            c["env"] = sorted(c.get("env", []), key=lambda e: e["name"])
    return sorted(objs, key=lambda o: (o["kind"], o["metadata"]["name"]))


def _expected_overlay(name: str) -> list[dict[str, Any]]:
    expected = render("base")
    data = settings_map(expected)["data"]
    for key, value in OVERLAY_ENV_CHANGES[name].items():
        assert key in data
        data[key] = value
    if name == "karpenter-only-cluster":
        template = pod_template(expected)
        del template["spec"]["affinity"]
        template["metadata"]["annotations"] = {HOLD_ANNOTATION: "true"}
    if name == "budget-mechanism":  # and NodePools: RBAC and their admission policy
        only(expected, "ClusterRole")["rules"][1]["verbs"].append("patch")
        policy = CRONJOB_DIR / "components" / "budget-mechanism" / "nodepool-policy.yaml"
        expected += [o for o in yaml.safe_load_all(policy.read_text()) if o]
    return expected


@needs_kubectl
@pytest.mark.parametrize("name", sorted(OVERLAY_ENV_CHANGES))
def test_overlay_changes_exactly_what_it_is_for(name):
    assert _normalised(render(f"overlays/{name}")) == _normalised(_expected_overlay(name))


@needs_kubectl
@pytest.mark.parametrize("name", OVERLAYS)
def test_every_overlay_changes_something_and_is_documented(name):
    assert _normalised(render(f"overlays/{name}")) != _normalised(render("base"))
    assert f"cronjob/overlays/{name}" in _docs(), f"document overlay {name}"


# --------------------------------------------------------------------------- env vs the CLI


@needs_kubectl
@pytest.mark.parametrize("target", TARGETS)
def test_every_env_var_is_one_the_cli_reads(target):
    known = cli_envvars()
    unknown = sorted(set(env_of(render(target))) - set(known))
    assert unknown == [], f"the CLI reads none of {unknown}; it reads {sorted(known)}"


@needs_kubectl
@pytest.mark.parametrize("target", TARGETS)
def test_cli_accepts_every_env_value(target, monkeypatch):
    """Parse the manifest's settings exactly as the pod's `node-holder reconcile` would.

    click reads the environment (make_context parses without running the
    command), then the CLI's own parsers turn the text into settings; a bad
    value (say HOLD_DURATION=20 mins) raises here instead of exiting 2 in the
    cluster every minute.
    """
    for name in cli_envvars():
        monkeypatch.delenv(name, raising=False)
    env = env_of(render(target))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    command = cli.commands[container(render(target))["args"][0]]
    with command.make_context(command.name, []) as ctx:
        hold = hold_settings(Parsed(ctx.params))
        run = run_settings(Parsed(ctx.params), Mode.RECONCILE)
    assert hold.hold_duration.total_seconds() == seconds(env["HOLD_DURATION"])
    assert list(hold.annotations) == env["HOLD_ANNOTATION"].split(",")
    assert run.timeout.total_seconds() == seconds(env["NODE_HOLDER_TIMEOUT"])
    assert run.dry_run is (env["NODE_HOLDER_DRY_RUN"] == "true")
    assert run.events is (env["NODE_HOLDER_EVENTS"] == "true")


# --------------------------------------------------------------------------- docs


def _docs() -> str:
    return "\n".join(path.read_text() for path in DOCS)


def test_docs_kustomize_paths_exist():
    paths = set(re.findall(r"-k (cronjob/[\w./-]*)", _docs()))
    assert "cronjob/" in paths
    for path in paths:
        assert (ROOT / path / "kustomization.yaml").is_file(), path


@needs_kubectl
def test_docs_overlay_example_renders_and_changes_what_it_says(tmp_path):
    """The copy-paste overlay in docs/install.md, applied next to a copy of cronjob/."""
    match = re.search(
        r"^cat > my-node-holder/kustomization.yaml <<'EOF'\n(.*?)^EOF$",
        _docs(),
        re.MULTILINE | re.DOTALL,
    )
    assert match, "docs/install.md shows an overlay of your own"
    shutil.copytree(CRONJOB_DIR, tmp_path / "cronjob")
    (tmp_path / "my-node-holder").mkdir()
    (tmp_path / "my-node-holder" / "kustomization.yaml").write_text(match.group(1))
    proc = subprocess.run(
        [KUBECTL, "kustomize", str(tmp_path / "my-node-holder")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    objs = [doc for doc in yaml.safe_load_all(proc.stdout) if doc]
    for obj in objs:
        kubernetes_validate.validate(obj, "1.32", strict=True)
    assert env_of(objs) == {**env_of(render("base")), "HOLD_DURATION": "30m", "HOLD_SCOPE": "group"}
    assert (
        container(objs)["image"]
        == f"registry.example.com/mirror/node-holder:{reconcile.__version__}"
    )


def _docs_overrides() -> dict[str, Any]:
    match = re.search(r"^OVERRIDES='(\{.*?\})'$", _docs(), re.MULTILINE | re.DOTALL)
    assert match, "README.md defines OVERRIDES='{...}' for kubectl run"
    return json.loads(match.group(1))


@needs_kubectl
def test_docs_one_off_pod_matches_the_cronjob():
    """The `kubectl run --overrides` pod must pass "restricted", use the same SA, and read
    the CronJob's settings (the same ConfigMap, whole)."""
    overrides = _docs_overrides()["spec"]
    cron_pod = pod_template(render("base"))["spec"]
    assert overrides["serviceAccountName"] == cron_pod["serviceAccountName"]
    assert overrides["containers"][0]["envFrom"] == cron_pod["containers"][0]["envFrom"]
    assert overrides["automountServiceAccountToken"] is True
    assert overrides["affinity"] == cron_pod["affinity"]
    assert pss_restricted_violations(overrides) == []
    docs = _docs()
    # The one-off pods use the image the install step built and set in the base.
    assert "--image=$IMAGE:0.1.0" in docs
    assert 'sed -i "s|newName: .*|newName: $IMAGE|" cronjob/base/kustomization.yaml' in docs
    assert IMAGE.endswith(":0.1.0")
    assert "--override-type=strategic" in docs
    # The container in the overrides is merged by name into the one kubectl run makes.
    run_names = re.findall(r"^kubectl run (\S+)", docs, re.MULTILINE)
    assert run_names, "the README shows a one-off `kubectl run`"
    for run_name in run_names:
        assert [c["name"] for c in overrides["containers"]] == [run_name]


def test_docs_uninstall_releases_before_deleting():
    """`release --suspend-cronjob` suspends the CronJob, waits out a run, then releases."""
    for doc in DOCS[:2]:
        text = doc.read_text()
        release = text.index("release --suspend-cronjob node-holder/node-holder\n")
        delete = text.index("kubectl delete -k cronjob/")
        assert release < delete, doc.name


def test_the_cronjob_logs_json_lines_on_both_streams_as_the_readme_says():
    """Log pipelines get one JSON object per line: results on stdout, logs on stderr."""
    env = env_of(render("base"))
    assert env["NODE_HOLDER_OUTPUT"] == "json"
    assert env["NODE_HOLDER_LOG_FORMAT"] == "json"
    readme = _docs()
    assert "`NODE_HOLDER_OUTPUT=json`" in readme and "`NODE_HOLDER_LOG_FORMAT=json`" in readme


@needs_kubectl
def test_the_docs_kustomize_recipes_compose(tmp_path: Path) -> None:
    """README's image step (sed on the base), then docs/install.md's own overlay with an
    image mirror, both taken from the docs as written: the overlay's image is the one
    rendered, and so are its settings."""
    readme = (ROOT / "README.md").read_text()
    install = (ROOT / "docs/install.md").read_text()
    (sed,) = re.findall(r"^(sed -i .*cronjob/base/kustomization\.yaml)$", readme, re.M)
    (overlay,) = re.findall(
        r"^cat > my-node-holder/kustomization.yaml <<'EOF'\n(.*?)^EOF$", install, re.M | re.S
    )
    shutil.copytree(ROOT / "cronjob", tmp_path / "cronjob")
    image = "registry.example.com/platform/karpenter-node-holder"
    env = {"IMAGE": image, "PATH": os.environ["PATH"]}
    subprocess.run(["bash", "-c", sed], cwd=tmp_path, env=env, check=True)
    (tmp_path / "my-node-holder").mkdir()
    (tmp_path / "my-node-holder/kustomization.yaml").write_text(overlay)
    for target, expected in (("cronjob", f"{image}:"), ("my-node-holder", "mirror/node-holder")):
        kustomize = [KUBECTL, "kustomize", target]
        proc = subprocess.run(kustomize, cwd=tmp_path, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
        (cronjob,) = [d for d in docs if d["kind"] == "CronJob"]
        (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        assert expected in container["image"], (target, container["image"])
    (settings,) = [d for d in docs if d["kind"] == "ConfigMap"]
    assert settings["data"]["HOLD_DURATION"] == "30m"
