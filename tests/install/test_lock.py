"""The locks in requirements/: every file `make test` and the image install, with its sha256.

- runtime.lock: the image's (and `make test`'s) runtime dependencies, from pyproject.toml;
- test.lock: the same plus the test extras (linters, pytest, the tool binaries), the runtime
  pins at runtime.lock's versions and hashes, so the suite tests what the image ships;
- build.lock: pip, setuptools and wheel: the installer and build backend of the image's build
  stage and of `make test`'s editable install ([build-system] in pyproject.toml).

Each must say the same as its source: every requirement pinned to a version the project accepts,
every pin with its hashes, and the pinned set closed (what each pinned package requires is
pinned) and minimal (nothing pinned that no requirement needs). Refresh them with `make lock`.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "requirements"
LOCK = REQUIREMENTS / "runtime.lock"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# The image's platform (linux/amd64 and linux/arm64 alike) and Python: Debian bookworm's 3.11.
ENVIRONMENT = {"python_version": "3.11", "python_full_version": "3.11.2", "sys_platform": "linux"}
ENVIRONMENT |= {"platform_system": "Linux", "os_name": "posix", "extra": ""}

Pins = dict[str, tuple[str, list[str]]]


def parse_lock(text: str) -> Pins:
    """name -> (version, hashes) from a pip requirements file with hashes."""
    pins: Pins = {}
    joined = re.sub(r"\\\n\s*", " ", text)
    for raw in joined.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        spec, *options = line.split(" --hash=")
        requirement = Requirement(spec.strip())
        (pin,) = requirement.specifier
        assert pin.operator == "==", f"{spec}: pinned with =="
        if requirement.marker and not requirement.marker.evaluate(ENVIRONMENT):
            continue
        pins[canonicalize_name(requirement.name)] = (pin.version, [o.strip() for o in options])
    return pins


def project_requirements() -> list[Requirement]:
    return [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]


def extra_requirements() -> list[Requirement]:
    return [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"]["test"]]


def build_requirements() -> list[Requirement]:
    return [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]


def requires(name: str) -> list[Requirement]:
    """What the installed distribution `name` requires on the image's platform."""
    found = []
    for text in metadata.requires(name) or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate(ENVIRONMENT):
            found.append(req)
    return found


PINS = parse_lock(LOCK.read_text())
TEST_PINS = parse_lock((REQUIREMENTS / "test.lock").read_text())
BUILD_PINS = parse_lock((REQUIREMENTS / "build.lock").read_text())
LOCKS = {"runtime.lock": PINS, "test.lock": TEST_PINS, "build.lock": BUILD_PINS}
SOURCES = {
    "runtime.lock": project_requirements,
    "test.lock": lambda: project_requirements() + extra_requirements(),
    "build.lock": lambda: [*build_requirements(), Requirement("pip")],
}


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_lock_says_how_to_refresh_it(lock):
    assert "make lock" in (REQUIREMENTS / lock).read_text().splitlines()[1]
    makefile = (ROOT / "Makefile").read_text()
    assert f"-o requirements/{lock}" in makefile, f"make lock does not write {lock}"


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_pin_has_a_sha256(lock):
    for name, (_, hashes) in LOCKS[lock].items():
        assert hashes, f"{lock}: {name} has no hash"
        for digest in hashes:
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), (name, digest)


def pinned_versions_accepted(pins: Pins, reqs: list[Requirement], lock: str) -> None:
    for req in reqs:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} is in pyproject.toml but not in {lock}: make lock"
        version = pins[name][0]
        assert req.specifier.contains(version, prereleases=True), (
            f"{lock} pins {name}=={version}, pyproject.toml asks {req}: make lock"
        )


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_requirement_is_pinned_to_an_accepted_version(lock):
    pinned_versions_accepted(LOCKS[lock], SOURCES[lock](), lock)


def test_build_in_is_pyprojects_build_system_plus_pip():
    text = (REQUIREMENTS / "build.in").read_text()
    listed = [Requirement(line) for line in text.splitlines() if line and line[0] != "#"]
    assert sorted(map(str, listed)) == sorted(map(str, SOURCES["build.lock"]()))


def test_the_runtime_pins_are_the_same_in_the_test_lock():
    """The suite runs on exactly the versions, and the files, the image installs."""
    for name, pin in PINS.items():
        assert TEST_PINS.get(name) == pin, f"{name}: test.lock differs from runtime.lock"


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_the_venv_runs_the_locked_versions(lock):
    """`make test` installs from the locks, so the suite tests what the image ships."""
    for name, (version, _) in LOCKS[lock].items():
        assert metadata.version(name) == version, f"{name} ({lock}): run make test to reinstall"


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_lock_is_closed_and_minimal(lock):
    pins = LOCKS[lock]
    needed: set[str] = set()
    todo = [canonicalize_name(r.name) for r in SOURCES[lock]()]
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        assert name in pins, f"{name} is required but not in {lock}: make lock"
        for req in requires(name):
            assert req.specifier.contains(pins.get(canonicalize_name(req.name), ("0",))[0], True)
            todo.append(canonicalize_name(req.name))
    assert set(pins) == needed, f"{lock}: locked but needed by nothing: {set(pins) - needed}"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda deps: [*deps, "click>=99"], r"runtime\.lock pins click"),
        (lambda deps: [*deps, "not-a-dependency-here>=1"], r"not in runtime\.lock"),
    ],
)
def test_a_disagreement_is_caught(edit, message, monkeypatch):
    deps = edit(PYPROJECT["project"]["dependencies"])
    monkeypatch.setitem(PYPROJECT["project"], "dependencies", deps)
    with pytest.raises(AssertionError, match=message):
        test_every_requirement_is_pinned_to_an_accepted_version("runtime.lock")


def test_a_build_backend_the_lock_does_not_satisfy_is_caught(monkeypatch):
    monkeypatch.setitem(PYPROJECT["build-system"], "requires", ["setuptools>=999", "wheel"])
    with pytest.raises(AssertionError, match=r"build\.lock pins setuptools"):
        test_every_requirement_is_pinned_to_an_accepted_version("build.lock")
