"""The kubeconfig is read as the official client reads it, without importing that client.

`reconcile.cluster.access` reads kubeconfigs itself (the official client is a test dependency only:
docs/maintainers/releases.md, "Dependencies"). Each kubeconfig below is resolved both ways, ours and
the official loader's (`kubernetes.config.load_kube_config`), and must give the same server,
credentials, TLS files, verification and proxy. Then the paths only ours takes end to end against
the API test server: relative CA files, the environment's proxy and NO_PROXY; and what ours refuses
on purpose: legacy `auth-provider` users (with the exec plugin that replaces each) and kubeconfigs
of the wrong shape, each in one line, while a fault of the reader itself is left a traceback.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as official_client
from kubernetes import config as official_config

from reconcile.cluster import access
from reconcile.cluster.access import connection_for
from reconcile.cluster.transport import Connection
from reconcile.rule.settings import ClusterAccess
from tests.clusters import run_cli
from tests.helpers import OURS, assert_one_clear_line, old, young
from tests.kubeapi.apiserver import ApiServer

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def no_proxy_from_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    """A self-signed certificate and its key (PEM): loads as a CA and as a client certificate."""
    folder = tmp_path_factory.mktemp("pem")
    cert, key = folder / "c.crt", folder / "c.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=a", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert.read_bytes(), key.read_bytes()


def b64(data: bytes | str) -> str:
    return base64.b64encode(data if isinstance(data, bytes) else data.encode()).decode()


def kubeconfig(
    clusters: dict[str, dict[str, Any]],
    users: dict[str, dict[str, Any]],
    contexts: dict[str, tuple[str, str | None]],
    current: str | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [
            {"name": n, "context": {"cluster": c, **({"user": u} if u else {})}}
            for n, (c, u) in contexts.items()
        ],
    }
    if current:
        doc["current-context"] = current
    return doc


def one(cluster: dict[str, Any], user: dict[str, Any]) -> list[dict[str, Any]]:
    return [kubeconfig({"c": cluster}, {"u": user}, {"x": ("c", "u")}, current="x")]


# Each case: the kubeconfig files (written in order to one folder), the --context, and the
# files the folder also holds (relative paths in the kubeconfig point at them).
Files = dict[str, bytes]
Case = Callable[[bytes, bytes], tuple[list[dict[str, Any]], str | None, Files]]
HTTP = "http://10.0.0.1:6443"
HTTPS = "https://10.0.0.1:6443"
CASES: dict[str, Case] = {
    "a token over http": lambda c, k: (one({"server": HTTP}, {"token": "t0k"}), None, {}),
    "a token file, relative to the kubeconfig": lambda c, k: (
        one({"server": HTTP}, {"tokenFile": "sa/token"}),
        None,
        {"sa/token": b"from-a-file"},  # (a trailing newline: ours trims it, as client-go)
    ),
    "user name and password": lambda c, k: (
        one({"server": HTTP}, {"username": "ann", "password": "s3cret"}),
        None,
        {},
    ),
    "no credentials at all": lambda c, k: (one({"server": HTTP}, {}), None, {}),
    "https with CA and client certificate data": lambda c, k: (
        one(
            {"server": HTTPS, "certificate-authority-data": b64(c)},
            {"client-certificate-data": b64(c), "client-key-data": b64(k), "token": "t"},
        ),
        None,
        {},
    ),
    "https with relative CA and client certificate files": lambda c, k: (
        one(
            {"server": HTTPS, "certificate-authority": "pki/ca.crt"},
            {"client-certificate": "pki/me.crt", "client-key": "pki/me.key"},
        ),
        None,
        {"pki/ca.crt": c, "pki/me.crt": c, "pki/me.key": k},
    ),
    "insecure-skip-tls-verify and tls-server-name": lambda c, k: (
        one(
            {"server": HTTPS, "insecure-skip-tls-verify": True, "tls-server-name": "kube.local"},
            {"token": "t"},
        ),
        None,
        {},
    ),
    "a proxy-url": lambda c, k: (
        one({"server": HTTP, "proxy-url": "http://proxy.local:3128"}, {"token": "t"}),
        None,
        {},
    ),
    "a base path and a trailing slash": lambda c, k: (
        one({"server": HTTP + "/through/a/gateway/"}, {"token": "t"}),
        None,
        {},
    ),
    "two files: the first definition of a name wins, --context picks": lambda c, k: (
        [
            kubeconfig({"c": {"server": HTTP}}, {"u": {"token": "first"}}, {"x": ("c", "u")}),
            kubeconfig(
                {"c": {"server": "http://elsewhere:1"}, "d": {"server": "http://d:2"}},
                {"u": {"token": "second"}},
                {"x": ("d", "u"), "y": ("d", "u")},
                current="y",
            ),
        ],
        "x",
        {},
    ),
    "a context without a user": lambda c, k: (
        [kubeconfig({"c": {"server": HTTP}}, {}, {"x": ("c", None)}, current="x")],
        None,
        {},
    ),
}


def content(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


def official(paths: str, context: str | None) -> Connection:
    """What the official client makes of the same kubeconfig, as a Connection."""
    cfg = official_client.Configuration()
    official_config.load_kube_config(config_file=paths, context=context, client_configuration=cfg)
    headers = {
        auth["key"]: auth["value"]
        for auth in cfg.auth_settings().values()
        if auth.get("in") == "header" and auth.get("value")
    }
    return Connection(
        server=cfg.host,
        credentials=lambda: headers,
        ca_file=cfg.ssl_ca_cert,
        cert_file=cfg.cert_file,
        key_file=cfg.key_file,
        verify=cfg.verify_ssl,
        tls_server_name=cfg.tls_server_name,
        proxy=cfg.proxy,
    )


def comparable(found: Connection) -> dict[str, Any]:
    """A connection by what it sends: files by their content, CA data or file alike."""
    return {
        "server": found.server,
        "headers": found.credentials(),
        "ca": found.ca_data.encode() if found.ca_data else content(found.ca_file),
        "cert": content(found.cert_file),
        "key": content(found.key_file),
        "verify": found.verify,
        "tls_server_name": found.tls_server_name,
        "proxy": found.proxy,
    }


@pytest.mark.parametrize("case", list(CASES))
def test_a_kubeconfig_gives_what_the_official_loader_gives(
    case: str, tmp_path: Path, pem: tuple[bytes, bytes]
) -> None:
    docs, context, files = CASES[case](*pem)
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    paths = []
    for i, doc in enumerate(docs):
        paths.append(tmp_path / f"kubeconfig-{i}")
        paths[-1].write_text(yaml.safe_dump(doc))
    joined = os.pathsep.join(str(p) for p in paths)

    ours = connection_for(ClusterAccess(kubeconfig=joined, context=context))

    theirs = official(joined, context)
    assert comparable(ours) == comparable(theirs)
    assert ours.server.startswith(("http://", "https://")) and not ours.server.endswith("/")


# --- end to end ------------------------------------------------------------------------


@pytest.fixture
def nodes(api: ApiServer) -> ApiServer:
    """An old node and a young one: a run that reaches the server holds n1."""
    old(api, "n1")
    young(api, "n2")
    return api


def rewritten(api: ApiServer, path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    doc = yaml.safe_load(api.write_kubeconfig(path).read_text())
    change(doc)
    path.write_text(yaml.safe_dump(doc))
    return path


def unreachable_name(api: ApiServer) -> Callable[[dict[str, Any]], None]:
    """Point the kubeconfig at a name only a proxy (the test server itself) can reach."""

    def change(doc: dict[str, Any]) -> None:
        cluster = doc["clusters"][0]["cluster"]
        cluster["server"] = cluster["server"].replace(api.url, "http://kube-apiserver.invalid")

    return change


def test_a_relative_certificate_authority_verifies_the_server(
    tls_api: ApiServer, tmp_path: Path
) -> None:
    old(tls_api, "n1")
    young(tls_api, "n2")
    folder = tmp_path / "home"
    (folder / "pki").mkdir(parents=True)
    (folder / "pki" / "ca.crt").write_bytes((tmp_path / "tls.crt").read_bytes())

    def relative_ca(doc: dict[str, Any]) -> None:
        doc["clusters"][0]["cluster"]["certificate-authority"] = "pki/ca.crt"

    path = rewritten(tls_api, folder / "kubeconfig", relative_ca)
    result = run_cli("reconcile", "--kubeconfig", str(path))
    assert result.code == 0, result.stderr
    assert tls_api.annotations("n1") == OURS


def test_the_environment_s_proxy_is_used_unless_no_proxy_names_the_server(
    nodes: ApiServer, tmp_path: Path
) -> None:
    api = nodes
    path = rewritten(api, tmp_path / "kubeconfig", unreachable_name(api))
    proxied = {"HTTP_PROXY": api.url}  # the test server also answers as the proxy in front
    bypassed = {**proxied, "NO_PROXY": "localhost,.invalid"}  # a domain with a leading dot

    direct = run_cli("reconcile", "--kubeconfig", str(path), "--timeout", "1s", env=bypassed)
    assert direct.code == 1  # straight to kube-apiserver.invalid: no such host
    assert api.requests == []
    through = run_cli("reconcile", "--kubeconfig", str(path), env=proxied)
    assert through.code == 0, through.stderr
    assert api.annotations("n1") == OURS


def test_a_proxy_without_a_scheme_is_http_as_in_go(nodes: ApiServer, tmp_path: Path) -> None:
    path = rewritten(nodes, tmp_path / "kubeconfig", unreachable_name(nodes))
    bare = nodes.url.removeprefix("http://")  # 127.0.0.1:PORT
    result = run_cli("reconcile", "--kubeconfig", str(path), env={"http_proxy": bare})
    assert result.code == 0, result.stderr
    assert nodes.annotations("n1") == OURS


def test_a_socks_proxy_without_pysocks_is_a_configuration_error(
    nodes: ApiServer, tmp_path: Path
) -> None:
    if importlib.util.find_spec("socks") is not None:
        pytest.skip("PySocks is installed here")
    path = nodes.write_kubeconfig(tmp_path / "kubeconfig")
    result = run_cli(
        "reconcile", "--kubeconfig", str(path), env={"HTTP_PROXY": "socks5://127.0.0.1:1080"}
    )
    assert result.code == 2
    line = assert_one_clear_line(result.stderr)
    assert "PySocks" in line and "socks5://127.0.0.1:1080" in line
    assert nodes.requests == []


@pytest.mark.parametrize("proxy", ["http://[bad", "http://:3128", "ftp://proxy.local"])
def test_a_proxy_that_is_no_url_is_a_configuration_error(
    nodes: ApiServer, tmp_path: Path, proxy: str
) -> None:
    path = nodes.write_kubeconfig(tmp_path / "kubeconfig")
    result = run_cli(
        "reconcile", "--kubeconfig", str(path), env={"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy}
    )
    assert result.code == 2, result.stderr
    line = assert_one_clear_line(result.stderr)
    assert f"the proxy {proxy!r} is not an http(s) or socks URL" in line and "HTTP_PROXY" in line
    assert nodes.requests == []


def test_no_proxy_takes_address_ranges(nodes: ApiServer, tmp_path: Path) -> None:
    path = nodes.write_kubeconfig(tmp_path / "kubeconfig")
    dead_proxy = {"HTTP_PROXY": "http://127.0.0.1:9"}  # the discard port: nothing listens
    result = run_cli(
        "reconcile", "--kubeconfig", str(path), env={**dead_proxy, "NO_PROXY": "127.0.0.0/8"}
    )
    assert result.code == 0, result.stderr
    assert nodes.annotations("n1") == OURS


def jwt(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


@pytest.mark.parametrize("provider", ["gcp", "azure", "oidc", "keystone"])
def test_an_auth_provider_user_is_refused_naming_exec_plugins(
    nodes: ApiServer, tmp_path: Path, provider: str
) -> None:
    """Refused although the server would accept its id-token: the official client, which alone
    served these users, is no dependency (CHANGELOG, "Upgrade notes")."""
    api = nodes
    token = jwt({"sub": "ann", "exp": 4102444800})  # 2100: not expired, so no refresh
    api.accept_token(token, "admin")
    path = api.write_kubeconfig(tmp_path / "kubeconfig", identity="noauth")
    doc = yaml.safe_load(path.read_text())
    config = {"id-token": token, "idp-issuer-url": "https://issuer.invalid", "client-id": "k"}
    doc["users"][0]["user"] = {"auth-provider": {"name": provider, "config": config}}
    path.write_text(yaml.safe_dump(doc))

    result = run_cli("reconcile", "--kubeconfig", str(path))

    assert result.code == 2, result.stderr
    line = assert_one_clear_line(result.stderr)
    assert line.endswith(
        'kubeconfig user "test-noauth": auth-provider is not supported (node-holder reads exec '
        "plugins only); switch the user to its provider's exec credential plugin"
    ), line
    assert api.requests == []


# --- what the reader refuses: exit 2, one line, nothing sent ---------------------------


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set `value` at a dotted path of the kubeconfig (`users.0.user`, say)."""

    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = doc
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value

    return change


REFUSED: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "a token file that does not exist": (
        _set("users.0.user", {"tokenFile": "nowhere/token"}),
        "tokenFile",
    ),
    "a current-context that names no context": (
        _set("current-context", "gone"),
        'context "gone" does not exist',
    ),
    "a context that names no cluster": (
        _set("contexts.0.context.cluster", "gone"),
        'cluster "gone"',
    ),
    "a cluster without a server": (
        _set("clusters.0.cluster", {"insecure-skip-tls-verify": True}),
        "the cluster has no server;",
    ),
    "a tls-server-name that is a map": (
        _set("clusters.0.cluster.tls-server-name", {"name": "x"}),
        "tls-server-name must be a string, not a map",
    ),
    "an insecure-skip-tls-verify that is neither true nor false": (
        _set("clusters.0.cluster.insecure-skip-tls-verify", "maybe"),
        "insecure-skip-tls-verify must be true or false, not 'maybe'",
    ),
    "an auth-provider without a name": (
        _set("users.0.user", {"auth-provider": {"config": {"refresh-token": "s3cr3t-refresh"}}}),
        "auth-provider is not supported",
    ),
    "users that are a map, not a list": (
        _set("users", {"u": {"token": "s3cr3t"}}),
        "users in ",
    ),
    "a context entry that is a string": (
        _set("contexts.0.context", "test"),
        'kubeconfig context entry: "test" is a str, not a map;',
    ),
    "a cluster without a name": (
        _set("clusters.0", {"cluster": {"server": "http://127.0.0.1:9"}}),
        "has a cluster without a name;",
    ),
    "an exec entry that is a list": (
        _set("users.0.user", {"exec": ["aws", "eks", "get-token"]}),
        "kubeconfig user entry: exec is a list, not a map;",
    ),
    "an exec env that is a map": (
        _set("users.0.user", {"exec": {"command": "true", "env": {"AWS_PROFILE": "x"}}}),
        "exec env in the kubeconfig user must be a list of maps;",
    ),
    "exec args that are a string": (
        _set("users.0.user", {"exec": {"command": "aws", "args": "eks get-token"}}),
        'credential plugin "aws" (kubeconfig user exec) has args that are a str, not a list',
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_what_the_reader_refuses_is_one_line_and_nothing_sent(
    api: ApiServer, tmp_path: Path, case: str
) -> None:
    change, expected = REFUSED[case]
    path = rewritten(api, tmp_path / "kubeconfig", change)
    result = run_cli("reconcile", "--kubeconfig", str(path))
    assert result.code == 2, result.stderr
    line = assert_one_clear_line(result.stderr)
    assert expected in line, line
    assert "s3cr3t" not in line  # the official loader's messages quote the whole user entry
    assert api.requests == []


UNREADABLE = {
    "YAML that does not parse": b"clusters: [\n  - name: x\n",
    "bytes that are not UTF-8": b"clusters: []\ncurrent-context: \xff\xfe\n",
    "a folder, not a file": None,
}


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_a_kubeconfig_that_does_not_read_is_one_line_and_nothing_sent(
    api: ApiServer, tmp_path: Path, case: str
) -> None:
    path = tmp_path / "kubeconfig"
    content = UNREADABLE[case]
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    result = run_cli("reconcile", "--kubeconfig", str(path))
    assert result.code == 2, result.stderr
    line = assert_one_clear_line(result.stderr)
    assert "cannot load cluster access: malformed kubeconfig (" in line, line
    assert line.endswith("; check --kubeconfig/KUBECONFIG"), line
    assert api.requests == []


def test_a_fault_of_the_reader_itself_is_a_traceback_not_a_malformed_kubeconfig(
    api: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader's own bug (here one put in its server parser) is no fault of the kubeconfig:
    exit 1 as "unexpected", with the traceback under -v, not "malformed kubeconfig" (exit 2)."""

    def broken(host: Any) -> str:
        return host.rstrip_typo("/")  # an AttributeError, as a typo would raise

    monkeypatch.setattr(access, "_server", broken)
    path = api.write_kubeconfig(tmp_path / "kubeconfig")

    result = run_cli("reconcile", "--kubeconfig", str(path), "-v")

    assert result.code == 1, result.stderr
    assert "Traceback (most recent call last)" in result.stderr
    assert "unexpected AttributeError:" in result.stderr.splitlines()[-1]
    assert "malformed kubeconfig" not in result.stderr
    assert api.requests == []


def test_a_quoted_false_keeps_the_certificate_checked(tmp_path: Path) -> None:
    """YAML `"false"` is a non-empty string: read as truthy, it would turn TLS checks off."""
    doc = one({"server": HTTPS, "insecure-skip-tls-verify": "false"}, {"token": "t"})[0]
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    assert connection_for(ClusterAccess(kubeconfig=str(path))).verify is True
