"""The GitHub workflows, the release's own logic, the chart it publishes and Renovate's config.

The workflows cannot run here. actionlint and zizmor (test extras) check them; what the release
decides (the version from the tag, the release notes, the released chart) lives in
scripts/release.py, which these tests run for real, on the repository and on copies of it with a
pre-release version or a broken changelog; the released chart is linted and rendered with the
pinned Helm, and packaged twice to show that the archive is reproducible.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import reconcile
from tests.install.test_chart import helm_path

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yml"
SCRIPT = ROOT / "scripts" / "release.py"
CHART = ROOT / "charts" / "karpenter-node-holder"
BIN = Path(sys.executable).parent
OWNER = "karpenter-node-holder"
IMAGE = f"ghcr.io/{OWNER}/karpenter-node-holder"
CHART_REF = f"oci://ghcr.io/{OWNER}/charts/karpenter-node-holder"
REQUIRE = os.environ.get("NODE_HOLDER_REQUIRE_TOOLS") == "1"
DIGEST = "sha256:" + "ab" * 32
# The files scripts/release.py reads, for a copy of the repository.
VERSIONED = [
    "reconcile/__init__.py",
    "charts/karpenter-node-holder",
    "cronjob/base/kustomization.yaml",
    "CHANGELOG.md",
    "scripts/release.py",
]


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


def release_py(*args: str, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return run(sys.executable, str(root / "scripts" / "release.py"), *args, cwd=root)


def steps_of(job: dict) -> list[str]:
    return [s.get("run", "") + " " + s.get("uses", "") for s in job["steps"]]


def index_of(job: dict, text: str) -> int:
    return next(i for i, step in enumerate(steps_of(job)) if text in step)


# --------------------------------------------------------------------------- the workflows


def test_the_workflows_run_make_test_and_make_image_test():
    found = workflows()
    assert set(found) == {"ci.yml", "release.yml"}
    ci = found["ci.yml"]
    assert "make test" in steps_of(ci["jobs"]["test"])[-1]
    assert "make image-test" in steps_of(ci["jobs"]["image"])[-1]
    assert "make test" in steps_of(found["release.yml"]["jobs"]["test"])[-1]
    triggers = ci[True]  # YAML 1.1 reads `on:` as True
    assert "push" in triggers and "pull_request" in triggers
    ci_run = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci_run[-2:] == ["make test", "make image-test"]


def test_ci_requires_the_tools_and_make_test_does_not():
    """A contributor's `make test` skips what is not installed (Debian's prometheus); CI, the
    workflows' test jobs (on Debian 12, whose prometheus the suite assumes) and .ci/run,
    requires every tool."""
    found = workflows()
    for job in (found["ci.yml"]["jobs"]["test"], found["release.yml"]["jobs"]["test"]):
        assert job["env"]["NODE_HOLDER_REQUIRE_TOOLS"] == "1"
        assert job["container"]["image"].startswith("docker.io/library/debian:bookworm")
    assert "export NODE_HOLDER_REQUIRE_TOOLS=1" in (ROOT / ".ci" / "run").read_text()
    assert "NODE_HOLDER_REQUIRE_TOOLS" not in (ROOT / "Makefile").read_text()


def test_release_tags_are_versions_and_pre_releases():
    tags = workflows()["release.yml"][True]["push"]["tags"]
    patterns = [re.compile(t.replace(".", r"\.").replace("[0-9]+", "[0-9]+")) for t in tags]

    def triggers(tag: str) -> bool:
        return any(p.fullmatch(tag) for p in patterns)

    for tag in ("v0.1.0", "v1.2.3-rc.1", "v1.2.3-beta.2", "v1.2.3-alpha.10"):
        assert triggers(tag), tag
    for tag in ("v1.2", "1.2.3", "v1.2.3-rc1", "v1.2.3-dev.1"):
        assert not triggers(tag), tag


def test_every_action_is_pinned_by_commit_sha_with_its_exact_version():
    uses = re.findall(
        r"^\s*(?:-\s*)?uses:\s*(\S+)(.*)$",
        "\n".join(p.read_text() for p in WORKFLOWS.glob("*.yml")),
        re.MULTILINE,
    )
    assert uses
    for ref, comment in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), ref
        assert re.fullmatch(r"\s*# v\d+\.\d+\.\d+", comment), f"{ref}: say the exact version"


def test_the_release_smoke_tests_both_architectures_before_it_pushes_them():
    jobs = workflows()["release.yml"]["jobs"]
    image = jobs["image"]
    assert set(image["needs"]) == {"test", "version"}
    build = steps_of(image)[index_of(image, "make image-test")]
    assert "IMAGE_BASES=release" in build and "for arch in amd64 arm64" in build
    built = re.search(r'IMAGE="(\S+)"', build).group(1)
    push = index_of(image, "buildah manifest push")
    assert index_of(image, "make image-test") < push, "smoke test first, then push"
    assert f"containers-storage:{built}" in steps_of(image)[push], "push what was tested"
    sign = steps_of(image)[index_of(image, "cosign sign")]
    assert '"$IMAGE@$DIGEST"' in sign, "sign the pushed digest, not a tag"
    assert index_of(image, "attest-build-provenance") > push
    assert index_of(image, "cosign attest --yes --type spdxjson") > index_of(image, "sbom-action")
    assert image["permissions"]["id-token"] == "write", "keyless signing needs OIDC"
    for name, job in jobs.items():
        assert "permissions" in job, f"{name}: job-level permissions"
        # attestations: write only where an attestation is made (the issue: drop it or use it)
        if job["permissions"].get("attestations") == "write":
            assert any("attest-build-provenance" in s for s in steps_of(job)), name


def test_the_release_signs_a_reproducible_chart_with_the_image_digest():
    jobs = workflows()["release.yml"]["jobs"]
    chart = jobs["chart"]
    assert set(chart["needs"]) == {"image", "version"}
    assert chart["env"]["DIGEST"] == "${{ needs.image.outputs.digest }}"
    assert "make tools" in [s.get("run") for s in chart["steps"]], "the tests' pinned helm"
    script = " ".join(steps_of(chart)[index_of(chart, "scripts/release.py chart")].split())
    order = [
        "scripts/release.py chart",
        "lint --strict",
        "SOURCE_DATE_EPOCH=",
        'package charts/karpenter-node-holder \\ --version "$VERSION" --app-version "$VERSION"',
        "push",
        "cosign sign --yes",
    ]
    positions = [script.index(part) for part in order]
    assert positions == sorted(positions), script
    assert chart["permissions"]["id-token"] == "write"
    notes = jobs["notes"]
    run_notes = steps_of(notes)[index_of(notes, "gh release create")]
    assert "scripts/release.py notes" in run_notes and "--prerelease" in run_notes


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


# --------------------------------------------------------------------------- scripts/release.py


def outputs(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


def test_the_tag_image_and_chart_the_release_produces_are_the_ones_everything_uses():
    version = reconcile.__version__
    proc = release_py("version", f"v{version}", "Karpenter-Node-Holder")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = outputs(proc)
    assert out["version"] == version and out["prerelease"] == "false"
    assert (out["image"], out["charts"]) == (IMAGE, f"oci://ghcr.io/{OWNER}/charts")
    assert int(out["epoch"]) > 0, "SOURCE_DATE_EPOCH: the tag's commit time"

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


def copy_repository(tmp_path: Path) -> Path:
    for name in VERSIONED:
        source, target = ROOT / name, tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)
    return tmp_path


def set_version(root: Path, semver: str, pep440: str) -> None:
    """What a maintainer bumps before tagging a pre-release."""
    now = reconcile.__version__
    for name, old, new in (
        ("reconcile/__init__.py", f'"{now}"', f'"{pep440}"'),
        ("charts/karpenter-node-holder/Chart.yaml", now, semver),
        ("cronjob/base/kustomization.yaml", f'"{now}"', f'"{semver}"'),
        ("CHANGELOG.md", f"## [{now}]", f"## [{semver}]"),
    ):
        path = root / name
        path.write_text(path.read_text().replace(old, new))


def test_a_pre_release_tag_works(tmp_path):
    root = copy_repository(tmp_path)
    set_version(root, "1.2.3-rc.1", "1.2.3rc1")
    out = outputs(proc := release_py("version", "v1.2.3-rc.1", OWNER, root=root))
    assert proc.returncode == 0, proc.stdout
    assert (out["version"], out["prerelease"]) == ("1.2.3-rc.1", "true")
    # ... and its chart is marked as a pre-release on Artifact Hub.
    assert (
        release_py(
            "chart", "1.2.3-rc.1", IMAGE, DIGEST, str(root / CHART.relative_to(ROOT)), root=root
        ).returncode
        == 0
    )
    chart = yaml.safe_load((root / CHART.relative_to(ROOT) / "Chart.yaml").read_text())
    assert chart["annotations"]["artifacthub.io/prerelease"] == "true"


@pytest.mark.parametrize("tag", ["v9.9.9", "v0.1.0-rc1", "0.1.0x", "v0.1.0-rc.1", "v0.1.0-dev.1"])
def test_a_tag_that_disagrees_with_the_repository_publishes_nothing(tag):
    proc = release_py("version", tag, OWNER)
    assert proc.returncode == 1
    (line,) = proc.stdout.splitlines()
    assert line.startswith(f"::error::tag {tag}: ")
    assert outputs(proc) == {}


def test_release_notes_are_the_changelog_section_with_upgrade_notes(tmp_path):
    version = reconcile.__version__
    proc = release_py("notes", version)
    assert proc.returncode == 0, proc.stdout
    assert "### Upgrade notes" in proc.stdout and "\n- " in proc.stdout
    root = copy_repository(tmp_path)
    changelog = root / "CHANGELOG.md"
    changelog.write_text(
        re.sub(r"^### Upgrade notes$", "### Notes", changelog.read_text(), flags=re.M)
    )
    proc = release_py("notes", version, root=root)
    assert proc.returncode == 1 and "Upgrade notes" in proc.stdout
    proc = release_py("version", f"v{version}", OWNER, root=root)
    assert proc.returncode == 1, "no notes, no release"


def test_the_released_chart_carries_the_digest_and_artifact_hub_annotations(tmp_path):
    helm = str(helm_path("helm4"))
    chart_dir = tmp_path / "karpenter-node-holder"
    shutil.copytree(CHART, chart_dir)
    version = reconcile.__version__
    assert release_py("chart", version, IMAGE, DIGEST, str(chart_dir)).returncode == 0
    assert run(helm, "lint", "--strict", str(chart_dir)).returncode == 0
    rendered = run(helm, "template", "x", str(chart_dir)).stdout
    images = set(re.findall(r"^\s*image: (\S+)$", rendered, re.M))
    assert images == {f"{IMAGE}@{DIGEST}"}, "every pod, the hook and the test pod by digest"
    # values.yaml keeps its comments: only the digest line changed.
    before, after = (CHART / "values.yaml").read_text(), (chart_dir / "values.yaml").read_text()
    changed = [
        (a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b
    ]
    assert changed == [('  digest: ""', f'  digest: "{DIGEST}"')]
    notes = yaml.safe_load((chart_dir / "Chart.yaml").read_text())["annotations"]
    changes = yaml.safe_load(notes["artifacthub.io/changes"])
    kinds = {"added", "changed", "deprecated", "removed", "fixed", "security"}
    assert changes and all(c["kind"] in kinds and c["description"] for c in changes)
    (image,) = yaml.safe_load(notes["artifacthub.io/images"])
    assert image["image"] == f"{IMAGE}:{version}@{DIGEST}"
    assert notes["artifacthub.io/prerelease"] == "false"
    bad = release_py("chart", version, IMAGE, "sha256:short", str(chart_dir))
    assert bad.returncode == 1 and "digest" in bad.stdout


def test_the_chart_archive_is_reproducible(tmp_path):
    """helm 4 package with SOURCE_DATE_EPOCH: the same bytes from the same files, whenever."""
    helm = str(helm_path("helm4"))
    archives = []
    for attempt in ("first", "second"):
        copy = tmp_path / attempt / "karpenter-node-holder"
        shutil.copytree(CHART, copy)
        for path in copy.rglob("*"):
            os.utime(path, (1_000_000 * len(attempt), 1_000_000 * len(attempt)))
        env = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000", "HELM_CONFIG_HOME": "/tmp/helm"}
        proc = run(helm, "package", str(copy), "-d", str(tmp_path / attempt), env=env)
        assert proc.returncode == 0, proc.stderr
        archives.append(next((tmp_path / attempt).glob("*.tgz")).read_bytes())
    assert archives[0] == archives[1]


# --------------------------------------------------------------------------- Artifact Hub


def test_artifact_hub_metadata():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    pyproject = (ROOT / "pyproject.toml").read_text()
    notes = chart["annotations"]
    assert f'license = "{notes["artifacthub.io/license"]}"' in pyproject
    (image,) = yaml.safe_load(notes["artifacthub.io/images"])
    assert image["image"] == f"{values['image']['repository']}:{chart['appVersion']}"
    assert set(image["platforms"]) == {"linux/amd64", "linux/arm64"}
    for link in yaml.safe_load(notes["artifacthub.io/links"]):
        assert link["url"].startswith(f"https://github.com/{OWNER}/"), link
    assert chart["maintainers"] and all(m["name"] for m in chart["maintainers"])
    prefix = f"https://raw.githubusercontent.com/{OWNER}/karpenter-node-holder/main/"
    assert chart["icon"].startswith(prefix)
    assert (ROOT / chart["icon"].removeprefix(prefix)).is_file(), "the icon is in the repository"
    # signKey is for PGP provenance files (a url is then mandatory); the chart is signed with
    # cosign, which Artifact Hub detects on OCI charts by itself.
    assert "artifacthub.io/signKey" not in notes
    repo = yaml.safe_load((ROOT / "artifacthub-repo.yml").read_text())
    assert set(repo) <= {"repositoryID", "owners", "ignore"}


# --------------------------------------------------------------------------- Renovate


RENOVATE = json.loads((ROOT / ".github" / "renovate.json").read_text())


def _files(pattern: str) -> list[str]:
    regex = re.compile(pattern.strip("/"))
    tracked = run("git", "ls-files", "--cached", "--others", "--exclude-standard").stdout.split()
    return [f for f in tracked if regex.search(f)]


def test_renovate_keeps_every_pin_current():
    """Action SHAs with exact versions, the base image digests, the runtime, test and build
    locks, the helm packages, and the build stage's Debian package: each is some manager's."""
    assert "helpers:pinGitHubActionDigestsToSemver" in RENOVATE["extends"]
    managers = set(RENOVATE["enabledManagers"])
    assert {"github-actions", "dockerfile", "pep621", "pip_requirements"} <= managers
    covered = {f for p in RENOVATE["pip_requirements"]["managerFilePatterns"] for f in _files(p)}
    locks = {f"requirements/{name}" for name in ("build.lock", "runtime.lock", "test.lock")}
    assert locks | {"requirements/helm.txt"} <= covered
    for custom in RENOVATE["customManagers"]:
        (pattern,) = custom["managerFilePatterns"]
        (target,) = _files(pattern)
        for match in custom["matchStrings"]:
            found = re.search(match.replace("(?<", "(?P<"), (ROOT / target).read_text())
            assert found and found["currentValue"], f"{custom['description']}: no match in {target}"
