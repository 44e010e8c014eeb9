"""The shared scenarios (tests/scenarios.py) against the API test server."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.clusters import ServerCluster
from tests.kubeapi.apiserver import ApiServer
from tests.scenarios import SCENARIOS


@pytest.fixture
def cluster(tmp_path) -> Iterator[ServerCluster]:
    with ApiServer() as api:
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        yield ServerCluster(api, kubeconfig)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_scenario(cluster: ServerCluster, scenario: Callable[[ServerCluster], None]) -> None:
    scenario(cluster)
