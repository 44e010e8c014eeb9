"""The floor: download and parse the metadata-only node pages with urllib3 and json, nothing else.

No kubeconfig parsing, no client library, no decision, no report: whatever node-holder's
steady run costs on top of this is its own overhead. Same pages as node-holder asks for
(`as=PartialObjectMetadataList`, limit 500, gzip accepted); the cyclic GC is off, as any
short-lived process may do. With `--nodepools`, first the NodePool list as node-holder's steady
run asks for it (reconcile/cluster/nodepools.py with the annotation mechanism: metadata-only,
one page, no limit): the floor of a run that reads both.

Usage: python benchmarks/floor_list.py SERVER_URL TOKEN [--nodepools]
"""

from __future__ import annotations

import gc
import json
import sys

import urllib3

ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"


def main(server: str, token: str, nodepools: bool = False) -> int:
    gc.disable()
    http = urllib3.PoolManager(retries=False)
    headers = {"Accept": ACCEPT, "Accept-Encoding": "gzip", "Authorization": f"Bearer {token}"}
    pools = 0
    if nodepools:
        response = http.request("GET", f"{server}{NODEPOOLS}", headers=headers)
        if response.status != 200:
            print(f"floor: NodePools: HTTP {response.status}", file=sys.stderr)
            return 1
        pools = len(json.loads(response.data)["items"] or [])
    count, token_ = 0, ""
    while True:
        fields = {"limit": "500", **({"continue": token_} if token_ else {})}
        response = http.request("GET", f"{server}/api/v1/nodes", fields=fields, headers=headers)
        if response.status != 200:
            print(f"floor: HTTP {response.status}", file=sys.stderr)
            return 1
        page = json.loads(response.data)
        count += len(page["items"])
        token_ = page["metadata"].get("continue") or ""
        del page
        if not token_:
            break
    print(f"{count} nodes" + (f", {pools} NodePools" if nodepools else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], "--nodepools" in sys.argv[3:]))
