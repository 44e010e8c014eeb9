"""The naive client: how this tool would look written the obvious way with the official client.

`list_node()` (every node as a typed V1Node model, one unpaged response), decide from the
server's Date header, then `patch_node` one node at a time with a dict body (which the client
sends as a strategic-merge patch and answers with a full V1Node model). Same decision as
node-holder's cluster scope: hold every node while the youngest is younger than 20 minutes.

Usage: python benchmarks/naive_client.py KUBECONFIG
"""

from __future__ import annotations

import sys
from datetime import timedelta
from email.utils import parsedate_to_datetime

from kubernetes import client, config

KEY = "karpenter.sh/do-not-disrupt"
HOLD = timedelta(minutes=20)


def main(kubeconfig: str) -> int:
    api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
    nodes, _, headers = api.list_node_with_http_info()
    now = parsedate_to_datetime(headers["Date"])
    youngest = max(node.metadata.creation_timestamp for node in nodes.items)
    held = now - youngest < HOLD
    patched = 0
    for node in nodes.items:
        has = KEY in (node.metadata.annotations or {})
        if held != has:
            value = "true" if held else None
            api.patch_node(node.metadata.name, {"metadata": {"annotations": {KEY: value}}})
            patched += 1
    print(f"{'held' if held else 'released'}: {patched} patched of {len(nodes.items)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
