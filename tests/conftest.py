"""Shared fixtures: an API test server per test, and kubeconfigs for it.

Keep fixture names stable: other test files rely on `api`, `tls_api`, `kubeconfig` and
`api_http`.
"""

from __future__ import annotations

import json
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import urllib3

from tests.kubeapi.apiserver import ApiServer


@pytest.fixture
def api() -> Iterator[ApiServer]:
    """An ApiServer started for the test and stopped after it."""
    server = ApiServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
    # An exception inside the server was answered as a 500; it is a server bug either way.
    assert not server.errors, server.errors[0]


@pytest.fixture
def tls_api(tmp_path: Path) -> Iterator[ApiServer]:
    """The API test server over HTTPS with a self-signed certificate (tmp_path/tls.crt)."""
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    request = ("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=a")
    names = ("-addext", "subjectAltName=IP:127.0.0.1")
    subprocess.run(
        ["openssl", *request, *names, "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = ApiServer()
    server.tls = context
    with server:
        yield server


@pytest.fixture
def kubeconfig(api: ApiServer, tmp_path: Path) -> Path:
    """An admin kubeconfig for `api`."""
    return api.write_kubeconfig(tmp_path / "admin.kubeconfig")


@dataclass
class Reply:
    """A raw HTTP reply with its body parsed as JSON when it is JSON."""

    status: int
    headers: Any
    data: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.data)


class ApiHttp:
    """A thin urllib3 client for HTTP-level tests against the server."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.pool = urllib3.PoolManager(retries=False)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str | None = None,
        accept: str | None = None,
        identity: str | None = "admin",
        headers: dict[str, str] | None = None,
        timeout: float = 10.0,
    ) -> Reply:
        sent: dict[str, str] = dict(headers or {})
        if identity is not None:
            sent["Authorization"] = f"Bearer {self.api.token(identity)}"
        if accept is not None:
            sent["Accept"] = accept
        raw: bytes | None = None
        if body is not None:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            sent["Content-Type"] = content_type or "application/json"
        resp = self.pool.request(
            method,
            self.api.url + path,
            body=raw,
            headers=sent,
            timeout=timeout,
            decode_content=True,
        )
        return Reply(resp.status, resp.headers, resp.data)

    def get(self, path: str, **kw: Any) -> Reply:
        return self.request("GET", path, **kw)

    def patch(self, path: str, body: Any, content_type: str, **kw: Any) -> Reply:
        return self.request("PATCH", path, body=body, content_type=content_type, **kw)


@pytest.fixture
def api_http(api: ApiServer) -> ApiHttp:
    """An HTTP client authenticated as admin (pass identity= to change)."""
    return ApiHttp(api)
