"""What the API boundary refuses and how it says so: node timestamps, a 403 on an Event.

Through the real CLI and the API test server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clusters import run_cli
from tests.helpers import OURS, assert_one_clear_line, old, young
from tests.kubeapi.apiserver import ApiServer, Fault

EVENTS = "/api/v1/namespaces/default/events"


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-11-22",
        "2024-W01-1",
        "2026-11-22T10:00:00",
        "2026-11-22 10:00:00Z",
        "9999-12-31T23:59:59Z",
    ],
)
def test_a_creation_timestamp_that_is_not_rfc_3339_changes_nothing(
    api: ApiServer, kubeconfig: Path, stamp: str
) -> None:
    young(api, "fine")
    old(api, "odd")

    def set_stamp(obj: dict[str, Any]) -> None:
        obj["metadata"]["creationTimestamp"] = stamp

    api.edit_node("odd", set_stamp)  # stored as given (a real API server writes RFC 3339)

    result = run_cli("reconcile", "--kubeconfig", str(kubeconfig))

    assert result.code == 1, result.stderr
    line = assert_one_clear_line(result.stderr)
    assert "node/odd" in line and repr(stamp) in line and "nothing was changed" in line
    assert "unexpected" not in line
    assert api.writes() == []


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
