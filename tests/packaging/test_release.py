"""The GitHub workflows in .github/workflows: linted, pinned, and in step with the repository.

They cannot run here. actionlint and zizmor (test extras) check them; the release's version
step is run for real (bash) to show that the tag, the image and the chart reference it
produces are the ones the chart, the kustomize base, the Dockerfile and the docs use.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import reconcile

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yml"
CHART = ROOT / "charts" / "karpenter-node-holder"
BIN = Path(sys.executable).parent
OWNER = "karpenter-node-holder"
IMAGE = f"ghcr.io/{OWNER}/karpenter-node-holder"
CHART_REF = f"oci://ghcr.io/{OWNER}/charts/karpenter-node-holder"
REQUIRE = os.environ.get("NODE_HOLDER_REQUIRE_TOOLS") == "1"


def tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if found is None:
        if REQUIRE:
            pytest.fail(f"{name} is missing: make test installs it (test extras)")
        pytest.skip(f"{name} is not installed (test extras)")
    return found


def workflows() -> dict[str, dict]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(WORKFLOWS.glob("*.yml"))}


def run(*cmd: str, cwd: Path = ROOT, env: dict[str, str] | None = None):
    return subprocess.run(
        cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False
    )


def test_the_workflows_exist_and_run_make_test():
    found = workflows()
    assert set(found) == {"ci.yml", "release.yml"}
    for name, workflow in found.items():
        steps = [s.get("run") for s in workflow["jobs"]["test"]["steps"]]
        assert "make test" in steps, name
    triggers = found["ci.yml"][True]  # YAML 1.1 reads `on:` as True
    assert "push" in triggers and "pull_request" in triggers
    assert found["release.yml"][True]["push"]["tags"] == ["v[0-9]+.[0-9]+.[0-9]+"]


def test_every_action_is_pinned_by_commit_sha():
    uses = re.findall(
        r"^\s*(?:-\s*)?uses:\s*(\S+)(.*)$",
        "\n".join(p.read_text() for p in WORKFLOWS.glob("*.yml")),
        re.MULTILINE,
    )
    assert uses
    for ref, comment in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), ref
        assert re.match(r"\s*# v\d", comment), f"{ref}: say which version the SHA is"


def test_release_builds_both_architectures_with_sbom_provenance_and_a_signature():
    jobs = yaml.safe_load(RELEASE.read_text())["jobs"]
    image = jobs["image"]
    assert set(image["needs"]) == {"test", "version"}
    build = next(s for s in image["steps"] if "build-push-action" in s.get("uses", ""))
    assert build["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert build["with"]["sbom"] is True
    assert build["with"]["provenance"] == "mode=max"
    assert build["with"]["push"] is True
    sign = next(s for s in image["steps"] if "cosign sign" in s.get("run", ""))
    assert "$IMAGE@$DIGEST" in sign["run"], "sign the pushed digest, not a tag"
    assert image["permissions"]["id-token"] == "write", "keyless signing needs OIDC"
    chart = jobs["chart"]
    push = next(s for s in chart["steps"] if "helm" in s.get("run", "") and "push" in s["run"])
    assert '--version "$VERSION" --app-version "$VERSION"' in push["run"]
    assert "make tools" in [s.get("run") for s in chart["steps"]], "the tests' pinned helm"
    for name, job in jobs.items():
        assert "permissions" in job, f"{name}: job-level permissions"


def _version_step() -> str:
    steps = yaml.safe_load(RELEASE.read_text())["jobs"]["version"]["steps"]
    return next(s for s in steps if s.get("id") == "version")["run"]


def run_version_step(tmp_path: Path, tag: str, owner: str = "Karpenter-Node-Holder"):
    script = tmp_path / "version.sh"
    script.write_text(_version_step())
    output = tmp_path / "output"
    output.write_text("")
    env = {
        "PATH": os.environ["PATH"],
        "GITHUB_REF_NAME": tag,
        "GITHUB_REPOSITORY_OWNER": owner,
        "GITHUB_OUTPUT": str(output),
    }
    proc = run("bash", str(script), env=env)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return proc, outputs


def test_the_tag_image_and_chart_the_release_produces_are_the_ones_everything_uses(tmp_path):
    version = reconcile.__version__
    proc, out = run_version_step(tmp_path, f"v{version}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out == {"version": version, "image": IMAGE, "charts": f"oci://ghcr.io/{OWNER}/charts"}

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == version
    assert values["image"]["repository"] == IMAGE
    assert f"{out['charts']}/{chart['name']}" == CHART_REF
    base = yaml.safe_load((ROOT / "cronjob/base/kustomization.yaml").read_text())
    (entry,) = base["images"]
    assert (entry["newName"], entry["newTag"]) == (IMAGE, version)
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"ARG VERSION={version}" in dockerfile
    assert f"docker build -t {IMAGE}:{version} ." in dockerfile
    install = (ROOT / "docs" / "install.md").read_text()
    assert CHART_REF in install and IMAGE in install
    assert IMAGE in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("tag", ["v9.9.9", "v0.1.0-rc1", "0.1.0x"])
def test_a_tag_that_disagrees_with_the_repository_publishes_nothing(tmp_path, tag):
    proc, out = run_version_step(tmp_path, tag)
    assert proc.returncode == 1
    assert "::error::tag" in proc.stdout
    assert out == {}


def test_actionlint_passes():
    proc = run(tool("actionlint"), *map(str, sorted(WORKFLOWS.glob("*.yml"))))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor_passes():
    proc = run(tool("zizmor"), "--offline", "--no-progress", str(WORKFLOWS))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_linters_are_not_vacuous(tmp_path):
    bad = tmp_path / ".github" / "workflows"
    bad.mkdir(parents=True)
    (bad / "bad.yml").write_text(
        "on: pull_request_target\n"
        "jobs:\n"
        "  x:\n"
        "    runs-on: ubuntu-24.04\n"
        "    steps:\n"
        "      - uses: actions/checkout@v4\n"
        "      - run: echo ${{ github.event.pull_request.title }}\n"
        "      - run: echo ${{ matrix.nope }}\n"
    )
    assert run(tool("actionlint"), str(bad / "bad.yml")).returncode != 0
    proc = run(tool("zizmor"), "--offline", "--no-progress", str(bad))
    assert proc.returncode != 0
    for audit in ("unpinned-uses", "template-injection", "artipacked"):
        assert audit in proc.stdout, audit
