"""Helpers shared by the feature folders: node builders, a real subprocess, waiting on the server.

Everything goes through the API test server over real HTTP; nothing here mocks our code.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from reconcile.cluster.access import connection_for
from reconcile.cluster.client import Client
from reconcile.rule.settings import ClusterAccess
from tests.kubeapi.apiserver import ApiServer, RequestInfo

KEY = "karpenter.sh/do-not-disrupt"
MARKER = "node-holder.dev/owned-annotations"
OURS = {KEY: "true", MARKER: KEY}
NODES = "/api/v1/nodes"
REPO = Path(__file__).resolve().parents[1]
ERROR = "node-holder: error: "
#: Tools the suite runs when they are installed; CI sets this (.ci/run, the GitHub workflow),
#: so that a missing one fails there instead of skipping.
REQUIRE_TOOLS = os.environ.get("NODE_HOLDER_REQUIRE_TOOLS") == "1"


def prometheus_tool(name: str) -> str:
    """`prometheus` or `promtool` of Debian 12's prometheus package (2.42), which the
    real-Prometheus tests assume; without it they skip with one line saying how to install it."""
    found = shutil.which(name)
    if found is None:
        why = (
            "prometheus is not installed: on Debian 12, apt-get install prometheus (2.42, "
            "as root: make prom-tools); elsewhere, put Prometheus 2.42's prometheus and promtool "
            "(github.com/prometheus/prometheus/releases) on PATH"
        )
        if REQUIRE_TOOLS:
            pytest.fail(why)
        pytest.skip(why)
    return found


def old(api: ApiServer, *names: str, annotations: dict[str, str] | None = None) -> None:
    """Nodes three hours old: they start no hold."""
    for name in names:
        created = api.now() - timedelta(hours=3)
        api.add_node(name, created=created, eks=False, annotations=annotations)


def young(api: ApiServer, name: str, annotations: dict[str, str] | None = None) -> None:
    """A node two minutes old: it holds the cluster."""
    created = api.now() - timedelta(minutes=2)
    api.add_node(name, created=created, eks=False, annotations=annotations)


def kube_for(kubeconfig: str | Path, request_timeout: float = 5.0, pool_size: int = 4) -> Client:
    """A client like the CLI builds, for tests that call `run_once` directly."""
    connection = connection_for(ClusterAccess(kubeconfig=str(kubeconfig)))
    return Client(connection, request_timeout=request_timeout, pool_size=pool_size)


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    """Wait for a condition the server makes true (not a sleep standing in for one)."""
    end = time.monotonic() + timeout
    pause = threading.Event()
    while not condition():
        if time.monotonic() > end:
            raise AssertionError("condition not reached within the test's patience")
        pause.wait(0.005)


class Arrivals:
    """Counts requests as they arrive, so a test can wait until the server has answered all.

    A client that timed out or was killed leaves its request running in the server;
    `quiesce()` waits until every request that arrived has been logged (answered).
    """

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.count = 0
        self._lock = threading.Lock()
        api.on_request(self._seen)

    def _seen(self, _req: RequestInfo) -> None:
        with self._lock:
            self.count += 1

    def quiesce(self) -> None:
        """Wait until the log holds every request that arrived."""
        wait_until(lambda: len(self.api.requests) >= self.count)

    def reset(self) -> None:
        """Empty the request log and the count together (call it when quiet)."""
        with self._lock:
            self.api.reset_log()
            self.count = 0


def spawn(kubeconfig: str | Path, *args: str, command: str = "reconcile") -> subprocess.Popen:
    """The real console entry point in its own process, as the CronJob runs it."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    env.pop("KUBECONFIG", None)
    return subprocess.Popen(
        [sys.executable, "-m", "reconcile", command, "--kubeconfig", str(kubeconfig), *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_python(
    *args: str, env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """`python ARGS` from the repository's root, as the Makefile runs its scripts. The timeout
    only guards against a hang: a loaded machine may take minutes, and that is no failure."""
    command = [sys.executable, *args]
    return subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(ERROR)]


def assert_one_clear_line(stderr: str) -> str:
    """Exactly one line on stderr, the error line, and no traceback; returns it."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(ERROR), stderr
    assert "Traceback" not in stderr
    return lines[0]
