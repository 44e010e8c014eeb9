"""Any kubeconfig, however broken, is either a usable connection or one ConfigError.

Hypothesis writes kubeconfigs with arbitrary values where the reader looks (server, TLS
fields, proxy, tokens, contexts, names, whole sections of the wrong type) and the
environment's proxy variables. Reading one must give a `Connection` from which the
client builds its pool, or a `ConfigError` (exit 2, one line): never another exception,
which would be an "unexpected" exit 1 with a traceback under -v. No request is sent:
nothing here opens a connection. `exec` and `auth-provider` users are left out (the first
would run commands, the second is always refused); their tests are in tests/access.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st

from reconcile.cli.logs import error_line
from reconcile.cluster.access import connection_for
from reconcile.cluster.client import Client
from reconcile.rule.settings import ClusterAccess, ConfigError

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 70000),
    st.text(max_size=12),
    st.sampled_from(
        [
            "https://10.0.0.1:6443",
            "http://127.0.0.1:9",
            "https://[::1]:6443/base/",
            "http://:99999",
            "https://user:pw@host",
            "socks5://127.0.0.1:1080",
            "http://proxy.local:3128",
            "bm90IGEgY2VydA==",  # base64 of "not a cert"
            "%%",
            "relative/file",
        ]
    ),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2)
    ),
    max_leaves=4,
)
CLUSTER_KEYS = [
    "server",
    "certificate-authority",
    "certificate-authority-data",
    "insecure-skip-tls-verify",
    "tls-server-name",
    "proxy-url",
]
USER_KEYS = [
    "token",
    "tokenFile",
    "username",
    "password",
    "client-certificate",
    "client-key",
    "client-certificate-data",
    "client-key-data",
]


SERVERS = st.sampled_from(
    ["https://10.0.0.1:6443", "http://127.0.0.1:9", "https://[::1]:6443/base/", "http://h"]
)


#: Values a careful user might write for each field; the fields also get arbitrary ones.
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "insecure-skip-tls-verify": st.sampled_from([True, False, "false", "true"]),
    "tls-server-name": st.sampled_from(["kubernetes", "api.example.com"]),
    "proxy-url": st.sampled_from(["http://127.0.0.1:9", "http://proxy.local:3128"]),
    "token": st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1),
    "username": st.just("ann"),
    "password": st.just("s3cret"),
}


def section(keys: list[str], required: dict[str, Any], junk: bool) -> st.SearchStrategy[Any]:
    """A cluster or user entry: plausible fields, and with `junk` one arbitrary field or an
    entry of the wrong type altogether."""
    plausible = st.fixed_dictionaries(
        required, optional={k: v for k, v in PLAUSIBLE.items() if k in keys}
    )
    if not junk:
        return plausible
    arbitrary = st.dictionaries(st.sampled_from(keys), VALUES, min_size=1, max_size=1)
    merged = st.builds(lambda a, b: {**a, **b}, plausible, arbitrary)
    return st.one_of(merged, VALUES)


@st.composite
def kubeconfigs(draw: st.DrawFn) -> Any:
    """Half of them plausible (names agree, fields of the right kind), half with junk."""
    junk = draw(st.booleans())
    names = st.one_of(st.just("x"), SCALARS) if junk else st.just("x")
    servers = st.one_of(SERVERS, VALUES) if junk else SERVERS
    doc: dict[str, Any] = {
        "clusters": [
            {"name": draw(names), "cluster": draw(section(CLUSTER_KEYS, {"server": servers}, junk))}
        ],
        "users": [{"name": draw(names), "user": draw(section(USER_KEYS, {}, junk))}],
        "contexts": [
            {"name": draw(names), "context": {"cluster": draw(names), "user": draw(names)}}
        ],
        "current-context": draw(names),
    }
    if junk and draw(st.booleans()):
        doc[draw(st.sampled_from(sorted(doc)))] = draw(VALUES)  # a section of the wrong type
    return doc


PROXY_VALUES = st.one_of(
    st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=20),
    st.sampled_from(
        ["http://127.0.0.1:9", "socks5://127.0.0.1:1080", "proxy:3128", "10.0.0.0/8", "*", " "]
    ),
)
PROXY_ENV = st.dictionaries(
    st.sampled_from(["HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY"]),
    PROXY_VALUES,
    max_size=2,
)


@settings(max_examples=200, deadline=None)
@given(doc=kubeconfigs(), proxies=PROXY_ENV)
def test_any_kubeconfig_is_a_connection_or_one_configuration_error(
    doc: Any, proxies: dict[str, str]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kubeconfig"
        path.write_text(yaml.safe_dump(doc))
        clean = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        with mock.patch.dict(os.environ, {**clean, **proxies}, clear=True):
            try:
                connection = connection_for(ClusterAccess(kubeconfig=str(path)))
            except ConfigError as exc:
                assert "\n" not in error_line("node-holder", str(exc))  # what the CLI prints
                event("refused")
                return
            event("a connection")
            Client(connection, pool_size=2)  # builds the pool: TLS files, proxy
            assert connection.server.startswith(("http://", "https://"))
            assert isinstance(connection.credentials(), dict)
