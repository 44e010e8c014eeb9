"""The HTTP client: a few Node and Event calls, which knows HTTP and Kubernetes, not holds.

Where and as whom comes from `reconcile.cluster.access` as a `Connection`; requests go through a
urllib3 pool built here and stay small and cheap: metadata-only Accept headers, gzip,
responses always drained (keep-alive survives), no typed models, and no retries hidden below
our own policy (reconcile.cluster.retry). Credentials are asked for once a second, not per request;
a 401 asks for renewed ones once and, if they differ, sends the request again once.

Signatures take and give plain values (a node name, a patch body, metadata dicts), and
every error status that a caller acts on has its own type, classified once here, so that
callers write `except Conflict`. Nothing here imports the official `kubernetes` package:
importing it alone costs about 0.3 s (docs/performance.md).
"""

from __future__ import annotations

import gc
import json
import math
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, NamedTuple
from urllib.parse import quote, urlencode

import urllib3

ACCEPT_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
MERGE_PATCH = "application/merge-patch+json"
USER_AGENT = "node-holder"
#: Ask for credentials at most this often: a token file is read again at each ask (the
#: kubelet rotates it), and a legacy auth-provider's refresh re-applies the whole kubeconfig.
AUTH_REFRESH_SECONDS = 1.0
#: After a stop (SIGTERM), requests in flight may take this long to finish; then they are cut.
STOP_GRACE = 1.5
WATCH_INTERVAL = 0.05  # how often the watchdog looks at the requests in flight
EVENT_NAMESPACE = "default"  # where kubelet puts node events; `kubectl describe node` finds them
#: What a 403 asks to grant: the shipped RBAC (cronjob/base/rbac.yaml).
NODES_GRANT = 'the ClusterRole "node-holder" in cronjob/base/rbac.yaml'
EVENTS_GRANT = (
    f'the Role "node-holder-events" in namespace "{EVENT_NAMESPACE}" (cronjob/base/rbac.yaml)'
)


# --- errors ----------------------------------------------------------------------


class ApiError(Exception):
    """The API server answered with an error status; subclasses name the ones callers act on."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        retry_after: float | None = None,
        verb: str = "",
        what: str = "",
        grant: str = NODES_GRANT,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.grant = grant
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.verb = verb
        self.what = what

    def explain(self) -> str:
        """One line for people."""
        return (
            f"{self.status} {self.reason} while trying to {self.verb} {self.what}: {self.message}"
        )


class Unauthorized(ApiError):
    """401: the server did not accept our credentials."""

    def explain(self) -> str:
        return (
            f"401 Unauthorized while trying to {self.verb} {self.what}: the API server did not "
            "accept our credentials; check the kubeconfig user or the service account token"
        )


class Forbidden(ApiError):
    """403: our identity may not do this."""

    def explain(self) -> str:
        return (
            f"403 Forbidden: {self.message}; grant {self.grant} "
            f"(it needs '{self.verb}' on {self.what})"
        )


class NotFound(ApiError):
    """404: the object is gone."""


class Conflict(ApiError):
    """409: the object changed since it was read (resourceVersion precondition failed)."""


class Gone(ApiError):
    """410: a list's continue token expired."""


class TooManyRequests(ApiError):
    """429: throttled; retry after the server's Retry-After."""


class ServerError(ApiError):
    """5xx: a server-side hiccup; retry."""


_ERRORS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    429: TooManyRequests,
}


def error_for_status(status: int, reason: str, message: str, **kw: Any) -> ApiError:
    """The one place a status becomes an error type."""
    kind = _ERRORS.get(status) or (ServerError if status >= 500 else ApiError)
    return kind(status, reason, message, **kw)


class TransportError(Exception):
    """No usable HTTP answer: refused, reset, timed out, TLS failure. Always worth a retry."""


class UnreadableAnswer(TransportError):
    """A 2xx whose body is not what was asked for: not JSON, cut short, not a list page.

    Proxies between us and the API server produce these (an HTML page, a truncated gzip
    body, `{}`); they are faults of the way there, retried like a reset connection.
    """


class Unconfirmed(Exception):
    """A write was sent but its answer could not be read: it may or may not have landed.

    Never retried blindly: the caller reads the object again and decides again, as after
    a Conflict.
    """


# --- redaction -------------------------------------------------------------------

_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@\s]*@")
_SECRET_QUERY = re.compile(
    r"(?i)(?P<key>[?&;](?:access_token|id_token|token|password|passwd|pwd|secret|api_?key|key"
    r"|auth|authorization|sig|signature|x-amz-[a-z-]+|credential)=)[^&#;\s'\"]*"
)


def redact(text: str) -> str:
    """`text` with URL credentials hidden: userinfo, and token-like query values.

    Applied to every URL and transport message the tool prints or logs, so that a
    kubeconfig's `https://admin:secret@host` never reaches a log pipeline.
    """
    text = _USERINFO.sub(r"\g<scheme>REDACTED@", text)
    return _SECRET_QUERY.sub(r"\g<key>REDACTED", text)


# --- values ----------------------------------------------------------------------


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def date(self) -> datetime | None:
        """The Date header: the API server's clock, aware UTC."""
        return http_date(self.headers.get("Date"))


@dataclass(frozen=True)
class ListPage:
    """One page of the node list: each item's metadata, as the server sent it."""

    items: list[dict[str, Any]]
    continue_token: str | None
    date: datetime | None  # the response's Date header: the API server's clock
    size: int = 0  # bytes of the (decoded) body: what the next page's size is judged by


# --- the client ------------------------------------------------------------------

#: The auth headers: called with no argument at most once per AUTH_REFRESH_SECONDS, and with
#: `renew=True` after a 401 (an exec plugin then runs again; a fixed token stays as it is).
Credentials = Callable[..., dict[str, str]]


def anonymous(renew: bool = False) -> dict[str, str]:
    """No auth headers."""
    return {}


@dataclass(frozen=True)
class Connection:
    """Where the API server is and how to reach it: all the client needs (built by access.py)."""

    server: str  # http(s)://host[:port][/base-path], no trailing slash
    #: The auth headers; asked for at most once per AUTH_REFRESH_SECONDS (tokens rotate).
    credentials: Credentials = field(default=anonymous, compare=False)
    ca_file: str | None = None  # neither this nor ca_data: the system's CAs
    ca_data: str | None = None  # PEM
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None  # resolved by access.py: None when NO_PROXY names the server


def connection_pool(connection: Connection, size: int) -> urllib3.PoolManager:
    """A pool keeping up to `size` connections to the server; no retries below ours."""
    options: dict[str, Any] = {
        "maxsize": max(size, 1),
        "retries": False,
        "cert_reqs": ssl.CERT_REQUIRED if connection.verify else ssl.CERT_NONE,
        "ca_certs": connection.ca_file,
        "ca_cert_data": connection.ca_data,
        "cert_file": connection.cert_file,
        "key_file": connection.key_file,
    }
    if connection.tls_server_name:
        options["server_hostname"] = connection.tls_server_name
    if not connection.proxy:
        return urllib3.PoolManager(**options)
    if connection.proxy.lower().startswith("socks"):
        from urllib3.contrib.socks import SOCKSProxyManager  # noqa: PLC0415 (needs PySocks)

        return SOCKSProxyManager(connection.proxy, **options)
    return urllib3.ProxyManager(connection.proxy, **options)


class Action(NamedTuple):
    """What a request does, in words for error lines (`patch node "x"`), and who grants it."""

    verb: str = ""
    what: str = ""
    grant: str = NODES_GRANT


class Client:
    """A few Node and Event calls over one connection pool."""

    def __init__(
        self,
        connection: Connection,
        request_timeout: float = 10.0,
        pool_size: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._credentials_of = connection.credentials
        self._pool = connection_pool(connection, pool_size)
        self._host = connection.server.rstrip("/")
        self._shown = redact(self._host)  # what messages name: no credentials
        hosted = self._pool.connection_from_url(self._host)  # the pool every request goes through
        # Without a proxy, go straight to the host's connection pool (same TLS settings, same
        # connections): no URL parsing and pool lookup under the manager's lock per request.
        self._direct: Any = None if connection.proxy else hosted
        self._base_path = urllib3.util.parse_url(self._host).path or ""
        self.request_timeout = request_timeout
        self.requests = 0  # how many requests this run sent (the summary reports it)
        self._lock = threading.Lock()
        self._clock = clock  # paces credential refreshes
        self._auth: dict[str, str] = {}
        self._auth_until = float("-inf")
        self._watchdog = _Watchdog()
        hosted._get_conn = self._watchdog.attaching(hosted._get_conn)

    def stop_on(self, stop: threading.Event) -> None:
        """Once `stop` is set, requests in flight get STOP_GRACE seconds, then are cut."""
        self._watchdog.stop = stop

    def _credentials(self, refused: dict[str, str] | None = None) -> dict[str, str]:
        """Auth headers, asked for at most once per AUTH_REFRESH_SECONDS; after a 401 on
        `refused`, renewed once (not again when another worker already renewed them)."""
        with self._lock:  # one refresh at a time: the other workers need its token anyway
            now = self._clock()
            if refused is not None and refused == self._auth:
                self._auth = dict(self._credentials_of(renew=True))
                self._auth_until = now + AUTH_REFRESH_SECONDS
            elif now >= self._auth_until:
                self._auth = dict(self._credentials_of())
                self._auth_until = now + AUTH_REFRESH_SECONDS
            return self._auth

    def _seconds(self, timeout: float | None) -> float:
        """How long one request may take: the caller's cut of the deadline, or the default."""
        return self.request_timeout if timeout is None else max(timeout, 0.05)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        action: Action | None = None,
    ) -> Response:
        """One HTTP request; the body is always read so the connection is reused.

        A 401 is answered once with renewed credentials (an exec plugin's token that expired
        or was revoked), when they differ from the refused ones.
        """
        verb, what, grant = action or Action()
        target = path + (f"?{urlencode(query)}" if query else "")
        payload = None if body is None else json.dumps(body, separators=(",", ":"))
        sent = {"User-Agent": USER_AGENT, "Accept-Encoding": "gzip", **(headers or {})}
        seconds = self._seconds(timeout)
        end = time.monotonic() + seconds  # both tries together
        auth = self._credentials()
        response = self._send(method, target, payload, {**sent, **auth}, seconds, action)
        if response.status == 401 and (renewed := self._credentials(auth)) != auth:
            left = max(end - time.monotonic(), 0.05)
            response = self._send(method, target, payload, {**sent, **renewed}, left, action)
        if not 200 <= response.status < 300:
            raise _api_error(response, verb, what, grant)
        return response

    def _send(
        self,
        method: str,
        target: str,
        payload: str | None,
        headers: dict[str, str],
        seconds: float,
        action: Action | None,
    ) -> Response:
        """Send once within `seconds` and read the whole answer, whatever its status."""
        verb, what, _ = action or Action()
        with self._lock:
            self.requests += 1
        options: dict[str, Any] = {
            "body": payload,
            "headers": headers,
            "timeout": urllib3.Timeout(connect=min(seconds, 5.0), read=seconds),
            "preload_content": False,
            "retries": False,
            "redirect": False,
        }
        with self._watchdog.bound(seconds) as call:  # the whole answer, not each read
            try:
                if self._direct is not None:
                    raw = self._direct.urlopen(method, self._base_path + target, **options)
                else:
                    raw = self._pool.request(method, self._host + target, **options)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise TransportError(self._why(call, exc)) from None
            try:
                data = raw.data  # decodes gzip; drains the socket
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if 200 <= raw.status < 300:
                    raise UnreadableAnswer(
                        f"the answer to {verb} {what} was cut short or could not be decoded "
                        f"({self._why(call, exc)})"
                    ) from None
                data = b""  # an error status says enough without its body
            finally:
                raw.release_conn()
        return Response(raw.status, raw.headers, data)  # case-insensitive, not copied

    def _why(self, call: _Call, exc: Exception) -> str:
        """One line on a failed request: the watchdog's reason if it cut it, else urllib3's."""
        if call.cut:
            return call.cut.format(host=self._shown, s=call.seconds)
        if isinstance(exc, urllib3.exceptions.HTTPError):
            return redact(_transport_message(exc, self._shown))
        return redact(f"{type(exc).__name__}: {exc}")

    # --- nodes ---

    def list_nodes(
        self,
        *,
        limit: int,
        continue_token: str | None = None,
        timeout: float | None = None,
    ) -> ListPage:
        """One page of the metadata-only node list."""
        query = {"limit": str(limit)}
        if continue_token:
            query["continue"] = continue_token
        response = self.request(
            "GET",
            "/api/v1/nodes",
            query=query,
            headers={"Accept": ACCEPT_METADATA_LIST},
            timeout=timeout,
            action=Action("list", 'resource "nodes"'),
        )
        size, date = len(response.body), response.date
        with gc_paused():
            page = _json(response, "list nodes")
            del response  # the raw body goes as soon as it is parsed
            items, token = _list_page(page, first=not continue_token)
            del page
        return ListPage(items, token, date, size)

    def get_node(self, name: str, *, timeout: float | None = None) -> dict[str, Any]:
        """One node's metadata; NotFound if it is gone."""
        response = self.request(
            "GET",
            f"/api/v1/nodes/{quote(name, safe='')}",
            headers={"Accept": ACCEPT_METADATA},
            timeout=timeout,
            action=Action("get", f'node "{name}"'),
        )
        return _metadata(_json(response, f'get node "{name}"'), f'get node "{name}"')

    def patch_node(
        self, name: str, body: Mapping[str, Any], *, timeout: float | None = None
    ) -> str:
        """A merge patch; returns the node's new resourceVersion.

        A resourceVersion in the body makes it a precondition: Conflict if the node changed.
        """
        what = f'node "{name}"'
        try:
            response = self.request(
                "PATCH",
                f"/api/v1/nodes/{quote(name, safe='')}",
                body=body,
                headers={"Content-Type": MERGE_PATCH, "Accept": ACCEPT_METADATA},
                timeout=timeout,
                action=Action("patch", what),
            )
            meta = _metadata(_json(response, f"patch {what}"), f"patch {what}")
        except UnreadableAnswer as exc:
            raise Unconfirmed(f"{exc}; unknown whether the patch landed") from None
        return str(meta.get("resourceVersion", ""))

    def create_event(self, event: Mapping[str, Any], *, timeout: float | None = None) -> None:
        """Create a core/v1 Event in its metadata.namespace (see `node_event`)."""
        namespace = quote(str(event["metadata"]["namespace"]), safe="")
        self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/events",
            body=event,
            headers={"Content-Type": "application/json", "Accept": ACCEPT_METADATA},
            timeout=timeout,
            action=Action("create", f'resource "events" in namespace "{namespace}"', EVENTS_GRANT),
        )


def node_event(
    *, node: str, node_uid: str, reason: str, message: str, at: datetime, instance: str
) -> dict[str, Any]:
    """A Normal core/v1 Event about a node, in the namespace where node events live."""
    stamp = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            # Unique without a clock: two runs in the same second must not collide.
            "generateName": f"{node}.",
            "namespace": EVENT_NAMESPACE,
        },
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid},
        "reason": reason,
        "message": message,
        "type": "Normal",
        "source": {"component": USER_AGENT},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "reportingComponent": USER_AGENT,
        "reportingInstance": instance,
    }


class _Call:
    """One request in flight: when its time is up, and its connection once it has one."""

    __slots__ = ("conn", "cut", "end", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.conn: Any = None
        self.cut = ""  # why the watchdog shut its socket, if it did


class _Watchdog:
    """Shuts the socket of a request that outlives its time, whatever urllib3 is waiting for.

    urllib3's read timeout bounds each socket read, not a response: a body (or a header)
    that trickles in a byte at a time never trips it. Each request here has a wall-clock end
    (its cut of the run's deadline); past it, or STOP_GRACE seconds after a stop, its socket
    is shut down and the read in progress fails at once. One thread for every request in
    flight; it ends when there has been nothing to watch for a second.
    """

    def __init__(self) -> None:
        self.stop: threading.Event | None = None
        self._calls: set[_Call] = set()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._running = False
        self._stopped_at: float | None = None

    @contextmanager
    def bound(self, seconds: float) -> Iterator[_Call]:
        call = _Call(seconds)
        self._local.call = call
        with self._lock:
            self._calls.add(call)
            if not self._running:
                self._running = True
                threading.Thread(target=self._watch, name="watchdog", daemon=True).start()
        try:
            yield call
        finally:
            self._local.call = None
            with self._lock:
                self._calls.discard(call)

    def attaching(self, get_conn: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a pool's `_get_conn`: the connection a request takes is the one to watch."""

        def attach(*args: Any, **kwargs: Any) -> Any:
            conn = get_conn(*args, **kwargs)
            call = getattr(self._local, "call", None)
            if call is not None:
                call.conn = conn
            return conn

        return attach

    def _watch(self) -> None:
        idle_since = time.monotonic()
        while True:
            time.sleep(WATCH_INTERVAL)
            now = time.monotonic()
            if self.stop is not None and self.stop.is_set() and self._stopped_at is None:
                self._stopped_at = now
            stopping = self._stopped_at is not None and now >= self._stopped_at + STOP_GRACE
            with self._lock:
                calls = list(self._calls)
                if calls:
                    idle_since = now
                elif now - idle_since > 1.0:
                    self._running = False
                    return
            for call in calls:
                if call.cut:
                    continue
                if now >= call.end:
                    _shut(call, "{host} did not answer in time (whole answer within {s:.1f}s)")
                elif stopping:
                    _shut(call, "request to {host} abandoned: stopping")


def _shut(call: _Call, why: str) -> None:
    sock = getattr(call.conn, "sock", None)
    if sock is None:
        return  # not connected yet (the connect timeout bounds that); look again next time
    call.cut = why
    with suppress(OSError):
        # The plain socket's shutdown, even under TLS: the reading thread owns the TLS state.
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


# --- reading answers -------------------------------------------------------------


def _json(response: Response, doing: str) -> Any:
    try:
        return json.loads(response.body)
    except ValueError:
        raise UnreadableAnswer(
            f"the answer to {doing} is not JSON ({_glimpse(response.body)})"
        ) from None


def _list_page(page: Any, *, first: bool) -> tuple[list[dict[str, Any]], str | None]:
    """A list page's item metadata and continue token; anything else is UnreadableAnswer.

    A page is a `...List` with an `items` array. kube-apiserver writes `"items": null` for
    an empty metadata-only list, so that reads as no nodes, but only as the whole list.
    """
    kind = page.get("kind") if isinstance(page, dict) else None
    meta = page.get("metadata") if isinstance(page, dict) else None
    items = page.get("items", ...) if isinstance(page, dict) else ...
    token = meta.get("continue") if isinstance(meta, dict) else None
    if items is None and first and not token:
        items = []
    if not (
        isinstance(kind, str)
        and kind.endswith("List")
        and isinstance(items, list)
        and all(isinstance(i, dict) and isinstance(i.get("metadata"), dict) for i in items)
        and (token is None or isinstance(token, str))
    ):
        raise UnreadableAnswer(
            f"the answer to list nodes is not a list page ({_glimpse(json.dumps(page)[:200])})"
        )
    return [i["metadata"] for i in items], token or None


def _metadata(obj: Any, doing: str) -> dict[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        raise UnreadableAnswer(
            f"the answer to {doing} has no object metadata ({_glimpse(json.dumps(obj)[:200])})"
        )
    return meta


def _glimpse(body: bytes | str, size: int = 60) -> str:
    """The start of an unexpected answer, on one line, for the error message."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = " ".join(text.split())
    if not text:
        return "an empty body"
    return repr(text[:size] + ("..." if len(text) > size else ""))


# --- helpers -------------------------------------------------------------------


@contextmanager
def gc_paused() -> Iterator[None]:
    """Parsing a page makes many small containers; the cyclic GC only slows that down."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def http_date(raw: str | None) -> datetime | None:
    """An HTTP date as aware UTC, or None if absent or unreadable.

    `parsedate_to_datetime` gives a naive datetime for the zone `-0000` (RFC 5322: UTC,
    local zone unknown); naive must never be read in the local zone, so it is UTC here.
    """
    if not raw:
        return None
    try:
        moment = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def retry_after(raw: str | None) -> float | None:
    """Retry-After in seconds (delta-seconds or an HTTP date); None means "not given".

    Only a finite, non-negative number counts: `nan`, `inf` or `-1` are ignored, so the
    caller falls back to its normal backoff instead of not pausing at all.
    """
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        moment = http_date(raw)
        if moment is None:
            return None
        return max((moment - datetime.now(UTC)).total_seconds(), 0.0)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _api_error(response: Response, verb: str, what: str, grant: str) -> ApiError:
    reason, message = "", ""
    try:
        status = json.loads(response.body)
        if isinstance(status, dict):
            reason = str(status.get("reason") or "")
            message = str(status.get("message") or "")
    except ValueError:
        message = response.body[:200].decode("utf-8", "replace").strip()
    return error_for_status(
        response.status,
        reason or _REASONS.get(response.status, "Error"),
        (message or "(no message)")[:1000],  # a line in our report, however long the answer
        retry_after=retry_after(response.headers.get("Retry-After")),
        verb=verb,
        what=what,
        grant=grant,
    )


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _transport_message(exc: Exception, host: str) -> str:
    cause = getattr(exc, "reason", None) or exc
    errors = urllib3.exceptions
    if isinstance(exc, errors.ReadTimeoutError):
        return f"{host} did not answer in time"
    # NewConnectionError subclasses ConnectTimeoutError in urllib3 2: test it first, or a
    # refused connection reads "timed out".
    if isinstance(exc, errors.NewConnectionError | errors.MaxRetryError):
        return f"cannot connect to {host}: {_connect_failure(str(cause))}"
    forms = (
        (errors.ConnectTimeoutError, "cannot connect to {host}: timed out"),
        (errors.ProtocolError, "connection to {host} dropped: {cause}"),
        (errors.SSLError, "TLS error talking to {host}: {cause}"),
    )
    for kind, form in forms:
        if isinstance(exc, kind):
            return form.format(host=host, cause=cause)
    return f"{type(exc).__name__} talking to {host}: {cause}"


def _connect_failure(text: str) -> str:
    if "Connection refused" in text:
        return "connection refused"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "host name not found"
    return text
