"""The ownership marker is only an annotation: it cannot make the tool remove any key."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.clusters import run_cli
from tests.kubeapi.apiserver import ApiServer

KEY = "karpenter.sh/do-not-disrupt"
MARKER = "node-holder.dev/owned-annotations"
KUBELET = "volumes.kubernetes.io/controller-managed-attach-detach"


@pytest.mark.parametrize("command", ["reconcile", "release"])
def test_a_marker_naming_a_foreign_key_never_removes_it(
    api: ApiServer, kubeconfig: Path, command: str
) -> None:
    annotations = {KUBELET: "true", KEY: "true", MARKER: f"{KEY},{KUBELET}"}
    api.add_node("n", created=api.now() - timedelta(hours=3), eks=False, annotations=annotations)

    result = run_cli(command, "--kubeconfig", str(kubeconfig))

    assert result.code == 0, result
    assert api.annotations("n") == {KUBELET: "true"}  # ours gone, the kubelet's kept


def test_a_well_known_hold_key_claimed_by_the_marker_is_still_released(
    api: ApiServer, kubeconfig: Path
) -> None:
    """Migration from Karpenter before v0.32: the old key is known, so it may go."""
    old = "karpenter.sh/do-not-consolidate"
    annotations = {old: "true", MARKER: old}
    api.add_node("n", created=api.now() - timedelta(hours=3), eks=False, annotations=annotations)
    result = run_cli("reconcile", "--kubeconfig", str(kubeconfig))
    assert result.code == 0, result
    assert api.annotations("n") == {}


def test_a_custom_key_is_released_only_when_named(api: ApiServer, kubeconfig: Path) -> None:
    custom = "example.com/hold"
    annotations = {custom: "true", MARKER: custom}
    api.add_node("n", created=api.now() - timedelta(hours=3), eks=False, annotations=annotations)

    without = run_cli("release", "--kubeconfig", str(kubeconfig), "--dry-run")
    named = run_cli("release", "--kubeconfig", str(kubeconfig), "--annotation", custom)

    assert without.code == named.code == 0
    assert f"remove {custom}" not in without.stdout
    assert api.annotations("n") == {}
