"""The command line itself: help, version, exit codes, one-line errors, JSON output."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import click
import pytest

from reconcile import __version__
from reconcile.cli import cli
from tests.clusters import run_cli
from tests.kubeapi.apiserver import ApiServer

COMMANDS = ["reconcile", "status", "release", "pin", "unpin"]


def test_help_does_not_import_the_kubernetes_client() -> None:
    """`--help` must stay fast: the Kubernetes client costs ~0.3 s to import."""
    code = (
        "import sys\n"
        "from reconcile.cli import main\n"
        "try:\n"
        "    main(['reconcile', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "assert 'kubernetes' not in sys.modules, 'kubernetes imported for --help'\n"
        "assert 'urllib3' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "--hold-duration" in done.stdout


def test_a_run_does_not_import_the_kubernetes_client(api: ApiServer, kubeconfig: Path) -> None:
    """A run reads the kubeconfig itself: importing `kubernetes` was a third of a steady run."""
    api.add_node("n1", created=api.now() - timedelta(hours=1), eks=False)
    code = (
        "import sys\n"
        "from reconcile.cli import main\n"
        "try:\n"
        f"    main(['reconcile', '--kubeconfig', {str(kubeconfig)!r}])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "assert 'kubernetes' not in sys.modules, 'kubernetes imported by a run'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "1 nodes" in done.stdout and len(api.requests) >= 1  # it did reach the server


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_has_an_environment_variable_shown_in_help(command: str) -> None:
    result = run_cli(command, "--help")
    assert result.code == 0
    params = [p for p in cli.commands[command].params if isinstance(p, click.Option)]
    params = [p for p in params if p.name != "help"]
    for param in params:
        assert param.envvar, f"{command} {param.name} has no environment variable"
        assert f"env var: {param.envvar}" in " ".join(result.stdout.split())


def test_top_level_help_lists_commands_and_exit_codes() -> None:
    result = run_cli("--help")
    assert result.code == 0
    for word in [*COMMANDS, "Exit codes", "do-not-disrupt"]:
        assert word in result.stdout


def test_version() -> None:
    result = run_cli("--version")
    assert result.code == 0 and __version__ in result.stdout


def test_python_dash_m_runs_the_same_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reconcile", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and __version__ in done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["reconcile", "--no-such-option"],
        ["nonsense"],
        ["reconcile", "--hold-scope", "galaxy"],
        ["reconcile", "--output", "yaml"],
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str]) -> None:
    result = run_cli(*args)
    assert result.code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("node-holder: error: ")
    assert "Traceback" not in result.stderr


def test_json_output_has_the_documented_fields(api: ApiServer, kubeconfig: Path) -> None:
    api.add_node("old", created=api.now() - timedelta(hours=2), eks=False)
    api.add_node("new", created=api.now() - timedelta(minutes=5), eks=False)
    result = run_cli("reconcile", "--kubeconfig", str(kubeconfig), "--output", "json")
    assert result.code == 0, result.stderr
    data = result.json
    assert data["held"] is True
    assert data["youngestNode"] == "new"
    created = datetime.fromisoformat(api.get_node("new")["metadata"]["creationTimestamp"])  # type: ignore[index]
    assert data["holdUntil"] == (created + timedelta(minutes=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    patches = [json.loads(line) for line in result.lines[:-1]]  # one per node, as it landed
    assert sorted(p["node"] for p in patches) == ["new", "old"]
    assert all(p["result"] == "patched" for p in patches)
    assert patches[0]["body"]["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    assert "patches" not in data  # the last line is a summary, whatever the cluster size
    assert data["errors"] == [] and data["errorsNotListed"] == 0
    assert len(data["windows"]) == 1 and data["windowsNotListed"] == 0
    assert data["summary"]["writes"] == 2
    assert [e["reason"] for e in data["events"]] == ["HoldStarted"]


def test_logs_go_to_stderr_as_json_lines_when_asked(api: ApiServer, kubeconfig: Path) -> None:
    args = ("--kubeconfig", str(kubeconfig), "-v", "--log-format", "json", "--output", "json")
    result = run_cli("reconcile", *args)
    assert result.code == 0
    assert all(json.loads(line) for line in result.lines)  # stdout is only JSON lines
    logs = [json.loads(line) for line in result.stderr.splitlines() if line.strip()]
    assert logs, "-v logs at least the run's summary"
    assert all({"time", "level", "message"} <= set(entry) for entry in logs)
    assert any(entry["message"].startswith("run finished") for entry in logs)
