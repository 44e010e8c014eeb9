"""Test-only control endpoints under `/debug/` for the standalone API test server.

The benchmark runs the server as a subprocess (so its CPU and memory stay out of the
measurements) and needs to read the request log and move the cluster between phases. These
endpoints exist only when the server is started with `--debug-endpoints`; they need no token,
are never recorded in the request log, and are not part of any Kubernetes API path:

- `GET /debug/requests[?reset=1]`: counters of the request log since the last reset (requests,
  writes that changed stored state, bytes in and out, by verb).
- `POST /debug/clock?advance=SECONDS`: move the server clock (as `ApiServer.advance_clock`).
- `POST /debug/nodes?name=NAME`: add an EKS-shaped node created now (a scale-up).
- `DELETE /debug/nodes/NAME`: remove a node outright.
- `GET /debug/annotated?key=KEY`: how many nodes there are and how many carry KEY.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from tests.kubeapi.apiserver import ApiServer, RequestRecord

PREFIX = "/debug/"


def request_stats(records: list[RequestRecord]) -> dict[str, Any]:
    """What one benchmark run cost the server, from its request log."""
    verbs: Counter[str] = Counter()
    for r in records:
        verbs[_verb(r)] += 1
    return {
        "requests": len(records),
        "writes": sum(1 for r in records if r.stored),
        "bytes_in": sum(r.bytes_in for r in records),
        "bytes_out": sum(r.bytes_out for r in records),
        "verbs": dict(verbs),
        "user_agents": sorted({r.user_agent.split("/")[0] for r in records}),
    }


def _verb(record: RequestRecord) -> str:
    segments = record.path.strip("/").split("/")
    collection = len(segments) % 2 == 1 if segments[:2] == ["api", "v1"] else False
    if record.method == "GET":
        return "list" if collection else "get"
    return record.method.lower()


def handle(api: ApiServer, method: str, raw_path: str) -> tuple[int, dict[str, Any]]:
    """Answer one `/debug/` request: (HTTP status, JSON body)."""
    url = urlsplit(raw_path)
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    what = url.path[len(PREFIX) :].strip("/")
    if what == "requests" and method == "GET":
        records = api.requests
        if query.get("reset") in ("1", "true"):
            api.reset_log()
        return 200, request_stats(records)
    if what == "clock" and method == "POST":
        api.advance_clock(timedelta(seconds=float(query.get("advance", "0"))))
        return 200, {"now": api.now().isoformat()}
    if what == "nodes" and method == "POST":
        name = query.get("name", "")
        if not name:
            return 400, {"error": "name is required"}
        api.add_node(name, created=api.now(), eks=True)
        return 201, {"name": name}
    if what.startswith("nodes/") and method == "DELETE":
        name = what.split("/", 1)[1]
        return (200 if api.delete_node(name) else 404), {"name": name}
    if what == "annotated" and method == "GET":
        key = query.get("key", "")
        with api.store.lock:
            entries = list(api.store.collections["nodes"].entries.values())
        carrying = sum(1 for e in entries if key in (e.obj["metadata"].get("annotations") or {}))
        return 200, {"nodes": len(entries), "with_key": carrying}
    return 404, {"error": f"no debug endpoint {method} {url.path}"}


def encode(status: int, body: dict[str, Any]) -> bytes:
    """A whole HTTP/1.1 response (the debug client reads it and may keep the connection)."""
    data = json.dumps(body).encode()
    return (
        f"HTTP/1.1 {status} {'OK' if status < 300 else 'Error'}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode() + data
