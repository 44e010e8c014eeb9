"""What the API boundary refuses and how it says so: a 403 on an Event.

Through the real CLI and the API test server.
"""

from __future__ import annotations

from pathlib import Path

from tests.clusters import run_cli
from tests.helpers import OURS, old, young
from tests.kubeapi.apiserver import ApiServer, Fault

EVENTS = "/api/v1/namespaces/default/events"


def test_a_403_on_an_event_names_the_role_that_grants_it(api: ApiServer, kubeconfig: Path) -> None:
    old(api, "n1")
    young(api, "n2")
    api.inject(Fault(method="POST", path=f"^{EVENTS}$", status=403, times=None))

    result = run_cli("reconcile", "--kubeconfig", str(kubeconfig))

    assert result.code == 0, result.stderr  # the holds are in place; Events are best effort
    assert api.annotations("n1") == OURS
    said = result.stdout + result.stderr
    assert 'the Role "node-holder-events" in namespace "default"' in said, said
    assert "ClusterRole" not in said
