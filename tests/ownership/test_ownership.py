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
    # Ours gone, the kubelet's kept. Its value is what the tool writes, so the claim stays
    # (a claim is never dropped for a key this run does not use) and is said, not acted on.
    assert api.annotations("n") == {KUBELET: "true", MARKER: KUBELET}
    assert f"kept: {KUBELET} on 1 node(s)" in result.stdout


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


def test_a_claim_outlives_runs_that_do_not_use_its_key(api: ApiServer, kubeconfig: Path) -> None:
    """The issue's sequence: hold with a custom key, release without it, switch back to the
    default key, release again: the claim on the custom key is kept (and said) until a
    release that names it; nobody is said to have changed anything."""
    custom = "example.com/hold"
    api.add_node("old", created=api.now() - timedelta(hours=3), eks=False)
    api.add_node("new", created=api.now() - timedelta(minutes=2), eks=False)
    kc = ("--kubeconfig", str(kubeconfig))
    ours_custom = {custom: "true", MARKER: custom}

    held = run_cli("reconcile", *kc, env={"HOLD_ANNOTATION": custom})
    plain_release = run_cli("release", *kc)
    assert held.code == plain_release.code == 0, plain_release.stderr
    assert api.annotations("old") == api.annotations("new") == ours_custom
    assert f"kept: {custom} on 2 node(s)" in plain_release.stdout

    # Back to the default key while the hold lasts: both keys are ours now.
    switched = run_cli("reconcile", *kc)
    assert switched.code == 0, switched.stderr
    both = {custom: "true", KEY: "true", MARKER: f"{custom},{KEY}"}
    assert api.annotations("old") == api.annotations("new") == both
    default_release = run_cli("release", *kc, "--output", "json")
    assert default_release.code == 0, default_release.stderr
    assert api.annotations("old") == api.annotations("new") == ours_custom
    assert default_release.json["summary"]["keptClaims"] == {custom: 2}

    named = run_cli("release", *kc, "--annotation", custom)
    assert named.code == 0, named.stderr
    assert "node/old: removed example.com/hold" in named.stdout
    assert api.annotations("old") == api.annotations("new") == {}
    for result in (held, plain_release, switched, default_release, named):
        assert "someone" not in result.stdout, result.stdout  # nobody changed anything


def test_a_claim_someone_changed_is_dropped_and_said_so(api: ApiServer, kubeconfig: Path) -> None:
    api.add_node(
        "n",
        created=api.now() - timedelta(hours=3),
        eks=False,
        annotations={KEY: "false", MARKER: KEY},
    )
    result = run_cli("reconcile", "--kubeconfig", str(kubeconfig))
    assert result.code == 0, result.stderr
    assert (
        f"node/n: dropped ownership of {KEY} (changed or removed by someone else)" in result.stdout
    )
    assert api.annotations("n") == {KEY: "false"}
