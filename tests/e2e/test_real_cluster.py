"""The shared scenarios against a real cluster (kind, k3d, EKS), opt-in.

Set NODE_HOLDER_E2E_KUBECONFIG to a kubeconfig whose identity may create,
patch and delete Nodes. Each scenario creates Node objects labelled
node-holder.dev/e2e=true (no kubelet behind them), confines the tool to them
with selectors, and deletes them afterwards. Holds last a few seconds there,
because a real API server's clock cannot be moved.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

from tests.clusters import RealCluster, ServerCluster
from tests.scenarios import SCENARIOS

KUBECONFIG = os.environ.get("NODE_HOLDER_E2E_KUBECONFIG")

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not KUBECONFIG,
        reason="set NODE_HOLDER_E2E_KUBECONFIG to a real cluster's kubeconfig to run these",
    ),
]


@pytest.fixture
def cluster() -> Iterator[RealCluster]:
    real = RealCluster(api=None, kubeconfig=str(KUBECONFIG), hold=timedelta(seconds=4))
    try:
        yield real
    finally:
        real.cleanup()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_scenario_on_a_real_cluster(
    cluster: RealCluster, scenario: Callable[[ServerCluster], None]
) -> None:
    scenario(cluster)
