"""Certificate and token file fields of a kubeconfig: node-holder accepts what kubectl accepts.

Each row is a kubeconfig for the API test server over HTTPS; kubectl's verdict (`get nodes`
works, or it refuses the kubeconfig) is established by running it, and node-holder's
(`status` exits 0, or 2 before any request) must be the same. Wrapped base64 as other tools
write it (76 columns, `\\n` or `\\r\\n`) is one value; any other space, missing padding, the
URL-safe alphabet, both the -data and the file form at once, a missing file and a `~` in a
path (kubectl does not expand it) are refused by both.

Legacy `auth-provider` users: kubectl 1.32 refuses gcp and azure (client-go dropped them in
1.26) naming the exec plugin to use, and node-holder refuses them naming exec plugins. kubectl
still serves oidc; node-holder refuses it on purpose, since only the official Python client
read it and that is no dependency (docs/operations-notes.md): a deliberate difference, which
the test establishes with kubectl each time rather than assumes.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import subprocess
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.clusters import CliResult, run_cli
from tests.kubeapi.apiserver import ApiServer

KUBECTL = shutil.which("kubectl")
pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH"),
]


@dataclass
class Setup:
    api: ApiServer
    folder: Path
    pem: dict[str, bytes]  # ca, cert, key


def _openssl(folder: Path, name: str, *extra: str) -> None:
    request = (
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        f"/CN={name}",
    )
    files = ("-keyout", str(folder / f"{name}.key"), "-out", str(folder / f"{name}.crt"))
    subprocess.run(
        ["openssl", *request, *extra, *files],
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    folder = tmp_path_factory.mktemp("kubeconfigs")
    _openssl(folder, "server", "-addext", "subjectAltName=IP:127.0.0.1")
    _openssl(folder, "client")
    (folder / "home").mkdir()
    for name in ("server.crt", "client.crt"):
        shutil.copy(folder / name, folder / "home" / name)
    (folder / "garbage.crt").write_text("not a certificate\n")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "server.crt", folder / "server.key")
    api = ApiServer()
    api.tls = context
    with api:
        api.add_node("n1")
        for where in (folder, folder / "home"):
            (where / "token").write_text(api.token("admin") + "\n")
        pem = {
            "ca": (folder / "server.crt").read_bytes(),
            "cert": (folder / "client.crt").read_bytes(),
            "key": (folder / "client.key").read_bytes(),
        }
        yield Setup(api, folder, pem)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def wrapped(data: bytes, sep: str = "\n") -> str:
    return sep.join(textwrap.wrap(b64(data), 76))


CA = "certificate-authority"
CERT, KEY = "client-certificate", "client-key"
CA_DATA, CERT_DATA, KEY_DATA = f"{CA}-data", f"{CERT}-data", f"{KEY}-data"
TOKEN_FILE = "tokenFile"
# (cluster fields, user fields); values are functions of the PEMs (ca, cert, key)
ROWS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "CA data on one line": ({CA_DATA: lambda p: b64(p["ca"])}, {}),
    "CA data wrapped at 76 columns": ({CA_DATA: lambda p: wrapped(p["ca"])}, {}),
    "CA data wrapped, with a final newline": ({CA_DATA: lambda p: wrapped(p["ca"]) + "\n"}, {}),
    "CA data wrapped with CRLF": ({CA_DATA: lambda p: wrapped(p["ca"], "\r\n")}, {}),
    "CA data wrapped with spaces": ({CA_DATA: lambda p: wrapped(p["ca"], " ")}, {}),
    "CA data wrapped with tabs": ({CA_DATA: lambda p: wrapped(p["ca"], "\t")}, {}),
    "CA data without padding": ({CA_DATA: lambda p: b64(p["ca"]).rstrip("=")}, {}),
    "CA data in the URL-safe alphabet": (
        {CA_DATA: lambda p: base64.urlsafe_b64encode(b"~~~\n" + p["ca"]).decode()},
        {},
    ),
    "CA data with text before the PEM block": ({CA_DATA: lambda p: b64(b"~~~\n" + p["ca"])}, {}),
    "CA data that is not base64": ({CA_DATA: lambda p: "%%"}, {}),
    "CA data that is no certificate": ({CA_DATA: lambda p: b64(b"hello")}, {}),
    "CA file, relative to the kubeconfig": ({CA: lambda p: "server.crt"}, {}),
    "CA file missing": ({CA: lambda p: "missing.crt"}, {}),
    "CA file that is no certificate": ({CA: lambda p: "garbage.crt"}, {}),
    "CA file under ~": ({CA: lambda p: "~/server.crt"}, {}),
    "CA data and CA file both": ({CA_DATA: lambda p: b64(p["ca"]), CA: lambda p: "server.crt"}, {}),
    "empty CA data and a CA file": ({CA_DATA: lambda p: "", CA: lambda p: "server.crt"}, {}),
    "client data on one line": (
        {},
        {CERT_DATA: lambda p: b64(p["cert"]), KEY_DATA: lambda p: b64(p["key"])},
    ),
    "client data wrapped at 76 columns": (
        {},
        {CERT_DATA: lambda p: wrapped(p["cert"]), KEY_DATA: lambda p: wrapped(p["key"])},
    ),
    "client key data wrapped with spaces": (
        {},
        {CERT_DATA: lambda p: b64(p["cert"]), KEY_DATA: lambda p: wrapped(p["key"], " ")},
    ),
    "client certificate data that is not base64": (
        {},
        {CERT_DATA: lambda p: "%%", KEY_DATA: lambda p: b64(p["key"])},
    ),
    "client key data that is no key": (
        {},
        {CERT_DATA: lambda p: b64(p["cert"]), KEY_DATA: lambda p: b64(b"x")},
    ),
    "client certificate without a key": ({}, {CERT_DATA: lambda p: b64(p["cert"])}),
    "client files, relative": ({}, {CERT: lambda p: "client.crt", KEY: lambda p: "client.key"}),
    "client certificate file missing": (
        {},
        {CERT: lambda p: "missing.crt", KEY: lambda p: "client.key"},
    ),
    "client key file missing": ({}, {CERT: lambda p: "client.crt", KEY: lambda p: "missing.key"}),
    "client certificate file under ~": (
        {},
        {CERT: lambda p: "~/client.crt", KEY: lambda p: "client.key"},
    ),
    "token file, relative to the kubeconfig": ({}, {TOKEN_FILE: lambda p: "token"}),
    "token file under ~": ({}, {TOKEN_FILE: lambda p: "~/token"}),
    "client certificate data and file both": (
        {},
        {
            CERT_DATA: lambda p: b64(p["cert"]),
            CERT: lambda p: "client.crt",
            KEY_DATA: lambda p: b64(p["key"]),
        },
    ),
}


def kubeconfig(setup: Setup, row: str) -> Path:
    cluster_fields, user_fields = ROWS[row]
    cluster = {k: f(setup.pem) for k, f in cluster_fields.items()}
    if not any(k.startswith(CA) for k in cluster):
        cluster[CA_DATA] = b64(setup.pem["ca"])  # the user rows: a CA that works
    user = {k: f(setup.pem) for k, f in user_fields.items()}
    if TOKEN_FILE not in user:
        user["token"] = setup.api.token("admin")
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "t", "cluster": {"server": setup.api.url, **cluster}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "u"}}],
        "current-context": "t",
    }
    path = setup.folder / f"{row.replace(' ', '-').replace(',', '').replace('~', 'home')}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def both_verdicts(setup: Setup, path: Path) -> tuple[subprocess.CompletedProcess[str], CliResult]:
    """The real kubectl's and node-holder's answer to the same kubeconfig, each with a home of
    the test's own (kubectl's cache in it too)."""
    home = setup.folder / "home"
    env = {**os.environ, "HOME": str(home), "KUBECACHEDIR": str(home / "cache")}
    kubectl = subprocess.run(
        [KUBECTL or "kubectl", "--kubeconfig", str(path), "get", "nodes", "-o", "name"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return kubectl, run_cli("status", "--kubeconfig", str(path), env={"HOME": str(home)})


@pytest.mark.parametrize("row", list(ROWS))
def test_node_holder_accepts_a_kubeconfig_exactly_when_kubectl_does(setup: Setup, row: str) -> None:
    path = kubeconfig(setup, row)
    kubectl, ours = both_verdicts(setup, path)

    kubectl_accepts = kubectl.returncode == 0
    assert kubectl_accepts == (kubectl.stdout.strip() == "node/n1"), kubectl.stderr
    assert ours.code == (0 if kubectl_accepts else 2), (kubectl.stderr, ours.stderr)
    if not kubectl_accepts:
        assert len(ours.stderr.strip().splitlines()) == 1, ours.stderr


#: provider -> (kubectl accepts it, the plugin kubectl names when it refuses)
AUTH_PROVIDERS = {
    "gcp": (False, "gke-gcloud-auth-plugin"),
    "azure": (False, "github.com/Azure/kubelogin"),
    "oidc": (True, None),  # the deliberate difference
}


def jwt(subject: str) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    claims = {"sub": subject, "exp": 4102444800}  # 2100: kubectl's oidc has nothing to refresh
    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


@pytest.mark.parametrize("provider", list(AUTH_PROVIDERS))
def test_an_auth_provider_user_kubectl_s_verdict_and_ours(setup: Setup, provider: str) -> None:
    kubectl_accepts, kubectl_names = AUTH_PROVIDERS[provider]
    token = jwt(provider)
    setup.api.accept_token(token, "admin")
    config = {"id-token": token, "idp-issuer-url": "https://issuer.invalid", "client-id": "k"}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "t", "cluster": {"server": setup.api.url, CA_DATA: b64(setup.pem["ca"])}}
        ],
        "users": [{"name": "u", "user": {"auth-provider": {"name": provider, "config": config}}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "u"}}],
        "current-context": "t",
    }
    path = setup.folder / f"auth-provider-{provider}.yaml"
    path.write_text(yaml.safe_dump(doc))
    kubectl, ours = both_verdicts(setup, path)

    assert (kubectl.returncode == 0) == kubectl_accepts, kubectl.stderr
    if kubectl_accepts:
        assert kubectl.stdout.strip() == "node/n1"
    else:
        assert kubectl_names in kubectl.stderr, kubectl.stderr
    assert ours.code == 2, ours.stderr
    (line,) = ours.stderr.strip().splitlines()
    assert "auth-provider is not supported" in line and "exec credential plugin" in line, line
