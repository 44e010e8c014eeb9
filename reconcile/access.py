"""Cluster access: which cluster, as whom, resolved like kubectl without touching the network.

Order (the first that applies wins):

1. `--kubeconfig` (NODE_HOLDER_KUBECONFIG), else `$KUBECONFIG`: a list of files separated by
   `os.pathsep`; as with kubectl, entries that do not exist are skipped (all missing is an
   error naming them) and the rest are merged. `--context` picks a context, else the
   merged `current-context`;
2. inside a pod (`KUBERNETES_SERVICE_HOST` set): the pod's service account token;
3. `~/.kube/config`.

Every failure is a `ConfigError` (exit 2) naming the setting and a fix, raised before any
request: a missing context, a credential plugin (`exec`) that is missing, fails, prints
something other than an ExecCredential or does not finish within the run's `--timeout`,
certificate data that is not base64, certificate files that do not exist or do not load.
The plugin runs once per run (a run is shorter than any token it hands out). The result is
the official client's `Configuration`; `reconcile.client` sends the requests.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import os
import signal
import ssl
import subprocess
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.config import incluster_config, kube_config

from reconcile.client import redact
from reconcile.settings import ClusterAccess, ConfigError

log = logging.getLogger(__name__)

IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
IN_CLUSTER_CA = Path("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
FIX_KUBECONFIG = "check --kubeconfig/KUBECONFIG and --context"


def load_configuration(access: ClusterAccess, pool_size: int, plugin_timeout: float = 45.0) -> Any:
    """Resolve cluster access (see the module docstring); every failure is a ConfigError.

    `plugin_timeout` bounds an exec credential plugin: the run's --timeout.
    """
    cfg = client.Configuration()
    explicit = access.kubeconfig or os.environ.get("KUBECONFIG")
    default = Path.home() / ".kube" / "config"
    try:
        if explicit:
            _load_kubeconfig(_existing(explicit), access.context, cfg, plugin_timeout)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            _load_in_cluster(access, cfg)
        elif default.exists():
            _load_kubeconfig([str(default)], access.context, cfg, plugin_timeout)
        else:
            raise ConfigError(
                "no cluster access: not running in a pod (KUBERNETES_SERVICE_HOST is not set) "
                "and no kubeconfig found; pass --kubeconfig or set KUBECONFIG"
            )
    except ConfigError:
        raise  # already one line naming the fix (ConfigError is a ValueError: keep it first)
    except config.ConfigException as exc:
        detail = redact(" ".join(str(exc).split()))
        raise ConfigError(f"cannot load cluster access: {detail}; {FIX_KUBECONFIG}") from None
    except (ValueError, TypeError, KeyError, OSError, yaml.YAMLError) as exc:
        detail = redact(" ".join(str(exc).split())) or type(exc).__name__
        raise ConfigError(
            f"cannot load cluster access: malformed kubeconfig ({detail}); "
            "check --kubeconfig/KUBECONFIG"
        ) from None
    _check_server_url(str(cfg.host or ""))
    _check_tls_files(cfg)
    if cfg.verify_ssl is False:
        _warn_once_about_insecure_tls(str(cfg.host))
    cfg.connection_pool_maxsize = max(pool_size, 1)
    cfg.retries = False  # our own retry policy is the only one (reconcile.retry)
    return cfg


# --- kubeconfig --------------------------------------------------------------------


def _existing(paths: str) -> list[str]:
    """The entries of a kubeconfig list that exist; kubectl skips the others."""
    entries = [p for p in paths.split(os.pathsep) if p]
    found = [p for p in entries if Path(p).expanduser().exists()]
    if not found:
        missing = ", ".join(entries) or repr(paths)
        raise ConfigError(
            f"--kubeconfig/KUBECONFIG: {missing} does not exist; point it at a "
            "kubeconfig file, or unset it to use the in-cluster service account"
        )
    return found


def _load_kubeconfig(paths: list[str], context: str | None, cfg: Any, timeout: float) -> None:
    merger = kube_config.KubeConfigMerger(os.pathsep.join(paths))
    merged = merger.config
    if merged is None or not isinstance(merged.value, Mapping):
        raise ConfigError(
            f"cannot load cluster access: {paths[0]} is not a kubeconfig; "
            "check --kubeconfig/KUBECONFIG"
        )
    # kubectl: the first file to set current-context wins (the merger keeps the last one).
    for path in merger.paths:
        current = (merger.config_files.get(path) or {}).get("current-context")
        if current:
            merged.value["current-context"] = current
            break
    if context is not None:
        names = [str(getattr(c, "value", c).get("name")) for c in merged.value["contexts"]]
        if context not in names:
            known = ", ".join(sorted(names)) or "none"
            raise ConfigError(
                f'context "{context}" does not exist (contexts: {known}); fix --context '
                "(NODE_HOLDER_CONTEXT) or unset it to use the kubeconfig's current-context"
            )
    loader = _Loader(config_dict=merged, active_context=context, config_base_path=None)
    loader.plugin_timeout = timeout
    loader.check_certificates()
    loader.load_and_set(cfg)


class _Loader(kube_config.KubeConfigLoader):  # type: ignore[misc]
    """The official loader, with a credential plugin that is bounded and fails loudly.

    The official one runs the plugin without a time limit and, when it fails, logs the
    error and sends the requests without credentials (a misleading 401 later).
    """

    plugin_timeout: float = 45.0

    def _load_from_exec_plugin(self) -> bool | None:
        if not self._user or "exec" not in self._user:
            return None
        base_path = self._get_base_path(self._cluster.path)
        spec = self._user["exec"].value
        cluster = self._cluster.value if spec.get("provideClusterInfo") else None
        status = run_exec_plugin(spec, base_path, self.plugin_timeout, cluster)
        if status.get("token"):
            self.token = f"Bearer {status['token']}"
            return True
        for key in ("clientCertificateData", "clientKeyData"):
            if not isinstance(status.get(key), str):
                raise _plugin_error(self._user["exec"].value, "printed no token nor certificate")
        self.cert_file = kube_config.FileOrData(
            status, None, data_key_name="clientCertificateData", base64_file_content=False
        ).as_file()
        self.key_file = kube_config.FileOrData(
            status, None, data_key_name="clientKeyData", base64_file_content=False
        ).as_file()
        return True

    def check_certificates(self) -> None:
        """Certificate data that is not base64 and files that do not exist: exit 2, named."""
        server = str(self._cluster.safe_get("server") or "")
        if not server.startswith("https"):
            return  # the client reads no certificate for plain http
        sections = (("cluster", self._cluster, "certificate-authority"),)
        if self._user:
            sections += (
                ("user", self._user, "client-certificate"),
                ("user", self._user, "client-key"),
            )
        for where, node, key in sections:
            data, path = node.safe_get(f"{key}-data"), node.safe_get(key)
            if data:
                try:
                    base64.b64decode(str(data), validate=True)
                except (binascii.Error, ValueError):
                    raise ConfigError(
                        f"kubeconfig {where} entry: {key}-data is not base64; "
                        "fix it in the kubeconfig (--kubeconfig/KUBECONFIG)"
                    ) from None
            elif path:
                full = Path(self._get_base_path(node.path) or ".", str(path))
                if not full.is_file():
                    raise ConfigError(
                        f"kubeconfig {where} entry: {key} file {full} does not exist; "
                        "fix the path or use the -data form"
                    )


def run_exec_plugin(
    spec: Mapping[str, Any],
    cwd: str | None,
    timeout: float,
    cluster: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run a client.authentication.k8s.io credential plugin once, bounded; its `status`.

    With `provideClusterInfo`, the plugin is told the cluster, as kubectl tells it.
    """
    command = str(spec.get("command") or "")
    if not command:
        raise ConfigError(f"kubeconfig user exec: no command; {FIX_KUBECONFIG}")
    api_version = str(spec.get("apiVersion") or "client.authentication.k8s.io/v1")
    env = dict(os.environ)
    env.update({str(e["name"]): str(e["value"]) for e in spec.get("env") or ()})
    request: dict[str, Any] = {"interactive": False}
    if cluster is not None:
        request["cluster"] = _exec_cluster(cluster)
    env["KUBERNETES_EXEC_INFO"] = json.dumps(
        {"apiVersion": api_version, "kind": "ExecCredential", "spec": request}
    )
    try:
        done = _run_bounded([command, *(str(a) for a in spec.get("args") or ())], env, cwd, timeout)
    except FileNotFoundError:
        hint = " ".join(str(spec.get("installHint") or "").split())
        raise _plugin_error(spec, "was not found", hint or "install it or fix its path") from None
    except PermissionError:
        raise _plugin_error(spec, "is not executable") from None
    except subprocess.TimeoutExpired:
        raise _plugin_error(
            spec, f"did not finish within --timeout ({timeout:g}s)", "does it wait for input?"
        ) from None
    said = " ".join(done.stderr.split())[-300:]
    if done.returncode != 0:
        raise _plugin_error(spec, f"failed (exit {done.returncode})", said or "no message")
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        raise _plugin_error(
            spec, "printed something that is not JSON", repr(done.stdout[:60])
        ) from None
    status = answer.get("status") if isinstance(answer, dict) else None
    if not isinstance(status, dict) or answer.get("kind") != "ExecCredential":
        raise _plugin_error(spec, "printed no ExecCredential", repr(done.stdout[:60]))
    if answer.get("apiVersion") != api_version:
        raise _plugin_error(
            spec, f"answered {answer.get('apiVersion')!r}, not the {api_version!r} asked for"
        )
    return status


def _exec_cluster(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The cluster as an ExecCredential spec names it (camelCase; the plugin's extension)."""
    names = {
        "server": "server",
        "tls-server-name": "tlsServerName",
        "insecure-skip-tls-verify": "insecureSkipTLSVerify",
        "certificate-authority-data": "certificateAuthorityData",
        "proxy-url": "proxyURL",
    }
    found = {camel: cluster[key] for key, camel in names.items() if cluster.get(key) is not None}
    for extension in cluster.get("extensions") or ():
        if extension.get("name") == "client.authentication.k8s.io/exec":
            found["config"] = extension.get("extension")
    return found


def _run_bounded(
    args: list[str], env: dict[str, str], cwd: str | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run a plugin; past `timeout`, kill it and whatever it started (its process group)."""
    with subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,  # a CronJob has nobody to answer a prompt
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd or None,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=max(timeout, 0.1))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _plugin_error(spec: Mapping[str, Any], what: str, detail: str = "") -> ConfigError:
    tail = f": {detail}" if detail else ""
    return ConfigError(
        f'credential plugin "{spec.get("command")}" (kubeconfig user exec) {what}{tail}'
    )


# --- in-cluster ----------------------------------------------------------------------


def _load_in_cluster(access: ClusterAccess, cfg: Any) -> None:
    if access.context:
        raise ConfigError(
            "--context (NODE_HOLDER_CONTEXT) needs a kubeconfig; inside a pod the "
            "service account is used, so unset it or pass --kubeconfig"
        )
    if not IN_CLUSTER_TOKEN.is_file():
        raise ConfigError(
            "inside a pod (KUBERNETES_SERVICE_HOST is set) but no service account token at "
            f"{IN_CLUSTER_TOKEN}: mount it (automountServiceAccountToken: true on the pod "
            "or its ServiceAccount) or pass --kubeconfig"
        )
    # The client re-reads the token file once a minute (docs/operations-notes.md).
    incluster_config.InClusterConfigLoader(
        token_filename=str(IN_CLUSTER_TOKEN), cert_filename=str(IN_CLUSTER_CA)
    ).load_and_set(cfg)


# --- checks --------------------------------------------------------------------------


def _check_server_url(host: str) -> None:
    """A kubeconfig without a usable server URL is bad input (exit 2), not an outage to retry."""
    try:
        url = urllib3.util.parse_url(host)
    except ValueError:
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(
            f"cannot load cluster access: the cluster's server {redact(host)!r} is not an "
            f"http(s) URL; {FIX_KUBECONFIG}"
        )


def _check_tls_files(cfg: Any) -> None:
    """Certificates that do not load fail here, named, rather than as a TLS error per request."""
    if not str(cfg.host).startswith("https"):
        return
    context = ssl.create_default_context()
    try:
        if cfg.ssl_ca_cert:
            context.load_verify_locations(cafile=cfg.ssl_ca_cert)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"the cluster's certificate-authority does not load ({exc}); {FIX_KUBECONFIG}"
        ) from None
    try:
        if cfg.cert_file:
            context.load_cert_chain(cfg.cert_file, cfg.key_file or None)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"the user's client-certificate/client-key do not load ({exc}); {FIX_KUBECONFIG}"
        ) from None


def _warn_once_about_insecure_tls(host: str) -> None:
    """Say once, through our logger, what urllib3 would say on every request."""
    warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
    log.warning(
        "insecure-skip-tls-verify is set for %s: the server's certificate is not checked",
        redact(host),
    )
