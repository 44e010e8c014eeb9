"""Two kinds of cluster the same scenarios run against.

`ServerCluster` wraps the project's Kubernetes API test server: the clock
can jump, and the request log counts writes. `RealCluster` talks to the cluster
named by NODE_HOLDER_E2E_KUBECONFIG (kind, k3d, EKS): it creates labelled
Node objects, and time passes for real (the scenarios then use a hold of a few
seconds). Both confine the tool to their own nodes with a label selector, so a
real cluster's real nodes are never touched.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from reconcile.cli import main
from tests.kubeapi.apiserver import ApiServer

E2E_LABEL = "node-holder.dev/e2e"
SCOPE_ARGS = ("--trigger-selector", f"{E2E_LABEL}=true", "--node-selector", f"{E2E_LABEL}=true")


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()

    @property
    def json(self) -> Any:
        """With --output json: the whole result, always the last line of stdout."""
        return json.loads(self.lines[-1])


def run_cli(*args: str | os.PathLike[str], env: dict[str, str] | None = None) -> CliResult:
    """Run the real entry point in-process, as the console script would: argv is text."""
    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.update(env or {})
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main([os.fspath(arg) for arg in args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return CliResult(code, out.getvalue(), err.getvalue())


@dataclass
class ServerCluster:
    """The API test server, with a clock the scenario can move."""

    api: ApiServer
    kubeconfig: str
    hold: timedelta = timedelta(minutes=20)
    real: bool = False

    def add_node(
        self,
        name: str,
        *,
        age: timedelta = timedelta(0),
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> None:
        self.api.add_node(
            name,
            created=self.api.now() - age,
            labels={E2E_LABEL: "true", **(labels or {})},
            annotations=annotations,
            eks=False,
        )

    def annotations(self, name: str) -> dict[str, str]:
        return self.api.annotations(name)

    def set_annotation(self, name: str, key: str, value: str | None) -> None:
        self.api.set_annotation(name, key, value)

    def mark_deleting(self, name: str) -> None:
        self.api.mark_deleting(name)

    def delete_node(self, name: str) -> None:
        self.api.delete_node(name)

    def pass_hold(self) -> None:
        """Let every existing node grow older than the hold duration."""
        self.api.advance_clock(self.hold + timedelta(seconds=1))

    def writes(self) -> int | None:
        return len(self.api.writes())

    def reconcile(self, *args: str, env: dict[str, str] | None = None) -> CliResult:
        return self.run("reconcile", *args, env=env)

    def run(self, command: str, *args: str, env: dict[str, str] | None = None) -> CliResult:
        hold = (
            ()
            if command == "release"
            else ("--hold-duration", f"{int(self.hold.total_seconds())}s")
        )
        scope = () if command == "release" else SCOPE_ARGS  # release takes no hold settings
        return run_cli(command, "--kubeconfig", self.kubeconfig, *hold, *scope, *args, env=env)


@dataclass
class RealCluster(ServerCluster):
    """A real cluster: Node objects created through the API; time passes for real."""

    created: list[str] = field(default_factory=list)
    real: bool = True

    def __post_init__(self) -> None:
        from kubernetes import client, config  # noqa: PLC0415

        self._client = client
        self.core = client.CoreV1Api(config.new_client_from_config(config_file=self.kubeconfig))

    def add_node(
        self,
        name: str,
        *,
        age: timedelta = timedelta(0),
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> None:
        assert age == timedelta(0), "a real cluster sets creationTimestamp itself"
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {E2E_LABEL: "true", **(labels or {})},
                "annotations": annotations or {},
            },
        }
        self.core.create_node(body)
        self.created.append(name)

    def annotations(self, name: str) -> dict[str, str]:
        return dict(self.core.read_node(name).metadata.annotations or {})

    def set_annotation(self, name: str, key: str, value: str | None) -> None:
        self.core.patch_node(
            name,
            {"metadata": {"annotations": {key: value}}},
            _content_type="application/merge-patch+json",
        )

    def mark_deleting(self, name: str) -> None:
        self.core.patch_node(
            name,
            {"metadata": {"finalizers": ["node-holder.dev/e2e-hold"]}},
            _content_type="application/merge-patch+json",
        )
        self.core.delete_node(name)

    def delete_node(self, name: str) -> None:
        self.core.delete_node(name)

    def pass_hold(self) -> None:
        time.sleep(self.hold.total_seconds() + 1.5)  # real time is the scenario here

    def writes(self) -> int | None:
        return None  # a real API server keeps no request log for us

    def cleanup(self) -> None:
        for name in self.created:
            with contextlib.suppress(Exception):
                self.core.patch_node(
                    name,
                    {"metadata": {"finalizers": None}},
                    _content_type="application/merge-patch+json",
                )
            with contextlib.suppress(Exception):
                self.core.delete_node(name)
