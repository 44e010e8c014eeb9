"""Bearer-token identities, a tiny RBAC, and kubeconfig files for them.

kubectl (client-go clientcmd) only applies a kubeconfig's user credentials when the server URL
is https, so over this server's plain HTTP it would send no token at all. The kubeconfigs written
here therefore also carry the token in the server URL's path (`http://127.0.0.1:PORT/token/<t>`;
client-go and the python client both support a base path, as used behind proxies); the server
strips that prefix and treats it like the Authorization header. Clients that send the header
(the python client, urllib3) authenticate the usual way.

Like a cluster with anonymous auth disabled: a request without a known token gets 401 with the
body `{"kind":"Status",...,"message":"Unauthorized","reason":"Unauthorized","code":401}`. `admin`
may do everything; `readonly` is the service account `system:serviceaccount:kube-system:node-viewer`
bound to get/list/watch, so a write gets 403 with the RBAC authorizer's wording (checked via the
search tool against real clusters' messages: `nodes "x" is forbidden: User "..." cannot patch
resource "nodes" in API group "" at the cluster scope`). Discovery and /version are allowed for
every authenticated identity (system:discovery, system:public-info-viewer).

A token accepted with `expires` gets 401 from that time of the server's clock on, as a JWT
past its `exp` claim does.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import yaml

from tests.kubeapi.statuses import forbidden

READ_VERBS = frozenset({"get", "list", "watch"})


@dataclass(frozen=True)
class Identity:
    """Who a token belongs to and what it may do."""

    name: str  # the key tests use: "admin", "readonly"
    user: str  # the Kubernetes user name
    read_only: bool


IDENTITIES = {
    "admin": Identity("admin", "kubernetes-admin", read_only=False),
    "readonly": Identity(
        "readonly", "system:serviceaccount:kube-system:node-viewer", read_only=True
    ),
}


class Tokens:
    """Random tokens per server, so a kubeconfig from one server never works on another."""

    def __init__(self) -> None:
        self._by_identity = {name: f"{name}-{secrets.token_hex(16)}" for name in IDENTITIES}
        self._by_token = {token: IDENTITIES[name] for name, token in self._by_identity.items()}
        self._expires: dict[str, datetime] = {}

    def token(self, identity: str) -> str:
        """The bearer token for `identity` ("" for "noauth")."""
        if identity == "noauth":
            return ""
        return self._by_identity[identity]

    def accept(self, token: str, identity: str, expires: datetime | None = None) -> None:
        """Also take `token` as `identity` (as an OIDC or webhook authenticator would), until
        `expires` on the server's clock if given."""
        self._by_token[token] = IDENTITIES[identity]
        if expires is not None:
            self._expires[token] = expires

    def authenticate(self, header: str | None, now: datetime) -> Identity | None:
        """The identity behind an `Authorization: Bearer ...` header, if any."""
        if not header or not header.lower().startswith("bearer "):
            return None
        return self.from_token(header[7:].strip(), now)

    def from_token(self, token: str, now: datetime) -> Identity | None:
        """The identity of a bare token (a header's, or from the `/token/<t>` path prefix)."""
        if token in self._expires and now >= self._expires[token]:
            return None
        return self._by_token.get(token)


def authorize(
    who: Identity,
    verb: str,
    resource: str,
    *,
    name: str = "",
    group: str = "",
    namespace: str = "",
    subresource: str = "",
) -> None:
    """Raise 403 Forbidden when `who` may not `verb` the resource. `readonly` (node-viewer)
    reads the cluster's state, not its configuration: configmaps are forbidden to it."""
    if who.read_only and (verb not in READ_VERBS or resource == "configmaps"):
        raise forbidden(
            who.user,
            verb,
            resource,
            name=name,
            group=group,
            namespace=namespace,
            subresource=subresource,
        )


TOKEN_PREFIX = "/token/"


def split_token_path(path: str) -> tuple[str, str]:
    """(`token`, rest of the path) for `/token/<t>/rest`; ("", path) otherwise."""
    if not path.startswith(TOKEN_PREFIX):
        return "", path
    token, _, rest = path[len(TOKEN_PREFIX) :].partition("/")
    return token, "/" + rest


def write_kubeconfig(
    path: str | Path, server: str, token: str, identity: str, context: str
) -> Path:
    """A kubeconfig that kubectl and the python client both load (token user, current-context)."""
    if token:
        server = f"{server}{TOKEN_PREFIX}{token}"
    user: dict[str, str] = {"token": token} if token else {}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": context, "cluster": {"server": server}}],
        "users": [{"name": f"{context}-{identity}", "user": user}],
        "contexts": [
            {"name": context, "context": {"cluster": context, "user": f"{context}-{identity}"}}
        ],
        "current-context": context,
    }
    target = Path(path)
    target.write_text(yaml.safe_dump(doc, sort_keys=False))
    return target
