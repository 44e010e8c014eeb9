"""Cluster access: which cluster, as whom, resolved like kubectl without touching the network.

Every fault of the kubeconfig or the environment is a `ConfigError` (exit 2) naming the
setting and a fix, raised before any request; a fault of this reader is not one, so `-v` shows
its traceback. docs/operations-notes.md says where access comes from, every field read and
refused, and how tokens are renewed; docs/maintainers/releases.md ("Dependencies") why the
kubeconfig is read here and the official `kubernetes` client is not a dependency: its loader
alone takes longer to import than this module and everything it imports, and legacy
`auth-provider` users, the one thing only it served, are refused, naming exec plugins.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import importlib.util
import ipaddress
import json
import logging
import os
import signal
import ssl
import subprocess
import tempfile
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies

import urllib3

from reconcile.cluster.errors import redact
from reconcile.cluster.transport import AUTH_REFRESH_SECONDS, Connection, Credentials, anonymous
from reconcile.rule.settings import ClusterAccess, ConfigError

log = logging.getLogger(__name__)

IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
IN_CLUSTER_CA = Path("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
FIX_KUBECONFIG = "check --kubeconfig/KUBECONFIG and --context"
FIX_ENTRY = "fix it in the kubeconfig (--kubeconfig/KUBECONFIG)"
IN_A_POD = "inside a pod (KUBERNETES_SERVICE_HOST is set) but"
MOUNT_IT = "automountServiceAccountToken: true on the pod or its ServiceAccount"


def connection_for(access: ClusterAccess, plugin_timeout: float = 45.0) -> Connection:
    """Resolve cluster access; `plugin_timeout` (the run's --timeout) bounds an exec plugin."""
    explicit = access.kubeconfig or os.environ.get("KUBECONFIG")
    try:
        if explicit:
            found = _from_kubeconfig(_existing(explicit), access.context, plugin_timeout)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            found = _in_cluster(access)
        elif (default := _default_kubeconfig()) is not None:
            found = _from_kubeconfig([str(default)], access.context, plugin_timeout)
        else:
            raise ConfigError(
                "no cluster access: not running in a pod (KUBERNETES_SERVICE_HOST is not set) "
                "and no kubeconfig found; pass --kubeconfig or set KUBECONFIG"
            )
    except (OSError, UnicodeDecodeError, _NotYaml) as exc:
        # What reading and parsing a file can raise; the shape of what was parsed is checked
        # where it is read (ConfigError), so anything else is a fault of this reader.
        detail = redact(" ".join(str(exc).split())) or type(exc).__name__
        raise ConfigError(
            f"cannot load cluster access: malformed kubeconfig ({detail}); "
            "check --kubeconfig/KUBECONFIG"
        ) from None
    _check_tls(found)
    _check_proxy(found.proxy)
    if not found.verify:
        # Said once, through our logger, instead of by urllib3 on every request.
        warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
        log.warning(
            "insecure-skip-tls-verify is set for %s: the server's certificate is not checked",
            redact(found.server),
        )
    return found


# --- kubeconfig --------------------------------------------------------------------


def _default_kubeconfig() -> Path | None:
    """`~/.kube/config` if it exists. Looked for only when no other source applies: a
    container's user may have no home at all (no passwd entry, no HOME), which is simply
    "no default kubeconfig"."""
    try:
        default = Path.home() / ".kube" / "config"
    except (RuntimeError, KeyError, OSError):  # Path.home(): "Could not determine home"
        return None
    return default if default.exists() else None


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


@dataclass(frozen=True)
class _Entry:
    """A named cluster, user or context, with the folder its relative paths start from.

    Its fields are read typed: a list or a map where a string belongs is bad input, named.
    """

    value: Mapping[str, Any]
    base: Path
    kind: str  # "cluster", "user" or "context": what error lines call it

    def error(self, problem: str, fix: str = FIX_ENTRY) -> ConfigError:
        return ConfigError(f"kubeconfig {self.kind} entry: {problem}; {fix}")

    def text(self, key: str) -> str | None:
        """A string field, None when absent or empty."""
        value = self.value.get(key)
        if value is None or value == "":
            return None
        if isinstance(value, dict | list):
            kind = "map" if isinstance(value, dict) else "list"
            raise self.error(f"{key} must be a string, not a {kind}")
        return str(value)

    def flag(self, key: str) -> bool:
        """A true/false field; `"false"` in quotes is false (not a non-empty string: true)."""
        value = self.value.get(key)
        if value is None or isinstance(value, bool):
            return bool(value)
        if str(value).strip().lower() not in ("true", "false"):
            raise self.error(f"{key} must be true or false, not {value!r}")
        return str(value).strip().lower() == "true"

    def file_or_data(self, key: str) -> str | bytes | None:
        """`key-data` decoded (bytes), else the path of `key` (str), else None, as kubectl
        reads them (docs/operations-notes.md)."""
        data, path = self.text(f"{key}-data"), self.text(key)
        if data and path:
            raise self.error(f"both {key}-data and {key} are set")
        if data:
            try:
                return base64.b64decode(data.replace("\r", "").replace("\n", ""), validate=True)
            except (binascii.Error, ValueError):
                raise self.error(f"{key}-data is not base64") from None
        if path and not (self.base / path).is_file():
            raise self.error(
                f"{key} file {self.base / path} does not exist",
                "fix the path or use the -data form",
            )
        return str(self.base / path) if path else None

    def file(self, key: str) -> str | None:
        """The field as a file (urllib3 loads a client certificate from files only)."""
        found = self.file_or_data(key)
        return _private_file(found) if isinstance(found, bytes) else found


def _maps(value: Any, what: str, where: str | Path) -> list[Mapping[str, Any]]:
    """A list of maps (a kubeconfig's clusters, users, contexts; an exec plugin's env; a
    cluster's extensions), or bad input named."""
    items = value or []
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ConfigError(
            f"cannot load cluster access: {what} in {where} must be a list of maps; "
            f"{FIX_KUBECONFIG}"
        )
    return items


class _NotYaml(Exception):
    """A kubeconfig file that YAML cannot parse (yaml's own error, said as it says it)."""


@dataclass
class _Kubeconfig:
    """Files merged as kubectl merges them: the first definition of each name wins."""

    paths: list[str]
    current: str = ""
    named: dict[str, dict[str, _Entry]] = field(
        default_factory=lambda: {"cluster": {}, "user": {}, "context": {}}
    )

    @classmethod
    def read(cls, paths: list[str]) -> _Kubeconfig:
        import yaml  # noqa: PLC0415 (the CronJob's in-cluster run reads no YAML: 12 ms of start-up)

        merged = cls(paths)
        for path in paths:
            try:
                doc = yaml.safe_load(Path(path).expanduser().read_text())
            except yaml.YAMLError as exc:
                raise _NotYaml(str(exc)) from None
            if not isinstance(doc, dict):
                what = "is empty" if doc is None else "is not a kubeconfig"
                raise ConfigError(f"cannot load cluster access: {path} {what}; {FIX_KUBECONFIG}")
            base = Path(path).expanduser().resolve().parent
            for kind, named in merged.named.items():
                for item in _maps(doc.get(f"{kind}s"), f"{kind}s", path):
                    if "name" not in item:
                        raise ConfigError(
                            f"cannot load cluster access: {path} has a {kind} without a name; "
                            f"{FIX_KUBECONFIG}"
                        )
                    body = item.get(kind) or {}
                    if not isinstance(body, dict):
                        raise _Entry({}, base, kind).error(
                            f'"{item["name"]}" is a {type(body).__name__}, not a map'
                        )
                    named.setdefault(str(item["name"]), _Entry(body, base, kind))
            merged.current = merged.current or str(doc.get("current-context") or "")
        return merged

    def context(self, asked: str | None) -> _Entry:
        """The chosen context: `--context`, else the current-context."""
        if asked is None and not self.current:
            raise ConfigError(
                f"the kubeconfig ({', '.join(self.paths)}) sets no current-context; pass "
                "--context (NODE_HOLDER_CONTEXT) or run `kubectl config use-context`"
            )
        name = self.current if asked is None else asked
        if name not in self.named["context"]:
            known = ", ".join(sorted(self.named["context"])) or "none"
            fix = (
                "fix the kubeconfig's current-context or pass --context (NODE_HOLDER_CONTEXT)"
                if asked is None
                else "fix --context (NODE_HOLDER_CONTEXT) or unset it to use the kubeconfig's "
                "current-context"
            )
            raise ConfigError(f'context "{name}" does not exist (contexts: {known}); {fix}')
        return self.named["context"][name]


def _from_kubeconfig(paths: list[str], context: str | None, timeout: float) -> Connection:
    merged = _Kubeconfig.read(paths)
    chosen = merged.context(context)
    cluster = merged.named["cluster"].get(str(chosen.value.get("cluster") or ""))
    if cluster is None:
        raise ConfigError(
            f"cannot load cluster access: the context names cluster "
            f'"{chosen.value.get("cluster")}", which the kubeconfig does not define; '
            f"{FIX_KUBECONFIG}"
        )
    user_name = str(chosen.value.get("user") or "")
    user = merged.named["user"].get(user_name) or _Entry({}, cluster.base, "user")
    if user.value.get("auth-provider"):  # kubectl refuses gcp and azure too, since 1.26
        raise ConfigError(
            f'kubeconfig user "{user_name}": auth-provider is not supported (node-holder reads '
            "exec plugins only); switch the user to its provider's exec credential plugin"
        )
    server = _server(cluster.value.get("server"))
    tls: dict[str, str | None] = {}
    if server.startswith("https"):  # the files first: a plugin runs only for a usable entry
        ca = cluster.file_or_data("certificate-authority")
        tls = {
            "ca_data": ca.decode() if isinstance(ca, bytes) else None,
            "ca_file": ca if isinstance(ca, str) else None,
            "cert_file": user.file("client-certificate"),
            "key_file": user.file("client-key"),
        }
    credentials, from_plugin = _user_credentials(user, cluster.value, timeout)
    return Connection(
        server=server,
        credentials=credentials,
        verify=not cluster.flag("insecure-skip-tls-verify"),
        tls_server_name=cluster.text("tls-server-name"),
        proxy=_proxy(server, cluster.text("proxy-url")),
        **{**tls, **from_plugin},
    )


def _server(host: Any) -> str:
    """The cluster's server URL; one that is not http(s) is bad input, not an outage."""
    host = str(host or "")
    url = _url(host)
    if url is None or url.scheme not in ("http", "https") or not url.host:
        what = f"'s server {redact(host)!r} is not an http(s) URL" if host else " has no server"
        raise ConfigError(
            f"cannot load cluster access: the cluster{what}; fix it in the kubeconfig "
            f"({FIX_KUBECONFIG})"
        )
    return host.rstrip("/")


def _url(text: str) -> urllib3.util.Url | None:
    try:
        return urllib3.util.parse_url(text)
    except ValueError:  # urllib3's LocationParseError is one
        return None


def _private_file(content: bytes) -> str:
    """A file only this user can read, removed when the process exits."""
    fd, name = tempfile.mkstemp(prefix="node-holder-", suffix=".pem")
    with os.fdopen(fd, "wb") as out:
        out.write(content)
    atexit.register(Path(name).unlink, missing_ok=True)
    return name


# --- credentials -------------------------------------------------------------------


def _user_credentials(
    user: _Entry, cluster: Mapping[str, Any], timeout: float
) -> tuple[Credentials, dict[str, str]]:
    """The user's auth headers, and the client certificate an exec plugin handed out."""
    token, token_file = user.text("token"), user.text("tokenFile")
    name, password = user.text("username"), user.text("password")
    if token:
        return _static({"authorization": f"Bearer {token.strip()}"}), {}
    if token_file:
        path = user.base / token_file  # as kubectl: relative to the kubeconfig, no `~`
        return _token_file(path, "kubeconfig user entry: tokenFile", "fix the path"), {}
    if user.value.get("exec"):
        if not isinstance(spec := user.value["exec"], dict):
            raise user.error(f"exec is a {type(spec).__name__}, not a map")
        return _Plugin.start(spec, user.base, timeout, cluster)
    if name and password:  # UTF-8, as client-go sends it (urllib3's helper takes Latin-1 only)
        basic = base64.b64encode(f"{name}:{password}".encode()).decode()
        return _static({"authorization": f"Basic {basic}"}), {}
    return anonymous, {}


def _static(headers: Mapping[str, str]) -> Credentials:
    fixed = dict(headers)
    return lambda renew=False: fixed


def _token_file(path: Path, what: str, fix: str) -> Credentials:
    """A token read from `path` now and again at every ask: the kubelet rotates it. A read that
    fails later keeps the last token (the API server accepts it until it expires)."""
    token = _read_token(path)
    if not token:
        raise ConfigError(f"{what} {path} does not exist or is empty; {fix}")
    last = {"authorization": f"Bearer {token}"}

    def current(renew: bool = False) -> dict[str, str]:
        nonlocal last
        if fresh := _read_token(path):
            last = {"authorization": f"Bearer {fresh}"}
        return last

    return current


def _read_token(path: Path) -> str:
    try:
        return path.read_text().strip()
    except (OSError, ValueError):
        return ""


@dataclass
class _Plugin:
    """An exec credential plugin: its token, run again once it expires or after a 401 (as
    client-go), or its client certificate, used for the whole run."""

    spec: Mapping[str, Any]
    cwd: str
    cluster: Mapping[str, Any] | None  # told to the plugin (provideClusterInfo)
    timeout: float  # the run's --timeout, as set: what a plugin that hangs is told it broke
    ends: float  # the run's deadline (monotonic): no plugin run outlasts it
    headers: dict[str, str] = field(default_factory=dict)
    expires: datetime | None = None

    @classmethod
    def start(
        cls, spec: Mapping[str, Any], base: Path, timeout: float, cluster: Mapping[str, Any]
    ) -> tuple[Credentials, dict[str, str]]:
        """The plugin's first run: its token (the plugin is then the credentials) or its
        client certificate."""
        told = cluster if spec.get("provideClusterInfo") else None
        plugin = cls(spec, str(base), told, timeout, time.monotonic() + timeout)
        status = plugin.run()
        if status.get("token"):
            return plugin, {}
        for key in ("clientCertificateData", "clientKeyData"):
            if not isinstance(status.get(key), str):
                raise plugin.error("printed no token nor certificate")
        return anonymous, {
            "cert_file": _private_file(status["clientCertificateData"].encode()),
            "key_file": _private_file(status["clientKeyData"].encode()),
        }

    def __call__(self, renew: bool = False) -> dict[str, str]:
        left = self.expires.timestamp() - time.time() if self.expires else float("inf")
        if renew or left <= AUTH_REFRESH_SECONDS:
            try:
                self.run()
            except ConfigError as exc:
                log.warning("%s; the last token is used", exc)
        return self.headers

    def run(self) -> dict[str, Any]:
        """Run the plugin once within what is left of the run; its `status`."""
        status = self._status(max(self.ends - time.monotonic(), 0.1))
        stamp = status.get("expirationTimestamp")
        try:
            self.expires = datetime.fromisoformat(str(stamp)) if stamp else None
            if self.expires is not None and self.expires.tzinfo is None:
                raise ValueError(stamp)
        except ValueError:
            raise self.error(
                f"printed an expirationTimestamp that is not RFC 3339: {stamp!r}"
            ) from None
        if status.get("token"):
            self.headers = {"authorization": f"Bearer {status['token']}"}
        elif self.headers:  # mid-run: a certificate instead of a token is no renewal
            raise self.error("printed no token")
        return status

    def _command(self, api_version: str) -> tuple[list[str], dict[str, str]]:
        """The plugin's command line and environment; with a cluster, the plugin is told it in
        KUBERNETES_EXEC_INFO, as kubectl tells it."""
        command = str(self.spec.get("command") or "")
        if not command:
            raise ConfigError(f"kubeconfig user exec: no command; {FIX_KUBECONFIG}")
        if not isinstance(args := self.spec.get("args") or [], list):
            raise self.error(f"has args that are a {type(args).__name__}, not a list")
        env = dict(os.environ)
        for variable in _maps(self.spec.get("env"), "exec env", "the kubeconfig user"):
            if "name" not in variable:
                raise self.error("has an env entry without a name")
            env[str(variable["name"])] = str(variable.get("value", ""))
        request: dict[str, Any] = {"interactive": False}
        if self.cluster is not None:
            request["cluster"] = _exec_cluster(self.cluster)
        env["KUBERNETES_EXEC_INFO"] = json.dumps(
            {"apiVersion": api_version, "kind": "ExecCredential", "spec": request}, default=str
        )
        return [command, *map(str, args)], env

    def _status(self, left: float) -> dict[str, Any]:
        """The ExecCredential's `status` (client.authentication.k8s.io), the plugin given `left`
        seconds."""
        api_version = str(self.spec.get("apiVersion") or "client.authentication.k8s.io/v1")
        args, env = self._command(api_version)
        try:
            done = _run_bounded(args, env, self.cwd, left)
        except FileNotFoundError:
            hint = " ".join(str(self.spec.get("installHint") or "").split())
            raise self.error("was not found", hint or "install it or fix its path") from None
        except PermissionError:
            raise self.error("is not executable") from None
        except subprocess.TimeoutExpired:
            # The --timeout as set, which bounds the whole run (this plugin included), not the
            # fraction of a second left of it when the plugin was started.
            raise self.error(
                f"did not finish within --timeout ({self.timeout:g}s)", "does it wait for input?"
            ) from None
        except (OSError, ValueError) as exc:  # not a program; a NUL byte in an argument
            raise self.error("cannot be run", " ".join(str(exc).split())) from None
        said = " ".join(done.stderr.split())[-300:]
        if done.returncode != 0:
            raise self.error(f"failed (exit {done.returncode})", said or "no message")
        try:
            answer = json.loads(done.stdout)
        except ValueError:
            raise self.error("printed something that is not JSON", repr(done.stdout[:60])) from None
        status = answer.get("status") if isinstance(answer, dict) else None
        if not isinstance(status, dict) or answer.get("kind") != "ExecCredential":
            raise self.error("printed no ExecCredential", repr(done.stdout[:60]))
        if answer.get("apiVersion") != api_version:
            raise self.error(
                f"answered {answer.get('apiVersion')!r}, not the {api_version!r} asked for"
            )
        return status

    def error(self, what: str, detail: str = "") -> ConfigError:
        tail = f": {detail}" if detail else ""
        return ConfigError(
            f'credential plugin "{self.spec.get("command")}" (kubeconfig user exec) {what}{tail}'
        )


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
    for extension in _maps(cluster.get("extensions"), "the cluster's extensions", "the kubeconfig"):
        if extension.get("name") == "client.authentication.k8s.io/exec":
            found["config"] = extension.get("extension")
    return found


def _run_bounded(
    args: list[str], env: dict[str, str], cwd: str, timeout: float
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


# --- in-cluster ----------------------------------------------------------------------


def _in_cluster(access: ClusterAccess) -> Connection:
    """The pod's service account, as client-go's rest.InClusterConfig reads it."""
    if access.context:
        raise ConfigError(
            "--context (NODE_HOLDER_CONTEXT) needs a kubeconfig; inside a pod the "
            "service account is used, so unset it or pass --kubeconfig"
        )
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not port:
        raise ConfigError(
            f"{IN_A_POD} KUBERNETES_SERVICE_PORT is not; set it, or pass --kubeconfig"
        )
    fix = f"mount it ({MOUNT_IT}) or pass --kubeconfig"
    credentials = _token_file(IN_CLUSTER_TOKEN, f"{IN_A_POD} the service account token", fix)
    if not IN_CLUSTER_CA.is_file():
        raise ConfigError(f"{IN_A_POD} no service account CA at {IN_CLUSTER_CA}; {fix}")
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address
    server = f"https://{shown}:{port}"
    return Connection(
        server=server,
        credentials=credentials,
        ca_file=str(IN_CLUSTER_CA),
        proxy=_proxy(server, None),
    )


# --- proxy ---------------------------------------------------------------------------


def _proxy(server: str, configured: str | None) -> str | None:
    """The kubeconfig's proxy-url, else the environment's proxy unless NO_PROXY names the server
    (as client-go reads it: docs/operations-notes.md)."""
    if configured:
        return str(configured)
    proxies = getproxies()  # HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY (either case)
    scheme = urlsplit(server).scheme
    found = (proxies.get(scheme) or proxies.get("all") or "").strip()
    if not found or _bypassed(server, proxies.get("no", "")):
        return None
    return found if "://" in found else f"http://{found}"  # as Go: no scheme means http


def _bypassed(server: str, no_proxy: str) -> bool:
    parts = urlsplit(server)
    host, netloc = (parts.hostname or "").lower(), parts.netloc.lower().rpartition("@")[2]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if entry == "*":
            return True
        if not entry:
            continue
        if address is not None:
            with contextlib.suppress(ValueError):
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
        domain = entry.lstrip(".")
        if domain in (host, netloc) or host.endswith("." + domain):
            return True
    return False


# --- checks --------------------------------------------------------------------------


def _check_proxy(proxy: str | None) -> None:
    """A proxy URL the client could not use is bad input, named here (not a traceback later)."""
    if not proxy:
        return
    url = _url(proxy)
    scheme = (url.scheme or "").lower() if url else ""
    if not (url and url.host and (scheme in ("http", "https") or scheme.startswith("socks"))):
        raise ConfigError(
            f"the proxy {redact(proxy)!r} is not an http(s) or socks URL; fix proxy-url in "
            "the kubeconfig, or HTTPS_PROXY/HTTP_PROXY/ALL_PROXY"
        )
    if scheme.startswith("socks") and importlib.util.find_spec("socks") is None:
        raise ConfigError(
            f"the proxy {redact(proxy)!r} is a SOCKS proxy, which needs PySocks: "
            "pip install pysocks, or use an http(s) proxy"
        )


def _check_tls(found: Connection) -> None:
    """Certificates that do not load fail here, named, rather than as a TLS error per request."""
    if not found.server.startswith("https"):
        return
    context = ssl.create_default_context()
    try:
        if found.ca_file or found.ca_data:
            context.load_verify_locations(cafile=found.ca_file, cadata=found.ca_data)
    except (ssl.SSLError, OSError, ValueError) as exc:
        pod = found.ca_file == str(IN_CLUSTER_CA)  # in a pod: no kubeconfig to check
        fix = f"check the CA mounted at {IN_CLUSTER_CA}, or pass --kubeconfig" if pod else ""
        raise ConfigError(
            f"the cluster's certificate-authority does not load ({exc}); {fix or FIX_KUBECONFIG}"
        ) from None
    try:
        if found.cert_file:
            context.load_cert_chain(found.cert_file, found.key_file or None)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"the user's client-certificate/client-key do not load ({exc}); {FIX_KUBECONFIG}"
        ) from None
