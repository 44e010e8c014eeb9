"""requirements/runtime.lock: the image's (and `make test`'s) runtime dependencies.

The lock must say the same as pyproject.toml: every dependency pinned to a
version the project accepts, every pin with its hashes, and the pinned set
closed (what each pinned package requires is pinned) and minimal (nothing
pinned that no dependency needs). Refresh it with `make lock`.
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
LOCK = ROOT / "requirements" / "runtime.lock"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# The image's platform (linux/amd64 and linux/arm64 alike) and Python.
ENVIRONMENT = {"python_version": "3.11", "python_full_version": "3.11.14", "sys_platform": "linux"}
ENVIRONMENT |= {"platform_system": "Linux", "os_name": "posix", "extra": ""}


def parse_lock(text: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) from a pip requirements file with hashes."""
    pins: dict[str, tuple[str, list[str]]] = {}
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


def requires(name: str) -> list[Requirement]:
    """What the installed distribution `name` requires on the image's platform."""
    found = []
    for text in metadata.requires(name) or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate(ENVIRONMENT):
            found.append(req)
    return found


PINS = parse_lock(LOCK.read_text())


def test_lock_says_how_to_refresh_it():
    assert "make lock" in LOCK.read_text().splitlines()[1]
    assert "uv pip compile pyproject.toml" in (ROOT / "Makefile").read_text()


def test_every_pin_has_a_sha256():
    for name, (_, hashes) in PINS.items():
        assert hashes, f"{name} has no hash"
        for digest in hashes:
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), (name, digest)


def test_every_project_dependency_is_pinned_to_an_accepted_version():
    for req in project_requirements():
        name = canonicalize_name(req.name)
        assert name in PINS, f"{req} is in pyproject.toml but not in the lock: make lock"
        version = PINS[name][0]
        assert req.specifier.contains(version, prereleases=True), (
            f"the lock pins {name}=={version}, pyproject.toml asks {req}: make lock"
        )


def test_the_venv_runs_the_locked_versions():
    """`make test` installs from the lock first, so the suite tests what the image ships."""
    for name, (version, _) in PINS.items():
        assert metadata.version(name) == version, f"{name}: run make test to reinstall"


def test_lock_is_closed_and_minimal():
    needed: set[str] = set()
    todo = [canonicalize_name(r.name) for r in project_requirements()]
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        assert name in PINS, f"{name} is required but not locked: make lock"
        for req in requires(name):
            assert req.specifier.contains(PINS.get(canonicalize_name(req.name), ("0",))[0], True)
            todo.append(canonicalize_name(req.name))
    assert set(PINS) == needed, f"locked but needed by nothing: {sorted(set(PINS) - needed)}"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda deps: [*deps, "attrs>=99"], "pins attrs"),
        (lambda deps: [*deps, "not-a-dependency-here>=1"], "not in the lock"),
    ],
)
def test_a_disagreement_is_caught(edit, message, monkeypatch):
    deps = edit(PYPROJECT["project"]["dependencies"])
    monkeypatch.setitem(PYPROJECT["project"], "dependencies", deps)
    with pytest.raises(AssertionError, match=message):
        test_every_project_dependency_is_pinned_to_an_accepted_version()
