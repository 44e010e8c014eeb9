"""`--settings-from NAMESPACE/CONFIGMAP`: a one-off command with the CronJob's settings, read
from its ConfigMap through the API with the caller's own credentials.

A flag wins, then the ConfigMap, then the local environment, then the defaults; a dry run asked
for by a flag or the local environment holds whatever the ConfigMap says; the output and log
format stay the local choice. Its values go through each setting's own parser, its keys follow
the environment's rules; a ConfigMap that is missing (404) or forbidden (403) is exit 2, a
server failure exit 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.clusters import CliResult, run_cli
from tests.helpers import ERROR, KEY, OURS, REPO, assert_one_clear_line, old, young
from tests.kubeapi.apiserver import ApiServer, Fault

NS, NAME = "node-holder", "node-holder-settings"
REF = f"{NS}/{NAME}"
CONFIGMAP_PATH = f"/api/v1/namespaces/{NS}/configmaps/{NAME}"


def run(command: str, kubeconfig: Path, *args: str, env: dict[str, str] | None = None) -> CliResult:
    return run_cli(command, "--kubeconfig", str(kubeconfig), "--settings-from", REF, *args, env=env)


Local = list[str] | dict[str, str]  # flags, or the local environment


def paths(api: ApiServer) -> list[str]:
    return [r.path for r in api.requests]


def test_status_runs_with_the_cronjob_s_settings_a_flag_winning_and_the_local_format_kept(
    api: ApiServer, kubeconfig: Path
) -> None:
    young(api, "new")
    api.add_configmap(
        NS,
        NAME,
        {
            "HOLD_DURATION": "30m",
            "HOLD_MAX_DURATION": "2h",
            "NODE_HOLDER_OUTPUT": "json",
            "NODE_HOLDER_LOG_FORMAT": "json",
        },
    )
    env = {"HOLD_DURATION": "45m", "HOLD_MAX_DURATION": "5h"}  # the local environment loses

    text = run("status", kubeconfig, "--max-hold", "3h", "-v", env=env)

    assert text.code == 0, text
    assert text.lines[0].startswith("held: youngest node new is "), text.lines  # not JSON
    assert not text.stderr.lstrip().startswith("{"), text.stderr  # nor the logs
    assert paths(api)[0] == CONFIGMAP_PATH
    assert api.requests[0].identity == "admin"  # the caller's own credentials

    window = run("status", kubeconfig, "--max-hold", "3h", "--output", "json", env=env).json
    assert (window["holdDuration"], window["windows"][0]["maxHold"]) == ("30m", "3h")
    without = run_cli("status", "--kubeconfig", str(kubeconfig), "--output", "json", env=env)
    assert (without.json["holdDuration"], without.json["windows"][0]["maxHold"]) == ("45m", "5h")


@pytest.mark.parametrize(
    ("configmap", "local", "writes"),
    [
        ("false", ["--dry-run"], False),
        ("false", {"NODE_HOLDER_DRY_RUN": "true"}, False),
        ("true", {"NODE_HOLDER_DRY_RUN": "false"}, False),  # the ConfigMap wins over the env
        ("false", {"NODE_HOLDER_DRY_RUN": "false"}, True),
        ("false", [], True),
    ],
    ids=["flag", "env", "configmap-dry", "env-real", "configmap-real"],
)
def test_a_dry_run_asked_for_locally_holds_whatever_the_configmap_says(
    api: ApiServer,
    kubeconfig: Path,
    configmap: str,
    local: list[str] | dict[str, str],
    writes: bool,
) -> None:
    """Both shipped ConfigMaps say NODE_HOLDER_DRY_RUN: "false"."""
    young(api, "new")
    api.add_configmap(NS, NAME, {"NODE_HOLDER_DRY_RUN": configmap})
    args, env = (local, None) if isinstance(local, list) else ([], local)

    result = run("reconcile", kubeconfig, *args, env=env)

    assert result.code == 0, result
    assert (api.annotations("new") == OURS) is writes
    assert bool(api.writes()) is writes


def test_release_takes_it(api: ApiServer, kubeconfig: Path) -> None:
    old(api, "held", annotations=OURS)
    api.add_configmap(NS, NAME, {"NODE_HOLDER_DRY_RUN": "true", "HOLD_DURATION": "PT20M"})

    result = run("release", kubeconfig)  # release reads no hold duration, bad or not

    assert result.code == 0, result
    assert api.annotations("held") == OURS and api.writes() == []


def test_the_shipped_kustomize_configmap_runs_as_the_cronjob_would(
    api: ApiServer, kubeconfig: Path
) -> None:
    shipped = yaml.safe_load((REPO / "cronjob/base/settings.yaml").read_text())
    assert (shipped["metadata"]["namespace"], shipped["metadata"]["name"]) == (NS, NAME)
    api.add_configmap(NS, NAME, shipped["data"])
    young(api, "not-karpenter")  # the shipped trigger selector: only Karpenter's nodes start one

    result = run("status", kubeconfig)

    assert result.code == 0, result
    assert result.lines[0].startswith("released: no node that can start a hold"), result.lines
    assert "20m (--hold-duration)  2h (--max-hold)" in result.stdout  # its cap, text output


@pytest.mark.parametrize("identity", ["admin", "readonly"])
def test_a_missing_or_forbidden_configmap_is_one_line_and_exit_2_naming_it(
    api: ApiServer, tmp_path: Path, identity: str
) -> None:
    """404 (none there) and 403 (the caller may not read it), worded as kube-apiserver does."""
    young(api, "new")
    if identity == "readonly":
        api.add_configmap(NS, NAME, {"HOLD_DURATION": "30m"})
    kubeconfig = api.write_kubeconfig(tmp_path / "kc", identity=identity)

    result = run("status", kubeconfig)

    assert result.code == 2, result
    line = assert_one_clear_line(result.stderr)
    assert line.startswith(f"{ERROR}--settings-from {REF}: "), line
    if identity == "admin":
        assert f'configmaps "{NAME}" not found; name the ConfigMap the CronJob reads' in line
    else:
        assert f'configmaps "{NAME}" is forbidden: User "system:serviceaccount:' in line
        assert f'grant yourself a Role with get on configmaps in namespace "{NS}"' in line
    assert paths(api) == [CONFIGMAP_PATH]  # no node was read


@pytest.mark.parametrize("fault", [Fault(status=500), Fault(drop_connection=True)])
def test_a_server_failure_reading_it_is_exit_1(
    api: ApiServer, kubeconfig: Path, fault: Fault
) -> None:
    young(api, "new")
    api.add_configmap(NS, NAME, {"HOLD_DURATION": "30m"})
    fault.path = "/configmaps/"
    api.inject(fault)

    result = run("reconcile", kubeconfig)

    assert result.code == 1, result
    assert assert_one_clear_line(result.stderr).startswith(f"{ERROR}--settings-from {REF}: ")
    assert paths(api) == [CONFIGMAP_PATH] and KEY not in api.annotations("new")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"HOLD_DURATION": "PT20M"}, "key HOLD_DURATION: 'PT20M' is not a duration; use a dur"),
        ({"NODE_HOLDER_TIMEOUT": "45"}, "key NODE_HOLDER_TIMEOUT: '45' has no unit; use a dur"),
        ({"HOLD_DURATION": "1h", "HOLD_MAX_DURATION": "30m"}, "--max-hold (HOLD_MAX_DURATION)"),
        ({"NODE_HOLDER_SPEED": "1"}, "NODE_HOLDER_SPEED is not a node-holder setting"),
    ],
)
def test_a_bad_value_or_an_unknown_setting_in_it_is_exit_2_naming_the_key(
    api: ApiServer, kubeconfig: Path, data: dict[str, str], words: str
) -> None:
    """The same parser as the environment variable's; an unknown NODE_HOLDER_* key is exit 2
    as it is in the environment."""
    young(api, "new")
    api.add_configmap(NS, NAME, data)

    result = run("reconcile", kubeconfig)

    assert result.code == 2, result
    line = assert_one_clear_line(result.stderr)
    assert words in line, line
    if "--max-hold" not in words:
        assert line.startswith(f"{ERROR}ConfigMap {REF} (--settings-from)"), line
    assert paths(api) == [CONFIGMAP_PATH] and api.writes() == []


def test_an_unknown_hold_key_in_it_is_a_warning(api: ApiServer, kubeconfig: Path) -> None:
    young(api, "new")
    api.add_configmap(NS, NAME, {"HOLD_DURATON": "45m"})

    result = run("reconcile", kubeconfig, "--output", "json")

    assert result.code == 0, result
    warning = f"ConfigMap {REF} (--settings-from): HOLD_DURATON is not a node-holder setting"
    assert result.stderr.count(warning) == 1, result.stderr
    assert result.json["holdDuration"] == "20m" and api.annotations("new") == OURS


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("node-holder", "'node-holder' is not NAMESPACE/NAME"),
        ("a/b/c", "'a/b/c' is not NAMESPACE/NAME"),
        ("UP/x", "'UP/x' names 'UP', which is not a namespace name"),
        ("ns/x_y", "'ns/x_y' names 'x_y', which is not a ConfigMap name"),
    ],
)
def test_a_bad_reference_is_exit_2_before_any_request(
    api: ApiServer, kubeconfig: Path, text: str, words: str
) -> None:
    result = run_cli("status", "--kubeconfig", str(kubeconfig), "--settings-from", text)

    assert result.code == 2, result
    line = assert_one_clear_line(result.stderr)
    assert f"--settings-from (NODE_HOLDER_SETTINGS_FROM): {words}; use NAMESPACE/NAME" in line
    assert line.endswith(f"of the ConfigMap, e.g. {REF}"), line
    assert api.requests == []


@pytest.mark.parametrize("command", ["simulate", "pin", "unpin"])
def test_only_status_reconcile_and_release_take_it(command: str) -> None:
    result = run_cli(command, "--settings-from", REF, "x")

    assert result.code == 2, result
    assert "No such option '--settings-from'" in assert_one_clear_line(result.stderr)


def test_the_cronjob_s_service_account_is_not_granted_configmaps() -> None:
    """The caller's own credentials read the ConfigMap; the runs' RBAC stays as it was."""
    rbac = list(yaml.safe_load_all((REPO / "cronjob/base/rbac.yaml").read_text()))
    rules = [rule for doc in rbac if doc for rule in doc.get("rules", [])]
    assert rules and "configmaps" not in json.dumps(rules)
