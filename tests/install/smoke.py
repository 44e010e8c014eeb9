"""`make image-test`: the built image, run the way the chart runs it, against the API test server.

Every command comes from `helm template` of the chart with its default values: the CronJob's
pod, the uninstall hook's Job and the `helm test` pod, each with its own arguments, its
environment (`env` and `envFrom` from the ConfigMap rendered beside it, resolved as the kubelet
resolves them), its user and group, `readOnlyRootFilesystem`, `allowPrivilegeEscalation` and
its volumes (an `emptyDir` is a tmpfs). Like a container runtime, the harness starts each
command from the image's writable layer (`buildah from` + `buildah mount`) in a mount and PID
namespace of its own: the root file system remounted read-only, a tmpfs /tmp, /proc, a minimal
/dev, and the service account (token, ca.crt, namespace) mounted read-only at its usual path with
KUBERNETES_SERVICE_HOST/PORT pointing at the test server, which serves HTTPS on 127.0.0.1 with
a certificate for that address. The process gets exactly the pod's environment (no HOME: the
image's uid 65532 has no passwd entry, and not every runtime sets one), then
`setpriv --no-new-privs` and `chroot --userspec`.

What differs from a pod (docs/maintainers/releases.md, "The image"): the network is the host's
loopback, not a pod network and a Service; the token is the test server's admin token (the
chart's RBAC is checked by tests/install); no seccomp profile, no cgroup limits, no /etc/hosts or
/etc/resolv.conf from the kubelet.

Steps, in order; the run fails (exit 1) if any step fails: `--version`; `reconcile` that holds
(the nodes include Karpenter nodes a few minutes old); a second `reconcile` that writes nothing;
`status`; `release` (every hold gone, every other annotation as before); `reconcile` again; the
uninstall hook's command (the CronJob suspended, the holds gone); the `helm test` pod's command.

    python -m tests.install.smoke --image localhost/karpenter-node-holder:dev-amd64 \
        --helm .venv/tools/helm4
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

import reconcile
from reconcile.rule.settings import DEFAULT_ANNOTATION, OWN_ANNOTATIONS, OWNERSHIP_MARKER
from tests.kubeapi.apiserver import ApiServer

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "karpenter-node-holder"
RELEASE = "node-holder"
NAMESPACE = "kube-system"  # a namespace the test server has (as in tests/install/test_chart.py)
SERVICE_ACCOUNT = PurePosixPath("/var/run/secrets/kubernetes.io/serviceaccount")
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
SHOWN = 2000  # characters of a failed command's output shown


class Unsupported(Exception):
    """The rendered chart uses something this harness cannot reproduce: say so, never guess."""


# --------------------------------------------------------------------------- the rendered pods


@dataclass(frozen=True)
class Pod:
    """One rendered pod's container, with what the kubelet would give it."""

    name: str
    spec: dict[str, Any]
    container: dict[str, Any]
    env: dict[str, str]
    deadline: int | None


def render(helm: str) -> list[dict[str, Any]]:
    """`helm template` of the chart with its defaults, hooks and test pod included."""
    out = subprocess.run(
        [helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HELM_CACHE_HOME": "/tmp/helm-cache", "HELM_CONFIG_HOME": "/tmp/helm"},
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def pods(objs: list[dict[str, Any]]) -> dict[str, Pod]:
    """The CronJob's pod, the uninstall hook's (pre-delete Job) and the `helm test` pod."""
    configmaps = {
        o["metadata"]["name"]: o.get("data") or {} for o in objs if o["kind"] == "ConfigMap"
    }
    found: dict[str, Pod] = {}
    for obj in objs:
        hook = (obj["metadata"].get("annotations") or {}).get("helm.sh/hook")
        if obj["kind"] == "CronJob":
            key, job = "cronjob", obj["spec"]["jobTemplate"]["spec"]
            spec, deadline = job["template"]["spec"], job.get("activeDeadlineSeconds")
        elif obj["kind"] == "Job" and hook == "pre-delete":
            key, spec = "uninstall hook", obj["spec"]["template"]["spec"]
            deadline = obj["spec"].get("activeDeadlineSeconds")
        elif obj["kind"] == "Pod" and hook == "test":
            key, spec, deadline = "helm test", obj["spec"], obj["spec"].get("activeDeadlineSeconds")
        else:
            continue
        (container,) = spec["containers"]
        name = f"{obj['kind']} {obj['metadata']['name']}"
        env = container_env(container, configmaps, obj["metadata"])
        found[key] = Pod(name, spec, container, env, deadline)
    missing = {"cronjob", "uninstall hook", "helm test"} - found.keys()
    if missing:
        raise Unsupported(f"the rendered chart has no {', '.join(sorted(missing))}")
    return found


def container_env(
    container: dict[str, Any], configmaps: dict[str, dict[str, str]], meta: dict[str, Any]
) -> dict[str, str]:
    """`envFrom`, then `env` (a later definition wins), as the kubelet resolves them."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        ref = source.get("configMapRef")
        if ref is None:
            raise Unsupported(f"envFrom {source}: only configMapRef is reproduced")
        if ref["name"] not in configmaps:
            if ref.get("optional"):
                continue
            raise Unsupported(f"envFrom: ConfigMap {ref['name']} is not in the rendered chart")
        prefix = source.get("prefix", "")
        env |= {prefix + key: str(value) for key, value in configmaps[ref["name"]].items()}
    for var in container.get("env") or []:
        env[var["name"]] = _value(var, configmaps, meta)
    return env


def _value(var: dict[str, Any], configmaps: dict[str, dict[str, str]], meta: dict[str, Any]) -> str:
    source = var.get("valueFrom")
    if source is None:
        value = str(var.get("value", ""))
        if "$(" in value:
            raise Unsupported(f"env {var['name']}: $(VAR) references are not reproduced")
        return value
    if "configMapKeyRef" in source:
        ref = source["configMapKeyRef"]
        value = configmaps.get(ref["name"], {}).get(ref["key"])
        if value is None:
            raise Unsupported(f"env {var['name']}: {ref} is not in the rendered chart")
        return str(value)
    field = source.get("fieldRef", {}).get("fieldPath")
    if field in ("metadata.namespace", "metadata.name"):
        return str(meta.get(field.split(".")[1], NAMESPACE))
    raise Unsupported(f"env {var['name']}: valueFrom {source} is not reproduced")


# --------------------------------------------------------------------------- the image


@dataclass(frozen=True)
class Image:
    """An image's config and a writable container file system made from it, as a runtime does."""

    name: str
    config: dict[str, Any]
    container: str
    rootfs: Path


@contextmanager
def mounted(name: str) -> Iterator[Image]:
    """`buildah from` + `buildah mount`; the container is removed afterwards."""
    inspect = _run(["buildah", "inspect", "--type", "image", name])
    config = json.loads(inspect)["OCIv1"]["config"]
    container = _run(["buildah", "from", "--pull-never", name]).strip()
    try:
        rootfs = Path(_run(["buildah", "mount", container]).strip())
        yield Image(name, config, container, rootfs)
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False)


def inside(root: Path, path: PurePosixPath) -> Path:
    """`path` in the container, symlinks resolved within `root` (/var/run -> /run)."""
    current = PurePosixPath("/")
    for part in path.parts[1:]:
        candidate = current / part
        for _ in range(40):
            host = root / candidate.relative_to("/")
            if not host.is_symlink():
                break
            target = PurePosixPath(os.readlink(host))
            joined = target if target.is_absolute() else candidate.parent / target
            candidate = PurePosixPath(os.path.normpath(joined))
        current = candidate
    return root / current.relative_to("/")


def _run(cmd: list[str]) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


# --------------------------------------------------------------------------- running a pod


@dataclass(frozen=True)
class Cluster:
    """The API test server, and the service account a pod of it would mount."""

    api: ApiServer
    service_account: Path


def run_pod(image: Image, pod: Pod, cluster: Cluster, args: list[str] | None = None):
    """Run `pod`'s container (or its command with `args` instead of its own) in `image`."""
    spec, container = pod.spec, pod.container
    context = {**(spec.get("securityContext") or {}), **(container.get("securityContext") or {})}
    image_user = (image.config.get("User") or "0:0").split(":")
    uid = context.get("runAsUser", int(image_user[0]))
    gid = context.get("runAsGroup", int(image_user[1]) if len(image_user) > 1 else 0)
    if uid == 0 and context.get("runAsNonRoot"):
        raise Unsupported(f"{pod.name}: runAsNonRoot with uid 0 would not start")
    groups = [gid, *spec.get("securityContext", {}).get("supplementalGroups", [])]
    if "fsGroup" in (spec.get("securityContext") or {}):
        groups.append(spec["securityContext"]["fsGroup"])

    command = container.get("command") or image.config.get("Entrypoint") or []
    given = args if args is not None else container.get("args")
    if given is None and not container.get("command"):
        given = image.config.get("Cmd") or []
    argv = [*command, *(given or [])]

    api = cluster.api
    env = dict(item.split("=", 1) for item in image.config.get("Env") or [])
    env |= {
        "HOSTNAME": f"{RELEASE}-smoke",
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(api.port),
        "KUBERNETES_PORT": f"tcp://127.0.0.1:{api.port}",
    }
    env |= pod.env

    script = _mount_script(image, pod, cluster, read_only=context.get("readOnlyRootFilesystem"))
    privileges = ["--no-new-privs"] if context.get("allowPrivilegeEscalation") is False else []
    chroot = [
        "chroot",
        f"--userspec={uid}:{gid}",
        f"--groups={','.join(map(str, dict.fromkeys(groups)))}",
        str(image.rootfs),
        *argv,
    ]
    inner = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), "setpriv", *privileges, *chroot]
    namespaces = ["unshare", "--mount", "--propagation", "private", "--pid", "--fork"]
    return subprocess.run(
        [*namespaces, "--kill-child", "sh", "-euc", script, "sh", *inner],
        capture_output=True,
        text=True,
        timeout=pod.deadline,
        check=False,
    )


def _mount_script(image: Image, pod: Pod, cluster: Cluster, read_only: bool | None) -> str:
    """Mounts as a runtime makes them, in the namespace `run_pod` creates, then `exec "$@"`."""
    root = image.rootfs
    q = shlex.quote
    volumes = {v["name"]: v for v in pod.spec.get("volumes") or []}
    lines = [f"mount --bind {q(str(root))} {q(str(root))}"]
    proc, dev = inside(root, PurePosixPath("/proc")), inside(root, PurePosixPath("/dev"))
    proc.mkdir(exist_ok=True)
    dev.mkdir(exist_ok=True)
    lines += [
        f"mount -t proc proc {q(str(proc))}",
        f"mount -t tmpfs -o mode=755 tmpfs {q(str(dev))}",
    ]
    for node in DEV_NODES:
        lines += [f": >{q(str(dev / node))}", f"mount --bind /dev/{node} {q(str(dev / node))}"]
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        lines.append(f"ln -s /proc/self/fd/{number} {q(str(dev / name))}")
    lines.append(f"ln -s /proc/self/fd {q(str(dev / 'fd'))}")
    for mount in pod.container.get("volumeMounts") or []:
        volume = volumes[mount["name"]]
        if "emptyDir" not in volume:
            raise Unsupported(f"{pod.name}: volume {volume} is not reproduced (emptyDir only)")
        size = (volume["emptyDir"] or {}).get("sizeLimit", "64Mi").replace("i", "").lower()
        target = inside(root, PurePosixPath(mount["mountPath"]))
        target.mkdir(parents=True, exist_ok=True)
        lines.append(f"mount -t tmpfs -o mode=1777,size={size} tmpfs {q(str(target))}")
    if pod.spec.get("automountServiceAccountToken", True):
        target = inside(root, SERVICE_ACCOUNT)
        target.mkdir(parents=True, exist_ok=True)
        lines.append(f"mount --bind -o ro {q(str(cluster.service_account))} {q(str(target))}")
    if read_only:
        lines.append(f"mount -o remount,bind,ro {q(str(root))}")
    return "\n".join([*lines, 'exec "$@"'])


# --------------------------------------------------------------------------- the cluster


@contextmanager
def cluster(directory: Path, objs: list[dict[str, Any]]) -> Iterator[Cluster]:
    """The API test server over HTTPS on 127.0.0.1, with old nodes and two Karpenter nodes a
    few minutes old, the chart's CronJob, and the service account's files for a pod."""
    cert, key = directory / "tls.crt", directory / "tls.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=kubernetes", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    api = ApiServer()
    api.tls = context
    now = api.now()
    api.add_nodes(12, created=lambda i: now - timedelta(days=2 + i))
    api.add_nodes(
        2,
        prefix="ip-10-1-",
        created=lambda i: now - timedelta(minutes=3 + i),
        labels={"karpenter.sh/nodepool": "default"},
    )
    for obj in objs:
        if obj["kind"] == "CronJob":
            api.add_batch("cronjobs", obj)
    account = directory / "serviceaccount"
    account.mkdir()
    for name, content in (
        ("token", api.token("admin")),
        ("ca.crt", cert.read_text()),
        ("namespace", NAMESPACE),
    ):
        (account / name).write_text(content)
        (account / name).chmod(0o644)
    directory.chmod(0o755)
    with api:
        yield Cluster(api, account)


# --------------------------------------------------------------------------- the steps


@dataclass(frozen=True)
class Step:
    """One command and what must be true after it."""

    title: str
    pod: str
    args: list[str] | None
    check: Callable[[subprocess.CompletedProcess[str]], str | None]


def steps(api: ApiServer, cronjob: Pod, hook: Pod) -> list[Step]:
    """The commands a release of the chart runs, each with the outcome it must have."""
    keys = [k.strip() for k in cronjob.env.get("HOLD_ANNOTATION", DEFAULT_ANNOTATION).split(",")]
    before = {name: api.annotations(name) for name in api.node_names()}
    writes: list[int] = []

    def held() -> list[str]:
        return [
            name
            for name in api.node_names()
            if OWNERSHIP_MARKER in (notes := api.annotations(name))
            and all(notes.get(k) == "true" for k in keys)
        ]

    def holds(_: Any) -> str | None:
        writes.append(len(api.writes()))
        return None if held() else f"no node carries {', '.join(keys)} and {OWNERSHIP_MARKER}"

    def writes_nothing(_: Any) -> str | None:
        count = len(api.writes()) - writes[-1]
        return f"{count} write(s) to nodes" if count else None

    def released(_: Any) -> str | None:
        for name, was in before.items():
            now = api.annotations(name)
            if {k: v for k, v in now.items() if k not in OWN_ANNOTATIONS} != was:
                return f"node {name}: annotations {now}, before the holds {was}"
            if OWNERSHIP_MARKER in now:
                return f"node {name} still carries {OWNERSHIP_MARKER}"
        return None

    def hook_ran(result: Any) -> str | None:
        namespace, name = hook.container["args"][-1].split("/")
        cronjob_now = api.get_batch("cronjobs", namespace, name) or {}
        if not cronjob_now.get("spec", {}).get("suspend"):
            return f"CronJob {namespace}/{name} is not suspended"
        return released(result)

    def version(result: Any) -> str | None:
        return None if reconcile.__version__ in result.stdout else f"no {reconcile.__version__}"

    return [
        Step("--version", "cronjob", ["--version"], version),
        Step("reconcile: holds", "cronjob", None, holds),
        Step("reconcile again: writes nothing", "cronjob", None, writes_nothing),
        Step("status", "cronjob", ["status"], lambda _: None),
        Step("release: every hold gone", "cronjob", ["release"], released),
        Step("reconcile: holds again", "cronjob", None, holds),
        Step("uninstall hook: suspends, releases", "uninstall hook", None, hook_ran),
        Step("helm test: status", "helm test", None, lambda _: None),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.install.smoke", description=__doc__)
    parser.add_argument("--image", required=True, help="an image in buildah's local storage")
    parser.add_argument("--helm", required=True, help="the helm binary that renders the chart")
    args = parser.parse_args(argv)
    objs = render(args.helm)
    rendered = pods(objs)
    failed = 0
    with (
        tempfile.TemporaryDirectory(prefix="node-holder-smoke-") as tmp,
        cluster(Path(tmp), objs) as kube,
        mounted(args.image) as image,
    ):
        print(
            f"{image.name}: uid {rendered['cronjob'].spec['securityContext']['runAsUser']}, "
            f"read-only root, API test server at {kube.api.url}"
        )
        plan = steps(kube.api, rendered["cronjob"], rendered["uninstall hook"])
        for number, step in enumerate(plan, 1):
            pod = rendered[step.pod]
            started = time.monotonic()
            try:
                result = run_pod(image, pod, kube, step.args)
                problem = f"exit {result.returncode}" if result.returncode else step.check(result)
            except subprocess.TimeoutExpired:
                result, problem = None, f"still running after the pod's deadline ({pod.deadline} s)"
            took = time.monotonic() - started
            print(
                f"{'ok  ' if problem is None else 'FAIL'} {number}/{len(plan)} {step.title} "
                f"({pod.name}, {took:.1f} s)" + (f": {problem}" if problem else "")
            )
            if problem is not None:
                failed += 1
                if result is not None:
                    print(shown(result))
    print(f"{len(plan) - failed} passed, {failed} failed")
    return 1 if failed else 0


def shown(result: subprocess.CompletedProcess[str]) -> str:
    """The end of a failed command's stdout and stderr, indented."""
    parts = []
    for label, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        if text.strip():
            tail = text[-SHOWN:]
            parts.append(
                f"    {label}:\n" + "\n".join("      " + line for line in tail.splitlines())
            )
    return "\n".join(parts)


if __name__ == "__main__":
    sys.exit(main())
