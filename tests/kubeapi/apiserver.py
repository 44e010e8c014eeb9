"""A Kubernetes API test server: real HTTP/1.1 on 127.0.0.1 that behaves like kube-apiserver.

Used by the tests, the benchmarks (15,000 EKS-shaped nodes), `node-holder simulate` and
`make demo`. It serves nodes (list with label/field selectors and consistent paging, get, create,
update, the three patch types, delete, the status subresource), Karpenter v1 NodePools as a
custom resource (karpenter.sh/v1: pruning, CRD defaults and schema validation, no strategic merge
patch, resourceVersion required on update, generation on spec changes), events in both APIs,
discovery, namespaces, empty pod lists and node leases, with metadata-only and Table responses,
gzip over 128 KiB, bearer-token identities with RBAC-style 403s, dryRun, optimistic concurrency
and Status error bodies worded like the real server. See the sibling modules for what was checked
against kube-apiserver's source (via the search tool) and how:

- statuses.py: Status bodies and messages (apimachinery api/errors).
- store.py: revisions, snapshots, continue tokens, 410 after compaction (storage/etcd3).
- patching.py: JSON / merge / strategic merge patch and their error codes (handlers/patch.go).
- selection.py: label and field selectors (apimachinery labels, fields).
- validation.py: names, labels, annotations (256 KiB), events (api/validation, event strategy).
- tables.py: `as=Table` for nodes and events (printers.go); human ages from the server clock.
- auth.py: tokens, identities and 401/403 bodies; discovery.py: discovery and /version.
- crd.py: how apiextensions-apiserver prunes, defaults and validates a custom resource;
  karpenter.py: the NodePool CRD's schema (budgets), printer columns and a NodePool builder.

Negotiation follows handlers/response.go and negotiation/: the first acceptable Accept clause by
q-value wins; `as=PartialObjectMetadata[List]` items carry kind PartialObjectMetadata and
apiVersion meta.k8s.io/v1 (asPartialObjectMetadataList sets the GVK on each item); an unusable
Accept -> 406. Gzip applies when the client accepts it and the body exceeds 128 KiB
(responsewriters/writers.go defaultGzipThresholdBytes). Node writes keep `status` on the main
resource and `spec` on /status (node strategy PrepareForUpdate); nodes and events allow
unconditional updates (AllowUnconditionalUpdate), so a PUT without resourceVersion is accepted.

Run standalone: `python -m tests.kubeapi.apiserver --nodes 50 --kubeconfig-out kc.yaml`.
"""

from __future__ import annotations

import argparse
import contextlib
import email.utils
import gzip
import json
import random
import re
import secrets
import select
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.kubeapi import auth, crd, debugapi, discovery, karpenter, managedfields, tables
from tests.kubeapi.nodegen import (
    BIG_ANNOTATION,
    big_annotation,
    ip_name,
    make_eks_node,
    make_minimal_node,
    rfc3339,
)
from tests.kubeapi.nodegen import mark_deleting as _mark_deleting_obj
from tests.kubeapi.patching import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    PATCH_TYPES,
    STRATEGIC_PATCH,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_patch,
    decode_json,
)
from tests.kubeapi.resources import (
    BATCH_KINDS,
    CONFIGMAPS,
    CORE_EVENTS,
    NAMESPACE_FIELD_LABELS,
    NODEPOOLS,
    NODES,
    POD_FIELD_LABELS,
    V1_EVENTS,
    ResourceKind,
)
from tests.kubeapi.resources import _same as _identity
from tests.kubeapi.selection import (
    SelectorError,
    convert_field_terms,
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from tests.kubeapi.statuses import (
    ApiError,
    FieldError,
    GoLiteral,
    already_exists,
    bad_request,
    conflict,
    generic,
    internal,
    invalid,
    invalid_field,
    method_not_allowed,
    not_acceptable,
    not_found,
    not_supported_field,
    path_not_found,
    unauthorized,
    unsupported_media_type,
)
from tests.kubeapi.store import Entry, Store, decode_continue, dumps, encode_continue
from tests.kubeapi.validation import (
    decode_error,
    validate_event,
    validate_object_meta,
    validate_update_meta,
)

__all__ = [
    "ApiServer",
    "Fault",
    "RequestInfo",
    "RequestRecord",
    "main",
    "make_eks_node",
    "make_minimal_node",
]

GZIP_THRESHOLD = 128 * 1024
_META_GROUP = "meta.k8s.io"
_TRANSFORMS = {"Table", "PartialObjectMetadata", "PartialObjectMetadataList"}
_FLOWSCHEMA_UID = str(uuid.uuid5(uuid.NAMESPACE_DNS, "flowschema.global-default"))
_PRIORITY_UID = str(uuid.uuid5(uuid.NAMESPACE_DNS, "prioritylevel.global-default"))
_READ_METHODS = ("GET", "HEAD")
# Where each resource that tests count writes to lives (writes(), fault bodies).
RESOURCE_PATHS = {"nodes": "/api/v1/nodes", "nodepools": "/apis/karpenter.sh/v1/nodepools"}


# --------------------------------------------------------------------------- public records


@dataclass
class Fault:
    """A scripted failure for the next `times` requests matching `method` and `path` (regex).

    `status` answers that code with a Status body (or plain text with `plain_text`, like the
    API Priority and Fairness 429); `delay` sleeps first (to exceed a client timeout);
    `drop_connection` closes the socket without answering. `times=None` never runs out.
    `raw` answers those bytes as they are (`status` or 200, `content_type`), as a proxy in
    between might; `gzip_cut` sends them gzip-compressed and cut in half. `headers` are added
    to the answer (say, `Retry-After` as a date). The real answer's body can be mangled in
    transit too: `drip=(n, t)` sends it n bytes every t seconds; `cut="truncate"` sends half
    of it (Content-Length says all) and closes, `cut="reset"` sends half and resets.
    `hold` keeps the answer back until the client hangs up, for at most `hold` seconds: the
    request's record says which came first (`hung_up`), so a test shows that a client gave
    up without timing it. A drip stops, too, once the client has hung up.
    """

    method: str | None = None
    path: str | None = None
    status: int | None = None
    times: int | None = 1
    retry_after: int | None = None
    delay: float = 0.0
    drop_connection: bool = False
    reason: str | None = None
    message: str | None = None
    plain_text: bool = False
    raw: bytes | None = None
    content_type: str = "application/json"
    gzip_cut: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    drip: tuple[int, float] | None = None
    cut: str | None = None  # "truncate" | "reset"
    hold: float = 0.0
    hits: int = 0

    def _matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.method is not None and self.method.upper() != method:
            return False
        return self.path is None or re.search(self.path, path) is not None

    @property
    def spent(self) -> bool:
        """True once it has applied `times` times."""
        return self.times is not None and self.hits >= self.times


@dataclass(frozen=True)
class RequestInfo:
    """What a request hook sees, before the server handles the request."""

    method: str
    path: str
    query: dict[str, str]
    identity: str | None
    content_type: str
    body: bytes


@dataclass
class RequestRecord:
    """One line of the request log."""

    method: str
    path: str
    query: dict[str, str]
    status: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    identity: str | None = None
    content_type: str = ""
    accept: str = ""
    accept_encoding: str = ""
    duration: float = 0.0
    stored: bool = False  # the request changed stored state (no-ops and dry runs do not)
    user_agent: str = ""
    started: float = 0.0  # time.perf_counter() when the request arrived (for overlap checks)
    hung_up: bool = False  # the client closed the connection before the whole answer went out
    bytes_sent: int = 0  # body bytes that went out (fewer than bytes_out if dripped or cut)


@dataclass
class _Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    stored: bool = False


@dataclass
class _Request:
    method: str
    path: str
    query: dict[str, str]
    multi: dict[str, list[str]]
    headers: Any
    body: bytes
    identity: auth.Identity | None

    @property
    def user_agent(self) -> str:
        return self.headers.get("User-Agent", "")


@dataclass(frozen=True)
class _Target:
    """The negotiated response form."""

    media: str = "json"  # json | yaml
    as_kind: str | None = None  # Table | PartialObjectMetadata | PartialObjectMetadataList
    group_version: str = "meta.k8s.io/v1"


# --------------------------------------------------------------------------- negotiation


def _parse_accept(header: str) -> list[tuple[str, dict[str, str], float]]:
    clauses = []
    for order, raw in enumerate(header.split(",")):
        parts = [p.strip() for p in raw.split(";")]
        media = parts[0].lower()
        if not media:
            continue
        params: dict[str, str] = {}
        for p in parts[1:]:
            if "=" in p:
                k, v = p.split("=", 1)
                params[k.strip().lower()] = v.strip().strip('"')
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 1.0
        clauses.append((order, media, params, q))
    clauses.sort(key=lambda c: (-c[3], c[1] in ("*/*", "application/*"), c[0]))
    return [(media, params, q) for _, media, params, q in clauses]


def negotiate(header: str | None, *, transforms: bool = True) -> _Target:
    """NegotiateOutputMediaType: the first usable clause, or 406 NotAcceptable."""
    if not header:
        return _Target()
    for media, params, q in _parse_accept(header):
        if q <= 0:
            continue
        if media in ("application/json", "*/*", "application/*", "application/json;stream=watch"):
            kind = "json"
        elif media == "application/yaml":
            kind = "yaml"
        else:
            continue
        as_kind = params.get("as")
        if as_kind is None:
            if params.get("g") or params.get("v"):
                continue
            return _Target(kind)
        if not transforms:
            continue
        if (
            as_kind in _TRANSFORMS
            and params.get("g") == _META_GROUP
            and params.get("v") in ("v1", "v1beta1")
        ):
            if as_kind == "Table" and kind not in ("json", "yaml"):
                continue
            return _Target(kind, as_kind, f"{_META_GROUP}/{params['v']}")
    raise not_acceptable()


# --------------------------------------------------------------------------- the server


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], api: ApiServer) -> None:
        self.api = api
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Client disconnects are normal here (dropped faults, timeouts); keep anything else."""
        exc = sys.exc_info()[1]
        if exc is not None and not isinstance(exc, OSError | ValueError):
            self.api.errors.append("".join(traceback.format_exception(exc)))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kube-apiserver-test"
    sys_version = ""
    disable_nagle_algorithm = True
    timeout = 300
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the request log is kept in memory (api.requests)."""

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self, method: str) -> None:
        api = self.server.api
        if api.debug_endpoints and self.path.startswith(debugapi.PREFIX):
            self.wfile.write(debugapi.encode(*debugapi.handle(api, method, self.path)))
            return
        started = time.perf_counter()
        url = urlsplit(self.path)
        path_token, path = auth.split_token_path(url.path)
        url = url._replace(path=path)
        multi = parse_qs(url.query, keep_blank_values=True)
        query = {k: v[0] for k, v in multi.items()}
        body = self._read_body()
        identity = api._tokens.authenticate(self.headers.get("Authorization"), api.now())
        if identity is None and path_token:
            identity = api._tokens.from_token(path_token, api.now())
        content_type = self.headers.get("Content-Type", "")
        record = RequestRecord(
            method=method,
            path=url.path,
            query=query,
            bytes_in=len(body),
            identity=identity.name if identity else None,
            content_type=content_type,
            accept=self.headers.get("Accept", ""),
            accept_encoding=self.headers.get("Accept-Encoding", ""),
            user_agent=self.headers.get("User-Agent", ""),
            started=started,
        )
        info = RequestInfo(method, url.path, query, record.identity, content_type, body)
        response: _Response | None = None
        fault: Fault | None = None
        try:
            for hook in list(api._hooks):
                hook(info)
            fault = api._take_fault(method, url.path)
            if fault is not None:
                if fault.delay:
                    time.sleep(fault.delay)
                if fault.hold and self._gone_within(fault.hold):
                    record.hung_up = True
                    record.duration = time.perf_counter() - started
                    api._record(record)
                    self._close()
                    return
                if fault.drop_connection:
                    record.duration = time.perf_counter() - started
                    api._record(record)
                    self._drop()
                    return
                if fault.raw is not None:
                    response = _raw_response(fault)
                elif fault.status:
                    response = api._fault_response(fault, url.path)
            if response is None:
                request = _Request(method, url.path, query, multi, self.headers, body, identity)
                response = api._dispatch(request)
        except ApiError as err:
            response = api._error_response(err)
        except Exception as exc:  # a bug here must show up as a 500, not a hung client
            api.errors.append("".join(traceback.format_exception(exc)))
            response = api._error_response(internal(f"{type(exc).__name__}: {exc}"))
        if response.stored and api.write_latency > 0:
            time.sleep(api.write_latency)
        payload, body_len = self._encode_response(response, method == "HEAD")
        record.status = response.status
        record.stored = response.stored
        record.bytes_out = body_len
        record.duration = time.perf_counter() - started
        api._record(record)  # before the bytes go out: a client that got them sees the record
        try:
            if fault is not None and (fault.drip or fault.cut):
                self._mangle(fault, payload, len(payload) - body_len, record)
            else:
                self.wfile.write(payload)
                record.bytes_sent = body_len
        except OSError:
            record.hung_up = True
            self.close_connection = True

    def _mangle(self, fault: Fault, payload: bytes, head: int, record: RequestRecord) -> None:
        """Send the head whole and the body as `fault.drip` / `fault.cut` say."""
        self.wfile.write(payload[:head])
        if fault.cut:
            half = (len(payload) - head) // 2
            self.wfile.write(payload[head : head + half])
            record.bytes_sent = half
            if fault.cut == "reset":
                self._drop()
            else:
                self._close()
            return
        assert fault.drip is not None
        size, pause = fault.drip
        for at in range(head, len(payload), size):
            if self.server.api._httpd is None:  # the server stopped: stop dripping
                return self._close()
            self.wfile.write(payload[at : at + size])
            record.bytes_sent = min(at + size, len(payload)) - head
            if self._gone_within(pause):
                record.hung_up = True
                return self._close()
        return None

    def _gone_within(self, seconds: float) -> bool:
        """Wait up to `seconds` for the client to close the connection; True if it did. A
        client sends nothing while it waits for an answer: anything readable is its end."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if self.server.api._httpd is None:  # the server stopped
                return False
            readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
            if not readable:
                continue
            try:
                data = self.connection.recv(1, socket.MSG_PEEK)
            except ssl.SSLWantReadError:  # part of a TLS record: look again
                continue
            except ValueError:  # TLS sockets cannot peek; nothing is expected but the end
                data = self.connection.recv(1)
            except OSError:  # reset
                return True
            if not data:
                return True
            time.sleep(max(end - time.monotonic(), 0))  # a request sent ahead: not the end
        return False

    def _close(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()

    def _encode_response(self, response: _Response, head_only: bool) -> tuple[bytes, int]:
        """Status line, headers and (maybe gzipped) body as one buffer, and the body size."""
        api = self.server.api
        body = response.body
        if api.expand is not None:
            body = body.replace(*api.expand)
        headers = {
            "Audit-Id": str(uuid.uuid4()),
            "Cache-Control": "no-cache, private",
            "Content-Type": response.content_type,
            "Date": email.utils.format_datetime(api.now().replace(microsecond=0), usegmt=True)[:-3]
            + api.date_zone,
            "X-Kubernetes-Pf-Flowschema-Uid": _FLOWSCHEMA_UID,
            "X-Kubernetes-Pf-Prioritylevel-Uid": _PRIORITY_UID,
        }
        accepts_gzip = "gzip" in (self.headers.get("Accept-Encoding") or "").lower()
        if accepts_gzip and len(body) > GZIP_THRESHOLD:
            body = gzip.compress(body, compresslevel=1)
            headers["Content-Encoding"] = "gzip"
            headers["Vary"] = "Accept-Encoding"
        headers.update(response.headers)
        headers["Content-Length"] = str(len(body))
        reason = self.responses.get(response.status, ("",))[0]
        head = f"HTTP/1.1 {response.status} {reason}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers.items()
        )
        payload = head.encode("latin-1") + b"\r\n" + (b"" if head_only else body)
        return payload, len(body)


def _raw_response(fault: Fault) -> _Response:
    body, headers = fault.raw or b"", dict[str, str]()
    if fault.gzip_cut:
        zipped = gzip.compress(body)
        body, headers = zipped[: len(zipped) // 2], {"Content-Encoding": "gzip"}
    return _Response(fault.status or 200, body, fault.content_type, headers | fault.headers)


class ApiServer:
    """The in-process API server (see the module docstring); start() it or use `with`."""

    def __init__(
        self,
        clock_offset: timedelta = timedelta(0),
        write_latency: float = 0.0,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        seed: int = 0,
    ) -> None:
        self.store = Store()
        self.write_latency = write_latency
        self.tls: ssl.SSLContext | None = None
        self.date_zone = "GMT"  # how the Date header names UTC ("-0000" is legal too, RFC 5322)
        self.debug_endpoints = False  # test-only /debug/ control (debugapi.py), standalone only
        self.expand: tuple[bytes, bytes] | None = None  # (placeholder, bytes): big annotations
        self.errors: list[str] = []  # tracebacks of unexpected server errors (answered as 500)
        #: False: a cluster without Karpenter's NodePool CRD (its paths answer 404, as there).
        self.nodepools_served = True
        #: A Karpenter that stores v1beta1 NodePools: karpenter.DROPS_REASONS, DROPS_BUDGETS.
        self.karpenter_conversion: str | None = None
        self._tokens = auth.Tokens()
        self._clock_offset = clock_offset
        self._frozen: datetime | None = None
        self._host = host
        self._port = port
        self._seed = seed
        self._faults: list[Fault] = []
        self._faults_lock = threading.Lock()
        self._hooks: list[Callable[[RequestInfo], None]] = []
        self._log: list[RequestRecord] = []
        self._log_lock = threading.Lock()
        self._created_events: list[dict[str, Any]] = []
        self._name_seq: dict[str, int] = {}
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._namespaces_created = rfc3339(datetime.now(UTC) - timedelta(days=90))

    # ---- lifecycle

    def start(self) -> ApiServer:
        """Bind and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        self._httpd = _HTTPServer((self._host, self._port), self)
        self._port = self._httpd.server_address[1]
        if self.tls is not None:  # HTTPS with the caller's certificate (set before start)
            self._httpd.socket = self.tls.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="apiserver",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every open connection."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        with httpd.connections_lock:
            conns = list(httpd.connections)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>` (the port is known once started); https with `tls`."""
        return f"http{'s' if self.tls else ''}://{self._host}:{self._port}"

    @property
    def port(self) -> int:
        """The bound port."""
        return self._port

    # ---- identities

    def token(self, identity: str) -> str:
        """The bearer token of `admin` or `readonly` ("" for `noauth`)."""
        return self._tokens.token(identity)

    def accept_token(
        self, token: str, identity: str = "admin", expires: datetime | None = None
    ) -> None:
        """Also take `token` (a JWT from an identity provider, say) as `identity`, until
        `expires` on the server's clock if given."""
        self._tokens.accept(token, identity, expires)

    def write_kubeconfig(
        self, path: str | Path, identity: str = "admin", context: str = "test"
    ) -> Path:
        """Write a kubeconfig for `identity` (admin | readonly | noauth); returns the path."""
        return auth.write_kubeconfig(path, self.url, self.token(identity), identity, context)

    # ---- clock

    def now(self) -> datetime:
        """The server clock (aware UTC): frozen time, or local time plus the offset."""
        frozen = self._frozen
        if frozen is not None:
            return frozen
        return datetime.now(UTC) + self._clock_offset

    def set_clock(self, when: datetime | None) -> None:
        """Freeze the clock at `when` (None: follow the local clock plus the offset again)."""
        if when is not None and when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        self._frozen = when.astimezone(UTC) if when is not None else None

    def advance_clock(self, delta: timedelta) -> None:
        """Move the frozen clock, or the offset when the clock is not frozen."""
        if self._frozen is not None:
            self._frozen += delta
        else:
            self._clock_offset += delta

    # ---- nodes, from Python

    def _new_node(
        self,
        name: str,
        *,
        created: datetime | None,
        labels: dict[str, str] | None,
        annotations: dict[str, str] | None,
        eks: bool,
        deleting: bool,
    ) -> dict[str, Any]:
        when = created or self.now()
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        rng = random.Random(f"{self._seed}:{name}")
        make = make_eks_node if eks else make_minimal_node
        obj = make(name, when, labels=labels, annotations=annotations, rng=rng)
        if deleting:
            obj = _mark_deleting_obj(obj, self.now(), eks=eks)
        return obj

    def add_node(
        self,
        name: str,
        *,
        created: datetime | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        eks: bool = True,
        deleting: bool = False,
    ) -> dict[str, Any]:
        """Add a node (EKS-shaped, or minimal with eks=False); returns a copy of it."""
        obj = self._new_node(
            name,
            created=created,
            labels=labels,
            annotations=annotations,
            eks=eks,
            deleting=deleting,
        )
        with self.store.lock:
            if self.store.get("nodes", name) is not None:
                raise ValueError(f"node {name!r} already exists")
            entry = self.store.put("nodes", name, obj)
        return json.loads(entry.full("Node", "v1"))

    def add_batch(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a batch/v1 CronJob or Job as a controller would (status included)."""
        rk = BATCH_KINDS[resource]
        meta = {
            "uid": str(uuid.uuid4()),
            "creationTimestamp": rfc3339(self.now()),
            "generation": 1,
            **obj["metadata"],
        }
        full = rk.defaults({**obj, "kind": rk.kind, "apiVersion": rk.api_version, "metadata": meta})
        key = self._key(rk, meta["namespace"], meta["name"])
        with self.store.lock:
            entry = self.store.put(rk.storage, key, full)
        return json.loads(entry.full(rk.kind, rk.api_version))

    def add_configmap(self, namespace: str, name: str, data: dict[str, str]) -> None:
        """Store a core/v1 ConfigMap (the CronJob's settings, as the chart installs them)."""
        meta = {"name": name, "namespace": namespace, "uid": str(uuid.uuid4())}
        meta["creationTimestamp"] = rfc3339(self.now())
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
        with self.store.lock:
            self.store.put(CONFIGMAPS.storage, self._key(CONFIGMAPS, namespace, name), obj)

    def get_batch(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        rk = BATCH_KINDS[resource]
        with self.store.lock:
            entry = self.store.get(rk.storage, self._key(rk, namespace, name))
        return None if entry is None else json.loads(entry.full(rk.kind, rk.api_version))

    def add_nodes(
        self,
        n: int,
        *,
        prefix: str = "ip-10-0-",
        created: datetime | Callable[[int], datetime] | None = None,
        eks: bool = True,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        deleting: bool = False,
    ) -> list[str]:
        """Add `n` nodes named like EC2 hosts; `created` may be a function of the index."""
        names: list[str] = []
        seq = self._name_seq.get(prefix, 0)
        with self.store.lock:
            existing = self.store.collections["nodes"].entries
            while len(names) < n:
                name = ip_name(seq, prefix)
                seq += 1
                if name not in existing:
                    names.append(name)
        self._name_seq[prefix] = seq
        objs = []
        for i, name in enumerate(names):
            when = created(i) if callable(created) else created
            objs.append(
                self._new_node(
                    name,
                    created=when,
                    labels=labels,
                    annotations=annotations,
                    eks=eks,
                    deleting=deleting,
                )
            )
        with self.store.lock:
            for name, obj in zip(names, objs, strict=True):
                self.store.put("nodes", name, obj)
        return names

    def get_node(self, name: str) -> dict[str, Any] | None:
        """A deep copy of the stored node, or None."""
        entry = self.store.get("nodes", name)
        return json.loads(entry.full("Node", "v1")) if entry else None

    def annotations(self, name: str) -> dict[str, str]:
        """The node's annotations (KeyError if there is no such node)."""
        entry = self.store.get("nodes", name)
        if entry is None:
            raise KeyError(name)
        return dict(entry.obj["metadata"].get("annotations") or {})

    def edit_node(self, name: str, fn: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Apply `fn` to a copy and store it as a person's edit (always a new resourceVersion)."""
        with self.store.lock:
            entry = self.store.get("nodes", name)
            if entry is None:
                raise KeyError(name)
            obj = json.loads(entry.full("Node", "v1"))
            fn(obj)
            obj["metadata"]["name"] = name
            changed, removed = managedfields.object_diff(entry.obj, obj, status=False)
            obj["metadata"]["managedFields"] = managedfields.record_update(
                entry.obj["metadata"].get("managedFields"),
                "kubectl-edit",
                changed,
                removed,
                rfc3339(self.now()),
            )
            new = self.store.put("nodes", name, obj)
        return json.loads(new.full("Node", "v1"))

    def set_annotation(self, name: str, key: str, value: str | None) -> dict[str, Any]:
        """Set (or with None remove) one annotation, as a person's edit."""

        def change(obj: dict[str, Any]) -> None:
            annotations = obj["metadata"].setdefault("annotations", {})
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value

        return self.edit_node(name, change)

    def delete_node(self, name: str) -> bool:
        """Remove the node outright (finalizers notwithstanding); False if it did not exist."""
        with self.store.lock:
            return self.store.delete("nodes", name) is not None

    def mark_deleting(self, name: str) -> dict[str, Any]:
        """Give the node a deletionTimestamp (and Karpenter's finalizer), as during a drain."""
        with self.store.lock:
            entry = self.store.get("nodes", name)
            if entry is None:
                raise KeyError(name)
            eks = "karpenter.sh/nodepool" in (entry.obj["metadata"].get("labels") or {})
            obj = _mark_deleting_obj(json.loads(entry.full("Node", "v1")), self.now(), eks=eks)
            new = self.store.put("nodes", name, obj)
        return json.loads(new.full("Node", "v1"))

    def node_names(self) -> list[str]:
        """Names of all nodes, sorted."""
        with self.store.lock:
            return sorted(self.store.collections["nodes"].entries)

    # ---- Karpenter NodePools, from Python (through the same create/update code as the API)

    def add_nodepool(
        self,
        name: str,
        *,
        budgets: list[dict[str, Any]] | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        status: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Create a karpenter.sh/v1 NodePool as `kubectl apply` would, CRD defaults and
        validation included (an invalid one raises ApiError, 422); `budgets=None` leaves the
        list to the CRD default `[{nodes: "10%"}]`. `status` is then written as Karpenter's
        controller would (say `{"nodes": 3}`). Returns a copy of what is stored."""
        obj = karpenter.make_nodepool(name, budgets=budgets, labels=labels, annotations=annotations)
        self._create_object(
            NODEPOOLS, "", obj, dry=False, manager="kubectl-client-side-apply", validation="Strict"
        )
        if status is not None:
            self._write(
                NODEPOOLS,
                name,
                name,
                lambda current: {**current, "status": status},
                _Target(),
                dry=False,
                manager="karpenter",
                validation="Strict",
                sub="status",
                precondition="",
                patch_errors=True,
            )
        return self.get_nodepool(name) or {}

    def get_nodepool(self, name: str) -> dict[str, Any] | None:
        """A deep copy of the stored NodePool, or None."""
        entry = self.store.get("nodepools", name)
        return json.loads(entry.full("NodePool", karpenter.API_VERSION)) if entry else None

    def edit_nodepool(self, name: str, fn: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Apply `fn` to a copy and store it as a person's (or Argo CD's) update would: CRD
        defaults, validation (ApiError), generation; a no-op stores nothing. Returns the result."""

        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            obj = json.loads(dumps(current))
            fn(obj)
            return obj

        response = self._write(
            NODEPOOLS,
            name,
            name,
            mutate,
            _Target(),
            dry=False,
            manager="kubectl-edit",
            validation="Strict",
            sub="",
            precondition="",
            patch_errors=True,
        )
        return json.loads(response.body)

    # ---- store-wide

    def compact(self) -> None:
        """Expire every continue token issued so far (next use: 410 Expired)."""
        self.store.compact()

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion."""
        return self.store.rv

    @property
    def events(self) -> list[dict[str, Any]]:
        """Events created through the API, as created (in the API group they were posted to)."""
        with self._log_lock:
            return json.loads(json.dumps(self._created_events))

    # ---- faults, hooks, log

    def inject(self, fault: Fault) -> Fault:
        """Script a failure; returns it (its `hits` counts the requests it applied to)."""
        with self._faults_lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """Forget every scripted failure."""
        with self._faults_lock:
            self._faults.clear()

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._faults_lock:
            for fault in self._faults:
                if fault._matches(method, path):
                    fault.hits += 1
                    return fault
        return None

    def on_request(self, hook: Callable[[RequestInfo], None]) -> Callable[[RequestInfo], None]:
        """Call `hook(RequestInfo)` before each request is handled."""
        self._hooks.append(hook)
        return hook

    def remove_hook(self, hook: Callable[[RequestInfo], None]) -> None:
        """Stop calling `hook`."""
        if hook in self._hooks:
            self._hooks.remove(hook)

    @property
    def requests(self) -> list[RequestRecord]:
        """The request log (a copy)."""
        with self._log_lock:
            return list(self._log)

    def reset_log(self) -> None:
        """Empty the request log."""
        with self._log_lock:
            self._log.clear()

    def writes(self, resource: str = "nodes") -> list[RequestRecord]:
        """Logged non-GET requests to nodes (or to `nodepools`), subresources included."""
        prefix = RESOURCE_PATHS[resource]
        return [
            r
            for r in self.requests
            if r.method not in _READ_METHODS
            and (r.path == prefix or r.path.startswith(prefix + "/"))
        ]

    def _record(self, record: RequestRecord) -> None:
        with self._log_lock:
            self._log.append(record)

    # ---- responses

    def _error_response(self, err: ApiError) -> _Response:
        headers = dict(err.headers)
        if err.plain:
            return _Response(
                err.code, err.message.encode() + b"\n", "text/plain; charset=utf-8", headers
            )
        return _Response(err.code, dumps(err.status()) + b"\n", headers=headers)

    def _fault_response(self, fault: Fault, path: str) -> _Response:
        """A Status body naming the node or NodePool in the path (a 409 words it as a Conflict)."""
        rk, name = NODES, ""
        for kind in (NODES, NODEPOOLS):
            match = re.match(f"^{RESOURCE_PATHS[kind.resource]}/([^/]+)", path)
            if match:
                rk, name = kind, match.group(1)
        err = generic(fault.status or 500, name, rk.resource, fault.retry_after, rk.group)
        if fault.reason:
            err.reason = fault.reason
        if fault.message:
            err.message = fault.message
        err.plain = fault.plain_text
        if fault.retry_after is not None:
            err.headers["Retry-After"] = str(fault.retry_after)
        err.headers.update(fault.headers)
        return self._error_response(err)

    # ---- routing

    def _dispatch(self, req: _Request) -> _Response:
        path = req.path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            return _Response(200, b"ok", "text/plain; charset=utf-8")
        if req.identity is None:
            raise unauthorized()
        parts = path.strip("/").split("/")
        if path == "/version":
            return self._doc(req, discovery.VERSION)
        if path == "/api":
            return self._doc(req, discovery.API_VERSIONS)
        if path == "/apis":
            return self._doc(req, discovery.API_GROUPS)
        if path == "/openapi/v3":
            return self._doc(req, discovery.OPENAPI_V3_INDEX)
        if path.startswith("/openapi/v3/") and path[12:] in discovery.OPENAPI_V3_DOCS:
            return self._doc(req, discovery.OPENAPI_V3_DOCS[path[12:]])
        if path == "/api/v1":
            return self._doc(req, discovery.CORE_RESOURCES)
        if (
            len(parts) == 3
            and parts[0] == "apis"
            and f"{parts[1]}/{parts[2]}" in discovery.GROUP_RESOURCES
        ):
            return self._doc(req, discovery.GROUP_RESOURCES[f"{parts[1]}/{parts[2]}"])
        if parts[:2] == ["api", "v1"]:
            rest = parts[2:]
            if rest[0] == "nodes" and len(rest) <= 3:
                sub = rest[2] if len(rest) == 3 else ""
                if sub not in ("", "status"):
                    raise path_not_found()
                return self._resource(req, NODES, "", rest[1] if len(rest) > 1 else "", sub)
            if rest[0] == "events" and len(rest) == 1:
                return self._resource(req, CORE_EVENTS, "", "", "")
            if rest[0] == "pods" and len(rest) == 1:
                return self._pods(req, "")
            if rest[0] == "namespaces":
                if len(rest) <= 2:
                    return self._namespaces(req, rest[1] if len(rest) == 2 else "")
                ns = rest[1]
                if rest[2] == "events" and len(rest) <= 4:
                    return self._resource(
                        req, CORE_EVENTS, ns, rest[3] if len(rest) == 4 else "", ""
                    )
                if rest[2] == "pods" and len(rest) <= 4:
                    return self._pods(req, ns, rest[3] if len(rest) == 4 else "")
                if rest[2] == "configmaps" and len(rest) <= 4:
                    name = rest[3] if len(rest) == 4 else ""
                    return self._resource(req, CONFIGMAPS, ns, name, "")
        if parts[:3] == ["apis", "events.k8s.io", "v1"]:
            rest = parts[3:]
            if rest == ["events"]:
                return self._resource(req, V1_EVENTS, "", "", "")
            if len(rest) in (3, 4) and rest[0] == "namespaces" and rest[2] == "events":
                return self._resource(
                    req, V1_EVENTS, rest[1], rest[3] if len(rest) == 4 else "", ""
                )
        if parts[:3] == ["apis", "batch", "v1"]:
            rest = parts[3:]
            if len(rest) in (3, 4) and rest[0] == "namespaces" and rest[2] in BATCH_KINDS:
                name = rest[3] if len(rest) == 4 else ""
                return self._resource(req, BATCH_KINDS[rest[2]], rest[1], name, "")
        nodepools = parts[:4] == ["apis", "karpenter.sh", "v1", "nodepools"]
        if nodepools and len(parts) <= 6 and self.nodepools_served:
            sub = parts[5] if len(parts) == 6 else ""
            if sub not in ("", "status"):
                raise path_not_found()
            return self._resource(req, NODEPOOLS, "", parts[4] if len(parts) > 4 else "", sub)
        if parts[:3] == ["apis", "coordination.k8s.io", "v1"]:
            rest = parts[3:]
            if len(rest) == 4 and rest[0] == "namespaces" and rest[2] == "leases":
                return self._lease(req, rest[1], rest[3])
        raise path_not_found()

    def _doc(self, req: _Request, doc: dict[str, Any]) -> _Response:
        if req.method not in _READ_METHODS:
            raise ApiError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                {},
            )
        target = negotiate(req.headers.get("Accept"), transforms=False)
        return self._encode(dumps(doc), target)

    def _encode(
        self, body: bytes, target: _Target, status: int = 200, stored: bool = False
    ) -> _Response:
        if target.media == "yaml":
            return _Response(
                status,
                yaml.safe_dump(json.loads(body), sort_keys=False).encode(),
                "application/yaml",
                stored=stored,
            )
        return _Response(status, body + b"\n", stored=stored)

    # ---- generic resources (nodes, events)

    def _resource(
        self,
        req: _Request,
        rk: ResourceKind,
        namespace: str,
        name: str,
        sub: str,
    ) -> _Response:
        """Authorize, then route a nodes/events request by verb."""
        verb = {
            "GET": "get" if name else "list",
            "HEAD": "get" if name else "list",
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if name else "deletecollection",
        }[req.method]
        if verb in ("list", "get") and req.query.get("watch") in ("true", "1"):
            verb = "watch"
        assert req.identity is not None
        auth.authorize(
            req.identity,
            verb,
            rk.resource,
            name=name,
            group=rk.group,
            namespace=namespace,
            subresource=sub,
        )
        writes_into_namespace = req.method == "POST" or (name and req.method != "GET")
        if namespace and namespace not in discovery.NAMESPACES and writes_into_namespace:
            raise not_found("namespaces", namespace)
        if verb == "watch":
            raise ApiError(
                405, "MethodNotAllowed", "watch is not supported by the API test server", {}
            )
        if verb == "list":
            return self._list(req, rk, namespace)
        if verb == "get":
            return self._get(req, rk, namespace, name)
        if verb == "create":
            if name:
                raise method_not_allowed(rk.resource, "create", rk.group)
            return self._create(req, rk, namespace)
        if verb == "update":
            return self._update(req, rk, namespace, name, sub)
        if verb == "patch":
            return self._patch(req, rk, namespace, name, sub)
        if verb == "delete":
            if sub:
                raise method_not_allowed(f"{rk.resource}/{sub}", "delete", rk.group)
            return self._delete(req, rk, namespace, name)
        raise method_not_allowed(rk.resource, "deletecollection", rk.group)

    @staticmethod
    def _key(rk: ResourceKind, namespace: str, name: str) -> str:
        return f"{namespace}/{name}" if rk.namespaced else name

    def _render(
        self,
        rk: ResourceKind,
        entry: Entry | None,
        obj: dict[str, Any],
        target: _Target,
        status: int = 200,
        *,
        stored: bool = False,
        include: str = "Metadata",
    ) -> _Response:
        """One object in the negotiated form."""
        if rk.to_external is not _identity or entry is None:
            external = rk.to_external(obj)
            full = dumps(external)
            meta = dumps(external.get("metadata") or {})
        else:
            full = entry.full(rk.kind, rk.api_version)
            meta = entry.meta
        if target.as_kind == "PartialObjectMetadataList":
            raise not_acceptable(
                "you requested PartialObjectMetadataList, but the requested object is not a list "
                f"({rk.internal_type})"
            )
        if target.as_kind == "PartialObjectMetadata":
            body = (
                b'{"kind":"PartialObjectMetadata","apiVersion":'
                + dumps(target.group_version)
                + b',"metadata":'
                + meta
                + b"}"
            )
        elif target.as_kind == "Table":
            rv = (obj.get("metadata") or {}).get("resourceVersion", "")
            body = tables.table(
                rk.columns,
                [(rk.cells(obj, self.now()), full, meta)],
                include_object=include,
                group_version=target.group_version,
                list_meta={"resourceVersion": rv},
            )
        else:
            body = full
        return self._encode(body, target, status, stored)

    def _get(self, req: _Request, rk: ResourceKind, namespace: str, name: str) -> _Response:
        target = negotiate(req.headers.get("Accept"))
        include = "Metadata"
        if target.as_kind == "Table":
            include = tables.check_include_object(req.query.get("includeObject"))
        entry = self.store.get(rk.storage, self._key(rk, namespace, name))
        if entry is None:
            raise not_found(rk.resource, name, rk.group)
        return self._render(rk, entry, entry.obj, target, include=include)

    @staticmethod
    def _list_options(
        req: _Request, labels_allowed: Callable[[str], str | None]
    ) -> tuple[list[Any], list[Any], int]:
        """labelSelector, fieldSelector (with the kind's field labels) and limit, or 400."""
        try:
            label_reqs = parse_label_selector(req.query.get("labelSelector", ""))
            field_terms = convert_field_terms(
                parse_field_selector(req.query.get("fieldSelector", "")), labels_allowed
            )
        except SelectorError as exc:
            raise bad_request(str(exc)) from None
        raw_limit = req.query.get("limit", "")
        try:
            limit = int(raw_limit) if raw_limit else 0
        except ValueError:
            raise bad_request(f'strconv.ParseInt: parsing "{raw_limit}": invalid syntax') from None
        if limit < 0:
            raise bad_request("list limit must not be negative")
        return label_reqs, field_terms, limit

    def _list(self, req: _Request, rk: ResourceKind, namespace: str) -> _Response:
        target = negotiate(req.headers.get("Accept"))
        if target.as_kind == "PartialObjectMetadata":
            raise not_acceptable(
                "you requested PartialObjectMetadata, but the requested object is a list "
                f"({rk.internal_type}List)"
            )
        include = (
            tables.check_include_object(req.query.get("includeObject"))
            if target.as_kind == "Table"
            else ""
        )
        label_reqs, field_terms, limit = self._list_options(req, rk.field_label)
        token = req.query.get("continue", "")
        rv_param = req.query.get("resourceVersion", "")
        if token and rv_param not in ("", "0"):
            raise bad_request("specifying resource version is not allowed when using continue")
        if rv_param and rv_param != "0":
            if not rv_param.isdigit():
                raise bad_request(f"invalid resource version: {rv_param}")
            if int(rv_param) > self.store.rv:
                raise ApiError(
                    504,
                    "Timeout",
                    f"Timeout: Too large resource version: {rv_param}, current: {self.store.rv}",
                    {
                        "causes": [
                            {
                                "reason": "ResourceVersionTooLarge",
                                "message": "Too large resource version",
                            }
                        ],
                        "retryAfterSeconds": 1,
                    },
                )
        if rv_param == "0" and not token:
            limit = 0  # served from the watch cache, which ignores limit (<= 1.33)
        prefix = f"{namespace}/" if rk.namespaced and namespace else ""
        start = ""
        if token:
            start, token_rv = decode_continue(token)
            snap_rv, entries = self.store.recall(rk.storage, token_rv, start)
        else:
            snap_rv, entries = self.store.snapshot(rk.storage)
        begin = 0
        if start:
            after = start[:-1] if start.endswith("\x00") else start
            begin = next((i for i, e in enumerate(entries) if e.key > after), len(entries))
        selected: list[Entry] = []
        last_index = len(entries)
        filtered = bool(label_reqs or field_terms)
        for i in range(begin, len(entries)):
            entry = entries[i]
            if prefix and not entry.key.startswith(prefix):
                continue
            if label_reqs and not labels_match(label_reqs, entry.labels):
                continue
            if field_terms and not fields_match(field_terms, rk.field_values(entry.obj)):
                continue
            selected.append(entry)
            if limit and len(selected) >= limit:
                last_index = i
                break
        list_meta: dict[str, Any] = {"resourceVersion": str(snap_rv)}
        if limit and last_index < len(entries) - 1:
            remaining = [
                e for e in entries[last_index + 1 :] if not prefix or e.key.startswith(prefix)
            ]
            if remaining:
                list_meta["continue"] = encode_continue(entries[last_index].key, snap_rv)
                if not filtered:
                    list_meta["remainingItemCount"] = len(remaining)
                self.store.remember(rk.storage, snap_rv, entries)
        return self._render_list(rk, selected, target, include, list_meta)

    def _render_list(
        self,
        rk: ResourceKind,
        selected: list[Entry],
        target: _Target,
        include: str,
        list_meta: dict[str, Any],
    ) -> _Response:
        converted = rk.to_external is not _identity
        if target.as_kind == "Table":
            now = self.now()
            rows: Iterable[tuple[list[Any], bytes, bytes]] = (
                (
                    rk.cells(e.obj, now),
                    dumps(rk.to_external(e.obj)) if converted else e.full(rk.kind, rk.api_version),
                    e.meta,
                )
                for e in selected
            )
            body = tables.table(
                rk.columns,
                rows,
                include_object=include,
                group_version=target.group_version,
                list_meta=list_meta,
            )
        elif target.as_kind == "PartialObjectMetadataList":
            head = (
                b'{"kind":"PartialObjectMetadata","apiVersion":'
                + dumps(target.group_version)
                + b',"metadata":'
            )
            items = b",".join(head + e.meta + b"}" for e in selected)
            body = (
                b'{"kind":"PartialObjectMetadataList","apiVersion":'
                + dumps(target.group_version)
                + b',"metadata":'
                + dumps(list_meta)
                + b',"items":['
                + items
                + b"]}"
            )
        else:
            if converted:
                items = b",".join(
                    dumps(
                        {
                            k: v
                            for k, v in rk.to_external(e.obj).items()
                            if k not in ("kind", "apiVersion")
                        }
                    )
                    for e in selected
                )
            else:
                items = b",".join(e.item for e in selected)
            body = (
                b'{"kind":'
                + dumps(rk.kind + "List")
                + b',"apiVersion":'
                + dumps(rk.api_version)
                + b',"metadata":'
                + dumps(list_meta)
                + b',"items":['
                + items
                + b"]}"
            )
        return self._encode(body, target)

    # ---- write options

    @staticmethod
    def _write_options(
        req: _Request, options_kind: str, body_options: dict[str, Any] | None = None
    ) -> tuple[bool, str, str]:
        """(dryRun, field manager, fieldValidation with the server's default Warn), or 422."""
        dry = list(req.multi.get("dryRun", []))
        if body_options and isinstance(body_options.get("dryRun"), list):
            dry.extend(body_options["dryRun"])
        errs: list[FieldError] = []
        if any(v != "All" for v in dry):
            errs.append(not_supported_field("dryRun", dry, ["All"]))
        validation = req.query.get("fieldValidation", "")
        if validation not in ("", "Ignore", "Warn", "Strict"):
            errs.append(
                not_supported_field("fieldValidation", validation, ["", "Ignore", "Strict", "Warn"])
            )
        manager = req.query.get("fieldManager", "")
        if len(manager) > 128:
            errs.append(
                FieldError(
                    "FieldValueTooLong", "fieldManager", manager, "must have at most 128 bytes"
                )
            )
        if errs:
            raise invalid(options_kind, "", errs, group="meta.k8s.io")
        return bool(dry), managedfields.manager_name(manager, req.user_agent), validation or "Warn"

    def _decode_body(self, req: _Request, rk: ResourceKind) -> dict[str, Any]:
        ctype = (
            (req.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()
        )
        if ctype in ("application/yaml", "application/x-yaml"):
            try:
                obj = yaml.safe_load(req.body)
            except yaml.YAMLError as exc:
                raise bad_request(f"error converting YAML to JSON: {exc}") from None
        elif ctype in ("application/json", "*/*", ""):
            try:
                obj = decode_json(req.body)
            except ValueError as exc:
                summary = req.body[:30].decode("utf-8", "replace") + (
                    " ..." if len(req.body) > 30 else ""
                )
                raise bad_request(
                    f"the object provided is unrecognized (must be of type {rk.kind}): "
                    "couldn't get "
                    f"version/kind; json parse error: {exc} ({summary or '<empty>'})"
                ) from None
        else:
            raise unsupported_media_type(
                ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"]
            )
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if kind not in (None, "", rk.kind):
            version = (obj.get("apiVersion") or "").split("/")[-1]
            raise bad_request(
                f'{kind} in version "{version}" cannot be handled as a {rk.kind}: '
                f'no kind "{kind}" is registered'
            )
        err = decode_error(obj, rk.kind)
        if err:
            raise bad_request(
                f'{rk.kind} in version "{rk.version}" cannot be handled as a {rk.kind}: {err}'
            )
        return obj

    def _validate(
        self,
        rk: ResourceKind,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        *,
        strict_events: bool,
    ) -> None:
        meta = obj.get("metadata") or {}
        errs = validate_object_meta(meta, namespaced=rk.namespaced, dns_name=not rk.namespaced)
        if old is not None:
            errs += validate_update_meta(meta, old.get("metadata") or {})
        if rk.storage == "events":
            errs += validate_event(obj, strict_v1=strict_events and old is None)
        if rk.schema is not None:
            errs += crd.validate(obj, rk.schema)
        if errs:
            raise invalid(rk.kind, meta.get("name") or "", errs, rk.group)

    # ---- create

    def _create(self, req: _Request, rk: ResourceKind, namespace: str) -> _Response:
        target = negotiate(req.headers.get("Accept"))
        dry, manager, validation = self._write_options(req, "CreateOptions")
        external = self._decode_body(req, rk)
        entry, obj, warnings = self._create_object(
            rk, namespace, external, dry=dry, manager=manager, validation=validation
        )
        response = self._render(rk, entry, obj, target, 201, stored=entry is not None)
        return _warn(response, warnings)

    def _create_object(
        self,
        rk: ResourceKind,
        namespace: str,
        external: dict[str, Any],
        *,
        dry: bool,
        manager: str,
        validation: str,
    ) -> tuple[Entry | None, dict[str, Any], list[str]]:
        """The registry's create (POST, and add_nodepool): (stored entry, object, warnings)."""
        obj = rk.defaults(
            rk.to_internal({**external, "kind": rk.kind, "apiVersion": rk.api_version})
        )
        warnings: list[str] = []
        if rk.schema is not None:
            obj, warnings = self._coerce(rk, obj, validation)
            obj.pop("status", None)  # PrepareForCreate: the status subresource owns it
        meta = dict(obj.get("metadata") or {})
        if rk.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(
                secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5)
            )
        for key in (
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        now = rfc3339(self.now())
        meta["creationTimestamp"] = now
        if rk.schema is not None:
            meta["generation"] = 1
        obj = {**obj, "metadata": meta}
        self._validate(rk, obj, None, strict_events=rk.group == "events.k8s.io")
        if rk.schema is not None:
            obj = karpenter.round_trip(obj, self.karpenter_conversion)
        changed, _ = managedfields.object_diff({}, obj, status=False)
        meta["managedFields"] = managedfields.record_update(
            None, manager, changed, {}, now, api_version=rk.api_version
        )
        name = meta["name"]
        with self.store.lock:
            if self.store.get(rk.storage, self._key(rk, namespace, name)) is not None:
                raise already_exists(rk.resource, name, rk.group)
            if dry:
                entry = None
            else:
                entry = self.store.put(rk.storage, self._key(rk, namespace, name), obj)
                obj = entry.obj
        if entry is not None and rk.storage == "events":
            with self._log_lock:
                self._created_events.append(rk.to_external(obj) if rk.group else obj)
        return entry, obj, warnings

    @staticmethod
    def _coerce(
        rk: ResourceKind, obj: dict[str, Any], validation: str, *, patched: bool = False
    ) -> tuple[dict[str, Any], list[str]]:
        """A custom resource through its CRD's codec: pruned, then defaulted (crd.py); unknown
        fields are warnings (Warn), refused (Strict: 400, or 422 for a patch) or dropped."""
        assert rk.schema is not None
        out = json.loads(dumps(obj))
        unknown = [f'unknown field "{path}"' for path in crd.prune(out, rk.schema)]
        crd.apply_defaults(out, rk.schema)
        if unknown and validation == "Strict":
            why = "strict decoding error: " + ", ".join(unknown)
            if patched:
                raise invalid("", "", [invalid_field("patch", dumps(obj).decode(), why)])
            raise bad_request(
                f'{rk.kind} in version "{rk.version}" cannot be handled as a {rk.kind}: {why}'
            )
        return out, unknown if validation == "Warn" else []

    # ---- update / patch

    def _update(
        self, req: _Request, rk: ResourceKind, namespace: str, name: str, sub: str
    ) -> _Response:
        target = negotiate(req.headers.get("Accept"))
        dry, manager, validation = self._write_options(req, "UpdateOptions")
        external = self._decode_body(req, rk)
        warnings: list[str] = []
        if rk.schema is not None:  # the body goes through the CRD's codec as it is decoded
            external, warnings = self._coerce(rk, external, validation)
        body_name = (external.get("metadata") or {}).get("name") or ""
        if body_name != name:
            raise bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        body_rv = (external.get("metadata") or {}).get("resourceVersion") or ""
        key = self._key(rk, namespace, name)
        with self.store.lock:
            current = self.store.get(rk.storage, key)
            if current is None and not (rk.create_on_update and not sub):
                raise not_found(rk.resource, name, rk.group)
        if current is None:
            return self._create(req, rk, namespace)
        if rk.schema is not None and not body_rv:
            # Custom resources do not AllowUnconditionalUpdate (registry/generic store.go Update).
            why = "must be specified for an update"
            field_err = invalid_field("metadata.resourceVersion", GoLiteral("0x0"), why)
            raise invalid(rk.resource, name, [field_err], rk.group)

        def mutate(_: dict[str, Any]) -> dict[str, Any]:
            return {**external, "kind": rk.kind, "apiVersion": rk.api_version}

        response = self._write(
            rk,
            key,
            name,
            mutate,
            target,
            dry=dry,
            manager=manager,
            validation=validation,
            sub=sub,
            precondition=body_rv,
            patch_errors=False,
        )
        return _warn(response, warnings)

    def _patch(
        self, req: _Request, rk: ResourceKind, namespace: str, name: str, sub: str
    ) -> _Response:
        ctype = (req.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        served = [JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH]
        if ctype not in served:
            raise unsupported_media_type(PATCH_TYPES)
        if ctype == APPLY_PATCH:  # server-side apply is not modelled: refused for every resource
            also = [] if rk.schema else [STRATEGIC_PATCH]
            raise unsupported_media_type([JSON_PATCH, MERGE_PATCH, *also])
        if ctype == STRATEGIC_PATCH and rk.schema is not None:
            # Custom resources take no strategic merge patch (customresource_handler.go).
            raise unsupported_media_type([JSON_PATCH, MERGE_PATCH, APPLY_PATCH])
        target = negotiate(req.headers.get("Accept"))
        dry, manager, validation = self._write_options(req, "PatchOptions")
        body = req.body

        def mutate(current_external: dict[str, Any]) -> Any:
            if ctype == JSON_PATCH:
                return apply_json_patch(current_external, body)
            if ctype == MERGE_PATCH:
                return apply_merge_patch(current_external, body)
            return apply_strategic_patch(current_external, body, rk.list_strategies)

        key = self._key(rk, namespace, name)
        return self._write(
            rk,
            key,
            name,
            mutate,
            target,
            dry=dry,
            manager=manager,
            validation=validation,
            sub=sub,
            precondition="",
            patch_errors=True,
            smp=ctype == STRATEGIC_PATCH,
        )

    def _write(
        self,
        rk: ResourceKind,
        key: str,
        name: str,
        mutate: Callable[[dict[str, Any]], Any],
        target: _Target,
        *,
        dry: bool,
        manager: str,
        validation: str,
        sub: str,
        precondition: str,
        patch_errors: bool,
        smp: bool = False,
    ) -> _Response:
        """Read-modify-write under the store lock, with the real server's checks in order."""
        warnings: list[str] = []
        with self.store.lock:
            current = self.store.get(rk.storage, key)
            if current is None:
                raise not_found(rk.resource, name, rk.group)
            old = current.obj
            external = rk.to_external(old) if rk.to_external is not _identity else old
            new_external = mutate(external)
            if patch_errors:
                err = decode_error(new_external, rk.kind)
                if err:
                    shown = _go_map(new_external) if smp else dumps(new_external).decode()
                    raise invalid("", "", [invalid_field("patch", shown, err)])
            if not isinstance(new_external, dict):
                raise invalid(
                    "",
                    "",
                    [
                        invalid_field(
                            "patch",
                            dumps(new_external).decode(),
                            f"json: cannot unmarshal array into Go value of type v1.{rk.kind}",
                        )
                    ],
                )
            if rk.schema is not None and patch_errors:
                new_external, warnings = self._coerce(rk, new_external, validation, patched=True)
            new = rk.defaults(
                rk.to_internal({**new_external, "kind": rk.kind, "apiVersion": rk.api_version})
            )
            meta = dict(new.get("metadata") or {})
            new_name = meta.get("name") or ""
            if new_name != name:
                raise bad_request(
                    f"the name of the object ({new_name}) does not match the name on the URL "
                    f"({name})"
                )
            if rk.namespaced:
                meta["namespace"] = old["metadata"].get("namespace")
            want_rv = precondition or (meta.get("resourceVersion") if patch_errors else "")
            if want_rv and want_rv != old["metadata"].get("resourceVersion"):
                raise conflict(rk.resource, name, group=rk.group)
            old_meta = old["metadata"]
            for sys_key in (
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "managedFields",
            ):
                if sys_key in old_meta:
                    meta[sys_key] = old_meta[sys_key]
                else:
                    meta.pop(sys_key, None)
            if not meta.get("uid"):
                meta["uid"] = old_meta.get("uid")
            meta["resourceVersion"] = old_meta.get("resourceVersion")
            new = {**new, "metadata": meta}
            if rk.status_subresource:
                new = _replace_part(new, old, "spec" if sub == "status" else "status")
            if rk.schema is not None:
                new, meta = _custom_update(new, old, sub)
            self._validate(rk, new, old, strict_events=False)
            if rk.schema is not None and sub != "status":
                new = karpenter.round_trip(new, self.karpenter_conversion)
                meta = new["metadata"]
            changed, removed = managedfields.object_diff(old, new, status=sub == "status")
            if not changed and not removed and _same_object(old, new):
                return self._render(rk, current, old, target)
            meta["managedFields"] = managedfields.record_update(
                old_meta.get("managedFields"),
                manager,
                changed,
                removed,
                rfc3339(self.now()),
                subresource=sub,
                api_version=rk.api_version,
            )
            if dry:
                return _warn(self._render(rk, None, new, target), warnings)
            entry = self.store.put(rk.storage, key, new)
            if meta.get("deletionTimestamp") and not meta.get("finalizers"):
                self.store.delete(rk.storage, key)
        return _warn(self._render(rk, entry, entry.obj, target, stored=True), warnings)

    # ---- delete

    def _delete(self, req: _Request, rk: ResourceKind, namespace: str, name: str) -> _Response:
        target = negotiate(req.headers.get("Accept"))
        options: dict[str, Any] = {}
        if req.body.strip():
            try:
                options = decode_json(req.body)
            except ValueError as exc:
                raise bad_request(str(exc)) from None
            if not isinstance(options, dict):
                raise bad_request(
                    "json: cannot unmarshal array into Go value of type v1.DeleteOptions"
                )
        dry, _, _ = self._write_options(req, "DeleteOptions", options)
        key = self._key(rk, namespace, name)
        with self.store.lock:
            current = self.store.get(rk.storage, key)
            if current is None:
                raise not_found(rk.resource, name, rk.group)
            meta = current.obj["metadata"]
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != meta.get("uid"):
                raise conflict(
                    rk.resource,
                    name,
                    f"Precondition failed: UID in precondition: {pre['uid']}, "
                    f"UID in object meta: {meta.get('uid')}",
                    rk.group,
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
                raise conflict(
                    rk.resource,
                    name,
                    f"the ResourceVersion in the precondition ({pre['resourceVersion']}) does not "
                    "match the "
                    f"ResourceVersion in record ({meta.get('resourceVersion')}). "
                    "The object might have been modified",
                    rk.group,
                )
            if meta.get("finalizers"):
                if meta.get("deletionTimestamp"):
                    return self._render(rk, current, current.obj, target)
                new_meta = {
                    **meta,
                    "deletionTimestamp": rfc3339(self.now()),
                    "deletionGracePeriodSeconds": 0,
                }
                new = {**current.obj, "metadata": new_meta}
                if dry:
                    return self._render(rk, None, new, target)
                entry = self.store.put(rk.storage, key, new)
                return self._render(rk, entry, entry.obj, target, stored=True)
            if not dry:
                self.store.delete(rk.storage, key)
        details: dict[str, Any] = {"name": name}
        if rk.group:
            details["group"] = rk.group
        details["kind"] = rk.resource
        details["uid"] = meta.get("uid")
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }
        return _Response(200, dumps(status) + b"\n", stored=not dry)

    # ---- other resources

    def _namespace_obj(self, ns: str) -> dict[str, Any]:
        return {
            "kind": "Namespace",
            "apiVersion": "v1",
            "metadata": {
                "name": ns,
                "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"namespace.{ns}")),
                "resourceVersion": str(10 + discovery.NAMESPACES.index(ns)),
                "creationTimestamp": self._namespaces_created,
                "labels": {"kubernetes.io/metadata.name": ns},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }

    def _namespaces(self, req: _Request, name: str) -> _Response:
        assert req.identity is not None
        verb = {"GET": "get" if name else "list", "HEAD": "get" if name else "list"}.get(
            req.method, req.method.lower()
        )
        auth.authorize(req.identity, verb, "namespaces", name=name)
        if verb not in ("get", "list"):
            raise method_not_allowed("namespaces", verb)
        target = negotiate(req.headers.get("Accept"))
        if name:
            if name not in discovery.NAMESPACES:
                raise not_found("namespaces", name)
            obj = self._namespace_obj(name)
            if target.as_kind == "PartialObjectMetadata":
                body = (
                    b'{"kind":"PartialObjectMetadata","apiVersion":'
                    + dumps(target.group_version)
                    + b',"metadata":'
                    + dumps(obj["metadata"])
                    + b"}"
                )
            elif target.as_kind == "Table":
                body = tables.table(
                    tables.NAMESPACE_COLUMNS,
                    [(tables.namespace_cells(obj, self.now()), dumps(obj), dumps(obj["metadata"]))],
                    include_object="Metadata",
                    group_version=target.group_version,
                    list_meta={"resourceVersion": obj["metadata"]["resourceVersion"]},
                )
            elif target.as_kind:
                raise not_acceptable(
                    "you requested PartialObjectMetadataList, but the requested object is not a "
                    "list (*core.Namespace)"
                )
            else:
                body = dumps(obj)
            return self._encode(body, target)

        def label(field_label: str) -> str | None:
            return field_label if field_label in NAMESPACE_FIELD_LABELS else None

        label_reqs, field_terms, _ = self._list_options(req, label)
        objs = [self._namespace_obj(ns) for ns in discovery.NAMESPACES]
        objs = [
            o
            for o in objs
            if labels_match(label_reqs, o["metadata"]["labels"])
            and fields_match(
                field_terms, {"metadata.name": o["metadata"]["name"], "status.phase": "Active"}
            )
        ]
        return self._static_list(
            target,
            "NamespaceList",
            objs=objs,
            columns=tables.NAMESPACE_COLUMNS,
            cells=tables.namespace_cells,
            req=req,
        )

    def _static_list(
        self,
        target: _Target,
        list_kind: str,
        *,
        objs: list[dict[str, Any]],
        columns: list[dict[str, Any]],
        cells: Callable[[dict[str, Any], datetime], list[Any]],
        req: _Request,
    ) -> _Response:
        list_meta = {"resourceVersion": str(self.store.rv)}
        if target.as_kind == "Table":
            include = tables.check_include_object(req.query.get("includeObject"))
            now = self.now()
            rows = [(cells(o, now), dumps(o), dumps(o["metadata"])) for o in objs]
            body = tables.table(
                columns,
                rows,
                include_object=include,
                group_version=target.group_version,
                list_meta=list_meta,
            )
        elif target.as_kind == "PartialObjectMetadataList":
            head = (
                b'{"kind":"PartialObjectMetadata","apiVersion":'
                + dumps(target.group_version)
                + b',"metadata":'
            )
            body = (
                b'{"kind":"PartialObjectMetadataList","apiVersion":'
                + dumps(target.group_version)
                + b',"metadata":'
                + dumps(list_meta)
                + b',"items":['
                + b",".join(head + dumps(o["metadata"]) + b"}" for o in objs)
                + b"]}"
            )
        elif target.as_kind:
            raise not_acceptable(
                "you requested PartialObjectMetadata, but the requested object is a list "
                f"(*core.{list_kind})"
            )
        else:
            items = b",".join(
                dumps({k: v for k, v in o.items() if k not in ("kind", "apiVersion")}) for o in objs
            )
            body = (
                b'{"kind":'
                + dumps(list_kind)
                + b',"apiVersion":"v1","metadata":'
                + dumps(list_meta)
                + b',"items":['
                + items
                + b"]}"
            )
        return self._encode(body, target)

    def _pods(self, req: _Request, namespace: str, name: str = "") -> _Response:
        assert req.identity is not None
        verb = "get" if name else "list"
        if req.method not in _READ_METHODS:
            verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[
                req.method
            ]
        auth.authorize(req.identity, verb, "pods", name=name, namespace=namespace)
        if name or verb != "list":
            raise not_found("pods", name)
        target = negotiate(req.headers.get("Accept"))

        def label(field_label: str) -> str | None:
            return field_label if field_label in POD_FIELD_LABELS else None

        self._list_options(req, label)
        return self._static_list(
            target,
            "PodList",
            objs=[],
            columns=tables.DEFAULT_COLUMNS,
            cells=tables.default_cells,
            req=req,
        )

    def _lease(self, req: _Request, namespace: str, name: str) -> _Response:
        assert req.identity is not None
        auth.authorize(
            req.identity,
            "get" if req.method in _READ_METHODS else req.method.lower(),
            "leases",
            name=name,
            group="coordination.k8s.io",
            namespace=namespace,
        )
        if req.method not in _READ_METHODS:
            raise method_not_allowed("leases", req.method.lower(), "coordination.k8s.io")
        target = negotiate(req.headers.get("Accept"))
        entry = self.store.get("nodes", name) if namespace == "kube-node-lease" else None
        if entry is None:
            raise not_found("leases", name, "coordination.k8s.io")
        meta = entry.obj["metadata"]
        lease = {
            "kind": "Lease",
            "apiVersion": "coordination.k8s.io/v1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, meta.get("uid", name))),
                "resourceVersion": str(entry.rv),
                "creationTimestamp": meta.get("creationTimestamp"),
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": name, "uid": meta.get("uid")}
                ],
            },
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": 40,
                "renewTime": self.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            },
        }
        if target.as_kind:
            body = (
                b'{"kind":"PartialObjectMetadata","apiVersion":'
                + dumps(target.group_version)
                + b',"metadata":'
                + dumps(lease["metadata"])
                + b"}"
            )
        else:
            body = dumps(lease)
        return self._encode(body, target)


# --------------------------------------------------------------------------- helpers


def _replace_part(new: dict[str, Any], old: dict[str, Any], part: str) -> dict[str, Any]:
    """Strategy PrepareForUpdate: keep `part` (status or spec) as stored."""
    out = {k: v for k, v in new.items() if k != part}
    if part in old:
        out[part] = old[part]
    return out


def _custom_update(
    new: dict[str, Any], old: dict[str, Any], sub: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """customResourceStrategy.PrepareForUpdate (apiextensions-apiserver strategy.go, v0.32.9):
    any change outside metadata bumps the generation; a status write changes status only
    (customResourceStatusStrategy keeps the stored object, metadata included). Returns the
    object and its (private) metadata."""
    if sub == "status":
        meta = dict(old["metadata"])
        return {**_replace_part(old, new, "status"), "metadata": meta}, meta
    meta = new["metadata"]
    if _replace_part(new, old, "metadata") != old:
        meta["generation"] = int(old["metadata"].get("generation") or 0) + 1
    return new, meta


def _warn(response: _Response, warnings: list[str]) -> _Response:
    """`Warning: 299 - "..."` headers, as the handlers add them (apimachinery NewWarningHeader)."""
    if warnings:
        quoted = (w.replace("\\", "\\\\").replace('"', '\\"') for w in warnings)
        response.headers["Warning"] = ", ".join(f'299 - "{w}"' for w in quoted)
    return response


def _same_object(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Equal apart from resourceVersion and managedFields (a no-op write)."""

    def strip(obj: dict[str, Any]) -> dict[str, Any]:
        meta = {
            k: v
            for k, v in (obj.get("metadata") or {}).items()
            if k not in ("resourceVersion", "managedFields")
        }
        return {**obj, "metadata": meta}

    return strip(old) == strip(new)


def _go_map(value: Any) -> str:
    """Go's %+v of a decoded JSON map (what SMP errors show)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_map(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_map(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --------------------------------------------------------------------------- standalone


def _spread_created(
    now: datetime, n: int, young: int, rng: random.Random
) -> Callable[[int], datetime]:
    """Creation times over the past days, with `young` nodes from the last few minutes."""
    old = sorted(now - timedelta(days=rng.uniform(0.5, 21)) for _ in range(max(n - young, 0)))
    recent = sorted(now - timedelta(seconds=rng.uniform(20, 240)) for _ in range(min(young, n)))
    times = old + recent

    def created(i: int) -> datetime:
        return times[i]

    return created


def main(argv: list[str] | None = None) -> int:
    """Serve a cluster of generated nodes until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.kubeapi.apiserver",
        description="Run the Kubernetes API test server with generated EKS/Karpenter nodes.",
    )
    parser.add_argument(
        "--nodes", type=int, default=50, help="how many nodes to create (default 50)"
    )
    parser.add_argument(
        "--kubeconfig-out", default="kc.yaml", help="where to write an admin kubeconfig"
    )
    parser.add_argument(
        "--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)"
    )
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument(
        "--eks", dest="eks", action="store_true", default=True, help="EKS-shaped nodes (default)"
    )
    shape.add_argument("--minimal", dest="eks", action="store_false", help="small nodes")
    parser.add_argument(
        "--write-latency", type=float, default=0.0, help="seconds slept per stored write"
    )
    parser.add_argument(
        "--young", type=int, default=3, help="nodes created in the last few minutes"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed for generated nodes")
    parser.add_argument(
        "--annotation-bytes",
        type=int,
        default=0,
        help="give every node an annotation of this many bytes (served cheaply, see nodegen)",
    )
    parser.add_argument(
        "--debug-endpoints",
        action="store_true",
        help="serve the test-only /debug/ control endpoints (benchmarks; see debugapi.py)",
    )
    args = parser.parse_args(argv)

    api = ApiServer(write_latency=args.write_latency, port=args.port, seed=args.seed)
    api.debug_endpoints = args.debug_endpoints
    rng = random.Random(args.seed)
    big: dict[str, str] | None = None
    if args.annotation_bytes:
        placeholder, blob = big_annotation(args.annotation_bytes)
        api.expand = (placeholder.encode(), blob)
        big = {BIG_ANNOTATION: placeholder}
    api.add_nodes(
        args.nodes,
        eks=args.eks,
        created=_spread_created(api.now(), args.nodes, args.young, rng),
        annotations=big,
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    # Handlers first: whoever reads the line below may signal us at once.
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    api.start()
    kubeconfig = api.write_kubeconfig(args.kubeconfig_out)
    print(
        f"listening on {api.url} kubeconfig={kubeconfig} "
        f"(try: kubectl --kubeconfig {kubeconfig} get nodes)",
        flush=True,
    )
    while not stop.wait(0.5):
        pass
    api.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
