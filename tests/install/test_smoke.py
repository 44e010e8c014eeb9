"""What `make image-test` (tests/install/smoke.py) reads from the chart, checked without an image:
the pods it runs and their environment, resolved as the kubelet resolves it, and the paths it
mounts into the image's file system."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from tests.install.smoke import Unsupported, container_env, inside, pods, render
from tests.install.test_chart import helm_path

CONFIGMAPS = {"settings": {"HOLD_DURATION": "45m", "HOLD_SCOPE": "group"}, "other": {"K": "v"}}
META = {"name": "node-holder", "namespace": "platform"}


def test_env_is_resolved_as_the_kubelet_resolves_it():
    container = {
        "envFrom": [
            {"configMapRef": {"name": "settings"}},
            {"configMapRef": {"name": "other"}, "prefix": "X_"},
            {"configMapRef": {"name": "absent", "optional": True}},
        ],
        "env": [
            {"name": "HOLD_SCOPE", "value": "node"},  # env wins over envFrom
            {"name": "FROM_KEY", "valueFrom": {"configMapKeyRef": {"name": "other", "key": "K"}}},
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "EMPTY"},
        ],
    }
    assert container_env(container, CONFIGMAPS, META) == {
        "HOLD_DURATION": "45m",
        "HOLD_SCOPE": "node",
        "X_K": "v",
        "FROM_KEY": "v",
        "NS": "platform",
        "EMPTY": "",
    }


@pytest.mark.parametrize(
    "container",
    [
        {"envFrom": [{"secretRef": {"name": "s"}}]},
        {"envFrom": [{"configMapRef": {"name": "absent"}}]},
        {"env": [{"name": "A", "value": "$(B)/x"}]},
        {"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
        {"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "other", "key": "no"}}}]},
    ],
)
def test_what_the_smoke_test_cannot_reproduce_is_refused_not_guessed(container):
    with pytest.raises(Unsupported):
        container_env(container, CONFIGMAPS, META)


def test_the_chart_renders_the_three_pods_the_smoke_test_runs():
    found = pods(render(str(helm_path("helm4"))))
    assert set(found) == {"cronjob", "uninstall hook", "helm test"}
    assert found["cronjob"].container["args"] == ["reconcile"]
    assert found["helm test"].container["args"] == ["status"]
    assert found["uninstall hook"].container["args"][0] == "release"
    for pod in found.values():
        # The settings reach every pod, from env or from a ConfigMap through envFrom.
        assert "HOLD_DURATION" in pod.env and "HOLD_ANNOTATION" in pod.env, pod.name
        assert pod.spec["securityContext"]["runAsUser"] == 65532
        assert pod.container["securityContext"]["readOnlyRootFilesystem"] is True


def test_mount_targets_resolve_symlinks_inside_the_image(tmp_path: Path):
    root = tmp_path / "rootfs"
    (root / "run").mkdir(parents=True)
    (root / "var").mkdir()
    (root / "var" / "run").symlink_to("/run")  # absolute: the image's /run, not the host's
    (root / "etc").mkdir()
    (root / "etc" / "alt").symlink_to("../run")
    target = PurePosixPath("/var/run/secrets/kubernetes.io/serviceaccount")
    assert inside(root, target) == root / "run/secrets/kubernetes.io/serviceaccount"
    assert inside(root, PurePosixPath("/etc/alt/x")) == root / "run/x"
    assert inside(root, PurePosixPath("/tmp")) == root / "tmp"
