"""Measuring one program run, and driving the API test server that runs in its own process.

Each contender is a child process: wall time from the parent's clock, CPU time and peak RSS
from `os.wait4` (that child alone; `ru_maxrss` is per process). What the run cost the API
server (requests, stored writes, bytes sent) comes from the server's request log through its
test-only `/debug/` endpoints, and the server's own CPU time from /proc, so the server's work
is never counted against a contender.
"""

from __future__ import annotations

import compileall
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Usage:
    """What one child process cost on this side."""

    wall: float  # seconds
    cpu: float  # user + system seconds
    rss_mb: float  # peak resident set size, MiB
    code: int  # exit code


@dataclass(frozen=True)
class ServerCost:
    """What one run cost the API server, from its request log."""

    requests: int
    writes: int  # requests that changed stored state
    bytes_in: int
    bytes_out: int
    verbs: dict[str, int]
    cpu: float  # the server process's CPU seconds during the run


def run_measured(cmd: list[str], *, env: dict[str, str], output: Path) -> Usage:
    """Run `cmd` to completion; its stdout and stderr go to `output`."""
    with output.open("wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Usage(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode)


class TestServer:
    """`python -m tests.kubeapi.apiserver` with N EKS-shaped nodes, all days old."""

    def __init__(
        self, nodes: int, write_latency: float, workdir: Path, annotation_bytes: int = 0
    ) -> None:
        self.kubeconfig = workdir / f"kc-{nodes}.yaml"
        self._log = (workdir / f"server-{nodes}.log").open("wb")
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            [
                *python_cmd(),
                "-m",
                "tests.kubeapi.apiserver",
                "--nodes",
                str(nodes),
                "--young",
                "0",
                "--write-latency",
                str(write_latency),
                "--kubeconfig-out",
                str(self.kubeconfig),
                "--debug-endpoints",
                "--annotation-bytes",
                str(annotation_bytes),
            ],
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=child_env(),
            cwd=REPO,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        found = re.search(r"listening on (http://\S+)", line)
        if not found:
            self.stop()
            raise RuntimeError(f"the API test server did not start: {line!r}")
        self.url = found.group(1)
        self.startup = time.perf_counter() - started  # seconds to generate the nodes and listen
        cluster = yaml.safe_load(self.kubeconfig.read_text())
        self.token: str = cluster["users"][0]["user"]["token"]

    def _call(self, method: str, path: str) -> Any:
        request = urllib.request.Request(self.url + path, method=method)
        with urllib.request.urlopen(request, timeout=30) as reply:
            return json.loads(reply.read())

    def reset_log(self) -> None:
        self._call("GET", "/debug/requests?reset=1")

    def cost(self, cpu_before: float) -> ServerCost:
        """The request log since the last reset (and reset it), with the server's CPU time."""
        stats = self._call("GET", "/debug/requests?reset=1")
        return ServerCost(
            requests=stats["requests"],
            writes=stats["writes"],
            bytes_in=stats["bytes_in"],
            bytes_out=stats["bytes_out"],
            verbs=stats["verbs"],
            cpu=self.cpu() - cpu_before,
        )

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime

    def peak_rss_mb(self) -> float:
        """The server process's own peak RSS so far (VmHWM), MiB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def advance_clock(self, seconds: float) -> None:
        self._call("POST", f"/debug/clock?advance={seconds}")

    def add_young_node(self, name: str) -> None:
        """A node created now: Karpenter has just scaled up."""
        self._call("POST", f"/debug/nodes?name={name}")

    def delete_node(self, name: str) -> None:
        self._call("DELETE", f"/debug/nodes/{name}")

    def annotated(self, key: str) -> tuple[int, int]:
        """(nodes, nodes carrying `key`)."""
        found = self._call("GET", f"/debug/annotated?key={key}")
        return found["nodes"], found["with_key"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()


def byte_compile(package: Path = REPO / "reconcile") -> None:
    """The package's bytecode written first, as `pip install --compile` writes it in the image:
    with PYTHONDONTWRITEBYTECODE set (some shells and CI set it) every measured run would
    compile each module from source again, about 0.1 s of CPU no installed copy spends."""
    compileall.compile_dir(package, quiet=1)


def python_cmd() -> list[str]:
    return [sys.executable]


def child_env(**extra: str) -> dict[str, str]:
    """The environment for children: the repo importable, nothing else changed."""
    path = os.environ.get("PYTHONPATH", "")
    return {
        **os.environ,
        "PYTHONPATH": f"{REPO}{os.pathsep}{path}" if path else str(REPO),
        **extra,
    }
