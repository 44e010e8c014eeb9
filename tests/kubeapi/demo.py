"""`make demo`, second half: the main job for real, against the API test server.

    python -m tests.kubeapi.demo

Starts the API test server from this checkout (`python -m tests.kubeapi.apiserver`,
three nodes days old), then plays a short scale-up through real `node-holder reconcile`
runs, each a fresh process talking HTTP to the server as the CronJob's pod would: a
person pins one node by hand, a new node starts a hold, a second one extends it, the
hold ends once the youngest node is older than the hold duration, and the hand-set
annotation survives. The server's clock is moved forward between runs (its test-only
`/debug/clock` endpoint) instead of waiting 20 minutes. Prints `status` and the Events,
stops the server. Every step is checked: the demo exits 1 if the story did not happen.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
KEY = "karpenter.sh/do-not-disrupt"
MARKER = "node-holder.dev/owned-annotations"


class DemoFailed(Exception):
    """The cluster is not in the state the story says: a bug worth reporting."""


class Server:
    """The API test server as a child process, and the few requests the demo makes."""

    def __init__(self, workdir: Path) -> None:
        self.kubeconfig = workdir / "kubeconfig.yaml"
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "tests.kubeapi.apiserver", "--nodes", "3", "--young"),
                *("0", "--seed", "7", "--debug-endpoints", "--kubeconfig-out"),
                str(self.kubeconfig),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line.startswith("listening on "):
            self.stop()
            raise DemoFailed(f"the API test server did not start: {line!r}")
        self.url = line.split()[2]
        config = yaml.safe_load(self.kubeconfig.read_text())
        self.token = config["users"][0]["user"]["token"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def call(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> Any:
        headers = {"Accept": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/merge-patch+json"
        request = urllib.request.Request(self.url + path, data, headers, method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"null")

    def nodes(self) -> dict[str, dict[str, str]]:
        """Every node's annotations, by name."""
        items = self.call("GET", "/api/v1/nodes")["items"]
        return {n["metadata"]["name"]: n["metadata"].get("annotations") or {} for n in items}

    def add_node(self, name: str) -> None:
        self.call("POST", f"/debug/nodes?name={name}", auth=False)

    def advance(self, minutes: int) -> None:
        self.call("POST", f"/debug/clock?advance={minutes * 60}", auth=False)

    def annotate(self, node: str, key: str, value: str) -> None:
        self.call("PATCH", f"/api/v1/nodes/{node}", {"metadata": {"annotations": {key: value}}})

    def events(self) -> list[dict[str, Any]]:
        items = self.call("GET", "/api/v1/namespaces/default/events")["items"]
        return sorted(items, key=lambda e: (e.get("lastTimestamp") or "", e["metadata"]["name"]))


def node_holder(server: Server, command: str, *args: str) -> None:
    """Run the real CLI in its own process, as the CronJob does, and show its output."""
    print(f"\n$ node-holder {' '.join((command, *args))}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOLD_", "NODE_HOLDER_"))}
    done = subprocess.run(
        [sys.executable, "-m", "reconcile", command, *args, "--kubeconfig", str(server.kubeconfig)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    for line in (done.stdout + done.stderr).rstrip().splitlines():
        print(f"  {line}")
    if done.returncode != 0:
        raise DemoFailed(f"node-holder {command} exited {done.returncode}")


def expect(server: Server, held: set[str], pinned: str, what: str) -> None:
    """Exactly `held` carry the hold this tool owns; `pinned` keeps the hand-set value."""
    nodes = server.nodes()
    ours = {n for n, a in nodes.items() if MARKER in a and a.get(KEY) == "true"}
    if ours != held or nodes[pinned].get(KEY) != "true" or MARKER in nodes[pinned]:
        raise DemoFailed(f"{what}: expected holds on {sorted(held)}, found {sorted(ours)}")
    print(f"  -> {what}")


def story(server: Server) -> None:
    old = sorted(server.nodes())
    pinned, others = old[0], set(old[1:])
    print(f"Three nodes, days old: {', '.join(old)}.")
    print(f'A person pins {pinned} by hand: {KEY}: "true" (not this tool\'s).')
    server.annotate(pinned, KEY, "true")
    node_holder(server, "reconcile")
    expect(server, set(), pinned, "no young node: nothing held, nothing written")

    print("\nScale-up: node batch-1 joins.")
    server.add_node("batch-1")
    node_holder(server, "reconcile")
    expect(server, others | {"batch-1"}, pinned, "hold started on every node but the pinned one")

    print("\n8 minutes later node batch-2 joins.")
    server.advance(8)
    server.add_node("batch-2")
    node_holder(server, "reconcile")
    held = others | {"batch-1", "batch-2"}
    expect(server, held, pinned, "hold extended: one write, for the new node")

    print("\n15 minutes later: batch-2 is 15 minutes old.")
    server.advance(15)
    node_holder(server, "reconcile")
    expect(server, held, pinned, "still held (batch-1 is 23m old, but batch-2 is not 20m yet)")

    print("\n6 minutes later: the youngest node is 21 minutes old.")
    server.advance(6)
    node_holder(server, "reconcile")
    expect(server, set(), pinned, f"released; {pinned} still carries the hand-set annotation")

    node_holder(server, "status", "--nodes")
    print("\nEvents recorded on the nodes (kubectl get events):")
    for event in server.events():
        print(f"  {event['reason']:<13} node/{event['involvedObject']['name']}: {event['message']}")


def main() -> int:
    print("node-holder for real: reconcile runs against the API test server (tests/kubeapi)")
    with tempfile.TemporaryDirectory(prefix="node-holder-demo-") as tmp:
        server = Server(Path(tmp))
        try:
            print(f"API test server started at {server.url}")
            story(server)
        except DemoFailed as exc:
            print(f"demo: {exc}", file=sys.stderr)
            return 1
        finally:
            server.stop()
        print("\nAPI test server stopped.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
